/* Loading a directory of flight-recorder dumps (trace.h): every *.json in
 * name order; dumps of schema gpubridge-trace/1 are grouped by comm.id and
 * placed by comm.rank. Anything else that claims to be a dump, or any .json
 * that does not parse, is reported in one line and skipped. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "trace.h"

#define MAX_RANKS (1 << 20)

static void copyStr(char* dst, size_t len, const jsonValue_t* v) {
  const char* s = jsonString(v);
  if (s) snprintf(dst, len, "%s", s);
  else if (v && v->type == JSON_NUMBER && v->isInt) snprintf(dst, len, "%lld", (long long)v->integer);
  else snprintf(dst, len, "%s", v && v->type != JSON_NULL ? "?" : "-");
}

static int64_t intOr(const jsonValue_t* v, int64_t dflt) {
  int64_t x;
  return jsonInt(v, &x) == 0 ? x : dflt;
}

/* "gpubridge-trace-<id>-r<rank>.json" -> rank, else -1 (for naming a bad file). */
static int rankOfName(const char* name) {
  const char* r = strrchr(name, 'r');
  if (strncmp(name, "gpubridge-trace-", 16) != 0 || !r || r[-1] != '-') return -1;
  char* end = NULL;
  long v = strtol(r + 1, &end, 10);
  return end != r + 1 && strcmp(end, ".json") == 0 && v >= 0 && v < MAX_RANKS ? (int)v : -1;
}

static int readFile(const char* path, char** text, size_t* len) {
  FILE* f = fopen(path, "rb");
  if (!f) return -1;
  size_t cap = 1 << 16, n = 0;
  char* buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    char* more = realloc(buf, cap * 2);
    if (!more) free(buf);
    buf = more;
    cap *= 2;
  }
  int bad = !buf || ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    errno = buf ? EIO : ENOMEM;
    return -1;
  }
  *text = buf;
  *len = n;
  return 0;
}

static void parseRecord(const jsonValue_t* j, traceRecord_t* r) {
  memset(r, 0, sizeof(*r));
  r->seq = (uint64_t)intOr(jsonGet(j, "seq"), 0);
  r->p2pSeq = (uint64_t)intOr(jsonGet(j, "p2pSeq"), 0);
  r->count = (uint64_t)intOr(jsonGet(j, "count"), 0);
  copyStr(r->coll, sizeof(r->coll), jsonGet(j, "coll"));
  copyStr(r->dtype, sizeof(r->dtype), jsonGet(j, "dtype"));
  copyStr(r->op, sizeof(r->op), jsonGet(j, "op"));
  copyStr(r->phase, sizeof(r->phase), jsonGet(j, "phase"));
  copyStr(r->state, sizeof(r->state), jsonGet(j, "state"));
  r->root = intOr(jsonGet(j, "root"), -1);
  r->peer = intOr(jsonGet(j, "peer"), -1);
  r->nchunks = intOr(jsonGet(j, "nchunks"), 0);
  r->chunksBridged = intOr(jsonGet(j, "chunksBridged"), 0);
}

static int parseIslands(const jsonValue_t* arr, traceDump_t* d) {
  if (!arr || arr->type != JSON_ARRAY || arr->count == 0) return 0;
  d->islands = calloc(arr->count, sizeof(*d->islands));
  if (!d->islands) return -1;
  d->nislands = (int)arr->count;
  for (size_t i = 0; i < arr->count; i++) {
    const jsonValue_t* is = &arr->items[i];
    traceIsland_t* t = &d->islands[i];
    copyStr(t->vendor, sizeof(t->vendor), jsonGet(is, "vendor"));
    t->leader = (int)intOr(jsonGet(is, "leader"), -1);
    const jsonValue_t* ranks = jsonGet(is, "ranks");
    if (!ranks || ranks->type != JSON_ARRAY || ranks->count == 0) continue;
    t->ranks = calloc(ranks->count, sizeof(int));
    if (!t->ranks) return -1;
    for (size_t k = 0; k < ranks->count; k++) t->ranks[t->nranks++] = (int)intOr(&ranks->items[k], -1);
  }
  return 0;
}

static int bySeq(const void* a, const void* b) {
  uint64_t x = (*(const traceRecord_t* const*)a)->seq, y = (*(const traceRecord_t* const*)b)->seq;
  return x < y ? -1 : x > y;
}

/* d->colls: the collective records by seq (the ring keeps them in order already;
 * sorting guards a writer that does not). */
static int indexCollectives(traceDump_t* d) {
  if (!d->nrecords) return 0;
  d->colls = calloc((size_t)d->nrecords, sizeof(*d->colls));
  if (!d->colls) return -1;
  for (int i = 0; i < d->nrecords; i++)
    if (d->records[i].seq) d->colls[d->ncolls++] = &d->records[i];
  qsort(d->colls, (size_t)d->ncolls, sizeof(*d->colls), bySeq);
  return 0;
}

