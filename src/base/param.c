/* The GPUBRIDGE_* parameter table, read once from the environment. */
#include "base/param.h"
#include "base/suggest.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>


#define KIB ((int64_t)1024)
#define MIB (KIB * 1024)
#define GIB (MIB * 1024)
#define TIB (GIB * 1024)
#define ERR_LEN 512
#define UNIQUE_ID_HEX 256

static const char* const levelChoices[] = {"NONE", "WARN", "INFO", "TRACE", NULL};
/* Same order as gbPolicy_t and gbTransport_t: the value is the index. */
static const char* const policyChoices[] = {"auto", "hierarchical", "native", "flat", "split-rail", "tuned", NULL};
static const char* const transportChoices[] = {"tcp", "ucx", NULL};
/* Same order as gbSplitTest_t. */
/* Same order as the cuda and hip devices' flag modes, strongest first. */
static const char* const flagChoices[] = {"auto", "64", "32", "host", NULL};
static const char* const shmChoices[] = {"off", "auto", NULL};
static const char* const bridgeSlotChoices[] = {"off", "auto", NULL};
static const char* const exchangeChoices[] = {"off", "auto", "on", NULL};
static const char* const compressionChoices[] = {"off", "bf16", "fp8", NULL}; /* gbCompression_t */
static const char* const checkChoices[] = {"off", "on", "auto", NULL};
static const char* const splitChoices[] = {"off", "half", "alternate", "node", NULL};
/* Same order as choose.c's backend values. */
static const char* const backendChoices[] = {"auto", "cuda", "hip", "host", NULL};
/* Same order as trace/watch.c's signal numbers. */
static const char* const traceSignalChoices[] = {"off", "USR1", "USR2", NULL};
/* Same order as trace/trace.h's GB_TRACE_DONE_*. */
static const char* const traceDoneChoices[] = {"auto", "marker", "flag", NULL};

