/* TCP sockets: listening, connecting with retry, accepting, and I/O that
 * never blocks longer than a poll() of 50 ms, so deadlines and abort flags are
 * noticed. Every socket is non-blocking and close-on-exec. */
#include "os/socket.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/result.h"
#include "os/fdbudget.h"

/* Longest single poll(): how late an abort flag may be noticed. */
#define POLL_CAP_MS 50
/* Connect retries back off from 1 ms to this. */
#define BACKOFF_CAP_MS 100
/* Out of descriptors: how often socket() is tried again while listeners
 * drop strangers' connections (their threads look every 50-100 ms). */
#define RELIEF_LOOK_MS 5

static const char* errText(int e, char* buf, size_t len) { return strerror_r(e, buf, len); }

static void setNoDelay(int fd) {
  int one = 1;
  /* Best effort: small messages must not wait for Nagle. */
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Another thread sets the flag: an atomic load keeps the read well defined. */
static int aborted(const atomic_int* abortFlag) {
  return abortFlag != NULL && atomic_load_explicit(abortFlag, memory_order_relaxed) != 0;
}

/* socket(); when the process is out of descriptors while listeners keep
 * strangers' connections waiting, they are asked to drop some
 * (os/fdbudget.h) and socket() is tried again, for at most
 * GB_FD_RELIEF_TTL_NS, and not past the caller's deadline (NULL: none) or
 * the abort flag. On failure errno says why. */
static int openSocket(int family, const gbDeadline_t* callerBy, const atomic_int* abortFlag) {
  gbDeadline_t d = {gbClockNowNs() + GB_FD_RELIEF_TTL_NS};
  if (callerBy && callerBy->ns < d.ns) d = *callerBy;
  for (;;) {
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int e = errno;
    if (fd >= 0 || gbDeadlinePassed(d) || aborted(abortFlag) || !gbFdAskRelief(e)) {
      errno = e;
      return fd;
    }
    struct timespec ts = {0, RELIEF_LOOK_MS * 1000000L}; /* a listener's thread drops them meanwhile */
    nanosleep(&ts, NULL);
  }
}

/* Why socket() failed, with what to do when descriptors ran out. */
static const char* socketErrText(int e, char* buf, size_t len) {
  char eb[128], lim[80];
  if (e == EMFILE || e == ENFILE)
    snprintf(buf, len, "%s (%s, and no stranger's waiting connection is left to drop: this job needs more; raise it)",
             errText(e, eb, sizeof(eb)), gbFdLimitText(lim, sizeof(lim)));
  else
    snprintf(buf, len, "%s", errText(e, eb, sizeof(eb)));
  return buf;
}

gbResult_t gbSockListen(const gbSockAddr_t* addr, int* fdOut, gbSockAddr_t* boundOut) {
  char as[80], eb[256];
  *fdOut = -1;
  gbSockAddrString(addr, as, sizeof(as));
  int fd = openSocket(addr->sa.ss_family, NULL, NULL);
  if (fd < 0)
    return gbErrorSet(gbSystemError, "cannot create a socket to listen on %s: %s", as,
                      socketErrText(errno, eb, sizeof(eb)));
  int one = 1;
  /* A restarted job may reuse the port while old connections linger. */
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, (const struct sockaddr*)&addr->sa, addr->len) != 0) {
    int e = errno;
    close(fd);
    gbResult_t res = gbErrorSet(gbSystemError,
                                "cannot listen on %s: bind: %s (is the address this host's? is the port in use?)", as,
                                errText(e, eb, sizeof(eb)));
    errno = e; /* callers tell a taken port (EADDRINUSE) from the rest */
    return res;
  }
  if (listen(fd, SOMAXCONN > 1024 ? SOMAXCONN : 1024) != 0) {
    int e = errno;
    close(fd);
    return gbErrorSet(gbSystemError, "cannot listen on %s: %s", as, errText(e, eb, sizeof(eb)));
  }
  if (boundOut != NULL) {
    memset(boundOut, 0, sizeof(*boundOut));
    boundOut->len = sizeof(boundOut->sa);
    if (getsockname(fd, (struct sockaddr*)&boundOut->sa, &boundOut->len) != 0) {
      int e = errno;
      close(fd);
      return gbErrorSet(gbSystemError, "getsockname on the socket listening on %s: %s", as, errText(e, eb, sizeof(eb)));
    }
  }
  *fdOut = fd;
  return gbSuccess;
}

