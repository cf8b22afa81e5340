"""ctypes bindings of libgpubridge: one wrapper per C function of
include/gpubridge/gpubridge.h.

Each wrapper checks the result and raises gpubridge.Error(code, text) with
gbGetLastError's text. Buffers and streams are plain integers (addresses).
No behaviour lives here: every collective runs in the C library.

The library is found, in order: $GPUBRIDGE_LIBRARY (the .so, or a build
directory holding lib/libgpubridge.so), the copy installed inside this
package (lib/libgpubridge.so.0, from the wheel), a build/ directory of the
source checkout, then the system loader. Only functions the public header
declares are bound (tests/python/test_lib.py checks it).
"""
import ctypes
import os
import threading

UNIQUE_ID_BYTES = 128
# The library's file name inside the wheel and its SONAME (what the drop-in
# libgpubridge-nccl.so asks the loader for): one copy serves both.
SONAME = "libgpubridge.so.0"
DROP_IN = "libgpubridge-nccl.so"

# gbResult_t
SUCCESS = 0
UNHANDLED_CUDA_ERROR = 1
SYSTEM_ERROR = 2
INTERNAL_ERROR = 3
INVALID_ARGUMENT = 4
INVALID_USAGE = 5
REMOTE_ERROR = 6
IN_PROGRESS = 7
TIMEOUT = 8

_RESULT_NAMES = {
    0: "gbSuccess", 1: "gbUnhandledCudaError", 2: "gbSystemError", 3: "gbInternalError",
    4: "gbInvalidArgument", 5: "gbInvalidUsage", 6: "gbRemoteError", 7: "gbInProgress",
    8: "gbTimeout",
}

# gbDataType_t
INT8, UINT8, INT32, UINT32, INT64, UINT64, FLOAT16, FLOAT32, FLOAT64, BFLOAT16, FLOAT8E4M3, FLOAT8E5M2 = range(12)
# gbRedOp_t
SUM, PROD, MAX, MIN, AVG = range(5)
# gbScalarResidence_t
SCALAR_DEVICE, SCALAR_HOST_IMMEDIATE = 0, 1
SPLIT_NOCOLOR = -1
CONFIG_UNDEF_INT = -2147483648
CONFIG_MAGIC = 0xCAFEBEEF
RUN_KINDS = {0: "real", 1: "simulated", 2: "cpu"}
POLICIES = {0: "auto", 1: "hierarchical", 2: "native", 3: "flat", 4: "split-rail", 5: "tuned"}


class Error(RuntimeError):
    """A gpubridge call failed. code is the gbResult_t, text gbGetLastError's message.
    Exported, and named in tracebacks, as gpubridge.Error."""

    def __init__(self, code, text):
        self.code = int(code)
        self.text = text
        name = _RESULT_NAMES.get(self.code, "gbResult %d" % self.code)
        super().__init__("%s: %s" % (name, text) if text else name)


Error.__module__ = "gpubridge"  # tracebacks say gpubridge.Error, the name users catch


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


class Config(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
                ("blocking", ctypes.c_int), ("policy", ctypes.c_int), ("transport", ctypes.c_int),
                ("timeoutSeconds", ctypes.c_int), ("chunkBytes", ctypes.c_int), ("bridgeCompression", ctypes.c_int)]


# gbCompression_t by its GPUBRIDGE_BRIDGE_COMPRESSION name.
COMPRESSIONS = {"off": 0, "bf16": 1, "fp8": 2}


class DeviceInfo(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_char_p), ("vendor", ctypes.c_char_p), ("runKind", ctypes.c_int)]


class ParamInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("type", ctypes.c_char_p), ("defaultValue", ctypes.c_char_p),
                ("value", ctypes.c_char_p), ("error", ctypes.c_char_p), ("isSet", ctypes.c_int),
                ("mustAgree", ctypes.c_int), ("doc", ctypes.c_char_p)]


