/* The exchange (stage/exchange.c) on the host device: 2, 3, 5 and 8
 * members on one host all-reduce a run of calls whose sizes take 1 to 8
 * blocks, in turn on two streams (in the last round on one stream, every
 * other call from a thread of its own: the same handle from another thread
 * waits for the last exchange as another stream does), each call as a
 * walker runs it (out, then in), so the two buffers alternate under calls
 * of different block counts and every read flag a later call waits for was
 * set. Inputs are small
 * integers, so the expected sums and maxima are exact whatever the order:
 * member m's element i of call c is (m + 1) * 1000 + c * 10 + i % 1000.
 * Also: a call larger than the buffers is refused before anything is
 * queued, and a group whose slots have no exchange buffers gets no
 * exchange. */
#include "unit/stage_rig.h"

#define EX_BYTES (256 << 10) /* each member's buffers: up to 8 blocks of 32 KiB */
#define EX_ROUNDS 3

static const size_t counts[] = {1, 9000, 3, EX_BYTES / 4, 17, 40000, 8192};
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))

static int32_t input(int m, int c, size_t i) { return (m + 1) * 1000 + c * 10 + (int32_t)(i % 1000); }

static int slotsWithExchange(rigMember_t* m, size_t exchangeBytes, gbStage_t** slots, gbStage_t** ex) {
  int pids[RIG_MAX];
  uint64_t hosts[RIG_MAX];
  for (int k = 0; k < m->n; k++) pids[k] = (int)getpid(), hosts[k] = 1;
  gbStageSlotsSpec_t spec = {.group = &m->g, .pids = pids, .hostIds = hosts, .nslots = 4, .slotBytes = 64 << 10,
                             .enabled = 1, .exchangeBytes = exchangeBytes};
  gbResult_t res = gbStageSlotsSetup(&m->ctx, &spec, slots);
  RIG_CHECK(m, res == gbSuccess && *slots, "no slots (%d): %s", (int)res, gbErrorLast());
  res = gbStageExchange(*slots, &m->g, ex);
  RIG_CHECK(m, res == gbSuccess, "no exchange (%d): %s", (int)res, gbErrorLast());
  return 1;
}

/* One all-reduce of count elements through the exchange on stream. */
static int allReduce(rigMember_t* m, gbStage_t* ex, const int32_t* send, int32_t* recv, size_t count, gbRedOp_t op,
                     void* stream, uint64_t seq) {
  gbStageWork_t w = {.coll = GB_COLL_ALLREDUCE, .dtype = gbInt32, .esize = 4, .len = count, .src = (const char*)send,
                     .dst = (char*)recv, .stageOut = 1, .stageIn = 1, .root = -1, .op = op};
  gbProxyOp_t tag;
  memset(&tag, 0, sizeof tag);
  tag.group = &m->g;
  tag.seq = seq;
  gbStageSlot_t s;
  memset(&s, 0, sizeof s);
  gbResult_t res = gbStageOut(ex, &w, stream, &tag, &s);
  RIG_CHECK(m, res == gbSuccess, "call %llu out: %s", (unsigned long long)seq, gbErrorLast());
  res = gbStageIn(ex, &w, stream, &s);
  RIG_CHECK(m, res == gbSuccess, "call %llu in: %s", (unsigned long long)seq, gbErrorLast());
  return 1;
}

typedef struct {
  rigMember_t* m;
  gbStage_t* ex;
  const int32_t* send;
  int32_t* recv;
  size_t count;
  gbRedOp_t op;
  void* stream;
  uint64_t seq;
  int ok;
} call_t;

static void* callMain(void* p) {
  call_t* c = p;
  c->ok = allReduce(c->m, c->ex, c->send, c->recv, c->count, c->op, c->stream, c->seq);
  return NULL;
}

/* allReduce from a thread of its own (the caller's waits for it). */
static int allReduceElsewhere(call_t* c) {
  pthread_t t;
  if (pthread_create(&t, NULL, callMain, c) != 0) {
    rigFail(c->m->rig, "member %d: cannot start a thread", c->m->me);
    return 0;
  }
  pthread_join(t, NULL);
  return c->ok;
}

