/* The analysis of one communicator's dumps (trace.h, docs/TRACE.md):
 *   1. per rank: its dump, the collective it is inside, whether it is idle,
 *      the kind of its error (a stall or a death it saw in a peer, or its own);
 *   2. mismatch: the first seq where the dumped ranks' calls differ, field by
 *      field (collective, count, datatype, op, root: the call check's order);
 *      a minority that skipped a call or made an extra one is told apart by
 *      aligning its later calls with the majority's;
 *   3. hang: the ranks that never arrived at the newest collective, and the
 *      first-hand failure (the earliest stall or death by wall clock);
 *   4. blame, in order: mismatch; a missing rank named by a stall or death; a
 *      dumped rank that never arrived; a missing rank nobody named; the rank a
 *      first-hand failure names; the earliest own error; nothing. */
#include <stdlib.h>
#include <string.h>

#include "trace.h"

#define RESULT_REMOTE_ERROR 6 /* gbRemoteError */
#define RESULT_TIMEOUT 8      /* gbTimeout */

static const char* const fieldNames[] = {"collective", "count", "datatype", "op", "root"};
enum { NUM_FIELDS = 5 };

int traceRecordInFlight(const traceRecord_t* r) { return strcmp(r->state, "in-flight") == 0; }

const traceRecord_t* traceRecordOf(const traceDump_t* d, uint64_t seq) {
  if (!d) return NULL;
  int lo = 0, hi = d->ncolls - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    uint64_t s = d->colls[mid]->seq;
    if (s == seq) return d->colls[mid];
    if (s < seq) lo = mid + 1;
    else hi = mid - 1;
  }
  return NULL;
}

const char* traceIslandOf(const traceComm_t* comm, int rank) {
  for (int r = 0; r < comm->nranks; r++) {
    const traceDump_t* d = comm->byRank[r];
    if (!d) continue;
    for (int i = 0; i < d->nislands; i++)
      for (int k = 0; k < d->islands[i].nranks; k++)
        if (d->islands[i].ranks[k] == rank) return d->islands[i].vendor;
  }
  return "?";
}

int traceRanksAdd(traceRanks_t* s, int rank) {
  int i = 0;
  while (i < s->n && s->r[i] < rank) i++;
  if (i < s->n && s->r[i] == rank) return 0;
  int* more = realloc(s->r, (size_t)(s->n + 1) * sizeof(int));
  if (!more) return -1;
  s->r = more;
  memmove(s->r + i + 1, s->r + i, (size_t)(s->n - i) * sizeof(int));
  s->r[i] = rank;
  s->n++;
  return 0;
}

void traceRanksFree(traceRanks_t* s) {
  free(s->r);
  s->r = NULL;
  s->n = 0;
}

static int collIs(const char* coll, const char* const* names) {
  for (; *names; names++)
    if (strcmp(coll, *names) == 0) return 1;
  return 0;
}

/* As check.c:fieldApplies: op for reducing collectives, root for rooted ones. */
static int fieldApplies(int field, const char* coll) {
  static const char* const reducing[] = {"all_reduce", "reduce", "reduce_scatter", NULL};
  static const char* const rooted[] = {"broadcast", "reduce", NULL};
  if (field == 3) return collIs(coll, reducing);
  if (field == 4) return collIs(coll, rooted);
  return 1;
}

static void fieldValue(const traceRecord_t* r, int field, char* buf, size_t len) {
  switch (field) {
    case 0: snprintf(buf, len, "%s", r->coll); break;
    case 1: snprintf(buf, len, "%llu", (unsigned long long)r->count); break;
    case 2: snprintf(buf, len, "%s", r->dtype); break;
    case 3: snprintf(buf, len, "%s", r->op); break;
    default:
      if (r->root >= 0) snprintf(buf, len, "%lld", (long long)r->root);
      else snprintf(buf, len, "none");
  }
}

/* The same call: every field that applies is equal. */
static int sameCall(const traceRecord_t* a, const traceRecord_t* b) {
  char x[96], y[96];
  for (int f = 0; f < NUM_FIELDS; f++) {
    if (!fieldApplies(f, a->coll)) continue;
    fieldValue(a, f, x, sizeof(x));
    fieldValue(b, f, y, sizeof(y));
    if (strcmp(x, y) != 0) return 0;
  }
  return 1;
}

/* m's calls from `from` on equal ref's calls from `refFrom` on, wherever both
 * have the record; at least one pair must exist. */
