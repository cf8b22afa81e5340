/* Failure, validity and teardown of a communicator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/result.h"
#include "core/comm.h"

int gbCommIsValid(const struct gbComm* c) { return c && c->magic == GB_COMM_MAGIC; }

static void shutdownGroup(gbComm_t c, gbCommGroup_t* g) {
  if (!g->active) return;
  for (int k = 0; k < g->algo.n; k++)
    if (g->conns[k]) c->net->shutdown(g->conns[k]);
}

void gbCommFail(gbComm_t c, gbResult_t res) {
  pthread_mutex_lock(&c->errorLock);
  if (c->asyncError == gbSuccess) {
    c->asyncError = res;
    snprintf(c->errorText, sizeof(c->errorText), "%s", gbErrorLast());
    GB_INFO(GB_LOG_INIT, "communicator failed (%s); closing its connections so peers stop too", gbResultString(res));
  }
  c->abortFlag = 1;
  if (c->initState == GB_INIT_DONE) {
    shutdownGroup(c, &c->island);
    shutdownGroup(c, &c->bridge);
    shutdownGroup(c, &c->world);
  }
  pthread_mutex_unlock(&c->errorLock);
}

static void freeGroup(gbComm_t c, gbCommGroup_t* g) {
  if (g->conns)
    for (int k = 0; k < g->algo.n; k++)
      if (g->conns[k]) c->net->close(g->conns[k]);
  gbAlgoGroupFree(&g->algo);
  free(g->conns);
  free(g->ranks);
  memset(g, 0, sizeof(*g));
}

void gbCommFree(gbComm_t c) {
  if (c->initThreadStarted) pthread_join(c->initThread, NULL);
  /* Work this comm enqueued may still sit in streams: let it finish (every
   * step has a deadline, and aborted steps fail at once) before freeing what
   * it uses. */
  if (c->streamDone && c->dev->launchHostFn)
    (void)gbFlagWaitHost(c->streamDone, c->streamPosted, c->settings.timeoutSec + 5, NULL);
  else if (c->dev && c->dev->deviceSynchronize && c->seq > 0)
    (void)c->dev->deviceSynchronize();
  gbProxyDestroy(c->proxy);
  if (c->islandComm) c->islandComm->ops->destroy(c->islandComm);
  freeGroup(c, &c->island);
  freeGroup(c, &c->bridge);
  freeGroup(c, &c->world);
  if (c->listener) c->net->listenerClose(c->listener);
  if (c->dev) {
    if (c->staging.base) c->dev->hostFree(c->staging.base);
    if (c->staging.staged) c->dev->hostFree(c->staging.staged);
    if (c->streamDone) c->dev->hostFree(c->streamDone);
    if (c->scratchDev) c->dev->memFree(c->scratchDev);
  }
  free(c->staging.uses);
  gbTopoFree(&c->topo);
  pthread_mutex_destroy(&c->errorLock);
  c->magic = GB_COMM_DEAD;
  free(c);
}
