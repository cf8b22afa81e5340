/* Slurm's host list syntax: items are split by commas outside brackets; in
 * an item each [ranges] group stands for numbers written with the width of
 * the range's first number (leading zeros kept: "[08-10]" is 08, 09, 10). */
#include "boot/hostlist.h"

#include <stdio.h>
#include <stdlib.h>
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

static int isDigits(const char* s, size_t n) {
  if (n == 0 || n > 18) return 0;
  for (size_t i = 0; i < n; i++)
    if (s[i] < '0' || s[i] > '9') return 0;
  return 1;
}

/* Does host match the item pattern [pat, end)? -1: the pattern is malformed. */
static int matchItem(const char* pat, const char* end, const char* host) {
  while (pat < end && *pat != '[') {
    if (*pat == ']' || *pat == ' ') return -1;
    if (*pat++ != *host++) return 0;
  }
  if (pat == end) return *host == '\0';
  const char* close = memchr(pat, ']', (size_t)(end - pat));
  if (!close || close == pat + 1) return -1;
  /* Each range of the group: lo or lo-hi, numbers of the width of lo. */
  for (const char* r = pat + 1; r < close;) {
    const char* stop = memchr(r, ',', (size_t)(close - r));
    if (!stop) stop = close;
    const char* dash = memchr(r, '-', (size_t)(stop - r));
    const char* loEnd = dash ? dash : stop;
    if (!isDigits(r, (size_t)(loEnd - r)) || (dash && !isDigits(dash + 1, (size_t)(stop - dash - 1)))) return -1;
    unsigned long long lo = strtoull(r, NULL, 10), hi = dash ? strtoull(dash + 1, NULL, 10) : lo;
    int width = (int)(loEnd - r);
    size_t digits = strspn(host, "0123456789");
    for (size_t take = 1; take <= digits && take <= 18; take++) {
      char num[24];
      memcpy(num, host, take);
      num[take] = '\0';
      unsigned long long v = strtoull(num, NULL, 10);
      char written[24];
      snprintf(written, sizeof(written), "%0*llu", width, v);
      if (v < lo || v > hi || strcmp(written, num) != 0) continue;
      int rest = matchItem(close + 1, end, host + take);
      if (rest != 0) return rest;
    }
    r = stop < close ? stop + 1 : close;
  }
  return 0;
}

int gbBootHostlistHas(const char* list, const char* host) {
  if (!list || !host || !*host || !*list) return 0;
  int found = 0;
  for (const char* p = list;;) {
    /* The item ends at a comma outside brackets. */
    const char* q = p;
    int depth = 0;
    for (; *q && (depth || *q != ','); q++) {
      if (*q == '[') depth++;
      else if (*q == ']') depth--;
      if (depth < 0 || depth > 1) return 0;
    }
    if (depth || q == p) return 0;
    int m = matchItem(p, q, host);
    if (m < 0) return 0; /* a malformed list has no host, wherever the fault */
    found |= m;
    if (!*q) return found;
    p = q + 1;
  }
}