static const gbParamDesc_t table[GB_PARAM_COUNT] = {
    [GB_PARAM_DEBUG] = {"GPUBRIDGE_DEBUG", GB_PARAM_ENUM, "WARN", levelChoices, 0, 0, 0,
                        "Log level: NONE, WARN, INFO or TRACE (case-insensitive). The drop-in "
                        "(libgpubridge-nccl) reads NCCL_DEBUG where this is unset (docs/DROP_IN.md)."},
    [GB_PARAM_DEBUG_SUBSYS] = {"GPUBRIDGE_DEBUG_SUBSYS", GB_PARAM_STRING, "ALL", NULL, 0, 0, 0,
                               "Subsystems logged at INFO and TRACE: comma list of INIT, BOOT, NET, "
                               "COLL, PROXY, DEVICE, ENV, ALL; a leading ^ logs all but those. The drop-in reads "
                               "NCCL_DEBUG_SUBSYS where this is unset (docs/DROP_IN.md)."},
    [GB_PARAM_DEBUG_FILE] = {"GPUBRIDGE_DEBUG_FILE", GB_PARAM_STRING, "", NULL, 0, 0, 0,
                             "Log to this file (appended) instead of stderr; %h is the host name, %p the pid."},
    [GB_PARAM_VENDOR] = {"GPUBRIDGE_VENDOR", GB_PARAM_STRING, "", NULL, 0, 0, 0,
                         "Run this rank on a simulated GPU of this vendor island (nvidia, amd, ...): "
                         "1 to 15 characters of a-z, 0-9, _ and -."},
    [GB_PARAM_POLICY] = {"GPUBRIDGE_POLICY", GB_PARAM_ENUM, "auto", policyChoices, 0, 0, 1,
                         "How collectives cross islands: auto, hierarchical, native (one island), "
                         "flat (every rank through the host: the reference), split-rail (all-reduce over k "
                         "parallel bridge links) or tuned (GPUBRIDGE_THRESHOLDS)."},
    [GB_PARAM_TRANSPORT] = {"GPUBRIDGE_TRANSPORT", GB_PARAM_ENUM, "tcp", transportChoices, 0, 0, 1,
                            "Transport between ranks: tcp (sockets; shared memory between ranks of one host) or "
                            "ucx (UCX, loaded at run time: RDMA on InfiniBand and RoCE; docs/UCX.md). Every rank "
                            "must use the same."},
    [GB_PARAM_TIMEOUT] = {"GPUBRIDGE_TIMEOUT", GB_PARAM_INT, "300", NULL, 1, 86400, 1,
                          "Seconds any wait (init, collective, finalize) may take before it fails with a timeout."},
    [GB_PARAM_SOCKET_IFNAME] = {"GPUBRIDGE_SOCKET_IFNAME", GB_PARAM_STRING, "", NULL, 0, 0, 0,
                                "Network interfaces to use, as NCCL_SOCKET_IFNAME: prefix list, ^ excludes, "
                                "= exact names; empty picks one. The drop-in reads NCCL_SOCKET_IFNAME where "
                                "this is unset."},
    [GB_PARAM_NSOCKS_PERPEER] = {"GPUBRIDGE_NSOCKS_PERPEER", GB_PARAM_INT, "2", NULL, 1, 16, 1,
                                 "TCP sockets per bridge peer; a message is split across them."},
    [GB_PARAM_CHUNK_BYTES] = {"GPUBRIDGE_CHUNK_BYTES", GB_PARAM_SIZE, "1M", NULL, 4 * KIB, GIB, 1,
                              "Pipeline chunk of a bridged collective, in bytes (K, M, G suffixes); unset on GPUs: by message size (8M below 64M, else 16M)."},
    [GB_PARAM_STAGING_SLOTS] = {"GPUBRIDGE_STAGING_SLOTS", GB_PARAM_INT, "4", NULL, 2, 64, 1,
                                "Host staging slots per communicator: chunks in flight in the pipeline; unset on GPUs: 2."},
    [GB_PARAM_RING_MIN_BYTES] = {"GPUBRIDGE_RING_MIN_BYTES", GB_PARAM_SIZE, "64K", NULL, 0, TIB, 1,
                                 "Host all-reduces and reduces of at least this many bytes use the ring (two members: "
                                 "still x0 op x1); smaller ones one exchange round (docs/REDUCTION_ORDER.md)."},
    [GB_PARAM_JOB_SECRET] = {"GPUBRIDGE_JOB_SECRET", GB_PARAM_STRING, "", NULL, 0, 0, 0,
                             "Shared secret of the job for gbCommInitFromEnv; ranks without it are refused."},
    [GB_PARAM_UNIQUE_ID] = {"GPUBRIDGE_UNIQUE_ID", GB_PARAM_STRING, "", NULL, 0, 0, 0,
                            "A unique id as 256 hex digits, for gbCommInitFromEnv."},
    [GB_PARAM_SIM_HOST] = {"GPUBRIDGE_SIM_HOST", GB_PARAM_STRING, "", NULL, 0, 0, 0,
                           "Pretend host name, so that one machine can simulate several hosts."},
    [GB_PARAM_SPLIT_TEST] = {"GPUBRIDGE_SPLIT_TEST", GB_PARAM_ENUM, "off", splitChoices, 0, 0, 1,
                             "Testing only: relabel a one-vendor job into two islands: half (ranks below "
                             "n/2 and the rest), alternate (even and odd ranks), node (one island per host)."},
    [GB_PARAM_DEVICE] = {"GPUBRIDGE_DEVICE", GB_PARAM_INT, "-1", NULL, -1, 1023, 0,
                         "GPU index this rank uses; -1 takes the launcher's local rank modulo the GPUs visible."},
    [GB_PARAM_CUDART_LIBRARY] = {"GPUBRIDGE_CUDART_LIBRARY", GB_PARAM_STRING, "", NULL, 0, 0, 0,
                                 "Path or name of the CUDA runtime to load; empty tries libcudart.so.13, .12, then "
                                 "libcudart.so."},
    [GB_PARAM_CUDA_LIBRARY] = {"GPUBRIDGE_CUDA_LIBRARY", GB_PARAM_STRING, "", NULL, 0, 0, 0,
                               "Path or name of the CUDA driver library to load; empty loads libcuda.so.1."},
    [GB_PARAM_NCCL_LIBRARY] = {"GPUBRIDGE_NCCL_LIBRARY", GB_PARAM_STRING, "", NULL, 0, 0, 0,
                               "Path or name of NCCL to load for NVIDIA islands; empty loads libnccl.so.2."},
    [GB_PARAM_DEVICE_BACKEND] = {"GPUBRIDGE_DEVICE_BACKEND", GB_PARAM_ENUM, "auto", backendChoices, 0, 0, 0,
                                 "Which device a rank opens when GPUBRIDGE_VENDOR is unset: auto (CUDA, then HIP, "
                                 "then the CPU), cuda or hip (that GPU, else an error), host (the CPU)."},
    [GB_PARAM_HIP_LIBRARY] = {"GPUBRIDGE_HIP_LIBRARY", GB_PARAM_STRING, "", NULL, 0, 0, 0,
                              "Path or name of the HIP runtime to load; empty tries libamdhip64.so.7, .6, then "
                              "libamdhip64.so."},
    [GB_PARAM_RCCL_LIBRARY] = {"GPUBRIDGE_RCCL_LIBRARY", GB_PARAM_STRING, "", NULL, 0, 0, 0,
                               "Path or name of RCCL to load for AMD islands; empty loads librccl.so.1."},
    [GB_PARAM_STREAM_FLAGS] = {"GPUBRIDGE_STREAM_FLAGS", GB_PARAM_ENUM, "auto", flagChoices, 0, 0, 0,
                               "How GPU streams signal and wait on the bridge: auto (the best the GPU offers), "
                               "64 or 32 (stream memory operations), host (host functions); for testing fallbacks."},
    [GB_PARAM_CHECK_CALLS] = {"GPUBRIDGE_CHECK_CALLS", GB_PARAM_ENUM, "auto", checkChoices, 0, 0, 1,
                              "on: before each call, ranks compare what they called (collective, count, type, "
                              "op, root, send/recv pairs) and all fail alike on a mismatch; off: trust the "
                              "program (saves a host round trip per call); auto: on unless the communicator is "
                              "one island running native (the vendor library's own behaviour and speed)."},
    [GB_PARAM_SHM] = {"GPUBRIDGE_SHM", GB_PARAM_ENUM, "auto", shmChoices, 0, 0, 0,
                      "Peers on the same host: auto moves messages through shared-memory rings (the TCP "
                      "connection stays, to notice a peer that dies); off keeps them on TCP."},
    [GB_PARAM_HIPRTC_LIBRARY] = {"GPUBRIDGE_HIPRTC_LIBRARY", GB_PARAM_STRING, "", NULL, 0, 0, 0,
                                 "Path or name of HIP's run-time compiler, which builds the bridge's reduction "
                                 "kernel on AMD GPUs; empty tries libhiprtc.so.7, .6, then libhiprtc.so."},
    [GB_PARAM_BRIDGE_SLOTS] = {"GPUBRIDGE_BRIDGE_SLOTS", GB_PARAM_ENUM, "auto", bridgeSlotChoices, 0, 0, 1,
                               "Bridge members on one host: auto shares one pinned staging segment (each "
                               "member's GPU copies its chunk there and reduces the others' chunks from it; "
                               "the proxy moves only counters); off sends chunks over the host transport."},
    [GB_PARAM_EXCHANGE] = {"GPUBRIDGE_EXCHANGE", GB_PARAM_ENUM, "auto", exchangeChoices, 0, 0, 1,
                           "Small all-reduces over shared slots (up to 1M): auto lets each rank's stream exchange "
                           "them alone (one kernel, no host thread), unless two ranks time-slice one GPU (no "
                           "MPS), where a spinning kernel keeps its slice; on: also there; off: the slots' "
                           "copy path."},
    [GB_PARAM_BRIDGE_COMPRESSION] = {"GPUBRIDGE_BRIDGE_COMPRESSION", GB_PARAM_ENUM, "off", compressionChoices, 0, 0,
                                     1, "Floating-point all-reduce and reduce-scatter cross the bridge narrowed: "
                                     "bf16 (float32 as bfloat16) or fp8 (float32, float16, bfloat16 as e4m3 with "
                                     "a power-of-two scale per 256 elements); islands keep full precision and "
                                     "every rank gets the same bits (docs/REDUCTION_ORDER.md gives the error "
                                     "bounds). off: as they are."},
    [GB_PARAM_RAILS] = {"GPUBRIDGE_RAILS", GB_PARAM_INT, "0", NULL, 0, 64, 1,
                        "split-rail: the most bridge links (rails) to use; 0: one per member of the smallest "
                        "island."},
    [GB_PARAM_THRESHOLDS] = {"GPUBRIDGE_THRESHOLDS", GB_PARAM_STRING, "", NULL, 0, 0, 0,
                             "Thresholds file for policy tuned (written by gpubridge-perf --tune): which policy "
                             "each collective uses by message size. Every rank must read identical contents."},
    [GB_PARAM_LIBRARY] = {"GPUBRIDGE_LIBRARY", GB_PARAM_STRING, "", NULL, 0, 0, 0,
                          "Python package only: the libgpubridge.so (or a build folder holding it) to load "
                          "instead of the one installed with the package; the library itself ignores it."},
    [GB_PARAM_VENDORS] = {"GPUBRIDGE_VENDORS", GB_PARAM_STRING, "", NULL, 0, 0, 0,
                          "Simulated vendor of every rank, for any launcher: LABEL:COUNT blocks in rank order "
                          "(nvidia:2,amd:2) or one LABEL per rank (nvidia,amd,...), as gpubridge-run --vendors; "
                          "each process takes the label of its launcher rank (RANK, SLURM_PROCID, "
                          "OMPI_COMM_WORLD_RANK); the counts must add up to the world size. A rank's own "
                          "GPUBRIDGE_VENDOR wins."},
    [GB_PARAM_TRACE_BUFFER] = {"GPUBRIDGE_TRACE_BUFFER", GB_PARAM_INT, "2048", NULL, 0, 1048576, 0,
                               "Collectives each communicator's flight recorder keeps (rounded up to a power of "
                               "two; 192 bytes each); 0: off."},
    [GB_PARAM_TRACE_DIR] = {"GPUBRIDGE_TRACE_DIR", GB_PARAM_STRING, "", NULL, 0, 0, 0,
                            "Where every rank writes its flight-recorder dump (gpubridge-trace-ID-rRANK.json) "
                            "on a timeout, a peer's failure, gbCommAbort or GPUBRIDGE_TRACE_SIGNAL; empty: no "
                            "dump files (gpubridge-info --trace DIR reads them)."},
    [GB_PARAM_TRACE_SIGNAL] = {"GPUBRIDGE_TRACE_SIGNAL", GB_PARAM_ENUM, "off", traceSignalChoices, 0, 0, 0,
                               "A signal (USR1 or USR2) that makes every communicator of the process write its "
                               "flight recorder to GPUBRIDGE_TRACE_DIR; off: none."},
    [GB_PARAM_TRACE_DONE] = {"GPUBRIDGE_TRACE_DONE", GB_PARAM_ENUM, "auto", traceDoneChoices, 0, 0, 0,
                             "How the flight recorder learns that a call's stream work ended: marker: a host "
                             "function on the stream (exact; the simulated device only); flag: a stream write "
                             "of a host-mapped flag that a thread polls every 1 ms while calls are in flight; "
                             "auto: marker where the device runs host functions, else flag (GPUs)."},
    [GB_PARAM_LAUNCHER] = {"GPUBRIDGE_LAUNCHER", GB_PARAM_STRING, "", NULL, 0, 0, 0,
                           "Set by gpubridge-run (to gpubridge-run) for its ranks, so that log lines name the "
                           "launcher of RANK and WORLD_SIZE, which torchrun sets too; not a setting."},
    [GB_PARAM_UCX_LIBRARY] = {"GPUBRIDGE_UCX_LIBRARY", GB_PARAM_STRING, "", NULL, 0, 0, 0,
                              "Path or name of UCX's UCP library, loaded when GPUBRIDGE_TRANSPORT=ucx; empty: "
                              "libucp.so.0."},
};

