/* What every listener (a rank's peer listener, the rendezvous root) does
 * with connections that are not (yet) a known peer: a log of refusals that
 * names each stranger once at WARN with its address and why, but stays
 * bounded under a flood (a summary line per second past a burst), and the
 * rule for making room when too many strangers wait or descriptors run out:
 * the oldest waiting stranger goes first. */
#ifndef GB_NET_STRANGERS_H
#define GB_NET_STRANGERS_H

#include <stdint.h>
#include "os/socket.h"

/* Refusals logged one by one per second; past that, counted and summed up. */
#define GB_NET_REFUSALS_PER_SECOND 20
/* A waiting connection younger than this is not evicted to make room: a
 * peer's hello follows its connect at once, so it gets this long to arrive. */
#define GB_NET_EVICT_MIN_AGE_NS (50LL * 1000000LL)
/* After accept() ran out of descriptors with nothing to evict: wait this
 * long before accepting again (the kernel keeps the queue meanwhile). */
#define GB_NET_ACCEPT_PAUSE_NS (20LL * 1000000LL)

typedef struct {
  const char* prefix;   /* "rendezvous root: " or "" */
  const char* suffix;   /* appended to each reason, e.g. " (not a rank of this job)" */
  char where[80];       /* the listening address, as text */
  int64_t windowStart;  /* the current one-second window */
  int logged;           /* lines written one by one in it */
  long suppressed;      /* refusals only counted in it */
  long total;           /* every refusal since the start */
  char lastPeer[80];
  char lastWhy[160];
  int64_t fdWarnedAt;   /* last "out of descriptors" line */
} gbNetStrangers_t;

void gbNetStrangersInit(gbNetStrangers_t* s, const char* prefix, const char* suffix, const gbSockAddr_t* where);
/* Logs (or counts) one refused connection. Does not close anything. */
void gbNetStrangersRefused(gbNetStrangers_t* s, const gbSockAddr_t* peer, const char* why);
/* Writes the summary of a window that has ended (call now and then, and
 * before the listener closes: force = 1 writes what is counted at once). */
void gbNetStrangersFlush(gbNetStrangers_t* s, int force);
/* accept() ran out of descriptors: a WARN at most once per second. */
void gbNetStrangersNoFds(gbNetStrangers_t* s, const char* errText, int waiting);

/* Index of the waiting connection to evict among n whose start times are
 * since[i * stride] (bytes apart), or -1 when even the oldest is younger than
 * GB_NET_EVICT_MIN_AGE_NS. */
int gbNetStrangersOldest(const int64_t* since, int n, size_t stride, int64_t now);

#endif
