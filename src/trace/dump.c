/* The flight recorder's dump: one JSON file per rank and communicator
 * (schema gpubridge-trace/1, docs/TRACE.md), written to a temporary file
 * and renamed, so a reader never sees half a dump. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/dtype.h"
#include "base/log.h"
#include "base/param.h"
#include "base/result.h"
#include "os/socket.h"
#include "plan/plan.h"
#include "trace/trace.h"

#define OUT_BYTES 65536
#define PUTS(o, literal) put((o), (literal), sizeof(literal) - 1)

typedef struct {
  int fd;
  int err;      /* errno of the first failed write */
  size_t len;
  char buf[OUT_BYTES];
} out_t;

static void flush(out_t* o) {
  size_t at = 0;
  while (at < o->len && !o->err) {
    ssize_t n = write(o->fd, o->buf + at, o->len - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) o->err = n < 0 ? errno : EIO;
    else at += (size_t)n;
  }
  o->len = 0;
}

static void put(out_t* o, const char* s, size_t n) {
  while (n > 0 && !o->err) {
    if (o->len == OUT_BYTES) flush(o);
    size_t k = OUT_BYTES - o->len < n ? OUT_BYTES - o->len : n;
    memcpy(o->buf + o->len, s, k);
    o->len += k;
    s += k;
    n -= k;
  }
}

