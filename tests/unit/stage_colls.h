/* Every collective through one stage (stage_rig.h), chunk by chunk and
 * pipelined two deep, as a walker runs it: all-reduce, broadcast and reduce
 * from each root, all-gather, reduce-scatter and all-to-all. Inputs are
 * small integers, so the expected values are exact whatever the order of
 * the sums: member m's element i of block b is (m + 1) * 1000 + b * 100 + i
 * (b = 0 outside the block collectives). */
#ifndef GB_TESTS_UNIT_STAGE_COLLS_H
#define GB_TESTS_UNIT_STAGE_COLLS_H

#include "unit/stage_rig.h"

#define COLLS_COUNT 3000 /* elements per call (or per block): three chunks */
#define COLLS_CHUNK 1000
#define COLLS_DEPTH 2

static inline int32_t collsInput(int m, int b, size_t i) { return (m + 1) * 1000 + b * 100 + (int32_t)i; }

typedef struct {
  rigMember_t* m;
  gbStage_t* st;
  gbColl_t coll;
  int root;
  const int32_t* send;
  int32_t* recv;
  gbStageWork_t base;    /* the fields every chunk shares */
  gbStageSlot_t slots[COLLS_DEPTH];
} collsCall_t;

static inline gbStageWork_t collsWork(const collsCall_t* c, size_t k) {
  gbStageWork_t w = c->base;
  size_t at = k * COLLS_CHUNK;
  w.len = COLLS_CHUNK;
  w.src = (const char*)(c->send + at);
  w.dst = (char*)(c->recv + at);
  return w;
}

/* Chunk k out, and chunk k - depth + 1 in, as gbCommPipeline runs them. */
static inline int collsRun(collsCall_t* c) {
  rigMember_t* m = c->m;
  size_t nchunks = COLLS_COUNT / COLLS_CHUNK;
  gbProxyOp_t tag;
  memset(&tag, 0, sizeof tag);
  tag.group = &m->g;
  for (size_t k = 0; k < nchunks + COLLS_DEPTH - 1; k++) {
    if (k < nchunks) {
      gbStageWork_t w = collsWork(c, k);
      gbStageSlot_t* s = &c->slots[k % COLLS_DEPTH];
      memset(s, 0, sizeof *s);
      tag.seq = k + 1;
      gbResult_t res = gbStageOut(c->st, &w, m->stream, &tag, s);
      RIG_CHECK(m, res == gbSuccess, "%s chunk %zu out: %s", gbPlanCollName(c->coll), k, gbErrorLast());
    }
    if (k + 1 >= COLLS_DEPTH) {
      size_t j = k + 1 - COLLS_DEPTH;
      gbStageWork_t w = collsWork(c, j);
      gbResult_t res = gbStageIn(c->st, &w, m->stream, &c->slots[j % COLLS_DEPTH]);
      RIG_CHECK(m, res == gbSuccess, "%s chunk %zu in: %s", gbPlanCollName(c->coll), j, gbErrorLast());
    }
  }
  return rigSync(m);
}

