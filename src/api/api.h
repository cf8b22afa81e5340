/* Shared argument checks of the exported functions. */
#ifndef GB_API_API_H
#define GB_API_API_H

#include "core/comm.h"

/* gbSuccess when comm, a call already counted on it (GB_API_ON_COMM, which
 * checked the handle), can take a new collective: initialized, not failed.
 * Otherwise the error, with a message naming fn. */
gbResult_t gbApiCheckComm(const char* fn, gbComm_t comm);

/* The error for a comm that is NULL or not in the registry of live ones. */
gbResult_t gbApiNotLive(const char* fn, gbComm_t comm);

/* Returns call (a gbResult_t expression) made on comm, counted from the
 * check of its handle to its return (gbCommEnter, gbCommLeave): a teardown
 * on another thread (gbCommAbort's) waits for it to leave instead of
 * freeing what it uses. */
#define GB_API_ON_COMM(fn, comm, call)                           \
  do {                                                           \
    if (!gbCommEnter(comm)) return gbApiNotLive((fn), (comm));   \
    gbResult_t gbApiResult = (call);                             \
    gbCommLeave(comm);                                           \
    return gbApiResult;                                          \
  } while (0)

/* Creates a communicator (api/init.c): blocking, or in the background when
 * config says blocking = 0. */
gbResult_t gbApiInitWith(gbComm_t* out, int nranks, const gbUniqueId* id, int rank, int localRank,
                         const gbConfig_t* config);

#endif
