/* A communicator handle is checked against the registry of live
 * communicators, never by reading the memory it points to: after
 * gbCommDestroy (of a world and of a split child), after gbCommAbort, and
 * for a handle that was never a communicator (memory that merely holds the
 * communicator's magic number), every call returns gbInvalidArgument with
 * a text naming the call, and nothing is read at the handle (the address
 * sanitizer build runs this test too). A communicator made right after a
 * destroy does not take the destroyed one's address, so the stale handle
 * keeps being refused instead of naming the new communicator. Public API. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpubridge/gpubridge.h"

#define COUNT 257

static void checkText(const char* what, const char* fn, const char* must) {
  const char* text = gbGetLastError(NULL);
  CHECK(strstr(text, fn) != NULL, "%s: the error text does not name %s: \"%s\"", what, fn, text);
  if (must) CHECK(strstr(text, must) != NULL, "%s: the error text does not say \"%s\": \"%s\"", what, must, text);
}

/* Every call on a handle that is not a live communicator. */
static void refused(gbComm_t comm, const char* what, void* stream) {
  int n = -7, rank = -7;
  float buf[4] = {1, 2, 3, 4};
  gbResult_t r = gbCommCount(comm, &n);
  CHECK(r == gbInvalidArgument && n == -7, "%s: gbCommCount returned %d (count %d)", what, (int)r, n);
  checkText(what, "gbCommCount", "not a live communicator");
  r = gbCommUserRank(comm, &rank);
  CHECK(r == gbInvalidArgument && rank == -7, "%s: gbCommUserRank returned %d (rank %d)", what, (int)r, rank);
  checkText(what, "gbCommUserRank", "not a live communicator");
  r = gbAllReduce(buf, buf, 4, gbFloat32, gbSum, comm, stream);
  CHECK(r == gbInvalidArgument, "%s: gbAllReduce returned %d", what, (int)r);
  checkText(what, "gbAllReduce", "not a live communicator");
  gbResult_t async = gbSuccess;
  r = gbCommGetAsyncError(comm, &async);
  CHECK(r == gbInvalidArgument, "%s: gbCommGetAsyncError returned %d", what, (int)r);
  checkText(what, "gbCommGetAsyncError", "not a live communicator");
  gbRedOp_t op;
  float scalar = 2;
  r = gbRedOpCreatePreMulSum(&op, &scalar, gbFloat32, gbScalarHostImmediate, comm);
  CHECK(r == gbInvalidArgument, "%s: gbRedOpCreatePreMulSum returned %d", what, (int)r);
  checkText(what, "gbRedOpCreatePreMulSum", "not a live communicator");
  r = gbCommFinalize(comm);
  CHECK(r == gbInvalidArgument, "%s: gbCommFinalize returned %d", what, (int)r);
  checkText(what, "gbCommFinalize", "not a live communicator");
  r = gbCommDestroy(comm);
  CHECK(r == gbInvalidArgument, "%s: gbCommDestroy returned %d", what, (int)r);
  checkText(what, "gbCommDestroy", "not a live communicator");
  r = gbCommAbort(comm);
  CHECK(r == gbInvalidArgument, "%s: gbCommAbort returned %d", what, (int)r);
  checkText(what, "gbCommAbort", "not a live communicator");
  /* gbGetLastError with a dead handle still answers from this thread. */
  CHECK(strstr(gbGetLastError(comm), "gbCommAbort") != NULL, "%s: gbGetLastError(dead comm) = \"%s\"", what,
        gbGetLastError(comm));
}

static void allReduceWorks(gbComm_t comm, const char* what, void* stream) {
  int buf[COUNT];
  for (int i = 0; i < COUNT; i++) buf[i] = 3 * i - 100;
  gbResult_t r = gbAllReduce(buf, buf, COUNT, gbInt32, gbSum, comm, stream);
  if (r == gbSuccess) r = gbStreamSynchronize(stream);
  CHECK(r == gbSuccess, "%s: all-reduce: %s", what, gbGetLastError(comm));
  for (int i = 0; i < COUNT && r == gbSuccess; i++)
    if (buf[i] != 3 * i - 100) { /* one rank: the sum is the input */
      CHECK(0, "%s: all-reduce element %d is %d, not %d", what, i, buf[i], 3 * i - 100);
      break;
    }
}

int main(void) {
  setenv("GPUBRIDGE_DEVICE_BACKEND", "host", 1);
  unsetenv("GPUBRIDGE_VENDOR");
  void* stream = NULL;
  if (gbStreamCreate(&stream) != gbSuccess) return printf("FAIL: gbStreamCreate: %s\n", gbGetLastError(NULL)), 1;

  /* Never a communicator: memory that starts like one ("gbCa", the magic). */
  uint32_t* fake = calloc(4096, sizeof(uint32_t));
  for (int i = 0; i < 4096; i++) fake[i] = 0x67624361u;
  refused((gbComm_t)(void*)fake, "a handle that was never made", stream);
  free(fake);

  gbUniqueId id;
  gbComm_t world = NULL, child = NULL, child2 = NULL;
  if (gbGetUniqueId(&id) != gbSuccess || gbCommInitRank(&world, 1, id, 0) != gbSuccess)
    return printf("FAIL: init: %s\n", gbGetLastError(NULL)), 1;
  allReduceWorks(world, "world", stream);

  /* A split child, destroyed, then used. */
  gbResult_t r = gbCommSplit(world, 0, 0, &child, NULL);
  CHECK(r == gbSuccess && child, "gbCommSplit: %s", gbGetLastError(NULL));
  if (!child) return 1;
  allReduceWorks(child, "child", stream);
  CHECK(gbCommDestroy(child) == gbSuccess, "destroy child: %s", gbGetLastError(NULL));
  refused(child, "a destroyed split child", stream);

  /* Another child right after: a new handle, and the old one stays refused. */
  r = gbCommSplit(world, 0, 0, &child2, NULL);
  CHECK(r == gbSuccess && child2, "second gbCommSplit: %s", gbGetLastError(NULL));
  if (!child2) return 1;
  CHECK(child2 != child, "the new child has the destroyed child's address %p", (void*)child);
  refused(child, "a destroyed split child, after another split", stream);
  allReduceWorks(child2, "second child", stream);
  CHECK(gbCommAbort(child2) == gbSuccess, "abort child: %s", gbGetLastError(NULL));
  refused(child2, "an aborted split child", stream);

  /* The world still works, then goes too. */
  allReduceWorks(world, "world after its children", stream);
  CHECK(gbCommDestroy(world) == gbSuccess, "destroy world: %s", gbGetLastError(NULL));
  refused(world, "a destroyed world", stream);
  refused(child, "a destroyed split child, after its parent", stream);

  gbStreamDestroy(stream);
  if (failures) {
    fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}