static int retryable(int e) {
  return e == ECONNREFUSED || e == ETIMEDOUT || e == ENETUNREACH || e == EHOSTUNREACH ||
         e == ECONNRESET || e == ECONNABORTED || e == EAGAIN || e == EINTR;
}

int gbSockConnectOnce(const gbSockAddr_t* addr, gbDeadline_t deadline, const atomic_int* abortFlag, int* fdOut) {
  int fd = openSocket(addr->sa.ss_family, &deadline, abortFlag);
  if (fd < 0) return errno;
  setNoDelay(fd);
  int e = 0;
  if (connect(fd, (const struct sockaddr*)&addr->sa, addr->len) != 0) {
    e = errno;
    while (e == EINPROGRESS || e == EINTR) {
      /* Poll before looking at the clock, so a refusal that is already
       * known is reported as such even at the deadline. */
      struct pollfd p = {fd, POLLOUT, 0};
      int rc = poll(&p, 1, gbDeadlineRemainingMs(deadline, POLL_CAP_MS));
      if (rc < 0 && errno != EINTR) { e = errno; break; }
      if (rc > 0) {
        socklen_t len = sizeof(e);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0) e = errno;
        break;
      }
      if (aborted(abortFlag) || gbDeadlinePassed(deadline)) { e = ETIMEDOUT; break; }
    }
  }
  if (e != 0) {
    close(fd);
    return e;
  }
  *fdOut = fd;
  return 0;
}

gbResult_t gbSockConnect(const gbSockAddr_t* addr, gbDeadline_t deadline, const atomic_int* abortFlag,
                         int* fdOut) {
  char as[80], eb[256];
  int64_t start = gbClockNowNs();
  int backoffMs = 1, lastErr = 0;
  *fdOut = -1;
  for (;;) {
    if (aborted(abortFlag))
      return gbErrorSet(gbRemoteError, "aborted while connecting to %s", gbSockAddrString(addr, as, sizeof(as)));
    lastErr = gbSockConnectOnce(addr, deadline, abortFlag, fdOut);
    if (lastErr == 0) return gbSuccess;
    if (!retryable(lastErr))
      return gbErrorSet(gbSystemError, "cannot connect to %s: %s", gbSockAddrString(addr, as, sizeof(as)),
                        socketErrText(lastErr, eb, sizeof(eb)));
    if (gbDeadlinePassed(deadline)) break;
    /* Back off before the next try (the peer may not listen yet), waking
     * every POLL_CAP_MS to notice an abort; never past the deadline. */
    int64_t wakeNs = gbClockNowNs() + (int64_t)backoffMs * 1000000;
    if (wakeNs > deadline.ns) wakeNs = deadline.ns;
    for (int64_t now = gbClockNowNs(); now < wakeNs && !aborted(abortFlag); now = gbClockNowNs()) {
      int64_t stepNs = wakeNs - now;
      if (stepNs > (int64_t)POLL_CAP_MS * 1000000) stepNs = (int64_t)POLL_CAP_MS * 1000000;
      struct timespec ts = {(time_t)(stepNs / 1000000000), (long)(stepNs % 1000000000)};
      nanosleep(&ts, NULL);
    }
    backoffMs = backoffMs * 2 > BACKOFF_CAP_MS ? BACKOFF_CAP_MS : backoffMs * 2;
  }
  if (aborted(abortFlag))
    return gbErrorSet(gbRemoteError, "aborted while connecting to %s", gbSockAddrString(addr, as, sizeof(as)));
  return gbErrorSet(gbTimeout,
                    "could not connect to %s within %.1f s (last error: %s); is the peer running and "
                    "listening there, and reachable from this host? GPUBRIDGE_TIMEOUT sets the limit",
                    gbSockAddrString(addr, as, sizeof(as)), (double)(gbClockNowNs() - start) / 1e9,
                    errText(lastErr, eb, sizeof(eb)));
}

