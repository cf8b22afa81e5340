/* One rank of the split suite (tests/mp/test_split.py).
 *
 * Splits the world (and optionally the child again) with gbCommSplit, checks
 * each new communicator's size, rank and topology against what this program
 * computes from the layout and the colors and keys, then runs collectives on
 * every communicator, interleaved (all-reduce, broadcast, reduce, all-gather,
 * reduce-scatter), and destroys the communicators in the order given, running
 * one more all-reduce on each survivor after every destroy.
 *
 * Inputs are integers (float32 ones small enough to be exact) derived from
 * the world rank of each contributor, so every expected value is computed
 * here without depending on the reduction order, and the all-gather shows
 * the members' order (key, then parent rank).
 *
 * Usage: rank_split --layout V0,V1,... [--split SPEC] [--split SPEC]
 *          [--world-policy NAME] [--config-policy NAME] [--count N] [--rounds R]
 *          [--batch]
 *          [--destroy L,L,...]
 *   SPEC: COLOR[,key=KEY][,nocolor=R+R...]  (applied to the previous level;
 *         nocolor ranks are ranks of the communicator being split)
 *   COLOR: island (the island index in that communicator's topology),
 *          parity (rank % 2), half (rank < n/2), same (one color)
 *   KEY: rank (default), reverse (n-1-rank), pairs (rank/2: ties), neg (-rank)
 *   --world-policy: the world is created with a config of this policy
 *          (not the environment), so a child split with config NULL shows
 *          whether it inherits the parent's settings or reads the environment
 *   --config-policy: the first split passes a config with this policy
 *          (otherwise NULL: the child inherits the parent's settings)
 *   --batch: per round, enqueue one collective on every communicator (each
 *          on its own stream) before synchronizing any
 *   --destroy: order of destruction by level (0 = world); default 0,1,2 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpubridge/gpubridge.h"
#include "rank_die.h"

#define MAX_RANKS 64
#define MAX_LEVELS 3

static const char* policyNames[gbNumPolicies] = {"auto", "hierarchical", "native", "flat", "split-rail", "tuned"};

static int policyIndex(const char* s) {
  for (int i = 0; i < gbNumPolicies; i++)
    if (strcmp(s, policyNames[i]) == 0) return i;
  return -1;
}

/* ------------------------------------------------------------ the levels */

enum { COLOR_ISLAND, COLOR_PARITY, COLOR_HALF, COLOR_SAME };
enum { KEY_RANK, KEY_REVERSE, KEY_PAIRS, KEY_NEG };

typedef struct {
  int color, key;
  int nocolor[MAX_RANKS]; /* by rank of the communicator being split */
} split_t;

/* One communicator as this rank expects it (members are world ranks in the
 * communicator's rank order) and as it got it. */
typedef struct {
  int exists;       /* this rank is a member */
  int alive;        /* not destroyed yet */
  int n, me;
  int members[MAX_RANKS];
  int policy;       /* configured (auto allowed) */
  int nislands;
  int islandOf[MAX_RANKS], leader[MAX_RANKS], islandSize[MAX_RANKS];
  gbComm_t comm;
  void* stream;
  void *dSend, *dRecv;
  char *hSend, *hRecv, *want;
  int caseIdx;
  int pending;      /* batch mode: a collective awaits its check */
  char pendingWhat[200];
  size_t pendingBytes;
  int pendingUntouched; /* reduce on a non-root: recv must keep the pattern */
} level_t;

static int gN;
static char gVendor[MAX_RANKS][32];
static level_t gLevels[MAX_LEVELS];
static int gNlevels = 1;
static split_t gSplits[MAX_LEVELS];
static int gNsplits;
static int gConfigPolicy = -1;
static size_t gCount = 3000;
static size_t gCap;

/* Islands in rank order of first appearance; leader = lowest rank. */
static void expectTopology(level_t* L) {
  L->nislands = 0;
  for (int r = 0; r < L->n; r++) {
    const char* v = gVendor[L->members[r]];
    int is = -1;
    for (int k = 0; k < L->nislands; k++)
      if (strcmp(gVendor[L->members[L->leader[k]]], v) == 0) is = k;
    if (is < 0) {
      is = L->nislands++;
      L->leader[is] = r;
      L->islandSize[is] = 0;
    }
    L->islandOf[r] = is;
    L->islandSize[is]++;
  }
}

