/* "Did you mean": a small edit distance (Damerau's, optimal string
 * alignment), enough to catch a missing, extra, wrong or swapped letter. */
#include "base/suggest.h"

#include <ctype.h>
#include <string.h>

#define MAX_LEN 64
#define CAP 8

static int min3(int a, int b, int c) { return a < b ? (a < c ? a : c) : (b < c ? b : c); }

int gbSuggestDistance(const char* word, size_t n, const char* known) {
  size_t m = strlen(known);
  if (n > MAX_LEN || m > MAX_LEN) return CAP + 1;
  if ((n > m ? n - m : m - n) > CAP) return CAP + 1;
  int d[MAX_LEN + 1][MAX_LEN + 1];
  for (size_t i = 0; i <= n; i++) d[i][0] = (int)i;
  for (size_t j = 0; j <= m; j++) d[0][j] = (int)j;
  for (size_t i = 1; i <= n; i++) {
    for (size_t j = 1; j <= m; j++) {
      int a = tolower((unsigned char)word[i - 1]), b = tolower((unsigned char)known[j - 1]);
      int v = min3(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a != b));
      if (i > 1 && j > 1 && a == tolower((unsigned char)known[j - 2]) &&
          tolower((unsigned char)word[i - 2]) == b && d[i - 2][j - 2] + 1 < v)
        v = d[i - 2][j - 2] + 1;
      d[i][j] = v;
    }
  }
  return d[n][m] > CAP ? CAP + 1 : d[n][m];
}

int gbSuggestClose(size_t n, int distance) { return distance <= 2 && (size_t)distance * 3 < n; }
