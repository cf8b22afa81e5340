/* Exported: the GPUBRIDGE_* parameter table with this process's values, read
 * through base/param.h (gpubridge-info -c prints it; docs/ENV.md is made from it). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/param.h"
#include "base/result.h"

#define TYPE_LEN 512
#define ERROR_LEN 512

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char typeText[GB_PARAM_COUNT][TYPE_LEN];
static char errorText[GB_PARAM_COUNT][ERROR_LEN];

/* Values never shown: they hold the job secret. */
static int isSecret(gbParamId_t id) { return id == GB_PARAM_JOB_SECRET || id == GB_PARAM_UNIQUE_ID; }

/* The line of the error text that names the variable: "NAME=...", "NAME ...", "NAME: ...". */
static void findError(const char* errors, const char* name, char* out, size_t len) {
  size_t n = strlen(name);
  for (const char* line = errors; *line;) {
    size_t end = strcspn(line, "\n");
    if (end > n && strncmp(line, name, n) == 0 && strchr("= :", line[n])) {
      snprintf(out, len, "%.*s", (int)end, line);
      return;
    }
    line += end + (line[end] == '\n');
  }
}

/* The texts that do not change once the environment is read. */
static void describeAll(void) {
  gbParamInit();
  gbLogInit(); /* the read's warnings (unknown names) are log lines */
  const char* errors = gbParamErrors();
  for (int i = 0; i < GB_PARAM_COUNT; i++) {
    const gbParamDesc_t* d = gbParamDesc((gbParamId_t)i);
    gbParamDescribeType(d, typeText[i], TYPE_LEN);
    findError(errors, d->name, errorText[i], ERROR_LEN);
  }
}

gbResult_t gbGetParamErrors(const char** errors) {
  if (!errors) return gbErrorSet(gbInvalidArgument, "gbGetParamErrors: errors is NULL");
  gbParamInit();
  gbLogInit();
  *errors = gbParamErrors();
  return gbSuccess;
}

gbResult_t gbGetParamCount(int* count) {
  if (!count) return gbErrorSet(gbInvalidArgument, "gbGetParamCount: count is NULL");
  *count = GB_PARAM_COUNT;
  return gbSuccess;
}

gbResult_t gbGetParamInfo(int index, gbParamInfo_t* info) {
  if (!info) return gbErrorSet(gbInvalidArgument, "gbGetParamInfo: info is NULL");
  if (index < 0 || index >= GB_PARAM_COUNT)
    return gbErrorSet(gbInvalidArgument, "gbGetParamInfo: index %d is not in [0, %d): gbGetParamCount gives the count",
                      index, GB_PARAM_COUNT);
  pthread_once(&once, describeAll);
  gbParamId_t id = (gbParamId_t)index;
  const gbParamDesc_t* d = gbParamDesc(id);
  info->name = d->name;
  info->type = typeText[index];
  info->defaultValue = d->defaultText;
  info->isSet = gbParamIsSet(id);
  info->error = errorText[index][0] ? errorText[index] : NULL;
  info->value = info->isSet && isSecret(id) ? "(set, not shown)" : gbParamString(id);
  info->mustAgree = d->mustAgree;
  info->doc = d->doc;
  return gbSuccess;
}