static int aligned(const traceDump_t* m, uint64_t from, const traceDump_t* ref, uint64_t refFrom) {
  int pairs = 0;
  for (int i = 0; i < m->ncolls; i++) {
    const traceRecord_t* r = m->colls[i];
    if (r->seq < from) continue;
    const traceRecord_t* o = traceRecordOf(ref, refFrom + (r->seq - from));
    if (!o) continue;
    if (!sameCall(r, o)) return 0;
    pairs++;
  }
  return pairs > 0;
}

static int errKind(const traceDump_t* d) {
  if (!d->hasError) return TRACE_ERR_NONE;
  if (d->faultRank >= 0 && d->faultRank != d->seenBy) {
    if (d->errCode == RESULT_TIMEOUT) return TRACE_ERR_STALL;
    if (d->errCode == RESULT_REMOTE_ERROR) return TRACE_ERR_DIED;
  }
  return TRACE_ERR_OWN;
}

/* ------------------------------------------------------------ mismatch */

typedef struct {
  traceRanks_t ranks;
  char value[96];
} group_t;

static void groupsFree(group_t* g, int n) {
  for (int i = 0; i < n; i++) traceRanksFree(&g[i].ranks);
  free(g);
}

/* Groups the ranks that have seq by the value of field; sorted largest first,
 * then by lowest rank. Returns the number of groups, -1 out of memory. */
static int groupBy(const traceAnalysis_t* a, uint64_t seq, int field, group_t** out) {
  int nr = a->comm->nranks, n = 0;
  group_t* g = calloc((size_t)nr, sizeof(*g));
  if (!g) return -1;
  for (int r = 0; r < nr; r++) {
    const traceRecord_t* rec = traceRecordOf(a->ranks[r].d, seq);
    if (!rec) continue;
    char v[96];
    fieldValue(rec, field, v, sizeof(v));
    int k = 0;
    while (k < n && strcmp(g[k].value, v) != 0) k++;
    if (k == n) snprintf(g[n++].value, sizeof(g->value), "%s", v);
    if (traceRanksAdd(&g[k].ranks, r) != 0) return groupsFree(g, n), -1;
  }
  for (int i = 1; i < n; i++) /* insertion sort: few groups */
    for (int j = i; j > 0; j--) {
      group_t *x = &g[j - 1], *y = &g[j];
      if (x->ranks.n > y->ranks.n || (x->ranks.n == y->ranks.n && x->ranks.r[0] < y->ranks.r[0])) break;
      group_t t = *x;
      *x = *y;
      *y = t;
    }
  *out = g;
  return n;
}

/* The smallest seq above `after` that any dumped rank recorded, or 0. */
static uint64_t nextSeq(const traceAnalysis_t* a, uint64_t after) {
  uint64_t best = 0;
  for (int r = 0; r < a->comm->nranks; r++) {
    const traceDump_t* d = a->ranks[r].d;
    if (!d) continue;
    int lo = 0, hi = d->ncolls; /* the first record with seq > after */
    while (lo < hi) {
      int mid = lo + (hi - lo) / 2;
      if (d->colls[mid]->seq <= after) lo = mid + 1;
      else hi = mid;
    }
    if (lo < d->ncolls && (best == 0 || d->colls[lo]->seq < best)) best = d->colls[lo]->seq;
  }
  return best;
}

/* The first (seq, field) where ranks that recorded seq disagree; 0 when none. */
static uint64_t firstDisagreement(const traceAnalysis_t* a, int* field) {
  for (uint64_t s = nextSeq(a, 0); s; s = nextSeq(a, s)) {
    const traceRecord_t* first = NULL;
    for (int r = 0; r < a->comm->nranks && !first; r++) first = traceRecordOf(a->ranks[r].d, s);
    if (!first) continue;
    /* field by field, so the earliest field that differs anywhere at s is the one named */
    for (int f = 0; f < NUM_FIELDS; f++) {
      if (!fieldApplies(f, first->coll)) continue;
      char x[96], y[96];
      fieldValue(first, f, x, sizeof(x));
      for (int r = 0; r < a->comm->nranks; r++) {
        const traceRecord_t* rec = traceRecordOf(a->ranks[r].d, s);
        if (!rec) continue;
        fieldValue(rec, f, y, sizeof(y));
        if (strcmp(x, y) != 0) {
          *field = f;
          return s;
        }
      }
    }
  }
  return 0;
}

