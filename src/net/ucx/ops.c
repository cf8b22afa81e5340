/* The UCX transport's ops table (docs/UCX.md). ask and tell are the TCP
 * transport's: they go to the listener, which is TCP's. */
#include "net/ucx/ucx.h"

const gbNetOps_t gbNetUcxOps = {
    .name = "ucx",
    .listen = gbNetUcxListen,
    .listenerAddr = gbNetUcxListenerAddr,
    .listenerServe = gbNetUcxListenerServe,
    .accept = gbNetUcxAccept,
    .listenerFail = gbNetUcxListenerFail,
    .listenerClose = gbNetUcxListenerClose,
    .connect = gbNetUcxConnect,
    .isend = gbNetUcxIsend,
    .irecv = gbNetUcxIrecv,
    .test = gbNetUcxTest,
    .shutdown = gbNetUcxShutdown,
    .told = gbNetUcxTold,
    .ask = gbNetUcxAsk,
    .tell = gbNetUcxTell,
    .close = gbNetUcxClose,
    .pollFds = gbNetUcxPollFds,
    .reqInfo = gbNetUcxReqInfo,
    .memRegister = gbNetUcxMemRegister,
    .memDeregister = gbNetUcxMemDeregister,
};
