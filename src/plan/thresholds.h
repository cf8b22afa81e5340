/* Policy tuned: a thresholds file (written by gpubridge-perf --tune) says
 * which policy each collective uses by message size. Format, one rule a line:
 *   # comment
 *   all_reduce 0 65535 flat
 *   all_reduce 65536 - hierarchical
 * (collective, first byte count, last byte count or "-" for no end, policy).
 * Sizes no rule covers fall back to auto's choice. */
#ifndef GB_PLAN_THRESHOLDS_H
#define GB_PLAN_THRESHOLDS_H

#include <stddef.h>
#include <stdint.h>
#include "gpubridge/gpubridge.h"

#define GB_THRESHOLDS_MAX 64

typedef struct {
  int coll;          /* gbColl_t */
  uint64_t minBytes, maxBytes;
  int policy;        /* gbPolicy_t: hierarchical, flat, split-rail or native */
} gbThreshold_t;

typedef struct {
  int n;
  gbThreshold_t rule[GB_THRESHOLDS_MAX];
} gbThresholds_t;

/* Parses a file's text; where names the file in messages. */
gbResult_t gbPlanThresholdsParse(const char* text, const char* where, gbThresholds_t* out);
/* Reads and parses path; *hash is the FNV-1a hash of its bytes. */
gbResult_t gbPlanThresholdsLoad(const char* path, gbThresholds_t* out, uint64_t* hash);
/* The policy for coll at bytes, or -1 when no rule covers it. */
int gbPlanThresholdsLookup(const gbThresholds_t* t, int coll, size_t bytes);

#endif