static int copyRanks(traceRanks_t* dst, const traceRanks_t* src) {
  for (int i = 0; i < src->n; i++)
    if (traceRanksAdd(dst, src->r[i]) != 0) return -1;
  return 0;
}

/* Fills the verdict for a disagreement at (seq, field). */
static int judgeMismatch(traceAnalysis_t* a, uint64_t seq, int field) {
  traceVerdict_t* v = &a->verdict;
  group_t* g = NULL;
  int n = groupBy(a, seq, field, &g);
  if (n < 0) return -1;
  v->seq = seq;
  v->field = fieldNames[field];
  const traceRecord_t* ref = traceRecordOf(a->ranks[g[0].ranks.r[0]].d, seq);
  snprintf(v->coll, sizeof(v->coll), "%s", ref->coll);
  snprintf(v->dtype, sizeof(v->dtype), "%s", ref->dtype);
  v->count = ref->count;
  if (g[0].ranks.n == g[1].ranks.n) { /* a tie: every group of the largest size is named */
    v->kind = VERDICT_TIE;
    int k = 0;
    while (k < n && g[k].ranks.n == g[0].ranks.n) k++;
    v->groups = calloc((size_t)k, sizeof(*v->groups));
    v->groupValues = calloc((size_t)k, sizeof(*v->groupValues));
    if (!v->groups || !v->groupValues) return groupsFree(g, n), -1;
    for (int i = 0; i < k; i++) {
      if (copyRanks(&v->groups[i], &g[i].ranks) != 0) return groupsFree(g, n), -1;
      snprintf(v->groupValues[i], sizeof(v->groupValues[i]), "%s", g[i].value);
      v->ngroups++;
    }
    groupsFree(g, n);
    return 0;
  }
  /* The majority's calls are the reference; every other rank is a culprit. */
  const traceDump_t* maj = a->ranks[g[0].ranks.r[0]].d;
  if (copyRanks(&v->others, &g[0].ranks) != 0) return groupsFree(g, n), -1;
  int skipped = 1, extra = 1;
  v->value[0] = '\0';
  for (int i = 1; i < n; i++) {
    size_t used = strlen(v->value);
    snprintf(v->value + used, sizeof(v->value) - used, "%s%s", i > 1 ? " or " : "", g[i].value);
    for (int k = 0; k < g[i].ranks.n; k++) {
      int m = g[i].ranks.r[k];
      if (traceRanksAdd(&v->culprits, m) != 0) return groupsFree(g, n), -1;
      if (!aligned(a->ranks[m].d, seq, maj, seq + 1)) skipped = 0;
      if (!aligned(a->ranks[m].d, seq + 1, maj, seq)) extra = 0;
    }
  }
  snprintf(v->valueOthers, sizeof(v->valueOthers), "%s", g[0].value);
  v->kind = skipped ? VERDICT_SKIPPED : extra ? VERDICT_EXTRA : VERDICT_MISMATCH;
  if (v->kind == VERDICT_EXTRA) { /* name the extra call, from a culprit */
    const traceRecord_t* x = traceRecordOf(a->ranks[v->culprits.r[0]].d, seq);
    snprintf(v->coll, sizeof(v->coll), "%s", x->coll);
    snprintf(v->dtype, sizeof(v->dtype), "%s", x->dtype);
    v->count = x->count;
  }
  groupsFree(g, n);
  return 0;
}

/* ---------------------------------------------------------------- hang */

/* The collective the dumped ranks are stuck in: the lowest one inside, else
 * the one after the lowest completed. */
static uint64_t stuckSeq(const traceAnalysis_t* a) {
  uint64_t s = UINT64_MAX, done = UINT64_MAX;
  for (int r = 0; r < a->comm->nranks; r++) {
    const traceRankView_t* v = &a->ranks[r];
    if (!v->d) continue;
    if (v->inside && v->inside->seq < s) s = v->inside->seq;
    if ((uint64_t)v->d->lastCompleted < done) done = (uint64_t)v->d->lastCompleted;
  }
  if (s != UINT64_MAX) return s;
  return done == UINT64_MAX ? 0 : done + 1;
}

