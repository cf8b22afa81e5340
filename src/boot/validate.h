/* The one validation function: every probe in, one verdict out. The root runs
 * it and sends its text to every rank, so all ranks fail with the same words.
 * Pure: no I/O, no clocks. */
#ifndef GB_BOOT_VALIDATE_H
#define GB_BOOT_VALIDATE_H

#include <stddef.h>
#include "boot/probe.h"

typedef struct {
  const gbProbe_t* probes; /* as received, in arrival order */
  int nprobes;
  int timedOut;            /* the root stopped waiting at its deadline */
  int timeoutSec;          /* for the message */
} gbValidateInput_t;

/* Malformed probes (gbBootProbeCheck) and reports (GB_PROBE_REPORT) are named
 * in the text, each by rank when known, else by pid and host.
 * gbSuccess: the probes describe one consistent job; sorted[r] receives rank r's
 * probe (sorted holds nranks entries). Otherwise gbInvalidUsage (or gbTimeout
 * when ranks are missing) and text holds one line naming each rank at fault
 * and how to fix it. */
gbResult_t gbBootValidate(const gbValidateInput_t* in, gbProbe_t* sorted, int sortedCap,
                          char* text, size_t textLen);

/* 1 when every field of p is within what the root and the ranks may use
 * (counts and ranges, strings terminated, a usable address), else 0 with the
 * first field at fault in why. Pure; probes from the wire go through it
 * before any field is used. */
int gbBootProbeCheck(const gbProbe_t* p, char* why, size_t whyLen);

/* Whether two real ranks' probes name one GPU of one host: by UUID where
 * both know it (hex digits compared, so CUDA's and HIP's spellings agree;
 * MIG slices of one GPU differ), else by PCI bus id. */
int gbBootSameGpu(const gbProbe_t* a, const gbProbe_t* b);

#endif
