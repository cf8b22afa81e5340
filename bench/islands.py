"""The two islands of a 2-rank bench job on one machine, and how each rank
reaches gpubridge: the shared piece of bench/train_step.py and
bench/entry_points.py.

Layouts (LAYOUTS):
  simulated  CPU ranks, one simulated NVIDIA and one simulated AMD rank
             (GPUBRIDGE_VENDORS=nvidia:1,amd:1); no GPU needed.
  split      one NVIDIA GPU shared by both ranks, relabelled into two islands
             of one rank (GPUBRIDGE_SPLIT_TEST=half), as bench/gpu_bridge.sh.
  amd        rank 0 NVIDIA, rank 1 an emulated AMD rank: HIP, RCCL and hiprtc
             from the test rig BUILD/tests/emulated_amd served by CUDA, NCCL
             and NVRTC (tests/gpu/emulated_amd_rank1.sh wraps each rank).

job(build, layout) gives the environment every rank gets and the command
prefix each rank runs under; torch ranks use the checkout's python/gpubridge
with BUILD/lib/libgpubridge.so. run_perf runs gpubridge-perf over a layout."""
import ctypes
import glob
import os
import subprocess
import sys
import tempfile

from perfjob import read_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYOUTS = ("simulated", "split", "amd")
WRAP_AMD = os.path.join(ROOT, "tests", "gpu", "emulated_amd_rank1.sh")


def nvrtc():
    """The NVRTC the rig's libhiprtc.so loads: GB_RIG_NVRTC_LIBRARY, the
    toolkit's, or the one pip's CUDA wheels bring; None when none loads."""
    given = os.environ.get("GB_RIG_NVRTC_LIBRARY")
    found = [given] if given else []
    found += ["/usr/local/cuda/lib64/libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so"]
    try:
        import nvidia
        for d in nvidia.__path__:
            for sub in ("cu1*", "cuda_nvrtc"):
                found += sorted(glob.glob(os.path.join(d, sub, "lib", "libnvrtc.so.1*")), reverse=True)
    except ImportError:
        pass
    found += ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"]
    for name in found:
        try:
            ctypes.CDLL(name)
            return name
        except OSError:
            continue
    return None


def has_cuda():
    """Whether torch (when installed) sees a GPU: the layouts' default, split on a GPU, else simulated."""
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


def job(build, layout, threads=None):
    """(env, prefix): the environment of every rank (os.environ plus the
    layout's variables) and the command prefix each rank runs under."""
    if layout not in LAYOUTS:
        raise SystemExit("unknown layout %r (one of %s)" % (layout, ", ".join(LAYOUTS)))
    build = os.path.abspath(build)
    lib = os.path.join(build, "lib", "libgpubridge.so")
    if not os.path.exists(lib):
        raise SystemExit("%s is missing: build first (make build, or --build DIR)" % lib)
    pkg = os.path.join(ROOT, "python")
    env = dict(os.environ, GPUBRIDGE_LIBRARY=lib, NCCL_NVLS_ENABLE="0",  # never create NVLink multicast objects
               PYTHONPATH=os.pathsep.join([pkg] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    prefix = []
    if layout == "simulated":
        env["GPUBRIDGE_VENDORS"] = "nvidia:1,amd:1"
    elif layout == "split":
        env["GPUBRIDGE_SPLIT_TEST"] = "half"
    else:
        rig = os.path.join(build, "tests", "emulated_amd")
        for name in ("libamdhip64.so", "librccl.so.1", "libhiprtc.so"):
            if not os.path.exists(os.path.join(rig, name)):
                raise SystemExit("%s is missing: the emulated-AMD rig is built with the tests (cmake --build %s "
                                 "--target gb_emulated_amdhip64 gb_emulated_rccl gb_emulated_hiprtc)"
                                 % (os.path.join(rig, name), build))
        env.update(GB_RIG=rig, GPUBRIDGE_HIPRTC_LIBRARY=os.path.join(rig, "libhiprtc.so"))
        rtc = nvrtc()
        if rtc is None:
            print("islands: no NVRTC found for the rig's hiprtc (GB_RIG_NVRTC_LIBRARY names one)", flush=True)
        else:
            env["GB_RIG_NVRTC_LIBRARY"] = rtc
            if os.sep in rtc:  # NVRTC finds its builtins library by name, beside it
                env["LD_LIBRARY_PATH"] = os.pathsep.join(
                    [os.path.dirname(os.path.abspath(rtc))] + [p for p in [env.get("LD_LIBRARY_PATH")] if p])
        prefix = [WRAP_AMD]
    return env, prefix


def drop_in(build):
    """The drop-in NCCL ABI next to BUILD's library (gpubridge.drop_in_path())."""
    lib = os.path.join(os.path.abspath(build), "lib", "libgpubridge.so")
    env = dict(os.environ, GPUBRIDGE_LIBRARY=lib)
    code = "import sys; sys.path.insert(0, %r); import gpubridge; print(gpubridge.drop_in_path())" % (
        os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("gpubridge.drop_in_path() failed: %s" % (p.stderr.strip().splitlines() or ["?"])[-1])
    return p.stdout.strip()


def run_perf(build, layout, args, timeout=600):
    """gpubridge-perf ARGS over the layout's two ranks (gpubridge-run -n 2);
    returns (meta, rows) of its -J file."""
    env, prefix = job(build, layout)
    bindir = os.path.join(os.path.abspath(build), "bin")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "perf.json")
        cmd = [os.path.join(bindir, "gpubridge-run"), "-n", "2"]
        if layout == "simulated":
            cmd += ["--vendors", env.pop("GPUBRIDGE_VENDORS")]
        cmd += ["--"] + prefix + [os.path.join(bindir, "gpubridge-perf")] + args + ["-J", path]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise SystemExit("gpubridge-perf failed (exit %d): %s\n%s%s" % (p.returncode, " ".join(cmd), p.stdout,
                                                                           p.stderr))
        return read_json(path)
