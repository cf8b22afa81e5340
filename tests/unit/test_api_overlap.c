/* Every collective's buffers on a communicator of one rank (host device):
 * sendbuff where this rank's input lies in recvbuff is in place and runs;
 * separate buffers, also back to back, run; buffers that overlap otherwise
 * (here by one element) are refused with gbInvalidArgument and a text that
 * says what in place is, before anything is sent: the communicator runs
 * the next call. NCCL 2.28 refuses such an all-to-all and leaves the other
 * collectives undefined; gpubridge refuses them all. tests/mp/rank_matrix.c
 * checks the same on ranks past 0, where in place is at an offset. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpubridge/gpubridge.h"
#include "unit/one_rank.h"

#define COUNT 4
#define TOTAL 16

enum { ALLREDUCE, REDUCE, BROADCAST, ALLGATHER, REDUCESCATTER, ALLTOALL, NUM_COLLS };
static const char* names[NUM_COLLS] = {"all-reduce", "reduce", "broadcast", "all-gather", "reduce-scatter",
                                       "all-to-all"};

static gbResult_t run(int coll, const float* send, float* recv, gbComm_t comm, void* stream) {
  switch (coll) {
    case ALLREDUCE: return gbAllReduce(send, recv, COUNT, gbFloat32, gbSum, comm, stream);
    case REDUCE: return gbReduce(send, recv, COUNT, gbFloat32, gbSum, 0, comm, stream);
    case BROADCAST: return gbBroadcast(send, recv, COUNT, gbFloat32, 0, comm, stream);
    case ALLGATHER: return gbAllGather(send, recv, COUNT, gbFloat32, comm, stream);
    case REDUCESCATTER: return gbReduceScatter(send, recv, COUNT, gbFloat32, gbSum, comm, stream);
    default: return gbAllToAll(send, recv, COUNT, gbFloat32, comm, stream);
  }
}

static void fill(float* buf) {
  for (int i = 0; i < TOTAL; i++) buf[i] = (float)(100 + i);
}

int main(void) {
  setenv("GPUBRIDGE_DEVICE_BACKEND", "host", 1);
  unsetenv("GPUBRIDGE_VENDOR");
  void* stream = NULL;
  CHECK(gbStreamCreate(&stream) == gbSuccess, "stream: %s", gbGetLastError(NULL));
  gbComm_t comm = initOne();
  float buf[TOTAL];
  for (int c = 0; c < NUM_COLLS; c++) {
    /* One rank: every collective's result is its input, COUNT elements. */
    fill(buf);
    gbResult_t r = run(c, buf + 1, buf, comm, stream);
    const char* text = gbGetLastError(comm);
    CHECK(r == gbInvalidArgument, "%s, sendbuff = recvbuff + 1 element: returned %d, not gbInvalidArgument", names[c],
          (int)r);
    CHECK(strstr(text, "overlap") && strstr(text, "in place"), "%s: the text says what overlaps and what in place "
          "is: %s", names[c], text);

    fill(buf);
    r = run(c, buf, buf, comm, stream);
    CHECK(r == gbSuccess && gbStreamSynchronize(stream) == gbSuccess, "%s in place, after the refused call: %s",
          names[c], gbGetLastError(comm));
    for (int i = 0; i < TOTAL; i++)
      CHECK(buf[i] == (float)(100 + i), "%s in place: element %d is %g, not %d", names[c], i, buf[i], 100 + i);

    fill(buf);
    r = run(c, buf, buf + COUNT, comm, stream);
    CHECK(r == gbSuccess && gbStreamSynchronize(stream) == gbSuccess, "%s, recvbuff right after sendbuff: %s",
          names[c], gbGetLastError(comm));
    for (int i = 0; i < TOTAL; i++) {
      float want = (float)(100 + (i >= COUNT && i < 2 * COUNT ? i - COUNT : i));
      CHECK(buf[i] == want, "%s, back to back: element %d is %g, not %g", names[c], i, buf[i], want);
    }
  }
  CHECK(gbCommDestroy(comm) == gbSuccess, "destroy: %s", gbGetLastError(NULL));
  CHECK(gbStreamDestroy(stream) == gbSuccess, "stream destroy");
  if (failures) {
    fprintf(stderr, "test_api_overlap: %d check(s) failed\n", failures);
    return 1;
  }
  printf("test_api_overlap: PASS (%d collectives)\n", NUM_COLLS);
  return 0;
}
