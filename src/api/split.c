/* Exported: gbCommSplit. The ranks of each color rendezvous as a new
 * communicator, found by the same start-up as any other, so a child finds
 * its own topology (native within one vendor, bridged across vendors). */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "base/result.h"
#include "boot/root.h"
#include "boot/uniqueid.h"
#include "core/settings.h"

static gbResult_t split(gbComm_t comm, int color, int key, gbComm_t* newcomm, gbConfig_t* config) {
  static const char* fn = "gbCommSplit";
  if (!newcomm) return gbErrorSet(gbInvalidArgument, "%s: newcomm is NULL", fn);
  *newcomm = NULL;
  GB_CHECK(gbApiCheckComm(fn, comm));
  if (color < 0 && color != GB_SPLIT_NOCOLOR)
    return gbErrorSet(gbInvalidArgument, "%s: color %d is negative and not GB_SPLIT_NOCOLOR (-1)", fn, color);
  /* A bad config fails here, before the parent's gathers send anything. */
  if (config) GB_CHECK(gbCommConfigCheck(config));
  int newRank, newN, first;
  GB_CHECK(gbCommSplitRanks(comm, color, key, &newRank, &newN, &first));
  gbUniqueId id;
  memset(&id, 0, sizeof(id));
  /* A first rank that cannot make the id still takes part, so the others
   * hear there is none instead of waiting for it. */
  gbResult_t made = first ? gbGetUniqueId(&id) : gbSuccess;
  char madeText[512] = "";
  if (made != gbSuccess) snprintf(madeText, sizeof(madeText), "%s", gbErrorLast());
  gbBootId_t mine;
  uint64_t rootHash = first && made == gbSuccess && gbBootIdUnpack(&id, &mine) == gbSuccess ? gbBootIdHash(&mine) : 0;
  gbResult_t shared = gbCommSplitShareId(comm, color, first && made == gbSuccess, &id, &id);
  if (made != gbSuccess) return gbErrorSet(made, "%s: %s", fn, madeText);
  /* Nobody will come to the root my id names: it ends now, not never. */
  if (shared != gbSuccess && rootHash) gbBootRootStop(rootHash);
  GB_CHECK(shared);
  if (color == GB_SPLIT_NOCOLOR) return gbSuccess;
  return gbApiInitWith(newcomm, newN, &id, newRank, comm->localRank, config ? config : comm->hasConfig ? &comm->config
                                                                                                       : NULL);
}

gbResult_t gbCommSplit(gbComm_t comm, int color, int key, gbComm_t* newcomm, gbConfig_t* config) {
  GB_API_ON_COMM("gbCommSplit", comm, split(comm, color, key, newcomm, config));
}
