/* Device buffers with guard areas, and moving a check run's data in and out
 * of them (the values themselves come from pattern.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "perf.h"


static unsigned char guardPattern[PERF_GUARD_BYTES];
static unsigned char guardRead[PERF_GUARD_BYTES];

static void guardPatternInit(void) {
  for (size_t k = 0; k < PERF_GUARD_BYTES; k++) guardPattern[k] = (unsigned char)(0xA5 ^ (k * 7));
}

void perfBufferAlloc(perfBuffer_t* buf, size_t capacity) {
  void* p = NULL;
  perfCheck(gbMemAlloc(&p, capacity + 2 * PERF_GUARD_BYTES), "gbMemAlloc");
  buf->base = p;
  buf->data = buf->base + PERF_GUARD_BYTES;
  buf->capacity = capacity;
  guardPatternInit();
}

void perfBufferFree(perfBuffer_t* buf) {
  if (buf->base) perfCheck(gbMemFree(buf->base), "gbMemFree");
  buf->base = buf->data = NULL;
}

/* The guarded regions for a size: before the buffer, after it, and the bytes
 * just past the current size. */
static int guardRegions(const perfBuffer_t* buf, size_t bytes, unsigned char* at[3], size_t len[3]) {
  int n = 0;
  at[n] = buf->base;
  len[n++] = PERF_GUARD_BYTES;
  at[n] = buf->data + buf->capacity;
  len[n++] = PERF_GUARD_BYTES;
  size_t tail = buf->capacity - bytes;
  if (tail > PERF_GUARD_BYTES) tail = PERF_GUARD_BYTES;
  if (tail > 0) {
    at[n] = buf->data + bytes;
    len[n++] = tail;
  }
  return n;
}

void perfBufferGuardSet(perfBuffer_t* buf, size_t bytes) {
  unsigned char* at[3];
  size_t len[3];
  int n = guardRegions(buf, bytes, at, len);
  for (int k = 0; k < n; k++)
    perfCheck(gbMemcpyToDevice(at[k], guardPattern, len[k]), "gbMemcpyToDevice");
}

uint64_t perfBufferGuardCheck(const perfBuffer_t* buf, size_t bytes) {
  unsigned char* at[3];
  size_t len[3];
  int n = guardRegions(buf, bytes, at, len);
  uint64_t bad = 0;
  for (int k = 0; k < n; k++) {
    perfCheck(gbMemcpyToHost(guardRead, at[k], len[k]), "gbMemcpyToHost");
    for (size_t j = 0; j < len[k]; j++) bad += guardRead[j] != guardPattern[j];
  }
  return bad;
}

static void hostReserve(perfHost_t* host, size_t bytes) {
  if (host->capacity >= bytes) return;
  free(host->host);
  host->host = malloc(bytes);
  if (!host->host) {
    fprintf(stderr, "gpubridge-perf: out of host memory for %zu bytes\n", bytes);
    exit(1);
  }
  host->capacity = bytes;
}

void perfBufferPoison(perfBuffer_t* buf, size_t at, size_t elems, gbDataType_t dt, perfHost_t* host) {
  size_t size = perfTypeSize(dt), bytes = elems * size;
  hostReserve(host, bytes);
  memset(host->host, PERF_POISON_BYTE, bytes);
  perfCheck(gbMemcpyToDevice(buf->data + at * size, host->host, bytes), "gbMemcpyToDevice");
}

void perfBufferFillInput(perfBuffer_t* buf, size_t at, size_t elems, const perfPattern_t* p, perfHost_t* host) {
  gbDataType_t dt = perfPatternSpec(p)->dt;
  if (!perfPatternHasInput(p)) {
    perfBufferPoison(buf, at, elems, dt, host);
    return;
  }
  size_t size = perfTypeSize(dt);
  hostReserve(host, elems * size);
  for (size_t i = 0; i < elems; i++) perfTypeStore(host->host, i, dt, perfPatternInput(p, i));
  perfCheck(gbMemcpyToDevice(buf->data + at * size, host->host, elems * size), "gbMemcpyToDevice");
}

static void report(const perfPattern_t* p, int inPlace, size_t elems, uint64_t wrong, size_t first,
                   uint64_t got, uint64_t want) {
  const perfCheckSpec_t* s = perfPatternSpec(p);
  char what[48] = "";
  if (perfCollReduces(s->coll)) snprintf(what, sizeof(what), " %s", perfOpName(s->op));
  if (perfCollRooted(s->coll))
    snprintf(what + strlen(what), sizeof(what) - strlen(what), " root %d", s->root);
  fprintf(stderr,
          "gpubridge-perf: rank %d: %s %s%s count %zu %s: %llu of %zu elements wrong; "
          "first at %zu: got %g (0x%llx), expected %g (0x%llx)\n",
          s->rank, perfCollName(s->coll), perfTypeName(s->dt), what, s->count,
          inPlace ? "in-place" : "out-of-place", (unsigned long long)wrong, elems, first,
          perfTypeBitsToDouble(s->dt, got), (unsigned long long)got, perfTypeBitsToDouble(s->dt, want),
          (unsigned long long)want);
}

uint64_t perfBufferCheck(const perfBuffer_t* buf, size_t at, size_t elems, const perfPattern_t* p, int inPlace,
                         perfHost_t* host) {
  gbDataType_t dt = perfPatternSpec(p)->dt;
  size_t size = perfTypeSize(dt);
  hostReserve(host, elems * size);
  perfCheck(gbMemcpyToHost(host->host, buf->data + at * size, elems * size), "gbMemcpyToHost");
  int slack = perfPatternSlack(p);
  uint64_t wrong = 0, firstGot = 0, firstWant = 0;
  size_t first = 0;
  for (size_t i = 0; i < elems; i++) {
    uint64_t got = perfTypeLoad(host->host, i, dt);
    uint64_t want = perfPatternExpected(p, i, inPlace);
    if (got == want) continue;
    if (slack && (got == want + 1 || got + 1 == want)) continue; /* positive values: bits are monotonic */
    if (wrong++ == 0) {
      first = i;
      firstGot = got;
      firstWant = want;
    }
  }
  if (wrong) report(p, inPlace, elems, wrong, first, firstGot, firstWant);
  return wrong;
}
