/* base/param: defaults, valid values, the error text of each kind of invalid
 * value, SIZE suffixes, unknown names, and the printed table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/param.h"
#include "base/suggest.h"
#include "gpubridge/gpubridge.h"

#include "unit/check.h"

extern char** environ;

/* Start from an environment without any GPUBRIDGE_* variable. */
static void clearEnv(void) {
  for (int again = 1; again;) {
    again = 0;
    for (char** e = environ; e && *e; e++) {
      if (strncmp(*e, "GPUBRIDGE_", 10) == 0) {
        char name[256];
        size_t n = strcspn(*e, "=");
        snprintf(name, sizeof(name), "%.*s", (int)n, *e);
        unsetenv(name);
        again = 1;
        break;
      }
    }
  }
  gbParamReset();
}

static void testDefaults(void) {
  clearEnv();
  CHECK(gbParamInt(GB_PARAM_DEBUG) == GB_LOG_WARN, "DEBUG default");
  CHECK(strcmp(gbParamString(GB_PARAM_DEBUG_SUBSYS), "ALL") == 0, "DEBUG_SUBSYS default");
  CHECK(strcmp(gbParamString(GB_PARAM_DEBUG_FILE), "") == 0, "DEBUG_FILE default");
  CHECK(strcmp(gbParamString(GB_PARAM_VENDOR), "") == 0, "VENDOR default");
  CHECK(gbParamInt(GB_PARAM_POLICY) == gbPolicyAuto, "POLICY default");
  CHECK(gbParamInt(GB_PARAM_TRANSPORT) == gbTransportTcp, "TRANSPORT default");
  CHECK(gbParamInt(GB_PARAM_TIMEOUT) == 300, "TIMEOUT default");
  CHECK(gbParamInt(GB_PARAM_NSOCKS_PERPEER) == 2, "NSOCKS default");
  CHECK(gbParamInt(GB_PARAM_CHUNK_BYTES) == 1024 * 1024, "CHUNK default");
  CHECK(gbParamInt(GB_PARAM_STAGING_SLOTS) == 4, "SLOTS default");
  CHECK(gbParamInt(GB_PARAM_RING_MIN_BYTES) == 64 * 1024, "RING_MIN default");
  for (int i = 0; i < GB_PARAM_COUNT; i++) CHECK(!gbParamIsSet((gbParamId_t)i), "param %d unset", i);
  CHECK(strcmp(gbParamErrors(), "") == 0, "no errors: [%s]", gbParamErrors());

  /* Every id has a descriptor whose name matches the enum order. */
  static const char* names[GB_PARAM_COUNT] = {
      "GPUBRIDGE_DEBUG", "GPUBRIDGE_DEBUG_SUBSYS", "GPUBRIDGE_DEBUG_FILE", "GPUBRIDGE_VENDOR",
      "GPUBRIDGE_POLICY", "GPUBRIDGE_TRANSPORT", "GPUBRIDGE_TIMEOUT", "GPUBRIDGE_SOCKET_IFNAME",
      "GPUBRIDGE_NSOCKS_PERPEER", "GPUBRIDGE_CHUNK_BYTES", "GPUBRIDGE_STAGING_SLOTS",
      "GPUBRIDGE_RING_MIN_BYTES", "GPUBRIDGE_JOB_SECRET", "GPUBRIDGE_UNIQUE_ID", "GPUBRIDGE_SIM_HOST",
      "GPUBRIDGE_SPLIT_TEST", "GPUBRIDGE_DEVICE", "GPUBRIDGE_CUDART_LIBRARY", "GPUBRIDGE_CUDA_LIBRARY",
      "GPUBRIDGE_NCCL_LIBRARY", "GPUBRIDGE_STREAM_FLAGS", "GPUBRIDGE_DEVICE_BACKEND", "GPUBRIDGE_HIP_LIBRARY",
      "GPUBRIDGE_RCCL_LIBRARY", "GPUBRIDGE_CHECK_CALLS", "GPUBRIDGE_RAILS", "GPUBRIDGE_THRESHOLDS",
      "GPUBRIDGE_SHM", "GPUBRIDGE_LIBRARY", "GPUBRIDGE_VENDORS", "GPUBRIDGE_TRACE_BUFFER",
      "GPUBRIDGE_TRACE_DIR", "GPUBRIDGE_TRACE_SIGNAL", "GPUBRIDGE_TRACE_DONE", "GPUBRIDGE_HIPRTC_LIBRARY",
      "GPUBRIDGE_BRIDGE_SLOTS", "GPUBRIDGE_EXCHANGE", "GPUBRIDGE_BRIDGE_COMPRESSION",
      "GPUBRIDGE_LAUNCHER", "GPUBRIDGE_UCX_LIBRARY"};
  for (int i = 0; i < GB_PARAM_COUNT; i++) {
    const gbParamDesc_t* d = gbParamDesc((gbParamId_t)i);
    CHECK(d && strcmp(d->name, names[i]) == 0, "descriptor %d is %s", i, d ? d->name : "NULL");
    CHECK(d && d->doc && d->doc[0], "descriptor %d has a doc", i);
  }
  CHECK(gbParamDesc(GB_PARAM_COUNT) == NULL, "no descriptor past the end");
  /* The policy names follow gbPolicy_t. */
  const gbParamDesc_t* p = gbParamDesc(GB_PARAM_POLICY);
  CHECK(strcmp(p->choices[gbPolicyAuto], "auto") == 0 && strcmp(p->choices[gbPolicyHierarchical], "hierarchical") == 0 &&
            strcmp(p->choices[gbPolicyNative], "native") == 0 && strcmp(p->choices[gbPolicyFlat], "flat") == 0 &&
            strcmp(p->choices[gbPolicySplitRail], "split-rail") == 0 && strcmp(p->choices[gbPolicyTuned], "tuned") == 0 &&
            p->choices[gbNumPolicies] == NULL,
        "policy choices in gbPolicy_t order");
  const gbParamDesc_t* t = gbParamDesc(GB_PARAM_TRANSPORT);
  CHECK(strcmp(t->choices[gbTransportTcp], "tcp") == 0 && strcmp(t->choices[gbTransportUcx], "ucx") == 0 &&
            t->choices[gbNumTransports] == NULL && t->mustAgree,
        "transport choices in gbTransport_t order, and every rank must agree");
  CHECK(p->mustAgree && gbParamDesc(GB_PARAM_TIMEOUT)->mustAgree && !gbParamDesc(GB_PARAM_DEBUG)->mustAgree,
        "mustAgree flags");
}

