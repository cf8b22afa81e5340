/* libgpubridge-nccl's internal interface: the communicator handle it gives
 * programs, and the helpers its exported functions share. Built on
 * gpubridge's public header only. Internal functions return gbResult_t;
 * the exported nccl* functions translate at the edge (gbNcclResult). */
#ifndef GB_ABI_NCCL_ABI_H
#define GB_ABI_NCCL_ABI_H

#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "gpubridge/gpubridge.h"
#include "nccl_exports.h"

#define GB_NCCL_HIDDEN __attribute__((visibility("hidden")))

/* Propagates a failure (the callee recorded its text). */
#define GB_NCCL_CHECK(call)           \
  do {                                \
    gbResult_t gb_nccl_r_ = (call);   \
    if (gb_nccl_r_ != gbSuccess) return gb_nccl_r_; \
  } while (0)

/* ------------------------------------------------- vendor-internal calls */

#define GB_NCCL_FORWARD_SLOTS 4
/* The vendor library's own definition of `name` when the call returning to
 * `ret` came from inside a vendor NCCL/RCCL library (interpose.c), else
 * NULL. slots caches it per vendor library. */
GB_NCCL_HIDDEN void* gbNcclInternalCall(const void* ret, const char* name, _Atomic(void*)* slots);

/* First statement of every exported function: a call that a vendor library
 * made to its own exported name goes back to that library. */
