#include "boot/validate.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/param.h"

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

static int cmpInt(const void* a, const void* b) {
  int x = *(const int*)a, y = *(const int*)b;
  return (x > y) - (x < y);
}

const char* gbBootRankList(const int* ranks, int n, char* buf, size_t len) {
  int* sorted = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  memcpy(sorted, ranks, sizeof(int) * (size_t)n);
  qsort(sorted, (size_t)n, sizeof(int), cmpInt);
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && used < len;) {
    int j = i;
    while (j + 1 < n && sorted[j + 1] == sorted[j] + 1) j++;
    int w = (j > i + 1) ? snprintf(buf + used, len - used, "%s%d-%d", i ? "," : "", sorted[i], sorted[j])
                        : snprintf(buf + used, len - used, "%s%d", i ? "," : "", sorted[i]);
    if (j == i + 1 && w > 0 && used + (size_t)w < len)
      w += snprintf(buf + used + (size_t)w, len - used - (size_t)w, ",%d", sorted[j]);
    if (w > 0) used += (size_t)w;
    i = j + 1;
  }
  free(sorted);
  return buf;
}

/* Values of one field across probes: "ranks 0-2 say 4, rank 3 says 5". */
typedef int64_t (*fieldFn_t)(const gbProbe_t*);
typedef const char* (*showFn_t)(int64_t v, char* buf, size_t len);

static int describeSplit(const gbProbe_t* probes, int n, fieldFn_t field, showFn_t show, char* out,
                         size_t len) {
  int64_t* values = malloc(sizeof(int64_t) * (size_t)n);
  int* ranks = malloc(sizeof(int) * (size_t)n);
  int nvalues = 0;
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
static int64_t fRingMin(const gbProbe_t* p) { return p->settings.ringMinBytes; }
static int64_t fSplit(const gbProbe_t* p) { return p->settings.splitTest; }
static int64_t fCheck(const gbProbe_t* p) { return p->settings.checkCalls; }
static const char* showCheck(int64_t v, char* b, size_t l) { return showEnum(GB_PARAM_CHECK_CALLS, v, b, l); }
static int64_t fRails(const gbProbe_t* p) { return p->settings.rails; }
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
    {"GPUBRIDGE_RING_MIN_BYTES", fRingMin, showInt, "set it the same on every rank"},
    {"GPUBRIDGE_CHECK_CALLS", fCheck, showCheck, "set it the same on every rank"},
    {"GPUBRIDGE_RAILS", fRails, showInt, "set it the same on every rank"},
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

/* Two ranks of one island on one GPU of one host would deadlock or corrupt
 * the vendor library's communicator. Split-test mode is exempt: it exists
 * to run several ranks on few GPUs for testing. */
static void sharedGpus(problems_t* p, const gbProbe_t* s, int n) {
  for (int a = 0; a < n; a++)
    for (int b = a + 1; b < n; b++) {
      if (s[a].runKind != gbRunReal || s[a].settings.splitTest || s[a].hostId != s[b].hostId || strcmp(s[a].vendor, s[b].vendor) != 0) continue;
      int sameUuid = s[a].gpuUuid[0] && strcmp(s[a].gpuUuid, s[b].gpuUuid) == 0;
      int samePci = !s[a].gpuUuid[0] && s[a].gpuPci[0] && strcmp(s[a].gpuPci, s[b].gpuPci) == 0;
      if (sameUuid || samePci)
        add(p, "ranks %d and %d of island %s share GPU %s on %s; give each rank of an island its own GPU "
               "(LOCAL_RANK, CUDA_VISIBLE_DEVICES or HIP_VISIBLE_DEVICES, GPUBRIDGE_DEVICE)",
            a, b, s[a].vendor, sameUuid ? s[a].gpuUuid : s[a].gpuPci, s[a].host);
    }
}

gbResult_t gbBootValidate(const gbValidateInput_t* in, gbProbe_t* sorted, int sortedCap, char* text,
                          size_t textLen) {
  const gbProbe_t* probes = in->probes;
  int n = in->nprobes;
  problems_t p = {text, textLen, 0, 0};
  text[0] = '\0';
  char list[512], split[1024];
  int missingRanks = 0;

  for (int i = 0; i < n; i++)
    if (probes[i].problems[0])
      add(&p, "rank %d (pid %d on %s): %s; fix that rank's environment or config (gpubridge-info -c lists "
              "valid values)",
          probes[i].rank, probes[i].pid, probes[i].host, probes[i].problems);

  if (n > 0 && describeSplit(probes, n, fNranks, showInt, split, sizeof(split)) > 1)
    add(&p, "ranks disagree on the number of ranks: %s; start every rank with the same WORLD_SIZE (nranks)",
        split);
  else if (n > 0) {
    int nranks = probes[0].nranks;
    int* count = calloc((size_t)(nranks > 0 ? nranks : 1), sizeof(int));
    int* bad = malloc(sizeof(int) * (size_t)(n + nranks + 1));
    int nbad = 0;
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
