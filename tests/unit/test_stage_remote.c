/* Remote slots (stage/slots_remote.c) on the host device: members that
 * name different hosts keep their own copy of the layout and the proxy
 * moves the parts over the group's transport; every collective, for 2, 3
 * and 4 members; 5 members keep the private stage (no slots). */
#include "unit/stage_colls.h"

static int body(rigMember_t* m) {
  gbStage_t* st = NULL;
  if (!rigSlots(m, 0, 1, &st)) return 0;
  int ok = st->ops->kind == GB_STAGE_REMOTE;
  if (!ok) rigFail(m->rig, "member %d: the slots are %s, not remote", m->me, st->ops->name);
  gbStage_t* channels = NULL;
  if (ok && (gbStageChannels(st, &channels) != gbSuccess || channels != NULL)) {
    rigFail(m->rig, "member %d: remote slots hold no send/recv channels", m->me);
    ok = 0;
  }
  if (ok) ok = collsAll(m, st);
  gbStageDestroy(st);
  return ok;
}

static int tooMany(rigMember_t* m) {
  int pids[RIG_MAX];
  uint64_t hosts[RIG_MAX];
  for (int k = 0; k < m->n; k++) {
    pids[k] = (int)getpid();
    hosts[k] = 100 + (uint64_t)k;
  }
  gbStageSlotsSpec_t spec = {.group = &m->g, .pids = pids, .hostIds = hosts, .nslots = 4, .slotBytes = 64 << 10,
                             .enabled = 1};
  gbStage_t* st = NULL;
  gbResult_t res = gbStageSlotsSetup(&m->ctx, &spec, &st);
  RIG_CHECK(m, res == gbSuccess && st == NULL, "%d members across hosts: no slots (%d, %p)", m->n, (int)res,
            (void*)st);
  return 1;
}

int main(void) {
  for (int n = 2; n <= GB_STAGE_REMOTE_MAX; n++)
    if (!rigRun("test_stage_remote", n, body)) return 1;
  if (!rigRun("test_stage_remote (too many)", GB_STAGE_REMOTE_MAX + 1, tooMany)) return 1;
  printf("test_stage_remote: PASS\n");
  return 0;
}