#define GB_NCCL_FORWARD(name, ...)                                                          \
  do {                                                                                      \
    static _Atomic(void*) gb_fwd_slots_[GB_NCCL_FORWARD_SLOTS];                             \
    void* gb_fwd_ = gbNcclInternalCall(__builtin_return_address(0), #name, gb_fwd_slots_);  \
    if (gb_fwd_) {                                                                          \
      __typeof__(&name) gb_fwd_fn_;                                                         \
      memcpy(&gb_fwd_fn_, &gb_fwd_, sizeof(gb_fwd_fn_));                                    \
      return gb_fwd_fn_(__VA_ARGS__);                                                       \
    }                                                                                       \
  } while (0)

/* ------------------------------------------------------------ the handle */

#define GB_NCCL_COMM_LIVE 0x6762434eu /* "gbCN" */
#define GB_NCCL_COMM_DEAD 0x64656164u /* "dead" */
#define GB_NCCL_NAME_LEN 64

/* What an ncclComm_t points to. A handle is never freed once a program has
 * seen it: destroy and abort mark it dead, so a late call from another
 * thread (a framework's watchdog polling ncclCommGetAsyncError) gets
 * ncclInvalidArgument instead of reading freed memory (under 100 bytes a
 * communicator). */
struct ncclComm {
  atomic_uint magic;
  _Atomic(gbComm_t) gb;
  int cudaDev;                  /* what ncclCommCuDevice reports */
  atomic_int announced;         /* the "serves NCCL calls" line was logged */
  char name[GB_NCCL_NAME_LEN];  /* config->commName, for logs */
};

/* A new handle around a communicator being made (gb may be NULL until it is). */
GB_NCCL_HIDDEN gbResult_t gbNcclCommNew(int cudaDev, const char* name, ncclComm_t* out);
/* Frees a handle no program has seen (its init failed). */
GB_NCCL_HIDDEN void gbNcclCommDiscard(ncclComm_t comm);
/* comm's gpubridge communicator, or an error naming fn when comm is NULL,
 * not a handle of this library, or destroyed. */
GB_NCCL_HIDDEN gbResult_t gbNcclCommGet(const char* fn, ncclComm_t comm, gbComm_t* gb);
/* Marks comm dead and hands back its gpubridge communicator (NULL if it was
 * already dead: then an error naming fn). */
GB_NCCL_HIDDEN gbResult_t gbNcclCommRetire(const char* fn, ncclComm_t comm, gbComm_t* gb);
/* Makes the handle for a communicator that gpubridge creates with `make`
 * (gbSuccess, or gbInProgress for a non-blocking one): *out is set unless
 * make failed; then the handle is freed. */
typedef gbResult_t (*gbNcclMake_t)(void* args, gbComm_t* gb);
GB_NCCL_HIDDEN gbResult_t gbNcclCommCreate(const char* fn, int cudaDev, const char* name, gbNcclMake_t make,
                                           void* args, ncclComm_t* out);
/* Logs, once per handle, that gpubridge serves its NCCL calls (topology,
 * policy, device); comm must be initialized. */
GB_NCCL_HIDDEN void gbNcclCommAnnounce(ncclComm_t comm);

/* -------------------------------------------------------------- logging
 * GPUBRIDGE_DEBUG / GPUBRIDGE_DEBUG_FILE / GPUBRIDGE_DEBUG_SUBSYS, read like
 * libgpubridge does; lines look like gpubridge's, subsystem INIT. */

enum { GB_NCCL_LOG_NONE = 0, GB_NCCL_LOG_WARN = 1, GB_NCCL_LOG_INFO = 2, GB_NCCL_LOG_TRACE = 3 };
GB_NCCL_HIDDEN int gbNcclLogEnabled(int level);
GB_NCCL_HIDDEN void gbNcclLogWrite(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/* The rank shown in this process's lines from now on. */
GB_NCCL_HIDDEN void gbNcclLogSetRank(int rank);

#define GB_NCCL_WARN(...) gbNcclLogWrite(GB_NCCL_LOG_WARN, __VA_ARGS__)
#define GB_NCCL_INFO(...)                                                   \
  do {                                                                      \
    if (gbNcclLogEnabled(GB_NCCL_LOG_INFO)) gbNcclLogWrite(GB_NCCL_LOG_INFO, __VA_ARGS__); \
  } while (0)
#define GB_NCCL_TRACE(...)                                                    \
  do {                                                                        \
    if (gbNcclLogEnabled(GB_NCCL_LOG_TRACE)) gbNcclLogWrite(GB_NCCL_LOG_TRACE, __VA_ARGS__); \
  } while (0)

/* --------------------------------------------------------------- errors */

/* Records the text as this thread's (and the process's) last error, logs it
 * at WARN, returns res. For errors this library detects. */
GB_NCCL_HIDDEN gbResult_t gbNcclErrorSet(gbResult_t res, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/* res of a gpubridge call made for fn: on failure records "fn: <gpubridge's
 * text>" (gpubridge logged it already). Returns res. */
GB_NCCL_HIDDEN gbResult_t gbNcclErrorFrom(gbResult_t res, const char* fn, gbComm_t comm);
/* The ncclResult_t a caller receives for res (error.c: gbTimeout). */
GB_NCCL_HIDDEN ncclResult_t gbNcclResult(gbResult_t res);

/* --------------------------------------------------------------- version */

/* The version code ncclGetVersion reports (computed once). */
GB_NCCL_HIDDEN int gbNcclVersionReported(void);

/* ---------------------------------------------------------------- device */

/* Before gpubridge's first device use: on a real rank with GPUBRIDGE_DEVICE
 * unset, sets it to the CUDA (or HIP) runtime's current device, as NCCL
 * uses the current device. Later calls check that the current device is
 * still the one gpubridge serves (it drives one GPU per process). Writes
 * the device index ncclCommCuDevice reports. */
GB_NCCL_HIDDEN gbResult_t gbNcclDeviceAdopt(const char* fn, int* device);
/* As gbNcclDeviceAdopt, for a caller that names the device (ncclCommInitAll). */
GB_NCCL_HIDDEN gbResult_t gbNcclDeviceAdoptGiven(const char* fn, int given, int* device);

/* --------------------------------------------------------------- config */

/* Reads an ncclConfig_t of any version from 2.14 on (only the fields its
 * size covers) into a gpubridge config; copies commName (or "") to name. */
GB_NCCL_HIDDEN gbResult_t gbNcclConfigRead(const char* fn, const ncclConfig_t* config, gbConfig_t* out, char* name,
                                           size_t nameLen);

/* ---------------------------------------------------------- conversions */

GB_NCCL_HIDDEN gbResult_t gbNcclDtype(const char* fn, ncclDataType_t datatype, gbDataType_t* out);
GB_NCCL_HIDDEN gbResult_t gbNcclOp(const char* fn, ncclRedOp_t op, gbRedOp_t* out);
/* Bytes of one element of a valid gpubridge type. */
GB_NCCL_HIDDEN size_t gbNcclDtypeSize(gbDataType_t datatype);

#endif
