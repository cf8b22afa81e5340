/* nccl-tests flags whose value is fixed in gpubridge-perf, so that a command
 * line brought from nccl-tests runs as it is: each is accepted at the values
 * that mean what gpubridge-perf does anyway, and any other value is refused
 * with the reason and what to do instead. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include "perf.h"

const perfFixedFlag_t perfFixedFlags[] = {
    /* -t and -g: the message names the processes to start instead (perfFixedFlagCheck). */
    {'t', "nthreads", 1, 1, "threads per process", NULL},
    {'g', "ngpus", 1, 1, "GPUs per thread", NULL},
    {'m', "agg_iters", 1, 1, "collectives per iteration",
     "gpubridge-perf times one collective per iteration; drop -m"},
    {'p', "parallel_init", 0, 1, "parallel init", NULL}, /* one communicator per process: nothing to overlap */
    {'y', "stream_null", 0, 0, "use the default stream",
     "gpubridge-perf enqueues on a stream it creates (gbStreamCreate); drop -y"},
    {'G', "cudagraph", 0, 0, "CUDA graph launches", "gpubridge-perf does not capture CUDA graphs; drop -G"},
    {'C', "report_cputime", 0, 0, "report CPU time",
     "gpubridge-perf reports the stream's time only (-E says how it is taken); drop -C"},
    {'R', "local_register", 0, 0, "buffer registration", "gpubridge has no buffer registration; drop -R"},
    {'S', "report_timestamps", 0, 0, "timestamps", "gpubridge-perf prints no timestamp column; drop -S"},
    {'M', "memory_report", 0, 0, "memory report", "gpubridge-perf prints no memory report; drop -M"},
    {'x', "cta_policy", 0, 0, "CTA policy", "NCCL's CTA policy does not apply to gpubridge; drop -x"},
    {'D', "device_implementation", 0, 0, "device API implementation",
     "gpubridge has no device-side API; drop -D"},
    {'V', "device_cta_count", 0, 0, "device API CTA count", "gpubridge has no device-side API; drop -V"},
};

const int perfFixedFlagCount = (int)(sizeof(perfFixedFlags) / sizeof(perfFixedFlags[0]));

const perfFixedFlag_t* perfFixedFlagFind(int flag) {
  for (int k = 0; k < perfFixedFlagCount; k++)
    if (perfFixedFlags[k].flag == flag) return &perfFixedFlags[k];
  return NULL;
}

int perfFixedFlagCheck(const perfFixedFlag_t* f, const char* value, char* why, size_t len) {
  char* end;
  errno = 0;
  long v = strtol(value, &end, 0); /* nccl-tests reads these with base 0 too */
  if (value[0] == '\0' || *end != '\0' || errno != 0) {
    snprintf(why, len, "-%c (--%s) wants a number; got '%s'", f->flag, f->longName, value);
    return -1;
  }
  if (v >= f->lo && v <= f->hi) return 0;
  if ((f->flag == 't' || f->flag == 'g') && v > 1)
    snprintf(why, len, "-%c %s: gpubridge uses one GPU per process, driven by one thread (-t 1 -g 1): for %ld "
             "GPUs, start %ld processes: gpubridge-run -n %ld -- gpubridge-perf ... (or mpirun -np %ld, "
             "torchrun --no-python --nproc-per-node %ld, srun -n %ld)", f->flag, value, v, v, v, v, v, v);
  else if (f->lo == f->hi)
    snprintf(why, len, "-%c %s: gpubridge-perf takes only -%c %d (%s)%s%s", f->flag, value, f->flag, f->lo, f->what,
             f->why ? "; " : "", f->why ? f->why : "");
  else
    snprintf(why, len, "-%c %s: gpubridge-perf takes -%c %d to %d (%s); got '%s'", f->flag, value, f->flag, f->lo,
             f->hi, f->what, value);
  return -1;
}
