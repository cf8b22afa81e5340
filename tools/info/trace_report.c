/* The report of gpubridge-info --trace (trace.h): a few lines per
 * communicator (who dumped, last completed, who is inside what, who never
 * arrived, the first failure, the first mismatch) and, last, one verdict
 * sentence naming the rank(s) at fault by number. The sentences are fixed
 * (docs/TRACE.md lists them); tests compare them exactly. */
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

#define TEXT_QUOTED 160 /* characters of an error text a verdict quotes */

static void append(char* buf, size_t len, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char* buf, size_t len, const char* fmt, ...) {
  size_t used = strlen(buf);
  if (used + 1 >= len) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + used, len - used, fmt, ap);
  va_end(ap);
}

void traceRanksFormat(const traceRanks_t* s, char* buf, size_t len) {
  buf[0] = '\0';
  for (int i = 0; i < s->n;) {
    int j = i;
    while (j + 1 < s->n && s->r[j + 1] == s->r[j] + 1) j++;
    const char* sep = i ? "," : "";
    if (j - i >= 2) append(buf, len, "%s%d-%d", sep, s->r[i], s->r[j]);
    else if (j == i + 1) append(buf, len, "%s%d,%d", sep, s->r[i], s->r[j]);
    else append(buf, len, "%s%d", sep, s->r[i]);
    i = j + 1;
  }
}

/* "rank 2" or "ranks 0,1,3". */
static const char* who(const traceRanks_t* s, char* buf, size_t len) {
  snprintf(buf, len, "%s ", s->n == 1 ? "rank" : "ranks");
  size_t used = strlen(buf);
  traceRanksFormat(s, buf + used, len - used);
  return buf;
}

/* "(island amd)", or "(islands nvidia, amd)" when the ranks span several. */
static const char* islandsOf(const traceComm_t* c, const traceRanks_t* s, char* buf, size_t len) {
  char names[256] = "";
  int n = 0;
  for (int i = 0; i < s->n; i++) {
    const char* v = traceIslandOf(c, s->r[i]);
    char probe[40];
    snprintf(probe, sizeof(probe), ", %s,", v);
    char hay[260];
    snprintf(hay, sizeof(hay), ", %s,", names);
    if (strstr(hay, probe)) continue;
    append(names, sizeof(names), "%s%s", n++ ? ", " : "", v);
  }
  snprintf(buf, len, "(island%s %s)", n > 1 ? "s" : "", names);
  return buf;
}

/* An error text on one line, cut to max characters. */
static void oneLine(const char* text, size_t max, char* buf, size_t len) {
  size_t n = 0;
  for (const char* p = text; *p && n < max && n + 1 < len; p++) buf[n++] = (*p == '\n' || *p == '\r' || *p == '\t') ? ' ' : *p;
  buf[n] = '\0';
}