const gbParamLauncher_t gbParamLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_JOB_ID"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_ess_base_jobid"},
};
const int gbParamLauncherCount = (int)(sizeof(gbParamLaunchers) / sizeof(gbParamLaunchers[0]));

/* Words after the range in an INT error. */
static const char* intUnit(gbParamId_t id) { return id == GB_PARAM_TIMEOUT ? "seconds" : NULL; }

/* Which values hold a secret: never printed. */
static int isSecret(gbParamId_t id) { return id == GB_PARAM_JOB_SECRET || id == GB_PARAM_UNIQUE_ID; }

typedef struct {
  int set;       /* present and non-empty in the environment */
  int valid;
  char* text;    /* the environment's text when set */
  int64_t value; /* parsed value, or the default's when unset or invalid */
  int derived;   /* GPUBRIDGE_VENDOR taken from GPUBRIDGE_VENDORS */
} paramState_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int loaded;
static paramState_t state[GB_PARAM_COUNT];
static char* errors;  /* one line per invalid value */
/* Warnings are emitted after the read, outside the lock: logging itself reads
 * this table. They go to the sink the log sets (base/log.c); until it has
 * set one they wait. */
static char* pendingWarn;
static atomic_int warnPending;
static _Atomic(gbParamWarnSink_t) warnSink;

