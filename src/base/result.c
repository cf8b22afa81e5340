/* Result strings and the last-error text (per thread and per process). */
#include "base/result.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define ERR_LEN 4096

/* The thread's text answers gbErrorLast on the thread that failed; the
 * process's text lets another thread (e.g. one polling an async error) see it. */
static _Thread_local char threadErr[ERR_LEN];
static char processErr[ERR_LEN];
static pthread_mutex_t processMu = PTHREAD_MUTEX_INITIALIZER;

const char* gbResultString(gbResult_t res) {
  switch (res) {
    case gbSuccess: return "no error";
    case gbUnhandledCudaError: return "unhandled GPU runtime error";
    case gbSystemError: return "system error";
    case gbInternalError: return "internal error";
    case gbInvalidArgument: return "invalid argument";
    case gbInvalidUsage: return "invalid usage";
    case gbRemoteError: return "remote process error";
    case gbInProgress: return "operation in progress";
    case gbTimeout: return "timeout";
    default: return "unknown result code";
  }
}

static void store(const char* msg) {
  snprintf(threadErr, sizeof(threadErr), "%s", msg);
  pthread_mutex_lock(&processMu);
  snprintf(processErr, sizeof(processErr), "%s", msg);
  pthread_mutex_unlock(&processMu);
}

gbResult_t gbErrorSet(gbResult_t res, const char* fmt, ...) {
  char msg[ERR_LEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  store(msg);
  GB_WARN("%s", msg);
  return res;
}

void gbErrorRecord(const char* msg) { store(msg ? msg : ""); }

const char* gbErrorLast(void) {
  if (threadErr[0] != '\0') return threadErr;
  pthread_mutex_lock(&processMu);
  memcpy(threadErr, processErr, sizeof(threadErr));
  pthread_mutex_unlock(&processMu);
  return threadErr;
}