static void collAt(const traceAnalysis_t* a, uint64_t seq, traceVerdict_t* v) {
  snprintf(v->coll, sizeof(v->coll), "?");
  for (int r = 0; r < a->comm->nranks; r++) {
    const traceRecord_t* rec = traceRecordOf(a->ranks[r].d, seq);
    if (!rec) continue;
    snprintf(v->coll, sizeof(v->coll), "%s", rec->coll);
    snprintf(v->dtype, sizeof(v->dtype), "%s", rec->dtype);
    v->count = rec->count;
    return;
  }
}

/* Where a hang is: the stuck collective; when no dumped rank is inside one,
 * a send/recv group in flight (of rank `prefer` if it has one). */
static void hangAt(const traceAnalysis_t* a, int prefer, traceVerdict_t* v) {
  v->seq = stuckSeq(a);
  collAt(a, v->seq, v);
  for (int r = 0; r < a->comm->nranks; r++)
    if (a->ranks[r].inside) return;
  for (int pass = 0; pass < 2; pass++)
    for (int r = 0; r < a->comm->nranks; r++) {
      const traceDump_t* d = a->ranks[r].d;
      if (!d || (pass == 0 && r != prefer)) continue;
      for (int i = 0; i < d->nrecords; i++)
        if (!d->records[i].seq && traceRecordInFlight(&d->records[i])) {
          v->p2pSeq = d->records[i].p2pSeq;
          v->p2pRank = r;
          return;
        }
    }
}

/* Errors of kind stall or died, earliest first: the first whose named rank
 * satisfies want (missing or dumped). Returns the erring rank, or -1. */
static int firstNaming(const traceAnalysis_t* a, int wantMissing) {
  int best = -1;
  for (int r = 0; r < a->comm->nranks; r++) {
    const traceRankView_t* v = &a->ranks[r];
    if (!v->d || (v->errKind != TRACE_ERR_STALL && v->errKind != TRACE_ERR_DIED)) continue;
    int64_t f = v->d->faultRank;
    if (f < 0 || f >= a->comm->nranks || (a->ranks[f].d == NULL) != wantMissing) continue;
    if (best < 0 || v->d->errWallNs < a->ranks[best].d->errWallNs) best = r;
  }
  return best;
}

/* The dumped ranks whose error names rank f, or every dumped rank if none does. */
static int namers(const traceAnalysis_t* a, int f, traceRanks_t* out) {
  for (int pass = 0; pass < 2 && out->n == 0; pass++)
    for (int r = 0; r < a->comm->nranks; r++) {
      const traceRankView_t* v = &a->ranks[r];
      if (!v->d || r == f) continue;
      if ((pass == 1 || (v->d->hasError && v->d->faultRank == f)) && traceRanksAdd(out, r) != 0) return -1;
    }
  return 0;
}

/* The dumped ranks, other than `not`, whose record of seq is not done. */
static int waitingIn(const traceAnalysis_t* a, uint64_t seq, const traceRanks_t* not, traceRanks_t* out) {
  for (int r = 0; r < a->comm->nranks; r++) {
    int skip = 0;
    for (int i = 0; i < not->n; i++) skip |= not->r[i] == r;
    const traceRecord_t* rec = traceRecordOf(a->ranks[r].d, seq);
    if (!skip && rec && strcmp(rec->state, "done") != 0 && traceRanksAdd(out, r) != 0) return -1;
  }
  return 0;
}

