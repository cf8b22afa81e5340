/* The staging slots chunks cross the bridge in (see gbStaging_t), and the
 * end-of-collective marker teardown counts. */
#include "base/result.h"
#include "core/comm.h"

gbResult_t gbCommSlotAcquire(gbComm_t c, void* stream, gbSlot_t* out) {
  gbStaging_t* s = &c->staging;
  out->slot = s->next++ % (size_t)s->nslots;
  out->use = ++s->uses[out->slot];
  out->buf = (char*)s->base + out->slot * s->slotBytes;
  return c->dev->flagWait(&s->freed[out->slot], out->use - 1, stream);
}

gbFlag_t* gbCommSlotStagedFlag(gbComm_t c, const gbSlot_t* s) { return &c->staging.staged[s->slot]; }
gbFlag_t* gbCommSlotDoneFlag(gbComm_t c, const gbSlot_t* s) { return &c->staging.done[s->slot]; }

gbResult_t gbCommSlotStaged(gbComm_t c, const gbSlot_t* s, void* stream) {
  return c->dev->flagWrite(&c->staging.staged[s->slot], s->use, stream);
}

gbResult_t gbCommSlotAwait(gbComm_t c, const gbSlot_t* s, void* stream) {
  return c->dev->flagWait(&c->staging.done[s->slot], s->use, stream);
}

gbResult_t gbCommSlotRelease(gbComm_t c, const gbSlot_t* s, void* stream) {
  return c->dev->flagWrite(&c->staging.freed[s->slot], s->use, stream);
}

/* The last stream task of each collective counts it done (also when the
 * stream drops it after an error), so teardown knows when no stream work
 * still points into the communicator. */
static gbResult_t markerRun(void* arg) {
  (void)arg;
  return gbSuccess;
}
static void markerDone(void* arg) { __atomic_add_fetch(&((gbComm_t)arg)->streamDone->value, 1, __ATOMIC_RELEASE); }

gbResult_t gbCommMarkStreamWork(gbComm_t c, void* stream) {
  if (!c->dev->launchHostFn) return gbSuccess;
  GB_CHECK(c->dev->launchHostFn(stream, markerRun, c, markerDone));
  c->streamPosted++;
  return gbSuccess;
}
