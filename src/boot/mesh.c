#include "boot/mesh.h"

#include <stdatomic.h>
#include <string.h>

#include "base/clock.h"
#include "base/result.h"

gbNetHello_t gbBootHello(const gbBootId_t* id, int srcRank, int tag, int nsocks) {
  gbNetHello_t h;
  memset(&h, 0, sizeof(h));
  h.magic = GB_NET_HELLO_MAGIC;
  memcpy(h.secret, id->secret, GB_NET_SECRET_BYTES);
  h.commHash = gbBootIdHash(id);
  h.srcRank = srcRank;
  h.tag = tag;
  h.nsocks = nsocks;
  return h;
}

gbResult_t gbBootMeshConnect(const gbNetOps_t* net, gbNetListener_t* listener, const gbProbe_t* probes,
                             const gbBootId_t* id, int nsocks, const gbMeshGroup_t* g, double timeoutSec,
                             const atomic_int* abortFlag, gbNetConn_t** conns) {
  gbDeadline_t deadline = gbDeadlineIn(timeoutSec);
  int myRank = g->ranks[g->me];
  gbResult_t res = gbSuccess;
  for (int k = 0; k < g->n; k++) conns[k] = NULL;
  gbNetHello_t hello = gbBootHello(id, myRank, g->tag, nsocks);
  for (int k = 0; k < g->me && res == gbSuccess; k++) {
    gbNetLabel_t label = {g->ranks[k], g->name, probes[g->ranks[k]].hostId == probes[myRank].hostId};
    res = net->connect(&probes[g->ranks[k]].listenAddr, &hello, label, deadline, abortFlag, &conns[k]);
  }
  for (int k = g->me + 1; k < g->n && res == gbSuccess; k++) {
    gbNetLabel_t label = {g->ranks[k], g->name, probes[g->ranks[k]].hostId == probes[myRank].hostId};
    res = net->accept(listener, g->ranks[k], g->tag, label, deadline, abortFlag, &conns[k]);
  }
  /* On failure the connections made stay: the caller shuts them down with
   * its cause (who failed first), so these peers do not blame this rank. */
  if (res != gbSuccess) return res;
  GB_INFO(GB_LOG_BOOT, "%s: connected to %d peers with %d sockets each", g->name, g->n - 1, nsocks);
  return gbSuccess;
}
