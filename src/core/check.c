/* The call check (GPUBRIDGE_CHECK_CALLS): before a collective runs, every
 * rank's description of it travels to every rank (on the proxy, over the
 * world group); before a send/recv group runs, each pair of ranks in it
 * compares its sends with the peer's receives. Every rank involved computes
 * the same verdict from the same descriptions, so on a mismatch they all
 * fail with the same text, before any data moves. The stream waits for the
 * verdict before its first island step. A failed verdict goes out only
 * after those ranks' earlier calls finished (settle), so no peer fails first
 * with a side effect of the connections closing. A count-0 call takes part
 * like any other. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/result.h"
#include "core/comm.h"
#include "core/trace.h"
#include "plan/plan.h"

/* desc_t.coll of gbBarrier, whose all-reduce of one int32 is named so. */
#define CHECK_BARRIER GB_NUM_COLLS

typedef struct {
  uint64_t seq;
  uint64_t count;
  int32_t coll, dtype, op, root;
} desc_t;

typedef struct {
  gbComm_t comm;
  desc_t mine;
  uint64_t before;  /* collectives put on streams before this one */
} collCheck_t;

static void describe(const desc_t* d, char* buf, size_t len) {
  char op[40] = "";
  int coll = d->coll;
  if (coll == CHECK_BARRIER) {
    snprintf(buf, len, "barrier");
    return;
  }
  if (coll == GB_COLL_ALLREDUCE || coll == GB_COLL_REDUCE || coll == GB_COLL_REDUCESCATTER) {
    if (d->op >= 0 && d->op < gbNumOps) snprintf(op, sizeof(op), ", %s", gbOpName((gbRedOp_t)d->op));
    else snprintf(op, sizeof(op), ", premul_sum op %d", d->op);
  }
  char root[24] = "";
  if (coll == GB_COLL_BROADCAST || coll == GB_COLL_REDUCE) snprintf(root, sizeof(root), ", root %d", d->root);
  snprintf(buf, len, "%s(count %llu, %s%s%s)", gbPlanCollName(coll), (unsigned long long)d->count,
           gbDtypeName((gbDataType_t)d->dtype), op, root);
}

static int64_t fieldOf(const desc_t* d, int field) {
  switch (field) {
    case 0: return d->coll;
    case 1: return (int64_t)d->count;
    case 2: return d->dtype;
    case 3: return d->op;
    default: return d->root;
  }
}

static int fieldApplies(int field, int coll) {
  if (field == 3) return coll == GB_COLL_ALLREDUCE || coll == GB_COLL_REDUCE || coll == GB_COLL_REDUCESCATTER;
  if (field == 4) return coll == GB_COLL_BROADCAST || coll == GB_COLL_REDUCE;
  return 1;
}

static void appendRanks(char* buf, size_t len, const desc_t* all, int n, int field, int64_t value) {
  int count = 0, shown = 0;
  for (int r = 0; r < n; r++) count += fieldOf(&all[r], field) == value;
  size_t used = strlen(buf);
  snprintf(buf + used, len - used, "%s ", count == 1 ? "rank" : "ranks");
  for (int r = 0; r < n; r++) {
    if (fieldOf(&all[r], field) != value) continue;
    used = strlen(buf);
    if (shown == 16) {
      snprintf(buf + used, len - used, ",...");
      break;
    }
    snprintf(buf + used, len - used, "%s%d", shown ? "," : "", r);
    shown++;
  }
}

/* The verdict, identical on every rank: gbSuccess or gbInvalidUsage. */
static gbResult_t verdict(const desc_t* all, int n) {
  static const char* names[] = {"collective", "count", "datatype", "op", "root"};
  for (int field = 0; field < 5; field++) {
    if (!fieldApplies(field, all[0].coll)) continue;
    int differs = 0;
    for (int r = 1; r < n; r++) differs |= fieldOf(&all[r], field) != fieldOf(&all[0], field);
    if (!differs) continue;
    char text[900];
    snprintf(text, sizeof(text), "collective #%llu mismatch: %s differs: ", (unsigned long long)all[0].seq,
             names[field]);
    /* One group per distinct value, in order of each group's lowest rank. */
    for (int r = 0; r < n; r++) {
      int seen = 0;
      for (int q = 0; q < r; q++) seen |= fieldOf(&all[q], field) == fieldOf(&all[r], field);
      if (seen) continue;
      size_t used = strlen(text);
      if (r > 0) snprintf(text + used, sizeof(text) - used, "; ");
      appendRanks(text, sizeof(text), all, n, field, fieldOf(&all[r], field));
      char d[160];
      describe(&all[r], d, sizeof(d));
      int many = 0;
      for (int q = 0; q < n; q++) many += fieldOf(&all[q], field) == fieldOf(&all[r], field);
      used = strlen(text);
      snprintf(text + used, sizeof(text) - used, " %s %s", many > 1 ? "call" : "calls", d);
    }
    size_t used = strlen(text);
    snprintf(text + used, sizeof(text) - used, "; every rank must make the same calls in the same order");
    return gbErrorSet(gbInvalidUsage, "%s", text);
  }
  return gbSuccess;
}

