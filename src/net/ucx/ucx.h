/* The UCX transport's private types, shared by its files: the library and
 * the process's UCP context (load.c), the listener and connection set-up
 * (conn.c) and message progress (xfer.c).
 *
 * A UCX connection is a pair: a control connection of the TCP transport
 * (one socket, made and authenticated by the TCP transport's own code:
 * hello with the secret, the listener, the answer, ask and tell) and a UCP
 * endpoint on the communicator's worker (worker.c). The two sides trade worker
 * addresses and the 64-bit tag each receives on over the control socket;
 * the connecting side then proves the job secret again on UCX itself. After
 * that the control socket carries nothing, but stays open: its end is a
 * second sign, beside UCX's peer-failure callback, that the peer is gone
 * or shut the connection down. */
#ifndef GB_NET_UCX_UCX_H
#define GB_NET_UCX_UCX_H

#include <stdatomic.h>
#include "net/net.h"
#include "net/ucx/api.h"

typedef struct {
  gbUcpApi_t api;
  ucp_context_h context;
  char from[256];    /* the library's file name as loaded */
  unsigned version[3];
  int tlsTcp;        /* this process set UCX's TLS to tcp (simulated hosts) */
} gbNetUcxLib_t;

/* UCX, loaded and its context made once per process: the same table or the
 * same failure (recorded again) on every call. */
gbResult_t gbNetUcxLib(const gbNetUcxLib_t** out);

/* A communicator's worker (worker.c). */
typedef struct gbNetUcxWorker {
  const gbNetUcxLib_t* lib;
  uint64_t commHash;
  int refs;                  /* under worker.c's lock */
  ucp_worker_h h;
  struct gbNetUcxWorker* next;
} gbNetUcxWorker_t;

/* Progress calls at most per progress (each one moves what UCX has). */
#define GB_NET_UCX_PROGRESS_MAX 64

/* The communicator's worker, made on first use; one reference more. */
gbResult_t gbNetUcxWorkerGet(const gbNetUcxLib_t* lib, uint64_t commHash, gbNetUcxWorker_t** out);
/* One reference less; the last destroys the worker. */
void gbNetUcxWorkerPut(gbNetUcxWorker_t* w);
/* Moves what the worker has, for every connection on it. */
void gbNetUcxWorkerProgress(gbNetUcxWorker_t* w);

typedef struct gbNetUcxConn gbNetUcxConn_t;

/* A request: UCX's own (NULL when UCX finished it at once) and what its
 * callback reports. */
typedef struct gbNetUcxReq {
  const gbNetOps_t* ops; /* first: gbNetWaitAll dispatches on it */
  gbNetUcxConn_t* conn;
  struct gbNetUcxReq *prev, *next; /* the connection's posted requests */
  void* ucx;
  size_t bytes;
  ucp_tag_recv_info_t info; /* a receive: what arrived */
  int isSend;
  /* Set by UCX's callback, which may run on another thread's progress of
   * the shared worker: status first, then done (release). */
  atomic_int done;
  ucs_status_t status;
} gbNetUcxReq_t;

struct gbNetUcxConn {
  const gbNetUcxLib_t* lib;
  gbNetConn_t* ctl;          /* the TCP transport's control connection */
  int ctlFd;                 /* its socket */
  gbNetUcxWorker_t* w;       /* the communicator's */
  ucp_ep_h ep;
  ucp_tag_t sendTag, recvTag;
  int peerRank;
  char group[48];
  atomic_int shut;           /* shutdown() was called (maybe from another thread) */
  atomic_int epStatus;       /* set by UCX's peer-failure callback (any thread's progress) */
  int64_t ctlEndNs;          /* when the control socket's end was seen (0: not) */
  int64_t epFailNs;          /* when the peer-failure callback's status was seen (0: not) */
  gbResult_t err;            /* sticky: every later call returns it */
  char errMsg[512];
  int blamed;
  gbNetCause_t blame;
  gbNetUcxReq_t *head, *tail; /* posted, not yet freed */
  gbNetUcxReq_t* freeList;
  int nfree;
};