/* The policy gbTopology_t reports: what a large all-reduce runs. Under auto,
 * split-rail when every island has two or more ranks (k rails, capped by
 * GPUBRIDGE_RAILS), else hierarchical (docs/ARCHITECTURE.md, "Policies per call"). */
static int resolvedPolicy(const level_t* L) {
  if (L->policy != gbPolicyAuto) return L->policy;
  if (L->nislands == 1) return gbPolicyNative;
  if (L->nislands == L->n) return gbPolicyFlat;
  int k = L->islandSize[0];
  for (int i = 1; i < L->nislands; i++)
    if (L->islandSize[i] < k) k = L->islandSize[i];
  const char* cap = getenv("GPUBRIDGE_RAILS");
  if (cap && atoi(cap) > 0 && k > atoi(cap)) k = atoi(cap);
  return k >= 2 ? gbPolicySplitRail : gbPolicyHierarchical;
}

static void checkComm(const level_t* L, int lv) {
  int n = -1, r = -1;
  CHECK_GB(gbCommCount(L->comm, &n));
  CHECK_GB(gbCommUserRank(L->comm, &r));
  if (n != L->n || r != L->me) DIE("level %d: gbCommCount %d, gbCommUserRank %d; expected %d and %d", lv, n, r, L->n, L->me);
  gbTopology_t t;
  CHECK_GB(gbCommGetTopology(L->comm, &t));
  if (t.nranks != L->n || t.rank != L->me)
    DIE("level %d: topology nranks %d rank %d, expected %d and %d", lv, t.nranks, t.rank, L->n, L->me);
  if (t.nislands != L->nislands) DIE("level %d: topology has %d islands, expected %d", lv, t.nislands, L->nislands);
  if (t.island != L->islandOf[L->me]) DIE("level %d: topology island %d, expected %d", lv, t.island, L->islandOf[L->me]);
  if (t.runKind != gbRunSimulated) DIE("level %d: runKind %d, expected simulated (%d)", lv, t.runKind, gbRunSimulated);
  if (t.splitTest != 0) DIE("level %d: splitTest %d, expected 0", lv, t.splitTest);
  int want = resolvedPolicy(L);
  if (t.policy != want)
    DIE("level %d: topology policy %d (%s), expected %d (%s)", lv, t.policy,
        t.policy >= 0 && t.policy < gbNumPolicies ? policyNames[t.policy] : "?", want, policyNames[want]);
  for (int i = 0; i < L->n; i++)
    if (t.islandOfRank[i] != L->islandOf[i])
      DIE("level %d: islandOfRank[%d] = %d, expected %d", lv, i, t.islandOfRank[i], L->islandOf[i]);
  for (int k = 0; k < L->nislands; k++) {
    if (t.leaderOfIsland[k] != L->leader[k])
      DIE("level %d: leader of island %d is %d, expected %d", lv, k, t.leaderOfIsland[k], L->leader[k]);
    if (t.islandSize[k] != L->islandSize[k])
      DIE("level %d: island %d has %d ranks, expected %d", lv, k, t.islandSize[k], L->islandSize[k]);
    const char* v = gVendor[L->members[L->leader[k]]];
    if (!t.islandVendor[k] || strcmp(t.islandVendor[k], v) != 0)
      DIE("level %d: island %d vendor '%s', expected '%s'", lv, k, t.islandVendor[k] ? t.islandVendor[k] : "(null)", v);
  }
}

static int colorOf(const split_t* s, const level_t* P, int r) {
  if (s->nocolor[r]) return GB_SPLIT_NOCOLOR;
  switch (s->color) {
    case COLOR_ISLAND: return P->islandOf[r];
    case COLOR_PARITY: return r % 2;
    case COLOR_HALF: return r < P->n / 2 ? 0 : 1;
    default: return 7;
  }
}

