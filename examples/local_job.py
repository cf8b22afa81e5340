"""Starts the ranks of a small job on this machine, as the examples here do:
one spawned process per rank, each given its rank and a free port for
init_process_group's tcp:// rendezvous. The installed package is used when
there is one (pip install .); otherwise, from a source checkout, the package
in ../python with the library of ../build (make)."""
import importlib.util
import multiprocessing as mp
import os
import socket
import sys
import time

CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def use_package():
    """Puts the checkout's package on the path when none is installed; says
    what to do when there is neither an installed package nor a built one."""
    if importlib.util.find_spec("gpubridge") is not None:
        return
    pkg = os.path.join(CHECKOUT, "python")
    if not os.path.isdir(os.path.join(pkg, "gpubridge")):
        sys.exit("gpubridge is not installed: pip install . (from the checkout), or pip install gpubridge")
    built = os.environ.get("GPUBRIDGE_LIBRARY") or os.path.join(CHECKOUT, "build", "lib", "libgpubridge.so")
    if not os.path.exists(built):
        sys.exit("gpubridge is not installed and the checkout is not built (%s is missing): "
                 "pip install . to install it, or make to build it here" % built)
    sys.path.insert(0, pkg)
    os.environ["PYTHONPATH"] = pkg + os.pathsep + os.environ.get("PYTHONPATH", "")


def run_ranks(rank_main, nranks, args, timeout):
    """Runs rank_main(rank, port, *args) in nranks processes; returns 0 when
    every one exits 0 within timeout seconds, else 1 (the late ones are killed)."""
    use_package()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")  # a GPU context would not survive fork
    procs = [ctx.Process(target=rank_main, args=(r, port) + tuple(args)) for r in range(nranks)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    late = [r for r, p in enumerate(procs) if p.is_alive()]
    for r in late:
        procs[r].kill()
        procs[r].join(10)
    failed = [r for r, p in enumerate(procs) if p.exitcode != 0]
    if late:
        print("ranks %s did not finish in %.0f s (killed)" % (late, timeout))
    failed = [r for r in failed if r not in late]
    if failed:
        print("ranks %s failed (exit codes %s); their messages are above" %
              (failed, [procs[r].exitcode for r in failed]))
    if late or failed:
        return 1
    return 0