static void dumpFree(traceDump_t* d) {
  if (!d) return;
  for (int i = 0; i < d->nislands; i++) free(d->islands[i].ranks);
  free(d->islands);
  free(d->errText);
  free(d->records);
  free(d->colls);
  free(d);
}

/* The dump in root, or NULL with why[] saying what is missing. */
static traceDump_t* parseDump(const jsonValue_t* root, const char* file, char* why, size_t whyLen) {
  const jsonValue_t* comm = jsonGet(root, "comm");
  int64_t rank, nranks;
  if (!jsonString(jsonGet(comm, "id")) || jsonInt(jsonGet(comm, "rank"), &rank) != 0 ||
      jsonInt(jsonGet(comm, "nranks"), &nranks) != 0) {
    snprintf(why, whyLen, "comm.id, comm.rank or comm.nranks is missing");
    return NULL;
  }
  if (nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks) {
    snprintf(why, whyLen, "comm.rank %lld of comm.nranks %lld is out of range", (long long)rank, (long long)nranks);
    return NULL;
  }
  traceDump_t* d = calloc(1, sizeof(*d));
  if (!d) return snprintf(why, whyLen, "out of memory"), NULL;
  snprintf(d->file, sizeof(d->file), "%s", file);
  copyStr(d->reason, sizeof(d->reason), jsonGet(root, "reason"));
  d->rank = (int)rank;
  d->nranks = (int)nranks;
  d->island = (int)intOr(jsonGet(comm, "island"), -1);
  const jsonValue_t* err = jsonGet(root, "error");
  const char* text = jsonString(jsonGet(err, "text"));
  d->errText = strdup(text ? text : "");
  if (err && err->type == JSON_OBJECT) {
    d->hasError = 1;
    d->errCode = intOr(jsonGet(err, "code"), -1);
    copyStr(d->errName, sizeof(d->errName), jsonGet(err, "name"));
    d->faultRank = intOr(jsonGet(err, "faultRank"), -1);
    d->seenBy = intOr(jsonGet(err, "seenBy"), d->rank);
    d->errWallNs = intOr(jsonGet(err, "wallNs"), INT64_MAX);
  }
  const jsonValue_t* ring = jsonGet(root, "ring");
  d->capacity = intOr(jsonGet(ring, "capacity"), 0);
  d->recorded = intOr(jsonGet(ring, "recorded"), 0);
  d->unrecorded = intOr(jsonGet(ring, "unrecorded"), 0);
  const jsonValue_t* recs = jsonGet(root, "records");
  if (recs && recs->type == JSON_ARRAY && recs->count) {
    d->records = calloc(recs->count, sizeof(*d->records));
    if (!d->records || !d->errText || parseIslands(jsonGet(comm, "islands"), d) != 0) {
      dumpFree(d);
      return snprintf(why, whyLen, "out of memory"), NULL;
    }
    for (size_t i = 0; i < recs->count; i++) parseRecord(&recs->items[i], &d->records[d->nrecords++]);
  } else if (!d->errText || parseIslands(jsonGet(comm, "islands"), d) != 0) {
    dumpFree(d);
    return snprintf(why, whyLen, "out of memory"), NULL;
  }
  if (indexCollectives(d) != 0) {
    dumpFree(d);
    return snprintf(why, whyLen, "out of memory"), NULL;
  }
  /* state.* as written; where absent, derived from the records as the writer does. */
  uint64_t maxSeq = 0, completed = 0;
  int64_t oldest = -1;
  int gap = 0;
  for (int i = 0; i < d->ncolls; i++) {
    const traceRecord_t* r = d->colls[i];
    maxSeq = r->seq;
    if (oldest < 0 && traceRecordInFlight(r)) oldest = (int64_t)r->seq;
    if (!gap && strcmp(r->state, "done") == 0) completed = r->seq;
    else gap = 1;
  }
  const jsonValue_t* st = jsonGet(root, "state");
  d->lastEnqueued = intOr(jsonGet(st, "lastEnqueued"), (int64_t)maxSeq);
  d->lastCompleted = intOr(jsonGet(st, "lastCompleted"), (int64_t)completed);
  d->inside = jsonGet(st, "inside") ? intOr(jsonGet(st, "inside"), -1) : oldest;
  return d;
}

