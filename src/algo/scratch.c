/* The group's scratch: grown on demand, kept between calls so the hot path
 * does not allocate. */
#include <stdlib.h>
#include "algo/internal.h"
#include "base/result.h"

gbResult_t gbAlgoScratchGet(gbAlgoGroup_t* g, size_t bytes, void** out) {
  if (bytes <= g->scratchBytes && g->scratch != NULL) {
    *out = g->scratch;
    return gbSuccess;
  }
  /* Old contents are not needed: free then allocate rather than realloc's copy. */
  free(g->scratch);
  g->scratch = NULL;
  g->scratchBytes = 0;
  void* p = malloc(bytes ? bytes : 1);
  if (p == NULL) {
    return gbErrorSet(gbSystemError, "algo on group %s: cannot allocate %zu bytes of scratch; "
                      "free host memory or lower the message size", g->name ? g->name : "?", bytes);
  }
  g->scratch = p;
  g->scratchBytes = bytes;
  *out = p;
  return gbSuccess;
}