static int keyOf(const split_t* s, const level_t* P, int r) {
  switch (s->key) {
    case KEY_REVERSE: return P->n - 1 - r;
    case KEY_PAIRS: return r / 2;
    case KEY_NEG: return -r;
    default: return r;
  }
}

/* The child of P this rank expects from split s: members with my color,
 * ordered by key, ties by parent rank. */
static void expectChild(const split_t* s, const level_t* P, level_t* C) {
  memset(C, 0, sizeof(*C));
  C->me = -1;
  int mine = colorOf(s, P, P->me);
  if (mine == GB_SPLIT_NOCOLOR) return;
  int idx[MAX_RANKS], m = 0;
  for (int r = 0; r < P->n; r++)
    if (colorOf(s, P, r) == mine) idx[m++] = r;
  for (int i = 1; i < m; i++) /* insertion sort by (key, parent rank) */
    for (int j = i; j > 0; j--) {
      int a = idx[j - 1], b = idx[j];
      int ka = keyOf(s, P, a), kb = keyOf(s, P, b);
      if (ka > kb || (ka == kb && a > b)) {
        idx[j - 1] = b;
        idx[j] = a;
      }
    }
  C->exists = 1;
  C->n = m;
  for (int i = 0; i < m; i++) {
    C->members[i] = P->members[idx[i]];
    if (idx[i] == P->me) C->me = i;
  }
  expectTopology(C);
}

/* ------------------------------------------------------------ values */

static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* World rank w's element i in case c of level lv. */
static uint32_t valU32(int w, int lv, int c, size_t i) {
  return (uint32_t)(mix64(((uint64_t)w << 48) ^ ((uint64_t)lv << 40) ^ ((uint64_t)c << 32) ^ i) >> 17);
}
/* Small integers: sums of up to 64 of them are exact in float32. */
static float valF32(int w, int lv, int c, size_t i) { return (float)((int)(valU32(w, lv, c, i) % 2001u) - 1000); }

static uint32_t foldU32(uint32_t a, uint32_t b, int op) {
  switch (op) {
    case gbProd: return a * b;
    case gbMax: return (int32_t)a > (int32_t)b ? a : b;
    case gbMin: return (int32_t)a < (int32_t)b ? a : b;
    default: return a + b;
  }
}

static const char* opNames[] = {"sum", "prod", "max", "min"};

/* ------------------------------------------------------------ collectives */

#define PATTERN 0x5A

enum { K_ALLREDUCE, K_ALLREDUCE_F32, K_BROADCAST, K_ALLGATHER, K_REDUCESCATTER, K_REDUCE, K_NKINDS };
static const char* kindNames[K_NKINDS] = {"all-reduce int32", "all-reduce float32", "broadcast", "all-gather",
                                          "reduce-scatter", "reduce"};

static void compareBytes(const char* what, const void* got, const void* want, size_t bytes) {
  if (memcmp(got, want, bytes) == 0) return;
  size_t i = 0;
  while (((const unsigned char*)got)[i] == ((const unsigned char*)want)[i]) i++;
  size_t e = i / 4;
  uint32_t g, w;
  memcpy(&g, (const char*)got + e * 4, 4);
  memcpy(&w, (const char*)want + e * 4, 4);
  DIE("%s: first bad element %zu of %zu: got 0x%08x, expected 0x%08x", what, e, bytes / 4, g, w);
}

/* Enqueues collective `kind` on level lv and writes the expectation; the
 * check happens in finishCase. */