void traceVerdictSentence(const traceAnalysis_t* a, char* buf, size_t len) {
  const traceVerdict_t* v = &a->verdict;
  char c[1100], isl[300], o[1100], text[TEXT_QUOTED + 1];
  unsigned long long s = (unsigned long long)v->seq;
  who(&v->culprits, c, sizeof(c));
  islandsOf(a->comm, &v->culprits, isl, sizeof(isl));
  who(&v->others, o, sizeof(o));
  const char* they = v->culprits.n == 1 ? "its" : "their";
  char at[128]; /* where a hang is */
  if (v->p2pSeq)
    snprintf(at, sizeof(at), "send/recv group #%llu of rank %d", (unsigned long long)v->p2pSeq, v->p2pRank);
  else snprintf(at, sizeof(at), "collective #%llu (%s)", s, v->coll);
  switch (v->kind) {
    case VERDICT_STOPPED:
      snprintf(buf, len, "%s %s stopped responding during %s: it left no trace and %s timed out waiting for it", c, isl,
               at, o);
      break;
    case VERDICT_KILLED:
      snprintf(buf, len, "%s %s died during %s: its connections closed without a cause and it left no trace", c, isl,
               at);
      break;
    case VERDICT_SKIPPED:
      snprintf(buf, len, "%s %s skipped collective #%llu (%s, count %llu, %s): %s calls from #%llu on match the other ranks' calls from #%llu on",
               c, isl, s, v->coll, (unsigned long long)v->count, v->dtype, they, s, s + 1);
      break;
    case VERDICT_NEVER_CALLED:
      snprintf(buf, len, "%s %s never called collective #%llu (%s): %s finished #%llu and made no further call while %s wait inside #%llu",
               c, isl, s, v->coll, v->culprits.n == 1 ? "it" : "they", s - 1, o, s);
      break;
    case VERDICT_EXTRA:
      snprintf(buf, len, "%s %s made an extra call at collective #%llu (%s, count %llu, %s) that the other ranks did not make",
               c, isl, s, v->coll, (unsigned long long)v->count, v->dtype);
      break;
    case VERDICT_MISMATCH:
      snprintf(buf, len, "%s %s called collective #%llu with %s %s where %s used %s %s (%s, %s)", c, isl, s, v->field,
               v->value, o, v->field, v->valueOthers, v->coll, v->dtype);
      break;
    case VERDICT_TIE: {
      buf[0] = '\0';
      for (int i = 0; i < v->ngroups; i++) append(buf, len, "%s%s", i ? " and " : "", who(&v->groups[i], o, sizeof(o)));
      append(buf, len, " disagree on collective #%llu: ", s);
      for (int i = 0; i < v->ngroups; i++) append(buf, len, "%s%s %s", i ? " against " : "", v->field, v->groupValues[i]);
      append(buf, len, " (%s)", v->coll);
      break;
    }
    case VERDICT_NO_TRACE:
      snprintf(buf, len, "%s %s left no trace and never reached %s; the other ranks wait inside it", c, isl, at);
      break;
    case VERDICT_FAULT_RANK:
      snprintf(buf, len, "%s %s %s during %s: %s %s", c, isl,
               a->ranks[v->own->rank].errKind == TRACE_ERR_STALL ? "stopped responding" : "closed its connections", at,
               o, a->ranks[v->own->rank].errKind == TRACE_ERR_STALL ? "timed out waiting for it" : "saw it go");
      break;
    case VERDICT_OWN:
      oneLine(v->own->errText, TEXT_QUOTED, text, sizeof(text));
      snprintf(buf, len, "%s %s failed first: %s: %s", c, isl, v->own->errName, text);
      break;
    case VERDICT_BUSY:
      if (v->p2pSeq)
        snprintf(buf, len, "no fault found: %s is in flight, none failed and none is missing (slow, or dumped mid-call)",
                 at);
      else
        snprintf(buf, len, "no fault found: every rank is inside %s, none failed and none is missing (slow, or dumped "
                 "mid-call)", at);
      break;
    case VERDICT_CLEAN:
      if (v->others.n)
        snprintf(buf, len, "no fault found: every rank that left a dump completed collective #%llu and none is inside a collective (%s left no dump)",
                 s, o);
      else
        snprintf(buf, len, "no fault found: every rank completed collective #%llu and none is inside a collective", s);
      break;
  }
}

/* ----------------------------------------------------------- the report */

static const char* collOf(const traceComm_t* c, uint64_t seq) {
  for (int r = 0; r < c->nranks; r++) {
    const traceRecord_t* rec = traceRecordOf(c->byRank[r], seq);
    if (rec) return rec->coll;
  }
  return "?";
}

