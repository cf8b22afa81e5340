"""The ctypes layer alone (no torch, one process): one wrapper per C function
of the public header and no binding of anything else, errors raised as
gpubridge.Error with the library's text, the version (the file VERSION), the
parameter table, the drop-in's place, and a one-rank communicator running
calls on host-device memory, whose flight recorder the bindings read back
(records, counters, observer set and cleared, a dump refused without a dir)."""
import ctypes
import ipaddress
import json
import os
import re
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gbtest  # noqa: E402


def header_functions():
    with open(os.path.join(gbtest.SOURCE_DIR, "include", "gpubridge", "gpubridge.h")) as f:
        text = f.read()
    return sorted(set(re.findall(r"^(?:GB_API\s+)?(?:gbResult_t|const char\*)\s+(gb\w+)\(", text, re.M))), text


# Run in a child process: the parameters are read once per process, and an
# invalid one would fail every communicator of this one.
PARAMS_CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from gpubridge import _lib
print(json.dumps({"params": [_lib.get_param_info(i) for i in range(_lib.get_param_count())],
                  "errors": _lib.get_param_errors()}))
"""


def check_params(_lib, problems):
    n = _lib.get_param_count()
    infos = [_lib.get_param_info(i) for i in range(n)]
    names = [p["name"] for p in infos]
    if n < 20 or len(set(names)) != n or not all(x.startswith("GPUBRIDGE_") for x in names):
        problems.append("parameter table: %d entries, names %s" % (n, names))
    timeout = next((p for p in infos if p["name"] == "GPUBRIDGE_TIMEOUT"), None)
    want = os.environ["GPUBRIDGE_TIMEOUT"]
    if not timeout or (timeout["is_set"], timeout["value"], timeout["error"], timeout["type"]) != (
            True, want, None, "int 1..86400"):
        problems.append("GPUBRIDGE_TIMEOUT=%s reads as %s" % (want, timeout))
    try:
        _lib.get_param_info(n)
        problems.append("gbGetParamInfo(%d) of %d parameters did not raise" % (n, n))
    except _lib.Error as e:
        if e.code != _lib.INVALID_ARGUMENT:
            problems.append("gbGetParamInfo(count): code %d" % e.code)
    env = dict(os.environ, GPUBRIDGE_POLICY="bogus", GPUBRIDGE_JOB_SECRET="hunter2-secret")
    child = subprocess.run([sys.executable, "-c", PARAMS_CHILD, gbtest.PACKAGE_DIR], env=env, capture_output=True,
                           text=True, timeout=60)
    if child.returncode != 0:
        problems.append("parameter child: exit %d: %s" % (child.returncode, child.stderr[-2000:]))
        return
    got = json.loads(child.stdout)
    table = {p["name"]: p for p in got["params"]}
    policy = table.get("GPUBRIDGE_POLICY") or {}
    if policy.get("value") != "auto" or not (policy.get("error") or "").startswith("GPUBRIDGE_POLICY=bogus ") \
            or not policy.get("is_set"):
        problems.append("GPUBRIDGE_POLICY=bogus reads as %s (want the default in effect and an error)" % policy)
    if got["errors"] != policy.get("error") or [p["name"] for p in got["params"] if p["error"]] != ["GPUBRIDGE_POLICY"]:
        problems.append("the errors %r, per parameter %s" % (got["errors"], [p for p in got["params"] if p["error"]]))
    if _lib.get_param_errors() != "":
        problems.append("errors in this process, whose values are all valid: %r" % _lib.get_param_errors())
    secret = table.get("GPUBRIDGE_JOB_SECRET") or {}
    if secret.get("value") != "(set, not shown)" or "hunter2" in child.stdout:
        problems.append("the job secret is shown: %s" % secret)


def check_version(_lib, problems):
    import gpubridge
    with open(os.path.join(gbtest.SOURCE_DIR, "VERSION")) as f:
        version = f.read().strip()
    major, minor, patch = (int(x) for x in version.split("."))
    if _lib.get_version() != version or gpubridge.get_version() != version:
        problems.append("get_version() = %r, the file VERSION says %r" % (gpubridge.get_version(), version))
    if gpubridge.__version__ != version:
        problems.append("gpubridge.__version__ = %r, the file VERSION says %r" % (gpubridge.__version__, version))
    if gpubridge.get_version_code() != major * 10000 + minor * 100 + patch:
        problems.append("get_version_code() = %r for %s" % (gpubridge.get_version_code(), version))


def check_recorder(_lib, comm, n, problems):
    """The flight recorder's bindings on a one-rank communicator that ran 2 all-reduces of n float32."""
    import time
    if ctypes.sizeof(_lib.CollRecord) != 168 or ctypes.sizeof(_lib.CommCounters) != 168:
        problems.append("CollRecord %d bytes, CommCounters %d, want 168 each" % (
            ctypes.sizeof(_lib.CollRecord), ctypes.sizeof(_lib.CommCounters)))
    end = time.monotonic() + 30
    while _lib.comm_get_in_flight(comm) and time.monotonic() < end:
        time.sleep(0.005)  # polling interval of a deadline-bounded wait
    recs = _lib.comm_get_records(comm, 8)
    got = [(r.size, r.version, r.seq, r.coll, r.count, r.dtype, _lib.coll_record_phase(r)) for r in recs]
    if got != [(168, 1, s, 0, n, _lib.FLOAT32, "done") for s in (1, 2)]:
        problems.append("records of 2 all-reduces: %s" % got)
    k = _lib.comm_get_counters(comm)
    if (k.size, k.enqueued, k.completed, k.failed, k.by_coll[0]) != (168, 2, 2, 0, 2):
        problems.append("counters: size %d enqueued %d completed %d failed %d all_reduce %d" % (
            k.size, k.enqueued, k.completed, k.failed, k.by_coll[0]))
    seen = []
    cb = _lib.OBSERVER(lambda c, rec, user: seen.append(rec.contents.seq))
    _lib.comm_set_observer(comm, cb)
    _lib.comm_set_observer(comm, None)
    try:
        _lib.comm_dump_trace(comm, None)
        problems.append("gbCommDumpTrace with no dir and GPUBRIDGE_TRACE_DIR unset did not raise")
    except _lib.Error as e:
        if e.code != _lib.INVALID_USAGE or "GPUBRIDGE_TRACE_DIR" not in e.text:
            problems.append("gbCommDumpTrace(NULL dir): code %d text %r" % (e.code, e.text))


