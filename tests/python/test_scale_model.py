"""bench/scale_model.py against hand-computed cases (no library, no jobs):
the ring, the exchange and the tree among leaders, which of them gpubridge
runs for a chunk, the pipelined all-reduce with and without rails, the share
of a step, the least-squares fit of the simulated machine's constants, and
the CLI's last line."""
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import scale_model as m  # noqa: E402

MIB = 1 << 20


def close(a, b, rel=1e-9):
    assert math.isclose(a, b, rel_tol=rel, abs_tol=1e-15), (a, b)


def main():
    # 4 leaders, 1 MB, 10 us a hop, 1 GB/s: ring 6 hops + 1.5 ms; exchange 1 hop + 3 ms;
    # tree 2*2 hops + 2 ms.
    close(m.model_ring(4, 1e6, 10e-6, 1e9), 6 * 10e-6 + 1.5e-3)
    close(m.model_exchange(4, 1e6, 10e-6, 1e9), 10e-6 + 3e-3)
    close(m.model_tree(4, 1e6, 10e-6, 1e9), 4 * 10e-6 + 2e-3)
    close(m.model_tree(5, 1e6, 10e-6, 1e9), 6 * 10e-6 + 2e-3)  # ceil(log2 5) = 3
    close(m.model_ring(1, 1e6, 10e-6, 1e9), 0.0)
    close(m.model_ring(2, 1e6, 0.0, 1e9), 1e-3)

    # What gpubridge runs among leaders (src/algo/allreduce.c, stage/slots_setup.c).
    assert m.leader_algorithm(1, MIB) == "none"
    assert m.leader_algorithm(2, 64 * MIB) == "exchange"
    assert m.leader_algorithm(16, 32 << 10) == "exchange"        # under GPUBRIDGE_RING_MIN_BYTES
    assert m.leader_algorithm(4, MIB, hosts_differ=True) == "exchange"   # remote slots, <= 4
    assert m.leader_algorithm(4, MIB, hosts_differ=False) == "ring"
    assert m.leader_algorithm(16, MIB) == "ring"
    assert m.leader_algorithm(16, MIB, topology="tree") == "tree"

    # One chunk, 2 islands of 1 rank: no island stages, two copies and the exchange.
    r = m.model_allreduce(1e6, 2, 2, link_Bps=1e9, alpha=10e-6, pcie_Bps=1e10, handover=0.0, chunk=1 << 30)
    close(r["total_s"], 2 * 1e-4 + 10e-6 + 1e-3)
    close(r["bridge_s"], r["total_s"])
    assert r["chunks"] == 1 and r["algorithm"] == "exchange"

    # 4 chunks of 1 MiB through 5 stages, leaders (ring of 8) the slowest:
    # fill = sum of stages, then 3 more of the leaders' stage.
    S, C = 4 * MIB, MIB
    kw = dict(link_Bps=1e9, alpha=5e-6, island_Bps=1e10, island_alpha=1e-5, pcie_Bps=2e10, handover=2e-5, chunk=C)
    r = m.model_allreduce(S, 64, 8, **kw)
    isl = 1e-5 + C / 1e10
    copy = 2e-5 + C / 2e10
    net = 14 * 5e-6 + 2 * 7 / 8 * C / 1e9
    close(r["total_s"], 2 * isl + 2 * copy + net + 3 * net)
    close(r["island_s"], 2 * isl + 3 * isl)
    close(r["bridge_s"], r["total_s"] - r["island_s"])
    assert r["bottleneck"] == "leaders" and r["algorithm"] == "ring"

    # 4 rails: each carries a quarter of the chunk; rails capped by the island size.
    r4 = m.model_allreduce(S, 64, 8, rails=4, **kw)
    net4 = 14 * 5e-6 + 2 * 7 / 8 * (C / 4) / 1e9
    copy4 = 2e-5 + C / 4 / 2e10
    close(r4["total_s"], 2 * isl + 2 * copy4 + net4 + 3 * net4)
    assert m.model_allreduce(S, 16, 8, rails=4, **kw)["rails"] == 2

    # GPU chunk rule (plan/sizes.h): 8 MiB under 64 MiB, else 16 MiB.
    assert m.chunk_bytes(32 * MIB) == 8 * MIB and m.chunk_bytes(1 << 30) == 16 * MIB

    close(m.share_of_step(0.03, 0.3), 0.1)
    close(m.share_of_step(0.03, 0.3, overlap=0.5), 0.05)

    # The fit recovers known constants from exact data.
    # Features by hand: N 8, L 2 (islands of 4), 128 KiB from the ring's threshold.
    assert m.sim_features(8, 2, 131072) == [1.0, 32.0, 32.0, 131072 * 6, 131072 * 2.0]
    assert m.sim_features(8, 4, 4096)[2] == 0.0
    true = [100e-6, 5e-6, 20e-6, 1e-9, 3e-9]
    rows = [(N, L, S, m.sim_predict(true, N, L, S)) for N, L in m.SMALL_JOBS
            for S in m.CHECK_SIZES]
    for a, b in zip(m.fit(rows), true):
        close(a, b, rel=1e-6)

    assert m.vendors(6, 3) == "nvidia:2,amd:2,intel:2" and m.vendors(5, 2) == "nvidia:3,amd:2"
    assert m.size_arg("1G") == 1 << 30 and m.size_arg("64M") == 64 * MIB and m.size_arg("100") == 100

    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "scale_model.py"), "--ranks", "2048",
                          "--islands", "16", "--rails", "4", "--link-gbps", "200", "--step-ms", "300",
                          "--bytes", "1G"], capture_output=True, text=True, timeout=30, check=True).stdout
    last = out.strip().splitlines()[-1].split()
    assert last[0] == "bridge_ms" and last[4] == "bridge_share", out
    assert 0 < float(last[5]) < 1, out
    print("test_scale_model: ok")


if __name__ == "__main__":
    main()