static void header(const traceAnalysis_t* a, FILE* out) {
  const traceComm_t* c = a->comm;
  const traceDump_t* any = NULL;
  traceRanks_t have = {0, NULL}, miss = {0, NULL};
  for (int r = 0; r < c->nranks; r++) {
    if (c->byRank[r] && !any) any = c->byRank[r];
    traceRanksAdd(c->byRank[r] ? &have : &miss, r);
  }
  char h[1100], m[1100], list[1024];
  fprintf(out, "communicator %s: %d rank%s", c->id, c->nranks, c->nranks == 1 ? "" : "s");
  if (any && any->nislands) {
    fprintf(out, ", %d island%s (", any->nislands, any->nislands == 1 ? "" : "s");
    for (int i = 0; i < any->nislands; i++) {
      traceRanks_t s = {any->islands[i].nranks, any->islands[i].ranks};
      fprintf(out, "%s%s: %s", i ? "; " : "", any->islands[i].vendor, who(&s, list, sizeof(list)));
    }
    fprintf(out, ")");
  }
  fprintf(out, "; dumps from %s", who(&have, h, sizeof(h)));
  if (miss.n) fprintf(out, " (none from %s)", who(&miss, m, sizeof(m)));
  fprintf(out, "\n");
  /* why each rank dumped, grouped by reason */
  fprintf(out, "dumped on:");
  for (int r = 0, first = 1; r < c->nranks; r++) {
    if (!c->byRank[r]) continue;
    int seen = 0;
    for (int q = 0; q < r; q++) seen |= c->byRank[q] && strcmp(c->byRank[q]->reason, c->byRank[r]->reason) == 0;
    if (seen) continue;
    traceRanks_t s = {0, NULL};
    for (int q = r; q < c->nranks; q++)
      if (c->byRank[q] && strcmp(c->byRank[q]->reason, c->byRank[r]->reason) == 0) traceRanksAdd(&s, q);
    fprintf(out, "%s %s (%s)", first ? "" : ",", c->byRank[r]->reason, who(&s, list, sizeof(list)));
    traceRanksFree(&s);
    first = 0;
  }
  fprintf(out, "\n");
  traceRanksFree(&have);
  traceRanksFree(&miss);
}

static void lastCompleted(const traceAnalysis_t* a, FILE* out) {
  const traceComm_t* c = a->comm;
  char list[1100];
  fprintf(out, "last completed:");
  int first = 1;
  for (int r = 0; r < c->nranks; r++) {
    const traceDump_t* d = c->byRank[r];
    int seen = 0;
    for (int q = 0; q < r && d; q++) seen |= c->byRank[q] && c->byRank[q]->lastCompleted == d->lastCompleted;
    if (!d || seen) continue;
    traceRanks_t s = {0, NULL};
    for (int q = r; q < c->nranks; q++)
      if (c->byRank[q] && c->byRank[q]->lastCompleted == d->lastCompleted) traceRanksAdd(&s, q);
    if (d->lastCompleted > 0)
      fprintf(out, "%s #%lld %s on %s", first ? "" : ";", (long long)d->lastCompleted, collOf(c, (uint64_t)d->lastCompleted),
              who(&s, list, sizeof(list)));
    else
      fprintf(out, "%s none on %s", first ? "" : ";", who(&s, list, sizeof(list)));
    traceRanksFree(&s);
    first = 0;
  }
  fprintf(out, "\n");
}

/* "bridge, chunk 2/4" or the phase alone. */
static void phaseOf(const traceRecord_t* r, char* buf, size_t len) {
  if (strcmp(r->phase, "bridge") == 0 && r->nchunks > 0)
    snprintf(buf, len, "bridge, chunk %lld/%lld", (long long)r->chunksBridged + 1, (long long)r->nchunks);
  else snprintf(buf, len, "%s", r->phase);
}

static void inside(const traceAnalysis_t* a, FILE* out) {
  const traceComm_t* c = a->comm;
  char list[1100], ph[64], ph2[64];
  fprintf(out, "inside:");
  int any = 0;
  for (int r = 0; r < c->nranks; r++) {
    const traceRecord_t* in = a->ranks[r].inside;
    int seen = 0;
    for (int q = 0; q < r && in; q++) seen |= a->ranks[q].inside && a->ranks[q].inside->seq == in->seq;
    if (!in || seen) continue;
    fprintf(out, "%s #%llu %s on", any ? ";" : "", (unsigned long long)in->seq, in->coll);
    any = 1;
    int firstPhase = 1;
    for (int q = r; q < c->nranks; q++) { /* ranks inside this seq, grouped by phase */
      const traceRecord_t* x = a->ranks[q].inside;
      if (!x || x->seq != in->seq) continue;
      phaseOf(x, ph, sizeof(ph));
      int dup = 0;
      for (int p = r; p < q && !dup; p++) {
        const traceRecord_t* y = a->ranks[p].inside;
        if (!y || y->seq != in->seq) continue;
        phaseOf(y, ph2, sizeof(ph2));
        dup = strcmp(ph, ph2) == 0;
      }
      if (dup) continue;
      traceRanks_t s = {0, NULL};
      for (int p = q; p < c->nranks; p++) {
        const traceRecord_t* y = a->ranks[p].inside;
        if (!y || y->seq != in->seq) continue;
        phaseOf(y, ph2, sizeof(ph2));
        if (strcmp(ph, ph2) == 0) traceRanksAdd(&s, p);
      }
      fprintf(out, "%s %s (%s)", firstPhase ? "" : ",", who(&s, list, sizeof(list)), ph);
      traceRanksFree(&s);
      firstPhase = 0;
    }
  }
  /* send/recv groups in flight on ranks inside no collective (not matched across ranks) */
  for (int r = 0; r < c->nranks; r++) {
    const traceDump_t* d = c->byRank[r];
    if (!d || a->ranks[r].inside) continue;
    for (int i = 0; i < d->nrecords; i++) {
      const traceRecord_t* x = &d->records[i];
      if (x->seq || !traceRecordInFlight(x)) continue;
      fprintf(out, "%s send/recv group %llu on rank %d (peer %lld, %s)", any ? ";" : "", (unsigned long long)x->p2pSeq,
              r, (long long)x->peer, x->phase);
      any = 1;
      break;
    }
  }
  fprintf(out, "%s\n", any ? "" : " none");
}

