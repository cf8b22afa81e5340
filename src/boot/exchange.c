#include "boot/exchange.h"

#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/result.h"
#include "boot/root.h"
#include "boot/topology.h"
#include "boot/validate.h"

/* The root decides at its own deadline; ranks wait this much longer for it. */
#define VERDICT_GRACE_SECONDS 1.5

enum { ACKED, SILENT, CLOSED, GARBLED, ABORTED };

/* Waits up to GB_BOOT_ACK_SECONDS for the root's acknowledgement of the probe
 * just sent (boot/root.h); on anything else, err says what came instead. */
static int awaitAck(int fd, const atomic_int* abortFlag, char* err, size_t len) {
  gbDeadline_t by = gbDeadlineIn(GB_BOOT_ACK_SECONDS);
  uint32_t ack = 0;
  size_t got = 0;
  err[0] = '\0';
  while (got < sizeof(ack)) {
    ssize_t n = gbSockTryRecv(fd, (char*)&ack + got, sizeof(ack) - got, err, len);
    if (n < 0) return CLOSED;
    got += (size_t)n;
    if (got == sizeof(ack)) break;
    if (abortFlag != NULL && atomic_load_explicit(abortFlag, memory_order_relaxed)) return ABORTED;
    if (gbDeadlinePassed(by)) return SILENT;
    struct pollfd p = {fd, POLLIN, 0};
    (void)poll(&p, 1, gbDeadlineRemainingMs(by, 50));
  }
  return ack == GB_BOOT_PROBE_ACK ? ACKED : GARBLED;
}

/* Why what listens on the root's address is not this job's root, and what
 * to do: rank 0 could not listen on that port. A report (rank 0's own, whose
 * bind failed) is only recorded: the caller names the taken port first. */
static gbResult_t notTheRoot(int how, const char* err, const gbBootId_t* id, const gbProbe_t* mine,
                             const char* rootText) {
  int port = gbSockAddrPort(&id->root);
  int report = mine->kind == GB_PROBE_REPORT;
  char who[48], came[384], text[1024];
  if (report) snprintf(who, sizeof(who), "this process's report");
  else snprintf(who, sizeof(who), "rank %d's probe", mine->rank);
  if (how == SILENT)
    snprintf(came, sizeof(came), "did not acknowledge %s within %.1f s (this job's root does at once)", who,
             GB_BOOT_ACK_SECONDS);
  else if (how == CLOSED)
    snprintf(came, sizeof(came), "closed the connection (%s) without acknowledging %s (another program, or a "
             "gpubridge root of another job or version that refused this rank: its log says why)", err, who);
  else
    snprintf(came, sizeof(came), "answered %s with bytes that are no gpubridge root's", who);
  int used = snprintf(text, sizeof(text), "what listens on %s, the rendezvous root's address, is not this job's "
                      "rendezvous root: it %s", rootText, came);
  /* Silence or foreign bytes are another program's; a close may also be
   * a gpubridge root refusing this rank (another communicator or version). */
  if (!report && used > 0 && (size_t)used < sizeof(text))
    snprintf(text + used, sizeof(text) - (size_t)used, ". %s, so rank 0 could not listen there; choose a free port "
             "(MASTER_PORT; gpubridge-run --port) or find the process holding it: ss -ltnp 'sport = :%d'",
             how == CLOSED ? "If another program holds the port" : "Another program holds the port", port);
  gbResult_t res = how == CLOSED ? gbRemoteError : gbSystemError;
  if (!report) return gbErrorSet(res, "%s", text);
  GB_INFO(GB_LOG_BOOT, "%s", text);
  gbErrorRecord(text);
  return res;
}

/* Connects (until connectBy), sends the hello and probe, waits for the
 * root's acknowledgement, reads the verdict header. *fdOut is the open
 * socket on success. */
static gbResult_t sendProbe(const gbBootId_t* id, const gbProbe_t* mine, gbDeadline_t connectBy, gbDeadline_t verdictBy,
                            double timeoutSec, const atomic_int* abortFlag, const char* rootText,
                            gbVerdictHeader_t* h, int* fdOut) {
  int fd = -1;
  *fdOut = -1;
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
  res = gbSockSendAll(fd, &msg, sizeof(msg), connectBy, abortFlag, "probe to the rendezvous root");
  if (res != gbSuccess) {
    gbSockClose(fd);
    return res;
  }
  GB_INFO(GB_LOG_BOOT, "rank %d sent its %s to the rendezvous root at %s", mine->rank,
          mine->kind == GB_PROBE_REPORT ? "report" : "probe", rootText);
  char err[128];
  int how = awaitAck(fd, abortFlag, err, sizeof(err));
  if (how != ACKED) {
    gbSockClose(fd);
    if (how == ABORTED)
      return gbErrorSet(gbRemoteError, "rank %d: aborted while waiting for the rendezvous root at %s", mine->rank,
                        rootText);
    return notTheRoot(how, err, id, mine, rootText);
  }
  res = gbSockRecvAll(fd, h, sizeof(*h), verdictBy, abortFlag, "verdict from the rendezvous root");
  if (res != gbSuccess) {
    res = gbErrorSet(res == gbTimeout ? gbTimeout : gbRemoteError,
                     "rank %d got no verdict from the rendezvous root at %s: %s (the process hosting the root, "
                     "rank 0 under a launcher, may have failed or stopped)",
                     mine->rank, rootText, gbErrorLast());
    gbSockClose(fd);
    return res;
  }
  /* What the root sends is checked like any message from the wire. */
  int failed = h->result != gbSuccess;
  if (h->magic != GB_BOOT_VERDICT_MAGIC || h->textLen > 65536 || h->nprobes > GB_MAX_RANKS || h->result < 0 ||
      (failed && (h->nprobes != 0 || h->textLen == 0)) ||
      (!failed && (h->textLen != 0 || mine->kind != GB_PROBE_RANK || h->nprobes != (uint32_t)mine->nranks))) {
    gbSockClose(fd);
    return gbErrorSet(gbInternalError, "the rendezvous root at %s sent a malformed verdict (result %d, %u text bytes, "
                      "%u probes); is another program listening there?", rootText, h->result, h->textLen, h->nprobes);
  }
  *fdOut = fd;
  return gbSuccess;
}

