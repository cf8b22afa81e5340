/* algo/: all-reduce, reduce and broadcast over real TCP loopback connections,
 * n = 1..6 members as threads of this process. Every result is compared bit
 * for bit with a reference folded here in the documented order (algo.h), with
 * this file's own arithmetic (float16 through _Float16, bfloat16 through a
 * float rounding written here), and every member's bits with every other's. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "algo/algo.h"
#include "base/clock.h"
#include "net/net.h"
#include "os/socket.h"
#include "unit/loopback_group.h"

#define MAX_N 6
#define TIMEOUT_SEC 60.0

#include "unit/member_threads.h"
#include "unit/ref_values.h"

/* ------------------------------------------------------- data and reference */

/* A value in [-2, 2] with a full mantissa, never near zero (so max and min
 * never meet signed zeros). */
static double randReal(uint64_t* s) {
  *s = mix(*s + 0x9e3779b97f4a7c15ull);
  double v = (double)(*s >> 11) / 9007199254740992.0 * 4.0 - 2.0;
  if (v > -0.01 && v < 0.01) v += v < 0 ? -0.5 : 0.5;
  return v;
}

static size_t esizeOf(gbDataType_t dt) {
  switch (dt) {
    case gbFloat16: case gbBfloat16: return 2;
    case gbFloat32: case gbInt32: return 4;
    case gbFloat64: return 8;
    default: return 0;
  }
}

/* Floats: every 16th element is a zero whose sign alternates with the seed
 * (members' seeds are consecutive), so max and min, which keep the left
 * operand on a tie, show in the sign bit which operand came first. */
static void fillInput(void* buf, size_t count, gbDataType_t dt, uint64_t seed) {
  uint64_t s = mix(seed);
  for (size_t i = 0; i < count; i++) {
    double v = i % 16 == 5 ? ((seed & 1) ? -0.0 : 0.0) : randReal(&s);
    switch (dt) {
      case gbFloat32: ((float*)buf)[i] = (float)v; break;
      case gbFloat64: ((double*)buf)[i] = v; break;
      case gbFloat16: ((_Float16*)buf)[i] = (_Float16)(float)v; break;
      case gbBfloat16: ((uint16_t*)buf)[i] = toBf16((float)v); break;
      case gbInt32: s = mix(s + 1); ((uint32_t*)buf)[i] = (uint32_t)s; break;
      default: break;
    }
  }
}

static float opF(float a, float b, gbRedOp_t op) {
  switch (op) {
    case gbSum: return a + b;
    case gbProd: return a * b;
    case gbMax: return a > b ? a : b;
    default: return a < b ? a : b;
  }
}

static double opD(double a, double b, gbRedOp_t op) {
  switch (op) {
    case gbSum: return a + b;
    case gbProd: return a * b;
    case gbMax: return a > b ? a : b;
    default: return a < b ? a : b;
  }
}

static uint32_t opI(uint32_t a, uint32_t b, gbRedOp_t op) {
  switch (op) {
    case gbSum: return a + b;
    case gbProd: return a * b;
    case gbMax: return (int32_t)a > (int32_t)b ? a : b;
    default: return (int32_t)a < (int32_t)b ? a : b;
  }
}

/* acc[i] = acc[i] op x[i], element i only, with this file's arithmetic. */
static void refStep(void* acc, const void* x, size_t i, gbDataType_t dt, gbRedOp_t op) {
  switch (dt) {
    case gbFloat32: ((float*)acc)[i] = opF(((float*)acc)[i], ((const float*)x)[i], op); break;
    case gbFloat64: ((double*)acc)[i] = opD(((double*)acc)[i], ((const double*)x)[i], op); break;
    case gbFloat16:
      ((_Float16*)acc)[i] =
          (_Float16)opF((float)((_Float16*)acc)[i], (float)((const _Float16*)x)[i], op);
      break;
    case gbBfloat16:
      ((uint16_t*)acc)[i] =
          toBf16(opF(fromBf16(((uint16_t*)acc)[i]), fromBf16(((const uint16_t*)x)[i]), op));
      break;
    case gbInt32: ((uint32_t*)acc)[i] = opI(((uint32_t*)acc)[i], ((const uint32_t*)x)[i], op); break;
    default: break;
  }
}

