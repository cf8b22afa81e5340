/* Sockets: addresses, interface selection (NCCL's IFNAME syntax), listening,
 * connecting with retry, non-blocking I/O. Every blocking step takes a deadline
 * and an abort flag. */
#ifndef GB_OS_SOCKET_H
#define GB_OS_SOCKET_H

#include <stdatomic.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include "gpubridge/gpubridge.h"
#include "base/clock.h"

typedef struct {
  struct sockaddr_storage sa;
  socklen_t len;
} gbSockAddr_t;

/* "host:port", "[v6]:port" or "host" (then port = defaultPort). host may be a
 * name; it is resolved. */
gbResult_t gbSockAddrParse(const char* text, int defaultPort, gbSockAddr_t* out);
/* "1.2.3.4:5678" / "[::1]:5678" into buf. Returns buf. */
const char* gbSockAddrString(const gbSockAddr_t* a, char* buf, size_t len);
/* The address alone, without the port: "10.0.0.1", "[fe80::1]". */
const char* gbSockAddrHost(const gbSockAddr_t* a, char* buf, size_t len);
int gbSockAddrPort(const gbSockAddr_t* a);
void gbSockAddrSetPort(gbSockAddr_t* a, int port);
/* Whether a is an address of this host (a socket can be bound to it). */
int gbSockAddrIsLocal(const gbSockAddr_t* a);
/* Whether a is a loopback address (127.0.0.0/8, ::1). */
int gbSockAddrIsLoopback(const gbSockAddr_t* a);

/* The address of this host's interface chosen by spec (GPUBRIDGE_SOCKET_IFNAME
 * syntax: comma-separated prefixes; a leading ^ excludes them; a leading =
 * asks for exact names). An empty spec prefers any interface except lo and
 * docker*, then lo. *ifname receives the interface name (may be NULL). */
gbResult_t gbSockFindInterface(const char* spec, gbSockAddr_t* out, char* ifname, size_t ifnameLen);

/* A listening, non-blocking socket bound to addr (port 0: any free port);
 * *boundOut receives the actual address. When bind fails, errno keeps its
 * cause (EADDRINUSE: the port is taken). */
gbResult_t gbSockListen(const gbSockAddr_t* addr, int* fdOut, gbSockAddr_t* boundOut);
/* Connects to addr, retrying refused connections until the deadline or abort.
 * The returned socket is non-blocking with TCP_NODELAY. */
gbResult_t gbSockConnect(const gbSockAddr_t* addr, gbDeadline_t deadline,
                         const atomic_int* abortFlag, int* fdOut);
/* One attempt, quiet (no error recorded or logged): 0 with *fdOut set, else
 * the errno of the failure (the socket is closed). A pending connect is
 * awaited until the deadline or abort. */
int gbSockConnectOnce(const gbSockAddr_t* addr, gbDeadline_t deadline, const atomic_int* abortFlag, int* fdOut);
/* Accepts one pending connection if there is one. *fdOut = -1 when none
 * (errno 0) or when the process or system is out of descriptors or buffers
 * (errno EMFILE, ENFILE, ENOBUFS or ENOMEM): a temporary state, the
 * connection stays queued; the caller frees some or tries again later. */
gbResult_t gbSockAccept(int listenFd, int* fdOut, gbSockAddr_t* peerOut);
/* How long ago an accepted connection last heard from its peer (TCP_INFO):
 * for one that sent nothing, since the kernel completed it, including the
 * time it waited in the accept queue; 0 when unknown. */
int64_t gbSockQueuedNs(int fd);

/* Sends/receives exactly len bytes, waiting with poll() up to the deadline.
 * what names the exchange in error messages ("hello to rank 3"). */
gbResult_t gbSockSendAll(int fd, const void* buf, size_t len, gbDeadline_t deadline,
                         const atomic_int* abortFlag, const char* what);
gbResult_t gbSockRecvAll(int fd, void* buf, size_t len, gbDeadline_t deadline,
                         const atomic_int* abortFlag, const char* what);

/* One non-blocking attempt: bytes moved (>= 0, 0 meaning "would block"), or
 * -1 with the cause written to err (peer closed, reset, ...). */
ssize_t gbSockTrySend(int fd, const void* buf, size_t len, char* err, size_t errLen);
ssize_t gbSockTryRecv(int fd, void* buf, size_t len, char* err, size_t errLen);

void gbSockClose(int fd);

/* This host's name, and a 64-bit id that is the same for every process on
 * this host (from the hostname and /etc/machine-id, or GPUBRIDGE_SIM_HOST). */
const char* gbHostName(void);
uint64_t gbHostId(void);

/* Fills buf with cryptographically random bytes (getrandom). */
gbResult_t gbRandomBytes(void* buf, size_t len);

#endif
