/* The TCP transport's private types, shared by its files: the listener
 * (listener.c), connections (conn.c) and message progress (xfer.c). */
#ifndef GB_NET_TCP_TCP_H
#define GB_NET_TCP_TCP_H

#include <stdatomic.h>
#include "net/net.h"

#define GB_NET_TCP_MAX_SOCKS GB_NET_MAX_POLLFDS
/* Smallest piece a message is cut into. */
#define GB_NET_TCP_MIN_PIECE ((size_t)64 * 1024)

enum { GB_DIR_SEND = 0, GB_DIR_RECV = 1 };

struct gbNetReq {
  const gbNetOps_t* ops; /* first: gbNetWaitAll dispatches on it */
  gbNetConn_t* conn;
  struct gbNetReq *prev, *next; /* the connection's queue of this direction */
  char* buf;
  size_t bytes;
  size_t piece;  /* bytes per piece; piece k travels on socket k */
  int npieces;   /* <= nsocks, since piece >= bytes / nsocks */
  int piecesLeft;
  int dir;
  int done;
  size_t moved;  /* shared-memory path: bytes moved so far */
};

typedef struct gbNetShm gbNetShm_t;

typedef struct {
  int fd;
  gbNetReq_t* cur[2]; /* next request with a piece for this socket, per direction */
  size_t off[2];      /* bytes of that piece already moved */
} gbNetTcpSock_t;

struct gbNetConn {
  int nsocks;
  gbNetTcpSock_t* socks;
  gbNetReq_t *head[2], *tail[2]; /* posted, not yet freed, per direction */
  gbNetReq_t* freeList;
  int nfree;
  int peerRank;
  char group[48];
  uint64_t pollRound;
  gbNetShm_t* shm;      /* same-host peer: messages go through shared-memory rings */
  unsigned idle;        /* shared-memory progress calls that moved nothing */
  atomic_int shut;      /* shutdown() was called (maybe from another thread) */
  gbResult_t err;       /* sticky: every later call returns it */
  char errMsg[512];
  int blamed;           /* blame is set: the cause behind err (gbNetNoteFailure) */
  gbNetCause_t blame;
  size_t answerLeft;    /* bytes of the accepting side's answer still to read on socket 0 (answer.c) */
  char answerBuf[264];
};

gbResult_t gbNetTcpListen(const gbSockAddr_t* addr, const uint8_t* secret, uint64_t commHash,
                          gbNetListener_t** out);
gbResult_t gbNetTcpListenerAddr(gbNetListener_t* l, gbSockAddr_t* out);
gbResult_t gbNetTcpListenerServe(gbNetListener_t* l);
gbResult_t gbNetTcpAccept(gbNetListener_t* l, int srcRank, int tag, gbNetLabel_t label,
                          gbDeadline_t deadline, const atomic_int* abortFlag, gbNetConn_t** out);
void gbNetTcpListenerClose(gbNetListener_t* l);

/* Takes ownership of fds[0..nsocks-1] (closed on failure too). */
gbResult_t gbNetTcpConnCreate(const int* fds, int nsocks, gbNetLabel_t label, gbNetConn_t** out);
gbResult_t gbNetTcpConnect(const gbSockAddr_t* addr, const gbNetHello_t* hello, gbNetLabel_t label,
                           gbDeadline_t deadline, const atomic_int* abortFlag, gbNetConn_t** out);
void gbNetTcpShutdown(gbNetConn_t* c, const gbNetCause_t* cause);
void gbNetTcpClose(gbNetConn_t* c);

gbResult_t gbNetTcpIsend(gbNetConn_t* c, const void* buf, size_t bytes, gbNetReq_t** req);
gbResult_t gbNetTcpIrecv(gbNetConn_t* c, void* buf, size_t bytes, gbNetReq_t** req);
gbResult_t gbNetTcpTest(gbNetReq_t* req, int* done);
int gbNetTcpPollFds(gbNetReq_t* req, uint64_t round, struct pollfd* fds, int max);
void gbNetTcpReqInfo(gbNetReq_t* req, gbNetLabel_t* label, int* isSend, size_t* bytes);
/* Shared memory for a same-host peer (shm.c), set up over socket 0 right
 * after the sockets: the connecting side offers a segment (or declines),
 * the accepting side answers. Either side may fall back to TCP. */
