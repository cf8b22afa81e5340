/* Picking a transport, and waiting for many requests at once: the hot path
 * of every host collective. One round: test the unfinished requests (each
 * test moves all its connection can), then one poll() over the sockets with
 * pending work (each connection listed once). A poll that reports nothing
 * costs no further system calls. */
#include "net/net.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/result.h"
#include "os/backoff.h"

#define POLL_CAP_MS 50
#define STACK_REQS 64
#define STACK_FDS 256

const gbNetOps_t* gbNetGet(int transport) {
  switch (transport) {
    case gbTransportTcp: return &gbNetTcpOps;
    case gbTransportUcx: return &gbNetUcxOps;
    default: return NULL;
  }
}

/* Every transport's request starts with its ops table (see net.h). */
static const gbNetOps_t* opsOf(gbNetReq_t* r) { return *(const gbNetOps_t* const*)r; }

/* Another thread sets the flag: an atomic load keeps the read well defined. */
static int aborted(const atomic_int* abortFlag) {
  return abortFlag != NULL && atomic_load_explicit(abortFlag, memory_order_relaxed) != 0;
}

/* Rounds are numbered process-wide, so waits on different threads never
 * share a number (a connection is used by one thread at a time). */
static _Atomic uint64_t roundCounter;

/* This thread's last noted failure: its text (to match the comm's first
 * failure against) and whom it blames. */
static _Thread_local char noteText[1024];
static _Thread_local gbNetCause_t noteCause;

void gbNetNoteFailure(const char* text, const gbNetCause_t* cause) {
  snprintf(noteText, sizeof(noteText), "%s", text);
  noteCause = *cause;
}

int gbNetFailureCause(const char* text, gbNetCause_t* out) {
  int match = noteText[0] != '\0' && strncmp(text, noteText, sizeof(noteText) - 1) == 0;
  if (match) *out = noteCause;
  noteText[0] = '\0'; /* read once: a later failure must not find this note */
  return match;
}

int gbNetCauseSanitize(gbNetCause_t* c) {
  c->text[sizeof(c->text) - 1] = '\0';
  for (char* p = c->text; *p; p++)
    if ((unsigned char)*p < 0x20) *p = ' ';
  return c->faultRank >= 0 && c->seenBy >= 0 && c->code != gbSuccess;
}

void gbNetCauseText(char* out, size_t len, const char* group, int peerRank, const gbNetCause_t* k, const char* what) {
  if (k->faultRank == peerRank)
    snprintf(out, len, "%s: rank %d shut the connection down after a failure of its own (%s)%s", group, peerRank,
             k->text, what);
  else if (k->seenBy == peerRank)
    snprintf(out, len, "%s: rank %d failed (seen by rank %d, which then shut its connection to this rank down: %s)%s",
             group, k->faultRank, peerRank, k->text, what);
  else
    snprintf(out, len, "%s: rank %d failed (seen by rank %d: %s; rank %d then shut its connection to this rank down)%s",
             group, k->faultRank, k->seenBy, k->text, peerRank, what);
}

/* "and 2 more pending, from ranks 3,5; ": every other peer still owing
 * something, so a message that names the first also names the rest. */
static void morePending(gbNetReq_t** pend, int left, int first, char* out, size_t len) {
  out[0] = '\0';
  if (left < 2) return;
  int ranks[8], n = 0, cut = 0;
  for (int i = 1; i < left; i++) {
    gbNetLabel_t l;
    int isSend;
    size_t bytes;
    opsOf(pend[i])->reqInfo(pend[i], &l, &isSend, &bytes);
    int seen = l.peerRank == first;
    for (int j = 0; j < n && !seen; j++) seen = ranks[j] == l.peerRank;
    if (seen) continue;
    if (n == 8) cut = 1;
    else ranks[n++] = l.peerRank;
  }
  size_t at = (size_t)snprintf(out, len, "and %d more pending", left - 1);
  for (int j = 0; j < n && at < len; j++)
    at += (size_t)snprintf(out + at, len - at, "%s%d", j == 0 ? (n == 1 ? ", from rank " : ", from ranks ") : ",", ranks[j]);
  if (at < len) snprintf(out + at, len - at, "%s; ", cut ? ",..." : "");
}