def camel_to_snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name[2:]).lower()


def main():
    os.environ.setdefault("GPUBRIDGE_SOCKET_IFNAME", "lo")
    os.environ.setdefault("GPUBRIDGE_TIMEOUT", "30")
    for name in ("GPUBRIDGE_TRACE_DIR", "GPUBRIDGE_TRACE_BUFFER"):  # check_recorder wants the defaults
        os.environ.pop(name, None)
    gbtest.setup_path()
    from gpubridge import _lib
    try:
        _lib.library()
    except _lib.Error as e:
        gbtest.fail(str(e))
    problems = []

    funcs, text = header_functions()
    if len(funcs) < 30:
        problems.append("parsed only %d functions from the header" % len(funcs))
    for name in sorted(set(_lib._SIGNATURES) - set(funcs)):
        problems.append("_lib binds %s, which the public header does not declare" % name)
    for f in funcs:
        if f not in _lib._SIGNATURES:
            problems.append("%s has no signature in _lib" % f)
        elif not callable(getattr(_lib, camel_to_snake(f), None)):
            problems.append("%s has no wrapper _lib.%s" % (f, camel_to_snake(f)))
        elif not _lib.has(f):
            problems.append("%s is not exported by %s" % (f, _lib.library_path()))

    check_version(_lib, problems)
    check_params(_lib, problems)
    drop_in = _lib.drop_in_path()
    if (os.path.basename(drop_in) != "libgpubridge-nccl.so" or not os.path.isfile(drop_in)
            or os.path.dirname(drop_in) != os.path.dirname(os.path.abspath(_lib.library_path()))):
        problems.append("drop_in_path() = %s, library %s" % (drop_in, _lib.library_path()))
    dev = _lib.get_device_info()
    vendor = os.environ.get("GPUBRIDGE_VENDOR")
    if vendor and dev != {"backend": "host", "vendor": vendor, "run_kind": "simulated"}:
        problems.append("GPUBRIDGE_VENDOR=%s, device %s" % (vendor, dev))
    if not vendor and not os.path.exists("/dev/nvidiactl") and not os.path.exists("/dev/kfd") and dev != {
            "backend": "host", "vendor": "cpu", "run_kind": "cpu"}:
        problems.append("no GPU, no GPUBRIDGE_VENDOR: device %s" % dev)
    ifname, address = _lib.get_net_interface()
    try:
        ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        address = None
    if not ifname or address is None or ifname not in [n for _, n in socket.if_nameindex()]:
        problems.append("gbGetNetInterface: %r %r" % (ifname, address))
    if "invalid" not in _lib.get_error_string(_lib.INVALID_ARGUMENT).lower():
        problems.append("gbGetErrorString(4) = %r" % _lib.get_error_string(4))

    try:
        _lib.comm_count(None)
        problems.append("gbCommCount(NULL) did not raise")
    except _lib.Error as e:
        if e.code != _lib.INVALID_ARGUMENT or "gbCommCount" not in e.text:
            problems.append("gbCommCount(NULL) raised code %d text %r" % (e.code, e.text))

    uid = _lib.get_unique_id()
    if len(uid) != 128 or uid == bytes(128):
        problems.append("unique id of %d bytes, all zero: %s" % (len(uid), uid == bytes(128)))
    try:
        _lib.comm_init_rank(1, uid[:100], 0)
        problems.append("a 100-byte unique id was accepted")
    except _lib.Error as e:
        if e.code != _lib.INVALID_ARGUMENT:
            problems.append("short unique id: code %d" % e.code)

    comm = _lib.comm_init_rank(1, uid, 0)
    try:
        topo = _lib.comm_get_topology(comm)
        if (topo["nranks"], topo["rank"], topo["nislands"], topo["island_of_rank"]) != (1, 0, 1, [0]):
            problems.append("one-rank topology: %s" % topo)
        if (_lib.comm_count(comm), _lib.comm_user_rank(comm)) != (1, 0):
            problems.append("count/rank of a one-rank comm")
        if _lib.comm_get_async_error(comm) != _lib.SUCCESS:
            problems.append("async error on a fresh comm")
        n = 64
        host = (ctypes.c_float * n)(*[float(i) for i in range(n)])
        dev = _lib.mem_alloc(4 * n)
        stream = _lib.stream_create()
        _lib.memcpy_to_device(dev, ctypes.addressof(host), 4 * n)
        _lib.all_reduce(dev, dev, n, _lib.FLOAT32, _lib.SUM, comm, stream)
        scalar = ctypes.c_float(3.0)
        op = _lib.red_op_create_pre_mul_sum(ctypes.addressof(scalar), _lib.FLOAT32,
                                            _lib.SCALAR_HOST_IMMEDIATE, comm)
        _lib.all_reduce(dev, dev, n, _lib.FLOAT32, op, comm, stream)
        _lib.red_op_destroy(op, comm)
        _lib.stream_synchronize(stream)
        back = (ctypes.c_float * n)()
        _lib.memcpy_to_host(ctypes.addressof(back), dev, 4 * n)
        if list(back) != [3.0 * i for i in range(n)]:
            problems.append("one-rank sum then premul(3): %s..." % list(back)[:4])
        check_recorder(_lib, comm, n, problems)
        try:
            _lib.all_reduce(dev, dev, n, 99, _lib.SUM, comm, stream)
            problems.append("datatype 99 was accepted")
        except _lib.Error as e:
            if e.code != _lib.INVALID_ARGUMENT or "datatype" not in e.text:
                problems.append("datatype 99: code %d text %r" % (e.code, e.text))
        child = _lib.comm_split(comm, 0, 0)
        if not child or _lib.comm_count(child) != 1:
            problems.append("split of a one-rank comm")
        else:
            _lib.comm_destroy(child)
        if _lib.comm_split(comm, _lib.SPLIT_NOCOLOR, 0) is not None:
            problems.append("split with no color gave a communicator")
        _lib.stream_destroy(stream)
        _lib.mem_free(dev)
        _lib.comm_finalize(comm)
    finally:
        _lib.comm_destroy(comm)

    if problems:
        gbtest.fail("; ".join(problems))
    print("1 passed, 0 failed")


if __name__ == "__main__":
    main()