/* A failed verdict fails the communicator, which shuts its connections
 * down. A peer whose stream is still inside an earlier call's island step
 * would then fail with that side effect ("the peer shut the connection
 * down") before its proxy reaches this verdict, and report that instead.
 * So before the failure goes out, this rank's stream finishes the calls
 * queued before this one, and a barrier over the ranks that reached the
 * same verdict (peers, or the world) makes sure each of them has it and is
 * past its earlier calls. A failure of these waits changes nothing: the
 * verdict stays the error. */
static gbResult_t settle(gbComm_t c, uint64_t before, const int* peers, int npeers, gbResult_t res) {
  char text[1024];
  snprintf(text, sizeof(text), "%s", gbErrorLast());
  gbResult_t w = gbSuccess;
  if (before > 0 && c->streamDone) w = gbFlagWaitHost(c->streamDone, before, c->settings.timeoutSec, &c->abortFlag);
  if (w == gbSuccess && peers) {
    gbAlgoP2p_t* x = calloc(2 * (size_t)npeers + 1, sizeof(gbAlgoP2p_t));
    char* bytes = calloc(2 * (size_t)npeers + 1, 1);
    if (x && bytes) {
      for (int j = 0; j < npeers; j++) {
        x[2 * j] = (gbAlgoP2p_t){peers[j], 1, &bytes[2 * j], 1};
        x[2 * j + 1] = (gbAlgoP2p_t){peers[j], 0, &bytes[2 * j + 1], 1};
      }
      (void)gbAlgoSendRecv(&c->world.algo, x, 2 * npeers);
    }
    free(x);
    free(bytes);
  } else if (w == gbSuccess) {
    char* all = calloc((size_t)c->nranks, 1);
    if (all) (void)gbAlgoAllGather(&c->world.algo, &all[c->rank], all, 1);
    free(all);
  }
  gbErrorRecord(text);
  return res;
}

static gbResult_t runCollCheck(void* arg) {
  collCheck_t* k = arg;
  gbComm_t c = k->comm;
  desc_t* all = calloc((size_t)c->nranks, sizeof(desc_t));
  if (!all) return gbErrorSet(gbSystemError, "out of memory for the call check of %d ranks", c->nranks);
  all[c->rank] = k->mine;
  gbResult_t res = gbAlgoAllGather(&c->world.algo, &all[c->rank], all, sizeof(desc_t));
  int judged = res == gbSuccess;
  if (judged) res = verdict(all, c->nranks);
  free(all);
  if (judged && res != gbSuccess) res = settle(c, k->before, NULL, 0, res);
  return res;
}

/* GPUBRIDGE_CHECK_CALLS: off 0, on 1, auto 2 (on unless one island runs native). */
int gbCommChecking(gbComm_t c) {
  if (c->nranks == 1 || !c->world.active || c->settings.checkCalls == 0) return 0;
  if (c->settings.checkCalls == 2) return !(c->topo.nislands == 1 && c->policy == gbPolicyNative);
  return 1;
}

/* Posts fn on the proxy with the checked flag as its done flag, and makes
 * the stream wait for it. */
static gbResult_t postCheck(gbComm_t c, gbResult_t (*fn)(void*), void* arg, void* stream) {
  gbProxyOp_t op;
  memset(&op, 0, sizeof(op));
  op.fn = fn;
  op.arg = arg;
  op.freeArg = free;
  op.done = c->checked;
  op.doneValue = c->checksPosted + 1;
  op.seq = c->seq;
  /* The stream's wait first: a bad stream then fails this call alone,
   * before any rank hears of it. */
  gbResult_t res = c->dev->flagWait(c->checked, c->checksPosted + 1, stream);
  if (res != gbSuccess) {
    free(arg);
    return res;
  }
  c->checksPosted++;
  gbTraceAddFlags(c, GB_RECORD_HAS_CHECK);
  gbTraceTagOp(c, &op, GB_TRACE_ROLE_CHECK, 0, 1);
  res = gbProxyPost(c->proxy, &op);
  if (res != gbSuccess) free(arg); /* not queued: still this call's */
  return res;
}

