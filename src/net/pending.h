/* The table of accepted connections that have not yet sent their whole
 * first message (a rank's hello, the root's hello and probe), shared by
 * every listener: accepting in bursts without ever blocking, reading each
 * message bit by bit, refusing the silent after GB_NET_PENDING_IDLE_NS, and
 * making room by the rule of net/strangers.h. What a message must hold is
 * the owner's: callbacks judge it. */
#ifndef GB_NET_PENDING_H
#define GB_NET_PENDING_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "net/net.h"
#include "net/strangers.h"

/* Connections waiting beyond this many make room by dropping the oldest. */
#define GB_NET_PENDING_MAX 1024
/* Connections accepted per serve, so messages are read between bursts. */
#define GB_NET_ACCEPT_BURST 64
/* A connection silent this long without its whole message is refused. */
#define GB_NET_PENDING_IDLE_NS (10LL * 1000000000LL)

typedef struct {
  int64_t since;           /* first: gbNetStrangersOldest reads it */
  int fd;
  gbSockAddr_t peer;
  size_t got;              /* bytes of msg read so far */
  unsigned char msg[];     /* ops->msgBytes; memcpy out, it may be unaligned */
} gbNetPendingConn_t;

typedef struct {
  size_t msgBytes;         /* what a connection sends before it is judged */
  const char* msgName;     /* "a full hello", for the eviction line */
  const char* floodWhy;    /* why the oldest goes when too many wait */
  const char* logPrefix;   /* of the refusal log (net/strangers.h) */
  const char* logSuffix;
  /* After each read: NULL, or why to refuse what arrived so far. */
  const char* (*check)(void* ctx, const gbNetPendingConn_t* c, char* why, size_t len);
  /* The whole message passed check: NULL when the owner took c->fd, else
   * why to refuse it. */
  const char* (*take)(void* ctx, const gbNetPendingConn_t* c, char* why, size_t len);
  /* The refusal text of a peer that closed (err: the cause) or went silent. */
  void (*closedWhy)(const gbNetPendingConn_t* c, const char* err, char* why, size_t len);
  void (*idleWhy)(const gbNetPendingConn_t* c, char* why, size_t len);
} gbNetPendingOps_t;

typedef struct {
  const gbNetPendingOps_t* ops;
  void* ctx;               /* passed to ops' callbacks */
  gbNetStrangers_t strangers;
  int64_t pausedUntil;     /* accept() ran out of descriptors: not before this */
  size_t stride;           /* bytes per entry of conns */
  unsigned char* conns;    /* n entries of stride bytes */
  struct pollfd* pfd;      /* pfd[0]: the listening socket; pfd[1 + i]: conns i */
  int n, cap;
} gbNetPending_t;

/* Listens on addr (*fd, *bound: the socket and where it is bound) with an
 * empty table; on failure nothing is left open (errno: the bind's cause). */
gbResult_t gbNetPendingListen(gbNetPending_t* t, const gbNetPendingOps_t* ops, void* ctx, const gbSockAddr_t* addr,
                              int* fd, gbSockAddr_t* bound);
/* Refuses every waiting connection (why) and frees the table; the
 * listening socket stays the owner's to close. */
void gbNetPendingFini(gbNetPending_t* t, const char* why);
/* One poll() over the listening socket (unless accepting is paused) and
 * every waiting connection; on failure no event is left set (errno says why). */
int gbNetPendingPoll(gbNetPending_t* t, int64_t now, int timeoutMs);
/* The longest a caller may sleep on pfd: capMs, or less while paused. */
int gbNetPendingSleepMs(const gbNetPending_t* t, int64_t now, int capMs);
/* After a poll: reads what arrived, refuses the silent, accepts a burst. */
void gbNetPendingServe(gbNetPending_t* t, int64_t now);

/* Compares two job secrets in constant time, so a prober learns nothing. */
int gbNetSecretEqual(const uint8_t* a, const uint8_t* b);

#endif
