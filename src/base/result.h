/* Result propagation and the last-error text. */
#ifndef GB_BASE_RESULT_H
#define GB_BASE_RESULT_H

#include "gpubridge/gpubridge.h"
#include "base/log.h"

/* Propagate a failure, leaving a file:line trail at TRACE level. */
#define GB_CHECK(call)                                                  \
  do {                                                                  \
    gbResult_t gb_r_ = (call);                                          \
    if (gb_r_ != gbSuccess) {                                           \
      GB_TRACE(GB_LOG_ALL, "%s:%d -> %d", __FILE__, __LINE__, gb_r_);   \
      return gb_r_;                                                     \
    }                                                                   \
  } while (0)

#define GB_CHECK_GOTO(call, res, label)                                 \
  do {                                                                  \
    (res) = (call);                                                     \
    if ((res) != gbSuccess) {                                           \
      GB_TRACE(GB_LOG_ALL, "%s:%d -> %d", __FILE__, __LINE__, (res));   \
      goto label;                                                       \
    }                                                                   \
  } while (0)

/* Records msg as this thread's and the process's last error, logs it once at
 * WARN, and returns res. Call it where the error is detected, with the exact
 * cause and what to do. */
gbResult_t gbErrorSet(gbResult_t res, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Records without logging (the text was already logged, e.g. a verdict). */
void gbErrorRecord(const char* msg);

/* The last error text recorded on this thread, else in the process; "" if none. */
const char* gbErrorLast(void);

const char* gbResultString(gbResult_t res);

#endif
