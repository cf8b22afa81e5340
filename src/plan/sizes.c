/* The staging size rules (sizes.h). */
#include "plan/sizes.h"

size_t gbPlanChunkBytes(size_t configured, int isSet, int realGpu) {
  return realGpu && !isSet ? GB_PLAN_GPU_CHUNK_BYTES : configured;
}

size_t gbPlanChunkForMessage(size_t configured, int bySize, size_t messageBytes) {
  if (!bySize || messageBytes >= GB_PLAN_GPU_LARGE_BYTES) return configured;
  return configured < GB_PLAN_GPU_MID_CHUNK_BYTES ? configured : GB_PLAN_GPU_MID_CHUNK_BYTES;
}

int gbPlanStagingSlots(int configured, int isSet, int realGpu) {
  return realGpu && !isSet ? GB_PLAN_GPU_STAGING_SLOTS : configured;
}

int gbPlanSharedSlots(int stagingSlots) { return stagingSlots + 2; }
