"""FSDP2 (fully_shard) on the gpubridge backend, 4 simulated ranks
(nvidia:2 + amd:2): all_gather_into_tensor and reduce_scatter_tensor with AVG
(the default) and PREMUL_SUM (a gradient divide factor). After several steps
the ranks' forward outputs are bit-identical, and the parameters (rebuilt
from every rank's shard) equal the same training on gloo and a one-process
reference within float tolerance."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gbtest  # noqa: E402

STEPS = 4
NEEDS = ("gbAllReduce", "gbAllGather", "gbReduceScatter", "gbRedOpCreatePreMulSum")
# name -> (backend, gradient divide factor as a multiple of the world size or None)
RUNS = {"gpubridge avg": ("gpubridge", None), "gpubridge premul": ("gpubridge", 2),
        "gloo avg": ("gloo", None), "gloo premul": ("gloo", 2)}


def worker():
    import datetime

    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    from torch.distributed.fsdp import FSDPModule, fully_shard

    import gbmodels as M
    import gpubridge
    from gbtest import check

    dist.init_process_group("gpubridge", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    meshes = {"gpubridge": init_device_mesh("cpu", (world,)),
              "gloo": DeviceMesh.from_group(dist.new_group(backend="gloo"), "cpu")}
    check(isinstance(meshes["gpubridge"].get_group(), gpubridge.ProcessGroupGpubridge),
          "the default mesh's group is not a gpubridge process group")

    ops = []
    orig = gpubridge.ProcessGroupGpubridge.reduce_scatter_single

    def spy(self, output, input, opts=None):
        ops.append(str(opts.reduceOp.op if hasattr(opts.reduceOp, "op") else opts.reduceOp))
        return orig(self, output, input, opts)
    gpubridge.ProcessGroupGpubridge.reduce_scatter_single = spy

    out = {}
    x0 = torch.randn(3, M.IN, generator=torch.Generator().manual_seed(5))
    for name, (backend, factor) in RUNS.items():
        model = M.make_model(0)  # FSDP shards the local model: the same start everywhere
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=meshes[backend])
        fully_shard(model, mesh=meshes[backend])
        for m in model.modules():  # these settings are per FSDP module
            if isinstance(m, FSDPModule):
                if backend == "gloo":
                    m.set_force_sum_reduction_for_comms(True)  # gloo has no AVG
                if factor:
                    m.set_gradient_divide_factor(float(factor * world))
        opt = torch.optim.SGD(model.parameters(), lr=M.LR)
        del ops[:]
        for s in range(STEPS):
            M.train_step(model, opt, *M.batch(s, rank))
        if backend == "gpubridge":
            want = "RedOpType.PREMUL_SUM" if factor else "RedOpType.AVG"
            check(ops and all(o == want for o in ops), "%s: reduce-scatter ops %s, expected %s" % (name, ops, want))
        with torch.no_grad():
            y = model(x0)
        shards = {k: p.to_local().detach().clone() for k, p in model.named_parameters()}
        out[name] = {"shards": shards, "y": y.detach().clone()}
    torch.save(out, os.path.join(gbtest.worker_outdir(), "rank%d.pt" % rank))
    dist.destroy_process_group()


def main():
    torch = gbtest.require_torch()
    gbtest.require_library(*NEEDS)
    import gbmodels as M
    world = len(gbtest.VENDORS)
    outdir, _ = gbtest.run_ranks(os.path.abspath(__file__), timeout=300)
    states = [torch.load(os.path.join(outdir, "rank%d.pt" % r)) for r in range(world)]
    gbtest.cleanup(outdir)
    full = {}
    problems = []
    for name in RUNS:
        shards = [s[name]["shards"] for s in states]
        full[name] = {k: torch.cat([sh[k] for sh in shards]) for k in shards[0]}
        problems.append(M.identical(name + " forward output", [{"y": s[name]["y"]} for s in states]))
    for name, (backend, factor) in RUNS.items():
        ref = M.reference(STEPS, world, grad_scale=1.0 / factor if factor else 1.0)
        problems.append(M.compare(name + " vs one-process reference", full[name], ref))
    problems.append(M.compare("gpubridge avg vs gloo", full["gpubridge avg"], full["gloo avg"]))
    problems.append(M.compare("gpubridge premul vs gloo", full["gpubridge premul"], full["gloo premul"]))
    if M.compare("avg vs premul", full["gpubridge avg"], full["gpubridge premul"], rtol=0, atol=1e-4) is None:
        problems.append("avg and premul runs agree: the divide factor had no effect, the check is void")
    problems = [p for p in problems if p]
    if problems:
        gbtest.fail("; ".join(problems))
    print("1 passed, 0 failed")


if __name__ == "__main__":
    if gbtest.is_worker():
        gbtest.setup_path()
        worker()
    else:
        main()