static void neverArrived(const traceAnalysis_t* a, FILE* out) {
  const traceComm_t* c = a->comm;
  /* the collective the others are stuck in (the lowest one inside), else the newest one called */
  uint64_t at = UINT64_MAX;
  for (int r = 0; r < c->nranks; r++)
    if (a->ranks[r].inside && a->ranks[r].inside->seq < at) at = a->ranks[r].inside->seq;
  fprintf(out, "never arrived at #%llu:", (unsigned long long)(at == UINT64_MAX ? a->maxEnqueued : at));
  int any = 0;
  for (int r = 0; r < c->nranks; r++) {
    const traceDump_t* d = c->byRank[r];
    if (d && !(a->ranks[r].idle && (uint64_t)d->lastEnqueued < a->maxEnqueued)) continue;
    if (d) fprintf(out, "%s rank %d (idle after #%lld)", any ? "," : "", r, (long long)d->lastEnqueued);
    else fprintf(out, "%s rank %d (no dump)", any ? "," : "", r);
    any = 1;
  }
  fprintf(out, "%s\n", any ? "" : " none");
}

static void failure(const traceAnalysis_t* a, FILE* out) {
  int f = a->firstHand;
  if (f < 0) /* no stall or death: the earliest error of any kind */
    for (int r = 0; r < a->comm->nranks; r++)
      if (a->ranks[r].d && a->ranks[r].d->hasError && (f < 0 || a->ranks[r].d->errWallNs < a->ranks[f].d->errWallNs)) f = r;
  if (f < 0) {
    fprintf(out, "first failure: none\n");
    return;
  }
  const traceDump_t* d = a->ranks[f].d;
  char text[TEXT_QUOTED + 1], by[64] = "";
  oneLine(d->errText, TEXT_QUOTED, text, sizeof(text));
  if (d->seenBy != d->rank) snprintf(by, sizeof(by), " (seen first by rank %lld)", (long long)d->seenBy);
  switch (a->ranks[f].errKind) {
    case TRACE_ERR_STALL:
      fprintf(out, "first failure: rank %d timed out waiting for rank %lld%s: %s\n", f, (long long)d->faultRank, by, text);
      break;
    case TRACE_ERR_DIED:
      fprintf(out, "first failure: rank %d lost rank %lld (connections closed)%s: %s\n", f, (long long)d->faultRank, by, text);
      break;
    default: fprintf(out, "first failure: rank %d failed: %s: %s\n", f, d->errName, text);
  }
}

static void mismatch(const traceAnalysis_t* a, FILE* out) {
  const traceVerdict_t* v = &a->verdict;
  char c[1100], o[1100];
  switch (v->kind) {
    case VERDICT_MISMATCH:
    case VERDICT_SKIPPED:
    case VERDICT_EXTRA:
      fprintf(out, "mismatch: #%llu %s: %s %s %s, %s %s %s\n", (unsigned long long)v->seq, v->field,
              who(&v->culprits, c, sizeof(c)), v->culprits.n == 1 ? "has" : "have", v->value,
              who(&v->others, o, sizeof(o)), v->others.n == 1 ? "has" : "have", v->valueOthers);
      break;
    case VERDICT_TIE:
      fprintf(out, "mismatch: #%llu %s:", (unsigned long long)v->seq, v->field);
      for (int i = 0; i < v->ngroups; i++)
        fprintf(out, "%s %s %s", i ? "," : "", who(&v->groups[i], c, sizeof(c)), v->groupValues[i]);
      fprintf(out, "\n");
      break;
    default: fprintf(out, "mismatch: none\n");
  }
}