static void putf(out_t* o, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(out_t* o, const char* fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
  va_end(ap);
  if (n > 0) put(o, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void putStr(out_t* o, const char* s) {
  PUTS(o, "\"");
  for (const unsigned char* p = (const unsigned char*)s; *p; p++) {
    if (*p == '"' || *p == '\\') {
      char e[2] = {'\\', (char)*p};
      put(o, e, 2);
    } else if (*p < 0x20 || *p == 0x7f) {
      putf(o, "\\u%04x", *p);
    } else {
      put(o, (const char*)p, 1);
    }
  }
  PUTS(o, "\"");
}

static void putKey(out_t* o, const char* key) {
  putStr(o, key);
  PUTS(o, ":");
}

static void putNs(out_t* o, int64_t ns) {
  if (ns) putf(o, "%lld", (long long)ns);
  else PUTS(o, "null");
}

static void putIntOrNull(out_t* o, int v) {
  if (v >= 0) putf(o, "%d", v);
  else PUTS(o, "null");
}

static const char* resultName(int r) {
  static const char* const names[] = {"gbSuccess", "gbUnhandledCudaError", "gbSystemError", "gbInternalError",
                                      "gbInvalidArgument", "gbInvalidUsage", "gbRemoteError", "gbInProgress",
                                      "gbTimeout"};
  return r >= 0 && r < gbNumResults ? names[r] : "unknown";
}

static const char* runKindName(int k) {
  return k == gbRunReal ? "real" : k == gbRunSimulated ? "simulated" : k == gbRunCpu ? "cpu" : "unknown";
}

static const char* stateName(int s) {
  return s == gbRecordInFlight ? "in-flight" : s == gbRecordDone ? "done" : s == gbRecordFailed ? "failed" : "unknown";
}

static const char* const groupKeys[gbNumHostGroups] = {"world", "bridge", "rail", "island"};
static const char* const phaseKeys[gbNumPhases] = {"enqueued",    "checkBegin", "checkEnd", "staged",
                                                   "bridgeBegin", "bridgeEnd",  "done"};

static void putComm(out_t* o, const gbTraceSetup_t* s) {
  const gbTopo_t* t = s->topo;
  putf(o, ",\"comm\":{\"id\":\"%016llx\",\"rank\":%d,\"nranks\":%d,\"island\":%d,\"isLeader\":%s,",
       (unsigned long long)s->jobId, s->rank, s->nranks, t->island, t->isLeader ? "true" : "false");
  putKey(o, "runKind");
  putStr(o, runKindName(t->runKind));
  PUTS(o, ",");
  putKey(o, "policy");
  putStr(o, gbPlanPolicyName(s->policy));
  putf(o, ",\"checkCalls\":%s,\"timeoutSec\":%d,\"islands\":[", s->checkCalls ? "true" : "false",
       s->timeoutSec);
  for (int k = 0; k < t->nislands; k++) {
    putf(o, "%s{\"index\":%d,\"vendor\":", k ? "," : "", k);
    putStr(o, t->vendor[k]);
    putf(o, ",\"leader\":%d,\"ranks\":[", t->leaderOfIsland[k]);
    for (int i = 0; i < t->islandSize[k]; i++) putf(o, "%s%d", i ? "," : "", t->members[k][i]);
    PUTS(o, "]}");
  }
  PUTS(o, "]}");
}

static void putError(out_t* o, const gbTraceOwner_t* owner) {
  gbTraceFailure_t f;
  owner->failure(owner->ctx, &f);
  if (f.code == gbSuccess) {
    PUTS(o, ",\"error\":null");
    return;
  }
  putf(o, ",\"error\":{\"code\":%d,\"name\":\"%s\",\"text\":", (int)f.code, resultName(f.code));
  putStr(o, f.text);
  putf(o, ",\"faultRank\":%d,\"seenBy\":%d,\"wallNs\":%lld}", f.faultRank, f.seenBy, (long long)f.wallNs);
}

static void putRecord(out_t* o, const gbCollRecord_t* r, int olderInFlight, int first) {
  putf(o, "%s\n{\"seq\":%llu,\"p2pSeq\":%llu,\"coll\":", first ? "" : ",", (unsigned long long)r->seq,
       (unsigned long long)r->p2pSeq);
  putStr(o, gbTraceCollName(r->coll));
  putf(o, ",\"count\":%llu,\"dtype\":", (unsigned long long)r->count);
  if (r->dtype >= 0) putStr(o, gbDtypeName((gbDataType_t)r->dtype));
  else PUTS(o, "null");
  PUTS(o, ",\"op\":");
  if (r->op < 0) PUTS(o, "null");
  else putStr(o, r->op < gbNumOps ? gbOpName((gbRedOp_t)r->op) : "premulsum");
  PUTS(o, ",\"root\":");
  putIntOrNull(o, r->root);
  PUTS(o, ",\"peer\":");
  putIntOrNull(o, r->peer);
  putf(o, ",\"npeers\":%d,\"policy\":", r->npeers);
  if (r->policy >= 0) putStr(o, gbPlanPolicyName(r->policy));
  else PUTS(o, "null");
  putf(o, ",\"nchunks\":%d,\"chunksBridged\":%d,\"hostStep\":%s,\"check\":%s,\"state\":\"%s\",\"phase\":\"%s\","
       "\"result\":%d,\"t\":{", r->nchunks, r->chunksBridged,
       (r->flags & (int32_t)GB_RECORD_HAS_HOST_STEP) ? "true" : "false",
       (r->flags & (int32_t)GB_RECORD_HAS_CHECK) ? "true" : "false", stateName(r->state),
       gbTracePhaseName(r, olderInFlight), r->result);
  for (int k = 0; k < gbNumPhases; k++) {
    putf(o, "%s\"%s\":", k ? "," : "", phaseKeys[k]);
    putNs(o, r->t[k]);
  }
  PUTS(o, "},\"bytes\":{");
  for (int k = 0; k < gbNumHostGroups; k++)
    putf(o, "%s\"%s\":%llu", k ? "," : "", groupKeys[k], (unsigned long long)r->bytes[k]);
  putf(o, "},\"deviceDone\":%s}", (r->flags & (int32_t)GB_RECORD_DEVICE_DONE) ? "true" : "false");
}

/* The state, counters and records; recs holds n records, oldest first. */
static void putRing(out_t* o, const gbTrace_t* t, const gbCollRecord_t* recs, int n) {
  gbCommCounters_t k;
  gbTraceCounters(t, &k);
  uint64_t lastCompleted = 0;
  int64_t inside = -1;
  int blocked = 0;
  for (int i = 0; i < n; i++) {
    if (recs[i].seq == 0) continue;
    if (recs[i].state == gbRecordInFlight && inside < 0) inside = (int64_t)recs[i].seq;
    if (recs[i].state != gbRecordDone) blocked = 1;
    if (!blocked) lastCompleted = recs[i].seq;
  }
  putf(o, ",\"ring\":{\"capacity\":%llu,\"recorded\":%llu,\"unrecorded\":%llu}",
       (unsigned long long)t->cap, (unsigned long long)atomic_load_explicit(&t->next, memory_order_acquire),
       (unsigned long long)k.unrecorded);
  putf(o, ",\"state\":{\"lastEnqueued\":%llu,\"lastCompleted\":%llu,\"lastP2p\":%llu,\"inside\":",
       (unsigned long long)atomic_load_explicit(&t->lastSeq, memory_order_acquire), (unsigned long long)lastCompleted,
       (unsigned long long)atomic_load_explicit(&t->lastP2p, memory_order_acquire));
  if (inside >= 0) putf(o, "%lld}", (long long)inside);
  else PUTS(o, "null}");
  putf(o, ",\"counters\":{\"enqueued\":%llu,\"completed\":%llu,\"failed\":%llu,\"latencyNs\":%llu,\"byColl\":{",
       (unsigned long long)k.enqueued, (unsigned long long)k.completed, (unsigned long long)k.failed,
       (unsigned long long)k.latencyNs);
  int any = 0;
  for (int i = 0; i < gbNumColls; i++)
    if (k.byColl[i]) putf(o, "%s\"%s\":%llu", any++ ? "," : "", gbTraceCollName(i), (unsigned long long)k.byColl[i]);
  PUTS(o, "},\"bytes\":{");
  for (int g = 0; g < gbNumHostGroups; g++)
    putf(o, "%s\"%s\":%llu", g ? "," : "", groupKeys[g], (unsigned long long)k.bytes[g]);
  PUTS(o, "},\"busyNs\":{");
  for (int g = 0; g < gbHostGroupIsland; g++)
    putf(o, "%s\"%s\":%llu", g ? "," : "", groupKeys[g], (unsigned long long)k.busyNs[g]);
  PUTS(o, "}},\"records\":[");
  int olderInFlight = 0;
  for (int i = 0; i < n; i++) {
    putRecord(o, &recs[i], olderInFlight, i == 0);
    if (recs[i].state == gbRecordInFlight) olderInFlight = 1;
  }
  PUTS(o, "]}\n");
}

static void putAll(out_t* o, const gbTrace_t* t, const char* why, const gbCollRecord_t* recs, int n) {
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  PUTS(o, "{\"schema\":\"gpubridge-trace/1\",\"library\":");
  putStr(o, GB_VERSION_STRING);
  PUTS(o, ",\"reason\":");
  putStr(o, why);
  putf(o, ",\"pid\":%d,\"host\":", (int)getpid());
  putStr(o, gbHostName());
  putf(o, ",\"wallNs\":%lld,\"monoNs\":%lld", (long long)wall.tv_sec * 1000000000LL + wall.tv_nsec,
       (long long)gbClockNowNs());
  putComm(o, &t->setup);
  putError(o, &t->setup.owner);
  putRing(o, t, recs, n);
}

/* dumpLock held. */
static gbResult_t writeDump(gbTrace_t* t, const char* dir, const char* why, char* pathOut, size_t pathLen) {
  char path[4096], tmp[4200];
  snprintf(path, sizeof(path), "%s/gpubridge-trace-%016llx-r%d.json", dir, (unsigned long long)t->setup.jobId,
           t->setup.rank);
  snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
  if (pathOut && pathLen > 0) snprintf(pathOut, pathLen, "%s", path);
  gbCollRecord_t* recs = malloc(t->cap * sizeof(gbCollRecord_t));
  out_t* o = malloc(sizeof(out_t));
  int err = recs && o ? 0 : ENOMEM;
  if (!err && mkdir(dir, 0755) != 0 && errno != EEXIST) err = errno;
  if (!err) {
    o->fd = open(tmp, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (o->fd < 0) err = errno;
  }
  if (!err) {
    o->err = 0;
    o->len = 0;
    int n = gbTraceCollect(t, recs, (int)t->cap, 0);
    putAll(o, t, why, recs, n);
    flush(o);
    err = o->err;
    if (close(o->fd) != 0 && !err) err = errno;
    if (!err && rename(tmp, path) != 0) err = errno;
    if (err) unlink(tmp);
  }
  free(o);
  free(recs);
  if (err)
    return gbErrorSet(gbSystemError, "flight recorder: cannot write %s: %s; set GPUBRIDGE_TRACE_DIR to a writable "
                      "directory", path, strerror(err));
  if (strcmp(why, "api") == 0) GB_INFO(GB_LOG_COLL, "flight recorder written to %s (reason %s)", path, why);
  else GB_WARN("flight recorder written to %s (reason %s)", path, why);
  return gbSuccess;
}

gbResult_t gbTraceDump(gbTrace_t* t, const char* dir, const char* why, char* path, size_t pathLen) {
  if (!dir || !*dir) dir = gbParamString(GB_PARAM_TRACE_DIR);
  if (!*dir)
    return gbErrorSet(gbInvalidUsage, "flight recorder: no directory to write to: pass one, or set "
                      "GPUBRIDGE_TRACE_DIR");
  pthread_mutex_lock(&t->dumpLock);
  gbResult_t res = writeDump(t, dir, why, path, pathLen);
  pthread_mutex_unlock(&t->dumpLock);
  return res;
}

/* Then the watcher may end records still waiting for their done flag
 * (failed): the dump shows them in flight, where they were. */
static void settled(gbTrace_t* t) { atomic_store_explicit(&t->failSettled, 1, memory_order_release); }

void gbTraceDumpOnTrouble(gbTrace_t* t, const char* why) {
  const char* dir = gbParamString(GB_PARAM_TRACE_DIR);
  if (!*dir) {
    settled(t);
    return;
  }
  pthread_mutex_lock(&t->dumpLock);
  if (!t->dumped) {
    t->dumped = 1;
    /* Keep the thread's error (the failure) as it was: a dump that fails says so in its own WARN. */
    char saved[1024];
    snprintf(saved, sizeof(saved), "%s", gbErrorLast());
    writeDump(t, dir, why, NULL, 0); /* a failure is logged where it is found */
    gbErrorRecord(saved);
  }
  pthread_mutex_unlock(&t->dumpLock);
  settled(t);
}
