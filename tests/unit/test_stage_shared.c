/* Shared slots (stage/slots*.c) on the host device: members on one host
 * map one segment, and every collective reads the others' parts where they
 * lie, for 2, 3 and 5 members; a group of one member gets no slots. */
#include "unit/stage_colls.h"

static int body(rigMember_t* m) {
  gbStage_t* st = NULL;
  if (!rigSlots(m, 1, 0, &st)) return 0;
  int ok = st->ops->kind == GB_STAGE_SHARED;
  if (!ok) rigFail(m->rig, "member %d: the slots are %s, not shared", m->me, st->ops->name);
  if (ok) ok = collsAll(m, st);
  gbStageDestroy(st);
  return ok;
}

static int alone(rigMember_t* m) {
  int pid = (int)getpid();
  uint64_t host = 1;
  gbStageSlotsSpec_t spec = {.group = &m->g, .pids = &pid, .hostIds = &host, .nslots = 4, .slotBytes = 64 << 10,
                             .enabled = 1};
  gbStage_t* st = NULL;
  gbResult_t res = gbStageSlotsSetup(&m->ctx, &spec, &st);
  RIG_CHECK(m, res == gbSuccess && st == NULL, "one member: no slots and no error (%d, %p)", (int)res, (void*)st);
  return 1;
}

int main(void) {
  const int sizes[] = {2, 3, 5};
  for (int i = 0; i < 3; i++)
    if (!rigRun("test_stage_shared", sizes[i], body)) return 1;
  if (!rigRun("test_stage_shared (one member)", 1, alone)) return 1;
  printf("test_stage_shared: PASS\n");
  return 0;
}