void traceReportComm(const traceAnalysis_t* a, FILE* out) {
  header(a, out);
  lastCompleted(a, out);
  inside(a, out);
  neverArrived(a, out);
  failure(a, out);
  mismatch(a, out);
  for (int r = 0; r < a->comm->nranks; r++) {
    const traceDump_t* d = a->ranks[r].d;
    if (d && d->unrecorded > 0)
      fprintf(out, "rank %d: %lld calls not recorded (more than %lld in flight)\n", r, (long long)d->unrecorded,
              (long long)d->capacity);
  }
}

/* ------------------------------------------------------------ --trace DIR */

typedef struct {
  traceAnalysis_t a;
  int interesting; /* an error or something in flight */
} analyzed_t;

static int byBlame(const void* x, const void* y) {
  const analyzed_t *p = x, *q = y;
  if (p->interesting != q->interesting) return q->interesting - p->interesting;
  if (p->a.earliestErrNs != q->a.earliestErrNs) return p->a.earliestErrNs < q->a.earliestErrNs ? -1 : 1;
  return strcmp(p->a.comm->id, q->a.comm->id);
}

int traceMain(const char* dir) {
  traceSet_t set;
  if (traceLoad(dir, &set, stdout, stderr) != 0) return TRACE_EXIT_UNREADABLE;
  if (set.ncomms == 0) {
    int bad = set.nbad;
    traceSetFree(&set);
    if (bad) {
      fprintf(stderr, "gpubridge-info: no readable flight-recorder dump in %s (%d file%s could not be read, see above)\n",
              dir, bad, bad == 1 ? "" : "s");
      return TRACE_EXIT_UNREADABLE;
    }
    fprintf(stderr,
            "gpubridge-info: no flight-recorder dump (gpubridge-trace-*.json) in %s: run the job with "
            "GPUBRIDGE_TRACE_DIR=%s; ranks write there on a timeout, a peer's failure, gbCommAbort, or "
            "GPUBRIDGE_TRACE_SIGNAL (docs/TRACE.md)\n", dir, dir);
    return TRACE_EXIT_NO_TRACE;
  }
  analyzed_t* all = calloc((size_t)set.ncomms, sizeof(*all));
  int n = 0, rc = 0;
  for (; all && n < set.ncomms; n++) {
    if (traceAnalyze(&set.comms[n], &all[n].a) != 0) {
      traceAnalysisFree(&all[n].a);
      break;
    }
    all[n].interesting = all[n].a.earliestErrNs != INT64_MAX || all[n].a.anyInFlight;
  }
  if (!all || n < set.ncomms) {
    fprintf(stderr, "gpubridge-info: out of memory analyzing the dumps in %s\n", dir);
    rc = TRACE_EXIT_UNREADABLE;
  } else {
    qsort(all, (size_t)n, sizeof(*all), byBlame);
    char sentence[4096];
    for (int i = 0; i < n; i++) {
      if (n > 1 && i > 0 && !all[i].interesting) { /* a quiet communicator: one line */
        traceVerdictSentence(&all[i].a, sentence, sizeof(sentence));
        fprintf(stdout, "communicator %s: %d ranks, nothing failed or in flight: %s\n", all[i].a.comm->id,
                all[i].a.comm->nranks, sentence);
        continue;
      }
      traceReportComm(&all[i].a, stdout);
      if (n > 1) {
        traceVerdictSentence(&all[i].a, sentence, sizeof(sentence));
        fprintf(stdout, "finding: %s\n", sentence);
      }
    }
    traceVerdictSentence(&all[0].a, sentence, sizeof(sentence));
    fprintf(stdout, "verdict: %s\n", sentence);
  }
  for (int i = 0; all && i < n; i++) traceAnalysisFree(&all[i].a);
  free(all);
  traceSetFree(&set);
  if (fflush(stdout) != 0) return TRACE_EXIT_UNREADABLE;
  return rc;
}
