/* Shared argument checks of the exported functions. */
#ifndef GB_API_API_H
#define GB_API_API_H

#include "core/comm.h"

/* gbSuccess when comm can take a new collective: valid, initialized, not
 * failed. Otherwise the error, with a message naming fn. */
gbResult_t gbApiCheckComm(const char* fn, gbComm_t comm);

/* Creates a communicator (api/init.c): blocking, or in the background when
 * config says blocking = 0. */
gbResult_t gbApiInitWith(gbComm_t* out, int nranks, const gbUniqueId* id, int rank, int localRank,
                         const gbConfig_t* config);

#endif