gbResult_t gbCommCheckCall(gbComm_t c, const gbCommCall_t* call, void* stream) {
  if (!gbCommChecking(c)) return gbSuccess;
  collCheck_t* k = calloc(1, sizeof(*k));
  if (!k) return gbErrorSet(gbSystemError, "out of memory for a call check");
  k->comm = c;
  k->mine.seq = c->seq;
  k->mine.coll = call->barrier ? CHECK_BARRIER : call->coll;
  k->mine.count = call->count;
  k->mine.dtype = call->dtype;
  k->mine.op = call->op;
  k->mine.root = call->root;
  k->before = c->streamPosted;
  return postCheck(c, runCollCheck, k, stream);
}

/* ---------------------------------------------------------------- send/recv */

typedef struct {
  int32_t isSend, dtype;
  uint64_t count;
} p2pDesc_t;

typedef struct {
  gbComm_t comm;
  int n;                 /* ops */
  uint64_t before;       /* collectives put on streams before this group */
  gbCommP2p_t* ops;      /* points into this allocation */
} p2pCheck_t;

/* My ops with peer, in list order, into out; returns how many. */
static int opsWith(const p2pCheck_t* k, int peer, p2pDesc_t* out) {
  int m = 0;
  for (int i = 0; i < k->n; i++)
    if (k->ops[i].peer == peer) {
      out[m].isSend = k->ops[i].isSend;
      out[m].dtype = k->ops[i].dt;
      out[m].count = k->ops[i].count;
      m++;
    }
  return m;
}

/* Compares a's sends to b with b's receives from a; text names both. */
static int pairDiffers(int a, const p2pDesc_t* la, int na, int b, const p2pDesc_t* lb, int nb, char* text,
                       size_t len) {
  int ia = 0, ib = 0;
  for (;;) {
    while (ia < na && !la[ia].isSend) ia++;
    while (ib < nb && lb[ib].isSend) ib++;
    if (ia >= na && ib >= nb) return 0;
    if (ia >= na) {
      snprintf(text, len, "send/recv mismatch: rank %d receives %llu %s from rank %d, which sends it nothing more",
               b, (unsigned long long)lb[ib].count, gbDtypeName((gbDataType_t)lb[ib].dtype), a);
      return 1;
    }
    if (ib >= nb) {
      snprintf(text, len, "send/recv mismatch: rank %d sends %llu %s to rank %d, which posts no matching receive",
               a, (unsigned long long)la[ia].count, gbDtypeName((gbDataType_t)la[ia].dtype), b);
      return 1;
    }
    if (la[ia].count != lb[ib].count || la[ia].dtype != lb[ib].dtype) {
      snprintf(text, len, "send/recv mismatch: rank %d sends %llu %s to rank %d, rank %d receives %llu %s from rank %d",
               a, (unsigned long long)la[ia].count, gbDtypeName((gbDataType_t)la[ia].dtype), b, b,
               (unsigned long long)lb[ib].count, gbDtypeName((gbDataType_t)lb[ib].dtype), a);
      return 1;
    }
    ia++;
    ib++;
  }
}

static gbResult_t pairVerdict(int lo, const p2pDesc_t* llo, int nlo, int hi, const p2pDesc_t* lhi, int nhi) {
  char text[400];
  if (pairDiffers(lo, llo, nlo, hi, lhi, nhi, text, sizeof(text)) ||
      pairDiffers(hi, lhi, nhi, lo, llo, nlo, text, sizeof(text)))
    return gbErrorSet(gbInvalidUsage, "%s; sends and receives between two ranks must match in count, datatype and "
                                      "order", text);
  return gbSuccess;
}