static void startCase(level_t* L, int lv, int kind, size_t count) {
  int c = L->caseIdx++;
  int n = L->n, me = L->me;
  int op = c % 4;
  int root = (c * 3 + lv) % n;
  uint32_t* s = (uint32_t*)L->hSend;
  uint32_t* w = (uint32_t*)L->want;
  float* sf = (float*)L->hSend;
  float* wf = (float*)L->want;
  size_t sendN = kind == K_REDUCESCATTER ? count * (size_t)n : count;
  size_t recvN = kind == K_ALLGATHER ? count * (size_t)n : count;
  if (sendN * 4 > gCap || recvN * 4 > gCap) DIE("buffer too small");
  snprintf(L->pendingWhat, sizeof(L->pendingWhat), "level %d (rank %d of %d) case %d: %s count %zu", lv, me, n, c,
           kindNames[kind], count);
  L->pendingUntouched = 0;
  for (size_t i = 0; i < sendN; i++) {
    if (kind == K_ALLREDUCE_F32) sf[i] = valF32(L->members[me], lv, c, i);
    else s[i] = valU32(L->members[me], lv, c, i);
  }
  CHECK_GB(gbMemcpyToDevice(L->dSend, L->hSend, sendN * 4));
  memset(L->hRecv, PATTERN, recvN * 4);
  CHECK_GB(gbMemcpyToDevice(L->dRecv, L->hRecv, recvN * 4));
  gbResult_t res = gbSuccess;
  switch (kind) {
    case K_ALLREDUCE:
      snprintf(L->pendingWhat + strlen(L->pendingWhat), sizeof(L->pendingWhat) - strlen(L->pendingWhat), " %s",
               opNames[op]);
      for (size_t i = 0; i < count; i++) {
        uint32_t a = valU32(L->members[0], lv, c, i);
        for (int r = 1; r < n; r++) a = foldU32(a, valU32(L->members[r], lv, c, i), op);
        w[i] = a;
      }
      res = gbAllReduce(L->dSend, L->dRecv, count, gbInt32, (gbRedOp_t)op, L->comm, L->stream);
      break;
    case K_ALLREDUCE_F32:
      for (size_t i = 0; i < count; i++) {
        float a = 0;
        for (int r = 0; r < n; r++) a += valF32(L->members[r], lv, c, i);
        wf[i] = a;
      }
      res = gbAllReduce(L->dSend, L->dRecv, count, gbFloat32, gbSum, L->comm, L->stream);
      break;
    case K_BROADCAST:
      snprintf(L->pendingWhat + strlen(L->pendingWhat), sizeof(L->pendingWhat) - strlen(L->pendingWhat), " root %d",
               root);
      for (size_t i = 0; i < count; i++) w[i] = valU32(L->members[root], lv, c, i);
      res = gbBroadcast(L->dSend, L->dRecv, count, gbInt32, root, L->comm, L->stream);
      break;
    case K_ALLGATHER:
      for (int r = 0; r < n; r++)
        for (size_t i = 0; i < count; i++) w[(size_t)r * count + i] = valU32(L->members[r], lv, c, i);
      res = gbAllGather(L->dSend, L->dRecv, count, gbInt32, L->comm, L->stream);
      break;
    case K_REDUCESCATTER:
      snprintf(L->pendingWhat + strlen(L->pendingWhat), sizeof(L->pendingWhat) - strlen(L->pendingWhat), " %s",
               opNames[op]);
      for (size_t i = 0; i < count; i++) {
        size_t j = (size_t)me * count + i;
        uint32_t a = valU32(L->members[0], lv, c, j);
        for (int r = 1; r < n; r++) a = foldU32(a, valU32(L->members[r], lv, c, j), op);
        w[i] = a;
      }
      res = gbReduceScatter(L->dSend, L->dRecv, count, gbInt32, (gbRedOp_t)op, L->comm, L->stream);
      break;
    case K_REDUCE:
      snprintf(L->pendingWhat + strlen(L->pendingWhat), sizeof(L->pendingWhat) - strlen(L->pendingWhat),
               " %s root %d", opNames[op], root);
      if (me == root) {
        for (size_t i = 0; i < count; i++) {
          uint32_t a = valU32(L->members[0], lv, c, i);
          for (int r = 1; r < n; r++) a = foldU32(a, valU32(L->members[r], lv, c, i), op);
          w[i] = a;
        }
      } else {
        memset(L->want, PATTERN, count * 4); /* recvbuff is not touched elsewhere */
        L->pendingUntouched = 1;
      }
      res = gbReduce(L->dSend, L->dRecv, count, gbInt32, (gbRedOp_t)op, root, L->comm, L->stream);
      break;
  }
  if (res != gbSuccess) DIE("%s: the call returned %d (%s): %s", L->pendingWhat, (int)res, gbGetErrorString(res),
                            gbGetLastError(L->comm));
  L->pending = 1;
  L->pendingBytes = recvN * 4;
}

