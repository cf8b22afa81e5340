/* A group of n members (threads of one test process) joined by TCP loopback
 * connections, as algo/ and island/ tests need it. Each member listens, the
 * test publishes the addresses (and waits for all of them), then each member
 * connects to every higher member with a hello and accepts every lower one.
 * Failures come back as text so each test reports them its own way. */
#ifndef GB_TESTS_UNIT_LOOPBACK_GROUP_H
#define GB_TESTS_UNIT_LOOPBACK_GROUP_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "algo/algo.h"
#include "base/clock.h"
#include "net/net.h"
#include "os/socket.h"

typedef struct {
  const gbNetOps_t* net;
  const uint8_t* secret; /* GB_NET_SECRET_BYTES */
  uint64_t commHash;
  int tag;
  const char* name; /* connection labels and the group's name */
  int n, me;
  double timeoutSec; /* for connecting and the group's calls */
  atomic_int* abortFlag;
} loopbackSpec_t;

/* Listens on 127.0.0.1, any port; *addr is where the others connect. 1 on
 * success; *lis is set whenever the listener was opened (close it). */
static inline int loopbackListen(const loopbackSpec_t* s, gbNetListener_t** lis, gbSockAddr_t* addr) {
  gbSockAddr_t any;
  return gbSockAddrParse("127.0.0.1", 0, &any) == gbSuccess &&
         s->net->listen(&any, s->secret, s->commHash, lis) == gbSuccess &&
         s->net->listenerAddr(*lis, addr) == gbSuccess;
}

/* Connects up, then accepts from below: the highest member only accepts, so
 * every connect finds its peer serving. addrs[j] must hold every member's
 * listener address. On success fills conns[n] (conns[me] stays NULL, the
 * caller closes the others, also after a failure), ranks[n] and g's
 * membership fields, and returns 1; else writes why and returns 0. */
static inline int loopbackJoin(const loopbackSpec_t* s, gbNetListener_t* lis, const gbSockAddr_t* addrs,
                               gbNetConn_t** conns, int* ranks, gbAlgoGroup_t* g, char* why,
                               size_t whyLen) {
  gbDeadline_t dl = gbDeadlineIn(s->timeoutSec);
  for (int j = s->me + 1; j < s->n; j++) {
    gbNetHello_t hello;
    memset(&hello, 0, sizeof hello);
    hello.magic = GB_NET_HELLO_MAGIC;
    memcpy(hello.secret, s->secret, sizeof hello.secret);
    hello.commHash = s->commHash;
    hello.srcRank = s->me;
    hello.tag = s->tag;
    hello.nsocks = 2;
    gbNetLabel_t label = {j, s->name, 0}; /* one process: no shared-memory set-up */
    if (s->net->connect(&addrs[j], &hello, label, dl, s->abortFlag, &conns[j]) != gbSuccess) {
      snprintf(why, whyLen, "member %d: cannot connect to member %d", s->me, j);
      return 0;
    }
  }
  for (int i = 0; i < s->me; i++) {
    gbNetLabel_t label = {i, s->name, 0};
    if (s->net->accept(lis, i, s->tag, label, dl, s->abortFlag, &conns[i]) != gbSuccess) {
      snprintf(why, whyLen, "member %d: cannot accept member %d", s->me, i);
      return 0;
    }
  }
  for (int i = 0; i < s->n; i++) ranks[i] = i;
  g->n = s->n;
  g->me = s->me;
  g->conns = conns;
  g->ranks = ranks;
  g->name = s->name;
  g->net = s->net;
  g->timeoutSec = s->timeoutSec;
  g->abortFlag = s->abortFlag;
  return 1;
}

#endif
