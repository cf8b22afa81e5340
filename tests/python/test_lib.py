"""The ctypes layer alone (no torch, one process): one wrapper per C function
of the public header, errors raised as gpubridge.Error with the library's
text, and a one-rank communicator running calls on host-device memory."""
import ctypes
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gbtest  # noqa: E402


def header_functions():
    with open(os.path.join(gbtest.SOURCE_DIR, "include", "gpubridge", "gpubridge.h")) as f:
        text = f.read()
    return sorted(set(re.findall(r"^(?:gbResult_t|const char\*)\s+(gb\w+)\(", text, re.M))), text


def camel_to_snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name[2:]).lower()


def main():
    os.environ.setdefault("GPUBRIDGE_SOCKET_IFNAME", "lo")
    os.environ.setdefault("GPUBRIDGE_TIMEOUT", "30")
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
    for f in funcs:
        if f not in _lib._SIGNATURES:
            problems.append("%s has no signature in _lib" % f)
        elif not callable(getattr(_lib, camel_to_snake(f), None)):
            problems.append("%s has no wrapper _lib.%s" % (f, camel_to_snake(f)))
        elif not _lib.has(f):
            problems.append("%s is not exported by %s" % (f, _lib.library_path()))

    m = [int(re.search(r"#define GB_%s (\d+)" % k, text).group(1)) for k in ("MAJOR", "MINOR", "PATCH")]
    if _lib.get_version() != m[0] * 10000 + m[1] * 100 + m[2]:
        problems.append("version %d, header says %s" % (_lib.get_version(), m))
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
