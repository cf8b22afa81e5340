/* The staging size rules (sizes.h). */
#include "plan/sizes.h"

size_t gbPlanChunkBytes(size_t configured, int isSet, int realGpu) {
  return realGpu && !isSet ? GB_PLAN_GPU_CHUNK_BYTES : configured;
}

int gbPlanStagingSlots(int configured, int isSet, int realGpu) {
  return realGpu && !isSet ? GB_PLAN_GPU_STAGING_SLOTS : configured;
}

int gbPlanSharedSlots(int stagingSlots) { return stagingSlots + 2; }