static int body(rigMember_t* m) {
  gbStage_t *slots = NULL, *ex = NULL;
  int32_t* send = malloc(EX_BYTES);
  int32_t* recv[NCOUNTS];
  void* other = NULL;
  int ok = send && m->ctx.dev->streamCreate(&other) == gbSuccess && slotsWithExchange(m, EX_BYTES, &slots, &ex);
  for (size_t c = 0; c < NCOUNTS; c++) recv[c] = malloc(EX_BYTES);
  if (ok && !ex) rigFail(m->rig, "member %d: slots with exchange buffers gave no exchange", m->me), ok = 0;
  int n = m->n, n1 = n * (n + 1) / 2;
  uint64_t seq = 0;
  for (int round = 0; ok && round < EX_ROUNDS; round++) {
    m->g.ringMinBytes = round == 1 ? 0 : 1 << 20; /* round 1 folds ring slices (3+ members) */
    for (size_t c = 0; c < NCOUNTS && ok; c++) {
      /* A fresh input per call: a stale part of an earlier call gives a wrong sum. */
      int32_t* in = malloc(counts[c] * 4);
      for (size_t i = 0; i < counts[c] && in; i++) in[i] = input(m->me, (int)c + round, i);
      gbRedOp_t op = c % 3 == 2 ? gbMax : gbSum;
      call_t call = {m, ex, in, recv[c], counts[c], op, round == 2 || c % 2 == 0 ? m->stream : other, ++seq, 0};
      ok = in && (round == 2 && c % 2 == 0 ? allReduceElsewhere(&call) : allReduce(m, ex, in, recv[c], counts[c],
                                                                                  op, call.stream, seq)) &&
           rigSync(m) && m->ctx.dev->streamSynchronize(other) == gbSuccess;
      for (size_t i = 0; ok && i < counts[c]; i++) {
        int32_t want = op == gbMax ? input(n - 1, (int)c + round, i)
                                   : 1000 * n1 + n * ((int32_t)(c + (size_t)round) * 10 + (int32_t)(i % 1000));
        if (recv[c][i] != want) {
          rigFail(m->rig, "member %d: round %d call %zu (%zu elements, %s), element %zu: %d, want %d", m->me, round,
                  c, counts[c], op == gbMax ? "max" : "sum", i, recv[c][i], want);
          ok = 0;
        }
        m->checks++;
      }
      free(in);
    }
  }
  if (ok) {
    /* Too large for the buffers: refused at once, nothing queued. */
    gbStageWork_t w = {.coll = GB_COLL_ALLREDUCE, .dtype = gbInt32, .esize = 4, .len = EX_BYTES / 4 + 1,
                       .src = (const char*)send, .dst = (char*)recv[0], .stageOut = 1, .stageIn = 1, .op = gbSum};
    gbProxyOp_t tag;
    memset(&tag, 0, sizeof tag);
    gbStageSlot_t s;
    memset(&s, 0, sizeof s);
    gbResult_t res = gbStageOut(ex, &w, m->stream, &tag, &s);
    RIG_CHECK(m, res == gbInternalError && !s.queued && strstr(gbErrorLast(), "at most 262144 bytes"),
              "an all-reduce past the buffers: %d, queued %d: %s", (int)res, s.queued, gbErrorLast());
  }
  gbStageDestroy(ex);
  gbStageDestroy(slots);
  if (other) m->ctx.dev->streamDestroy(other);
  for (size_t c = 0; c < NCOUNTS; c++) free(recv[c]);
  free(send);
  return ok;
}

static int without(rigMember_t* m) {
  gbStage_t *slots = NULL, *ex = NULL;
  if (!slotsWithExchange(m, 0, &slots, &ex)) return 0;
  int ok = ex == NULL;
  if (!ok) rigFail(m->rig, "member %d: slots without exchange buffers gave an exchange", m->me);
  gbStageDestroy(ex);
  gbStageDestroy(slots);
  return ok;
}

int main(void) {
  const int sizes[] = {2, 3, 5, 8};
  for (int i = 0; i < 4; i++)
    if (!rigRun("test_stage_exchange", sizes[i], body)) return 1;
  if (!rigRun("test_stage_exchange (no buffers)", 2, without)) return 1;
  printf("test_stage_exchange: PASS\n");
  return 0;
}