static void finishCase(level_t* L) {
  if (!L->pending) return;
  L->pending = 0;
  gbResult_t res = gbStreamSynchronize(L->stream);
  if (res != gbSuccess) DIE("%s: gbStreamSynchronize returned %d: %s", L->pendingWhat, (int)res, gbGetLastError(L->comm));
  gbResult_t async = gbSuccess;
  CHECK_GB(gbCommGetAsyncError(L->comm, &async));
  if (async != gbSuccess) DIE("%s: async error %d: %s", L->pendingWhat, (int)async, gbGetLastError(L->comm));
  CHECK_GB(gbMemcpyToHost(L->hRecv, L->dRecv, L->pendingBytes));
  compareBytes(L->pendingWhat, L->hRecv, L->want, L->pendingBytes);
}

static int gNcases;

/* One round: one collective on every live communicator, kinds rotating so
 * that the levels run different collectives side by side. */
static void round_(int roundIdx, int batch) {
  for (int lv = 0; lv < gNlevels; lv++) {
    level_t* L = &gLevels[lv];
    if (!L->exists || !L->alive) continue;
    int kind = (roundIdx + 2 * lv) % K_NKINDS;
    startCase(L, lv, kind, gCount + (size_t)(roundIdx % 5));
    if (!batch) finishCase(L);
    gNcases++;
  }
  for (int lv = 0; lv < gNlevels; lv++)
    if (gLevels[lv].exists && gLevels[lv].alive) finishCase(&gLevels[lv]);
}

static void allocLevel(level_t* L) {
  CHECK_GB(gbStreamCreate(&L->stream));
  CHECK_GB(gbMemAlloc(&L->dSend, gCap));
  CHECK_GB(gbMemAlloc(&L->dRecv, gCap));
  L->hSend = malloc(gCap);
  L->hRecv = malloc(gCap);
  L->want = malloc(gCap);
  if (!L->hSend || !L->hRecv || !L->want) DIE("out of memory");
}

static void freeLevel(level_t* L) {
  CHECK_GB(gbStreamDestroy(L->stream));
  CHECK_GB(gbMemFree(L->dSend));
  CHECK_GB(gbMemFree(L->dRecv));
  free(L->hSend);
  free(L->hRecv);
  free(L->want);
}

/* ------------------------------------------------------------ arguments */

static void parseSplit(const char* text) {
  if (gNsplits == MAX_LEVELS - 1) DIE("at most %d --split", MAX_LEVELS - 1);
  split_t* s = &gSplits[gNsplits++];
  memset(s, 0, sizeof(*s));
  char buf[512], *sv;
  snprintf(buf, sizeof(buf), "%s", text);
  int first = 1;
  for (char* tok = strtok_r(buf, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv), first = 0) {
    if (first) {
      if (strcmp(tok, "island") == 0) s->color = COLOR_ISLAND;
      else if (strcmp(tok, "parity") == 0) s->color = COLOR_PARITY;
      else if (strcmp(tok, "half") == 0) s->color = COLOR_HALF;
      else if (strcmp(tok, "same") == 0) s->color = COLOR_SAME;
      else DIE("--split '%s': unknown color '%s'", text, tok);
    } else if (strncmp(tok, "key=", 4) == 0) {
      const char* k = tok + 4;
      if (strcmp(k, "rank") == 0) s->key = KEY_RANK;
      else if (strcmp(k, "reverse") == 0) s->key = KEY_REVERSE;
      else if (strcmp(k, "pairs") == 0) s->key = KEY_PAIRS;
      else if (strcmp(k, "neg") == 0) s->key = KEY_NEG;
      else DIE("--split '%s': unknown key '%s'", text, k);
    } else if (strncmp(tok, "nocolor=", 8) == 0) {
      char* p = tok + 8;
      while (*p) {
        int r = (int)strtol(p, &p, 10);
        if (r < 0 || r >= MAX_RANKS) DIE("--split '%s': bad nocolor rank", text);
        s->nocolor[r] = 1;
        if (*p == '+') p++;
        else if (*p) DIE("--split '%s': bad nocolor list", text);
      }
    } else {
      DIE("--split '%s': unknown part '%s'", text, tok);
    }
  }
}

