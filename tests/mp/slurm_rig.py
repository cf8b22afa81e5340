"""A real Slurm cluster on this one machine, for the suites: Debian's
slurm-wlm (slurmctld, one slurmd per emulated node) with munge, every file in
a temporary folder, torn down by down() whatever happened.

The nodes are hosts.py's emulated hosts (network namespaces on a bridge):
host 0 is the controller (the "login node" where srun, sbatch and scontrol
run), host 1 + k is node k. Every daemon also runs in a UTS namespace of its
own named after its node, and a mount namespace whose /etc/hosts names the
cluster's hosts, so a job's processes see the host name, address and peers of a
real node of a real cluster. One node per partition: Cluster([("nvidia", 4),
("amd", 4)]) has partition nvidia on node gbn1 and amd on gbn2, each declaring
4 CPUs (SlurmdParameters=config_overrides: more than this machine's cores).

munged runs in the root namespace on a socket in the folder (a pathname
socket: every namespace reaches it). No cgroup plugin for jobs
(proctrack/linuxproc, task/none), but slurmd opens this machine's cgroup tree
at start: the nodes enter their network namespace with nsenter, which keeps
/sys (`ip netns exec` mounts a /sys without cgroups). Readiness is polled with
deadlines (`scontrol ping`, `sinfo`); a scheduling pass every second starts
heterogeneous jobs, which Slurm does not start at submission.

Needs root, iproute2, unshare (util-linux) and slurm-wlm + munge (make test
installs them: the Makefile's SYSTEM_TOOLS); unavailable() says why not.
"""
import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hosts  # noqa: E402

DAEMONS = ("slurmctld", "slurmd", "slurmstepd", "munged")
TOOLS = {"slurmctld": "slurmctld", "slurmd": "slurmd", "srun": "slurm-client", "sbatch": "slurm-client",
         "scontrol": "slurm-client", "sinfo": "slurm-client", "munged": "munge", "unshare": "util-linux", "nsenter": "util-linux"}
CONTROLLER = "gbctl"


def unavailable():
    """None when this machine can run the cluster, else why not."""
    why = hosts.unavailable()
    if why:
        return why
    missing = [t for t in TOOLS if not shutil.which(t) and not os.path.exists("/usr/sbin/" + t)]
    if missing:
        pkgs = sorted(set(TOOLS[t] for t in missing))
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "slurm-wlm", "munge"] + pkgs,
                       capture_output=True, env=env)
        missing = [t for t in TOOLS if not shutil.which(t) and not os.path.exists("/usr/sbin/" + t)]
        if missing:
            return "%s missing and could not be installed (apt-get install %s)" % (
                ", ".join(missing), " ".join(sorted(set(TOOLS[t] for t in missing))))
    return None


def _exe(name):
    return shutil.which(name) or "/usr/sbin/" + name


