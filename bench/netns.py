"""Two emulated hosts on one machine: two network namespaces joined by a veth
pair, each end shaped by tc (tbf for the rate, netem under it for a delay).
Needs root and iproute2. Every step raises SystemExit with the command and
its error, so a machine that cannot do this says why."""
import os
import secrets
import subprocess
import sys
import tempfile

from perfjob import read_json


def sh(cmd, check=True):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise SystemExit("bench-link: `%s` failed: %s" % (" ".join(cmd), (p.stderr or p.stdout).strip()))
    return p


class Link:
    """Namespaces <tag>a and <tag>b, veth ends <tag>a0 / <tag>b0, 10.213.0.1 and .2."""

    def __init__(self, tag):
        self.ns = [tag + "a", tag + "b"]
        self.ifs = [tag + "a0", tag + "b0"]
        self.addr = ["10.213.0.1", "10.213.0.2"]

    def up(self):
        for ns in self.ns:
            p = sh(["ip", "netns", "add", ns], check=False)
            if p.returncode != 0:
                raise SystemExit("bench-link: cannot create network namespaces here (`ip netns add %s`: %s); "
                                 "it needs root with CAP_SYS_ADMIN and CAP_NET_ADMIN, outside a restricted "
                                 "container" % (ns, p.stderr.strip()))
        sh(["ip", "link", "add", self.ifs[0], "type", "veth", "peer", "name", self.ifs[1]])
        for k in range(2):
            sh(["ip", "link", "set", self.ifs[k], "netns", self.ns[k]])
            sh(["ip", "-n", self.ns[k], "addr", "add", self.addr[k] + "/24", "dev", self.ifs[k]])
            sh(["ip", "-n", self.ns[k], "link", "set", self.ifs[k], "up"])
            sh(["ip", "-n", self.ns[k], "link", "set", "lo", "up"])

    def down(self):
        for ns in self.ns:  # removing a namespace removes its veth end, and so the pair
            sh(["ip", "netns", "del", ns], check=False)

    def netem_available(self):
        """Whether this kernel has netem (a delay); some ship without it."""
        k = 0
        p = sh(["tc", "-n", self.ns[k], "qdisc", "replace", "dev", self.ifs[k], "root", "netem", "delay", "1ms"],
               check=False)
        sh(["tc", "-n", self.ns[k], "qdisc", "del", "dev", self.ifs[k], "root"], check=False)
        return p.returncode == 0, p.stderr.strip()

    def shape(self, gbit, delay_ms):
        """Both directions: rate gbit Gbit/s (0: no shaping), plus delay_ms one way."""
        if not gbit:
            for k in range(2):
                sh(["tc", "-n", self.ns[k], "qdisc", "del", "dev", self.ifs[k], "root"], check=False)
            return
        burst = max(64 << 10, int(gbit * 1e9 / 8 / 1000))  # 1 ms of bytes, at least a TSO segment
        for k in range(2):
            base = ["tc", "-n", self.ns[k], "qdisc"]
            sh(base + ["del", "dev", self.ifs[k], "root"], check=False)
            tbf = ["tbf", "rate", "%dgbit" % gbit, "burst", str(burst), "latency", "50ms"]
            if delay_ms:
                sh(base + ["add", "dev", self.ifs[k], "root", "handle", "1:", "netem", "delay", "%gms" % delay_ms,
                           "limit", "100000"])
                sh(base + ["add", "dev", self.ifs[k], "parent", "1:1", "handle", "10:"] + tbf)
            else:
                sh(base + ["add", "dev", self.ifs[k], "root"] + tbf)

    def exec_prefix(self, k):
        return ["ip", "netns", "exec", self.ns[k]]


def check_tools():
    if os.geteuid() != 0:
        raise SystemExit("bench-link: needs root (network namespaces, tc); run it as root")
    for tool in ("ip", "tc"):
        if subprocess.run(["sh", "-c", "command -v " + tool], capture_output=True).returncode != 0:
            print("bench-link: %s is missing: installing iproute2 with apt-get" % tool, flush=True)
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
            subprocess.run(["apt-get", "install", "-y", "-qq", "iproute2"], check=True, env=env)


LAUNCHER = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def run_pair(link, build, args, timeout, extra_env=None):
    """gpubridge-perf ARGS with rank 0 on host a (nvidia island), rank 1 on host b (amd island), and extra_env
    on both: (meta, rows, rank 0's output) of rank 0's JSON (-J)."""
    secret = secrets.token_hex(16)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "perf.json")
        procs = []
        for k, vendor in enumerate(("nvidia", "amd")):
            env = {key: v for key, v in os.environ.items() if key not in LAUNCHER}
            env.update({"RANK": str(k), "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                        "MASTER_ADDR": link.addr[0], "MASTER_PORT": "29400", "GPUBRIDGE_JOB_SECRET": secret,
                        "GPUBRIDGE_VENDOR": vendor, "GPUBRIDGE_SIM_HOST": "host-" + "ab"[k],
                        "GPUBRIDGE_SOCKET_IFNAME": "=" + link.ifs[k]})
            env.update(extra_env or {})
            cmd = link.exec_prefix(k) + [os.path.join(build, "bin", "gpubridge-perf")] + args
            if k == 0:
                cmd += ["-J", path]
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        outs = []
        try:
            for p in procs:
                outs.append(p.communicate(timeout=timeout)[0])
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        for k, p in enumerate(procs):
            if p.returncode != 0:
                raise SystemExit("run_pair: rank %d exited %d:\n%s" % (k, p.returncode, outs[k]))
        return read_json(path) + (outs[0],)