static void refDivide(void* acc, size_t i, gbDataType_t dt, int d) {
  switch (dt) {
    case gbFloat32: ((float*)acc)[i] = ((float*)acc)[i] / (float)d; break;
    case gbFloat64: ((double*)acc)[i] = ((double*)acc)[i] / (double)d; break;
    case gbFloat16: ((_Float16*)acc)[i] = (_Float16)((float)((_Float16*)acc)[i] / (float)d); break;
    case gbBfloat16: ((uint16_t*)acc)[i] = toBf16(fromBf16(((uint16_t*)acc)[i]) / (float)d); break;
    default: break;
  }
}

/* The documented order: exchange folds x0..x(n-1); ring folds element e of
 * slice j (j*count/n <= e < (j+1)*count/n) as x(j+1), ..., x(n-1), x0, ..., x(j). */
static void reference(void* out, void* const* in, int n, size_t count, gbDataType_t dt,
                      gbRedOp_t op, int divisor, int ring) {
  size_t es = esizeOf(dt);
  int j = 0;
  for (size_t e = 0; e < count; e++) {
    int first = 0;
    if (ring) {
      /* e is in slice j+1 once e >= floor((j+1)*count/n). */
      while ((uint64_t)(e + 1) * (uint64_t)n > (uint64_t)(j + 1) * count) j++;
      first = (j + 1) % n;
    }
    memcpy((char*)out + e * es, (const char*)in[first] + e * es, es);
    for (int t = 1; t < n; t++) refStep(out, in[(first + t) % n], e, dt, op);
    if (divisor > 0) refDivide(out, e, dt, divisor);
  }
}

/* -------------------------------------------------------------- the cases */

typedef struct {
  gbDataType_t dt;
  gbRedOp_t op;
  int avg;
} opcase_t;

static const opcase_t kOps[] = {
    {gbFloat32, gbSum, 0}, {gbFloat32, gbProd, 0}, {gbFloat32, gbMax, 0}, {gbFloat32, gbMin, 0},
    {gbFloat32, gbSum, 1}, {gbFloat64, gbSum, 0}, {gbFloat64, gbProd, 0}, {gbFloat64, gbMin, 0},
    {gbFloat64, gbSum, 1}, {gbFloat16, gbSum, 0}, {gbFloat16, gbProd, 0}, {gbFloat16, gbMax, 0},
    {gbFloat16, gbSum, 1}, {gbBfloat16, gbSum, 0}, {gbBfloat16, gbMin, 0},
    {gbBfloat16, gbSum, 1}, {gbInt32, gbSum, 0}, {gbInt32, gbProd, 0}, {gbInt32, gbMax, 0},
    {gbInt32, gbMin, 0},
};
static const size_t kCounts[] = {0, 1, 7, 1000, (1u << 16) + 3};
/* ringMinBytes, pieceBytes: exchange for small, ring for the rest; all
 * exchange (pipelined in pieces); all ring (empty slices included). */
static const size_t kModes[][2] = {{1024, 4096}, {SIZE_MAX, 8192}, {1, 0}};

static const char* dtName(gbDataType_t dt) {
  switch (dt) {
    case gbFloat32: return "float32";
    case gbFloat64: return "float64";
    case gbFloat16: return "float16";
    case gbBfloat16: return "bfloat16";
    case gbInt32: return "int32";
    default: return "?";
  }
}
static const char* opName(gbRedOp_t op) {
  static const char* names[] = {"sum", "prod", "max", "min"};
  return (unsigned)op < 4 ? names[op] : "?";
}

typedef struct {
  void* in[MAX_N]; /* every member's input, regenerated by each member */
  void* out;
  void* ref;
  size_t cap;
} bufs_t;

static int ensure(bufs_t* b, int n, size_t bytes) {
  if (bytes <= b->cap && b->out != NULL) return 1;
  for (int i = 0; i < n; i++) {
    free(b->in[i]);
    b->in[i] = malloc(bytes ? bytes : 1);
  }
  free(b->out);
  free(b->ref);
  b->out = malloc(bytes ? bytes : 1);
  b->ref = malloc(bytes ? bytes : 1);
  b->cap = bytes;
  for (int i = 0; i < n; i++) if (b->in[i] == NULL) return 0;
  return b->out != NULL && b->ref != NULL;
}