static void testValid(void) {
  clearEnv();
  setenv("GPUBRIDGE_DEBUG", "info", 1);
  setenv("GPUBRIDGE_DEBUG_SUBSYS", "^net,COLL", 1);
  setenv("GPUBRIDGE_VENDOR", "amd", 1);
  setenv("GPUBRIDGE_POLICY", "flat", 1);
  setenv("GPUBRIDGE_TIMEOUT", "86400", 1);
  setenv("GPUBRIDGE_NSOCKS_PERPEER", "16", 1);
  setenv("GPUBRIDGE_CHUNK_BYTES", "256k", 1);
  setenv("GPUBRIDGE_STAGING_SLOTS", "2", 1);
  setenv("GPUBRIDGE_RING_MIN_BYTES", "0", 1);
  setenv("GPUBRIDGE_SIM_HOST", "hostB", 1);
  gbParamReset();
  CHECK(gbParamInt(GB_PARAM_DEBUG) == GB_LOG_INFO, "DEBUG=info -> %lld", (long long)gbParamInt(GB_PARAM_DEBUG));
  CHECK(strcmp(gbParamString(GB_PARAM_DEBUG_SUBSYS), "^net,COLL") == 0, "DEBUG_SUBSYS text");
  CHECK(strcmp(gbParamString(GB_PARAM_VENDOR), "amd") == 0, "VENDOR text");
  CHECK(gbParamInt(GB_PARAM_POLICY) == gbPolicyFlat, "POLICY=flat");
  CHECK(gbParamInt(GB_PARAM_TIMEOUT) == 86400, "TIMEOUT=86400");
  CHECK(gbParamInt(GB_PARAM_NSOCKS_PERPEER) == 16, "NSOCKS=16");
  CHECK(gbParamInt(GB_PARAM_CHUNK_BYTES) == 256 * 1024, "CHUNK=256k");
  CHECK(gbParamInt(GB_PARAM_STAGING_SLOTS) == 2, "SLOTS=2");
  CHECK(gbParamInt(GB_PARAM_RING_MIN_BYTES) == 0, "RING_MIN=0");
  CHECK(strcmp(gbParamString(GB_PARAM_SIM_HOST), "hostB") == 0, "SIM_HOST");
  CHECK(gbParamIsSet(GB_PARAM_POLICY) && !gbParamIsSet(GB_PARAM_TRANSPORT), "IsSet");
  CHECK(strcmp(gbParamErrors(), "") == 0, "no errors: [%s]", gbParamErrors());
}

