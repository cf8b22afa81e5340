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

/* With the GPU default (bySize: a real GPU, no chunk set), a message below
 * GB_PLAN_GPU_LARGE_BYTES goes in chunks of GB_PLAN_GPU_MID_CHUNK_BYTES, so
 * a 16 MiB message pipelines two chunks instead of running one; larger ones
 * in the configured chunk (the slots' size). One H200, split-test, all-reduce
 * algbw by chunk (docs/PERFORMANCE.md, 2026-12-04): 16 MiB 15.6 GB/s in one
 * chunk, 17.7 in two of 8 MiB, 12.1 in 1 MiB ones (MPS; time-sliced 13.7,
 * 15.8, 5.7); 4 MiB best whole; 64 MiB alike at 8 and 16 MiB. Once the copy
 * stream waited for the caller's once a call (one H100, MPS, 2026-12-06),
 * 4 MiB chunks against 8: 16 MiB 17.5-17.7 against 17.5-17.6 GB/s, 25 MiB
 * (DDP's bucket) 18.3 against 18.8. */
#define GB_PLAN_GPU_MID_CHUNK_BYTES ((size_t)8 << 20)
#define GB_PLAN_GPU_LARGE_BYTES ((size_t)64 << 20)
size_t gbPlanChunkForMessage(size_t configured, int bySize, size_t messageBytes);

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
/* The exchange (stage/exchange.c): a small all-reduce a stream drives
 * alone over shared slots. Each member keeps two buffers of
 * GB_PLAN_EXCHANGE_BYTES, and an all-reduce of at most that goes there
 * (chunk by chunk, as planned). Measured on one H200 under MPS (two
 * split-test ranks, docs/PERFORMANCE.md, 2026-12-04): the exchange against
 * the slots' copy path, 8 B 18 against 49 us, 256 KiB 52 against 111,
 * 1 MiB 111-120 against 133-204, 2 MiB 212 against 196-330, 4 MiB 410-445
 * against 326-331: it wins up to 1 MiB. Its blocks (each a GPU thread block
 * with flags of its own; stage/slots_impl.h keeps GB_PLAN_EXCHANGE_BLOCKS):
 * 8 KiB each up to 64 KiB, 16 KiB up to 256 KiB, then 64 KiB, at most 32.
 * Measured with 16-byte loads (2026-12-05, H200, MPS, the same run): at 1 MiB
 * 16 blocks of 64 KiB 104.6 us, 8 of 128 KiB 117, 32 of 32 KiB 120-146, 4 of
 * 256 KiB 166 (the copy path 157); at 512 KiB 8 of 64 KiB 68, 16 of 32 KiB
 * 79, 32 of 16 KiB 97; at 256 KiB 16 of 16 KiB 51, 4 of 64 KiB 56; at 128
 * KiB 8 of 16 KiB 37, 2 of 64 KiB 50. Fewer, larger blocks win from 512 KiB:
 * each block's stores to host memory are long runs. */
#define GB_PLAN_EXCHANGE_BYTES ((size_t)1 << 20)
#define GB_PLAN_EXCHANGE_BLOCKS 32
static inline int gbPlanTakesExchange(size_t bytes, size_t exchangeBytes) { return bytes > 0 && bytes <= exchangeBytes; }
static inline int gbPlanExchangeBlocks(size_t bytes) {
  size_t b = bytes <= ((size_t)64 << 10)    ? (bytes + (8 << 10) - 1) / (8 << 10)
             : bytes <= ((size_t)256 << 10) ? bytes / (16 << 10)
                                            : bytes / (64 << 10);
  return b < 1 ? 1 : b > GB_PLAN_EXCHANGE_BLOCKS ? GB_PLAN_EXCHANGE_BLOCKS : (int)b;
}

/* A compressed fold takes every member's part at once: host groups of at
 * most this many members (device.h's GB_REDUCE_MAX_SRCS) are compressed. */
#define GB_PLAN_FOLD_MAX_PARTS 8

#define GB_PLAN_SIDE_STREAM_BYTES ((size_t)256 << 10)
static inline int gbPlanOnSideStreams(size_t partBytes) { return partBytes >= GB_PLAN_SIDE_STREAM_BYTES; }

#endif
