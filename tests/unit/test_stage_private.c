/* The private stage (stage/private.c) on the host device: every collective
 * through the communicator's own slots and the host collective on the
 * proxy, for 1, 2 and 3 members; then an all-reduce worked in place
 * (direct, the proxy running its chunks back to back) with a PreMulSum
 * scale, whose result must be twice the sum. */
#include "unit/stage_colls.h"

static int body(rigMember_t* m) {
  gbStagePool_t* pool = NULL;
  gbStage_t* st = NULL;
  int ok = 0;
  int32_t* send = calloc(COLLS_COUNT, 4);
  int32_t* recv = calloc(COLLS_COUNT, 4);
  int32_t* two = calloc(1, 4);
  if (!send || !recv || !two) {
    rigFail(m->rig, "member %d: out of memory", m->me);
    goto done;
  }
  if (gbStagePoolCreate(&m->ctx, 2, 64 << 10, &pool) != gbSuccess ||
      gbStagePrivateCreate(&m->ctx, pool, &m->g, &st) != gbSuccess) {
    rigFail(m->rig, "member %d: no private stage: %s", m->me, gbErrorLast());
    goto done;
  }
  if (!collsAll(m, st)) goto done;

  *two = 2;
  for (size_t i = 0; i < COLLS_COUNT; i++) send[i] = collsInput(m->me, 0, i);
  gbStageWork_t w = {.coll = GB_COLL_ALLREDUCE, .dtype = gbInt32, .esize = 4, .len = COLLS_COUNT,
                     .src = (const char*)send, .dst = (char*)recv, .stageOut = 1, .stageIn = 1, .root = -1,
                     .op = gbSum, .scale = two, .direct = 1, .hostChunk = COLLS_CHUNK};
  gbProxyOp_t tag = {.group = &m->g, .seq = 1};
  gbStageSlot_t s = {0};
  gbResult_t res = gbStageOut(st, &w, m->stream, &tag, &s);
  if (res == gbSuccess) res = gbStageIn(st, &w, m->stream, &s);
  if (res != gbSuccess) {
    rigFail(m->rig, "member %d: direct all-reduce: %s", m->me, gbErrorLast());
    goto done;
  }
  if (!rigSync(m)) goto done;
  int n = m->n;
  for (size_t i = 0; i < COLLS_COUNT; i++) {
    int32_t want = 2 * (1000 * n * (n + 1) / 2 + n * (int32_t)i);
    m->checks++;
    if (recv[i] != want) {
      rigFail(m->rig, "member %d: direct scaled all-reduce element %zu: %d, want %d", m->me, i, recv[i], want);
      goto done;
    }
  }
  ok = 1;
done:
  gbStageDestroy(st);
  gbStagePoolDestroy(pool);
  free(send);
  free(recv);
  free(two);
  return ok;
}

int main(void) {
  for (int n = 1; n <= 3; n++)
    if (!rigRun("test_stage_private", n, body)) return 1;
  printf("test_stage_private: PASS\n");
  return 0;
}
