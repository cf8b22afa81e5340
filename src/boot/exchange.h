/* A rank's side of the rendezvous: send my probe to the root, receive the one
 * verdict. */
#ifndef GB_BOOT_EXCHANGE_H
#define GB_BOOT_EXCHANGE_H

#include "boot/probe.h"
#include "boot/uniqueid.h"

/* On success *probesOut holds the nranks validated probes, indexed by rank
 * (free() it). Otherwise the verdict's error, with its text recorded as the
 * last error (the same bytes on every rank). Connecting is retried until the
 * timeout; the verdict is awaited a little longer than the root's deadline. */
gbResult_t gbBootExchange(const gbBootId_t* id, const gbProbe_t* mine, double timeoutSec,
                          const volatile int* abortFlag, gbProbe_t** probesOut);

/* A process that cannot join (report: kind GB_PROBE_REPORT) tells the root
 * why, so every rank fails at once with one text naming it, and returns the
 * verdict's error with that text recorded (*heardOut = 1). Gives up reaching
 * the root after connectSec; *heardOut = 0 when no verdict came (the caller
 * then reports its own error). */
gbResult_t gbBootReport(const gbBootId_t* id, const gbProbe_t* report, double connectSec, double timeoutSec,
                        int* heardOut);

#endif
