/* Point-to-point transports behind one ops table, shaped like NCCL's net
 * plugin: a listener, connections that carry a hello with the job secret,
 * and non-blocking isend/irecv/test. A connection to a peer is several
 * sockets; a message is cut into pieces of at least 64 KiB spread over them.
 *
 * Both sides of a connection post sends and receives of the same sizes in the
 * same order (collective semantics), so no headers travel with the data. */
#ifndef GB_NET_NET_H
#define GB_NET_NET_H

#include <poll.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "gpubridge/gpubridge.h"
#include "base/clock.h"
#include "os/socket.h"

#define GB_NET_SECRET_BYTES 32

/* What the connecting side says first on every socket. A peer whose hello
 * lacks the magic or the secret is refused, logged, and dropped. */
typedef struct {
  uint64_t magic;                          /* GB_NET_HELLO_MAGIC */
  uint8_t secret[GB_NET_SECRET_BYTES];     /* the job secret */
  uint64_t commHash;                       /* which communicator */
  int32_t srcRank;                         /* the connecting rank */
  int32_t tag;                             /* which group: world, island, bridge */
  int32_t sockIndex;                       /* 0..nsocks-1 */
  int32_t nsocks;
} gbNetHello_t;
#define GB_NET_HELLO_MAGIC 0x67627269646765ull /* "gbridge" */
/* Tags the transport keeps (groups use small ones), which no accept takes:
 * a question to a failed rank's listener (ask), and a failed rank's notice
 * to a rank that waits for its connection (tell). */
#define GB_NET_TAG_ASK 0x7a000001
#define GB_NET_TAG_TELL 0x7a000002

typedef struct gbNetListener gbNetListener_t;
typedef struct gbNetConn gbNetConn_t;
/* Every transport's struct gbNetReq begins with `const gbNetOps_t* ops`
 * (its own table), so gbNetWaitAll can serve requests of any transport. */
typedef struct gbNetReq gbNetReq_t;

/* Where a connection leads, for error messages. */
typedef struct {
  int peerRank;
  const char* group; /* "bridge", "island nvidia", "world" */
  int sameHost;      /* the peer runs on this host: the transport may use shared memory */
} gbNetLabel_t;

/* Why a rank shuts its connections down, told to each peer with the
 * shutdown, so that a peer whose first failure is that shutdown names the
 * rank that actually failed (died, stalled, mismatched) instead of a healthy
 * rank that only shut down after it. A peer that dies tells nothing: its
 * close comes without a cause. Fixed size: it travels as bytes. */
typedef struct {
  int32_t faultRank;  /* the rank that failed first, as far as the sender knows */
  int32_t seenBy;     /* the rank whose failure text follows (the sender, or who told it) */
  int32_t code;       /* gbResult_t of that failure */
  int32_t reserved;
  char text[240];     /* seenBy's text of the failure, NUL-terminated */
} gbNetCause_t;

/* The most pollfds one connection lists (see pollFds). */
#define GB_NET_MAX_POLLFDS 64