class Cluster:
    def __init__(self, partitions=(("nvidia", 4), ("amd", 4))):
        self.partitions = list(partitions)
        self.nodes = ["gbn%d" % (k + 1) for k in range(len(self.partitions))]
        self.rig = hosts.Rig(1 + len(self.nodes))
        self.dir = tempfile.mkdtemp(prefix="gbslurm-")
        os.chmod(self.dir, 0o755)  # slurmd's tasks (root) and munged need to reach into it
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.sock = os.path.join(self.dir, "munge", "munge.socket")
        self.names = [CONTROLLER] + self.nodes
        self.addrs = self.rig.addrs
        self._procs = {}  # name -> Popen
        self.hosts_file = os.path.join(self.dir, "hosts")
        self._up = False

    # -- start ---------------------------------------------------------------
    def up(self, deadline_s=30):
        t_end = time.monotonic() + deadline_s
        self._up = True
        self.rig.up()
        atexit.register(self.down)  # after the rig's own: runs first, while the namespaces still exist
        self._write_hosts()
        self._start_munge(t_end)
        self._write_conf()
        self._start("slurmctld", 0, [_exe("slurmctld"), "-D", "-i", "-f", self.conf])
        self.poll(lambda: self.ctl(["scontrol", "ping"]).stdout.find("UP") >= 0, t_end, "slurmctld answers ping")
        for k, node in enumerate(self.nodes):
            self._start("slurmd-" + node, 1 + k, [_exe("slurmd"), "-D", "-N", node, "-f", self.conf])
        self.poll(self._idle, t_end, "every node idle in sinfo")
        return self

    def _write_hosts(self):
        lines = ["127.0.0.1 localhost"] + ["%s %s" % (a, n) for a, n in zip(self.addrs, self.names)]
        with open(self.hosts_file, "w") as f:
            f.write("\n".join(lines) + "\n")

    def _start_munge(self, t_end):
        mdir = os.path.dirname(self.sock)
        os.makedirs(mdir, mode=0o755)
        key = os.path.join(self.dir, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        self._spawn("munged", [_exe("munged"), "-F", "-f", "--socket=" + self.sock, "--key-file=" + key,
                               "--pid-file=" + os.path.join(mdir, "munged.pid"),
                               "--log-file=" + os.path.join(self.dir, "munged.log"),
                               "--seed-file=" + os.path.join(mdir, "munged.seed")])
        self.poll(lambda: os.path.exists(self.sock), t_end, "munged's socket")

    def _write_conf(self):
        d = self.dir
        for sub in ("state", "spool"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        for node in self.nodes:
            os.makedirs(os.path.join(d, "spool", node), exist_ok=True)
        ctl_port, d_port = free_ports(2)
        lines = [
            "ClusterName=gbrig",
            "SlurmctldHost=%s(%s)" % (CONTROLLER, self.addrs[0]),
            "SlurmUser=root", "SlurmdUser=root",
            "AuthType=auth/munge", "CredType=cred/munge", "AuthInfo=socket=%s" % self.sock,
            "SlurmctldPort=%d" % ctl_port, "SlurmdPort=%d" % d_port,
            "StateSaveLocation=%s/state" % d, "SlurmdSpoolDir=%s/spool/%%n" % d,
            "SlurmctldPidFile=%s/slurmctld.pid" % d, "SlurmdPidFile=%s/spool/%%n/slurmd.pid" % d,
            "SlurmctldLogFile=%s/slurmctld.log" % d, "SlurmdLogFile=%s/slurmd-%%n.log" % d,
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SwitchType=switch/none",
            "MpiDefault=none", "SchedulerType=sched/backfill",
            # A heterogeneous job waits for a scheduling pass (not started at submission): pass often.
            "SchedulerParameters=bf_interval=1,sched_interval=1",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
            "SlurmdParameters=config_overrides", "ReturnToService=2",
            "JobCompType=jobcomp/none", "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none", "MailProg=/bin/true",
            "SlurmctldTimeout=30", "SlurmdTimeout=30", "InactiveLimit=0", "KillWait=2", "MinJobAge=2",
            "MessageTimeout=10",
        ]
        for k, (node, (part, cpus)) in enumerate(zip(self.nodes, self.partitions)):
            lines.append("NodeName=%s NodeHostname=%s NodeAddr=%s CPUs=%d RealMemory=1000 State=UNKNOWN"
                         % (node, node, self.addrs[1 + k], cpus))
        for k, (node, (part, _)) in enumerate(zip(self.nodes, self.partitions)):
            lines.append("PartitionName=%s Nodes=%s %sMaxTime=INFINITE State=UP"
                         % (part, node, "Default=YES " if k == 0 else ""))
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")

    def _spawn(self, name, cmd):
        log = open(os.path.join(self.dir, name + ".out"), "w")
        self._procs[name] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             env=self.env(), start_new_session=True)
        log.close()

    def _start(self, name, host, cmd):
        self._spawn(name, self.on(host) + cmd)

    def on(self, host):
        """The command prefix that runs a command on emulated host `host`: its
        network namespace (nsenter, keeping this machine's /sys and its
        cgroups, which slurmd opens), a UTS namespace with the host's name and
        a mount namespace whose /etc/hosts names the cluster's hosts."""
        return ["nsenter", "--net=/run/netns/" + self.rig.hosts[host], "unshare", "--uts", "--mount",
                "--propagation", "private", "sh", "-c",
                'hostname "$0" && mount --bind "$1" /etc/hosts && shift && exec "$@"',
                self.names[host], self.hosts_file]

    def _idle(self):
        p = self.ctl(["sinfo", "-h", "-N", "-o", "%N %t"])
        states = dict(l.split() for l in p.stdout.splitlines() if len(l.split()) == 2)
        return all(states.get(n) == "idle" for n in self.nodes)

    # -- use -----------------------------------------------------------------
    def env(self, base=None):
        """base (else this process's environment) without Slurm's job variables, with SLURM_CONF."""
        e = {k: v for k, v in (base if base is not None else os.environ).items()
             if not k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_"))}
        e["SLURM_CONF"] = self.conf
        return e

    def ctl(self, cmd, timeout=30, env=None):
        """Runs cmd (a Slurm client: srun, sbatch, scontrol...) on the
        controller host with env (see env()); returns the CompletedProcess,
        returncode 124 when it ran past timeout (then killed)."""
        try:
            return subprocess.run(self.on(0) + cmd, capture_output=True, text=True, timeout=timeout,
                                  env=self.env(env))
        except subprocess.TimeoutExpired as e:
            return subprocess.CompletedProcess(cmd, 124, e.stdout or "", (e.stderr or "") + "\n(timed out)")

    def poll(self, cond, t_end, what):
        while True:
            for name, p in self._procs.items():
                if p.poll() is not None:
                    raise RuntimeError("%s exited %s while waiting for %s:\n%s" % (name, p.returncode, what,
                                                                                   self.logs()))
            try:
                if cond():
                    return
            except Exception:  # a client that cannot reach the daemon yet
                pass
            if time.monotonic() > t_end:
                raise RuntimeError("no %s by the deadline:\n%s" % (what, self.logs()))
            time.sleep(0.1)

    def wait_job(self, job_id, deadline_s):
        """Polls until job_id has left the queue; returns its final state (scontrol), or None at the deadline."""
        t_end = time.monotonic() + deadline_s
        state = None
        while time.monotonic() < t_end:
            p = self.ctl(["scontrol", "-o", "show", "job", str(job_id)])
            states = [w.split("=", 1)[1] for l in p.stdout.splitlines() for w in l.split()
                      if w.startswith("JobState=")]
            if p.returncode == 0 and states and all(s not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")
                                                    for s in states):
                return states
            if p.returncode != 0 and "Invalid job id" in p.stderr:
                return state or ["GONE"]
            state = states or state
            time.sleep(0.1)
        return None

    def logs(self, tail=30):
        out = []
        for f in sorted(os.listdir(self.dir)) if os.path.isdir(self.dir) else []:
            if f.endswith((".log", ".out")):
                with open(os.path.join(self.dir, f), errors="replace") as fh:
                    lines = fh.read().splitlines()[-tail:]
                out.append("--- %s\n%s" % (f, "\n".join(lines)))
        return "\n".join(out)

    # -- stop ----------------------------------------------------------------
    def _pids_in_namespaces(self):
        pids = set()
        for ns in self.rig.hosts:
            p = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
            pids.update(int(x) for x in p.stdout.split() if x.isdigit())
        return pids

    def down(self, deadline_s=10):
        if not self._up:
            return
        self._up = False
        t_end = time.monotonic() + deadline_s
        if self.rig.left():
            self.ctl(["scancel", "--full", "-u", "root"], timeout=5)
        # Every process in the cluster's namespaces is the rig's: daemons,
        # slurmstepd (which leaves slurmd's process tree) and tasks.
        for sig, until in ((signal.SIGTERM, t_end - deadline_s / 2), (signal.SIGKILL, t_end)):
            for pid in self._pids_in_namespaces():
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            while self._pids_in_namespaces() and time.monotonic() < until:
                time.sleep(0.05)
        for name, p in self._procs.items():
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=max(0.5, t_end - time.monotonic()))
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.rig.down()
        shutil.rmtree(self.dir, ignore_errors=True)

    def left(self):
        """What of this cluster remains (empty after down()): processes, namespaces, files."""
        left = ["namespace " + ns for ns in self.rig.left()]
        left += ["process %d (%s)" % (p.pid, n) for n, p in self._procs.items() if p.poll() is None]
        left += ["process %d in a rig namespace" % pid for pid in self._pids_in_namespaces()]
        left += [d for d in [self.dir] if os.path.exists(d)]
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if self.dir in cmd and os.path.basename(cmd.split(" ")[0]) in DAEMONS + ("unshare", "nsenter", "sh"):
                left.append("process %s: %s" % (pid, cmd.strip()))
        return left


def free_ports(n):
    """n distinct ports free here (the namespaces are fresh: free there too)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
    from ports import free_port
    got = []
    while len(got) < n:
        p = free_port()
        if p not in got:
            got.append(p)
    return got


if __name__ == "__main__":  # python3 slurm_rig.py: start, show, stop
    c = Cluster()
    try:
        t0 = time.monotonic()
        c.up()
        print("up in %.1f s" % (time.monotonic() - t0))
        print(c.ctl(["sinfo"]).stdout)
        print(c.ctl(sys.argv[1:] or ["srun", "-n", "4", "hostname"], timeout=60))
    finally:
        c.down()
        print("left:", c.left())


def run_suite(suite, body, deadline_s):
    """A suite on a cluster of an nvidia and an amd node (4 CPUs each): up
    within deadline_s, body(suite, cluster), then down whatever happened,
    and a check that nothing of it is left. A stop by CTest's timeout
    (SIGTERM) still tears it down. Ends with suite.done(); skips (exit 77)
    saying why where the cluster cannot run."""
    why = unavailable()
    if why:
        print("SKIP: " + why)
        sys.exit(77)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    c = Cluster([("nvidia", 4), ("amd", 4)])
    try:
        t0 = time.monotonic()
        c.up(deadline_s=deadline_s)
        suite.check(True, "cluster up: slurmctld answers, gbn1 and gbn2 idle (%.1f s)" % (time.monotonic() - t0))
        body(suite, c)
    except RuntimeError as e:
        suite.check(False, "cluster", str(e))
    finally:
        c.down()
    left = c.left()
    suite.check(not left, "nothing of the cluster left (daemons, namespaces, folder)", "\n".join(left))
    suite.done()
