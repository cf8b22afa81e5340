/* Test messages of test_net_tcp and test_net_ucx: their bytes, from a seed
 * (xorshift64*), checked byte for byte on arrival; and one wait over many
 * connections, the same exchange on either transport. */
#ifndef GB_TESTS_UNIT_NET_PATTERN_H
#define GB_TESTS_UNIT_NET_PATTERN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/result.h"
#include "net/net.h"

static void pattern(uint64_t seed, unsigned char* buf, size_t n) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    buf[i] = (unsigned char)((x * 0x2545f4914f6cdd1dull) >> 56);
  }
}

enum { MANY_PAIRS = 3, MANY_EACH_WAY = 2, MANY_REQS = MANY_PAIRS * MANY_EACH_WAY * 2 * 2 };

static size_t manyLen(int j) { return 100000 + 77 * (size_t)j; }
static uint64_t manySeed(int dir, int pair, int j) { return ((uint64_t)dir << 40) ^ ((uint64_t)pair << 8) ^ (uint64_t)j; }

/* Two messages each way on each of the MANY_PAIRS connected pairs (a[c],
 * p[c]), every send and receive posted first and all finished by one
 * gbNetWaitAll (30 s), every byte checked; then the pairs are closed.
 * Returns 0, or -1 with what went wrong in why. */
static int exchangeInOneWait(const gbNetOps_t* net, gbNetConn_t* const* a, gbNetConn_t* const* p, char* why,
                             size_t whyLen) {
  gbNetReq_t* reqs[MANY_REQS];
  unsigned char* bufs[MANY_REQS];
  unsigned char* want = malloc(manyLen(MANY_EACH_WAY));
  int n = 0, bad = 0;
  why[0] = '\0';
  for (int c = 0; c < MANY_PAIRS; c++)
    for (int j = 0; j < MANY_EACH_WAY; j++)
      for (int dir = 0; dir < 2; dir++) {
        bufs[n] = malloc(manyLen(j));
        pattern(manySeed(dir, c, j), bufs[n], manyLen(j));
        bufs[n + 1] = calloc(1, manyLen(j));
        if (!bad && (net->isend(dir ? p[c] : a[c], bufs[n], manyLen(j), &reqs[n]) != gbSuccess ||
                     net->irecv(dir ? a[c] : p[c], bufs[n + 1], manyLen(j), &reqs[n + 1]) != gbSuccess))
          bad = snprintf(why, whyLen, "posting pair %d message %d: %s", c, j, gbErrorLast()) > 0;
        n += 2;
      }
  if (!bad && gbNetWaitAll(reqs, n, gbDeadlineIn(30), NULL) != gbSuccess)
    bad = snprintf(why, whyLen, "one wait over %d connections: %s", 2 * MANY_PAIRS, gbErrorLast()) > 0;
  n = 0;
  for (int c = 0; c < MANY_PAIRS; c++)
    for (int j = 0; j < MANY_EACH_WAY; j++)
      for (int dir = 0; dir < 2; dir++, n += 2) {
        pattern(manySeed(dir, c, j), want, manyLen(j));
        if (!bad && memcmp(bufs[n + 1], want, manyLen(j)) != 0)
          bad = snprintf(why, whyLen, "pair %d message %d direction %d differs", c, j, dir) > 0;
        free(bufs[n]);
        free(bufs[n + 1]);
      }
  for (int c = 0; c < MANY_PAIRS; c++) {
    net->close(a[c]);
    net->close(p[c]);
  }
  free(want);
  return bad ? -1 : 0;
}

#endif
