#!/usr/bin/env python3
"""The flight recorder on a real NVIDIA GPU, where records end by a done flag
the stream writes (cuStreamWriteValue) and the watcher thread polls.

Runs on a machine with an NVIDIA GPU, the CUDA runtime and NCCL; elsewhere it
exits 77 (skipped) with the reason. One process, one rank, through the public
C API with ctypes: 8 all-reduces of 1M float32 on a stream of its own, one
synchronize, then (waiting up to 10 s for the watcher) exactly 8 observer
calls, seq 1..8 in order, each done with result 0 and GB_RECORD_DEVICE_DONE;
nothing in flight; counters completed 8. Once per way the GPU signals flags
(GPUBRIDGE_STREAM_FLAGS auto, 32, host), each in a process of its own.

Run as: GB_TEST_BUILD_DIR=<build> python3 tests/gpu/test_gpu_trace.py
"""
import ctypes
import os
import subprocess
import sys
import threading
import time

from gpu_harness import BUILD, base_env, fail, gpu_count, load_cuda_nccl

CALLS = 8
COUNT = 1 << 20
RECORD_DONE = 2
DEVICE_DONE = 4  # GB_RECORD_DEVICE_DONE
RUN_REAL = 0     # gbRunReal


class CollRecord(ctypes.Structure):  # gbCollRecord_t, 168 bytes
    _fields_ = [("size", ctypes.c_uint32), ("version", ctypes.c_uint32), ("seq", ctypes.c_uint64),
                ("p2pSeq", ctypes.c_uint64), ("count", ctypes.c_uint64), ("t", ctypes.c_int64 * 7),
                ("bytes", ctypes.c_uint64 * 4)] + [(name, ctypes.c_int32) for name in (
                    "coll", "dtype", "op", "root", "peer", "npeers", "policy", "nchunks", "chunksBridged", "flags",
                    "state", "result")]


class Counters(ctypes.Structure):  # gbCommCounters_t, 168 bytes
    _fields_ = [("size", ctypes.c_uint32), ("version", ctypes.c_uint32), ("enqueued", ctypes.c_uint64),
                ("completed", ctypes.c_uint64), ("failed", ctypes.c_uint64), ("unrecorded", ctypes.c_uint64),
                ("byColl", ctypes.c_uint64 * 7), ("bytes", ctypes.c_uint64 * 4), ("busyNs", ctypes.c_uint64 * 4),
                ("latencyNs", ctypes.c_uint64)]


class DeviceInfo(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_char_p), ("vendor", ctypes.c_char_p), ("runKind", ctypes.c_int)]


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


OBSERVER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(CollRecord), ctypes.c_void_p)


def child():
    """One rank: prints 'ok' and exits 0, or 'FAIL: why' and exits 1."""
    assert ctypes.sizeof(CollRecord) == 168 and ctypes.sizeof(Counters) == 168
    lib = ctypes.CDLL(os.path.join(BUILD, "lib", "libgpubridge.so"))
    lib.gbGetLastError.restype = ctypes.c_char_p

    def call(name, *args):
        if getattr(lib, name)(*args) != 0:
            fail("%s: %s" % (name, lib.gbGetLastError(None).decode()))

    info = DeviceInfo()
    call("gbGetDeviceInfo", ctypes.byref(info))
    if info.backend != b"cuda" or info.runKind != RUN_REAL:
        fail("the device is %s (run kind %d), not a real CUDA GPU" % (info.backend, info.runKind))
    uid, comm = UniqueId(), ctypes.c_void_p()
    call("gbGetUniqueId", ctypes.byref(uid))
    call("gbCommInitRank", ctypes.byref(comm), 1, uid, 0)

    seen, lock = [], threading.Lock()

    @OBSERVER
    def observe(_comm, rec, _user):
        r = rec.contents
        with lock:
            seen.append((r.seq, r.state, r.result, r.flags))

    call("gbCommSetObserver", comm, observe, None)
    buf, stream = ctypes.c_void_p(), ctypes.c_void_p()
    call("gbMemAlloc", ctypes.byref(buf), ctypes.c_size_t(COUNT * 4))
    call("gbStreamCreate", ctypes.byref(stream))
    for _ in range(CALLS):
        call("gbAllReduce", buf, buf, ctypes.c_size_t(COUNT), 7, 0, comm, stream)  # gbFloat32, gbSum
    call("gbStreamSynchronize", stream)
    end = time.monotonic() + 10
    while time.monotonic() < end:
        with lock:
            if len(seen) >= CALLS:
                break
        time.sleep(0.01)
    with lock:
        got = list(seen)
    want = [(i + 1, RECORD_DONE, 0, True) for i in range(CALLS)]
    if [(s, st, res, bool(fl & DEVICE_DONE)) for s, st, res, fl in got] != want:
        fail("observer calls (seq, state, result, flags) %s; want %d, seq 1..%d, done, result 0, "
             "GB_RECORD_DEVICE_DONE" % (got, CALLS, CALLS))
    records, count = (CollRecord * 16)(), ctypes.c_int(-1)
    call("gbCommGetInFlight", comm, records, 16, ctypes.byref(count))
    counters = Counters()
    call("gbCommGetCounters", comm, ctypes.byref(counters))
    if count.value != 0 or counters.completed != CALLS or counters.failed != 0:
        fail("after the observer calls: %d in flight, %d completed, %d failed" % (
            count.value, counters.completed, counters.failed))
    call("gbCommSetObserver", comm, None, None)
    call("gbStreamDestroy", stream)
    call("gbMemFree", buf)
    call("gbCommDestroy", comm)
    print("ok")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child()
        return
    gpu_count()
    load_cuda_nccl()
    if not BUILD or not os.path.exists(os.path.join(BUILD, "lib", "libgpubridge.so")):
        fail("GB_TEST_BUILD_DIR (%r) holds no lib/libgpubridge.so: build first" % BUILD)
    failed = 0
    for flags in ("auto", "32", "host"):
        env = base_env()
        env.update(GPUBRIDGE_STREAM_FLAGS=flags, GB_TEST_BUILD_DIR=BUILD, GPUBRIDGE_TIMEOUT="60")
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"], env=env, capture_output=True,
                           text=True, timeout=300)
        ok = p.returncode == 0 and p.stdout.strip().endswith("ok")
        print("%s GPUBRIDGE_STREAM_FLAGS=%s: %d all-reduces, %d done records with GB_RECORD_DEVICE_DONE and "
              "observer calls" % ("PASS" if ok else "FAIL", flags, CALLS, CALLS if ok else 0), flush=True)
        if not ok:
            print(p.stdout[-3000:], p.stderr[-3000:])
            failed += 1
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
