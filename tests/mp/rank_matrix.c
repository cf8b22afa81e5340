/* One rank of the matrix of reduce, all-gather, reduce-scatter, all-to-all,
 * send/recv groups, PreMulSum and split-rail (tests/mp/test_matrix.py).
 *
 * Every rank generates every rank's inputs from a counter-based generator,
 * computes the expected bits on its own from docs/REDUCTION_ORDER.md (written
 * again here from the contract, never taken from the library), and compares
 * its result bit for bit; output regions are followed by guards that must
 * stay untouched, send buffers must not change, and a count of 0 must leave
 * everything as it was. Any difference prints the first bad index and exits 1.
 *
 * Usage: rank_matrix --layout V0,V1,... [--seed S] [--avg-int-check]
 *          [--COLL COUNTS:DTYPES:OPS:PLACES[:ROOTS]]...
 *   COLL: allreduce, reduce, allgather, reducescatter, alltoall, sendrecv
 *   DTYPES: names or all; PLACES: o, i or oi (sendrecv: o; alltoall in place is
 *     sendbuff == recvbuff, and a partial overlap must be refused)
 *   OPS: sum, prod, max, min, avg, pmh, pmd, pmh=X, pmd=X or all (all six
 *     plus pmh and pmd); '-' for collectives without an op. pmh is PreMulSum
 *     with a host-immediate scalar, pmd with a device scalar; the scalar X
 *     defaults to 3 (pmh) and 2 (pmd) on integer types, 0.25 (pmh) and 3 (pmd)
 *     on floating types; a non-integer X skips integer types. avg is skipped
 *     on integer types (--avg-int-check tests that they are refused).
 *   sendrecv: OPS names scenarios: ring, pair, multi, self, uneven, nogroup,
 *     nested or all. ROOTS (reduce): ranks, -1 = the last.
 * GPUBRIDGE_POLICY, GPUBRIDGE_CHUNK_BYTES, GPUBRIDGE_RING_MIN_BYTES and
 * GPUBRIDGE_RAILS (optional) come from the driver: the expected order
 * depends on them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpubridge/gpubridge.h"
#include "rank_common.h"
#include "rank_matrix.h"
#include "rank_matrix_p2p.h"

#define MAX_SPECS 32
#define MAX_OPS 16


#define OP_PREMUL gbNumOps /* opspec_t.op of a PreMulSum */

typedef struct {
  int op;        /* gbSum..gbAvg, OP_PREMUL, or a scenario (sendrecv) */
  int residence; /* PreMulSum: gbScalarHostImmediate or gbScalarDevice */
  int hasScalar;
  double scalar;
} opspec_t;

typedef struct {
  int kind;
  size_t counts[32];
  int ncounts;
  int dtypes[gbNumTypes], ndtypes;
  opspec_t ops[MAX_OPS];
  int nops;
  int roots[32], nroots;
  int outOfPlace, inPlace;
} spec_t;

static spec_t gSpecs[MAX_SPECS];
static int gNspecs;
static int gPolicy; /* all-reduce's resolved policy */

/* ------------------------------------------------------------ parsing */