/* Records the connection's sticky error once (text) with whom it blames
 * (NULL: nobody), and notes it for gbNetFailureCause. Returns the error. */
gbResult_t gbNetUcxConnFail(gbNetUcxConn_t* c, gbResult_t code, const char* text, const gbNetCause_t* blame);
/* The error a UCX status stands for, named in text: what failed, the peer,
 * UCX's words; blamed on the peer where the status speaks of it, on nobody
 * (this rank) where it speaks of this rank's resources. */
gbResult_t gbNetUcxStatusFail(gbNetUcxConn_t* c, ucs_status_t st, const char* what);
/* This rank shut the connection down (or aborted) while what: its own
 * doing, blamed on nobody. */
gbResult_t gbNetUcxShutHere(gbNetUcxConn_t* c, const char* what);
/* Whether a status means the peer is gone (reset, timeout, link or
 * endpoint failure). */
int gbNetUcxPeerGone(ucs_status_t st);
/* Whether the control socket has ended (the peer closed or shut it down). */
int gbNetUcxCtlEnded(gbNetUcxConn_t* c);

gbResult_t gbNetUcxListen(const gbSockAddr_t* addr, const uint8_t* secret, uint64_t commHash, gbNetListener_t** out);
gbResult_t gbNetUcxListenerAddr(gbNetListener_t* l, gbSockAddr_t* out);
gbResult_t gbNetUcxListenerServe(gbNetListener_t* l);
gbResult_t gbNetUcxAccept(gbNetListener_t* l, int srcRank, int tag, gbNetLabel_t label, gbDeadline_t deadline,
                          const atomic_int* abortFlag, gbNetConn_t** out);
void gbNetUcxListenerFail(gbNetListener_t* l, const gbNetCause_t* cause);
void gbNetUcxListenerClose(gbNetListener_t* l);
gbResult_t gbNetUcxConnect(const gbSockAddr_t* addr, const gbNetHello_t* hello, gbNetLabel_t label,
                           gbDeadline_t deadline, const atomic_int* abortFlag, gbNetConn_t** out);
int gbNetUcxAsk(const gbSockAddr_t* addr, const gbNetHello_t* hello, gbDeadline_t deadline, gbNetCause_t* out);
void gbNetUcxTell(const gbSockAddr_t* addr, const gbNetHello_t* hello, const gbNetCause_t* cause,
                  gbDeadline_t deadline);
void gbNetUcxShutdown(gbNetConn_t* c, const gbNetCause_t* cause);
int gbNetUcxTold(gbNetConn_t* c, gbNetCause_t* out);
void gbNetUcxClose(gbNetConn_t* c);

gbResult_t gbNetUcxIsend(gbNetConn_t* c, const void* buf, size_t bytes, gbNetReq_t** req);
gbResult_t gbNetUcxIrecv(gbNetConn_t* c, void* buf, size_t bytes, gbNetReq_t** req);
gbResult_t gbNetUcxTest(gbNetReq_t* req, int* done);
int gbNetUcxPollFds(gbNetReq_t* req, uint64_t round, struct pollfd* fds, int max);
void gbNetUcxReqInfo(gbNetReq_t* req, gbNetLabel_t* label, int* isSend, size_t* bytes);
/* Posts one message on the connection's tags (set-up uses it for the proof)
 * and waits for it until the deadline. */
gbResult_t gbNetUcxWaitOne(gbNetUcxConn_t* c, gbNetUcxReq_t* r, gbDeadline_t deadline, const atomic_int* abortFlag);
/* Registered memory (mem.c): gbNetOps_t.memRegister and memDeregister, and
 * the handle of the region holding [buf, buf + bytes), NULL if none. */
gbResult_t gbNetUcxMemRegister(void* base, size_t bytes, void** handle);
void gbNetUcxMemDeregister(void* handle);
ucp_mem_h gbNetUcxMemFind(const void* buf, size_t bytes);

/* Frees every request left, UCX's first (close). */
void gbNetUcxReqsRelease(gbNetUcxConn_t* c);

#endif
