/* The registry of live communicators: what a handle is checked against.
 * A gbComm_t is the struct's address, so a destroyed one cannot say so
 * itself (its memory is gone, and a "dead" mark stored just before free may
 * never be written at all). The registry outlives every communicator: a
 * handle is valid while its address is in it, and gbCommEnter reads
 * nothing at an address that is not.
 *
 * The live set is a sorted array (binary search; it holds only live
 * communicators and shrinks as they go). A freed communicator's memory is
 * held back for the next GRAVES frees before it goes to malloc, so that a
 * communicator made soon after (a split in a loop) does not get the address
 * of one just destroyed, and a stale handle keeps failing the check instead
 * of naming the new communicator. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/result.h"
#include "core/comm.h"

#define GRAVES 16

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct gbComm** live; /* [cap], sorted by address */
static size_t nlive, cap;
static struct gbComm* graves[GRAVES];
static size_t nextGrave;

/* Index of c in live, or where it would go. */
static size_t find(const struct gbComm* c) {
  size_t lo = 0, hi = nlive;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if ((uintptr_t)live[mid] < (uintptr_t)c) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static int has(const struct gbComm* c) {
  size_t i = find(c);
  return i < nlive && live[i] == c;
}

gbResult_t gbCommRegister(gbComm_t c) {
  pthread_mutex_lock(&lock);
  gbResult_t res = gbSuccess;
  if (nlive == cap) {
    size_t want = cap ? cap * 2 : 16;
    struct gbComm** grown = realloc(live, want * sizeof(*live));
    if (grown) {
      live = grown;
      cap = want;
    } else {
      res = gbErrorSet(gbSystemError, "out of memory for the registry of %zu live communicators", nlive + 1);
    }
  }
  if (res == gbSuccess && !has(c)) {
    size_t i = find(c);
    memmove(&live[i + 1], &live[i], (nlive - i) * sizeof(*live));
    live[i] = c;
    nlive++;
  }
  pthread_mutex_unlock(&lock);
  return res;
}

int gbCommUnregister(gbComm_t c) {
  pthread_mutex_lock(&lock);
  size_t i = find(c);
  int removed = i < nlive && live[i] == c;
  if (removed) {
    nlive--;
    memmove(&live[i], &live[i + 1], (nlive - i) * sizeof(*live));
  }
  /* Give memory back once most of the array is unused. */
  if (nlive == 0) {
    free(live);
    live = NULL;
    cap = 0;
  } else if (cap > 16 && nlive <= cap / 4) {
    struct gbComm** shrunk = realloc(live, cap / 2 * sizeof(*live));
    if (shrunk) {
      live = shrunk;
      cap /= 2;
    }
  }
  pthread_mutex_unlock(&lock);
  return removed;
}

int gbCommEnter(gbComm_t c) {
  if (!c) return 0;
  pthread_mutex_lock(&lock);
  /* Registered, so its memory is live and the magic can be read. */
  int ok = has(c) && c->magic == GB_COMM_MAGIC;
  if (ok) atomic_fetch_add_explicit(&c->callsInFlight, 1, memory_order_acq_rel);
  pthread_mutex_unlock(&lock);
  return ok;
}

void gbCommLeave(gbComm_t c) { atomic_fetch_sub_explicit(&c->callsInFlight, 1, memory_order_acq_rel); }

void gbCommRelease(gbComm_t c) {
  pthread_mutex_lock(&lock);
  struct gbComm* oldest = graves[nextGrave];
  graves[nextGrave] = c;
  nextGrave = (nextGrave + 1) % GRAVES;
  pthread_mutex_unlock(&lock);
  free(oldest);
}