static int envRank(void) {
  const char* v = getenv("RANK");
  return v ? atoi(v) : -1;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  gRank = envRank();
  const char* layout = NULL;
  const char* destroy = "0,1,2";
  int rounds = 8, batch = 0, worldConfigPolicy = -1;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--layout") == 0 && v) layout = v, i++;
    else if (strcmp(a, "--split") == 0 && v) parseSplit(v), i++;
    else if (strcmp(a, "--world-policy") == 0 && v) {
      worldConfigPolicy = policyIndex(v);
      if (worldConfigPolicy < 0) DIE("unknown policy '%s'", v);
      i++;
    } else if (strcmp(a, "--config-policy") == 0 && v) {
      gConfigPolicy = policyIndex(v);
      if (gConfigPolicy < 0) DIE("unknown policy '%s'", v);
      i++;
    } else if (strcmp(a, "--count") == 0 && v) gCount = (size_t)strtoull(v, NULL, 10), i++;
    else if (strcmp(a, "--rounds") == 0 && v) rounds = atoi(v), i++;
    else if (strcmp(a, "--destroy") == 0 && v) destroy = v, i++;
    else if (strcmp(a, "--batch") == 0) batch = 1;
    else DIE("bad argument '%s'", a);
  }
  if (!layout) DIE("--layout V0,V1,... is required");
  char lbuf[4096], *sv;
  snprintf(lbuf, sizeof(lbuf), "%s", layout);
  for (char* tok = strtok_r(lbuf, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
    if (gN == MAX_RANKS) DIE("layout too long");
    snprintf(gVendor[gN++], sizeof(gVendor[0]), "%s", tok);
  }
  const char* pol = getenv("GPUBRIDGE_POLICY");
  int worldPolicy = pol && *pol ? policyIndex(pol) : gbPolicyAuto;
  if (worldPolicy < 0) DIE("GPUBRIDGE_POLICY=%s is not a policy this test knows", pol);
  gbConfig_t worldConfig = GB_CONFIG_INITIALIZER;
  if (worldConfigPolicy >= 0) worldPolicy = worldConfig.policy = worldConfigPolicy;
  gCap = (gCount + 8) * 4 * (size_t)gN + 64;

  double t0 = nowS();
  level_t* W = &gLevels[0];
  W->exists = W->alive = 1;
  W->n = gN;
  W->policy = worldPolicy;
  for (int r = 0; r < gN; r++) W->members[r] = r;
  gbResult_t res = gbCommInitFromEnv(&W->comm, worldConfigPolicy >= 0 ? &worldConfig : NULL);
  if (res != gbSuccess) DIE("gbCommInitFromEnv returned %d: %s", (int)res, gbGetLastError(NULL));
  CHECK_GB(gbCommUserRank(W->comm, &W->me));
  if (gRank >= 0 && gRank != W->me) DIE("RANK=%d but gbCommUserRank says %d", gRank, W->me);
  gRank = W->me;
  const char* myVendor = getenv("GPUBRIDGE_VENDOR");
  if (!myVendor || strcmp(myVendor, gVendor[W->me]) != 0)
    DIE("GPUBRIDGE_VENDOR=%s, but the layout gives rank %d '%s'", myVendor ? myVendor : "(unset)", W->me,
        gVendor[W->me]);
  expectTopology(W);
  checkComm(W, 0);
  allocLevel(W);
  round_(0, batch);

  int roundIdx = 1;
  for (int s = 0; s < gNsplits; s++) {
    level_t* P = &gLevels[s];
    level_t* C = &gLevels[s + 1];
    gNlevels = s + 2;
    if (!P->exists) { /* not in the parent: takes no part in this split */
      memset(C, 0, sizeof(*C));
      round_(roundIdx++, batch);
      continue;
    }
    expectChild(&gSplits[s], P, C);
    C->policy = (s == 0 && gConfigPolicy >= 0) ? gConfigPolicy : P->policy;
    int color = colorOf(&gSplits[s], P, P->me), key = keyOf(&gSplits[s], P, P->me);
    gbConfig_t config = GB_CONFIG_INITIALIZER;
    gbConfig_t* cfg = NULL;
    if (s == 0 && gConfigPolicy >= 0) {
      config.policy = gConfigPolicy;
      cfg = &config;
    }
    gbComm_t child = (gbComm_t)(uintptr_t)0x1; /* must be overwritten */
    double ts = nowS();
    res = gbCommSplit(P->comm, color, key, &child, cfg);
    if (res != gbSuccess) DIE("level %d: gbCommSplit(color %d, key %d) returned %d (%s): %s", s + 1, color, key,
                              (int)res, gbGetErrorString(res), gbGetLastError(P->comm));
    if (!C->exists) {
      if (child != NULL) DIE("level %d: GB_SPLIT_NOCOLOR gave a non-NULL communicator %p", s + 1, (void*)child);
      printf("split %d: rank %d: color NOCOLOR -> NULL (%.2f s)\n", s + 1, P->me, nowS() - ts);
    } else {
      if (child == NULL || child == (gbComm_t)(uintptr_t)0x1)
        DIE("level %d: gbCommSplit(color %d, key %d) gave no communicator", s + 1, color, key);
      C->comm = child;
      C->alive = 1;
      checkComm(C, s + 1);
      allocLevel(C);
      char mem[256] = "";
      for (int i = 0; i < C->n; i++)
        snprintf(mem + strlen(mem), sizeof(mem) - strlen(mem), "%s%d", i ? "," : "", C->members[i]);
      printf("split %d: parent rank %d color %d key %d -> rank %d of %d (world ranks %s), %d islands, policy %s "
             "(%.2f s)\n",
             s + 1, P->me, color, key, C->me, C->n, mem, C->nislands, policyNames[resolvedPolicy(C)], nowS() - ts);
    }
    round_(roundIdx++, batch);
  }
  for (; roundIdx < rounds; roundIdx++) round_(roundIdx, batch);

  /* Destruction in the order given; every survivor keeps working. */
  int order[MAX_LEVELS], norder = 0;
  {
    char dbuf[64], *dsv;
    snprintf(dbuf, sizeof(dbuf), "%s", destroy);
    for (char* tok = strtok_r(dbuf, ",", &dsv); tok; tok = strtok_r(NULL, ",", &dsv)) {
      int lv = atoi(tok);
      if (lv < 0 || lv >= MAX_LEVELS || norder == MAX_LEVELS) DIE("bad --destroy '%s'", destroy);
      order[norder++] = lv;
    }
  }
  for (int lv = 0; lv < gNlevels; lv++) {
    int listed = 0;
    for (int i = 0; i < norder; i++) listed |= order[i] == lv;
    if (!listed) DIE("--destroy '%s' does not name level %d", destroy, lv);
  }
  for (int i = 0; i < norder; i++) {
    level_t* L = &gLevels[order[i]];
    if (order[i] >= gNlevels) continue;
    if (L->exists) { /* the others destroy it now: the survivors' round below runs on every rank */
      res = gbCommDestroy(L->comm);
      if (res != gbSuccess) DIE("gbCommDestroy of level %d returned %d: %s", order[i], (int)res, gbGetLastError(NULL));
      L->alive = 0;
      freeLevel(L);
    }
    for (int lv = 0; lv < gNlevels; lv++) { /* the survivors still work */
      level_t* S = &gLevels[lv];
      if (!S->exists || !S->alive) continue;
      startCase(S, lv, K_ALLREDUCE, gCount);
      finishCase(S);
      gNcases++;
    }
  }
  char shape[128] = "";
  for (int lv = 1; lv < gNlevels; lv++)
    snprintf(shape + strlen(shape), sizeof(shape) - strlen(shape), ", level %d: %s", lv,
             gLevels[lv].exists ? "member" : "none");
  printf("ok: rank %d of %d%s, %d collectives passed, destroyed in order %s, in %.2f s\n", W->me, gN, shape, gNcases,
         destroy, nowS() - t0);
  return 0;
}
