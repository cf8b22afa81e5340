/* Send/recv channels (stage/channels.c) on the host device: members on one
 * host send each other (and themselves) messages several chunks long, in
 * three groups in a row, for 2, 3 and 4 members. */
#include "unit/stage_p2p.h"

static int body(rigMember_t* m) {
  gbStage_t* slots = NULL;
  gbStage_t* st = NULL;
  if (!rigSlots(m, 1, 1, &slots)) return 0;
  int ok = gbStageChannels(slots, &st) == gbSuccess && st != NULL;
  if (!ok) rigFail(m->rig, "member %d: the world's slots hold no channels", m->me);
  size_t bytes = ok ? gbStageChannelBytes(st) : 0;
  if (ok && (bytes == 0 || bytes > (64 << 10) || gbStageChannelDepth(st) != 4)) {
    rigFail(m->rig, "member %d: channels of %zu bytes, %d deep: want 1..64 KiB, 4", m->me, bytes,
            gbStageChannelDepth(st));
    ok = 0;
  }
  for (int r = 0; r < 3 && ok; r++) ok = p2pGroup(m, st, bytes, gbStageChannelDepth(st), r);
  gbStageDestroy(st);
  gbStageDestroy(slots);
  return ok;
}

int main(void) {
  for (int n = 2; n <= 4; n++)
    if (!rigRun("test_stage_channels", n, body)) return 1;
  printf("test_stage_channels: PASS\n");
  return 0;
}
