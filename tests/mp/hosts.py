"""Emulated hosts for the suites: network namespaces joined by veth pairs to a
switch (a bridge in a namespace of its own), so that ranks on different
"hosts" reach each other only over that network. Every host's interface is
called gb0 (as every node of a cluster may have ib0), with address
10.214.0.(1 + host); GPUBRIDGE_SOCKET_IFNAME=gb0 picks it.

A rank lands on its host through a wrapper put in front of the rank program
(gpubridge-run starts PROGRAM ARGS as usual): it reads RANK, enters that
rank's namespace, and sets MASTER_ADDR to host 0's address (rank 0, the
rendezvous root, is on host 0) and GPUBRIDGE_SIM_HOST to the host's name, so
ranks of different hosts never share memory. The rig is torn down by
down() (also at exit): namespaces, and with them every interface.

Needs root with CAP_SYS_ADMIN and CAP_NET_ADMIN and iproute2 (installed with
apt-get when missing, as bench/netns.py does); unavailable() says why not.
"""
import atexit
import os
import stat
import subprocess
import tempfile
import uuid

IFNAME = "gb0"
NET = "10.214.0."


def _sh(cmd, check=True):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError("`%s` failed: %s" % (" ".join(cmd), (p.stderr or p.stdout).strip()))
    return p


def unavailable():
    """None when this machine can build the rig, else why not."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if subprocess.run(["sh", "-c", "command -v ip"], capture_output=True).returncode != 0:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-qq", "iproute2"], capture_output=True, env=env)
        if subprocess.run(["sh", "-c", "command -v ip"], capture_output=True).returncode != 0:
            return "iproute2 (ip) is missing and could not be installed"
    probe = "gbprobe" + uuid.uuid4().hex[:6]
    p = _sh(["ip", "netns", "add", probe], check=False)
    _sh(["ip", "netns", "del", probe], check=False)
    if p.returncode != 0:
        return "cannot create network namespaces here (%s)" % p.stderr.strip()
    return None


class Rig:
    def __init__(self, nhosts):
        self.n = nhosts
        self.tag = uuid.uuid4().hex[:5]
        self.switch = "gbs" + self.tag
        self.hosts = ["gbh%s%d" % (self.tag, k) for k in range(nhosts)]
        self.addrs = [NET + str(1 + k) for k in range(nhosts)]
        self._dir = tempfile.mkdtemp(prefix="gbrig-")
        self.wrapper = os.path.join(self._dir, "on-host")
        self._up = False

    def up(self):
        atexit.register(self.down)
        self._up = True
        _sh(["ip", "netns", "add", self.switch])
        _sh(["ip", "-n", self.switch, "link", "add", "br0", "type", "bridge"])
        _sh(["ip", "-n", self.switch, "link", "set", "br0", "up"])
        for k, ns in enumerate(self.hosts):
            _sh(["ip", "netns", "add", ns])
            inner, outer = "gi%s%d" % (self.tag, k), "go%s%d" % (self.tag, k)
            _sh(["ip", "link", "add", inner, "type", "veth", "peer", "name", outer])
            _sh(["ip", "link", "set", inner, "netns", ns])
            _sh(["ip", "link", "set", outer, "netns", self.switch])
            _sh(["ip", "-n", ns, "link", "set", inner, "name", IFNAME])
            _sh(["ip", "-n", ns, "addr", "add", self.addrs[k] + "/24", "dev", IFNAME])
            _sh(["ip", "-n", ns, "link", "set", IFNAME, "up"])
            _sh(["ip", "-n", ns, "link", "set", "lo", "up"])
            _sh(["ip", "-n", self.switch, "link", "set", outer, "master", "br0"])
            _sh(["ip", "-n", self.switch, "link", "set", outer, "up"])
        return self

    def place(self, placement):
        """Writes the wrapper for placement[rank] = host index; returns its
        path, to put before the rank program."""
        hosts = " ".join(self.hosts[h] for h in placement)
        with open(self.wrapper, "w") as f:
            f.write("#!/bin/sh\n"
                    "# gpubridge test rig: run this rank on its emulated host\n"
                    "set -- \"$RANK\" \"$@\"\n"
                    "i=0; ns=\n"
                    "for h in %s; do [ \"$i\" = \"$1\" ] && ns=$h; i=$((i+1)); done\n"
                    "shift\n"
                    "[ -n \"$ns\" ] || { echo \"on-host: no host for RANK=$RANK\" >&2; exit 97; }\n"
                    "exec ip netns exec \"$ns\" env MASTER_ADDR=%s GPUBRIDGE_SIM_HOST=\"rig-$ns\" \"$@\"\n"
                    % (hosts, self.addrs[0]))
        os.chmod(self.wrapper, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        return self.wrapper

    def on(self, host):
        """The command prefix that runs a command on host."""
        return ["ip", "netns", "exec", self.hosts[host]]

    def sent_bytes(self, host):
        """Bytes host's interface has sent (its counter in that namespace)."""
        p = _sh(["ip", "netns", "exec", self.hosts[host], "cat", "/sys/class/net/%s/statistics/tx_bytes" % IFNAME],
                check=False)
        return int(p.stdout.strip() or 0) if p.returncode == 0 else 0

    def cut(self, host):
        """Cuts host's link to the switch (no reset reaches anyone: packets stop)."""
        _sh(["ip", "-n", self.switch, "link", "set", "go%s%d" % (self.tag, host), "down"])

    def mend(self, host):
        _sh(["ip", "-n", self.switch, "link", "set", "go%s%d" % (self.tag, host), "up"])

    def left(self):
        """This rig's namespaces still present (none after down())."""
        names = _sh(["ip", "netns", "list"], check=False).stdout.split()
        return [ns for ns in [self.switch] + self.hosts if ns in names]

    def down(self):
        if not self._up:
            return
        self._up = False
        for ns in self.hosts + [self.switch]:  # a namespace takes its interfaces with it
            _sh(["ip", "netns", "del", ns], check=False)
        try:
            os.unlink(self.wrapper)
        except OSError:
            pass
        try:
            os.rmdir(self._dir)
        except OSError:
            pass