static gbResult_t runP2pCheck(void* arg) {
  p2pCheck_t* k = arg;
  gbComm_t c = k->comm;
  int me = c->rank, cap = k->n + 1;
  int* peers = malloc(sizeof(int) * (size_t)cap);
  uint64_t* theirN = calloc((size_t)cap, sizeof(uint64_t));
  uint64_t* myN = calloc((size_t)cap, sizeof(uint64_t));
  p2pDesc_t* mine = calloc((size_t)cap * (size_t)cap, sizeof(p2pDesc_t)); /* [peer j][op] */
  p2pDesc_t* theirs = NULL;
  gbAlgoP2p_t* x = calloc(2 * (size_t)cap, sizeof(gbAlgoP2p_t));
  gbResult_t res = gbSuccess;
  if (!peers || !theirN || !myN || !mine || !x) {
    res = gbErrorSet(gbSystemError, "out of memory for a send/recv check");
    goto out;
  }
  int np = 0;
  for (int i = 0; i < k->n; i++) {
    int seen = 0;
    for (int j = 0; j < np; j++) seen |= peers[j] == k->ops[i].peer;
    if (!seen) peers[np++] = k->ops[i].peer;
  }
  /* Round 1, with every peer at once: how many ops each side has with the other. */
  int nx = 0;
  for (int j = 0; j < np; j++) {
    myN[j] = (uint64_t)opsWith(k, peers[j], mine + (size_t)j * (size_t)cap);
    theirN[j] = myN[j];
    if (peers[j] == me) continue;
    x[nx++] = (gbAlgoP2p_t){peers[j], 1, &myN[j], sizeof(uint64_t)};
    x[nx++] = (gbAlgoP2p_t){peers[j], 0, &theirN[j], sizeof(uint64_t)};
  }
  GB_CHECK_GOTO(gbAlgoSendRecv(&c->world.algo, x, nx), res, out);
  /* Round 2, with every peer at once: the lists themselves. */
  size_t total = 0;
  for (int j = 0; j < np; j++) {
    if (theirN[j] > (1u << 20)) {
      res = gbErrorSet(gbInvalidUsage, "send/recv check: rank %d announces %llu sends and receives with rank %d",
                       peers[j], (unsigned long long)theirN[j], me);
      goto out;
    }
    total += theirN[j];
  }
  theirs = calloc(total + 1, sizeof(p2pDesc_t));
  if (!theirs) {
    res = gbErrorSet(gbSystemError, "out of memory for a send/recv check");
    goto out;
  }
  nx = 0;
  size_t at = 0;
  for (int j = 0; j < np; j++) {
    p2pDesc_t* my = mine + (size_t)j * (size_t)cap;
    if (peers[j] == me) {
      memcpy(theirs + at, my, sizeof(p2pDesc_t) * (size_t)myN[j]);
    } else {
      x[nx++] = (gbAlgoP2p_t){peers[j], 1, my, sizeof(p2pDesc_t) * (size_t)myN[j]};
      x[nx++] = (gbAlgoP2p_t){peers[j], 0, theirs + at, sizeof(p2pDesc_t) * (size_t)theirN[j]};
    }
    at += theirN[j];
  }
  GB_CHECK_GOTO(gbAlgoSendRecv(&c->world.algo, x, nx), res, out);
  /* Every pair's verdict: the peer of a failed pair reaches the same one,
   * and settles with this rank (the peers in peers[0..nbad)). */
  at = 0;
  int nbad = 0;
  char first[1024] = "";
  for (int j = 0; j < np; j++) {
    int peer = peers[j], nm = (int)myN[j], nt = (int)theirN[j];
    p2pDesc_t* my = mine + (size_t)j * (size_t)cap;
    gbResult_t v = me <= peer ? pairVerdict(me, my, nm, peer, theirs + at, nt)
                              : pairVerdict(peer, theirs + at, nt, me, my, nm);
    at += theirN[j];
    if (v == gbSuccess) continue;
    if (res == gbSuccess) {
      res = v;
      snprintf(first, sizeof(first), "%s", gbErrorLast());
    }
    if (peer != me) peers[nbad++] = peer;
  }
  if (res != gbSuccess) {
    gbErrorRecord(first);
    res = settle(c, k->before, peers, nbad, res);
  }
out:
  free(peers);
  free(theirN);
  free(myN);
  free(mine);
  free(theirs);
  free(x);
  return res;
}

gbResult_t gbCommCheckSendRecv(gbComm_t c, const gbCommP2p_t* ops, int nops, void* stream) {
  if (!gbCommChecking(c)) return gbSuccess;
  p2pCheck_t* k = malloc(sizeof(*k) + sizeof(gbCommP2p_t) * (size_t)nops);
  if (!k) return gbErrorSet(gbSystemError, "out of memory for a send/recv check");
  k->comm = c;
  k->n = nops;
  k->before = c->streamPosted;
  k->ops = (gbCommP2p_t*)(k + 1);
  memcpy(k->ops, ops, sizeof(gbCommP2p_t) * (size_t)nops);
  return postCheck(c, runP2pCheck, k, stream);
}
