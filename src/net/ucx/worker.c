/* One UCP worker per communicator (its commHash), shared by the
 * communicator's listener and every connection: a wait on any connection
 * progresses them all, as a communicator's every wait does over TCP (where
 * a finished send's bytes are already the kernel's). With a worker per
 * connection, bytes UCX still held for one peer would wait until this rank
 * next waited on that very connection, and closing would need each peer to
 * progress the one worker being closed. Ranks that are threads of one
 * process share their communicator's worker: it runs in UCX's thread-safe
 * mode. Counted references; the last one destroys it. */
#include <pthread.h>
#include <stdlib.h>

#include "base/result.h"
#include "net/ucx/ucx.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static gbNetUcxWorker_t* workers;

gbResult_t gbNetUcxWorkerGet(const gbNetUcxLib_t* lib, uint64_t commHash, gbNetUcxWorker_t** out) {
  *out = NULL;
  pthread_mutex_lock(&lock);
  gbNetUcxWorker_t* w = workers;
  while (w != NULL && w->commHash != commHash) w = w->next;
  if (w != NULL) {
    w->refs++;
    pthread_mutex_unlock(&lock);
    *out = w;
    return gbSuccess;
  }
  gbResult_t res = gbSuccess;
  if ((w = calloc(1, sizeof(*w))) == NULL) {
    res = gbErrorSet(gbSystemError, "out of memory creating a UCX worker");
  } else {
    ucp_worker_params_t wp = {.field_mask = GB_UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = GB_UCS_THREAD_MODE_MULTI};
    ucs_status_t st = lib->api.ucp_worker_create(lib->context, &wp, &w->h);
    ucp_worker_attr_t wa = {.field_mask = GB_UCP_WORKER_ATTR_FIELD_THREAD_MODE};
    if (st == GB_UCS_OK && lib->api.ucp_worker_query(w->h, &wa) == GB_UCS_OK &&
        wa.thread_mode != GB_UCS_THREAD_MODE_MULTI) {
      /* A UCX built without --enable-mt: the communicator's threads (init,
       * proxy; ranks that are threads) could not share the worker. */
      lib->api.ucp_worker_destroy(w->h);
      free(w);
      pthread_mutex_unlock(&lock);
      return gbErrorSet(gbSystemError, "UCX gave its workers thread mode %d, not the thread-safe mode gpubridge "
                        "needs: this UCX was built without multi-thread support (ucx_info -v lists "
                        "--enable-mt); use a UCX built with it, or GPUBRIDGE_TRANSPORT=tcp", wa.thread_mode);
    }
    if (st != GB_UCS_OK) {
      res = gbErrorSet(gbSystemError, "UCX could not create a worker: %s (ucx_info -d lists the transports; check "
                       "UCX_TLS and UCX_NET_DEVICES)", lib->api.ucs_status_string(st));
      free(w);
      w = NULL;
    }
  }
  if (w != NULL) {
    w->lib = lib;
    w->commHash = commHash;
    w->refs = 1;
    w->next = workers;
    workers = w;
  }
  pthread_mutex_unlock(&lock);
  *out = w;
  return res;
}

void gbNetUcxWorkerPut(gbNetUcxWorker_t* w) {
  if (w == NULL) return;
  pthread_mutex_lock(&lock);
  int last = --w->refs == 0;
  if (last) {
    gbNetUcxWorker_t** p = &workers;
    while (*p != w) p = &(*p)->next;
    *p = w->next;
  }
  pthread_mutex_unlock(&lock);
  if (!last) return;
  w->lib->api.ucp_worker_destroy(w->h);
  free(w);
}

void gbNetUcxWorkerProgress(gbNetUcxWorker_t* w) {
  for (int i = 0; i < GB_NET_UCX_PROGRESS_MAX && w->lib->api.ucp_worker_progress(w->h) != 0; i++) {
  }
}
