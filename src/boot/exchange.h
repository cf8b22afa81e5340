/* A rank's side of the rendezvous: send my probe to the root, receive the one
 * verdict. */
#ifndef GB_BOOT_EXCHANGE_H
#define GB_BOOT_EXCHANGE_H

#include <stdatomic.h>

#include "boot/probe.h"
#include "boot/uniqueid.h"

/* On success *probesOut holds the nranks validated probes, indexed by rank
 * (free() it). Otherwise the verdict's error, with its text recorded as the
 * last error (the same bytes on every rank). Connecting is retried until the
 * timeout; the verdict is awaited a little longer than the root's deadline. */
gbResult_t gbBootExchange(const gbBootId_t* id, const gbProbe_t* mine, double timeoutSec,
                          const atomic_int* abortFlag, gbProbe_t** probesOut);

/* A process that cannot join tells the root why (a probe of kind
 * GB_PROBE_REPORT: its rank, or -1 when unknown, the world size it was
 * given, and problem), so every rank fails at once with one text naming it;
 * returns the verdict's error with that text recorded (*heardOut = 1). Gives
 * up reaching the root after GB_BOOT_REPORT_CONNECT_SECONDS (it may start a
 * little after this process) and waits for the verdict at most
 * GB_BOOT_REPORT_VERDICT_SECONDS more (a root answers a report within about
 * 2 s; whatever else holds the port may never answer); *heardOut = 0 when no
 * verdict came (the caller then reports its own error). If this process hosts
 * the root for id, returns only once that root has sent every verdict. */
#define GB_BOOT_REPORT_CONNECT_SECONDS 10.0
#define GB_BOOT_REPORT_VERDICT_SECONDS 10.0
gbResult_t gbBootReport(const gbBootId_t* id, int rank, int nranks, int localRank, const char* problem,
                        double timeoutSec, int* heardOut);

#endif
