/* Result codes at the edge, the last-error text, and ncclGetErrorString /
 * ncclGetLastError.
 *
 * gpubridge's codes 0..7 equal NCCL's. gbTimeout (8) equals ncclTimeout,
 * which NCCL has only from 2.30 on: a program compiled against an earlier
 * nccl.h knows 8 as ncclNumResults, and may index a table with it. So a
 * gpubridge timeout reaches the caller as ncclTimeout only when this library
 * reports NCCL 2.30 or later (ncclGetVersion); otherwise as ncclRemoteError,
 * NCCL's code for "a remote process exited or a network error", which is
 * what a gpubridge deadline almost always means (a peer stopped or froze).
 * The last-error text still says it was a timeout. Codes gpubridge may
 * append later become ncclInternalError. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "abi.h"
#include "nccl_exports.h"

#define ERR_BYTES 4096
#define NCCL_WITH_TIMEOUT 23000 /* the first version code with ncclTimeout */

/* The thread's text answers the thread that failed; the process's copy lets
 * another thread (a watchdog) see it, as in libgpubridge. */
static _Thread_local char threadErr[ERR_BYTES];
static char processErr[ERR_BYTES];
static pthread_mutex_t processLock = PTHREAD_MUTEX_INITIALIZER;

static void record(const char* text) {
  snprintf(threadErr, sizeof(threadErr), "%s", text);
  pthread_mutex_lock(&processLock);
  snprintf(processErr, sizeof(processErr), "%s", text);
  pthread_mutex_unlock(&processLock);
}

gbResult_t gbNcclErrorSet(gbResult_t res, const char* fmt, ...) {
  char text[ERR_BYTES];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  record(text);
  GB_NCCL_WARN("%s", text);
  return res;
}

static int timeoutMapped(void) { return gbNcclVersionReported() < NCCL_WITH_TIMEOUT; }

gbResult_t gbNcclErrorFrom(gbResult_t res, const char* fn, gbComm_t comm) {
  if (res == gbSuccess || res == gbInProgress) return res;
  char text[ERR_BYTES];
  const char* why = gbGetLastError(comm);
  int n = snprintf(text, sizeof(text), "%s: %s", fn, why && why[0] ? why : gbGetErrorString(res));
  if (res == gbTimeout && timeoutMapped() && n > 0 && (size_t)n < sizeof(text))
    snprintf(text + n, sizeof(text) - (size_t)n,
             " (a gpubridge timeout, returned as ncclRemoteError: NCCL before 2.30 has no timeout code)");
  else if ((int)res >= (int)gbNumResults && n > 0 && (size_t)n < sizeof(text))
    snprintf(text + n, sizeof(text) - (size_t)n, " (gpubridge result %d, returned as ncclInternalError)", (int)res);
  record(text);
  return res;
}

ncclResult_t gbNcclResult(gbResult_t res) {
  switch (res) {
    case gbSuccess: return ncclSuccess;
    case gbUnhandledCudaError: return ncclUnhandledCudaError;
    case gbSystemError: return ncclSystemError;
    case gbInternalError: return ncclInternalError;
    case gbInvalidArgument: return ncclInvalidArgument;
    case gbInvalidUsage: return ncclInvalidUsage;
    case gbRemoteError: return ncclRemoteError;
    case gbInProgress: return ncclInProgress;
    case gbTimeout: return timeoutMapped() ? ncclRemoteError : ncclTimeout;
    default: return ncclInternalError;
  }
}

const char* ncclGetErrorString(ncclResult_t result) {
  GB_NCCL_FORWARD(ncclGetErrorString, result);
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled GPU runtime error (gpubridge: see ncclGetLastError, or GPUBRIDGE_DEBUG=INFO)";
    case ncclSystemError: return "unhandled system error (gpubridge: see ncclGetLastError, or GPUBRIDGE_DEBUG=INFO)";
    case ncclInternalError: return "internal error (gpubridge: see ncclGetLastError)";
    case ncclInvalidArgument: return "invalid argument (gpubridge: see ncclGetLastError)";
    case ncclInvalidUsage: return "invalid usage (gpubridge: see ncclGetLastError)";
    case ncclRemoteError: return "remote process exited, froze, or there was a network error (gpubridge)";
    case ncclInProgress: return "operation in progress";
    case ncclTimeout: return "timeout (gpubridge: GPUBRIDGE_TIMEOUT passed)";
    default: return "unknown result code";
  }
}
GB_NCCL_ALIAS(ncclGetErrorString)

/* This thread's last error; else, with a communicator, gpubridge's text for
 * it (an asynchronous failure another thread saw); else the process's. */
const char* ncclGetLastError(ncclComm_t comm) {
  GB_NCCL_FORWARD(ncclGetLastError, comm);
  if (threadErr[0]) return threadErr;
  gbComm_t gb = NULL;
  if (comm && atomic_load(&comm->magic) == GB_NCCL_COMM_LIVE) gb = atomic_load(&comm->gb);
  const char* text = gbGetLastError(gb);
  if (text && text[0]) return text;
  pthread_mutex_lock(&processLock);
  memcpy(threadErr, processErr, sizeof(threadErr));
  pthread_mutex_unlock(&processLock);
  return threadErr;
}
GB_NCCL_ALIAS(ncclGetLastError)
