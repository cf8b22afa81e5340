/* Send/receive scenarios of rank_matrix (tests/mp/test_matrix.py).
 *
 * Every rank builds the same list of messages (source, destination, count,
 * type) for a scenario and issues its own part: gbSend where it is the
 * source, gbRecv where it is the destination. Within a group only the order
 * per peer and direction is the contract, so even ranks issue in list order
 * and odd ranks all their receives first, then their sends. Message k's
 * contents come from its own generator key; every receive region is followed
 * by a guard that must stay untouched, and send buffers must not change. */
#ifndef GB_TESTS_MP_RANK_MATRIX_P2P_H
#define GB_TESTS_MP_RANK_MATRIX_P2P_H

#include "rank_matrix.h"

enum { SC_RING, SC_PAIR, SC_MULTI, SC_SELF, SC_UNEVEN, SC_NOGROUP, SC_NESTED, SC_COUNT };
static const char* scNames[SC_COUNT] RC_UNUSED = {"ring", "pair", "multi", "self", "uneven", "nogroup", "nested"};

#define MAX_MSGS (4 * MAX_RANKS * MAX_RANKS)

typedef struct {
  int src, dst;
  size_t count;
  int dt;
  size_t soff, roff; /* byte offsets in this rank's send and receive buffers */
} msg_t;

static msg_t gMsgs[MAX_MSGS];

static inline int addMsg(int n, int src, int dst, size_t count, int dt) {
  if (n == MAX_MSGS) DIE("too many messages");
  gMsgs[n] = (msg_t){src, dst, count, dt, 0, 0};
  return n + 1;
}

/* The scenario's messages for base count c, in list order. dts[d] is the
 * case's type; uneven also mixes in the spec's other types. */
static inline int buildScenario(int sc, size_t c, const int* dts, int ndt, int d) {
  int n = 0, N = gN, dt = dts[d];
  switch (sc) {
    case SC_RING: /* every rank to the next: a ring shift */
    case SC_NESTED:
      for (int r = 0; r < N; r++) n = addMsg(n, r, (r + 1) % N, c, dt);
      break;
    case SC_PAIR: /* pairs (0,1), (2,3), ... both ways; an odd last rank pairs with 0 */
      for (int a = 0; a + 1 < N; a += 2) {
        n = addMsg(n, a, a + 1, c, dt);
        n = addMsg(n, a + 1, a, c, dt);
      }
      if (N % 2) {
        n = addMsg(n, N - 1, 0, c, dt);
        if (N > 1) n = addMsg(n, 0, N - 1, c, dt);
      }
      break;
    case SC_MULTI: /* three messages of different sizes to the next rank, one back */
      for (int r = 0; r < N; r++) {
        int next = (r + 1) % N;
        n = addMsg(n, r, next, c, dt);
        n = addMsg(n, next, r, c + 2, dt);
        n = addMsg(n, r, next, 2 * c + 1, dt);
        n = addMsg(n, r, next, c / 2, dt);
      }
      break;
    case SC_SELF: /* two messages to oneself around one to the next rank */
      for (int r = 0; r < N; r++) {
        n = addMsg(n, r, r, c, dt);
        n = addMsg(n, r, (r + 1) % N, c, dt);
        n = addMsg(n, r, r, c + 3, dt);
      }
      break;
    case SC_UNEVEN: /* every ordered pair, itself included: sizes and types differ, some 0 */
      for (int s = 0; s < N; s++)
        for (int t = 0; t < N; t++) {
          size_t cnt = (s * 5 + t * 3 + 1) % 4 == 0 ? 0 : c * (size_t)(1 + (s + t) % 3) + (size_t)s;
          n = addMsg(n, s, t, cnt, dts[(d + s + 2 * t) % ndt]);
        }
      break;
    case SC_NOGROUP: /* outside any group: 0 -> last, then last -> 0 */
      if (N > 1) {
        n = addMsg(n, 0, N - 1, c, dt);
        n = addMsg(n, N - 1, 0, c + 1, dt);
      }
      break;
  }
  return n;
}

static inline size_t regionBytes(const msg_t* m) {
  size_t b = m->count * dtSizes[m->dt];
  return ((b + 63) / 64) * 64 + GUARD;
}

/* Lays out this rank's sends and receives; returns the larger total. */
static inline size_t layoutMine(int nmsg, int me) {
  size_t so = 0, ro = 0;
  for (int k = 0; k < nmsg; k++) {
    msg_t* m = &gMsgs[k];
    if (m->src == me) {
      m->soff = so;
      so += regionBytes(m);
    }
    if (m->dst == me) {
      m->roff = ro;
      ro += regionBytes(m);
    }
  }
  return so > ro ? so : ro;
}

