/* What a failed start-up tells and asks, so that every survivor names the
 * rank that failed first.
 *
 * Telling: peers with a connection heard the cause with its shutdown, and a
 * rank connecting to this one hears it in the listener's answer; a rank that
 * waits for this rank's connection (a lower rank of a group whose mesh this
 * rank had not finished) gets a notice on a connection of its own (net
 * tell), so its accept fails at once with the cause.
 *
 * Asking, a stall's second opinion: when a rank's start-up fails because a
 * peer F made no progress (or a peer relayed that F stalled), F may itself
 * have been waiting on a third rank that stopped or died: the waits form a
 * chain, every rank in it reaches its deadline at about the same moment, and
 * F's own verdict ("rank Y stalled") reaches this rank just after it gave
 * up. So every rank tells its peers its verdict first (gbCommInitFailTell),
 * then asks the rank it blames: what F left on a shared-memory connection,
 * else F's listener, which answers a question with F's cause once F failed
 * (net ask). When F names another rank, this rank reports that one instead,
 * and follows the chain while a short grace lasts. A truly stopped F answers
 * nothing and the verdict stands; only the message changes, never the
 * failure. A rank whose failure names a peer stays until the grace ends, so
 * that a rank that waited on it without a connection (for its connect, say)
 * can still ask its listener. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/result.h"
#include "boot/mesh.h"
#include "core/comm.h"

#define GRACE_MAX_S 0.5

/* What rank left on any of this rank's shared-memory connections to it. */
static int toldBy(gbComm_t c, int rank, gbNetCause_t* out) {
  gbCommGroup_t* groups[] = {&c->island, &c->world, &c->bridge};
  for (int i = 0; i < 3; i++) {
    gbCommGroup_t* g = groups[i];
    if (!g->active || !g->conns || !g->ranks) continue;
    for (int k = 0; k < g->algo.n; k++)
      if (g->ranks[k] == rank && g->conns[k] && c->net->told(g->conns[k], out)) return 1;
  }
  return 0;
}

static int ask(gbComm_t c, int rank, gbDeadline_t deadline, gbNetCause_t* out) {
  if (toldBy(c, rank, out)) return 1;
  if (!c->peerAddrs) return 0;
  gbNetHello_t hello = gbBootHello(&c->id, c->rank, GB_NET_TAG_ASK, 1);
  /* A rank gone before it was asked may have left its cause in shared memory meanwhile. */
  return c->net->ask(&c->peerAddrs[rank], &hello, deadline, out) || toldBy(c, rank, out);
}

/* Whether rank r may wait for this rank's connection: r is a lower member
 * of a group of this rank's that lacks that connection (or was not set up:
 * the world, and a leader's bridge). */
static int awaits(gbComm_t c, int r) {
  if (!c->world.active) return r < c->rank;
  gbCommGroup_t* groups[] = {&c->island, &c->world, &c->bridge};
  for (int i = 0; i < 3; i++) {
    gbCommGroup_t* g = groups[i];
    if (!g->active || !g->conns || !g->ranks) continue;
    for (int k = 0; k < g->algo.me; k++)
      if (g->ranks[k] == r && !g->conns[k]) return 1;
  }
  const gbTopo_t* t = &c->topo;
  if (t->isLeader && !c->bridge.active && t->leaderOfIsland)
    for (int i = 0; i < t->nislands; i++)
      if (t->leaderOfIsland[i] == r && r < c->rank) return 1;
  return 0;
}

static void tellWaiting(gbComm_t c, const gbNetCause_t* k, gbDeadline_t deadline) {
  if (!c->peerAddrs || !c->net->tell) return;
  gbNetHello_t hello = gbBootHello(&c->id, c->rank, GB_NET_TAG_TELL, 1);
  for (int r = 0; r < c->rank && !gbDeadlinePassed(deadline); r++)
    if (awaits(c, r)) c->net->tell(&c->peerAddrs[r], &hello, k, deadline);
}

/* The rank a failure's cause blames for a stall, or -1. */
static int stalledRank(gbComm_t c, const gbNetCause_t* k) {
  if (k->code != gbTimeout || k->faultRank < 0 || k->faultRank >= c->nranks || k->faultRank == c->rank) return -1;
  return k->faultRank;
}

static void waitUntil(gbDeadline_t d) {
  int64_t left = d.ns - gbClockNowNs();
  if (left <= 0) return;
  struct timespec ts = {(time_t)(left / 1000000000), (long)(left % 1000000000)};
  nanosleep(&ts, NULL);
}

void gbCommInitFailAsk(gbComm_t c) {
  if (!c->net) return;
  pthread_mutex_lock(&c->errorLock);
  gbNetCause_t k = c->cause;
  pthread_mutex_unlock(&c->errorLock);
  double grace = c->settings.timeoutSec / 2.0 < GRACE_MAX_S ? c->settings.timeoutSec / 2.0 : GRACE_MAX_S;
  gbDeadline_t deadline = gbDeadlineIn(grace);
  tellWaiting(c, &k, deadline);
  /* This rank's own failure (a verdict, an abort): nobody waits on it to ask. */
  if (k.faultRank < 0 || k.faultRank == c->rank) return;
  int f = stalledRank(c, &k);
  char text[sizeof(c->errorText)] = "";
  unsigned char asked[GB_MAX_RANKS] = {0};
  gbNetCause_t t;
  while (f >= 0 && !asked[f] && ask(c, f, deadline, &t)) {
    asked[f] = 1;
    /* f failed on its own, or blames this rank or a rank already asked: its
     * answer adds nothing. */
    if (t.faultRank == f || t.faultRank == c->rank || t.faultRank < 0 || t.faultRank >= c->nranks ||
        asked[t.faultRank])
      break;
    if (t.seenBy == f)
      snprintf(text, sizeof(text), "rank %d failed (seen by rank %d, which this rank waited on: %s)", t.faultRank, f,
               t.text);
    else
      snprintf(text, sizeof(text), "rank %d failed (seen by rank %d: %s; told by rank %d, which this rank waited on)",
               t.faultRank, t.seenBy, t.text, f);
    k = t;
    f = stalledRank(c, &t);
  }
  if (text[0]) {
    /* This rank's own verdict was logged when it failed. */
    pthread_mutex_lock(&c->errorLock);
    c->cause = k;
    snprintf(c->errorText, sizeof(c->errorText), "%s", text);
    pthread_mutex_unlock(&c->errorLock);
    gbErrorSet(gbCommAsyncError(c), "%s", text);
  }
  waitUntil(deadline);
}
