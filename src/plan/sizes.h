/* Every size rule of the bridge's staging, in one place: the chunk and
 * depth a real GPU takes by default, how many slots a shared or remote
 * group keeps, what the send/recv channels may take, and from which part
 * size the copies leave the caller's stream. Stages and core/ ask here;
 * none of them holds a size of its own. */
#ifndef GB_PLAN_SIZES_H
#define GB_PLAN_SIZES_H

#include <stddef.h>

/* GPUBRIDGE_CHUNK_BYTES and GPUBRIDGE_STAGING_SLOTS unset on a real GPU:
 * the bridge's chunk and depth measured best there (docs/PERFORMANCE.md,
 * "The GPU bridge"). Elsewhere the parameter table's defaults hold. */
#define GB_PLAN_GPU_CHUNK_BYTES ((size_t)16 << 20)
#define GB_PLAN_GPU_STAGING_SLOTS 2

/* A chunk's configured size and depth on this rank: the parameter's or
 * config's value when set, else the GPU defaults on a real GPU. */
size_t gbPlanChunkBytes(size_t configured, int isSet, int realGpu);
int gbPlanStagingSlots(int configured, int isSet, int realGpu);

/* Slots of a shared or remote group: two more than the pipeline's depth,
 * so the slot a chunk takes was last read two chunks before the one just
 * reduced, and taking it does not wait for the members' last reads to
 * travel through the proxies. The send/recv channels keep as many. */
int gbPlanSharedSlots(int stagingSlots);

/* The send/recv channels of a world take at most this much host memory
 * together (a slot of each at most a chunk): 2 members with four slots a
 * channel get 16 MiB slots, 8 get 512 KiB. */
#define GB_PLAN_CHANNEL_BUDGET_BYTES ((size_t)128 << 20)

/* A part of a staged chunk at least this large is copied out on a stage's
 * own copy stream (beside the caller's, which reduces), and on a GPU
 * fetched into device memory before a kernel reduces it; a smaller one is
 * copied out on the caller's stream and read in place from mapped host
 * memory: under it the hand-over between streams (a flag write and wait,
 * ~8 us each on a GPU) or a copy costs more than the overlap gains. */
#define GB_PLAN_SIDE_STREAM_BYTES ((size_t)256 << 10)
static inline int gbPlanOnSideStreams(size_t partBytes) { return partBytes >= GB_PLAN_SIDE_STREAM_BYTES; }

#endif