static void testSizes(void) {
  static const struct { const char* text; long long want; } ok[] = {
      {"4096", 4096},          {"4K", 4096},           {"4k", 4096},       {"4KB", 4096},
      {"4KiB", 4096},          {"3m", 3 * 1048576LL},  {"2MiB", 2097152},  {"1G", 1073741824LL},
      {"1gb", 1073741824LL},   {"65536B", 65536},      {"1048576", 1048576}};
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    int64_t v = -1;
    char err[256] = "";
    int rc = gbParamParse(GB_PARAM_CHUNK_BYTES, ok[i].text, &v, err, sizeof(err));
    CHECK(rc == 0 && v == ok[i].want, "size %s -> rc %d value %lld (%s)", ok[i].text, rc, (long long)v, err);
  }
  int64_t v = 0;
  char err[256];
  CHECK(gbParamParse(GB_PARAM_RING_MIN_BYTES, "1T", &v, err, sizeof(err)) == 0 && v == 1099511627776LL, "1T");
  CHECK(gbParamParse(GB_PARAM_RING_MIN_BYTES, "2T", &v, err, sizeof(err)) != 0, "2T is past the max");
  static const char* bad[] = {"", "K", "12X", "1.5M", "-4K", " 4K", "4K ", "4 K", "4KK", "4Bi", "99999999999999999999"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    CHECK(gbParamParse(GB_PARAM_CHUNK_BYTES, bad[i], &v, err, sizeof(err)) != 0, "size '%s' must be refused", bad[i]);
}

