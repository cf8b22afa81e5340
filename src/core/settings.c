#include "core/settings.h"

#include <stdio.h>
#include <string.h>

#include "base/param.h"
#include "base/result.h"
#include "plan/sizes.h"
#include "plan/thresholds.h"

static void note(char* buf, size_t len, const char* text) {
  size_t used = strlen(buf);
  if (used + 3 >= len) return;
  snprintf(buf + used, len - used, "%s%s", used ? "; " : "", text);
}

/* A field exists in the caller's struct when its size covers it. */
#define HAS(c, field) ((c) && (c)->size >= offsetof(gbConfig_t, field) + sizeof((c)->field) && \
                       (c)->field != GB_CONFIG_UNDEF_INT)

/* NCCL's rule: the config is an argument of the call, so a malformed struct
 * or a field out of range is gbInvalidArgument, found here on the calling
 * rank before anything is sent (as a NULL pointer or a rank out of range
 * would be); a GPUBRIDGE_* variable is the environment, judged in the
 * start-up verdict that every rank hears (gbInvalidUsage). */
gbResult_t gbCommConfigCheck(const gbConfig_t* c) {
  static const char* fix = "start from GB_CONFIG_INITIALIZER and set only the fields you need";
  if (!c) return gbSuccess;
  if (c->magic != GB_CONFIG_MAGIC)
    return gbErrorSet(gbInvalidArgument, "config: magic 0x%x is not GB_CONFIG_MAGIC; %s", c->magic, fix);
  if (c->size < offsetof(gbConfig_t, blocking) + sizeof(int) || c->size > 4096)
    return gbErrorSet(gbInvalidArgument, "config: size %zu is not sizeof(gbConfig_t) (%zu); %s", c->size,
                      sizeof(gbConfig_t), fix);
  if (HAS(c, blocking) && c->blocking != 0 && c->blocking != 1)
    return gbErrorSet(gbInvalidArgument, "config.blocking=%d is not 0 or 1", c->blocking);
  if (HAS(c, policy) && (c->policy < 0 || c->policy >= gbNumPolicies))
    return gbErrorSet(gbInvalidArgument, "config.policy=%d is not a gbPolicy_t (0..%d)", c->policy,
                      gbNumPolicies - 1);
  if (HAS(c, transport) && (c->transport < 0 || c->transport >= gbNumTransports))
    return gbErrorSet(gbInvalidArgument, "config.transport=%d is not a gbTransport_t (0..%d)", c->transport,
                      gbNumTransports - 1);
  if (HAS(c, timeoutSeconds) && c->timeoutSeconds < 1)
    return gbErrorSet(gbInvalidArgument, "config.timeoutSeconds=%d is not at least 1", c->timeoutSeconds);
  if (HAS(c, bridgeCompression) && (c->bridgeCompression < 0 || c->bridgeCompression >= gbNumCompressions))
    return gbErrorSet(gbInvalidArgument, "config.bridgeCompression=%d is not a gbCompression_t (gbCompressionOff, "
                      "gbCompressionBf16 or gbCompressionFp8)", c->bridgeCompression);
  if (HAS(c, chunkBytes) && c->chunkBytes < 4096)
    return gbErrorSet(gbInvalidArgument, "config.chunkBytes=%d is below 4096", c->chunkBytes);
  return gbSuccess;
}

/* Policy tuned needs a thresholds file every rank reads alike. */
static void loadThresholds(gbSettings_t* s, gbThresholds_t* t, char* problems, size_t len) {
  memset(t, 0, sizeof(*t));
  if (s->policy != gbPolicyTuned) return;
  const char* path = gbParamString(GB_PARAM_THRESHOLDS);
  if (!*path) {
    note(problems, len, "policy tuned needs GPUBRIDGE_THRESHOLDS (a file gpubridge-perf --tune writes)");
    return;
  }
  uint64_t hash = 0;
  if (gbPlanThresholdsLoad(path, t, &hash) != gbSuccess) note(problems, len, gbErrorLast());
  s->thresholdsHash = hash;
}

void gbCommSettingsResolve(const gbConfig_t* c, int realGpu, gbSettings_t* s, int* blocking,
                           gbThresholds_t* thresholds, char* problems, size_t len) {
  memset(s, 0, sizeof(*s));
  problems[0] = '\0';
  gbParamInit();
  const char* envErrors = gbParamErrors();
  if (*envErrors) {
    /* One line per invalid variable; keep the verdict on one line. */
    char joined[512];
    snprintf(joined, sizeof(joined), "%s", envErrors);
    for (char* p = joined; *p; p++)
      if (*p == '\n') *p = ';';
    note(problems, len, joined);
  }
  s->policy = (int32_t)gbParamInt(GB_PARAM_POLICY);
  s->transport = (int32_t)gbParamInt(GB_PARAM_TRANSPORT);
  s->timeoutSec = (int32_t)gbParamInt(GB_PARAM_TIMEOUT);
  s->nsocks = (int32_t)gbParamInt(GB_PARAM_NSOCKS_PERPEER);
  /* Every rank of a job is real or every rank simulated, so all resolve
   * the same. */
  s->stagingSlots = (int32_t)gbPlanStagingSlots((int)gbParamInt(GB_PARAM_STAGING_SLOTS),
                                                gbParamIsSet(GB_PARAM_STAGING_SLOTS), realGpu);
  s->chunkBytes = (int64_t)gbPlanChunkBytes((size_t)gbParamInt(GB_PARAM_CHUNK_BYTES),
                                            gbParamIsSet(GB_PARAM_CHUNK_BYTES), realGpu);
  s->chunkBySize = realGpu && !gbParamIsSet(GB_PARAM_CHUNK_BYTES);
  s->ringMinBytes = gbParamInt(GB_PARAM_RING_MIN_BYTES);
  s->splitTest = (int32_t)gbParamInt(GB_PARAM_SPLIT_TEST);
  s->checkCalls = (int32_t)gbParamInt(GB_PARAM_CHECK_CALLS);
  s->rails = (int32_t)gbParamInt(GB_PARAM_RAILS);
  s->bridgeSlots = (int32_t)gbParamInt(GB_PARAM_BRIDGE_SLOTS);
  s->exchange = (int32_t)gbParamInt(GB_PARAM_EXCHANGE);
  s->compression = (int32_t)gbParamInt(GB_PARAM_BRIDGE_COMPRESSION);
  *blocking = 1;

  /* gbCommConfigCheck passed the config (every init and split checks it
   * first): its fields are in range. */
  if (HAS(c, blocking)) *blocking = c->blocking;
  if (HAS(c, policy)) s->policy = c->policy;
  if (HAS(c, transport)) s->transport = c->transport;
  if (HAS(c, timeoutSeconds)) s->timeoutSec = c->timeoutSeconds;
  if (HAS(c, chunkBytes)) s->chunkBytes = c->chunkBytes, s->chunkBySize = 0;
  if (HAS(c, bridgeCompression)) s->compression = c->bridgeCompression;
  loadThresholds(s, thresholds, problems, len);
}
