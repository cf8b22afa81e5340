/* One rank of the collectives matrix (tests/mp/test_collectives.py).
 *
 * Every rank generates every rank's inputs from a counter-based generator,
 * computes the expected bits on its own from the documented reduction order
 * (written again here from the contract, not taken from the library), and
 * compares its result bit for bit. Any difference prints the first bad index
 * and exits 1.
 *
 * Usage: rank_collectives --layout V0,V1,... [--seed S]
 *          [--allreduce COUNTS:DTYPES:OPS:PLACES]...   PLACES: o, i or oi
 *          [--broadcast COUNTS:DTYPES:ROOTS:PLACES]... ROOTS: ranks, -1 = last
 *          [--avg-int-check] [--reps N]
 *          [--wait-file R:PATH] (rank R waits for PATH before init)
 *          [--wait-file-after-init PATH] (every rank waits after init)
 * The policy, chunk and ring threshold come from GPUBRIDGE_POLICY,
 * GPUBRIDGE_CHUNK_BYTES and GPUBRIDGE_RING_MIN_BYTES, which the driver sets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpubridge/gpubridge.h"
#include "rank_common.h"

#define MAX_SPECS 16

static int gPolicy; /* resolved */

/* ------------------------------------------------------------ the matrix */

typedef struct {
  int broadcast;
  size_t counts[32];
  int ncounts;
  int dtypes[gbNumTypes], ndtypes;
  int ops[gbNumOps], nops;
  int roots[32], nroots;
  int outOfPlace, inPlace;
} spec_t;

static spec_t gSpecs[MAX_SPECS];
static int gNspecs;

