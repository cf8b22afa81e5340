#include "boot/exchange.h"

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/result.h"
#include "boot/root.h"
#include "boot/topology.h"

/* The root decides at its own deadline; ranks wait this much longer for it. */
#define VERDICT_GRACE_SECONDS 1.5

gbResult_t gbBootExchange(const gbBootId_t* id, const gbProbe_t* mine, double timeoutSec,
                          const volatile int* abortFlag, gbProbe_t** probesOut) {
  char rootText[96];
  gbSockAddrString(&id->root, rootText, sizeof(rootText));
  gbDeadline_t connectBy = gbDeadlineIn(timeoutSec);
  gbDeadline_t verdictBy = gbDeadlineIn(timeoutSec + VERDICT_GRACE_SECONDS);
  int fd = -1;
  gbResult_t res = gbSockConnect(&id->root, connectBy, abortFlag, &fd);
  if (res != gbSuccess)
    return gbErrorSet(res, "rank %d could not reach the rendezvous root at %s within %.0f s: %s; check that rank 0 "
                           "(or the process that made the unique id) is running and MASTER_ADDR:MASTER_PORT is right",
                      mine->rank, rootText, timeoutSec, gbErrorLast());
  struct {
    gbNetHello_t hello;
    gbProbe_t probe;
  } msg;
  memset(&msg, 0, sizeof(msg));
  msg.hello.magic = GB_NET_HELLO_MAGIC;
  memcpy(msg.hello.secret, id->secret, GB_NET_SECRET_BYTES);
  msg.hello.commHash = gbBootIdHash(id);
  msg.hello.srcRank = mine->rank;
  msg.hello.tag = GB_BOOT_ROOT_TAG;
  msg.hello.nsocks = 1;
  msg.probe = *mine;
  gbVerdictHeader_t h;
  GB_CHECK_GOTO(gbSockSendAll(fd, &msg, sizeof(msg), connectBy, abortFlag, "probe to the rendezvous root"), res, fail);
  GB_INFO(GB_LOG_BOOT, "rank %d sent its probe to the rendezvous root at %s", mine->rank, rootText);
  res = gbSockRecvAll(fd, &h, sizeof(h), verdictBy, abortFlag, "verdict from the rendezvous root");
  if (res != gbSuccess) {
    res = gbErrorSet(res == gbTimeout ? gbTimeout : gbRemoteError,
                     "rank %d got no verdict from the rendezvous root at %s: %s (the process hosting the root, "
                     "rank 0 under a launcher, may have failed or stopped)",
                     mine->rank, rootText, gbErrorLast());
    goto fail;
  }
  if (h.magic != GB_BOOT_VERDICT_MAGIC || h.textLen > 65536 || h.nprobes > GB_MAX_RANKS) {
    res = gbErrorSet(gbInternalError, "the rendezvous root at %s sent a malformed verdict", rootText);
    goto fail;
  }
  if (h.result != gbSuccess) {
    char* text = calloc(1, (size_t)h.textLen + 1);
    res = text ? gbSockRecvAll(fd, text, h.textLen, verdictBy, abortFlag, "verdict text") : gbSystemError;
    if (res == gbSuccess) {
      /* The same bytes on every rank: record them as they are. */
      GB_WARN("%s", text);
      gbErrorRecord(text);
      res = (gbResult_t)h.result;
    }
    free(text);
    goto fail;
  }
  gbProbe_t* probes = malloc(sizeof(gbProbe_t) * h.nprobes);
  if (!probes) {
    res = gbErrorSet(gbSystemError, "out of memory for %u probes", h.nprobes);
    goto fail;
  }
  res = gbSockRecvAll(fd, probes, sizeof(gbProbe_t) * h.nprobes, verdictBy, abortFlag, "topology from the root");
  if (res != gbSuccess) {
    free(probes);
    goto fail;
  }
  gbSockClose(fd);
  *probesOut = probes;
  return gbSuccess;
fail:
  gbSockClose(fd);
  return res;
}