static gbResult_t stuck(gbNetReq_t** pend, int left, int64_t start, const atomic_int* abortFlag) {
  gbNetLabel_t label;
  int isSend;
  size_t bytes;
  char more[128];
  opsOf(pend[0])->reqInfo(pend[0], &label, &isSend, &bytes);
  const char* group = label.group ? label.group : "net";
  morePending(pend, left, label.peerRank, more, sizeof(more));
  if (aborted(abortFlag))
    return gbErrorSet(gbRemoteError, "%s: aborted while %s %zu bytes %s rank %d", group,
                      isSend ? "sending" : "receiving", bytes, isSend ? "to" : "from", label.peerRank);
  gbResult_t res = gbErrorSet(gbTimeout,
                              "%s: no progress from rank %d within %.3g s while %s %zu bytes (%sis it stopped or "
                              "overloaded? GPUBRIDGE_TIMEOUT sets the limit)",
                              group, label.peerRank, (double)(gbClockNowNs() - start) / 1e9,
                              isSend ? "sending" : "receiving", bytes, more);
  /* The stalled peer is the one at fault. */
  gbNetCause_t k = {.faultRank = label.peerRank, .seenBy = -1, .code = gbTimeout};
  gbNetNoteFailure(gbErrorLast(), &k);
  return res;
}

gbResult_t gbNetWaitAll(gbNetReq_t** reqs, int n, gbDeadline_t deadline, const atomic_int* abortFlag) {
  if (n <= 0) return gbSuccess;
  gbNetReq_t* pendStack[STACK_REQS];
  struct pollfd fdStack[STACK_FDS];
  gbNetReq_t** pend = pendStack;
  struct pollfd* fds = fdStack;
  int cap = STACK_FDS, left = n, poked = 1;
  int64_t idleSince = 0; /* when a pass last finished a request (0: the last one did) */
  gbResult_t res = gbSuccess;
  int64_t start = gbClockNowNs();
  if (n > STACK_REQS && (pend = malloc((size_t)n * sizeof(*pend))) == NULL)
    return gbErrorSet(gbSystemError, "out of memory waiting for %d requests", n);
  memcpy(pend, reqs, (size_t)n * sizeof(*pend));
  for (;;) {
    /* Testing one request moves its whole connection, which can finish a
     * request tested earlier in the pass: pass again while any finished. */
    while (poked) {
      int before = left;
      for (int i = 0; i < left;) {
        int done;
        res = opsOf(pend[i])->test(pend[i], &done);
        if (res != gbSuccess) {
          /* Past our own deadline the stall is the failure; a peer that
           * closed after its own deadline is only its echo. */
          if (gbDeadlinePassed(deadline)) res = stuck(pend + i, left - i, start, abortFlag);
          goto out;
        }
        if (done) pend[i] = pend[--left];
        else i++;
      }
      poked = left > 0 && left < before;
      if (left < before) idleSince = 0;
    }
    if (left == 0) break;
    if (aborted(abortFlag) || gbDeadlinePassed(deadline)) {
      res = stuck(pend, left, start, abortFlag);
      goto out;
    }
    uint64_t round = atomic_fetch_add(&roundCounter, 1) + 1;
    int m = 0, unpolled = 0;
    for (int i = 0; i < left; i++) {
      if (cap - m < GB_NET_MAX_POLLFDS) {
        int ncap = 2 * cap;
        struct pollfd* nf = fds == fdStack ? malloc((size_t)ncap * sizeof(*nf)) : realloc(fds, (size_t)ncap * sizeof(*nf));
        if (nf == NULL) {
          res = gbErrorSet(gbSystemError, "out of memory waiting for %d requests", n);
          goto out;
        }
        if (fds == fdStack) memcpy(nf, fdStack, (size_t)m * sizeof(*nf));
        fds = nf;
        cap = ncap;
      }
      int k = opsOf(pend[i])->pollFds(pend[i], round, fds + m, cap - m);
      if (k < 0) unpolled++;
      else m += k;
    }
    /* A request with nothing to poll (a shared-memory ring) is tested again
     * after a backoff: yields, then short sleeps; sockets are then only
     * looked at, not waited on. */
    if (unpolled) {
      int64_t now = gbClockNowNs();
      if (idleSince == 0) idleSince = now;
      if (m > 0 && poll(fds, (nfds_t)m, 0) < 0 && errno != EINTR) {
        char eb[128];
        res = gbErrorSet(gbSystemError, "poll while waiting for %d requests: %s", left, strerror_r(errno, eb, sizeof(eb)));
        goto out;
      }
      gbOsBackoff(now - idleSince, GB_OS_YIELD_UNWOKEN_NS, 0);
      poked = 1;
      continue;
    }
    if (m == 0) { /* every request left has finished its socket work */
      poked = 1;
      continue;
    }
    int rc = poll(fds, (nfds_t)m, gbDeadlineRemainingMs(deadline, POLL_CAP_MS));
    if (rc < 0 && errno != EINTR) {
      char eb[128];
      res = gbErrorSet(gbSystemError, "poll while waiting for %d requests: %s", left, strerror_r(errno, eb, sizeof(eb)));
      goto out;
    }
    /* Nothing ready: no request can have moved, so skip the tests. */
    poked = rc != 0;
  }
out:
  if (pend != pendStack) free(pend);
  if (fds != fdStack) free(fds);
  return res;
}
