"""Starts one command per rank with torchrun's variables, for baselines that
are not gpubridge (gloo through torch); returns rank 0's JSON lines."""
import json
import os
import socket
import subprocess


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(cmd, nranks, extra_env=None, timeout=600):
    port = free_port()
    procs = []
    for r in range(nranks):
        env = dict(os.environ)
        env.update({"RANK": str(r), "WORLD_SIZE": str(nranks), "LOCAL_RANK": str(r), "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": str(port)})
        env.update(extra_env or {})
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=timeout))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for r, (p, (out, err)) in enumerate(zip(procs, outs)):
        if p.returncode != 0:
            raise SystemExit("rank %d of %s exited %d:\n%s%s" % (r, " ".join(cmd), p.returncode, out, err))
    return [json.loads(l) for l in outs[0][0].splitlines() if l.startswith("{")]


def rows_to_series(rows):
    for r in rows:
        if r.get("wrong"):
            raise SystemExit("baseline reported %d wrong elements at %d B" % (r["wrong"], r["size_bytes"]))
    return {r["size_bytes"]: {k: r[k] for k in ("time_us", "algbw_gbps", "busbw_gbps")} for r in rows}