typedef struct gbNetOps {
  const char* name; /* "tcp" */
  /* Listens on addr (port 0: any free port). The listener knows the secret and
   * the commHash it accepts. */
  gbResult_t (*listen)(const gbSockAddr_t* addr, const uint8_t* secret, uint64_t commHash,
                       gbNetListener_t** out);
  gbResult_t (*listenerAddr)(gbNetListener_t* l, gbSockAddr_t* out);
  /* Accepts and checks pending connections without blocking: refuses
   * strangers (logged), files good sockets by (srcRank, tag). */
  gbResult_t (*listenerServe)(gbNetListener_t* l);
  /* Waits (serving the listener) until the connection from srcRank for tag
   * is complete; fails at once when srcRank told it failed (tell). */
  gbResult_t (*accept)(gbNetListener_t* l, int srcRank, int tag, gbNetLabel_t label,
                       gbDeadline_t deadline, const atomic_int* abortFlag, gbNetConn_t** out);
  /* This rank failed (cause: who failed first): a connection filed and not
   * yet accepted, or filed from now on, is answered with the cause instead
   * of a bare close, so its peer names that rank. */
  void (*listenerFail)(gbNetListener_t* l, const gbNetCause_t* cause);
  void (*listenerClose)(gbNetListener_t* l);

  /* Opens hello->nsocks sockets to addr, each sending the hello. */
  gbResult_t (*connect)(const gbSockAddr_t* addr, const gbNetHello_t* hello, gbNetLabel_t label,
                        gbDeadline_t deadline, const atomic_int* abortFlag, gbNetConn_t** out);

  gbResult_t (*isend)(gbNetConn_t* c, const void* buf, size_t bytes, gbNetReq_t** req);
  gbResult_t (*irecv)(gbNetConn_t* c, void* buf, size_t bytes, gbNetReq_t** req);
  /* Makes progress; *done = 1 when req finished (then req is freed). */
  gbResult_t (*test)(gbNetReq_t* req, int* done);
  /* Makes a blocked peer see the end at once (shutdown); safe from any thread
   * while another uses the connection. cause (NULL: none) is what the peer
   * hears of why; the first shutdown of a connection decides it. tcp tells it
   * only over shared memory (tcp/conn.c says why); a peer over sockets hears
   * the end without a cause. */
  void (*shutdown)(gbNetConn_t* c, const gbNetCause_t* cause);
  /* Whether the peer has shut the connection down telling a cause (tcp: over
   * shared memory only); fills *out, sanitized. Reads only; safe after this
   * side's own shutdown. */
  int (*told)(gbNetConn_t* c, gbNetCause_t* out);
  /* Asks the rank listening at addr why it failed: one connection with hello
   * (whose tag no accept takes), which that rank's listener answers with its
   * cause once it failed (listenerFail). Returns 1 with *out (sanitized) when
   * it answered so before the deadline; 0 when it is gone, answered otherwise
   * or stayed silent. Quiet: records and logs no error. */
  int (*ask)(const gbSockAddr_t* addr, const gbNetHello_t* hello, gbDeadline_t deadline, gbNetCause_t* out);
  /* This rank failed before it connected to the rank listening at addr: one
   * connection carrying hello (tag GB_NET_TAG_TELL) and the cause, so that
   * rank's accept of this rank fails at once with it instead of waiting out
   * its deadline. Best effort and quiet. */
  void (*tell)(const gbSockAddr_t* addr, const gbNetHello_t* hello, const gbNetCause_t* cause, gbDeadline_t deadline);
  void (*close)(gbNetConn_t* c);

  /* For gbNetWaitAll. pollFds appends the sockets req's connection waits on
   * (POLLIN where receives are pending, POLLOUT where sends are), at most
   * min(max, GB_NET_MAX_POLLFDS), and returns how many; a connection already
   * listed in this round (the same round number) adds none, so many requests
   * on one connection cost one set of entries. -1: the connection has
   * nothing to poll (a shared-memory ring): test it again after a backoff.
   * reqInfo says where req goes, for messages. */
  int (*pollFds)(gbNetReq_t* req, uint64_t round, struct pollfd* fds, int max);
  void (*reqInfo)(gbNetReq_t* req, gbNetLabel_t* label, int* isSend, size_t* bytes);

  /* Optional (NULL: the transport moves any memory as it is): registers
   * [base, base + bytes) with the network for this process, so messages
   * that lie inside it (isend/irecv find it by address) move with no copy
   * or registration on the way (RDMA). *handle is for memDeregister, before
   * the memory goes. A failure is the caller's to report; it may go on
   * unregistered. */
  gbResult_t (*memRegister)(void* base, size_t bytes, void** handle);
  void (*memDeregister)(void* handle);
} gbNetOps_t;

extern const gbNetOps_t gbNetTcpOps;
extern const gbNetOps_t gbNetUcxOps;

/* Socket i of a TCP connection (the UCX transport watches its control
 * connection's socket for the peer's end). */
int gbNetTcpConnFd(gbNetConn_t* c, int i);

/* The transport named by a gbTransport_t. */
const gbNetOps_t* gbNetGet(int transport);

/* Waits for every request (freeing each), polling the connections' sockets,
 * until the deadline or abort. On failure the remaining requests are
 * abandoned with their connections; the message names the peer and group. */
gbResult_t gbNetWaitAll(gbNetReq_t** reqs, int n, gbDeadline_t deadline,
                        const atomic_int* abortFlag);

/* Which rank a failure of this thread's requests blames. A transport (or
 * gbNetWaitAll) that fails notes, with its error text, the cause: seenBy -1
 * when this rank saw the failure itself (a peer closed without a cause, or
 * stalled: faultRank is that peer), else the cause a peer relayed with its
 * shutdown. gbNetFailureCause fills *out and returns 1 when text is the text
 * of this thread's last noted failure, else returns 0; either way the note is used up. */
void gbNetNoteFailure(const char* text, const gbNetCause_t* cause);
int gbNetFailureCause(const char* text, gbNetCause_t* out);
/* The error text for a connection that peerRank shut down with cause (group:
 * "world", ...), ending with what (" (shared memory)", or ""). */
void gbNetCauseText(char* out, size_t len, const char* group, int peerRank, const gbNetCause_t* cause,
                    const char* what);
/* A cause read from a peer made safe to print (text terminated, ranks kept
 * only when plausible); returns 0 if it is not a cause at all. */
int gbNetCauseSanitize(gbNetCause_t* cause);

#endif
