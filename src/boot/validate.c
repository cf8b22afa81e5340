#include "boot/validate.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include "base/param.h"
#include "boot/ranks.h"
#include "boot/topology.h"
#include "net/net.h"

typedef struct {
  char* buf;
  size_t len, used;
  int count;
} problems_t;

static void add(problems_t* p, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(problems_t* p, const char* fmt, ...) {
  if (p->used >= p->len) return;
  p->count++;
  int n = snprintf(p->buf + p->used, p->len - p->used, "%s(%d) ", p->count > 1 ? " " : "", p->count);
  if (n > 0) p->used += (size_t)n;
  if (p->used >= p->len) return;
  va_list ap;
  va_start(ap, fmt);
  n = vsnprintf(p->buf + p->used, p->len - p->used, fmt, ap);
  va_end(ap);
  if (n > 0) p->used += (size_t)n;
  if (p->used > p->len) p->used = p->len;
}


/* Values of one field across probes: "ranks 0-2 say 4, rank 3 says 5". */
typedef int64_t (*fieldFn_t)(const gbProbe_t*);
typedef const char* (*showFn_t)(int64_t v, char* buf, size_t len);

static int describeSplit(const gbProbe_t* probes, int n, fieldFn_t field, showFn_t show, char* out,
                         size_t len) {
  int64_t* values = malloc(sizeof(int64_t) * (size_t)n);
  int* ranks = malloc(sizeof(int) * (size_t)n);
  int nvalues = 0;
  out[0] = '\0';
  if (!values || !ranks) {
    free(values);
    free(ranks);
    return 0;
  }
  for (int i = 0; i < n; i++) {
    int64_t v = field(&probes[i]);
    int seen = 0;
    for (int k = 0; k < nvalues; k++) seen |= values[k] == v;
    if (!seen) values[nvalues++] = v;
  }
  size_t used = 0;
  out[0] = '\0';
  for (int k = 0; k < nvalues && used < len; k++) {
    int m = 0;
    for (int i = 0; i < n; i++)
      if (field(&probes[i]) == values[k]) ranks[m++] = probes[i].rank;
    char list[256], shown[64];
    gbBootRankList(ranks, m, list, sizeof(list));
    int w = snprintf(out + used, len - used, "%s%s %s %s %s", k ? ", " : "", m > 1 ? "ranks" : "rank", list,
                     m > 1 ? "use" : "uses", show(values[k], shown, sizeof(shown)));
    if (w > 0) used += (size_t)w;
  }
  free(values);
  free(ranks);
  return nvalues;
}

static const char* showInt(int64_t v, char* buf, size_t len) {
  snprintf(buf, len, "%lld", (long long)v);
  return buf;
}
static const char* showEnum(gbParamId_t id, int64_t v, char* buf, size_t len) {
  const gbParamDesc_t* d = gbParamDesc(id);
  int count = 0;
  while (d->choices && d->choices[count]) count++;
  snprintf(buf, len, "%s", (v >= 0 && v < count) ? d->choices[v] : "?");
  return buf;
}
static const char* showPolicy(int64_t v, char* b, size_t l) { return showEnum(GB_PARAM_POLICY, v, b, l); }
static const char* showTransport(int64_t v, char* b, size_t l) { return showEnum(GB_PARAM_TRANSPORT, v, b, l); }
static const char* showRunKind(int64_t v, char* b, size_t l) {
  static const char* names[] = {"a real GPU", "a simulated GPU", "no GPU (cpu)"};
  snprintf(b, l, "%s", (v >= 0 && v < 3) ? names[v] : "?");
  return b;
}
static const char* showVersion(int64_t v, char* b, size_t l) {
  snprintf(b, l, "gpubridge %lld.%lld.%lld", (long long)(v / 10000), (long long)(v / 100 % 100),
           (long long)(v % 100));
  return b;
}

static int64_t fNranks(const gbProbe_t* p) { return p->nranks; }
static int64_t fVersion(const gbProbe_t* p) { return p->libVersion; }
static int64_t fPolicy(const gbProbe_t* p) { return p->settings.policy; }
static int64_t fTransport(const gbProbe_t* p) { return p->settings.transport; }
static int64_t fTimeout(const gbProbe_t* p) { return p->settings.timeoutSec; }
static int64_t fNsocks(const gbProbe_t* p) { return p->settings.nsocks; }
static int64_t fSlots(const gbProbe_t* p) { return p->settings.stagingSlots; }
static int64_t fChunk(const gbProbe_t* p) { return p->settings.chunkBytes; }
static int64_t fChunkBySize(const gbProbe_t* p) { return p->settings.chunkBySize; }
static const char* showSetOrNot(int64_t v, char* b, size_t l) {
  snprintf(b, l, "%s", v ? "unset (the chunk follows the message size)" : "set");
  return b;
}
static int64_t fRingMin(const gbProbe_t* p) { return p->settings.ringMinBytes; }
static int64_t fSplit(const gbProbe_t* p) { return p->settings.splitTest; }
static int64_t fCheck(const gbProbe_t* p) { return p->settings.checkCalls; }
static const char* showCheck(int64_t v, char* b, size_t l) { return showEnum(GB_PARAM_CHECK_CALLS, v, b, l); }
static int64_t fRails(const gbProbe_t* p) { return p->settings.rails; }
static int64_t fBridgeSlots(const gbProbe_t* p) { return p->settings.bridgeSlots; }
static int64_t fExchange(const gbProbe_t* p) { return p->settings.exchange; }
static int64_t fCompression(const gbProbe_t* p) { return p->settings.compression; }
static const char* showCompression(int64_t v, char* b, size_t l) { return showEnum(GB_PARAM_BRIDGE_COMPRESSION, v, b, l); }
static const char* showExchange(int64_t v, char* b, size_t l) { return showEnum(GB_PARAM_EXCHANGE, v, b, l); }
static const char* showBridgeSlots(int64_t v, char* b, size_t l) { return showEnum(GB_PARAM_BRIDGE_SLOTS, v, b, l); }
static int64_t fThresholds(const gbProbe_t* p) { return (int64_t)p->settings.thresholdsHash; }
static const char* showHash(int64_t v, char* b, size_t l) {
  snprintf(b, l, "contents %016llx", (unsigned long long)v);
  return b;
}
static const char* showSplit(int64_t v, char* b, size_t l) { return showEnum(GB_PARAM_SPLIT_TEST, v, b, l); }
static int64_t fRunKind(const gbProbe_t* p) { return p->runKind; }

typedef struct {
  const char* what;
  fieldFn_t field;
  showFn_t show;
  const char* fix;
} agreeRule_t;

static const agreeRule_t agreeRules[] = {
    {"the gpubridge version", fVersion, showVersion, "install the same gpubridge on every node"},
    {"GPUBRIDGE_POLICY (or config.policy)", fPolicy, showPolicy, "set it the same on every rank"},
    {"GPUBRIDGE_TRANSPORT (or config.transport)", fTransport, showTransport, "set it the same on every rank"},
    {"GPUBRIDGE_TIMEOUT (or config.timeoutSeconds)", fTimeout, showInt, "set it the same on every rank"},
    {"GPUBRIDGE_NSOCKS_PERPEER", fNsocks, showInt, "set it the same on every rank"},
    {"GPUBRIDGE_STAGING_SLOTS", fSlots, showInt, "set it the same on every rank"},
    {"GPUBRIDGE_CHUNK_BYTES (or config.chunkBytes)", fChunk, showInt, "set it the same on every rank"},
    {"whether GPUBRIDGE_CHUNK_BYTES (or config.chunkBytes) is set", fChunkBySize, showSetOrNot,
     "set it on every rank or on none"},
    {"GPUBRIDGE_RING_MIN_BYTES", fRingMin, showInt, "set it the same on every rank"},
    {"GPUBRIDGE_CHECK_CALLS", fCheck, showCheck, "set it the same on every rank"},
    {"GPUBRIDGE_RAILS", fRails, showInt, "set it the same on every rank"},
    {"GPUBRIDGE_BRIDGE_SLOTS", fBridgeSlots, showBridgeSlots, "set it the same on every rank"},
    {"GPUBRIDGE_EXCHANGE", fExchange, showExchange, "set it the same on every rank"},
    {"GPUBRIDGE_BRIDGE_COMPRESSION", fCompression, showCompression,
     "set it (or gbConfig_t.bridgeCompression, or the process group's option) the same on every rank"},
    {"the thresholds file (GPUBRIDGE_THRESHOLDS)", fThresholds, showHash,
     "give every rank a copy of the same file (gpubridge-perf --tune writes it)"},
    {"GPUBRIDGE_SPLIT_TEST", fSplit, showSplit, "set it the same on every rank"},
    {"the kind of device", fRunKind, showRunKind,
     "a job is either all real GPUs or all simulated (GPUBRIDGE_VENDOR set on every rank)"},
};

static int countIslands(const gbProbe_t* sorted, int n, char* desc, size_t len) {
  int nislands = 0;
  size_t used = 0;
  desc[0] = '\0';
  int* members = malloc(sizeof(int) * (size_t)n);
  if (!members) return 0;
  for (int r = 0; r < n; r++) {
    int first = 1;
    for (int q = 0; q < r; q++) first &= strcmp(sorted[q].vendor, sorted[r].vendor) != 0;
    if (!first) continue;
    nislands++;
    int m = 0;
    for (int q = r; q < n; q++)
      if (strcmp(sorted[q].vendor, sorted[r].vendor) == 0) members[m++] = q;
    char list[256];
    gbBootRankList(members, m, list, sizeof(list));
    int w = snprintf(desc + used, len > used ? len - used : 0, "%s%s: %s %s", nislands > 1 ? "; " : "",
                     sorted[r].vendor, m > 1 ? "ranks" : "rank", list);
    if (w > 0) used += (size_t)w;
    if (used >= len) used = len;
  }
  free(members);
  return nislands;
}

/* s's hex digits, lower case, from after a "GPU-" or "MIG-" prefix. */
static void hexDigits(const char* s, char* out, size_t len) {
  size_t n = 0;
  if (strncmp(s, "GPU-", 4) == 0 || strncmp(s, "MIG-", 4) == 0) s += 4;
  for (; *s && n + 1 < len; s++)
    if (isxdigit((unsigned char)*s)) out[n++] = (char)tolower((unsigned char)*s);
  out[n] = '\0';
}

int gbBootSameGpu(const gbProbe_t* a, const gbProbe_t* b) {
  if (a->runKind != gbRunReal || b->runKind != gbRunReal || a->hostId != b->hostId) return 0;
  if (a->gpuUuid[0] && b->gpuUuid[0]) {
    char x[sizeof(a->gpuUuid)], y[sizeof(b->gpuUuid)];
    hexDigits(a->gpuUuid, x, sizeof(x));
    hexDigits(b->gpuUuid, y, sizeof(y));
    return strncmp(a->gpuUuid, b->gpuUuid, 4) == 0 ? strcmp(x, y) == 0 : 0;
  }
  return a->gpuPci[0] && strcasecmp(a->gpuPci, b->gpuPci) == 0;
}

/* Two ranks of one island on one GPU of one host would deadlock or corrupt
 * the vendor library's communicator. Split-test mode is exempt: it exists
 * to run several ranks on few GPUs for testing. */
static void sharedGpus(problems_t* p, const gbProbe_t* s, int n) {
  for (int a = 0; a < n; a++)
    for (int b = a + 1; b < n; b++) {
      if (s[a].settings.splitTest || strcmp(s[a].vendor, s[b].vendor) != 0 || !gbBootSameGpu(&s[a], &s[b])) continue;
      add(p, "ranks %d and %d of island %s share GPU %s on %s; give each rank of an island its own GPU "
             "(LOCAL_RANK, CUDA_VISIBLE_DEVICES or HIP_VISIBLE_DEVICES, GPUBRIDGE_DEVICE)",
          a, b, s[a].vendor, s[a].gpuUuid[0] ? s[a].gpuUuid : s[a].gpuPci, s[a].host);
    }
}

static int terminated(const char* s, size_t len) { return memchr(s, '\0', len) != NULL; }

static int choiceCount(gbParamId_t id) {
  const gbParamDesc_t* d = gbParamDesc(id);
  int count = 0;
  while (d->choices && d->choices[count]) count++;
  return count;
}

#define BAD(...) (snprintf(why, whyLen, __VA_ARGS__), 0)

int gbBootProbeCheck(const gbProbe_t* p, char* why, size_t whyLen) {
  if (p->magic != GB_PROBE_MAGIC || p->version != GB_PROBE_VERSION)
    return BAD("magic %08x version %u, this build speaks %08x version %u", p->magic, p->version, GB_PROBE_MAGIC,
               GB_PROBE_VERSION);
  if (p->kind != GB_PROBE_RANK && p->kind != GB_PROBE_REPORT) return BAD("kind %d is not a rank or a report", p->kind);
  if (!terminated(p->host, sizeof(p->host))) return BAD("the host name is not terminated");
  if (!terminated(p->vendor, sizeof(p->vendor))) return BAD("the vendor is not terminated");
  if (!terminated(p->gpuUuid, sizeof(p->gpuUuid))) return BAD("the GPU UUID is not terminated");
  if (!terminated(p->gpuPci, sizeof(p->gpuPci))) return BAD("the GPU PCI id is not terminated");
  if (!terminated(p->problems, sizeof(p->problems))) return BAD("the problem text is not terminated");
  if (p->settings.timeoutSec < 1) return BAD("timeout %d s is not at least 1", p->settings.timeoutSec);
  if (p->kind == GB_PROBE_REPORT) {
    if (p->rank < -1 || p->rank >= GB_MAX_RANKS) return BAD("report for rank %d, not in [-1, %d)", p->rank, GB_MAX_RANKS);
    if (!p->problems[0]) return BAD("a report without a problem");
    return 1;
  }
  if (p->nranks < 1 || p->nranks > GB_MAX_RANKS)
    return BAD("world size %d is not in [1, %d]", p->nranks, GB_MAX_RANKS);
  /* A rank outside [0, nranks) is a launcher mistake the rules below name;
   * here only what no rule could print sensibly. */
  if (p->rank < -GB_MAX_RANKS || p->rank > 2 * GB_MAX_RANKS) return BAD("rank %d is far out of range", p->rank);
  if (p->localRank < 0) return BAD("local rank %d is negative", p->localRank);
  if (p->runKind < gbRunReal || p->runKind > gbRunCpu) return BAD("run kind %d is unknown", p->runKind);
  if (p->gpuIndex < -1) return BAD("GPU index %d is below -1", p->gpuIndex);
  if (!p->vendor[0]) return BAD("the vendor is empty");
  const gbSettings_t* st = &p->settings;
  if (st->policy < 0 || st->policy >= choiceCount(GB_PARAM_POLICY)) return BAD("policy %d is unknown", st->policy);
  if (st->transport < 0 || st->transport >= choiceCount(GB_PARAM_TRANSPORT))
    return BAD("transport %d is unknown", st->transport);
  if (st->splitTest < 0 || st->splitTest >= choiceCount(GB_PARAM_SPLIT_TEST))
    return BAD("split-test mode %d is unknown", st->splitTest);
  if (st->checkCalls < 0 || st->checkCalls >= choiceCount(GB_PARAM_CHECK_CALLS))
    return BAD("call-check mode %d is unknown", st->checkCalls);
  if (st->bridgeSlots < 0 || st->bridgeSlots >= choiceCount(GB_PARAM_BRIDGE_SLOTS))
    return BAD("bridge-slot mode %d is unknown", st->bridgeSlots);
  if (st->compression < 0 || st->compression >= choiceCount(GB_PARAM_BRIDGE_COMPRESSION))
    return BAD("bridge compression %d is unknown", st->compression);
  if (st->exchange < 0 || st->exchange >= choiceCount(GB_PARAM_EXCHANGE))
    return BAD("exchange mode %d is unknown", st->exchange);
  if (st->nsocks < 1 || st->nsocks > GB_NET_MAX_POLLFDS) return BAD("%d sockets per peer, not 1..%d", st->nsocks, GB_NET_MAX_POLLFDS);
  if (st->stagingSlots < 1) return BAD("%d staging slots", st->stagingSlots);
  if (st->chunkBytes < 1) return BAD("chunk of %lld bytes", (long long)st->chunkBytes);
  if (st->ringMinBytes < 0) return BAD("ring threshold of %lld bytes", (long long)st->ringMinBytes);
  if (st->rails < 0) return BAD("%d rails", st->rails);
  /* A rank that could not listen says so in problems and sends no address. */
  const gbSockAddr_t* a = &p->listenAddr;
  int v4 = a->sa.ss_family == AF_INET && a->len == sizeof(struct sockaddr_in);
  int v6 = a->sa.ss_family == AF_INET6 && a->len == sizeof(struct sockaddr_in6);
  if (!p->problems[0] && !v4 && !v6)
    return BAD("listen address of family %d and length %u is not IPv4 or IPv6", (int)a->sa.ss_family, (unsigned)a->len);
  return 1;
}

/* "rank 3 (pid 42 on node1)", or for an unknown rank "a process (pid 42 on
 * node1, LOCAL_RANK 3)"; host only when it is text. */
static const char* who(const gbProbe_t* p, char* buf, size_t len) {
  const char* host = terminated(p->host, sizeof(p->host)) ? p->host : "?";
  if (p->rank >= 0) snprintf(buf, len, "rank %d (pid %d on %s)", p->rank, p->pid, host);
  else snprintf(buf, len, "a process (pid %d on %s, local rank %d)", p->pid, host, p->localRank);
  return buf;
}

/* Reports and malformed probes, named one by one; the rest go to ok[]. */
static int sortOut(problems_t* pr, const gbProbe_t* probes, int n, const gbProbe_t** ok, const gbProbe_t** reports,
                   int* nreports) {
  int nok = 0;
  *nreports = 0;
  for (int i = 0; i < n; i++) {
    char why[160], name[128];
    if (!gbBootProbeCheck(&probes[i], why, sizeof(why)))
      add(pr, "%s sent a malformed probe: %s; run the same gpubridge build on every rank", who(&probes[i], name,
          sizeof(name)), why);
    else if (probes[i].kind == GB_PROBE_REPORT) reports[(*nreports)++] = &probes[i];
    else ok[nok++] = &probes[i];
  }
  return nok;
}

/* A report by a process that does not know its rank (RANK unreadable) names
 * the rank when exactly one is missing and exactly one such report came. */
static void addReports(problems_t* pr, const gbProbe_t* const* reports, int nreports, const gbProbe_t* const* ok,
                       int nok) {
  int unknown = 0, guess = -1;
  for (int k = 0; k < nreports; k++) unknown += reports[k]->rank < 0;
  if (unknown == 1 && nok > 0) {
    int nranks = ok[0]->nranks, nmissing = 0;
    char* seen = calloc((size_t)nranks, 1);
    if (seen) {
      for (int i = 0; i < nok; i++)
        if (ok[i]->nranks == nranks && ok[i]->rank >= 0 && ok[i]->rank < nranks) seen[ok[i]->rank] = 1;
      for (int k = 0; k < nreports; k++)
        if (reports[k]->rank >= 0 && reports[k]->rank < nranks) seen[reports[k]->rank] = 1;
      for (int r = 0; r < nranks; r++)
        if (!seen[r]) nmissing++, guess = r;
      free(seen);
    }
    if (nmissing != 1) guess = -1;
  }
  /* A report's world size against the ranks': a process told fewer ranks
   * than the others (RANK beyond its WORLD_SIZE) is a world-size mismatch. */
  char sizes[400] = "";
  int agreed = nok > 0 ? ok[0]->nranks : 0;
  for (int i = 1; i < nok; i++)
    if (ok[i]->nranks != agreed) agreed = 0;
  if (agreed > 0) {
    int* ranks = malloc(sizeof(int) * (size_t)nok);
    if (ranks) {
      char list[256];
      for (int i = 0; i < nok; i++) ranks[i] = ok[i]->rank;
      snprintf(sizes, sizeof(sizes), "; %s %s %s WORLD_SIZE=%d, so the ranks disagree on the number of ranks: "
               "start every rank with the same WORLD_SIZE (nranks)", nok > 1 ? "ranks" : "rank",
               gbBootRankList(ranks, nok, list, sizeof(list)), nok > 1 ? "say" : "says", agreed);
      free(ranks);
    }
  }
  for (int k = 0; k < nreports; k++) {
    char name[128];
    const gbProbe_t* r = reports[k];
    const char* mismatch = r->nranks > 0 && agreed > 0 && r->nranks != agreed ? sizes : "";
    if (r->rank < 0 && guess >= 0)
      add(pr, "%s, presumably rank %d (the one rank missing), cannot join: %s%s", who(r, name, sizeof(name)), guess,
          r->problems, mismatch);
    else
      add(pr, "%s cannot join: %s%s", who(r, name, sizeof(name)), r->problems, mismatch);
  }
}

/* Each rank's own problems (invalid values); ranks with the same text (a
 * variable every rank was given alike) are named together, once. */
static void addProblems(problems_t* pr, const gbProbe_t* probes, int n) {
  int* ranks = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  for (int i = 0; i < n; i++) {
    if (!probes[i].problems[0]) continue;
    int seen = 0, m = 0;
    for (int j = 0; j < i && !seen; j++) seen = strcmp(probes[j].problems, probes[i].problems) == 0;
    if (seen) continue;
    for (int j = i; j < n && ranks; j++)
      if (strcmp(probes[j].problems, probes[i].problems) == 0) ranks[m++] = probes[j].rank;
    if (m > 1) {
      char list[256];
      add(pr, "ranks %s%s: %s; fix the environment or config of %s (gpubridge-info -c lists valid values)",
          gbBootRankList(ranks, m, list, sizeof(list)), m == n ? " (every rank)" : "", probes[i].problems,
          m == n ? "every rank" : "those ranks");
    } else {
      add(pr, "rank %d (pid %d on %s): %s; fix that rank's environment or config (gpubridge-info -c lists "
              "valid values)",
          probes[i].rank, probes[i].pid, probes[i].host, probes[i].problems);
    }
  }
  free(ranks);
}

gbResult_t gbBootValidate(const gbValidateInput_t* in, gbProbe_t* sorted, int sortedCap, char* text,
                          size_t textLen) {
  problems_t p = {text, textLen, 0, 0};
  text[0] = '\0';
  char list[512], split[1024];
  int missingRanks = 0;
  /* The rules below see only well-formed probes of ranks, copied in arrival
   * order; malformed ones and reports are named first. */
  int total = in->nprobes > 0 ? in->nprobes : 0;
  const gbProbe_t** ok = malloc(sizeof(gbProbe_t*) * (size_t)(total + 1));
  const gbProbe_t** reports = malloc(sizeof(gbProbe_t*) * (size_t)(total + 1));
  gbProbe_t* probes = malloc(sizeof(gbProbe_t) * (size_t)(total + 1));
  if (!ok || !reports || !probes) {
    free(ok);
    free(reports);
    free(probes);
    snprintf(text, textLen, "gpubridge start-up failed: the rendezvous root is out of memory validating %d probes",
             total);
    return gbSystemError;
  }
  int nreports = 0;
  int n = sortOut(&p, in->probes, total, ok, reports, &nreports);
  for (int i = 0; i < n; i++) probes[i] = *ok[i];
  addReports(&p, reports, nreports, ok, n);
  free(ok);

  addProblems(&p, probes, n);

  if (n > 0 && describeSplit(probes, n, fNranks, showInt, split, sizeof(split)) > 1)
    add(&p, "ranks disagree on the number of ranks: %s; start every rank with the same WORLD_SIZE (nranks)",
        split);
  else if (n > 0) {
    int nranks = probes[0].nranks;
    int* count = calloc((size_t)(nranks > 0 ? nranks : 1), sizeof(int));
    int* bad = malloc(sizeof(int) * (size_t)(n + nranks + 1));
    int nbad = 0;
    if (!count || !bad) {
      add(&p, "the rendezvous root is out of memory checking %d ranks", nranks);
      n = 0;
      nranks = 0;
    }
    for (int i = 0; i < n; i++) {
      if (probes[i].rank < 0 || probes[i].rank >= nranks) bad[nbad++] = probes[i].rank;
      else count[probes[i].rank]++;
    }
    if (nbad)
      add(&p, "%s %s out of range [0, %d); give each process a RANK below WORLD_SIZE",
          nbad > 1 ? "ranks" : "rank", gbBootRankList(bad, nbad, list, sizeof(list)), nranks);
    for (int r = 0; r < nranks; r++) {
      if (count[r] < 2) continue;
      size_t used = 0;
      split[0] = '\0';
      for (int i = 0; i < n; i++)
        if (probes[i].rank == r) {
          int w = snprintf(split + used, sizeof(split) - used, "%spid %d on %s", used ? ", " : "",
                           probes[i].pid, probes[i].host);
          if (w > 0 && used + (size_t)w < sizeof(split)) used += (size_t)w;
        }
      add(&p, "rank %d is claimed by %d processes (%s); give each process its own RANK", r, count[r], split);
    }
    nbad = 0;
    for (int k = 0; k < nreports; k++) /* a rank that reported is not missing */
      if (reports[k]->rank >= 0 && reports[k]->rank < nranks) count[reports[k]->rank]++;
    for (int r = 0; r < nranks; r++)
      if (count[r] == 0) bad[nbad++] = r;
    if (nbad && (in->timedOut || p.count == 0)) {
      missingRanks = 1;
      add(&p, "%s %s did not reach the rendezvous root within %d s; check that %s and %s the same unique id "
              "(MASTER_ADDR:MASTER_PORT)",
          nbad > 1 ? "ranks" : "rank", gbBootRankList(bad, nbad, list, sizeof(list)), in->timeoutSec,
          nbad > 1 ? "they are running" : "it is running", nbad > 1 ? "use" : "uses");
    }
    free(count);
    free(bad);
  }

  for (size_t k = 0; k < sizeof(agreeRules) / sizeof(agreeRules[0]); k++)
    if (n > 0 && describeSplit(probes, n, agreeRules[k].field, agreeRules[k].show, split, sizeof(split)) > 1)
      add(&p, "ranks disagree on %s: %s; %s", agreeRules[k].what, split, agreeRules[k].fix);

  if (p.count == 0 && n == 0) add(&p, "no rank sent its facts to the rendezvous root");
  if (p.count == 0) {
    int nranks = probes[0].nranks;
    if (nranks > sortedCap) {
      add(&p, "%d ranks exceed this build's limit of %d", nranks, sortedCap);
    } else {
      for (int i = 0; i < n; i++) sorted[probes[i].rank] = probes[i];
      char islands[1024];
      int nislands = countIslands(sorted, nranks, islands, sizeof(islands));
      sharedGpus(&p, sorted, nranks);
      if (sorted[0].settings.policy == 2 /* gbPolicyNative */ && nislands > 1)
        add(&p, "policy native needs one island, but this job has %d (%s); use GPUBRIDGE_POLICY=hierarchical or "
                "auto",
            nislands, islands);
    }
  }

  free(probes);
  free(reports);
  if (p.count == 0) return gbSuccess;
  char head[64];
  snprintf(head, sizeof(head), "gpubridge start-up failed (%d problem%s): ", p.count, p.count > 1 ? "s" : "");
  size_t hl = strlen(head);
  size_t tl = strlen(text);
  if (hl + tl + 1 > textLen) tl = textLen - hl - 1;
  memmove(text + hl, text, tl);
  memcpy(text, head, hl);
  text[hl + tl] = '\0';
  return missingRanks ? gbTimeout : gbInvalidUsage;
}