gbResult_t gbSockAccept(int listenFd, int* fdOut, gbSockAddr_t* peerOut) {
  char eb[128];
  *fdOut = -1;
  for (;;) {
    gbSockAddr_t peer;
    memset(&peer, 0, sizeof(peer));
    peer.len = sizeof(peer.sa);
    int fd = accept4(listenFd, (struct sockaddr*)&peer.sa, &peer.len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      setNoDelay(fd);
      if (peerOut != NULL) *peerOut = peer;
      *fdOut = fd;
      errno = 0;
      return gbSuccess;
    }
    int e = errno;
    if (e == EAGAIN || e == EWOULDBLOCK) {
      errno = 0;
      return gbSuccess;
    }
    /* A connection that died in the queue, or a signal: try the next one. */
    if (e == EINTR || e == ECONNABORTED || e == EPROTO) continue;
    /* Out of descriptors or buffers: the connection stays queued until the
     * caller frees some (a stranger flood must not end a listener). */
    if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
      errno = e;
      return gbSuccess;
    }
    return gbErrorSet(gbSystemError, "accept: %s", errText(e, eb, sizeof(eb)));
  }
}

int64_t gbSockQueuedNs(int fd) {
  struct tcp_info ti;
  socklen_t len = sizeof(ti);
  memset(&ti, 0, sizeof(ti));
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 || len < sizeof(ti)) return 0;
  /* Both count from the connection's completion while nothing came since;
   * the smaller one never overstates. */
  uint32_t ms = ti.tcpi_last_data_recv < ti.tcpi_last_ack_recv ? ti.tcpi_last_data_recv : ti.tcpi_last_ack_recv;
  return (int64_t)ms * 1000000;
}

/* Writes errno e's text to err; errno stays e for callers that look at it. */
static ssize_t failWith(int e, char* err, size_t errLen) {
  char eb[128];
  if (err != NULL && errLen > 0) snprintf(err, errLen, "%s", errText(e, eb, sizeof(eb)));
  errno = e;
  return -1;
}

ssize_t gbSockTrySend(int fd, const void* buf, size_t len, char* err, size_t errLen) {
  for (;;) {
    ssize_t n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return failWith(errno, err, errLen);
  }
}

/* On end of stream errno is set to 0, so callers can tell it from a reset. */
ssize_t gbSockTryRecv(int fd, void* buf, size_t len, char* err, size_t errLen) {
  if (len == 0) return 0;
  for (;;) {
    ssize_t n = recv(fd, buf, len, MSG_DONTWAIT);
    if (n > 0) return n;
    if (n == 0) {
      if (err != NULL && errLen > 0) snprintf(err, errLen, "peer closed the connection");
      errno = 0;
      return -1;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return failWith(errno, err, errLen);
  }
}

/* The loop behind SendAll and RecvAll. */
static gbResult_t moveAll(int fd, char* buf, size_t len, int sending, gbDeadline_t deadline,
                          const atomic_int* abortFlag, const char* what) {
  char err[128];
  size_t done = 0;
  while (done < len) {
    ssize_t n = sending ? gbSockTrySend(fd, buf + done, len - done, err, sizeof(err))
                        : gbSockTryRecv(fd, buf + done, len - done, err, sizeof(err));
    if (n < 0)
      return gbErrorSet(gbRemoteError, "%s failed after %zu of %zu bytes: %s (the peer failed or was aborted; see its log)",
                        what, done, len, err);
    done += (size_t)n;
    if (done == len) break;
    if (n > 0) continue;
    if (aborted(abortFlag)) return gbErrorSet(gbRemoteError, "%s: aborted after %zu of %zu bytes", what, done, len);
    if (gbDeadlinePassed(deadline))
      return gbErrorSet(gbTimeout,
                        "%s did not complete before the deadline (%zu of %zu bytes %s; is the peer "
                        "stopped or overloaded? GPUBRIDGE_TIMEOUT sets the limit)",
                        what, done, len, sending ? "sent" : "received");
    struct pollfd p = {fd, (short)(sending ? POLLOUT : POLLIN), 0};
    if (poll(&p, 1, gbDeadlineRemainingMs(deadline, POLL_CAP_MS)) < 0 && errno != EINTR) {
      char eb[128];
      return gbErrorSet(gbSystemError, "%s: poll: %s", what, errText(errno, eb, sizeof(eb)));
    }
  }
  return gbSuccess;
}

gbResult_t gbSockSendAll(int fd, const void* buf, size_t len, gbDeadline_t deadline,
                         const atomic_int* abortFlag, const char* what) {
  return moveAll(fd, (char*)buf, len, 1, deadline, abortFlag, what);
}

gbResult_t gbSockRecvAll(int fd, void* buf, size_t len, gbDeadline_t deadline,
                         const atomic_int* abortFlag, const char* what) {
  return moveAll(fd, (char*)buf, len, 0, deadline, abortFlag, what);
}

void gbSockClose(int fd) {
  if (fd >= 0) close(fd);
}
