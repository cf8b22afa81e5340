/* Slurm's host list syntax, as far as the first host goes: items are split
 * by commas outside brackets; in the first item each [ranges] group gives
 * its first number, written as it stands (leading zeros kept). */
#include "boot/hostlist.h"

#include <string.h>

int gbBootHostlistFirst(const char* list, char* out, size_t len) {
  if (!list || !out || len == 0) return 0;
  size_t n = 0;
  for (const char* p = list; *p && *p != ','; p++) {
    if (*p == '[') {
      const char* close = strchr(p, ']');
      if (!close) return 0;
      size_t first = strcspn(p + 1, "-,]");
      if (first == 0) return 0;
      if (n + first >= len) return 0;
      memcpy(out + n, p + 1, first);
      n += first;
      p = close;
      continue;
    }
    if (*p == ']' || *p == ' ') return 0;
    if (n + 1 >= len) return 0;
    out[n++] = *p;
  }
  out[n] = '\0';
  return n > 0;
}