class Topology(ctypes.Structure):
    _fields_ = [("nranks", ctypes.c_int), ("rank", ctypes.c_int), ("nislands", ctypes.c_int),
                ("island", ctypes.c_int), ("runKind", ctypes.c_int), ("policy", ctypes.c_int),
                ("splitTest", ctypes.c_int), ("islandOfRank", ctypes.POINTER(ctypes.c_int)),
                ("leaderOfIsland", ctypes.POINTER(ctypes.c_int)),
                ("islandSize", ctypes.POINTER(ctypes.c_int)),
                ("islandVendor", ctypes.POINTER(ctypes.c_char_p))]


# Flight recorder (gbCollRecord_t, gbCommCounters_t): names by enum value.
COLL_NAMES = ("all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")
PHASE_NAMES = ("enqueued", "check_begin", "check_end", "staged", "bridge_begin", "bridge_end", "done")
HOST_GROUPS = ("world", "bridge", "rail", "island")
RECORD_STATES = {1: "in-flight", 2: "done", 3: "failed"}
RECORD_HAS_CHECK, RECORD_HAS_HOST_STEP, RECORD_DEVICE_DONE = 1, 2, 4
DTYPE_NAMES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", "bfloat16",
               "float8e4m3", "float8e5m2")
OP_NAMES = ("sum", "prod", "max", "min", "avg")


class CollRecord(ctypes.Structure):
    """gbCollRecord_t: one collective or send/recv group as this rank saw it."""
    _fields_ = [("size", ctypes.c_uint32), ("version", ctypes.c_uint32), ("seq", ctypes.c_uint64),
                ("p2p_seq", ctypes.c_uint64), ("count", ctypes.c_uint64),
                ("t", ctypes.c_int64 * len(PHASE_NAMES)), ("bytes", ctypes.c_uint64 * len(HOST_GROUPS))] + [
        (name, ctypes.c_int32) for name in ("coll", "dtype", "op", "root", "peer", "npeers", "policy", "nchunks",
                                            "chunks_bridged", "flags", "state", "result")]


class CommCounters(ctypes.Structure):
    """gbCommCounters_t: what a communicator did since its init."""
    _fields_ = [("size", ctypes.c_uint32), ("version", ctypes.c_uint32), ("enqueued", ctypes.c_uint64),
                ("completed", ctypes.c_uint64), ("failed", ctypes.c_uint64), ("unrecorded", ctypes.c_uint64),
                ("by_coll", ctypes.c_uint64 * len(COLL_NAMES)), ("bytes", ctypes.c_uint64 * len(HOST_GROUPS)),
                ("busy_ns", ctypes.c_uint64 * len(HOST_GROUPS)), ("latency_ns", ctypes.c_uint64)]


class CommMemory(ctypes.Structure):
    """gbCommMemory_t: the staging memory a communicator holds on this rank."""
    _fields_ = [("size", ctypes.c_uint32), ("version", ctypes.c_uint32), ("pinned_bytes", ctypes.c_uint64),
                ("segment_bytes", ctypes.c_uint64), ("device_bytes", ctypes.c_uint64)]


assert ctypes.sizeof(CommMemory) == 32, "gbCommMemory_t is 32 bytes, CommMemory %d" % ctypes.sizeof(CommMemory)
assert ctypes.sizeof(CollRecord) == 168, "gbCollRecord_t is 168 bytes, CollRecord %d" % ctypes.sizeof(CollRecord)
assert ctypes.sizeof(CommCounters) == 168, "gbCommCounters_t is 168 bytes, CommCounters %d" % (
    ctypes.sizeof(CommCounters))

# gbObserver_t: void (*)(gbComm_t comm, const gbCollRecord_t* record, void* userData)
OBSERVER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(CollRecord), ctypes.c_void_p)

