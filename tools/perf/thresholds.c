/* The thresholds file --tune writes and policy "tuned" reads (through
 * GPUBRIDGE_THRESHOLDS). Version 1:
 *   # gpubridge thresholds 1
 *   # written by gpubridge-perf --tune on <date>, <nranks> ranks, <layout>
 *   # collective min_bytes max_bytes policy
 *   all_reduce 0 4095 flat
 *   all_reduce 4096 - hierarchical
 * The ranges run from 0 to "-" (unbounded) without gaps; a new one starts at
 * each measured size where the winner changes, and sizes between two measured
 * ones belong to the smaller one's winner. */
#include "perf.h"

void perfThresholdsWrite(FILE* f, const perfTunePoint_t* points, int n, const char* collective,
                         const char* date, int nranks, const char* layout) {
  fprintf(f, "# gpubridge thresholds 1\n");
  fprintf(f, "# written by gpubridge-perf --tune on %s, %d ranks, %s\n", date, nranks, layout);
  fprintf(f, "# collective min_bytes max_bytes policy\n");
  size_t lo = 0;
  for (int k = 0; k < n; k++) {
    int last = k == n - 1;
    if (!last && points[k + 1].policy == points[k].policy) continue;
    if (last) {
      fprintf(f, "%s %zu - %s\n", collective, lo, perfPolicyName(points[k].policy));
    } else {
      fprintf(f, "%s %zu %zu %s\n", collective, lo, points[k + 1].bytes - 1, perfPolicyName(points[k].policy));
      lo = points[k + 1].bytes;
    }
  }
}
