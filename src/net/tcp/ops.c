/* The TCP transport's ops table. */
#include "net/tcp/tcp.h"

const gbNetOps_t gbNetTcpOps = {
    .name = "tcp",
    .listen = gbNetTcpListen,
    .listenerAddr = gbNetTcpListenerAddr,
    .listenerServe = gbNetTcpListenerServe,
    .accept = gbNetTcpAccept,
    .listenerFail = gbNetTcpListenerFail,
    .listenerClose = gbNetTcpListenerClose,
    .connect = gbNetTcpConnect,
    .isend = gbNetTcpIsend,
    .irecv = gbNetTcpIrecv,
    .test = gbNetTcpTest,
    .shutdown = gbNetTcpShutdown,
    .told = gbNetTcpShmTold,
    .ask = gbNetTcpAsk,
    .tell = gbNetTcpTell,
    .close = gbNetTcpClose,
    .pollFds = gbNetTcpPollFds,
    .reqInfo = gbNetTcpReqInfo,
};