static int judgeHang(traceAnalysis_t* a) {
  traceVerdict_t* v = &a->verdict;
  int nr = a->comm->nranks;
  /* 2: a missing rank named by a stall or a death */
  int e = firstNaming(a, 1);
  if (e >= 0) {
    const traceRankView_t* w = &a->ranks[e];
    int f = (int)w->d->faultRank;
    v->kind = w->errKind == TRACE_ERR_STALL ? VERDICT_STOPPED : VERDICT_KILLED;
    hangAt(a, e, v);
    if (traceRanksAdd(&v->culprits, f) != 0) return -1;
    return namers(a, f, &v->others);
  }
  /* 3: dumped ranks idle before the newest collective; the furthest behind */
  int64_t behind = -1;
  for (int r = 0; r < nr; r++) {
    const traceRankView_t* x = &a->ranks[r];
    if (x->d && x->idle && (uint64_t)x->d->lastEnqueued < a->maxEnqueued &&
        (behind < 0 || x->d->lastEnqueued < behind))
      behind = x->d->lastEnqueued;
  }
  if (behind >= 0) {
    v->kind = VERDICT_NEVER_CALLED;
    v->seq = (uint64_t)behind + 1;
    for (int r = 0; r < nr; r++)
      if (a->ranks[r].d && a->ranks[r].idle && a->ranks[r].d->lastEnqueued == behind &&
          traceRanksAdd(&v->culprits, r) != 0)
        return -1;
    collAt(a, v->seq, v);
    return waitingIn(a, v->seq, &v->culprits, &v->others);
  }
  /* 3b: a missing rank nobody named, while dumped ranks wait inside a collective */
  if (a->anyInFlight) {
    for (int r = 0; r < nr; r++)
      if (!a->ranks[r].d && traceRanksAdd(&v->culprits, r) != 0) return -1;
    if (v->culprits.n) {
      v->kind = VERDICT_NO_TRACE;
      hangAt(a, -1, v);
      return 0;
    }
  }
  /* 4: a dumped rank a first-hand failure names */
  e = firstNaming(a, 0);
  if (e >= 0) {
    const traceRankView_t* w = &a->ranks[e];
    int f = (int)w->d->faultRank;
    v->kind = VERDICT_FAULT_RANK;
    v->own = w->d;
    hangAt(a, e, v);
    if (traceRanksAdd(&v->culprits, f) != 0) return -1;
    return namers(a, f, &v->others);
  }
  /* 5: the earliest own error */
  int own = -1;
  for (int r = 0; r < nr; r++)
    if (a->ranks[r].errKind == TRACE_ERR_OWN &&
        (own < 0 || a->ranks[r].d->errWallNs < a->ranks[own].d->errWallNs))
      own = r;
  if (own >= 0) {
    v->kind = VERDICT_OWN;
    v->own = a->ranks[own].d;
    return traceRanksAdd(&v->culprits, own);
  }
  /* 6: nothing wrong */
  v->kind = a->anyInFlight ? VERDICT_BUSY : VERDICT_CLEAN;
  if (a->anyInFlight) {
    hangAt(a, -1, v);
  } else {
    v->seq = UINT64_MAX;
    for (int r = 0; r < nr; r++)
      if (a->ranks[r].d && (uint64_t)a->ranks[r].d->lastCompleted < v->seq) v->seq = (uint64_t)a->ranks[r].d->lastCompleted;
    if (v->seq == UINT64_MAX) v->seq = 0;
    collAt(a, v->seq, v);
  }
  for (int r = 0; r < nr; r++)
    if (!a->ranks[r].d && traceRanksAdd(&v->others, r) != 0) return -1; /* ranks without a dump */
  return 0;
}

int traceAnalyze(const traceComm_t* comm, traceAnalysis_t* a) {
  memset(a, 0, sizeof(*a));
  a->comm = comm;
  a->firstHand = -1;
  a->earliestErrNs = INT64_MAX;
  a->ranks = calloc((size_t)comm->nranks, sizeof(*a->ranks));
  if (!a->ranks) return -1;
  for (int r = 0; r < comm->nranks; r++) {
    traceRankView_t* v = &a->ranks[r];
    const traceDump_t* d = comm->byRank[r];
    v->d = d;
    if (!d) continue;
    v->idle = 1;
    for (int i = 0; i < d->nrecords; i++)
      if (traceRecordInFlight(&d->records[i])) v->idle = 0;
    for (int i = 0; i < d->ncolls && !v->inside; i++)
      if (traceRecordInFlight(d->colls[i])) v->inside = d->colls[i];
    if (!v->idle) a->anyInFlight = 1;
    v->errKind = errKind(d);
    if (d->hasError && d->errWallNs < a->earliestErrNs) a->earliestErrNs = d->errWallNs;
    if (d->lastEnqueued > 0 && (uint64_t)d->lastEnqueued > a->maxEnqueued) a->maxEnqueued = (uint64_t)d->lastEnqueued;
  }
  a->firstHand = firstNaming(a, 1);
  if (a->firstHand < 0) a->firstHand = firstNaming(a, 0);
  int field = 0;
  uint64_t seq = firstDisagreement(a, &field);
  if (seq) return judgeMismatch(a, seq, field);
  return judgeHang(a);
}

void traceAnalysisFree(traceAnalysis_t* a) {
  traceVerdict_t* v = &a->verdict;
  traceRanksFree(&v->culprits);
  traceRanksFree(&v->others);
  for (int i = 0; i < v->ngroups; i++) traceRanksFree(&v->groups[i]);
  free(v->groups);
  free(v->groupValues);
  free(a->ranks);
  memset(a, 0, sizeof(*a));
}