gbResult_t gbNetTcpShmOffer(gbNetConn_t* c, gbDeadline_t deadline, const atomic_int* abortFlag);
gbResult_t gbNetTcpShmAnswer(gbNetConn_t* c, gbDeadline_t deadline, const atomic_int* abortFlag);
/* The accepting side's answer on socket 0 (answer.c): every connection
 * waits for it in connect. */
enum { GB_NET_ANSWER_TCP = 1, GB_NET_ANSWER_SHM = 2, GB_NET_ANSWER_REFUSED = 3 };
gbResult_t gbNetTcpAnswerSend(gbNetConn_t* c, int status, gbDeadline_t deadline, const atomic_int* abortFlag);
/* The connecting side: *status TCP or SHM; a refusal, a close or silence
 * until the deadline fails the connection, naming
 * the rank at fault. */
gbResult_t gbNetTcpAnswerRead(gbNetConn_t* c, gbDeadline_t deadline, const atomic_int* abortFlag, int* status);
/* Over TCP alone: the answer is read later (answerLeft), before socket 0's
 * first received data; AnswerPoll reads what has come without blocking and
 * fails the connection on a refusal or a close. */
void gbNetTcpAnswerExpect(gbNetConn_t* c);
gbResult_t gbNetTcpAnswerPoll(gbNetConn_t* c);
/* A failed listener's answer to a filed socket 0 it will never accept:
 * refused, with cause; never blocks. */
void gbNetTcpAnswerRefuse(int fd, const gbNetCause_t* cause);
/* Closes a socket the listener answered or filed, reading first what the
 * peer sent, so the peer sees an orderly end after the answer. */
void gbNetTcpAnswerClose(int fd);
/* From then on the listener refuses every connection it filed or files
 * (gbNetOps_t.listenerFail). */
void gbNetTcpListenerFail(gbNetListener_t* l, const gbNetCause_t* cause);
/* gbNetOps_t.ask: a connection whose only message is the answer. */
int gbNetTcpAsk(const gbSockAddr_t* addr, const gbNetHello_t* hello, gbDeadline_t deadline, gbNetCause_t* out);
/* gbNetOps_t.tell: the hello, then the cause, on one socket. */
void gbNetTcpTell(const gbSockAddr_t* addr, const gbNetHello_t* hello, const gbNetCause_t* cause, gbDeadline_t deadline);
/* The cause a filed tell's socket carries after its hello, once all of it
 * arrived (peeked: it stays for the next look); 0 before. */
int gbNetTcpToldOn(int fd, gbNetCause_t* out);

/* Moves what the rings allow for the queued requests, both directions. */
gbResult_t gbNetTcpShmProgress(gbNetConn_t* c);
/* Leaves cause (may be NULL) in the segment for the peer, then marks our
 * ring closed. */
void gbNetTcpShmShutdown(gbNetConn_t* c, const gbNetCause_t* cause);
/* The cause the peer left in the segment when it shut down, if any. */
int gbNetTcpShmTold(gbNetConn_t* c, gbNetCause_t* out);
void gbNetTcpShmClose(gbNetConn_t* c);

/* Records the connection's sticky error once (text) with whom it blames
 * (NULL: nobody, e.g. this rank's own shutdown), and notes it for
 * gbNetFailureCause. Returns the error. */
gbResult_t gbNetTcpConnFail(gbNetConn_t* c, gbResult_t code, const char* text, const gbNetCause_t* blame);

/* Frees a request (to the connection's free list). */
void gbNetTcpReqFree(gbNetConn_t* c, gbNetReq_t* r);

#endif
