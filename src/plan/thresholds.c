#include "plan/thresholds.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/param.h"
#include "base/result.h"
#include "plan/coll.h"

/* GPUBRIDGE_POLICY's names, in gbPolicy_t order; auto and tuned are no answer. */
static int policyByName(const char* s) {
  const char* const* names = gbParamDesc(GB_PARAM_POLICY)->choices;
  for (int k = 0; names[k]; k++)
    if (strcmp(s, names[k]) == 0) return k == gbPolicyAuto || k == gbPolicyTuned ? -1 : k;
  return -1;
}

static int parseBytes(const char* s, uint64_t* out) {
  if (strcmp(s, "-") == 0) {
    *out = UINT64_MAX;
    return 1;
  }
  char* end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || s[0] == '-') return 0;
  *out = v;
  return 1;
}

gbResult_t gbPlanThresholdsParse(const char* text, const char* where, gbThresholds_t* t) {
  memset(t, 0, sizeof(*t));
  int line = 0;
  for (const char* p = text; *p;) {
    const char* eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p) : strlen(p);
    char buf[256];
    line++;
    if (len >= sizeof(buf)) return gbErrorSet(gbInvalidArgument, "%s line %d: longer than 255 characters", where, line);
    memcpy(buf, p, len);
    buf[len] = '\0';
    p += len + (eol ? 1 : 0);
    char* hash = strchr(buf, '#');
    if (hash) *hash = '\0';
    char coll[32], lo[32], hi[32], pol[32], extra[8];
    int got = sscanf(buf, "%31s %31s %31s %31s %7s", coll, lo, hi, pol, extra);
    if (got <= 0) continue;
    gbThreshold_t r;
    if (got != 4)
      return gbErrorSet(gbInvalidArgument, "%s line %d: want `collective first_bytes last_bytes|- policy`", where,
                        line);
    r.coll = gbPlanCollByName(coll);
    r.policy = policyByName(pol);
    if (r.coll < 0) return gbErrorSet(gbInvalidArgument, "%s line %d: unknown collective %s", where, line, coll);
    if (r.policy < 0)
      return gbErrorSet(gbInvalidArgument, "%s line %d: policy %s is not hierarchical, native, flat or split-rail",
                        where, line, pol);
    if (!parseBytes(lo, &r.minBytes) || r.minBytes == UINT64_MAX || !parseBytes(hi, &r.maxBytes) ||
        r.maxBytes < r.minBytes)
      return gbErrorSet(gbInvalidArgument, "%s line %d: byte range %s..%s is not two counts (or -) in order", where,
                        line, lo, hi);
    if (t->n == GB_THRESHOLDS_MAX)
      return gbErrorSet(gbInvalidArgument, "%s: more than %d rules", where, GB_THRESHOLDS_MAX);
    t->rule[t->n++] = r;
  }
  return gbSuccess;
}

gbResult_t gbPlanThresholdsLoad(const char* path, gbThresholds_t* t, uint64_t* hash) {
  FILE* f = fopen(path, "rb");
  if (!f)
    return gbErrorSet(gbInvalidArgument, "GPUBRIDGE_THRESHOLDS=%s cannot be read: %s (write it with "
                                         "gpubridge-perf --tune)", path, strerror(errno));
  char text[16384];
  size_t n = fread(text, 1, sizeof(text) - 1, f);
  /* A read that failed (a directory opens, then reads EISDIR) says why; a
   * file that did not end within the buffer is too large. */
  int err = ferror(f) ? errno : 0, big = !err && !feof(f);
  fclose(f);
  if (err)
    return gbErrorSet(gbInvalidArgument, "GPUBRIDGE_THRESHOLDS=%s cannot be read: %s (give the file gpubridge-perf "
                                         "--tune wrote)", path, strerror(err));
  if (big) return gbErrorSet(gbInvalidArgument, "GPUBRIDGE_THRESHOLDS=%s is larger than 16 KiB", path);
  text[n] = '\0';
  uint64_t h = 1469598103934665603ull;
  for (size_t k = 0; k < n; k++) h = (h ^ (unsigned char)text[k]) * 1099511628211ull;
  *hash = h;
  return gbPlanThresholdsParse(text, path, t);
}

int gbPlanThresholdsLookup(const gbThresholds_t* t, int coll, size_t bytes) {
  for (int k = 0; k < t->n; k++)
    if (t->rule[k].coll == coll && bytes >= t->rule[k].minBytes && bytes <= t->rule[k].maxBytes)
      return t->rule[k].policy;
  return -1;
}