_P = ctypes.c_void_p
_I = ctypes.c_int
_Z = ctypes.c_size_t
# name -> argument types; every function returns gbResult_t unless listed in _RESTYPES.
_SIGNATURES = {
    "gbGetVersion": [ctypes.POINTER(_I)],
    "gbGetErrorString": [_I],
    "gbGetLastError": [_P],
    "gbGetUniqueId": [ctypes.POINTER(UniqueId)],
    "gbCommInitRank": [ctypes.POINTER(_P), _I, UniqueId, _I],
    "gbCommInitRankConfig": [ctypes.POINTER(_P), _I, UniqueId, _I, ctypes.POINTER(Config)],
    "gbCommInitFromEnv": [ctypes.POINTER(_P), ctypes.POINTER(Config)],
    "gbCommFinalize": [_P],
    "gbCommDestroy": [_P],
    "gbCommAbort": [_P],
    "gbCommGetAsyncError": [_P, ctypes.POINTER(_I)],
    "gbCommCount": [_P, ctypes.POINTER(_I)],
    "gbCommUserRank": [_P, ctypes.POINTER(_I)],
    "gbCommGetTopology": [_P, ctypes.POINTER(Topology)],
    "gbAllReduce": [_P, _P, _Z, _I, _I, _P, _P],
    "gbBroadcast": [_P, _P, _Z, _I, _I, _P, _P],
    "gbReduce": [_P, _P, _Z, _I, _I, _I, _P, _P],
    "gbAllGather": [_P, _P, _Z, _I, _P, _P],
    "gbReduceScatter": [_P, _P, _Z, _I, _I, _P, _P],
    "gbAllToAll": [_P, _P, _Z, _I, _P, _P],
    "gbSend": [_P, _Z, _I, _I, _P, _P],
    "gbRecv": [_P, _Z, _I, _I, _P, _P],
    "gbGroupStart": [],
    "gbGroupEnd": [],
    "gbBarrier": [_P, _P],
    "gbRedOpCreatePreMulSum": [ctypes.POINTER(_I), _P, _I, _I, _P],
    "gbRedOpDestroy": [_I, _P],
    "gbCommSplit": [_P, _I, _I, ctypes.POINTER(_P), ctypes.POINTER(Config)],
    "gbMemAlloc": [ctypes.POINTER(_P), _Z],
    "gbMemFree": [_P],
    "gbMemcpyToDevice": [_P, _P, _Z],
    "gbMemcpyToHost": [_P, _P, _Z],
    "gbStreamCreate": [ctypes.POINTER(_P)],
    "gbStreamSynchronize": [_P],
    "gbStreamDestroy": [_P],
    "gbGetDeviceInfo": [ctypes.POINTER(DeviceInfo)],
    "gbGetNetInterface": [ctypes.c_char_p, _Z, ctypes.c_char_p, _Z],
    "gbCommSetObserver": [_P, OBSERVER, _P],
    "gbCommGetInFlight": [_P, ctypes.POINTER(CollRecord), _I, ctypes.POINTER(_I)],
    "gbCommGetRecords": [_P, ctypes.POINTER(CollRecord), _I, ctypes.POINTER(_I)],
    "gbCollRecordPhase": [ctypes.POINTER(CollRecord)],
    "gbCommGetCounters": [_P, ctypes.POINTER(CommCounters)],
    "gbCommGetMemory": [_P, ctypes.POINTER(CommMemory)],
    "gbGetMemoryEstimate": [_I, _I, ctypes.POINTER(CommMemory)],
    "gbCommDumpTrace": [_P, ctypes.c_char_p, ctypes.c_char_p, _Z],
    "gbGetParamCount": [ctypes.POINTER(_I)],
    "gbGetParamInfo": [_I, ctypes.POINTER(ParamInfo)],
    "gbGetParamErrors": [ctypes.POINTER(ctypes.c_char_p)],
}
_RESTYPES = {"gbGetErrorString": ctypes.c_char_p, "gbGetLastError": ctypes.c_char_p,
             "gbCollRecordPhase": ctypes.c_char_p}

_lock = threading.Lock()
_handle = None
_path = None


def _candidates():
    env = os.environ.get("GPUBRIDGE_LIBRARY")
    if env:
        if os.path.isdir(env):
            return [os.path.join(env, "lib", "libgpubridge.so"), os.path.join(env, "libgpubridge.so")]
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    out = [os.path.join(here, "lib", SONAME)]
    checkout = os.path.dirname(os.path.dirname(here))
    if os.path.exists(os.path.join(checkout, "include", "gpubridge", "gpubridge.h")):
        out.append(os.path.join(checkout, "build", "lib", "libgpubridge.so"))
    out.append(SONAME)
    return out