static inline int collsReductions(rigMember_t* m, gbStage_t* st, int32_t* send, int32_t* recv) {
  int n = m->n;
  for (size_t i = 0; i < COLLS_COUNT; i++) send[i] = collsInput(m->me, 0, i);
  collsCall_t c = {.m = m, .st = st, .coll = GB_COLL_ALLREDUCE, .send = send, .recv = recv};
  c.base = (gbStageWork_t){.coll = GB_COLL_ALLREDUCE, .dtype = gbInt32, .esize = 4, .stageOut = 1, .stageIn = 1,
                           .root = -1, .op = gbSum};
  memset(recv, 0, COLLS_COUNT * 4);
  if (!collsRun(&c)) return 0;
  for (size_t i = 0; i < COLLS_COUNT; i++) {
    int32_t want = 1000 * n * (n + 1) / 2 + n * (int32_t)i;
    RIG_CHECK(m, recv[i] == want, "all-reduce element %zu: %d, want %d", i, recv[i], want);
  }
  for (int root = 0; root < n; root++) {
    c.coll = c.base.coll = GB_COLL_BROADCAST;
    c.base.root = root;
    c.base.stageOut = m->me == root;
    c.base.stageIn = 1;
    memset(recv, 0, COLLS_COUNT * 4);
    if (!collsRun(&c)) return 0;
    for (size_t i = 0; i < COLLS_COUNT; i++)
      RIG_CHECK(m, recv[i] == collsInput(root, 0, i), "broadcast from %d, element %zu: %d, want %d", root, i,
                recv[i], collsInput(root, 0, i));
    c.coll = c.base.coll = GB_COLL_REDUCE;
    c.base.stageOut = 1;
    c.base.stageIn = m->me == root;
    c.base.op = gbMax;
    memset(recv, 0, COLLS_COUNT * 4);
    if (!collsRun(&c)) return 0;
    for (size_t i = 0; i < COLLS_COUNT && m->me == root; i++)
      RIG_CHECK(m, recv[i] == collsInput(n - 1, 0, i), "reduce (max) to %d, element %zu: %d, want %d", root, i,
                recv[i], collsInput(n - 1, 0, i));
    c.base.op = gbSum;
  }
  return 1;
}

/* Block collectives: chunk k holds elements [k * chunk, (k + 1) * chunk) of every block. */
static inline int collsBlocks(rigMember_t* m, gbStage_t* st, int32_t* send, int32_t* recv) {
  int n = m->n;
  size_t stride = COLLS_COUNT * 4;
  collsCall_t c = {.m = m, .st = st, .send = send, .recv = recv};
  c.base = (gbStageWork_t){.dtype = gbInt32, .esize = 4, .srcStride = stride, .dstStride = stride, .stageOut = 1,
                           .stageIn = 1, .root = -1, .op = gbSum};
  const gbColl_t colls[] = {GB_COLL_ALLGATHER, GB_COLL_REDUCESCATTER, GB_COLL_ALLTOALL};
  for (int x = 0; x < 3; x++) {
    c.coll = c.base.coll = colls[x];
    int blocks = c.coll == GB_COLL_ALLGATHER ? 1 : n;
    for (int b = 0; b < blocks; b++)
      for (size_t i = 0; i < COLLS_COUNT; i++) send[(size_t)b * COLLS_COUNT + i] = collsInput(m->me, b, i);
    memset(recv, 0, (size_t)n * stride);
    if (!collsRun(&c)) return 0;
    for (int r = 0; r < (c.coll == GB_COLL_REDUCESCATTER ? 1 : n); r++)
      for (size_t i = 0; i < COLLS_COUNT; i++) {
        int32_t got = recv[(size_t)r * COLLS_COUNT + i], want = 0;
        if (c.coll == GB_COLL_ALLGATHER) want = collsInput(r, 0, i);
        else if (c.coll == GB_COLL_ALLTOALL) want = collsInput(r, m->me, i);
        else
          for (int k = 0; k < n; k++) want += collsInput(k, m->me, i);
        RIG_CHECK(m, got == want, "%s block %d element %zu: %d, want %d", gbPlanCollName(c.coll), r, i, got, want);
      }
  }
  return 1;
}

/* Every collective through st; 1 when every member's bits were right. */
static inline int collsAll(rigMember_t* m, gbStage_t* st) {
  int32_t* send = calloc((size_t)m->n * COLLS_COUNT, 4);
  int32_t* recv = calloc((size_t)m->n * COLLS_COUNT, 4);
  int ok = send && recv;
  if (!ok) rigFail(m->rig, "member %d: out of memory", m->me);
  if (ok) ok = collsReductions(m, st, send, recv) && collsBlocks(m, st, send, recv);
  free(send);
  free(recv);
  return ok;
}

#endif