static void parseOps(spec_t* s, char* field, const char* text) {
  char *tok, *sv;
  for (tok = strtok_r(field, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
    if (strcmp(tok, "-") == 0) continue;
    if (s->kind == K_SENDRECV) {
      int first = 0, last = SC_COUNT - 1;
      if (strcmp(tok, "all") != 0) {
        first = last = nameIndex(tok, scNames, SC_COUNT);
        if (first < 0) DIE("spec '%s': unknown scenario %s", text, tok);
      }
      for (int k = first; k <= last && s->nops < MAX_OPS; k++) s->ops[s->nops++] = (opspec_t){k, 0, 0, 0};
      continue;
    }
    if (strcmp(tok, "all") == 0) {
      for (int o = 0; o < gbNumOps; o++) s->ops[s->nops++] = (opspec_t){o, 0, 0, 0};
      s->ops[s->nops++] = (opspec_t){OP_PREMUL, gbScalarHostImmediate, 0, 0};
      s->ops[s->nops++] = (opspec_t){OP_PREMUL, gbScalarDevice, 0, 0};
      continue;
    }
    if (s->nops == MAX_OPS) DIE("spec '%s': too many ops", text);
    if (strncmp(tok, "pmh", 3) == 0 || strncmp(tok, "pmd", 3) == 0) {
      opspec_t o = {OP_PREMUL, tok[2] == 'h' ? gbScalarHostImmediate : gbScalarDevice, 0, 0};
      if (tok[3] == '=') o.hasScalar = 1, o.scalar = strtod(tok + 4, NULL);
      else if (tok[3]) DIE("spec '%s': bad op %s", text, tok);
      s->ops[s->nops++] = o;
      continue;
    }
    int o = nameIndex(tok, opNames, gbNumOps);
    if (o < 0) DIE("spec '%s': unknown op %s", text, tok);
    s->ops[s->nops++] = (opspec_t){o, 0, 0, 0};
  }
}

/* "COUNTS:DTYPES:OPS:PLACES[:ROOTS]" */
static void parseSpec(int kind, const char* text) {
  if (gNspecs == MAX_SPECS) DIE("too many specs");
  spec_t* s = &gSpecs[gNspecs++];
  memset(s, 0, sizeof(*s));
  s->kind = kind;
  char buf[1024];
  snprintf(buf, sizeof(buf), "%s", text);
  char* fields[5] = {NULL, NULL, NULL, NULL, NULL};
  char* save = NULL;
  for (int f = 0; f < 5; f++) fields[f] = strtok_r(f ? NULL : buf, ":", &save);
  if (!fields[2]) DIE("spec '%s' needs COUNTS:DTYPES:OPS[:PLACES[:ROOTS]]", text);
  char *tok, *sv;
  for (tok = strtok_r(fields[0], ",", &sv); tok; tok = strtok_r(NULL, ",", &sv))
    if (s->ncounts < 32) s->counts[s->ncounts++] = (size_t)strtoull(tok, NULL, 10);
  for (tok = strtok_r(fields[1], ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
    if (strcmp(tok, "all") == 0) {
      for (int d = 0; d < gbNumTypes; d++) s->dtypes[s->ndtypes++] = d;
      continue;
    }
    int d = nameIndex(tok, dtNames, gbNumTypes);
    if (d < 0 || s->ndtypes == gbNumTypes) DIE("spec '%s': unknown dtype %s", text, tok);
    s->dtypes[s->ndtypes++] = d;
  }
  parseOps(s, fields[2], text);
  if ((kind == K_ALLGATHER || kind == K_ALLTOALL) && !s->nops) s->nops = 1; /* no op: one case */
  const char* places = fields[3] ? fields[3] : "o";
  s->outOfPlace = strchr(places, 'o') != NULL;
  s->inPlace = strchr(places, 'i') != NULL && kind != K_SENDRECV;
  if (kind == K_REDUCE) {
    if (!fields[4]) DIE("reduce spec '%s' needs ROOTS", text);
    for (tok = strtok_r(fields[4], ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
      int r = atoi(tok);
      if (r < 0) r += gN;
      int dup = 0;
      for (int i = 0; i < s->nroots; i++) dup |= s->roots[i] == r;
      if (r >= 0 && r < gN && !dup && s->nroots < 32) s->roots[s->nroots++] = r;
    }
  } else {
    s->nroots = 1;
  }
  if (!s->ncounts || !s->ndtypes || !s->nops || !s->nroots) DIE("spec '%s' selects no case", text);
}

/* ------------------------------------------------------------ ops */

/* The op for one case: built in, or a PreMulSum made for it (scalar in gCall).
 * A host-immediate scalar is overwritten right after creation and a device
 * scalar is written only after creation (it held 5 before): the header says
 * when each is read. Returns -1 when the case does not apply to dt. */
static int makeOp(run_t* R, const opspec_t* o, int dt, char* label, size_t labelLen) {
  gCall.preMul = 0;
  if (o->op != OP_PREMUL) {
    if (o->op == gbAvg && !isFloat(dt)) return -1;
    snprintf(label, labelLen, "%s", opNames[o->op]);
    return o->op;
  }
  double x = o->hasScalar ? o->scalar : isFloat(dt) ? (o->residence == gbScalarDevice ? 3.0 : 0.25)
                                                    : (o->residence == gbScalarDevice ? 2.0 : 3.0);
  if (!isFloat(dt) && x != (double)(long long)x) return -1;
  gCall.preMul = 1;
  encodeScalar(x, dt, gCall.scalar);
  snprintf(label, labelLen, "premulsum(%s scalar %g)", o->residence == gbScalarDevice ? "device" : "host", x);
  unsigned char host[8];
  gbRedOp_t op = gbMaxRedOp;
  gbResult_t res;
  if (o->residence == gbScalarHostImmediate) {
    memcpy(host, gCall.scalar, sizeof(host));
    res = gbRedOpCreatePreMulSum(&op, host, dt, gbScalarHostImmediate, R->comm);
    encodeScalar(7, dt, host);
  } else {
    encodeScalar(5, dt, host);
    CHECK_GB(gbMemcpyToDevice(R->dScalar, host, dtSizes[dt]));
    res = gbRedOpCreatePreMulSum(&op, R->dScalar, dt, gbScalarDevice, R->comm);
    if (res == gbSuccess) CHECK_GB(gbMemcpyToDevice(R->dScalar, gCall.scalar, dtSizes[dt]));
  }
  if (res != gbSuccess)
    DIE("gbRedOpCreatePreMulSum(%s, %s) returned %d: %s", label, dtNames[dt], (int)res, gbGetLastError(R->comm));
  if ((int)op < gbNumOps) DIE("gbRedOpCreatePreMulSum gave op %d, below gbNumOps (%d)", (int)op, gbNumOps);
  return (int)op;
}

static void freeOp(run_t* R, int op) {
  if (op >= gbNumOps) CHECK_GB(gbRedOpDestroy((gbRedOp_t)op, R->comm));
}

/* ------------------------------------------------------------ collectives */

typedef struct {
  int kind, dt, inPlace, root;
  size_t count;
  const opspec_t* op;
} case_t;

static void enqueueFail(run_t* R, const char* what, const char* fn, gbResult_t res) {
  DIE("%s: %s returned %d (%s): %s", what, fn, (int)res, gbGetErrorString(res), gbGetLastError(R->comm));
}

/* Reduce-scatter's block `me`: element i folded x_0 op x_1 ... op x_(n-1)
 * over ranks in rank order, whatever the policy and chunking. */
static void expectedReduceScatter(int caseIdx, size_t c, int me, void* out) {
  group_t world = {gN, getRankInput, gAll, NULL, caseIdx, 0, 0};
  char* tmp = malloc(BLOCK * gCall.es);
  if (!tmp) DIE("out of memory");
  for (size_t s = 0; s < c; s += BLOCK) {
    size_t len = c - s < BLOCK ? c - s : BLOCK;
    foldMembers(&world, 0, (size_t)me * c + s, len, (char*)out + s * gCall.es, tmp);
  }
  free(tmp);
  if (gCall.op == gbAvg) refDivide(out, c, gCall.dt, gN);
}

/* The policy reduce runs (docs/REDUCTION_ORDER.md): the island's own reduce
 * (the native all-reduce order) with one island under native; otherwise as
 * flat does, chunk by chunk over all ranks. */
static int reducePolicy(void) { return gPolicy == gbPolicyNative ? gbPolicyNative : gbPolicyFlat; }

static void runReducing(run_t* R, const case_t* C) {
  int caseIdx = R->caseIdx++, me = R->rank, n = gN, dt = C->dt;
  size_t es = dtSizes[dt], c = C->count;
  char opl[64], what[240];
  int op = makeOp(R, C->op, dt, opl, sizeof(opl));
  if (op < 0) {
    R->caseIdx--;
    return;
  }
  gCall.dt = dt;
  gCall.es = es;
  gCall.op = gCall.preMul ? gbSum : op; /* avg folds as sum, then divides */
  int isRS = C->kind == K_REDUCESCATTER, isRed = C->kind == K_REDUCE;
  size_t inCount = isRS ? (size_t)n * c : c;          /* elements each rank sends */
  size_t inBytes = inCount * es, outBytes = c * es;
  char rootl[32] = "";
  if (isRed) snprintf(rootl, sizeof(rootl), " root %d", C->root);
  snprintf(what, sizeof(what), "case %d: %s %s %s count %zu%s %s (policy %s)", caseIdx, kindNames[C->kind],
           dtNames[dt], opl, c, rootl, C->inPlace ? "in place" : "out of place", policyNames[gPolicy]);
  needCap(R, inBytes + GUARD, what);
  genInput(inputKey(me, caseIdx), 0, inCount, dt, R->in);
  /* recv: in place it is (part of) the send buffer, else PATTERN with a guard. */
  size_t recvOff = C->inPlace && isRS ? (size_t)me * outBytes : 0;
  void* recv = (char*)R->dRecv + recvOff;
  const void* send = C->inPlace ? (const void*)R->dRecv : R->dSend;
  fillPattern(R, R->dRecv, 0, inBytes + GUARD);
  if (C->inPlace) {
    if (inBytes) CHECK_GB(gbMemcpyToDevice(R->dRecv, R->in, inBytes));
  } else if (inBytes) {
    CHECK_GB(gbMemcpyToDevice(R->dSend, R->in, inBytes));
  }
  int nullRecv = isRed && !C->inPlace && me != C->root && (caseIdx & 1); /* allowed off the root */
  gbResult_t res;
  /* One element past in place overlaps without being in place (the receive
   * buffer, at this rank's offset for reduce-scatter, holds two or more):
   * refused before anything moves. A reduce's recvbuff matters on the root only. */
  if (C->inPlace && c >= 2 && (!isRed || me == C->root)) {
    const void* past = (const char*)send + es;
    res = C->kind == K_ALLREDUCE ? gbAllReduce(past, recv, c, dt, (gbRedOp_t)op, R->comm, R->stream)
          : isRed                ? gbReduce(past, recv, c, dt, (gbRedOp_t)op, C->root, R->comm, R->stream)
                                 : gbReduceScatter(past, recv, c, dt, (gbRedOp_t)op, R->comm, R->stream);
    if (res != gbInvalidArgument)
      DIE("%s: sendbuff one element past in place returned %d, want gbInvalidArgument", what, (int)res);
  }
  if (C->kind == K_ALLREDUCE) {
    res = gbAllReduce(send, recv, c, dt, (gbRedOp_t)op, R->comm, R->stream);
  } else if (isRed) {
    res = gbReduce(send, nullRecv ? NULL : recv, c, dt, (gbRedOp_t)op, C->root, R->comm, R->stream);
  } else {
    res = gbReduceScatter(send, recv, c, dt, (gbRedOp_t)op, R->comm, R->stream);
  }
  if (res != gbSuccess) enqueueFail(R, what, C->kind == K_ALLREDUCE ? "gbAllReduce" : isRed ? "gbReduce" : "gbReduceScatter", res);
  syncAndCheck(R, what);
  freeOp(R, op);
  int hasResult = !isRed || me == C->root;
  if (c == 0) {
    checkPattern(R, what, "count 0: receive buffer", R->dRecv, 0, GUARD);
  } else if (hasResult) {
    if (C->kind == K_ALLREDUCE) expectedAllReduce(gPolicy, caseIdx, c, R->want);
    else if (isRed) expectedAllReduce(reducePolicy(), caseIdx, c, R->want);
    else expectedReduceScatter(caseIdx, c, me, R->want);
    checkDevice(R, what, "", R->dRecv, recvOff, R->want, c, dt);
    if (!C->inPlace) checkPattern(R, what, "guard after the result", R->dRecv, outBytes, GUARD);
  } else if (C->inPlace) {
    checkDevice(R, what, "buffer of a non-root changed (in place)", R->dRecv, 0, R->in, c, dt);
  } else if (!nullRecv) {
    checkPattern(R, what, "receive buffer of a non-root", R->dRecv, 0, outBytes + GUARD);
  }
  if (!C->inPlace) checkDevice(R, what, "send buffer changed", R->dSend, 0, R->in, inCount, dt);
  R->counts[C->kind]++;
}

/* All-gather: block r = rank r's input. All-to-all: block r = rank r's
 * elements [me*c, (me+1)*c); in place, the input is in the receive buffer. */
static void runMoving(run_t* R, const case_t* C) {
  int caseIdx = R->caseIdx++, me = R->rank, n = gN, dt = C->dt;
  size_t es = dtSizes[dt], c = C->count, outBytes = (size_t)n * c * es;
  int isAG = C->kind == K_ALLGATHER;
  size_t inCount = isAG ? c : (size_t)n * c;
  char what[200];
  snprintf(what, sizeof(what), "case %d: %s %s count %zu %s", caseIdx, kindNames[C->kind], dtNames[dt], c,
           C->inPlace ? "in place" : "out of place");
  needCap(R, outBytes + GUARD, what);
  genInput(inputKey(me, caseIdx), 0, inCount, dt, R->in);
  fillPattern(R, R->dRecv, 0, outBytes + GUARD);
  const void* send = R->dSend;
  if (C->inPlace && !isAG) {
    send = R->dRecv;
    if (c) CHECK_GB(gbMemcpyToDevice(R->dRecv, R->in, inCount * es));
    /* Overlapping without being equal (by one element, where the buffer
     * holds two or more) is refused before anything moves. */
    gbResult_t bad = (size_t)n * c >= 2 ? gbAllToAll((char*)R->dRecv + es, R->dRecv, c, dt, R->comm, R->stream)
                                        : gbInvalidArgument;
    if (bad != gbInvalidArgument)
      DIE("%s: gbAllToAll with sendbuff = recvbuff + 1 element returned %d, want gbInvalidArgument", what, (int)bad);
  } else if (C->inPlace) {
    send = (char*)R->dRecv + (size_t)me * c * es;
    if (c) CHECK_GB(gbMemcpyToDevice((char*)send, R->in, c * es));
    /* One element past this rank's block overlaps without being in place. */
    gbResult_t bad = c >= 2 ? gbAllGather((const char*)send + es, R->dRecv, c, dt, R->comm, R->stream)
                            : gbInvalidArgument;
    if (bad != gbInvalidArgument)
      DIE("%s: gbAllGather with sendbuff one element past in place returned %d, want gbInvalidArgument", what,
          (int)bad);
  } else if (inCount) {
    CHECK_GB(gbMemcpyToDevice(R->dSend, R->in, inCount * es));
  }
  gbResult_t res = isAG ? gbAllGather(send, R->dRecv, c, dt, R->comm, R->stream)
                        : gbAllToAll(send, R->dRecv, c, dt, R->comm, R->stream);
  if (res != gbSuccess) enqueueFail(R, what, isAG ? "gbAllGather" : "gbAllToAll", res);
  syncAndCheck(R, what);
  for (int r = 0; r < n; r++)
    genInput(inputKey(r, caseIdx), isAG ? 0 : (size_t)me * c, c, dt, R->want + (size_t)r * c * es);
  checkDevice(R, what, "", R->dRecv, 0, R->want, (size_t)n * c, dt);
  checkPattern(R, what, "guard after the result", R->dRecv, outBytes, GUARD);
  if (!C->inPlace) checkDevice(R, what, "send buffer changed", R->dSend, 0, R->in, inCount, dt);
  R->counts[C->kind]++;
}

/* avg needs a floating type: reduce and reduce-scatter must refuse every
 * integer type with gbInvalidArgument before anything is sent (the matrix
 * that follows would fall out of step otherwise); all-reduce's refusal is
 * rank_collectives' check. */
static void avgIntCheck(run_t* R) {
  for (int dt = 0; dt < gbNumTypes; dt++) {
    if (isFloat(dt)) continue;
    gbResult_t r1 = gbReduce(R->dSend, R->dRecv, 7, dt, gbAvg, 0, R->comm, R->stream);
    gbResult_t r2 = gbReduceScatter(R->dSend, R->dRecv, 7, dt, gbAvg, R->comm, R->stream);
    if (r1 != gbInvalidArgument || r2 != gbInvalidArgument)
      DIE("avg on %s: gbReduce returned %d, gbReduceScatter %d; expected gbInvalidArgument (%d) from both",
          dtNames[dt], (int)r1, (int)r2, (int)gbInvalidArgument);
    if (!*gbGetLastError(R->comm)) DIE("avg on %s: gbGetLastError is empty", dtNames[dt]);
  }
  syncAndCheck(R, "after the refused avg calls");
}

/* ------------------------------------------------------------ main */

/* Bytes of the largest buffer any case needs. */
static size_t capacity(int me) {
  size_t cap = 0;
  for (int s = 0; s < gNspecs; s++) {
    const spec_t* sp = &gSpecs[s];
    for (int c = 0; c < sp->ncounts; c++)
      for (int d = 0; d < sp->ndtypes; d++) {
        size_t b = sp->counts[c] * dtSizes[sp->dtypes[d]];
        if (sp->kind == K_ALLGATHER || sp->kind == K_REDUCESCATTER || sp->kind == K_ALLTOALL) b *= (size_t)gN;
        if (sp->kind == K_SENDRECV)
          for (int o = 0; o < sp->nops; o++) {
            size_t p = p2pBytes(sp->ops[o].op, sp->counts[c], sp->dtypes, sp->ndtypes, d, me);
            if (p > b) b = p;
          }
        if (b > cap) cap = b;
      }
  }
  return (cap > 4096 ? cap : 4096) + 2 * GUARD; /* 4096: the refused avg calls' 7 * 8 * nranks bytes */
}

static void runSpec(run_t* R, const spec_t* sp) {
  for (int c = 0; c < sp->ncounts; c++)
    for (int d = 0; d < sp->ndtypes; d++)
      for (int p = 0; p < 2; p++) {
        if ((p == 0 && !sp->outOfPlace) || (p == 1 && !sp->inPlace)) continue;
        for (int o = 0; o < sp->nops; o++)
          for (int k = 0; k < sp->nroots; k++) {
            case_t C = {sp->kind, sp->dtypes[d], p, sp->roots[k], sp->counts[c], &sp->ops[o]};
            switch (sp->kind) {
              case K_ALLGATHER:
              case K_ALLTOALL: runMoving(R, &C); break;
              case K_SENDRECV: runSendRecv(R, sp->ops[o].op, sp->counts[c], sp->dtypes, sp->ndtypes, d); break;
              default: runReducing(R, &C); break;
            }
          }
      }
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  gRank = envRank();
  const char* layout = NULL;
  int avgInt = 0;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--layout") == 0 && v) layout = v, i++;
    else if (strcmp(a, "--seed") == 0 && v) gSeed = strtoull(v, NULL, 10), i++;
    else if (strcmp(a, "--avg-int-check") == 0) avgInt = 1;
    else if (strncmp(a, "--", 2) == 0 && nameIndex(a + 2, kindNames, K_COUNT) >= 0 && v) i++;
    else DIE("bad argument '%s'", a);
  }
  if (!layout) DIE("--layout V0,V1,... is required");
  parseLayout(layout);
  for (int i = 1; i + 1 < argc; i++) {
    int k = strncmp(argv[i], "--", 2) == 0 ? nameIndex(argv[i] + 2, kindNames, K_COUNT) : -1;
    if (k >= 0) parseSpec(k, argv[++i]);
  }
  gPolicy = resolvedPolicy();
  gChunkBytes = envSize("GPUBRIDGE_CHUNK_BYTES");
  gCall.ringMin = envSize("GPUBRIDGE_RING_MIN_BYTES");
  gRails = getenv("GPUBRIDGE_RAILS") ? atoi(getenv("GPUBRIDGE_RAILS")) : 0;

  double t0 = nowS();
  run_t R;
  memset(&R, 0, sizeof(R));
  gbResult_t res = gbCommInitFromEnv(&R.comm, NULL);
  if (res != gbSuccess) DIE("gbCommInitFromEnv returned %d: %s", (int)res, gbGetLastError(NULL));
  int nranks;
  CHECK_GB(gbCommUserRank(R.comm, &R.rank));
  CHECK_GB(gbCommCount(R.comm, &nranks));
  gRank = R.rank;
  if (nranks != gN) DIE("gbCommCount says %d ranks, the layout has %d", nranks, gN);
  const char* myVendor = getenv("GPUBRIDGE_VENDOR");
  if (!myVendor || strcmp(myVendor, gVendor[R.rank]) != 0)
    DIE("GPUBRIDGE_VENDOR=%s, but the layout gives rank %d '%s'", myVendor ? myVendor : "(unset)", R.rank,
        gVendor[R.rank]);
  checkTopology(R.comm, R.rank, gPolicy);

  R.cap = capacity(R.rank);
  CHECK_GB(gbStreamCreate(&R.stream));
  CHECK_GB(gbMemAlloc(&R.dSend, R.cap));
  CHECK_GB(gbMemAlloc(&R.dRecv, R.cap));
  CHECK_GB(gbMemAlloc(&R.dScalar, 16));
  R.in = malloc(R.cap);
  R.got = malloc(R.cap);
  R.want = malloc(R.cap);
  if (!R.in || !R.got || !R.want) DIE("out of memory (%zu bytes)", R.cap);

  if (avgInt) avgIntCheck(&R);
  for (int s = 0; s < gNspecs; s++) runSpec(&R, &gSpecs[s]);

  CHECK_GB(gbStreamDestroy(R.stream));
  CHECK_GB(gbMemFree(R.dSend));
  CHECK_GB(gbMemFree(R.dRecv));
  CHECK_GB(gbMemFree(R.dScalar));
  CHECK_GB(gbCommDestroy(R.comm));
  char summary[256];
  int len = 0;
  for (int k = 0; k < K_COUNT; k++)
    if (R.counts[k]) len += snprintf(summary + len, sizeof(summary) - (size_t)len, "%s%d %s", len ? ", " : "", R.counts[k], kindNames[k]);
  printf("ok: rank %d of %d, %d islands, policy %s, %s cases passed in %.2f s\n", R.rank, gN, gNislands,
         policyNames[gPolicy], len ? summary : "no", nowS() - t0);
  free(R.in);
  free(R.got);
  free(R.want);
  return 0;
}
