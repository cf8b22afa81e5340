#!/usr/bin/env python3
"""Step 3 of the cluster kit: the link between the NVIDIA node and the AMD
node, for the predicted bridge time of the tables (docs/PERFORMANCE.md's
model for islands on separate machines needs a hop's latency and the
link's bandwidth). One heterogeneous srun step: a server on the AMD node,
a client on the NVIDIA node that times 8-byte round trips (alpha_hop: half
the median) and one TCP stream of --mib MiB (bytes / time to the server's
acknowledgement). Without Slurm both ends run here over loopback (said in
the results). Plain TCP, Python standard library; under a hard time limit.
Writes OUT/link.log and the step's part of OUT/results.json.

    scripts/cluster/link.py --out DIR [--mib 256] [--timeout 120]
    (link.py --serve PORT | --connect HOST:PORT MIB: one end, as the step starts them)
"""
import json
import os
import socket
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def serve(port, deadline_s):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", port))
    s.listen(1)
    s.settimeout(deadline_s)
    c, _ = s.accept()
    c.settimeout(deadline_s)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    f = c.makefile("rb")
    rounds = int(f.readline())
    for _ in range(rounds):
        c.sendall(f.read(8))
    total = int(f.readline())
    got = 0
    while got < total:
        k = len(f.read1(1 << 20))
        if not k:
            break
        got += k
    c.sendall(b"%d\n" % got)
    c.close()
    print("server: %d round trips, %d bytes received" % (rounds, got), flush=True)


def connect(addr, mib, deadline_s):
    host, port = addr.rsplit(":", 1)
    t_end = time.monotonic() + deadline_s
    while True:  # the server may not listen yet: retry until the deadline
        try:
            c = socket.create_connection((host, int(port)), timeout=5)
            break
        except OSError:
            if time.monotonic() > t_end:
                raise
            time.sleep(0.05)
    c.settimeout(deadline_s)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rounds = 200
    c.sendall(b"%d\n" % rounds)
    rtt = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        c.sendall(b"12345678")
        got = b""
        while len(got) < 8:
            got += c.recv(8 - len(got))
        rtt.append(time.perf_counter() - t0)
    total = mib << 20
    c.sendall(b"%d\n" % total)
    block = b"\0" * (4 << 20)
    t0 = time.perf_counter()
    sent = 0
    while sent < total:
        n = min(len(block), total - sent)
        c.sendall(block[:n])
        sent += n
    ack = c.makefile("rb").readline()
    secs = time.perf_counter() - t0
    out = {"alpha_hop_us": statistics.median(rtt) / 2 * 1e6, "bandwidth_gbps": total / secs / 1e9,
           "bytes": total, "seconds": secs, "acknowledged": int(ack or 0)}
    print("link " + json.dumps(out, sort_keys=True), flush=True)


def main():
    if "--serve" in sys.argv:
        serve(int(sys.argv[sys.argv.index("--serve") + 1]), 60)
        return
    if "--connect" in sys.argv:
        i = sys.argv.index("--connect")
        connect(sys.argv[i + 1], int(sys.argv[i + 2]), 60)
        return
    import kit

    def extra(p):
        p.add_argument("--mib", type=int, default=256, help="MiB the stream sends (256)")
        p.add_argument("--python", default="python3", help="the nodes' Python (python3)")
        p.add_argument("--timeout", type=int, default=120, help="the step's hard time limit, seconds (120)")
    a = kit.options(__doc__, extra)
    results = kit.load(a)
    kit.describe(a, results)
    me = os.path.abspath(__file__)
    port = a.port + 1
    if a.launcher == "slurm":
        n = kit.nodes_cached(a)
        line = ["srun", "-l", "-t", str(max(1, (a.timeout + 59) // 60))]
        line += kit.component(a, "nvidia", 1) + [a.python, me, "--connect", "%s:%d" % (n["amd"], port), str(a.mib)]
        line += [":"] + kit.component(a, "amd", 1) + [a.python, me, "--serve", str(port)]
        where = "%s -> %s" % (n["nvidia"], n["amd"])
    else:
        line = ["sh", "-c", '"$0" "$1" --serve "$2" & "$0" "$1" --connect "127.0.0.1:$2" "$3"; wait',
                sys.executable, me, str(port), str(a.mib)]
        where = "loopback on this machine (no Slurm: not the link between two nodes)"
    log = os.path.join(a.out, "link.log")
    p = kit.run(line, a.timeout, log=log)
    got = None
    for raw in p.stdout.splitlines():
        if "link {" in raw:
            got = json.loads(raw.split("link ", 1)[1])
    ok = p.returncode == 0 and got is not None
    results["steps"]["link"] = dict(got or {}, ok=ok, exit=p.returncode, where=where, log="link.log",
                                    seconds=round(p.seconds, 2), command=" ".join(line))
    kit.save(a, results)
    if not ok:
        kit.die("link: no measurement (exit %d); see %s" % (p.returncode, log))
    print("link %s: alpha_hop %.1f us, %.3f GB/s (TCP, one stream, %d MiB)"
          % (where, got["alpha_hop_us"], got["bandwidth_gbps"], a.mib))


if __name__ == "__main__":
    main()