static inline uint64_t msgKey(int caseIdx, int k) { return inputKey(gMsgs[k].src, caseIdx) ^ mix64((uint64_t)k + 1); }

/* Bytes a rank needs for the scenario (for sizing its buffers). */
static inline size_t p2pBytes(int sc, size_t c, const int* dts, int ndt, int d, int me) {
  return layoutMine(buildScenario(sc, c, dts, ndt, d), me);
}

/* Issues, in list order, this rank's sends (sends != 0) and receives
 * (recvs != 0); a message to itself is a send and then a receive. */
static inline void issueMine(run_t* R, int nmsg, int sends, int recvs, const char* what) {
  for (int k = 0; k < nmsg; k++) {
    const msg_t* m = &gMsgs[k];
    for (int dir = 0; dir < 2; dir++) {
      int isSend = dir == 0;
      if (isSend ? !(sends && m->src == R->rank) : !(recvs && m->dst == R->rank)) continue;
      gbResult_t res = isSend ? gbSend((char*)R->dSend + m->soff, m->count, m->dt, m->dst, R->comm, R->stream)
                              : gbRecv((char*)R->dRecv + m->roff, m->count, m->dt, m->src, R->comm, R->stream);
      if (res != gbSuccess)
        DIE("%s: message %d (%d -> %d, %zu %s): %s returned %d: %s", what, k, m->src, m->dst, m->count,
            dtNames[m->dt], isSend ? "gbSend" : "gbRecv", (int)res, gbGetLastError(R->comm));
    }
  }
}

static inline void runSendRecv(run_t* R, int sc, size_t c, const int* dts, int ndt, int d) {
  int caseIdx = R->caseIdx++, me = R->rank;
  int nmsg = buildScenario(sc, c, dts, ndt, d);
  size_t total = layoutMine(nmsg, me);
  char what[200];
  snprintf(what, sizeof(what), "case %d: sendrecv %s count %zu %s", caseIdx, scNames[sc], c, dtNames[dts[d]]);
  needCap(R, total, what);
  /* Sends hold their message; every receive region and its guard hold PATTERN. */
  fillPattern(R, R->dRecv, 0, total);
  for (int k = 0; k < nmsg; k++) {
    const msg_t* m = &gMsgs[k];
    if (m->src != me) continue;
    genInput(msgKey(caseIdx, k), 0, m->count, m->dt, R->in);
    if (m->count) CHECK_GB(gbMemcpyToDevice((char*)R->dSend + m->soff, R->in, m->count * dtSizes[m->dt]));
  }
  if (sc == SC_NOGROUP) {
    issueMine(R, nmsg, 1, 1, what); /* list order, each call its own operation */
  } else if (sc == SC_NESTED) {
    CHECK_GB(gbGroupStart());
    issueMine(R, nmsg, 1, 0, what);
    CHECK_GB(gbGroupStart());
    issueMine(R, nmsg, 0, 1, what);
    CHECK_GB(gbGroupEnd());
    CHECK_GB(gbGroupEnd());
  } else {
    CHECK_GB(gbGroupStart());
    if (me % 2 == 0) {
      issueMine(R, nmsg, 1, 1, what);
    } else {
      issueMine(R, nmsg, 0, 1, what);
      issueMine(R, nmsg, 1, 0, what);
    }
    CHECK_GB(gbGroupEnd());
  }
  syncAndCheck(R, what);
  for (int k = 0; k < nmsg; k++) {
    const msg_t* m = &gMsgs[k];
    size_t bytes = m->count * dtSizes[m->dt];
    char region[120];
    if (m->dst == me) {
      snprintf(region, sizeof(region), "message %d from rank %d (%zu %s)", k, m->src, m->count, dtNames[m->dt]);
      genInput(msgKey(caseIdx, k), 0, m->count, m->dt, R->want);
      checkDevice(R, what, region, R->dRecv, m->roff, R->want, m->count, m->dt);
      snprintf(region, sizeof(region), "guard after message %d", k);
      checkPattern(R, what, region, R->dRecv, m->roff + bytes, regionBytes(m) - bytes);
    }
    if (m->src == me) {
      snprintf(region, sizeof(region), "send buffer of message %d changed", k);
      genInput(msgKey(caseIdx, k), 0, m->count, m->dt, R->want);
      checkDevice(R, what, region, R->dSend, m->soff, R->want, m->count, m->dt);
    }
  }
  R->counts[K_SENDRECV]++;
}

#endif
