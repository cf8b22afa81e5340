/* What each rank tells the root about itself: identity, device, settings, the
 * address it listens on for peers, and any invalid GPUBRIDGE_* values. A fixed,
 * versioned record, so vendors' builds of gpubridge understand each other.
 * A process that cannot take part (a bad launcher variable) sends a report
 * instead: kind GB_PROBE_REPORT, its problem in problems, so every rank hears
 * it in the one verdict rather than waiting for it until the timeout. */
#ifndef GB_BOOT_PROBE_H
#define GB_BOOT_PROBE_H

#include <stdint.h>
#include "gpubridge/gpubridge.h"
#include "os/socket.h"

#define GB_PROBE_MAGIC 0x67625072u /* "gbPr" */
#define GB_PROBE_VERSION 8u /* 6: the root acknowledges each probe (boot/root.h); 7: every connection waits for its answer (net/tcp/answer.c); 8: settings.compression */

/* gbProbe_t.kind */
#define GB_PROBE_RANK 0   /* a rank's facts */
#define GB_PROBE_REPORT 1 /* why a process cannot join: problems; rank (-1: unknown), pid, host, hostId,
                             localRank and settings.timeoutSec are the only other fields it fills */

/* Settings that decide the schedule: every rank must hold the same. */
typedef struct {
  int32_t policy;       /* gbPolicy_t as configured (auto unresolved) */
  int32_t transport;    /* gbTransport_t */
  int32_t timeoutSec;
  int32_t nsocks;
  int32_t stagingSlots;
  int32_t splitTest;    /* GPUBRIDGE_SPLIT_TEST: 0 off, 1 half, 2 alternate, 3 node */
  int32_t checkCalls;   /* GPUBRIDGE_CHECK_CALLS: 0 off, 1 on, 2 auto */
  int32_t rails;        /* GPUBRIDGE_RAILS (0: as many as the smallest island has ranks) */
  int32_t bridgeSlots;  /* GPUBRIDGE_BRIDGE_SLOTS: 0 off, 1 auto */
  int32_t chunkBySize;  /* the chunk follows the message's size (a real GPU, no chunk set: plan/sizes.h) */
  int32_t exchange;     /* GPUBRIDGE_EXCHANGE: 0 off, 1 auto, 2 on */
  int32_t compression;  /* GPUBRIDGE_BRIDGE_COMPRESSION: a gbCompression_t */
  int32_t reserved;     /* keeps chunkBytes 8-aligned in every build */
  int64_t chunkBytes;
  int64_t ringMinBytes;
  uint64_t thresholdsHash; /* policy tuned: FNV-1a of the thresholds file's bytes, else 0 */
} gbSettings_t;

typedef struct {
  uint32_t magic, version;
  int32_t rank, nranks;
  int32_t pid;
  int32_t runKind;
  int32_t libVersion;
  int32_t localRank;
  uint64_t hostId;
  char host[64];
  char vendor[16];
  char gpuUuid[48];   /* "" when unknown or simulated */
  char gpuPci[24];    /* PCI bus id, "" when unknown */
  int32_t gpuIndex;   /* -1 without a GPU */
  int32_t gpuMps;     /* this rank's GPU work goes through an MPS server (GPUs of one host then run at once) */
  int32_t kind;       /* GB_PROBE_RANK or GB_PROBE_REPORT */
  gbSettings_t settings;
  gbSockAddr_t listenAddr;
  char problems[512]; /* invalid GPUBRIDGE_* values and config fields, "; "-separated */
} gbProbe_t;

#endif
