/* Whether a send of a fused group reads memory a receive of it writes: an
 * in-place all-to-all (send == recv) is one such group. Nothing orders a
 * group's entries, so a block received may land before the one in its
 * place has left; the islands then send from a copy taken first. */
#include <stdint.h>
#include <stdlib.h>

#include "base/dtype.h"
#include "base/result.h"
#include "island/island.h"

typedef struct {
  uintptr_t lo, hi;
} span_t;

static int byStart(const void* a, const void* b) {
  uintptr_t x = ((const span_t*)a)->lo, y = ((const span_t*)b)->lo;
  return x < y ? -1 : x > y;
}

gbResult_t gbIslandP2pOverlap(const gbIslandP2p_t* ops, int nops, int* overlap) {
  *overlap = 0;
  if (nops <= 0) return gbSuccess;
  span_t* spans = malloc(2 * (size_t)nops * sizeof(*spans));
  if (spans == NULL)
    return gbErrorSet(gbSystemError, "send/receive group: out of memory checking %d entries for overlap", nops);
  span_t *sends = spans, *recvs = spans + nops;
  int ns = 0, nr = 0;
  for (int i = 0; i < nops; i++) {
    size_t bytes = ops[i].count * gbDtypeSize(ops[i].dt);
    if (bytes == 0 || ops[i].buf == NULL) continue;
    span_t s = {(uintptr_t)ops[i].buf, (uintptr_t)ops[i].buf + bytes};
    if (ops[i].isSend) sends[ns++] = s;
    else recvs[nr++] = s;
  }
  qsort(sends, (size_t)ns, sizeof(*sends), byStart);
  qsort(recvs, (size_t)nr, sizeof(*recvs), byStart);
  /* Both sorted by start: a span wholly before the other list's current one
   * is wholly before all its later ones too, so it can be passed. */
  for (int i = 0, j = 0; i < ns && j < nr;) {
    if (sends[i].hi <= recvs[j].lo) i++;
    else if (recvs[j].hi <= sends[i].lo) j++;
    else {
      *overlap = 1;
      break;
    }
  }
  free(spans);
  return gbSuccess;
}
