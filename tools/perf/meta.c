/* Run metadata, so a result can be traced to what produced it: gpubridge's
 * version, the mode (simulated, split-test, emulated-AMD), the date, the
 * ranks' hosts and devices, and the GPUBRIDGE_* variables set on rank 0
 * (secrets hidden). Printed as '#' lines and as the JSON file's first line. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "perf.h"

extern char** environ;

const char* perfRunKindName(int runKind) {
  switch (runKind) {
    case gbRunReal: return "real";
    case gbRunSimulated: return "simulated";
    case gbRunCpu: return "cpu";
    default: return "unknown";
  }
}

int perfHasEmulatedIsland(const gbTopology_t* t) {
  for (int k = 0; k < t->nislands; k++)
    if (strstr(t->islandVendor[k], "emulated")) return 1;
  return 0;
}

const char* perfPolicyName(int policy) {
  switch (policy) {
    case gbPolicyAuto: return "auto";
    case gbPolicyHierarchical: return "hierarchical";
    case gbPolicyNative: return "native";
    case gbPolicyFlat: return "flat";
    case gbPolicySplitRail: return "split-rail";
    case gbPolicyTuned: return "tuned";
    default: return "unknown";
  }
}

void perfModeLabel(const gbTopology_t* t, char* buf, size_t len) {
  snprintf(buf, len, "%s%s%s", perfRunKindName(t->runKind), t->splitTest ? " split-test" : "",
           perfHasEmulatedIsland(t) ? " emulated-AMD" : "");
}

void perfLayoutLabel(const gbTopology_t* t, char* buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (int k = 0; k < t->nislands && used < len; k++) {
    int n = snprintf(buf + used, len - used, "%s%s:%d", k ? "," : "", t->islandVendor[k], t->islandSize[k]);
    if (n < 0) break;
    used += (size_t)n;
  }
}

static void versionText(char* buf, size_t len) {
  int v = 0;
  if (gbGetVersion(&v) != gbSuccess) {
    snprintf(buf, len, "?");
    return;
  }
  snprintf(buf, len, "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
}

void perfDateText(char* buf, size_t len) {
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int isSecret(const char* entry) {
  return strncmp(entry, "GPUBRIDGE_JOB_SECRET=", 21) == 0 || strncmp(entry, "GPUBRIDGE_UNIQUE_ID=", 20) == 0;
}

void perfMetaPrint(const perfCtx_t* ctx) {
  char version[32], date[32], mode[64];
  versionText(version, sizeof(version));
  perfDateText(date, sizeof(date));
  perfModeLabel(&ctx->topo, mode, sizeof(mode));
  printf("# gpubridge %s, mode %s, %s\n", version, mode, date);
  printf("# GPUBRIDGE_* set on rank 0:");
  int any = 0;
  for (char** e = environ; *e; e++) {
    if (strncmp(*e, "GPUBRIDGE_", 10) != 0) continue;
    any = 1;
    if (isSecret(*e)) printf(" %.*s=(hidden)", (int)(strchr(*e, '=') - *e), *e);
    else printf(" %s", *e);
  }
  printf("%s\n", any ? "" : " none");
}

void perfJsonString(FILE* f, const char* s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

static void jsonEnv(FILE* f) {
  fprintf(f, "\"env_rank0\": {");
  int first = 1;
  for (char** e = environ; *e; e++) {
    const char* eq = strchr(*e, '=');
    if (strncmp(*e, "GPUBRIDGE_", 10) != 0 || !eq) continue;
    char name[128];
    snprintf(name, sizeof(name), "%.*s", (int)(eq - *e), *e);
    fprintf(f, "%s", first ? "" : ", ");
    perfJsonString(f, name);
    fprintf(f, ": ");
    perfJsonString(f, isSecret(*e) ? "(hidden)" : eq + 1);
    first = 0;
  }
  fprintf(f, "}");
}

static void jsonRanks(FILE* f, const perfCtx_t* ctx, const perfRankInfo_t* ranks) {
  const gbTopology_t* t = &ctx->topo;
  fprintf(f, "\"ranks\": [");
  for (int r = 0; r < t->nranks; r++) {
    fprintf(f, "%s{\"rank\": %d, \"island\": %d, \"vendor\": ", r ? ", " : "", r, t->islandOfRank[r]);
    perfJsonString(f, t->islandVendor[t->islandOfRank[r]]);
    fprintf(f, ", \"pid\": %d, \"host\": ", (int)ranks[r].pid);
    perfJsonString(f, ranks[r].host);
    fprintf(f, ", \"device\": ");
    perfJsonString(f, ranks[r].device);
    fprintf(f, ", \"vendor_library\": ");
    if (ranks[r].library[0]) perfJsonString(f, ranks[r].library);
    else fprintf(f, "null");
    fprintf(f, "}");
  }
  fprintf(f, "]");
}

void perfMetaJson(FILE* f, const perfOptions_t* opts, const perfCtx_t* ctx, const perfRankInfo_t* ranks) {
  const gbTopology_t* t = &ctx->topo;
  char version[32], date[32], mode[64], layout[256];
  versionText(version, sizeof(version));
  perfDateText(date, sizeof(date));
  perfModeLabel(t, mode, sizeof(mode));
  perfLayoutLabel(t, layout, sizeof(layout));
  fprintf(f, "{\"meta\": {\"tool\": \"gpubridge-perf\", \"gpubridge_version\": \"%s\", \"date\": \"%s\", ", version,
          date);
  fprintf(f, "\"collective\": \"%s\", \"mode_label\": \"%s\", \"mode\": \"%s\", ", perfCollName(opts->coll), mode,
          perfRunKindName(t->runKind));
  fprintf(f, "\"simulated\": %s, \"split_test\": %s, \"emulated_amd\": %s, ",
          t->runKind == gbRunSimulated ? "true" : "false", t->splitTest ? "true" : "false",
          perfHasEmulatedIsland(t) ? "true" : "false");
  fprintf(f, "\"nranks\": %d, \"nislands\": %d, \"layout\": ", t->nranks, t->nislands);
  perfJsonString(f, layout);
  fprintf(f, ", \"policy\": \"%s\", ", perfPolicyName(t->policy));
  fprintf(f, "\"minbytes\": %zu, \"maxbytes\": %zu, \"stepfactor\": %zu, \"stepbytes\": %zu, ", opts->minBytes,
          opts->maxBytes, opts->stepFactor, opts->stepBytes);
  fprintf(f, "\"iters\": %d, \"warmup\": %d, \"check\": %d, \"cycles\": %d, \"blocking\": %d, \"average\": %d, ",
          opts->iters, opts->warmup, opts->check, opts->cycles, opts->blocking, opts->average);
  fprintf(f, "\"alone\": %s, \"phases\": %s, ", ctx->alone ? "true" : "false", opts->phases ? "true" : "false");
  fprintf(f, "\"timing\": \"%s\", \"timing_detail\": ", ctx->events ? "device events" : "host clock");
  perfJsonString(f, ctx->timing);
  fprintf(f, ", ");
  jsonRanks(f, ctx, ranks);
  fprintf(f, ", ");
  jsonEnv(f);
  fprintf(f, "}}\n");
  fflush(f);
}
