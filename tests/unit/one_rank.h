/* A communicator of one rank (gbGetUniqueId + gbCommInitRank), for unit
 * tests of what a communicator does on its own; exits with the reason when
 * it cannot be made. */
#ifndef GB_TESTS_UNIT_ONE_RANK_H
#define GB_TESTS_UNIT_ONE_RANK_H

#include <stdio.h>
#include <stdlib.h>

#include "gpubridge/gpubridge.h"

static gbComm_t initOne(void) {
  gbUniqueId id;
  gbComm_t comm = NULL;
  if (gbGetUniqueId(&id) != gbSuccess || gbCommInitRank(&comm, 1, id, 0) != gbSuccess) {
    fprintf(stderr, "FAIL: init: %s\n", gbGetLastError(NULL));
    exit(1);
  }
  return comm;
}

#endif