/* Each kind of invalid value, the text the user sees. */
static void testInvalid(void) {
  static const struct { gbParamId_t id; const char* name; const char* text; const char* err; } cases[] = {
      {GB_PARAM_POLICY, "GPUBRIDGE_POLICY", "bogus",
       "GPUBRIDGE_POLICY=bogus is not one of auto, hierarchical, native, flat, split-rail, tuned"},
      {GB_PARAM_DEBUG, "GPUBRIDGE_DEBUG", "LOUD", "GPUBRIDGE_DEBUG=LOUD is not one of NONE, WARN, INFO, TRACE"},
      {GB_PARAM_TIMEOUT, "GPUBRIDGE_TIMEOUT", "abc",
       "GPUBRIDGE_TIMEOUT=abc is not an integer in [1, 86400] (seconds)"},
      {GB_PARAM_TIMEOUT, "GPUBRIDGE_TIMEOUT", "0", "GPUBRIDGE_TIMEOUT=0 is not an integer in [1, 86400] (seconds)"},
      {GB_PARAM_TIMEOUT, "GPUBRIDGE_TIMEOUT", "12s",
       "GPUBRIDGE_TIMEOUT=12s is not an integer in [1, 86400] (seconds)"},
      {GB_PARAM_NSOCKS_PERPEER, "GPUBRIDGE_NSOCKS_PERPEER", "17",
       "GPUBRIDGE_NSOCKS_PERPEER=17 is not an integer in [1, 16]"},
      {GB_PARAM_CHUNK_BYTES, "GPUBRIDGE_CHUNK_BYTES", "1K",
       "GPUBRIDGE_CHUNK_BYTES=1K is not a size in [4K, 1G] (bytes, with an optional K, M, G or T suffix)"},
      {GB_PARAM_CHUNK_BYTES, "GPUBRIDGE_CHUNK_BYTES", "12X",
       "GPUBRIDGE_CHUNK_BYTES=12X is not a size in [4K, 1G] (bytes, with an optional K, M, G or T suffix)"},
      {GB_PARAM_VENDOR, "GPUBRIDGE_VENDOR", "NVIDIA",
       "GPUBRIDGE_VENDOR=NVIDIA is not 1 to 15 characters of a-z, 0-9, _ and - (e.g. nvidia, amd)"},
      {GB_PARAM_DEBUG_SUBSYS, "GPUBRIDGE_DEBUG_SUBSYS", "NET,FOO",
       "GPUBRIDGE_DEBUG_SUBSYS=NET,FOO names an unknown subsystem 'FOO'; use a comma list of INIT, BOOT, "
       "NET, COLL, PROXY, DEVICE, ENV, ALL, optionally after a ^"},
      {GB_PARAM_UNIQUE_ID, "GPUBRIDGE_UNIQUE_ID", "abcd",
       "GPUBRIDGE_UNIQUE_ID holds 4 characters, not 256 hex digits (pass the id as gbGetUniqueId made it)"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    clearEnv();
    setenv(cases[i].name, cases[i].text, 1);
    gbParamReset();
    CHECK(strcmp(gbParamErrors(), cases[i].err) == 0, "%s=%s:\n  got  [%s]\n  want [%s]", cases[i].name,
          cases[i].text, gbParamErrors(), cases[i].err);
    CHECK(gbParamIsSet(cases[i].id), "%s is set", cases[i].name);
    /* An invalid value reads as the default. */
    const gbParamDesc_t* d = gbParamDesc(cases[i].id);
    CHECK(strcmp(gbParamString(cases[i].id), d->defaultText) == 0, "%s reads as its default text", cases[i].name);
    int64_t def = -1;
    char err[512];
    CHECK(gbParamParse(cases[i].id, d->defaultText, &def, err, sizeof(err)) == 0, "default of %s parses", d->name);
    CHECK(gbParamInt(cases[i].id) == def, "%s reads as its default value", cases[i].name);
  }
  CHECK(gbParamInt(GB_PARAM_TIMEOUT) == 300, "invalid TIMEOUT reads as 300");

  /* A unique id of the right length with a non-hex character; the text never shows the id. */
  char id[257];
  memset(id, 'a', 256);
  id[256] = '\0';
  id[10] = 'g';
  clearEnv();
  setenv("GPUBRIDGE_UNIQUE_ID", id, 1);
  gbParamReset();
  CHECK(strstr(gbParamErrors(), "position 10") != NULL && strstr(gbParamErrors(), "aaaa") == NULL,
        "unique id non-hex: [%s]", gbParamErrors());
  id[10] = 'F';
  setenv("GPUBRIDGE_UNIQUE_ID", id, 1);
  gbParamReset();
  CHECK(strcmp(gbParamErrors(), "") == 0 && strcmp(gbParamString(GB_PARAM_UNIQUE_ID), id) == 0, "valid unique id");

  /* Several errors: table order (not environment order), one per line, no trailing newline. */
  clearEnv();
  setenv("GPUBRIDGE_TIMEOUT", "abc", 1);
  setenv("GPUBRIDGE_POLICY", "bogus", 1);
  gbParamReset();
  const char* want =
      "GPUBRIDGE_POLICY=bogus is not one of auto, hierarchical, native, flat, split-rail, tuned\n"
      "GPUBRIDGE_TIMEOUT=abc is not an integer in [1, 86400] (seconds)";
  CHECK(strcmp(gbParamErrors(), want) == 0, "two errors:\n  got  [%s]\n  want [%s]", gbParamErrors(), want);
}

/* Unknown GPUBRIDGE_* names are warned about, through the log; invalid values are not (the verdict says them). */
static int sawUnknown, sawOther, sawSuggestion, sawInvalid;
static void hook(int level, const char* line) {
  if (level == GB_LOG_WARN && strstr(line, "unknown variable GPUBRIDGE_TIMOUT ignored (did you mean GPUBRIDGE_TIMEOUT?)"))
    sawSuggestion++;
  if (strstr(line, "GPUBRIDGE_POLICY=")) sawInvalid++;
  if (level == GB_LOG_WARN && strstr(line, "unknown variable GPUBRIDGE_NO_SUCH_THING ignored; gpubridge-info -c lists the known ones"))
    sawUnknown++;
  if (strstr(line, "GPUBRIDGE_TIMEOUT ignored")) sawOther++;
}

static void testUnknown(void) {
  clearEnv();
  setenv("GPUBRIDGE_NO_SUCH_THING", "1", 1);
  setenv("GPUBRIDGE_TIMEOUT", "30", 1);
  gbLogSetHook(hook);
  gbParamReset();
  gbParamInit();
  CHECK(sawUnknown == 1, "one warning for GPUBRIDGE_NO_SUCH_THING, saw %d", sawUnknown);
  CHECK(sawOther == 0, "no warning for a known name");
  CHECK(gbParamInt(GB_PARAM_TIMEOUT) == 30, "known names still read");
  /* A close misspelling gets the closest name; an invalid value goes to the errors only. */
  clearEnv();
  setenv("GPUBRIDGE_TIMOUT", "30", 1);
  setenv("GPUBRIDGE_POLICY", "hierarchcal", 1);
  gbParamReset();
  gbParamInit();
  CHECK(sawSuggestion == 1, "GPUBRIDGE_TIMOUT: one warning suggesting GPUBRIDGE_TIMEOUT, saw %d", sawSuggestion);
  CHECK(sawInvalid == 0, "an invalid value is not warned about at the read (the start-up verdict says it)");
  CHECK(strstr(gbParamErrors(), "GPUBRIDGE_POLICY=hierarchcal is not one of") &&
            strstr(gbParamErrors(), "(did you mean hierarchical?)"),
        "an enum's misspelt value suggests the closest: [%s]", gbParamErrors());
  clearEnv();
  setenv("GPUBRIDGE_VENDOR", "nvidia:2,amd:2", 1);
  gbParamReset();
  CHECK(strstr(gbParamErrors(), "did you mean GPUBRIDGE_VENDORS?") != NULL,
        "GPUBRIDGE_VENDOR with a list by rank suggests GPUBRIDGE_VENDORS: [%s]", gbParamErrors());
  setenv("GPUBRIDGE_VENDOR", "nv idia", 1);
  gbParamReset();
  CHECK(strstr(gbParamErrors(), "GPUBRIDGE_VENDORS") == NULL, "no list, no GPUBRIDGE_VENDORS hint: [%s]",
        gbParamErrors());
  gbLogSetHook(NULL);
}

/* The distance behind "did you mean": one edit each, a swap is one, far words are not close. */
static void testSuggest(void) {
  CHECK(gbSuggestDistance("VENDR", 5, "VENDOR") == 1, "a missing letter is one edit");
  CHECK(gbSuggestDistance("VENODR", 6, "VENDOR") == 1, "a swap of neighbours is one edit");
  CHECK(gbSuggestDistance("vendor", 6, "VENDOR") == 0, "case does not count");
  CHECK(gbSuggestDistance("POLICY", 6, "TIMEOUT") > 2, "unrelated words are far apart");
  CHECK(gbSuggestClose(6, 1) && gbSuggestClose(7, 2) && !gbSuggestClose(6, 2) && !gbSuggestClose(3, 1),
        "close: at most 2 edits and under a third of the length");
}

static void testTable(void) {
  for (int markdown = 0; markdown < 2; markdown++) {
    FILE* f = tmpfile();
    CHECK(f != NULL, "tmpfile");
    if (!f) return;
    gbParamPrintTable(f, markdown);
    long n = ftell(f);
    rewind(f);
    char* text = calloc(1, (size_t)n + 1);
    CHECK(fread(text, 1, (size_t)n, f) == (size_t)n, "read back");
    fclose(f);
    for (int i = 0; i < GB_PARAM_COUNT; i++)
      CHECK(strstr(text, gbParamDesc((gbParamId_t)i)->name) && strstr(text, gbParamDesc((gbParamId_t)i)->doc),
            "table (markdown=%d) lists %s with its doc", markdown, gbParamDesc((gbParamId_t)i)->name);
    if (markdown) {
      CHECK(strncmp(text, "| ", 2) == 0 && strstr(text, "|---"), "markdown header");
      int rows = 0;
      for (char* p = text; *p; p++) rows += (*p == '\n');
      CHECK(rows == GB_PARAM_COUNT + 2, "markdown rows: %d", rows);
    }
    free(text);
  }
  /* Secrets are never printed. */
  clearEnv();
  setenv("GPUBRIDGE_JOB_SECRET", "hunter2-secret", 1);
  gbParamReset();
  char buf[16384] = "";
  FILE* f = fmemopen(buf, sizeof(buf) - 1, "w");
  gbParamPrintTable(f, 0);
  fclose(f);
  CHECK(strstr(buf, "hunter2-secret") == NULL, "the job secret is not printed");
}

int main(void) {
  testDefaults();
  testValid();
  testSizes();
  testInvalid();
  testUnknown();
  testSuggest();
  testTable();
  clearEnv();
  if (failures) {
    fprintf(stderr, "test_base_param: %d failures\n", failures);
    return 1;
  }
  printf("test_base_param: ok\n");
  return 0;
}
