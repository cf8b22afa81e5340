/* The bulk stage (stage/bulk.c) on the host device: each group's messages
 * staged whole in one buffer and moved by one host step; three groups of
 * growing lengths (the buffer is replaced when outgrown), for 1, 2 and 3
 * members. */
#include "unit/stage_p2p.h"

static int body(rigMember_t* m) {
  gbStage_t* st = NULL;
  if (gbStageBulkCreate(&m->ctx, &m->g, &st) != gbSuccess) {
    rigFail(m->rig, "member %d: no bulk stage: %s", m->me, gbErrorLast());
    return 0;
  }
  int ok = 1;
  for (int r = 0; r < 3 && ok; r++) ok = p2pGroup(m, st, 0, 0, r);
  gbStageDestroy(st);
  return ok;
}

int main(void) {
  for (int n = 1; n <= 3; n++)
    if (!rigRun("test_stage_bulk", n, body)) return 1;
  printf("test_stage_bulk: PASS\n");
  return 0;
}