/* Member 0 compares every member's output with its own after a barrier. */
static int crossCheck(member_t* m, int n, const void* mine, size_t bytes, const char* what) {
  shared_t* sh = m->sh;
  sh->results[m->me] = mine;
  if (!barrier(sh)) return 0;
  if (m->me == 0 && bytes > 0) {
    for (int i = 1; i < n; i++) {
      if (memcmp(sh->results[i], sh->results[0], bytes) != 0) {
        fail(sh, "%s: member %d's bits differ from member 0's", what, i);
        return 0;
      }
      m->checks++;
    }
  }
  return barrier(sh);
}

static int compare(member_t* m, const void* got, const void* want, size_t count, size_t es,
                   const char* what) {
  if (memcmp(got, want, count * es) == 0) {
    m->checks++;
    return 1;
  }
  for (size_t e = 0; e < count; e++) {
    if (memcmp((const char*)got + e * es, (const char*)want + e * es, es) != 0) {
      uint64_t g = 0, w = 0;
      memcpy(&g, (const char*)got + e * es, es);
      memcpy(&w, (const char*)want + e * es, es);
      fail(m->sh, "%s: member %d element %zu is 0x%llx, the documented order gives 0x%llx", what,
           m->me, e, (unsigned long long)g, (unsigned long long)w);
      return 0;
    }
  }
  return 0;
}

static int runReductions(member_t* m, gbAlgoGroup_t* g, bufs_t* b) {
  int n = g->n, me = g->me;
  uint64_t caseNo = 0;
  char what[256];
  for (size_t mo = 0; mo < sizeof kModes / sizeof kModes[0]; mo++) {
    g->ringMinBytes = kModes[mo][0];
    g->pieceBytes = kModes[mo][1];
    for (size_t ci = 0; ci < sizeof kCounts / sizeof kCounts[0]; ci++) {
      for (size_t oi = 0; oi < sizeof kOps / sizeof kOps[0]; oi++) {
        size_t count = kCounts[ci];
        opcase_t oc = kOps[oi];
        size_t es = esizeOf(oc.dt), bytes = count * es;
        int divisor = oc.avg ? n : 0;
        int ring = n >= 3 && bytes >= g->ringMinBytes;
        /* In-place on odd cases; reduce to every root in turn. */
        int inPlace = (int)(caseNo & 1);
        int root = (int)(caseNo % (uint64_t)n);
        caseNo++;
        if (!ensure(b, n, bytes)) { fail(m->sh, "out of memory"); return 0; }
        for (int i = 0; i < n; i++) fillInput(b->in[i], count, oc.dt, caseNo * 64 + (uint64_t)i);
        reference(b->ref, b->in, n, count, oc.dt, oc.op, divisor, ring);

        /* all-reduce */
        snprintf(what, sizeof what, "all-reduce n=%d %s %s%s count=%zu %s%s", n, dtName(oc.dt),
                 opName(oc.op), oc.avg ? "(avg)" : "", count, ring ? "ring" : "exchange",
                 inPlace ? " in place" : "");
        const void* send = b->in[me];
        void* recv = b->out;
        if (inPlace) { memcpy(b->out, b->in[me], bytes); send = recv; }
        else memset(b->out, 0xa5, bytes);
        gbResult_t r = gbAlgoAllReduce(g, send, recv, count, oc.dt, oc.op, divisor);
        if (r != gbSuccess) { fail(m->sh, "%s: member %d got result %d", what, me, r); return 0; }
        if (!compare(m, recv, b->ref, count, es, what)) return 0;
        if (!crossCheck(m, n, recv, bytes, what)) return 0;
        if (!inPlace) {
          /* The input must be left as it was: regenerate it and compare. */
          fillInput(b->out, count, oc.dt, caseNo * 64 + (uint64_t)me);
          if (!compare(m, b->in[me], b->out, count, es, "all-reduce left its input alone")) return 0;
        }

        /* all-reduce in chunks of about a third of the call: each chunk in
         * the documented order of a call of its own size */
        if (count >= 3) {
          size_t chunk = count / 3 + 1;
          for (size_t off = 0; off < count; off += chunk) {
            size_t len = count - off < chunk ? count - off : chunk;
            void* part[MAX_N];
            for (int i = 0; i < n; i++) part[i] = (char*)b->in[i] + off * es;
            reference((char*)b->ref + off * es, part, n, len, oc.dt, oc.op, divisor,
                      n >= 3 && len * es >= g->ringMinBytes);
          }
          snprintf(what, sizeof what, "all-reduce in chunks of %zu, n=%d %s %s%s count=%zu%s", chunk, n,
                   dtName(oc.dt), opName(oc.op), oc.avg ? "(avg)" : "", count, inPlace ? " in place" : "");
          send = b->in[me];
          recv = b->out;
          if (inPlace) { memcpy(b->out, b->in[me], bytes); send = recv; }
          else memset(b->out, 0xa5, bytes);
          r = gbAlgoAllReduceChunks(g, send, recv, count, chunk, oc.dt, oc.op, divisor);
          if (r != gbSuccess) { fail(m->sh, "%s: member %d got result %d", what, me, r); return 0; }
          if (!compare(m, recv, b->ref, count, es, what)) return 0;
          if (!crossCheck(m, n, recv, bytes, what)) return 0;
          reference(b->ref, b->in, n, count, oc.dt, oc.op, divisor, ring);
        }

        /* reduce to root: recv only on root */
        snprintf(what, sizeof what, "reduce to %d n=%d %s %s%s count=%zu %s%s", root, n,
                 dtName(oc.dt), opName(oc.op), oc.avg ? "(avg)" : "", count,
                 ring ? "ring" : "exchange", inPlace ? " in place" : "");
        send = b->in[me];
        recv = NULL;
        if (me == root) {
          recv = b->out;
          if (inPlace) { memcpy(b->out, b->in[me], bytes); send = recv; }
          else memset(b->out, 0x5a, bytes);
        }
        r = gbAlgoReduce(g, send, recv, count, oc.dt, oc.op, divisor, root);
        if (r != gbSuccess) { fail(m->sh, "%s: member %d got result %d", what, me, r); return 0; }
        if (me == root && !compare(m, recv, b->ref, count, es, what)) return 0;
        if (!barrier(m->sh)) return 0;
      }
    }
  }
  return 1;
}