static traceComm_t* commFor(traceSet_t* set, const char* id, int nranks) {
  for (int i = 0; i < set->ncomms; i++)
    if (strcmp(set->comms[i].id, id) == 0) return &set->comms[i];
  traceComm_t* more = realloc(set->comms, (size_t)(set->ncomms + 1) * sizeof(*more));
  if (!more) return NULL;
  set->comms = more;
  traceComm_t* c = &set->comms[set->ncomms];
  memset(c, 0, sizeof(*c));
  snprintf(c->id, sizeof(c->id), "%s", id);
  c->nranks = nranks;
  c->byRank = calloc((size_t)nranks, sizeof(*c->byRank));
  if (!c->byRank) return NULL;
  set->ncomms++;
  return c;
}

static int byName(const void* a, const void* b) { return strcmp(*(char* const*)a, *(char* const*)b); }

static int isJsonName(const char* name) {
  size_t n = strlen(name);
  return n > 5 && strcmp(name + n - 5, ".json") == 0;
}

/* Reads one file; returns 1 when it was a dump, 0 when skipped, -1 out of memory. */
static int loadFile(const char* dir, const char* name, traceSet_t* set, FILE* out) {
  char path[4096], why[256];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  int nameRank = rankOfName(name);
  char who[24];
  if (nameRank >= 0) snprintf(who, sizeof(who), "rank %d", nameRank);
  else snprintf(who, sizeof(who), "rank ?");
  char* text = NULL;
  size_t len = 0;
  if (readFile(path, &text, &len) != 0) {
    fprintf(out, "%s: %s: cannot read it (%s)\n", who, name, strerror(errno));
    set->nbad++;
    return 0;
  }
  jsonValue_t* root = NULL;
  int rc = jsonParse(text, len, &root, why, sizeof(why));
  free(text);
  if (rc != 0) {
    fprintf(out, "%s: %s: not a trace (%s)\n", who, name, why);
    set->nbad++;
    return 0;
  }
  const char* schema = jsonString(jsonGet(root, "schema"));
  if (!schema || strcmp(schema, TRACE_SCHEMA) != 0) {
    if (nameRank >= 0) {
      fprintf(out, "%s: %s: schema %s, not %s (a newer or other writer); skipped\n", who, name,
              schema ? schema : "missing", TRACE_SCHEMA);
      set->nbad++;
    }
    jsonFree(root);
    return 0;
  }
  traceDump_t* d = parseDump(root, name, why, sizeof(why));
  const char* id = jsonString(jsonGet(jsonGet(root, "comm"), "id"));
  traceComm_t* c = d ? commFor(set, id, d->nranks) : NULL;
  jsonFree(root);
  if (!d) {
    fprintf(out, "%s: %s: not a trace (%s)\n", who, name, why);
    set->nbad++;
    return 0;
  }
  if (!c) return dumpFree(d), -1;
  if (c->nranks != d->nranks) {
    fprintf(out, "rank %d: %s: says %d ranks where other dumps of communicator %s say %d; skipped\n", d->rank, name,
            d->nranks, c->id, c->nranks);
  } else if (c->byRank[d->rank]) {
    fprintf(out, "rank %d: %s: a second dump of rank %d of communicator %s (first: %s); skipped\n", d->rank, name,
            d->rank, c->id, c->byRank[d->rank]->file);
  } else {
    c->byRank[d->rank] = d;
    set->nfiles++;
    return 1;
  }
  set->nbad++;
  dumpFree(d);
  return 0;
}

int traceLoad(const char* dir, traceSet_t* set, FILE* out, FILE* err) {
  memset(set, 0, sizeof(*set));
  DIR* dp = opendir(dir);
  if (!dp) {
    fprintf(err, "gpubridge-info: cannot read the directory %s: %s\n", dir, strerror(errno));
    return -1;
  }
  char** names = NULL;
  size_t n = 0, cap = 0;
  struct dirent* e;
  int oom = 0;
  while (!oom && (e = readdir(dp)) != NULL) {
    if (!isJsonName(e->d_name)) continue;
    if (n == cap) {
      char** more = realloc(names, (cap = cap ? cap * 2 : 16) * sizeof(*names));
      if (!more) { oom = 1; break; }
      names = more;
    }
    if (!(names[n] = strdup(e->d_name))) oom = 1;
    else n++;
  }
  closedir(dp);
  if (n) qsort(names, n, sizeof(*names), byName);
  for (size_t i = 0; i < n; i++) {
    if (!oom && loadFile(dir, names[i], set, out) < 0) oom = 1;
    free(names[i]);
  }
  free(names);
  if (oom) {
    fprintf(err, "gpubridge-info: out of memory reading the dumps in %s\n", dir);
    return -1;
  }
  return 0;
}

void traceSetFree(traceSet_t* set) {
  for (int i = 0; i < set->ncomms; i++) {
    for (int r = 0; r < set->comms[i].nranks; r++) dumpFree(set->comms[i].byRank[r]);
    free(set->comms[i].byRank);
  }
  free(set->comms);
  memset(set, 0, sizeof(*set));
}
