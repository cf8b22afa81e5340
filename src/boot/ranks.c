/* Rank lists as text ("0-2,5"), for the verdict's and the topology's messages. */
#include "boot/ranks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmpInt(const void* a, const void* b) {
  int x = *(const int*)a, y = *(const int*)b;
  return (x > y) - (x < y);
}

const char* gbBootRankList(const int* ranks, int n, char* buf, size_t len) {
  int* sorted = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  if (!sorted || n < 0) {
    free(sorted);
    snprintf(buf, len, "?");
    return buf;
  }
  memcpy(sorted, ranks, sizeof(int) * (size_t)n);
  qsort(sorted, (size_t)n, sizeof(int), cmpInt);
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && used < len;) {
    int j = i;
    while (j + 1 < n && sorted[j + 1] == sorted[j] + 1) j++;
    int w = (j > i + 1) ? snprintf(buf + used, len - used, "%s%d-%d", i ? "," : "", sorted[i], sorted[j])
                        : snprintf(buf + used, len - used, "%s%d", i ? "," : "", sorted[i]);
    if (j == i + 1 && w > 0 && used + (size_t)w < len)
      w += snprintf(buf + used + (size_t)w, len - used - (size_t)w, ",%d", sorted[j]);
    if (w > 0) used += (size_t)w;
    i = j + 1;
  }
  free(sorted);
  return buf;
}