static int runBroadcasts(member_t* m, gbAlgoGroup_t* g) {
  static const size_t sizes[] = {0, 1, (3u << 20) + 1};
  static const size_t pieces[] = {0, 65536};
  int n = g->n, me = g->me;
  char what[128];
  unsigned char* buf = malloc(sizes[2]);
  unsigned char* want = malloc(sizes[2]);
  if (buf == NULL || want == NULL) { fail(m->sh, "out of memory"); free(buf); free(want); return 0; }
  int ok = 1;
  for (size_t pi = 0; pi < 2 && ok; pi++) {
    g->pieceBytes = pieces[pi];
    for (size_t si = 0; si < 3 && ok; si++) {
      for (int root = 0; root < n && ok; root++) {
        size_t bytes = sizes[si];
        uint64_t s = mix(0xb0ca57 + si * 131 + (uint64_t)root * 7 + pi);
        for (size_t i = 0; i < bytes; i++) {
          if ((i & 7) == 0) s = mix(s + i);
          want[i] = (unsigned char)(s >> (8 * (i & 7)));
        }
        if (me == root) memcpy(buf, want, bytes);
        else memset(buf, 0xee, bytes);
        snprintf(what, sizeof what, "broadcast n=%d from %d, %zu bytes, pieces of %zu", n, root,
                 bytes, pieces[pi]);
        gbResult_t r = gbAlgoBroadcast(g, buf, bytes, root);
        if (r != gbSuccess) { fail(m->sh, "%s: member %d got result %d", what, me, r); ok = 0; break; }
        ok = compare(m, buf, want, bytes, 1, what) && crossCheck(m, n, buf, bytes, what);
      }
    }
  }
  free(buf);
  free(want);
  return ok;
}