const gbParamDesc_t* gbParamDesc(gbParamId_t id) {
  return ((int)id >= 0 && id < GB_PARAM_COUNT) ? &table[id] : NULL;
}

static void formatSize(int64_t v, char* buf, size_t len) {
  static const struct { int64_t unit; const char* suffix; } units[] = {{TIB, "T"}, {GIB, "G"}, {MIB, "M"}, {KIB, "K"}};
  for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
    if (v != 0 && v % units[i].unit == 0) {
      snprintf(buf, len, "%lld%s", (long long)(v / units[i].unit), units[i].suffix);
      return;
    }
  snprintf(buf, len, "%lld", (long long)v);
}

static int parseInt(const char* text, int64_t* out) {
  if (!isdigit((unsigned char)text[0]) && !((text[0] == '-' || text[0] == '+') && isdigit((unsigned char)text[1])))
    return -1;
  char* end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0') return -1;
  *out = v;
  return 0;
}

/* Digits, then an optional K/M/G/T (1024-based), then an optional B or iB. */
static int parseSize(const char* text, int64_t* out) {
  if (!isdigit((unsigned char)text[0])) return -1;
  char* end;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno != 0) return -1;
  int64_t mult = 1;
  switch (toupper((unsigned char)*end)) {
    case 'K': mult = KIB; end++; break;
    case 'M': mult = MIB; end++; break;
    case 'G': mult = GIB; end++; break;
    case 'T': mult = TIB; end++; break;
    default: break;
  }
  if (mult != 1 && (end[0] == 'i' || end[0] == 'I') && (end[1] == 'b' || end[1] == 'B')) end += 2;
  else if (end[0] == 'b' || end[0] == 'B') end++;
  if (*end != '\0') return -1;
  if (v > (unsigned long long)(INT64_MAX / mult)) return -1;
  *out = (int64_t)v * mult;
  return 0;
}

