/* The rendezvous root: a thread that gathers every rank's probe, runs the one
 * validation function, and sends every rank the same verdict (the probes of
 * all ranks, or one error text). Connections without the job secret are
 * refused and logged without disturbing the job. */
#ifndef GB_BOOT_ROOT_H
#define GB_BOOT_ROOT_H

#include <stdatomic.h>
#include <stdint.h>
#include "gpubridge/gpubridge.h"
#include "net/net.h"
#include "base/clock.h"
#include "os/socket.h"

#define GB_BOOT_VERDICT_MAGIC 0x67625664u /* "gbVd" */
#define GB_BOOT_ROOT_TAG (-1)
/* The root answers every probe it files with these 4 bytes at once, long
 * before its verdict; a rank that hears nothing within GB_BOOT_ACK_SECONDS
 * (or is closed on) reached something else on the root's port (rank 0 then
 * could not listen there) and fails at once instead of after the timeout. */
#define GB_BOOT_PROBE_ACK 0x67624163u /* "gbAc" */
#define GB_BOOT_ACK_SECONDS 1.0

/* The verdict's header on the wire; the text and the probes follow. */
typedef struct {
  uint32_t magic;
  int32_t result;   /* gbSuccess, or the error every rank returns */
  uint32_t textLen; /* bytes of text that follow (no NUL) */
  uint32_t nprobes; /* probes that follow the text (nranks on success) */
} gbVerdictHeader_t;

/* Listens on bindAddr (port 0: any) and starts the root thread, which ends by
 * itself once it has sent its verdict. boundOut receives the address. */
gbResult_t gbBootRootStart(const gbSockAddr_t* bindAddr, const uint8_t secret[GB_NET_SECRET_BYTES],
                           uint64_t commHash, gbSockAddr_t* boundOut);

/* Waits until this process's root for commHash (if it runs one) has sent its
 * verdict to every rank, so the hosting process does not exit (taking the
 * root with it) while others still wait for the verdict. */
void gbBootRootWait(uint64_t commHash, gbDeadline_t deadline, const atomic_int* abortFlag);

/* Ends this process's root for commHash (if it runs one) within its next
 * poll (50 ms), as if it timed out: for an id that will never reach the
 * ranks (gbCommSplit could not share it). */
void gbBootRootStop(uint64_t commHash);

#endif
