/* The ncclComm_t handles this library gives programs: made around a
 * gpubridge communicator, checked on every call, retired (never freed) by
 * destroy and abort (abi.h says why). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "abi.h"

/* Retired handles stay listed here, so that they stay reachable memory that
 * the process still owns (not a leak to a leak checker) for as long as a
 * stale ncclComm_t may be passed in. */
static pthread_mutex_t retiredLock = PTHREAD_MUTEX_INITIALIZER;
static ncclComm_t* retired;
static size_t retiredCount, retiredCap;

static void keepRetired(ncclComm_t comm) {
  pthread_mutex_lock(&retiredLock);
  if (retiredCount == retiredCap) {
    size_t cap = retiredCap ? 2 * retiredCap : 16;
    ncclComm_t* grown = realloc(retired, cap * sizeof(*grown));
    if (grown) retired = grown, retiredCap = cap;
  }
  if (retiredCount < retiredCap) retired[retiredCount++] = comm; /* else: out of memory, stays unlisted */
  pthread_mutex_unlock(&retiredLock);
}

gbResult_t gbNcclCommNew(int cudaDev, const char* name, ncclComm_t* out) {
  struct ncclComm* c = calloc(1, sizeof(*c));
  if (!c) return gbNcclErrorSet(gbSystemError, "out of memory for a communicator handle (%zu bytes)", sizeof(*c));
  atomic_init(&c->magic, GB_NCCL_COMM_LIVE);
  atomic_init(&c->gb, NULL);
  atomic_init(&c->announced, 0);
  c->cudaDev = cudaDev;
  snprintf(c->name, sizeof(c->name), "%s", name ? name : "");
  *out = c;
  return gbSuccess;
}

void gbNcclCommDiscard(ncclComm_t comm) { free(comm); }

static gbResult_t notLive(const char* fn, ncclComm_t comm, unsigned magic) {
  if (magic == GB_NCCL_COMM_DEAD)
    return gbNcclErrorSet(gbInvalidArgument, "%s: comm %p was destroyed or aborted (ncclCommDestroy, ncclCommAbort); "
                                             "pass a live communicator", fn, (void*)comm);
  return gbNcclErrorSet(gbInvalidArgument, "%s: comm %p is not a communicator of gpubridge's NCCL interface "
                                           "(libgpubridge-nccl): was it made by another NCCL library in the same "
                                           "process? Make every communicator through the same library", fn,
                        (void*)comm);
}

gbResult_t gbNcclCommGet(const char* fn, ncclComm_t comm, gbComm_t* gb) {
  if (!comm) return gbNcclErrorSet(gbInvalidArgument, "%s: comm is NULL", fn);
  unsigned magic = atomic_load(&comm->magic);
  if (magic != GB_NCCL_COMM_LIVE) return notLive(fn, comm, magic);
  *gb = atomic_load(&comm->gb);
  return gbSuccess;
}

gbResult_t gbNcclCommRetire(const char* fn, ncclComm_t comm, gbComm_t* gb) {
  unsigned live = GB_NCCL_COMM_LIVE;
  if (!atomic_compare_exchange_strong(&comm->magic, &live, GB_NCCL_COMM_DEAD)) return notLive(fn, comm, live);
  *gb = atomic_exchange(&comm->gb, NULL);
  keepRetired(comm);
  return gbSuccess;
}

gbResult_t gbNcclCommCreate(const char* fn, int cudaDev, const char* name, gbNcclMake_t make, void* args,
                            ncclComm_t* out) {
  ncclComm_t c;
  GB_NCCL_CHECK(gbNcclCommNew(cudaDev, name, &c));
  gbComm_t gb = NULL;
  gbResult_t res = gbNcclErrorFrom(make(args, &gb), fn, NULL);
  if ((res != gbSuccess && res != gbInProgress) || !gb) {
    /* NCCL says why an init failed in a WARN line; gpubridge leaves its
     * start-up verdict to the caller, and a program written for NCCL may
     * print only ncclGetErrorString. */
    if (res != gbSuccess && res != gbInProgress) GB_NCCL_WARN("%s", ncclGetLastError(NULL));
    gbNcclCommDiscard(c);
    return res;
  }
  atomic_store(&c->gb, gb);
  *out = c;
  if (res == gbSuccess) gbNcclCommAnnounce(c);
  return res;
}