def library():
    """The loaded CDLL (loaded on first use)."""
    global _handle, _path
    if _handle is not None:
        return _handle
    with _lock:
        if _handle is None:
            tried = []
            for cand in _candidates():
                if os.sep in cand and not os.path.exists(cand):
                    tried.append(cand + " (missing)")
                    continue
                try:
                    lib = ctypes.CDLL(cand, mode=ctypes.RTLD_LOCAL)
                except OSError as e:
                    tried.append("%s (%s)" % (cand, e))
                    continue
                _path = cand
                _handle = lib
                break
            if _handle is None:
                raise Error(SYSTEM_ERROR, "libgpubridge not found; tried: " + "; ".join(tried) +
                            ". Install the package (pip install .) or set GPUBRIDGE_LIBRARY to the .so "
                            "or to a build directory")
    return _handle


def library_path():
    library()
    return _path


def _loaded_file():
    """The file of the loaded library: the path it was loaded by, or, when the
    system loader found it by name, the file mapped into this process."""
    path = library_path()
    if os.sep in path:
        return os.path.abspath(path)
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                mapped = line.split(None, 5)[-1].strip()
                if os.path.basename(mapped).startswith("libgpubridge.so"):
                    return mapped
    except OSError:
        pass
    return path


def drop_in_path():
    """The drop-in NCCL ABI, libgpubridge-nccl.so, that lies next to the loaded
    libgpubridge (docs/DROP_IN.md): for LD_PRELOAD."""
    lib = _loaded_file()
    path = os.path.join(os.path.dirname(lib), DROP_IN)
    if not os.path.isabs(path) or not os.path.exists(path):
        raise Error(SYSTEM_ERROR, "%s is not next to the loaded library %s: install the package (pip install .), "
                    "or build the target gpubridge-nccl in the build directory that holds the library"
                    % (DROP_IN, lib))
    return path


_funcs = {}


def _fn(name):
    f = _funcs.get(name)
    if f is None:
        lib = library()
        try:
            f = getattr(lib, name)
        except AttributeError:
            raise Error(INVALID_USAGE, "%s is not in %s: this build of libgpubridge predates it; "
                        "rebuild the library from a newer source" % (name, _path)) from None
        f.argtypes = _SIGNATURES[name]
        f.restype = _RESTYPES.get(name, ctypes.c_int)
        _funcs[name] = f
    return f


def has(name):
    """Whether the loaded library exports the C function `name`."""
    try:
        _fn(name)
        return True
    except Error:
        return False


def _check(res, comm=None):
    if res != SUCCESS:
        # The text is thread-local in the library: read it on this thread, now.
        raw = _fn("gbGetLastError")(comm)
        raise Error(res, raw.decode("utf-8", "replace") if raw else "")


# ------------------------------------------------------------ version, errors

def get_version_code():
    """gbGetVersion's code, MAJOR * 10000 + MINOR * 100 + PATCH (NCCL's rule): 100 for 0.1.0."""
    v = _I()
    _check(_fn("gbGetVersion")(ctypes.byref(v)))
    return v.value


