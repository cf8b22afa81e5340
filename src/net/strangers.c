/* The refusal log and the eviction rule of net/strangers.h. */
#include "net/strangers.h"

#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"

#define WINDOW_NS 1000000000LL

void gbNetStrangersInit(gbNetStrangers_t* s, const char* prefix, const char* suffix, const gbSockAddr_t* where) {
  memset(s, 0, sizeof(*s));
  s->prefix = prefix ? prefix : "";
  s->suffix = suffix ? suffix : "";
  gbSockAddrString(where, s->where, sizeof(s->where));
  s->windowStart = gbClockNowNs();
}

void gbNetStrangersFlush(gbNetStrangers_t* s, int force) {
  int64_t now = gbClockNowNs();
  if (!force && now - s->windowStart < WINDOW_NS) return;
  if (s->suppressed > 0)
    GB_WARN("%srefused a connection from %s on %s and %ld more in the last %.1f s (%ld in all; one line per stranger "
            "is written only up to %d a second; the last: %s%s)",
            s->prefix, s->lastPeer, s->where, s->suppressed - 1, (double)(now - s->windowStart) / 1e9, s->total,
            GB_NET_REFUSALS_PER_SECOND, s->lastWhy, s->suffix);
  s->windowStart = now;
  s->logged = 0;
  s->suppressed = 0;
}

void gbNetStrangersRefused(gbNetStrangers_t* s, const gbSockAddr_t* peer, const char* why) {
  gbNetStrangersFlush(s, 0);
  s->total++;
  char ps[80];
  gbSockAddrString(peer, ps, sizeof(ps));
  if (s->logged < GB_NET_REFUSALS_PER_SECOND) {
    s->logged++;
    GB_WARN("%srefused a connection from %s on %s: %s%s", s->prefix, ps, s->where, why, s->suffix);
    return;
  }
  s->suppressed++;
  snprintf(s->lastPeer, sizeof(s->lastPeer), "%s", ps);
  snprintf(s->lastWhy, sizeof(s->lastWhy), "%s", why);
}

void gbNetStrangersNoFds(gbNetStrangers_t* s, const char* errText, int waiting) {
  int64_t now = gbClockNowNs();
  if (s->fdWarnedAt != 0 && now - s->fdWarnedAt < WINDOW_NS) return;
  s->fdWarnedAt = now;
  GB_WARN("%saccepting on %s: %s with %d connections waiting for their hello; the oldest strangers are dropped "
          "to make room and new connections wait in the queue meanwhile (raise the open-file limit, ulimit -n, if "
          "this job needs more descriptors)",
          s->prefix, s->where, errText, waiting);
}

int gbNetStrangersOldest(const int64_t* since, int n, size_t stride, int64_t now) {
  int best = -1;
  int64_t bestSince = 0;
  for (int i = 0; i < n; i++) {
    int64_t t = *(const int64_t*)((const char*)since + (size_t)i * stride);
    if (best < 0 || t < bestSince) {
      best = i;
      bestSince = t;
    }
  }
  return (best >= 0 && now - bestSince >= GB_NET_EVICT_MIN_AGE_NS) ? best : -1;
}