/* Reads the verdict's text and returns its error, text recorded. */
static gbResult_t readFailure(int fd, const gbVerdictHeader_t* h, gbDeadline_t verdictBy,
                              const atomic_int* abortFlag, int* heard) {
  char* text = calloc(1, (size_t)h->textLen + 1);
  gbResult_t res = text ? gbSockRecvAll(fd, text, h->textLen, verdictBy, abortFlag, "verdict text") : gbSystemError;
  if (res == gbSuccess) {
    /* The same bytes on every rank: record them as they are. The call
     * returns them (gbGetLastError) and its caller reports them, so this
     * is the rank's one message; the log has it at INFO. */
    GB_INFO(GB_LOG_BOOT, "%s", text);
    gbErrorRecord(text);
    res = (gbResult_t)h->result;
    *heard = 1;
  }
  free(text);
  return res;
}

gbResult_t gbBootExchange(const gbBootId_t* id, const gbProbe_t* mine, double timeoutSec,
                          const atomic_int* abortFlag, gbProbe_t** probesOut) {
  char rootText[96];
  gbSockAddrString(&id->root, rootText, sizeof(rootText));
  gbDeadline_t connectBy = gbDeadlineIn(timeoutSec);
  gbDeadline_t verdictBy = gbDeadlineIn(timeoutSec + VERDICT_GRACE_SECONDS);
  gbVerdictHeader_t h;
  int fd;
  GB_CHECK(sendProbe(id, mine, connectBy, verdictBy, timeoutSec, abortFlag, rootText, &h, &fd));
  gbResult_t res;
  if (h.result != gbSuccess) {
    int heard = 0;
    res = readFailure(fd, &h, verdictBy, abortFlag, &heard);
    gbSockClose(fd);
    return res;
  }
  gbProbe_t* probes = malloc(sizeof(gbProbe_t) * h.nprobes);
  if (!probes) {
    gbSockClose(fd);
    return gbErrorSet(gbSystemError, "out of memory for %u probes", h.nprobes);
  }
  res = gbSockRecvAll(fd, probes, sizeof(gbProbe_t) * h.nprobes, verdictBy, abortFlag, "topology from the root");
  gbSockClose(fd);
  for (uint32_t i = 0; i < h.nprobes && res == gbSuccess; i++) {
    char why[160];
    if (!gbBootProbeCheck(&probes[i], why, sizeof(why)) || probes[i].kind != GB_PROBE_RANK ||
        probes[i].rank != (int)i || probes[i].nranks != mine->nranks)
      res = gbErrorSet(gbInternalError, "the rendezvous root at %s sent a malformed topology (entry %u: %s)", rootText,
                       i, probes[i].rank != (int)i ? "out of order" : why);
  }
  if (res != gbSuccess) {
    free(probes);
    return res;
  }
  *probesOut = probes;
  return gbSuccess;
}

gbResult_t gbBootReport(const gbBootId_t* id, int rank, int nranks, int localRank, const char* problem,
                        double timeoutSec, int* heardOut) {
  *heardOut = 0;
  gbProbe_t rep;
  memset(&rep, 0, sizeof(rep));
  rep.magic = GB_PROBE_MAGIC;
  rep.version = GB_PROBE_VERSION;
  rep.kind = GB_PROBE_REPORT;
  rep.rank = rank;
  rep.nranks = nranks;
  rep.pid = (int32_t)getpid();
  rep.libVersion = GB_VERSION_CODE;
  rep.localRank = localRank;
  rep.hostId = gbHostId();
  rep.gpuIndex = -1;
  snprintf(rep.host, sizeof(rep.host), "%s", gbHostName());
  snprintf(rep.problems, sizeof(rep.problems), "%s", problem);
  rep.settings.timeoutSec = (int32_t)timeoutSec;
  char rootText[96];
  gbSockAddrString(&id->root, rootText, sizeof(rootText));
  double connectSec = GB_BOOT_REPORT_CONNECT_SECONDS < timeoutSec ? GB_BOOT_REPORT_CONNECT_SECONDS : timeoutSec;
  double verdictSec = timeoutSec + VERDICT_GRACE_SECONDS;
  if (verdictSec > connectSec + GB_BOOT_REPORT_VERDICT_SECONDS) verdictSec = connectSec + GB_BOOT_REPORT_VERDICT_SECONDS;
  gbDeadline_t connectBy = gbDeadlineIn(connectSec);
  gbDeadline_t verdictBy = gbDeadlineIn(verdictSec);
  gbVerdictHeader_t h;
  int fd;
  gbResult_t res = sendProbe(id, &rep, connectBy, verdictBy, timeoutSec, NULL, rootText, &h, &fd);
  if (res == gbSuccess) {
    /* A root that accepts a report never sends a topology (sendProbe checks). */
    res = readFailure(fd, &h, verdictBy, NULL, heardOut);
    gbSockClose(fd);
  }
  /* The root this process hosts must send every verdict before we leave. */
  gbBootRootWait(gbBootIdHash(id), gbDeadlineIn(timeoutSec), NULL);
  return res;
}