static const char* subsysNames[] = {"INIT", "BOOT", "NET", "COLL", "PROXY", "DEVICE", "ENV", "ALL", NULL};

static int checkSubsys(const char* text, char* bad, size_t badLen) {
  if (*text == '^') text++;
  while (1) {
    size_t n = strcspn(text, ",");
    int ok = 0;
    for (int i = 0; subsysNames[i]; i++)
      if (strlen(subsysNames[i]) == n && strncasecmp(text, subsysNames[i], n) == 0) ok = 1;
    if (!ok) {
      snprintf(bad, badLen, "%.*s", (int)(n < 64 ? n : 64), text);
      return -1;
    }
    if (text[n] == '\0') return 0;
    text += n + 1;
  }
}

static int labelValid(const char* text, size_t n) {
  if (n < 1 || n > GB_PARAM_VENDOR_LABEL_MAX) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = text[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return 0;
  }
  return 1;
}

static int checkVendor(const char* text) { return labelValid(text, strlen(text)) ? 0 : -1; }

/* Walks a vendor list: the number of ranks it names, or -1 (err says why).
 * With label != NULL, copies the label of rank there when spec reaches it. */
static int walkVendors(const char* spec, int rank, char* label, char* err, size_t errLen) {
  int total = 0;
  const char* p = spec;
  if (err && errLen) err[0] = '\0';
  for (;;) {
    const char* end = p + strcspn(p, ",");
    const char* colon = memchr(p, ':', (size_t)(end - p));
    size_t labelLen = (size_t)((colon ? colon : end) - p);
    if (!labelValid(p, labelLen)) {
      if (err)
        snprintf(err, errLen, "bad label '%.*s': want 1 to %d characters of a-z, 0-9, _ and -, as in "
                 "nvidia:2,amd:2 or nvidia,amd", (int)(labelLen < 64 ? labelLen : 64), p, GB_PARAM_VENDOR_LABEL_MAX);
      return -1;
    }
    long count = 1;
    if (colon) {
      char* numEnd;
      errno = 0;
      count = isdigit((unsigned char)colon[1]) ? strtol(colon + 1, &numEnd, 10) : -1;
      if (count < 1 || errno || numEnd != end || count > GB_PARAM_VENDORS_MAX_RANKS) {
        if (err)
          snprintf(err, errLen, "bad count '%.*s' after '%.*s:': want a whole number from 1 to %d",
                   (int)((size_t)(end - colon - 1) < 32 ? (size_t)(end - colon - 1) : 32), colon + 1, (int)labelLen, p,
                   GB_PARAM_VENDORS_MAX_RANKS);
        return -1;
      }
    }
    if (total + count > GB_PARAM_VENDORS_MAX_RANKS) {
      if (err) snprintf(err, errLen, "more than %d ranks", GB_PARAM_VENDORS_MAX_RANKS);
      return -1;
    }
    if (label && rank >= total && rank < total + count) {
      memcpy(label, p, labelLen);
      label[labelLen] = '\0';
    }
    total += (int)count;
    if (*end == '\0') return total;
    p = end + 1;
  }
}

int gbParamVendorsParse(const char* spec, char* err, size_t errLen) {
  if (!spec) {
    if (err) snprintf(err, errLen, "no list");
    return -1;
  }
  return walkVendors(spec, -1, NULL, err, errLen);
}

int gbParamVendorsLabel(const char* spec, int rank, char label[GB_PARAM_VENDOR_LABEL_MAX + 1]) {
  label[0] = '\0';
  if (!spec || rank < 0) return -1;
  int total = walkVendors(spec, rank, label, NULL, 0);
  return total > rank ? 0 : -1;
}