def get_version():
    """The loaded library's version as a string, "0.1.0"."""
    code = get_version_code()
    return "%d.%d.%d" % (code // 10000, code // 100 % 100, code % 100)


def get_error_string(result):
    raw = _fn("gbGetErrorString")(int(result))
    return raw.decode() if raw else ""


def get_last_error(comm=None):
    raw = _fn("gbGetLastError")(comm)
    return raw.decode("utf-8", "replace") if raw else ""


# -------------------------------------------------------------- communicators

def make_config(blocking=None, policy=None, transport=None, timeout_seconds=None, chunk_bytes=None,
                bridge_compression=None):
    """A gbConfig_t with unset fields left GB_CONFIG_UNDEF_INT (bridge_compression: "off", "bf16", "fp8")."""
    def v(x):
        return CONFIG_UNDEF_INT if x is None else int(x)
    if bridge_compression is not None:
        if bridge_compression not in COMPRESSIONS:
            raise Error(INVALID_ARGUMENT, "bridge_compression=%r: give one of %s" % (
                bridge_compression, ", ".join(COMPRESSIONS)))
        bridge_compression = COMPRESSIONS[bridge_compression]
    return Config(ctypes.sizeof(Config), CONFIG_MAGIC, get_version_code(), v(blocking), v(policy),
                  v(transport), v(timeout_seconds), v(chunk_bytes), v(bridge_compression))


def get_unique_id():
    """The 128 bytes of a new unique id (starts the rendezvous root in this process)."""
    uid = UniqueId()
    _check(_fn("gbGetUniqueId")(ctypes.byref(uid)))
    return ctypes.string_at(ctypes.addressof(uid), UNIQUE_ID_BYTES)


def _uid(raw):
    if len(raw) != UNIQUE_ID_BYTES:
        raise Error(INVALID_ARGUMENT, "a unique id has %d bytes, not %d" % (UNIQUE_ID_BYTES, len(raw)))
    uid = UniqueId()
    ctypes.memmove(ctypes.addressof(uid), bytes(raw), UNIQUE_ID_BYTES)
    return uid


def comm_init_rank(nranks, unique_id, rank):
    comm = _P()
    _check(_fn("gbCommInitRank")(ctypes.byref(comm), int(nranks), _uid(unique_id), int(rank)))
    return comm.value


def comm_init_rank_config(nranks, unique_id, rank, config):
    comm = _P()
    _check(_fn("gbCommInitRankConfig")(ctypes.byref(comm), int(nranks), _uid(unique_id), int(rank),
                                       ctypes.byref(config) if config is not None else None))
    return comm.value


def comm_init_from_env(config=None):
    comm = _P()
    _check(_fn("gbCommInitFromEnv")(ctypes.byref(comm), ctypes.byref(config) if config is not None else None))
    return comm.value


def _started(res, comm):
    """A non-blocking init's handle: gbInProgress (or gbSuccess) is a start."""
    if res not in (SUCCESS, IN_PROGRESS):
        _check(res)
    return comm.value


def comm_init_rank_start(nranks, unique_id, rank, config):
    """gbCommInitRankConfig with config.blocking = 0: the handle, its init still
    running (comm_get_async_error says when it is done)."""
    comm = _P()
    return _started(_fn("gbCommInitRankConfig")(ctypes.byref(comm), int(nranks), _uid(unique_id), int(rank),
                                                ctypes.byref(config)), comm)


def comm_init_from_env_start(config):
    """gbCommInitFromEnv with config.blocking = 0: as comm_init_rank_start."""
    comm = _P()
    return _started(_fn("gbCommInitFromEnv")(ctypes.byref(comm), ctypes.byref(config)), comm)


def comm_finalize(comm):
    _check(_fn("gbCommFinalize")(comm), comm)


def comm_destroy(comm):
    _check(_fn("gbCommDestroy")(comm))


def comm_abort(comm):
    _check(_fn("gbCommAbort")(comm))


def comm_get_async_error(comm):
    """The communicator's asynchronous state as a gbResult_t (does not raise for it)."""
    err = _I()
    _check(_fn("gbCommGetAsyncError")(comm, ctypes.byref(err)), comm)
    return err.value


def comm_count(comm):
    n = _I()
    _check(_fn("gbCommCount")(comm, ctypes.byref(n)), comm)
    return n.value


def comm_user_rank(comm):
    r = _I()
    _check(_fn("gbCommUserRank")(comm, ctypes.byref(r)), comm)
    return r.value


def comm_get_topology(comm):
    """The topology as a dict of plain Python values."""
    t = Topology()
    _check(_fn("gbCommGetTopology")(comm, ctypes.byref(t)), comm)
    n, ni = t.nranks, t.nislands
    return {
        "nranks": n, "rank": t.rank, "nislands": ni, "island": t.island,
        "run_kind": RUN_KINDS.get(t.runKind, str(t.runKind)),
        "policy": POLICIES.get(t.policy, str(t.policy)),
        "split_test": bool(t.splitTest),
        "island_of_rank": [t.islandOfRank[i] for i in range(n)],
        "leader_of_island": [t.leaderOfIsland[i] for i in range(ni)],
        "island_size": [t.islandSize[i] for i in range(ni)],
        "island_vendor": [t.islandVendor[i].decode() for i in range(ni)],
    }


def comm_split(comm, color, key, config=None):
    """The new communicator, or None for color SPLIT_NOCOLOR."""
    new = _P()
    _check(_fn("gbCommSplit")(comm, int(color), int(key), ctypes.byref(new),
                              ctypes.byref(config) if config is not None else None), comm)
    return new.value


def comm_split_start(comm, color, key, config=None):
    """comm_split for a child whose init is non-blocking (config.blocking = 0,
    or inherited from a parent made so): its handle, its init maybe still
    running (comm_get_async_error says when it is done), or None."""
    new = _P()
    res = _fn("gbCommSplit")(comm, int(color), int(key), ctypes.byref(new),
                             ctypes.byref(config) if config is not None else None)
    if res not in (SUCCESS, IN_PROGRESS):
        _check(res, comm)
    return new.value


# ---------------------------------------------------------------- collectives

def all_reduce(send, recv, count, dtype, op, comm, stream):
    _check(_fn("gbAllReduce")(send, recv, count, dtype, op, comm, stream), comm)


def broadcast(send, recv, count, dtype, root, comm, stream):
    _check(_fn("gbBroadcast")(send, recv, count, dtype, root, comm, stream), comm)


def reduce(send, recv, count, dtype, op, root, comm, stream):
    _check(_fn("gbReduce")(send, recv, count, dtype, op, root, comm, stream), comm)


def all_gather(send, recv, sendcount, dtype, comm, stream):
    _check(_fn("gbAllGather")(send, recv, sendcount, dtype, comm, stream), comm)


def reduce_scatter(send, recv, recvcount, dtype, op, comm, stream):
    _check(_fn("gbReduceScatter")(send, recv, recvcount, dtype, op, comm, stream), comm)


def all_to_all(send, recv, count, dtype, comm, stream):
    _check(_fn("gbAllToAll")(send, recv, count, dtype, comm, stream), comm)


def send(buf, count, dtype, peer, comm, stream):
    _check(_fn("gbSend")(buf, count, dtype, peer, comm, stream), comm)


def recv(buf, count, dtype, peer, comm, stream):
    _check(_fn("gbRecv")(buf, count, dtype, peer, comm, stream), comm)


def group_start():
    _check(_fn("gbGroupStart")())


def group_end():
    _check(_fn("gbGroupEnd")())


def barrier(comm, stream):
    _check(_fn("gbBarrier")(comm, stream), comm)


def red_op_create_pre_mul_sum(scalar, dtype, residence, comm):
    """A new gbRedOp_t summing scalar * x; scalar is the address of one element of dtype."""
    op = _I()
    _check(_fn("gbRedOpCreatePreMulSum")(ctypes.byref(op), scalar, dtype, residence, comm), comm)
    return op.value


def red_op_destroy(op, comm):
    _check(_fn("gbRedOpDestroy")(int(op), comm), comm)


# ------------------------------------------------------------- device helpers

def mem_alloc(size):
    p = _P()
    _check(_fn("gbMemAlloc")(ctypes.byref(p), size))
    return p.value


def mem_free(ptr):
    _check(_fn("gbMemFree")(ptr))


def memcpy_to_device(dst, src, size):
    _check(_fn("gbMemcpyToDevice")(dst, src, size))


def memcpy_to_host(dst, src, size):
    _check(_fn("gbMemcpyToHost")(dst, src, size))


def stream_create():
    s = _P()
    _check(_fn("gbStreamCreate")(ctypes.byref(s)))
    return s.value


def stream_synchronize(stream):
    _check(_fn("gbStreamSynchronize")(stream))


def stream_destroy(stream):
    _check(_fn("gbStreamDestroy")(stream))


def get_device_info():
    """This process's device: {"backend": "cuda"|"hip"|"host", "vendor": ..., "run_kind": ...}."""
    info = DeviceInfo()
    _check(_fn("gbGetDeviceInfo")(ctypes.byref(info)))
    return {"backend": info.backend.decode(), "vendor": info.vendor.decode(),
            "run_kind": RUN_KINDS.get(info.runKind, str(info.runKind))}


def get_net_interface():
    """(name, address) of the interface this process's communicators would listen on."""
    name, addr = ctypes.create_string_buffer(64), ctypes.create_string_buffer(96)
    _check(_fn("gbGetNetInterface")(name, len(name), addr, len(addr)))
    return name.value.decode(), addr.value.decode()


# ------------------------------------------------------------ flight recorder

def comm_set_observer(comm, fn, user_data=None):
    """fn: an OBSERVER (keep it alive while set), or None to remove; returns once no
    call of the previous observer runs."""
    _check(_fn("gbCommSetObserver")(comm, fn if fn is not None else OBSERVER(), user_data), comm)


def _records(name, comm, max_records):
    buf = (CollRecord * max(1, int(max_records)))()
    n = _I()
    _check(_fn(name)(comm, buf, int(max_records), ctypes.byref(n)), comm)
    return [buf[i] for i in range(n.value)]


def comm_get_in_flight(comm, max_records=64):
    """comm's records still in flight, oldest first: a list of CollRecord."""
    return _records("gbCommGetInFlight", comm, max_records)


def comm_get_records(comm, max_records=64):
    """comm's newest max_records records (in flight or not), oldest first: a list of CollRecord."""
    return _records("gbCommGetRecords", comm, max_records)


def coll_record_phase(record):
    """The phase of a CollRecord: check, island, staged, bridge, copy-back, done or failed."""
    raw = _fn("gbCollRecordPhase")(ctypes.byref(record))
    return raw.decode() if raw else ""


def comm_get_counters(comm):
    c = CommCounters()
    c.size, c.version = ctypes.sizeof(CommCounters), 1
    _check(_fn("gbCommGetCounters")(comm, ctypes.byref(c)), comm)
    return c


def comm_get_memory(comm):
    m = CommMemory()
    _check(_fn("gbCommGetMemory")(comm, ctypes.byref(m)), comm)
    return m


def get_memory_estimate(ranks, gpu):
    """What a rank of `ranks` on one host in two islands would hold under the current settings (CommMemory)."""
    m = CommMemory()
    _check(_fn("gbGetMemoryEstimate")(ranks, 1 if gpu else 0, ctypes.byref(m)))
    return m


def comm_dump_trace(comm, dir=None):
    """Writes comm's flight recorder into dir (None: GPUBRIDGE_TRACE_DIR); returns the file's path."""
    path = ctypes.create_string_buffer(4096)
    _check(_fn("gbCommDumpTrace")(comm, os.fsencode(dir) if dir is not None else None, path, len(path)), comm)
    return os.fsdecode(path.value)


# -------------------------------------------------------------- configuration

def get_param_count():
    n = _I()
    _check(_fn("gbGetParamCount")(ctypes.byref(n)))
    return n.value


def get_param_info(index):
    """GPUBRIDGE_* parameter `index` (0 .. get_param_count()-1) as a dict; error is None unless its value is invalid."""
    p = ParamInfo()
    _check(_fn("gbGetParamInfo")(int(index), ctypes.byref(p)))

    def text(raw):
        return raw.decode("utf-8", "replace") if raw is not None else None
    return {"name": text(p.name), "type": text(p.type), "default": text(p.defaultValue), "value": text(p.value),
            "error": text(p.error), "is_set": bool(p.isSet), "must_agree": bool(p.mustAgree), "doc": text(p.doc)}


def get_param_errors():
    """Every invalid GPUBRIDGE_* value, one per line; "" when all are valid (communicator init fails otherwise)."""
    text = ctypes.c_char_p()
    _check(_fn("gbGetParamErrors")(ctypes.byref(text)))
    return text.value.decode("utf-8", "replace") if text.value else ""
