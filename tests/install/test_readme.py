#!/usr/bin/env python3
"""README.md as a newcomer meets it: every command of its shell blocks,
verbatim and in the README's order, in a fresh copy of the checkout with
nothing built, as one shell session (an `export` holds for what follows),
with HOME a temporary folder (the C quick start installs to $HOME/gpubridge)
and a fresh venv first on PATH (`pip install .` installs into it).

What is not as a newcomer has it, and why:
- `make test` is left out: this suite runs inside it.
- The venv sees the suite's own packages (torch, scikit-build-core) through
  a .pth file, so that nothing is downloaded: pip builds without isolation
  (PIP_NO_BUILD_ISOLATION) and from no index; the venv gets a `torchrun`
  script as pip would make it.
- The drop-in's PyTorch command needs CUDA torch and GPUs: without them it
  must fail with its message saying so (what a CPU user sees), and with
  them it is left to tests/gpu/run_drop_in.sh (a SKIP line says so).
Each command must exit 0; the C programs must print an ok line per rank."""
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import time

import installtest as it

SKIPPED = {"make test": "this suite runs inside make test"}
DROP_IN_TRAIN = "examples/drop_in_train.py"
TIMEOUT_S = 1500
# Lines a command's output must hold: (pattern, count).
EXPECT = {"make demo": (r"# Out of bounds values : 0 OK", 1),
          "./allreduce": (r"ok: rank \d+ of 4, version", 4),
          "./nccl_allreduce": (r"ok: rank \d+ of 4 over NCCL's API", 4),
          "examples/simulated_two_islands.py": (r"loss", 1)}


def commands(readme):
    """The README's shell commands in order: the lines of its ```sh blocks
    and of blocks without a language, continuation lines joined."""
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    out = []
    for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", text, re.M | re.S):
        if lang not in ("", "sh", "bash"):
            continue
        joined = re.sub(r"\\\n\s*", "", body)
        for line in joined.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                out.append(line.strip())
    return out


def copy_checkout(dest):
    """The checkout's files as git sees them (tracked and not ignored): a fresh clone of the working tree."""
    listed = subprocess.run(["git", "-C", it.SOURCE_DIR, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, text=True, timeout=60)
    if listed.returncode != 0:
        it.fail("git ls-files in %s: %s" % (it.SOURCE_DIR, listed.stderr))
    n = 0
    for rel in filter(None, listed.stdout.split("\0")):
        src = os.path.join(it.SOURCE_DIR, rel)
        if not os.path.isfile(src):  # deleted, not yet committed
            continue
        os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
        shutil.copy2(src, os.path.join(dest, rel))
        n += 1
    return n


def make_venv(venv):
    it.run([sys.executable, "-m", "venv", venv], "python -m venv", 180, it.clean_env())
    py = os.path.join(venv, "bin", "python")
    purelib = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, timeout=60).stdout.strip()
    with open(os.path.join(purelib, "suite-packages.pth"), "w", encoding="utf-8") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    torchrun = os.path.join(venv, "bin", "torchrun")
    with open(torchrun, "w", encoding="utf-8") as f:
        f.write("#!%s\nimport sys\nfrom torch.distributed.run import main\nsys.exit(main())\n" % py)
    os.chmod(torchrun, 0o755)


def bare(cmd):
    """The command without its trailing comment."""
    return re.sub(r"\s+#.*$", "", cmd)


def script(cmds, cuda):
    """One bash session running cmds; each announced by a '+++ ' line."""
    lines = ["set -eo pipefail"]
    for cmd in cmds:
        if bare(cmd) in SKIPPED:
            lines.append("echo %s" % shlex.quote("--- left out: %s (%s)" % (bare(cmd), SKIPPED[bare(cmd)])))
            continue
        lines.append("echo %s" % shlex.quote("+++ " + cmd))
        if DROP_IN_TRAIN in cmd:
            if cuda:
                lines.append("echo %s" % shlex.quote("SKIP: %s runs on GPUs in tests/gpu/run_drop_in.sh" % cmd))
                continue
            lines += ["if (", cmd, ") > drop_in_train.out 2>&1; then echo 'it ran without CUDA torch'; exit 1; fi"]
            lines.append("grep -q 'needs a CUDA build of torch' drop_in_train.out || "
                         "{ cat drop_in_train.out; echo 'no message saying it needs CUDA torch'; exit 1; }")
            lines.append("echo 'ok: it stopped saying it needs a CUDA build of torch and GPUs'")
            continue
        lines.append(cmd)
    lines.append("echo '+++ end'")
    return "\n".join(lines) + "\n"


def check_outputs(out, cmds):
    """Splits the session's output at the '+++ ' lines and checks each command's expected lines."""
    parts = re.split(r"^\+\+\+ (.*)$", out, flags=re.M)
    by_cmd = dict(zip(parts[1::2], parts[2::2]))
    for cmd in cmds:
        for key, (pattern, count) in EXPECT.items():
            if key in cmd and cmd in by_cmd and len(re.findall(pattern, by_cmd[cmd])) < count:
                it.fail("`%s` printed fewer than %d lines matching %r:\n%s" % (cmd, count, pattern, by_cmd[cmd][-3000:]))


def main():
    cmds = commands(os.path.join(it.SOURCE_DIR, "README.md"))
    for must in ("make demo", "pip install .", "./allreduce", "./nccl_allreduce", DROP_IN_TRAIN):
        if not any(must in c for c in cmds):
            it.fail("README.md has no command with %r: the walk would not cover it" % must)
    try:
        import torch
        cuda = torch.cuda.is_available()
    except ImportError:
        it.fail("%s has no torch: run through make test (its .venv has tests/requirements.txt)" % sys.executable)
    with it.TempDir("gb-readme-") as tmp:
        repo, home, venv = (os.path.join(tmp, d) for d in ("repo", "home", "venv"))
        os.makedirs(home)
        n = copy_checkout(repo)
        make_venv(venv)
        print("ok: a fresh copy of the checkout (%d files, nothing built) and a venv; %d README commands"
              % (n, len(cmds)), flush=True)
        env = it.clean_env(HOME=home, PATH=os.path.join(venv, "bin") + os.pathsep + os.environ.get("PATH", ""),
                           PIP_NO_BUILD_ISOLATION="0", PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
        for inherited in ("VIRTUAL_ENV", "MAKEFLAGS", "MFLAGS", "MAKELEVEL"):  # a newcomer's shell has none
            env.pop(inherited, None)
        with open(os.path.join(tmp, "walk.sh"), "w", encoding="utf-8") as f:
            f.write(script(cmds, cuda))
        t0 = time.monotonic()
        proc = subprocess.Popen(["bash", os.path.join(tmp, "walk.sh")], cwd=repo, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the session: make, pip, the ranks
            out, _ = proc.communicate()
            it.fail("the README walk did not end within %d s; last output:\n%s" % (TIMEOUT_S, out[-4000:]))
        p = subprocess.CompletedProcess(proc.args, proc.returncode, out)
        ran = re.findall(r"^\+\+\+ (.*)$", p.stdout, re.M)
        if p.returncode != 0:
            it.fail("README command `%s` failed (exit %d):\n%s" % (ran[-1] if ran else "?", p.returncode,
                                                                  p.stdout[-6000:]))
        check_outputs(p.stdout, cmds)
        for line in p.stdout.splitlines():
            if line.startswith(("+++ ", "--- ", "SKIP", "ok: it stopped")):
                print(line, flush=True)
    print("PASS: every README command ran verbatim, in order, in a fresh copy (%.0f s)" % (time.monotonic() - t0))


if __name__ == "__main__":
    main()