int gbParamParse(gbParamId_t id, const char* text, int64_t* value, char* err, size_t errLen) {
  const gbParamDesc_t* d = gbParamDesc(id);
  char lo[32], hi[32], bad[80];
  int64_t v = 0;
  if (!d || !text) {
    snprintf(err, errLen, "unknown parameter %d", (int)id);
    return -1;
  }
  switch (d->type) {
    case GB_PARAM_INT:
      if (parseInt(text, &v) != 0 || v < d->min || v > d->max) {
        const char* unit = intUnit(id);
        snprintf(err, errLen, "%s=%s is not an integer in [%lld, %lld]%s%s%s", d->name, text,
                 (long long)d->min, (long long)d->max, unit ? " (" : "", unit ? unit : "", unit ? ")" : "");
        return -1;
      }
      break;
    case GB_PARAM_SIZE:
      if (parseSize(text, &v) != 0 || v < d->min || v > d->max) {
        formatSize(d->min, lo, sizeof(lo));
        formatSize(d->max, hi, sizeof(hi));
        snprintf(err, errLen, "%s=%s is not a size in [%s, %s] (bytes, with an optional K, M, G or T suffix)",
                 d->name, text, lo, hi);
        return -1;
      }
      break;
    case GB_PARAM_ENUM: {
      int i;
      for (i = 0; d->choices[i]; i++)
        if (strcasecmp(text, d->choices[i]) == 0) break;
      if (!d->choices[i]) {
        size_t o = (size_t)snprintf(err, errLen, "%s=%s is not one of ", d->name, text);
        int best = -1, bestDistance = 0;
        for (int k = 0; d->choices[k] && o < errLen; k++) {
          o += (size_t)snprintf(err + o, errLen - o, "%s%s", k ? ", " : "", d->choices[k]);
          int dist = gbSuggestDistance(text, strlen(text), d->choices[k]);
          if (best < 0 || dist < bestDistance) best = k, bestDistance = dist;
        }
        if (best >= 0 && gbSuggestClose(strlen(text), bestDistance) && o < errLen)
          snprintf(err + o, errLen - o, " (did you mean %s?)", d->choices[best]);
        return -1;
      }
      v = i;
      break;
    }
    case GB_PARAM_STRING:
      if (id == GB_PARAM_DEBUG_SUBSYS && checkSubsys(text, bad, sizeof(bad)) != 0) {
        snprintf(err, errLen,
                 "%s=%s names an unknown subsystem '%s'; use a comma list of INIT, BOOT, NET, COLL, "
                 "PROXY, DEVICE, ENV, ALL, optionally after a ^", d->name, text, bad);
        return -1;
      }
      if (id == GB_PARAM_VENDOR && text[0] && checkVendor(text) != 0) {
        /* A list by rank (nvidia:2,amd:2) is GPUBRIDGE_VENDORS' syntax. */
        int list = strpbrk(text, ":,") != NULL && gbParamVendorsParse(text, NULL, 0) > 0;
        snprintf(err, errLen, "%s=%s is not 1 to 15 characters of a-z, 0-9, _ and - (e.g. nvidia, amd)%s",
                 d->name, text, list ? "; a list by rank such as this one goes in GPUBRIDGE_VENDORS (did you mean "
                                       "GPUBRIDGE_VENDORS?)" : "");
        return -1;
      }
      char why[200];
      if (id == GB_PARAM_VENDORS && text[0] && gbParamVendorsParse(text, why, sizeof(why)) < 0) {
        snprintf(err, errLen, "%s=%s: %s", d->name, text, why);
        return -1;
      }
      if (id == GB_PARAM_UNIQUE_ID && text[0]) {
        size_t n = strlen(text), k = 0;
        while (k < n && isxdigit((unsigned char)text[k])) k++;
        if (n != UNIQUE_ID_HEX || k != n) {
          /* The id holds the job secret: describe it, never echo it. */
          if (n != UNIQUE_ID_HEX)
            snprintf(err, errLen, "%s holds %zu characters, not %d hex digits (pass the id as gbGetUniqueId made it)",
                     d->name, n, UNIQUE_ID_HEX);
          else
            snprintf(err, errLen, "%s holds a non-hex character at position %zu (it must be %d hex digits)",
                     d->name, k, UNIQUE_ID_HEX);
          return -1;
        }
      }
      break;
  }
  if (value) *value = v;
  return 0;
}

static void appendLine(char** buf, const char* line) {
  size_t old = *buf ? strlen(*buf) : 0, add = strlen(line);
  char* p = realloc(*buf, old + add + 2);
  if (!p) return;
  if (old) p[old++] = '\n';
  memcpy(p + old, line, add + 1);
  *buf = p;
}

/* A launcher variable's whole number, or -1 (unset or unreadable). */
static long launcherInt(const char* name) {
  const char* v = getenv(name);
  if (!v || !isdigit((unsigned char)v[0])) return -1;
  char* end;
  errno = 0;
  long x = strtol(v, &end, 10);
  return (errno || *end || x > (1L << 30)) ? -1 : x;
}

/* GPUBRIDGE_VENDORS gives this process its GPUBRIDGE_VENDOR by its launcher
 * rank, unless GPUBRIDGE_VENDOR is set. A list that does not fit the job is
 * an error that every rank reports in the start-up verdict; the rank is then
 * labelled as for an invalid GPUBRIDGE_VENDOR (simulated, not a CPU rank). */
