/* libgpubridge-nccl.so's exports: every function NCCL's C API has, as the
 * installed header include/gpubridge/nccl/nccl.h declares them (NCCL 2.18 ..
 * 2.28, plus refusals for calls up to 2.30 that take a communicator, so none
 * of them reaches the real library with a gpubridge handle). Each also has
 * NCCL's profiling alias pnccl*. The library is built with hidden
 * visibility: only what that header declares GB_NCCL_API is exported. */
#ifndef GB_ABI_NCCL_EXPORTS_H
#define GB_ABI_NCCL_EXPORTS_H

#define GB_NCCL_API __attribute__((visibility("default")))
#include "gpubridge/nccl/nccl.h"

/* NCCL exports pnccl<Name> next to every nccl<Name> (its profiling
 * interface); a tool that calls those must reach gpubridge too. */
#define GB_NCCL_ALIAS(name) \
  GB_NCCL_API __typeof__(name) p##name __attribute__((alias(#name)));

#endif
