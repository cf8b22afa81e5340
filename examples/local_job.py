"""Starts the ranks of a small job on this machine, as the examples here do:
one spawned process per rank, each given its rank and a free port for
init_process_group's tcp:// rendezvous. From a source checkout the package
in ../python is used without installing it."""
import multiprocessing as mp
import os
import socket
import sys
import time


def use_checkout_package():
    pkg = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")
    if os.path.isdir(os.path.join(pkg, "gpubridge")):
        sys.path.insert(0, pkg)
        os.environ["PYTHONPATH"] = pkg + os.pathsep + os.environ.get("PYTHONPATH", "")


def run_ranks(rank_main, nranks, args, timeout):
    """Runs rank_main(rank, port, *args) in nranks processes; returns 0 when
    every one exits 0 within timeout seconds, else 1 (the late ones are killed)."""
    use_checkout_package()
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
    if late or failed:
        print("ranks %s did not finish in %.0f s; ranks %s failed" % (late, timeout, failed))
        return 1
    return 0
