/* One rank of tests/mp/test_memory.py: the staging memory a communicator
 * holds (gbCommGetMemory) after init, after a small all-reduce and after a
 * large one. Each line: "memory <phase> pinned P segment S device D"; then
 * what gbGetMemoryEstimate says for this job's size, simulated:
 * "estimate pinned P segment S device D".
 *
 * Usage: rank_memory */
#include <stdio.h>
#include <stdlib.h>

#include "rank_die.h"

#define SMALL (16u << 10) /* elements: 64 KiB */
#define LARGE (2u << 20)  /* elements: 8 MiB */

static void show(gbComm_t comm, const char* phase) {
  gbCommMemory_t m;
  CHECK_GB(gbCommGetMemory(comm, &m));
  if (m.size != sizeof(m) || m.version != 1) DIE("gbCommMemory_t size %u version %u", m.size, m.version);
  printf("memory %s pinned %llu segment %llu device %llu\n", phase, (unsigned long long)m.pinnedBytes,
         (unsigned long long)m.segmentBytes, (unsigned long long)m.deviceBytes);
  fflush(stdout);
}

static void allReduce(gbComm_t comm, void* stream, void* buf, size_t count) {
  CHECK_GB(gbAllReduce(buf, buf, count, gbFloat32, gbSum, comm, stream));
  CHECK_GB(gbStreamSynchronize(stream));
}

int main(void) {
  gbComm_t comm;
  CHECK_GB(gbCommInitFromEnv(&comm, NULL));
  CHECK_GB(gbCommUserRank(comm, &gRank));
  void* stream;
  CHECK_GB(gbStreamCreate(&stream));
  void* buf;
  CHECK_GB(gbMemAlloc(&buf, LARGE * sizeof(float)));
  int n;
  CHECK_GB(gbCommCount(comm, &n));
  gbCommMemory_t e;
  CHECK_GB(gbGetMemoryEstimate(n, 0, &e));
  printf("estimate pinned %llu segment %llu device %llu\n", (unsigned long long)e.pinnedBytes,
         (unsigned long long)e.segmentBytes, (unsigned long long)e.deviceBytes);
  show(comm, "init");
  allReduce(comm, stream, buf, SMALL);
  show(comm, "small");
  allReduce(comm, stream, buf, LARGE);
  show(comm, "large");
  gbCommMemory_t m;
  if (gbCommGetMemory(comm, NULL) != gbInvalidArgument) DIE("gbCommGetMemory(comm, NULL) is not an argument error");
  CHECK_GB(gbCommDestroy(comm));
  if (gbCommGetMemory(comm, &m) == gbSuccess) DIE("gbCommGetMemory on a destroyed communicator succeeded");
  CHECK_GB(gbMemFree(buf));
  CHECK_GB(gbStreamDestroy(stream));
  printf("done\n");
  return 0;
}
