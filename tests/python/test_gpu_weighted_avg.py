"""gpubridge.weighted_avg_hook on real GPUs (skips without a CUDA GPU): the
job of test_weighted_avg.py (weighted_job.py) on 2 ranks, one GPU each
(with one GPU, both on it as two split-test islands), batches of 5 and 11
samples: parameters bit-identical on both ranks and equal to one process
training on the global batch (float64 rtol 1e-12, float32 rtol 1e-5)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gbtest  # noqa: E402

NEEDS = ("gbAllReduce", "gbBroadcast", "gbAllGather", "gbRedOpCreatePreMulSum")


def main():
    torch = gbtest.require_torch()
    if not torch.cuda.is_available():
        gbtest.skip("needs a CUDA GPU (torch sees none)")
    gbtest.require_library(*NEEDS)
    import weighted_job
    # One GPU: NCCL refuses two ranks of one island on it, so each rank is its
    # own island (split-test) and the bridge joins them.
    extra = {"GPUBRIDGE_SPLIT_TEST": "half"} if torch.cuda.device_count() < 2 else None
    weighted_job.run_and_check(__file__, (None, None), timeout=300, extra_env=extra)


if __name__ == "__main__":
    if gbtest.is_worker():
        gbtest.setup_path()
        import torch
        gpu = int(os.environ["RANK"]) % torch.cuda.device_count()
        torch.cuda.set_device(gpu)
        import weighted_job
        weighted_job.worker(torch.device("cuda", gpu))
    else:
        main()