static void applyVendors(void) {
  paramState_t* list = &state[GB_PARAM_VENDORS];
  paramState_t* mine = &state[GB_PARAM_VENDOR];
  if (!list->set || mine->set) return;
  mine->set = 1; /* invalid unless the list gives a label below */
  if (!list->valid) return; /* its error is recorded already */
  int total = gbParamVendorsParse(list->text, NULL, 0);
  const gbParamLauncher_t* l = NULL;
  for (int i = 0; i < gbParamLauncherCount && !l; i++)
    if (getenv(gbParamLaunchers[i].rank) && getenv(gbParamLaunchers[i].rank)[0]) l = &gbParamLaunchers[i];
  long rank = l ? launcherInt(l->rank) : -1, size = l ? launcherInt(l->size) : -1;
  char err[ERR_LEN], label[GB_PARAM_VENDOR_LABEL_MAX + 1];
  if (!l)
    snprintf(err, sizeof(err), "GPUBRIDGE_VENDORS=%s needs this process's rank from its launcher (RANK, "
             "SLURM_PROCID or OMPI_COMM_WORLD_RANK), and none is set; set GPUBRIDGE_VENDOR on each rank instead",
             list->text);
  else if (rank < 0)
    snprintf(err, sizeof(err), "GPUBRIDGE_VENDORS=%s needs this process's rank, but %s=%s is not one", list->text,
             l->rank, getenv(l->rank));
  else if (size >= 0 && size != total)
    snprintf(err, sizeof(err), "GPUBRIDGE_VENDORS=%s names %d rank%s, but %s=%ld; give it counts that add up to "
             "the number of ranks", list->text, total, total == 1 ? "" : "s", l->size, size);
  else if (rank >= total)
    snprintf(err, sizeof(err), "GPUBRIDGE_VENDORS=%s names %d rank%s, but this process is %s=%ld; give it counts "
             "that add up to the number of ranks", list->text, total, total == 1 ? "" : "s", l->rank, rank);
  else if (gbParamVendorsLabel(list->text, (int)rank, label) == 0 && (mine->text = strdup(label)) != NULL) {
    mine->valid = 1;
    mine->derived = 1;
    return;
  } else
    snprintf(err, sizeof(err), "GPUBRIDGE_VENDORS: out of memory");
  appendLine(&errors, err); /* said by the start-up verdict */
}

static void readEnv(void) {
  char err[ERR_LEN];
  for (int i = 0; i < GB_PARAM_COUNT; i++) {
    paramState_t* s = &state[i];
    int64_t def = 0;
    gbParamParse((gbParamId_t)i, table[i].defaultText, &def, err, sizeof(err));
    s->value = def;
    const char* env = getenv(table[i].name);
    if (!env || env[0] == '\0') continue; /* empty reads as unset */
    s->set = 1;
    s->text = strdup(env);
    int64_t v;
    if (gbParamParse((gbParamId_t)i, env, &v, err, sizeof(err)) == 0) {
      s->valid = 1;
      s->value = v;
    } else {
      appendLine(&errors, err); /* said once, by the start-up verdict: not warned about here too */
    }
  }
  extern char** environ;
  for (char** e = environ; e && *e; e++) {
    if (strncmp(*e, "GPUBRIDGE_", 10) != 0) continue;
    size_t n = strcspn(*e, "=");
    int known = 0;
    for (int i = 0; i < GB_PARAM_COUNT; i++)
      if (strlen(table[i].name) == n && strncmp(*e, table[i].name, n) == 0) known = 1;
    if (known) continue;
    int best = 0, bestDistance = gbSuggestDistance(*e, n, table[0].name);
    for (int i = 1; i < GB_PARAM_COUNT; i++) {
      int dist = gbSuggestDistance(*e, n, table[i].name);
      if (dist < bestDistance) best = i, bestDistance = dist;
    }
    /* Compared without the shared prefix, so that GPUBRIDGE_ does not make any name look close. */
    if (gbSuggestClose(n - 10, bestDistance))
      snprintf(err, sizeof(err), "unknown variable %.*s ignored (did you mean %s?); gpubridge-info -c lists the "
               "known ones", (int)(n < 200 ? n : 200), *e, table[best].name);
    else
      snprintf(err, sizeof(err), "unknown variable %.*s ignored; gpubridge-info -c lists the known ones",
               (int)(n < 200 ? n : 200), *e);
    appendLine(&pendingWarn, err);
  }
  applyVendors();
}

/* The read's warnings, once, line by line to the sink (none yet: they wait). */
static void flushWarnings(void) {
  gbParamWarnSink_t sink = atomic_load(&warnSink);
  if (!sink || !atomic_load(&warnPending) || !atomic_exchange(&warnPending, 0)) return;
  pthread_mutex_lock(&mu);
  char* text = pendingWarn;
  pendingWarn = NULL;
  pthread_mutex_unlock(&mu);
  for (char* line = text; line && *line;) {
    size_t n = strcspn(line, "\n");
    sink(line, (int)n);
    line += n + (line[n] == '\n');
  }
  free(text);
}

