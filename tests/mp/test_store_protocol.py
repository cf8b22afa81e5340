#!/usr/bin/env python3
"""gbCommInitFromEnv checks, at connect, that torchrun's store speaks the
TCPStore protocol gpubridge knows (src/boot/store.c: VALIDATE with torch's
magic, then PING with a nonce that the store sends back), and fails with a
clear error, within a deadline, where it does not.

A rank (tests/rank_torchrun --expect-fail) started with torchrun's variables
and TORCHELASTIC_USE_AGENT_STORE=True meets, on MASTER_PORT, a fake store run
by this suite on a thread:
- one that answers the ping with another number (a protocol it does not know);
- one that closes the connection after the hello (as torch's store does with
  a command it does not know);
- one that says nothing (as torch's store does with another magic), with
  GPUBRIDGE_TIMEOUT=3.
Each time the rank must fail naming the store's address, what it did, the
torch versions gpubridge was tested with (2.8 to 2.13) and the torch of its
launcher, this process (torch.__version__): at once for the first two, after
the 3 s deadline for the silent one. The fake store must have received
exactly VALIDATE (0) with magic 0x3C85F7CE, then PING (13) with 4 bytes.

    python3 tests/mp/test_store_protocol.py [--only SUBSTRING]
"""
import os
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

MAGIC = 0x3C85F7CE
HELLO = struct.calcsize("=BIBI")  # VALIDATE + magic, PING + nonce
TIMEOUT_S = 3


class FakeStore:
    """Accepts one connection, reads the hello, then behaves as `how` says."""

    def __init__(self, how):
        self.how, self.hello = how, b""
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.sock.settimeout(harness.scaled(20))
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(harness.scaled(20))
            try:
                while len(self.hello) < HELLO:
                    got = conn.recv(HELLO - len(self.hello))
                    if not got:
                        return
                    self.hello += got
                _, _, _, nonce = struct.unpack("=BIBI", self.hello)
                if self.how == "wrong answer":
                    conn.sendall(struct.pack("=I", (nonce + 1) & 0xFFFFFFFF))
                if self.how == "silent":
                    conn.recv(1)  # until the rank gives up and closes
            except OSError:
                pass

    def close(self):
        self.sock.close()
        self.thread.join(harness.scaled(30))


def store_env(port):
    return harness.clean_env(RANK=1, WORLD_SIZE=2, LOCAL_RANK=1, LOCAL_WORLD_SIZE=2, MASTER_ADDR="127.0.0.1",
                             MASTER_PORT=port, TORCHELASTIC_USE_AGENT_STORE="True", TORCHELASTIC_RUN_ID="gbtest",
                             TORCHELASTIC_RESTART_COUNT=0, GPUBRIDGE_VENDOR="nvidia", GPUBRIDGE_TIMEOUT=TIMEOUT_S)


def case(suite, how, said, limit, torch_version):
    store = FakeStore(how)
    t0 = time.monotonic()
    try:
        p = subprocess.run([harness.program("rank_torchrun"), "--expect-fail"], env=store_env(store.port),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=harness.scaled(60))
    finally:
        secs = time.monotonic() - t0
        store.close()
    out = p.stdout
    print("%s: %.1f s: %s" % (how, secs, out.strip()[-600:]), flush=True)
    want = ["init-error: ", "torchrun's store at 127.0.0.1:%d %s" % (store.port, said),
            "does not speak the TCPStore protocol gpubridge knows (tested: torch 2.8 to 2.13)",
            "torch here is %s." % torch_version]
    missing = [w for w in want if w not in out]
    suite.check(p.returncode == 0 and not missing, how + ": the rank fails naming the store, what it did and torch",
                "missing %s in:\n%s" % (missing, out))
    suite.check(secs < harness.scaled(limit), how + ": within %.0f s (%.1f s)" % (limit, secs))
    if len(store.hello) == HELLO:
        cmd, magic, ping, _ = struct.unpack("=BIBI", store.hello)
    else:
        cmd, magic, ping = None, None, None
    suite.check((cmd, magic, ping) == (0, MAGIC, 13), how + ": the store got VALIDATE with torch's magic, then PING",
                repr(store.hello))


def main():
    try:
        import torch
    except ImportError:
        print("SKIP: torch is not installed (its version is part of the message checked)")
        sys.exit(77)
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else ""
    harness.require_built("rank_torchrun")
    suite = harness.Suite("store_protocol")
    cases = [("wrong answer", "answered 0x", 2.5),
             ("closes", "ended the connection at gpubridge's hello", 2.5),
             ("silent", "said nothing for %d s to gpubridge's hello" % TIMEOUT_S, TIMEOUT_S + 3)]
    for how, said, limit in cases:
        if only in how:
            case(suite, how, said, limit, torch.__version__)
    suite.done()


if __name__ == "__main__":
    main()