/* Calls that must fail before any communication. */
static int runArgChecks(member_t* m, gbAlgoGroup_t* g) {
  float x = 1.0f, y = 0.0f;
  struct { gbResult_t got; const char* what; } c[] = {
      {gbAlgoAllReduce(g, &x, &y, 1, (gbDataType_t)42, gbSum, 0), "unknown data type"},
      {gbAlgoAllReduce(g, &x, &y, 1, gbFloat32, gbAvg, 0), "avg passed as an op"},
      {gbAlgoReduce(g, &x, &y, 1, gbFloat32, gbSum, 0, g->n), "root == n"},
      {gbAlgoReduce(g, &x, &y, 1, gbFloat32, gbSum, 0, -1), "root -1"},
      {gbAlgoBroadcast(g, &x, sizeof x, g->n), "broadcast root == n"},
  };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    if (c[i].got != gbInvalidArgument) {
      fail(m->sh, "%s: member %d got result %d, want gbInvalidArgument (%d)", c[i].what, g->me,
           c[i].got, gbInvalidArgument);
      return 0;
    }
    m->checks++;
  }
  return 1;
}

/* --------------------------------------------------------------- a member */

static void* memberMain(void* arg) {
  member_t* m = arg;
  shared_t* sh = m->sh;
  int n = sh->n, me = m->me;
  static const uint8_t secret[GB_NET_SECRET_BYTES] = {7, 1, 2, 3};
  const uint64_t commHash = 0x5eed0000u + (uint64_t)n;
  const int tag = 3;
  const gbNetOps_t* net = &gbNetTcpOps;
  gbNetListener_t* lis = NULL;
  gbNetConn_t* conns[MAX_N] = {0};
  int ranks[MAX_N];
  bufs_t b = {{0}, 0, 0, 0};
  gbAlgoGroup_t g;
  memset(&g, 0, sizeof g);

  const loopbackSpec_t spec = {net, secret, commHash, tag, "test", n, me, TIMEOUT_SEC, &sh->abortFlag};
  char why[128];
  if (!loopbackListen(&spec, &lis, &sh->addrs[me])) {
    fail(sh, "member %d: cannot listen on loopback", me);
    goto done;
  }
  if (!barrier(sh)) goto done;
  if (!loopbackJoin(&spec, lis, sh->addrs, conns, ranks, &g, why, sizeof why)) {
    fail(sh, "%s", why);
    goto done;
  }

  if (!runArgChecks(m, &g)) goto done;
  if (!runReductions(m, &g, &b)) goto done;
  if (!runBroadcasts(m, &g)) goto done;

  /* A call the others never join must end at its deadline, not hang. */
  if (n > 1 && barrier(sh) && me == 0) {
    float x[4] = {1, 2, 3, 4}, y[4];
    g.timeoutSec = 0.3;
    g.ringMinBytes = SIZE_MAX;
    int64_t t0 = gbClockNowNs();
    gbResult_t r = gbAlgoAllReduce(&g, x, y, 4, gbFloat32, gbSum, 0);
    double waited = (double)(gbClockNowNs() - t0) / 1e9;
    if (r != gbTimeout || waited > 5.0) {
      fail(sh, "lone all-reduce: result %d after %.2f s, want gbTimeout (%d) near 0.3 s", r,
           waited, gbTimeout);
    }
    m->checks++;
  }
  /* The others keep their connections open until member 0 is done. */
  if (n > 1) barrier(sh);

done:
  gbAlgoGroupFree(&g);
  if (g.scratch != NULL) fail(sh, "gbAlgoGroupFree left scratch behind");
  for (int i = 0; i < n; i++) if (conns[i] != NULL) net->close(conns[i]);
  if (lis != NULL) net->listenerClose(lis);
  for (int i = 0; i < MAX_N; i++) free(b.in[i]);
  free(b.out);
  free(b.ref);
  return NULL;
}


int main(int argc, char** argv) {
  int lo = 1, hi = MAX_N;
  printf("test_algo: WARN lines about invalid arguments and one timeout are expected\n");
  fflush(stdout);
  if (argc > 1) lo = hi = atoi(argv[1]); /* one group size, for debugging */
  for (int n = lo; n <= hi; n++) {
    if (!runGroup("test_algo", n, memberMain)) return 1;
  }
  printf("test_algo: PASS\n");
  return 0;
}