void gbParamInit(void) {
  if (!atomic_load_explicit(&loaded, memory_order_acquire)) {
    pthread_mutex_lock(&mu);
    if (!atomic_load_explicit(&loaded, memory_order_relaxed)) {
      readEnv();
      if (pendingWarn) atomic_store(&warnPending, 1);
      atomic_store_explicit(&loaded, 1, memory_order_release);
    }
    pthread_mutex_unlock(&mu);
  }
  flushWarnings();
}

void gbParamSetWarnSink(gbParamWarnSink_t sink) {
  atomic_store(&warnSink, sink);
  flushWarnings();
}

void gbParamReset(void) {
  pthread_mutex_lock(&mu);
  for (int i = 0; i < GB_PARAM_COUNT; i++) {
    free(state[i].text);
    memset(&state[i], 0, sizeof(state[i]));
  }
  free(errors);
  errors = NULL;
  free(pendingWarn);
  pendingWarn = NULL;
  atomic_store(&warnPending, 0);
  atomic_store_explicit(&loaded, 0, memory_order_release);
  pthread_mutex_unlock(&mu);
}

int64_t gbParamInt(gbParamId_t id) {
  if ((int)id < 0 || id >= GB_PARAM_COUNT) return 0;
  gbParamInit();
  return state[id].value;
}

/* The user's text when set and valid, else the default's text. */
const char* gbParamString(gbParamId_t id) {
  if ((int)id < 0 || id >= GB_PARAM_COUNT) return "";
  gbParamInit();
  return (state[id].set && state[id].valid) ? state[id].text : table[id].defaultText;
}

int gbParamIsSet(gbParamId_t id) {
  if ((int)id < 0 || id >= GB_PARAM_COUNT) return 0;
  gbParamInit();
  return state[id].set;
}

const char* gbParamErrors(void) {
  gbParamInit();
  return errors ? errors : "";
}

void gbParamDescribeType(const gbParamDesc_t* d, char* buf, size_t len) {
  char lo[32], hi[32];
  if (d->type == GB_PARAM_INT) {
    snprintf(buf, len, "int %lld..%lld", (long long)d->min, (long long)d->max);
  } else if (d->type == GB_PARAM_SIZE) {
    formatSize(d->min, lo, sizeof(lo));
    formatSize(d->max, hi, sizeof(hi));
    snprintf(buf, len, "size %s..%s", lo, hi);
  } else if (d->type == GB_PARAM_ENUM) {
    size_t o = (size_t)snprintf(buf, len, "enum: ");
    for (int k = 0; d->choices && d->choices[k] && o < len; k++)
      o += (size_t)snprintf(buf + o, len - o, "%s%s", k ? ", " : "", d->choices[k]);
  } else {
    snprintf(buf, len, "string");
  }
}

void gbParamPrintTable(void* file, int markdown) {
  FILE* f = (FILE*)file;
  char type[128];
  gbParamInit();
  if (markdown) {
    fprintf(f, "| Variable | Type | Default | Must agree | Description |\n");
    fprintf(f, "|---|---|---|---|---|\n");
    for (int i = 0; i < GB_PARAM_COUNT; i++) {
      const gbParamDesc_t* d = &table[i];
      gbParamDescribeType(d, type, sizeof(type));
      fprintf(f, "| `%s` | %s | %s%s%s | %s | %s |\n", d->name, type, d->defaultText[0] ? "`" : "",
              d->defaultText[0] ? d->defaultText : "(empty)", d->defaultText[0] ? "`" : "",
              d->mustAgree ? "yes" : "no", d->doc);
    }
    return;
  }
  for (int i = 0; i < GB_PARAM_COUNT; i++) {
    const gbParamDesc_t* d = &table[i];
    const paramState_t* s = &state[i];
    gbParamDescribeType(d, type, sizeof(type));
    const char* current = !s->set ? "(default)" : isSecret((gbParamId_t)i) ? "(set, not shown)"
                          : s->text ? s->text : "(from GPUBRIDGE_VENDORS)";
    fprintf(f, "%-26s = %s%s%s\n", d->name, current, s->set && !s->valid ? "  (INVALID: the default is used)" : "",
            s->derived ? "  (from GPUBRIDGE_VENDORS)" : "");
    fprintf(f, "    %s; default %s%s\n", type, d->defaultText[0] ? d->defaultText : "(empty)",
            d->mustAgree ? "; must agree on every rank" : "");
    fprintf(f, "    %s\n", d->doc);
  }
}
