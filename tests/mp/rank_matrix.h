/* State and device-buffer helpers shared by rank_matrix.c and
 * rank_matrix_p2p.h (one rank of tests/mp/test_matrix.py). */
#ifndef GB_TESTS_MP_RANK_MATRIX_H
#define GB_TESTS_MP_RANK_MATRIX_H

#include "rank_common.h"

#define PATTERN 0xA5 /* what a buffer holds where nothing may be written */
#define GUARD 64     /* bytes after every output region that must stay PATTERN */

/* The kinds of case, as --KIND arguments and in the summary line. */
enum { K_ALLREDUCE, K_REDUCE, K_ALLGATHER, K_REDUCESCATTER, K_ALLTOALL, K_SENDRECV, K_COUNT };
static const char* kindNames[K_COUNT] RC_UNUSED = {"allreduce", "reduce",   "allgather",
                                                   "reducescatter", "alltoall", "sendrecv"};

typedef struct {
  gbComm_t comm;
  void* stream;
  int rank;
  void *dSend, *dRecv;   /* device buffers of cap bytes */
  void* dScalar;         /* device PreMulSum scalar */
  char *in, *got, *want; /* host buffers of cap bytes */
  size_t cap;
  int caseIdx;
  int counts[K_COUNT];   /* cases passed per kind */
} run_t;

static inline void syncAndCheck(run_t* R, const char* what) {
  gbResult_t res = gbStreamSynchronize(R->stream);
  if (res != gbSuccess) DIE("%s: gbStreamSynchronize returned %d: %s", what, (int)res, gbGetLastError(R->comm));
  gbResult_t async = gbSuccess;
  CHECK_GB(gbCommGetAsyncError(R->comm, &async));
  if (async != gbSuccess) DIE("%s: async error %d: %s", what, (int)async, gbGetLastError(R->comm));
}

static inline void needCap(const run_t* R, size_t bytes, const char* what) {
  if (bytes > R->cap) DIE("%s: needs %zu bytes, buffers hold %zu (capacity estimate is wrong)", what, bytes, R->cap);
}

/* Fills device bytes [off, off+len) of d with PATTERN (R->got is scratch;
 * R->in and R->want are left alone). */
static inline void fillPattern(run_t* R, void* d, size_t off, size_t len) {
  needCap(R, len, "pattern");
  memset(R->got, PATTERN, len);
  CHECK_GB(gbMemcpyToDevice((char*)d + off, R->got, len));
}

/* Device bytes [off, off+len) of d must still be PATTERN. */
static inline void checkPattern(run_t* R, const char* what, const char* region, const void* d, size_t off,
                                size_t len) {
  if (!len) return;
  needCap(R, len, "pattern");
  CHECK_GB(gbMemcpyToHost(R->got, (const char*)d + off, len));
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)R->got[i] != PATTERN)
      DIE("%s: %s written at byte %zu of %zu (0x%02x), must be untouched (0x%02x)", what, region, i, len,
          (unsigned char)R->got[i], PATTERN);
}

/* Device elements at d+off must equal host expected (count elements of dt). */
static inline void checkDevice(run_t* R, const char* what, const char* region, const void* d, size_t off,
                               const void* expected, size_t count, int dt) {
  if (!count) return;
  CHECK_GB(gbMemcpyToHost(R->got, (const char*)d + off, count * dtSizes[dt]));
  char w[512];
  snprintf(w, sizeof(w), "%s%s%s", what, *region ? ": " : "", region);
  compare(w, R->got, expected, count, dt);
}

#endif
