/* A communicator's state as api/ asks for it: where its start-up is, its
 * first failure's text, and the wait for its queued host steps. */
#include <pthread.h>
#include <stdatomic.h>

#include "base/result.h"
#include "core/comm.h"

int gbCommInitState(gbComm_t c) { return atomic_load_explicit(&c->initState, memory_order_acquire); }

void gbCommInitEnd(gbComm_t c, gbResult_t res) {
  if (res != gbSuccess) {
    /* A failed start-up is a failure like any (an abort's error, if it came
     * first, stays): on this thread, which saw it, so the cause a peer
     * relayed or the peer that closed is known. It is recorded before the
     * state says "failed", so that a thread polling gbCommGetAsyncError never
     * sees a failed start-up with no error (success). */
    gbCommFail(c, res);
    /* Start-up no longer runs on this thread, so the connections made so far
     * are shut down with the cause at once: a neighbour waiting on this rank
     * names the rank that failed first instead of this one. */
    gbCommInitFailTell(c);
    /* A stall may be a neighbour's: its verdict, told just now, is the better one (blame.c). */
    gbCommInitFailAsk(c);
  }
  /* Release: a thread that sees "done" also sees everything init built. A
   * later gbCommFail (an abort) tells the peers itself; one that came while
   * start-up ran left that to this end, also when start-up still succeeded.
   * Under errorLock, which gbCommFailFor holds to read the state: one of the
   * two tells. */
  pthread_mutex_lock(&c->errorLock);
  atomic_store_explicit(&c->initState, res == gbSuccess ? GB_INIT_DONE : GB_INIT_FAILED, memory_order_release);
  int untold = res == gbSuccess && gbCommAsyncError(c) != gbSuccess;
  pthread_mutex_unlock(&c->errorLock);
  if (untold) gbCommInitFailTell(c);
}

const char* gbCommErrorText(gbComm_t c) { return c->errorText; }

const char* gbCommFailureText(gbComm_t c) {
  pthread_mutex_lock(&c->errorLock);
  /* While start-up runs its text may still change (blame.c). */
  int failed = gbCommAsyncError(c) != gbSuccess && c->errorText[0] != '\0' && gbCommInitState(c) != GB_INIT_RUNNING;
  pthread_mutex_unlock(&c->errorLock);
  return failed ? c->errorText : NULL;
}

gbResult_t gbCommDrain(gbComm_t c) {
  gbResult_t res = gbProxyDrain(c->proxy, gbDeadlineIn(c->settings.timeoutSec));
  if (res != gbSuccess && gbCommAsyncError(c) != gbSuccess) gbErrorRecord(c->errorText);
  return res;
}
