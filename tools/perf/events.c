/* Timing with device events on real GPUs: a start event recorded on the
 * stream before the timed calls and a stop event after them; the time is what
 * the GPU's stream took from one to the other. The events come from the
 * runtime gpubridge already loaded (RTLD_NOLOAD: never a second copy), found
 * with dlsym, so the tool needs no CUDA or HIP header: cuda* for an NCCL
 * island's rank, hip* for an RCCL island's. Simulated and CPU ranks have no
 * device events and use the host clock. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "perf.h"

typedef int (*eventCreate_t)(void** event);
typedef int (*eventRecord_t)(void* event, void* stream);
typedef int (*eventSynchronize_t)(void* event);
typedef int (*eventElapsed_t)(float* ms, void* start, void* stop);
typedef int (*eventDestroy_t)(void* event);

struct perfEvents {
  void* lib;
  const char* prefix; /* "cuda", "hip" */
  eventCreate_t create;
  eventRecord_t record;
  eventSynchronize_t synchronize;
  eventElapsed_t elapsed;
  eventDestroy_t destroy;
  void* ev[2]; /* start, stop */
};

static void* bindEvent(perfEvents_t* e, const char* what, char* why, size_t whyLen) {
  char name[48];
  snprintf(name, sizeof(name), "%s%s", e->prefix, what);
  void* f = dlsym(e->lib, name);
  if (!f) snprintf(why, whyLen, "the loaded runtime has no %s", name);
  return f;
}

perfEvents_t* perfEventsOpen(const gbTopology_t* t, char* why, size_t whyLen) {
  if (t->runKind != gbRunReal) {
    snprintf(why, whyLen, "%s ranks have no device events", perfRunKindName(t->runKind));
    return NULL;
  }
  const char* lib = perfVendorLibraryOf(t->islandVendor[t->island]);
  if (!lib) {
    snprintf(why, whyLen, "island %s has no GPU runtime", t->islandVendor[t->island]);
    return NULL;
  }
  int cuda = strcmp(lib, "nccl") == 0;
  static const char* const cudaNames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so", NULL};
  perfEvents_t* e = calloc(1, sizeof(*e));
  if (!e) {
    snprintf(why, whyLen, "out of memory");
    return NULL;
  }
  e->prefix = cuda ? "cuda" : "hip";
  e->lib = cuda ? perfLoadedLibrary("GPUBRIDGE_CUDART_LIBRARY", cudaNames)
                : perfLoadedLibrary("GPUBRIDGE_HIP_LIBRARY", perfHipNames);
  if (!e->lib) {
    snprintf(why, whyLen, "the %s runtime gpubridge uses is not loaded", cuda ? "CUDA" : "HIP");
    free(e);
    return NULL;
  }
  *(void**)&e->create = bindEvent(e, "EventCreate", why, whyLen);
  *(void**)&e->record = bindEvent(e, "EventRecord", why, whyLen);
  *(void**)&e->synchronize = bindEvent(e, "EventSynchronize", why, whyLen);
  *(void**)&e->elapsed = bindEvent(e, "EventElapsedTime", why, whyLen);
  *(void**)&e->destroy = bindEvent(e, "EventDestroy", why, whyLen);
  int ok = e->create && e->record && e->synchronize && e->elapsed && e->destroy;
  if (ok && (e->create(&e->ev[0]) != 0 || e->create(&e->ev[1]) != 0)) {
    snprintf(why, whyLen, "%sEventCreate failed", e->prefix);
    ok = 0;
  }
  if (!ok) {
    perfEventsClose(e);
    return NULL;
  }
  return e;
}

int perfEventsRecord(perfEvents_t* e, int which, void* stream) {
  return e->record(e->ev[which ? 1 : 0], stream) == 0 ? 0 : -1;
}

double perfEventsElapsed(perfEvents_t* e) {
  float ms = 0.0f;
  if (e->synchronize(e->ev[1]) != 0 || e->elapsed(&ms, e->ev[0], e->ev[1]) != 0) return -1.0;
  return (double)ms * 1e-3;
}

const char* perfEventsRuntime(const perfEvents_t* e) { return e->prefix; }

void perfEventsClose(perfEvents_t* e) {
  if (!e) return;
  for (int i = 0; i < 2; i++) {
    if (e->ev[i] && e->destroy) e->destroy(e->ev[i]);
  }
  if (e->lib) dlclose(e->lib);
  free(e);
}

void perfEventsSetup(perfCtx_t* ctx, const perfOptions_t* opts) {
  char why[160] = "-E 0";
  if (opts->events) ctx->events = perfEventsOpen(&ctx->topo, why, sizeof(why));
  double have = ctx->events ? 1.0 : 0.0;
  perfRanksCombineDouble(ctx, &have, 1, gbMin);
  if (have < 1.0 && ctx->events) {
    perfEventsClose(ctx->events);
    ctx->events = NULL;
    snprintf(why, sizeof(why), "another rank has no device events");
  }
  if (ctx->events)
    snprintf(ctx->timing, sizeof(ctx->timing), "device events (%sEventRecord/%sEventElapsedTime around the timed calls)",
             perfEventsRuntime(ctx->events), perfEventsRuntime(ctx->events));
  else
    snprintf(ctx->timing, sizeof(ctx->timing), "host clock (%s)", why);
}