/* "COUNTS:DTYPES:OPS_OR_ROOTS:PLACES" */
static void parseSpec(const char* text, int broadcast) {
  if (gNspecs == MAX_SPECS) DIE("too many specs");
  spec_t* s = &gSpecs[gNspecs++];
  memset(s, 0, sizeof(*s));
  s->broadcast = broadcast;
  char buf[1024];
  snprintf(buf, sizeof(buf), "%s", text);
  char* fields[4];
  char* save = NULL;
  for (int f = 0; f < 4; f++) {
    fields[f] = strtok_r(f ? NULL : buf, ":", &save);
    if (!fields[f]) DIE("spec '%s' needs 4 fields COUNTS:DTYPES:%s:PLACES", text, broadcast ? "ROOTS" : "OPS");
  }
  char *tok, *sv;
  for (tok = strtok_r(fields[0], ",", &sv); tok; tok = strtok_r(NULL, ",", &sv))
    if (s->ncounts < 32) s->counts[s->ncounts++] = (size_t)strtoull(tok, NULL, 10);
  for (tok = strtok_r(fields[1], ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
    if (strcmp(tok, "all") == 0) {
      for (int d = 0; d < gbNumTypes; d++) s->dtypes[s->ndtypes++] = d;
      continue;
    }
    int d = nameIndex(tok, dtNames, gbNumTypes);
    if (d < 0) DIE("unknown dtype %s", tok);
    s->dtypes[s->ndtypes++] = d;
  }
  for (tok = strtok_r(fields[2], ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
    if (broadcast) {
      int r = atoi(tok);
      if (r < 0) r += gN;
      int dup = 0;
      for (int i = 0; i < s->nroots; i++) dup |= s->roots[i] == r;
      if (r >= 0 && r < gN && !dup && s->nroots < 32) s->roots[s->nroots++] = r;
    } else if (strcmp(tok, "all") == 0) {
      for (int o = 0; o < gbNumOps; o++) s->ops[s->nops++] = o;
    } else {
      int o = nameIndex(tok, opNames, gbNumOps);
      if (o < 0) DIE("unknown op %s", tok);
      s->ops[s->nops++] = o;
    }
  }
  s->outOfPlace = strchr(fields[3], 'o') != NULL;
  s->inPlace = strchr(fields[3], 'i') != NULL;
}

typedef struct {
  gbComm_t comm;
  void* stream;
  int rank;
  void *dSend, *dRecv;       /* device buffers */
  char *in, *got, *want;     /* host buffers */
  size_t cap;                /* bytes of each buffer */
  int caseIdx;
  int nAllReduce, nBroadcast;
} run_t;

#define PATTERN 0xA5

static void syncAndCheck(run_t* R, const char* what) {
  gbResult_t res = gbStreamSynchronize(R->stream);
  if (res != gbSuccess) DIE("%s: gbStreamSynchronize returned %d: %s", what, (int)res, gbGetLastError(R->comm));
  gbResult_t async = gbSuccess;
  CHECK_GB(gbCommGetAsyncError(R->comm, &async));
  if (async != gbSuccess) DIE("%s: async error %d: %s", what, (int)async, gbGetLastError(R->comm));
}

static void runAllReduce(run_t* R, size_t count, int dt, int op, int inPlace) {
  int caseIdx = R->caseIdx++;
  size_t es = dtSizes[dt], bytes = count * es, probe = bytes ? bytes : 16;
  char what[160];
  snprintf(what, sizeof(what), "case %d: allreduce %s %s count %zu %s (policy %s)", caseIdx, dtNames[dt],
           opNames[op], count, inPlace ? "in place" : "out of place", policyNames[gPolicy]);
  genInput(inputKey(R->rank, caseIdx), 0, count, dt, R->in);
  memset(R->want, PATTERN, probe);
  CHECK_GB(gbMemcpyToDevice(R->dRecv, R->want, probe));
  if (inPlace) CHECK_GB(gbMemcpyToDevice(R->dRecv, R->in, bytes));
  else CHECK_GB(gbMemcpyToDevice(R->dSend, R->in, bytes));
  const void* send = inPlace ? R->dRecv : R->dSend;
  gbResult_t res = gbAllReduce(send, R->dRecv, count, dt, op, R->comm, R->stream);
  if (res != gbSuccess) DIE("%s: gbAllReduce returned %d: %s", what, (int)res, gbGetLastError(R->comm));
  syncAndCheck(R, what);
  CHECK_GB(gbMemcpyToHost(R->got, R->dRecv, probe));
  if (count == 0) {
    compare(what, R->got, R->want, probe, gbUint8); /* untouched */
  } else {
    gCall = (call_t){.dt = dt, .op = op, .es = es, .ringMin = gCall.ringMin};
    expectedAllReduce(gPolicy, caseIdx, count, R->want);
    compare(what, R->got, R->want, count, dt);
  }
  if (!inPlace && count) {
    CHECK_GB(gbMemcpyToHost(R->got, R->dSend, bytes));
    char w2[200];
    snprintf(w2, sizeof(w2), "%s: send buffer changed", what);
    compare(w2, R->got, R->in, count, dt);
  }
  R->nAllReduce++;
}

static void runBroadcast(run_t* R, size_t count, int dt, int root, int inPlace) {
  int caseIdx = R->caseIdx++;
  size_t es = dtSizes[dt], bytes = count * es, probe = bytes ? bytes : 16;
  char what[160];
  snprintf(what, sizeof(what), "case %d: broadcast %s count %zu root %d %s", caseIdx, dtNames[dt], count, root,
           inPlace ? "in place" : "out of place");
  genInput(inputKey(R->rank, caseIdx), 0, count, dt, R->in);
  memset(R->want, PATTERN, probe);
  CHECK_GB(gbMemcpyToDevice(R->dRecv, R->want, probe));
  if (inPlace && R->rank == root) CHECK_GB(gbMemcpyToDevice(R->dRecv, R->in, bytes));
  if (!inPlace) CHECK_GB(gbMemcpyToDevice(R->dSend, R->in, bytes));
  const void* send = inPlace ? R->dRecv : R->dSend;
  gbResult_t res = gbBroadcast(send, R->dRecv, count, dt, root, R->comm, R->stream);
  if (res != gbSuccess) DIE("%s: gbBroadcast returned %d: %s", what, (int)res, gbGetLastError(R->comm));
  syncAndCheck(R, what);
  CHECK_GB(gbMemcpyToHost(R->got, R->dRecv, probe));
  if (count == 0) {
    compare(what, R->got, R->want, probe, gbUint8);
  } else {
    genInput(inputKey(root, caseIdx), 0, count, dt, R->want);
    compare(what, R->got, R->want, count, dt);
  }
  if (!inPlace && count) {
    CHECK_GB(gbMemcpyToHost(R->got, R->dSend, bytes));
    char w2[200];
    snprintf(w2, sizeof(w2), "%s: send buffer changed", what);
    compare(w2, R->got, R->in, count, dt);
  }
  R->nBroadcast++;
}

/* avg needs a floating type: every integer type must be refused with
 * gbInvalidArgument before anything is sent (the matrix that follows would
 * fall out of step otherwise). */
static void avgIntCheck(run_t* R) {
  for (int dt = 0; dt < gbNumTypes; dt++) {
    if (isFloat(dt)) continue;
    gbResult_t res = gbAllReduce(R->dSend, R->dRecv, 7, dt, gbAvg, R->comm, R->stream);
    if (res != gbInvalidArgument)
      DIE("allreduce avg on %s returned %d (%s), expected gbInvalidArgument (%d)", dtNames[dt], (int)res,
          gbGetErrorString(res), (int)gbInvalidArgument);
    if (!*gbGetLastError(R->comm)) DIE("allreduce avg on %s: gbGetLastError is empty", dtNames[dt]);
  }
  syncAndCheck(R, "after the refused avg calls");
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  gRank = envRank();
  const char* layout = NULL;
  const char* waitAfter = NULL;
  int waitRank = -1, avgInt = 0, reps = 1;
  const char* waitPath = NULL;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--layout") == 0 && v) layout = v, i++;
    else if (strcmp(a, "--seed") == 0 && v) gSeed = strtoull(v, NULL, 10), i++;
    else if (strcmp(a, "--reps") == 0 && v) reps = atoi(v), i++;
    else if (strcmp(a, "--avg-int-check") == 0) avgInt = 1;
    else if (strcmp(a, "--wait-file-after-init") == 0 && v) waitAfter = v, i++;
    else if (strcmp(a, "--wait-file") == 0 && v && strchr(v, ':')) {
      waitRank = atoi(v);
      waitPath = strchr(v, ':') + 1;
      i++;
    } else if ((strcmp(a, "--allreduce") == 0 || strcmp(a, "--broadcast") == 0) && v) {
      i++; /* parsed once the world size is known */
    } else DIE("bad argument '%s'", a);
  }
  if (!layout) DIE("--layout V0,V1,... is required");
  parseLayout(layout);
  for (int i = 1; i + 1 < argc; i++) {
    if (strcmp(argv[i], "--allreduce") == 0) parseSpec(argv[++i], 0);
    else if (strcmp(argv[i], "--broadcast") == 0) parseSpec(argv[++i], 1);
  }
  gPolicy = resolvedPolicy();
  gChunkBytes = envSize("GPUBRIDGE_CHUNK_BYTES");
  gCall.ringMin = envSize("GPUBRIDGE_RING_MIN_BYTES");

  if (waitPath && gRank == waitRank) waitFile(waitPath, 60);

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
  if (waitAfter) waitFile(waitAfter, 60);

  for (int s = 0; s < gNspecs; s++)
    for (int c = 0; c < gSpecs[s].ncounts; c++)
      for (int d = 0; d < gSpecs[s].ndtypes; d++)
        if (gSpecs[s].counts[c] * dtSizes[gSpecs[s].dtypes[d]] > R.cap)
          R.cap = gSpecs[s].counts[c] * dtSizes[gSpecs[s].dtypes[d]];
  R.cap += 64;
  CHECK_GB(gbStreamCreate(&R.stream));
  CHECK_GB(gbMemAlloc(&R.dSend, R.cap));
  CHECK_GB(gbMemAlloc(&R.dRecv, R.cap));
  R.in = malloc(R.cap);
  R.got = malloc(R.cap);
  R.want = malloc(R.cap);
  if (!R.in || !R.got || !R.want) DIE("out of memory (%zu bytes)", R.cap);

  if (avgInt) avgIntCheck(&R);
  for (int rep = 0; rep < reps; rep++)
    for (int s = 0; s < gNspecs; s++) {
      const spec_t* sp = &gSpecs[s];
      for (int c = 0; c < sp->ncounts; c++)
        for (int d = 0; d < sp->ndtypes; d++)
          for (int p = 0; p < 2; p++) {
            if ((p == 0 && !sp->outOfPlace) || (p == 1 && !sp->inPlace)) continue;
            if (sp->broadcast) {
              for (int k = 0; k < sp->nroots; k++) runBroadcast(&R, sp->counts[c], sp->dtypes[d], sp->roots[k], p);
            } else {
              for (int o = 0; o < sp->nops; o++) {
                if (sp->ops[o] == gbAvg && !isFloat(sp->dtypes[d])) continue;
                runAllReduce(&R, sp->counts[c], sp->dtypes[d], sp->ops[o], p);
              }
            }
          }
    }

  CHECK_GB(gbStreamDestroy(R.stream));
  CHECK_GB(gbMemFree(R.dSend));
  CHECK_GB(gbMemFree(R.dRecv));
  CHECK_GB(gbCommDestroy(R.comm));
  printf("ok: rank %d of %d, %d islands, policy %s, %d all-reduce and %d broadcast cases passed in %.2f s\n",
         R.rank, gN, gNislands, policyNames[gPolicy], R.nAllReduce, R.nBroadcast, nowS() - t0);
  free(R.in);
  free(R.got);
  free(R.want);
  return 0;
}
