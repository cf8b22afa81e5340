"""gpubridge.weighted_avg_hook: DDP on 3 simulated ranks (nvidia:2 + amd:1)
with per-rank batches of 5, 11 and 16 samples (as balance_batch proposes
from synthetic step times), the last step 3, 7 and 2, ends with the
parameters of one process training on each step's global batch (float64:
rtol 1e-12; float32: rtol 1e-5), bit-identical on every rank; also with a
fixed total weight; the equal-weight avg hook must miss; bad weights are
refused where set, and all weights 0 fails every rank alike (weighted_job.py)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gbtest  # noqa: E402

NEEDS = ("gbAllReduce", "gbBroadcast", "gbAllGather", "gbRedOpCreatePreMulSum")
VENDORS = ("nvidia", "nvidia", "amd")


def main():
    gbtest.require_torch()
    gbtest.require_library(*NEEDS)
    import weighted_job
    weighted_job.run_and_check(__file__, VENDORS, timeout=240)


if __name__ == "__main__":
    if gbtest.is_worker():
        gbtest.setup_path()
        import torch
        import weighted_job
        weighted_job.worker(torch.device("cpu"))
    else:
        main()
