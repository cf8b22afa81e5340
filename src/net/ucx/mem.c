/* Memory registered with UCX (ucp_mem_map of memory gpubridge already has:
 * the remote staging slots, stage/slots_setup.c), found by address when a
 * message is posted, so a message inside it carries the handle and UCX
 * neither copies nor registers on the way (RDMA: the HCA reads the slot).
 * A short list under a lock: a process has a few regions (one per group of
 * remote slots). Counts the messages that carried a handle, said at INFO
 * when the region goes. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "base/log.h"
#include "base/result.h"
#include "net/ucx/ucx.h"

typedef struct region {
  char* base;
  size_t bytes;
  ucp_mem_h memh;
  const gbNetUcxLib_t* lib;
  atomic_ullong used; /* messages posted with the handle */
  struct region* next;
} region_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static region_t* regions;

gbResult_t gbNetUcxMemRegister(void* base, size_t bytes, void** handle) {
  const gbNetUcxLib_t* lib;
  *handle = NULL;
  GB_CHECK(gbNetUcxLib(&lib));
  region_t* r = calloc(1, sizeof(*r));
  if (r == NULL) return gbErrorSet(gbSystemError, "out of memory registering %zu bytes with UCX", bytes);
  ucp_mem_map_params_t p = {.field_mask = GB_UCP_MEM_MAP_PARAM_FIELD_ADDRESS | GB_UCP_MEM_MAP_PARAM_FIELD_LENGTH,
                            .address = base, .length = bytes};
  ucs_status_t st = lib->api.ucp_mem_map(lib->context, &p, &r->memh);
  if (st != GB_UCS_OK) {
    free(r);
    return gbErrorSet(gbSystemError, "UCX could not register %zu bytes of staging slots: %s (is `ulimit -l` "
                      "unlimited?)", bytes, lib->api.ucs_status_string(st));
  }
  r->base = base;
  r->bytes = bytes;
  r->lib = lib;
  atomic_init(&r->used, 0);
  pthread_mutex_lock(&lock);
  r->next = regions;
  regions = r;
  pthread_mutex_unlock(&lock);
  GB_INFO(GB_LOG_NET, "UCX: registered %zu bytes of staging slots at %p", bytes, base);
  *handle = r;
  return gbSuccess;
}

void gbNetUcxMemDeregister(void* handle) {
  region_t* r = handle;
  if (r == NULL) return;
  pthread_mutex_lock(&lock);
  region_t** p = &regions;
  while (*p != NULL && *p != r) p = &(*p)->next;
  if (*p == r) *p = r->next;
  pthread_mutex_unlock(&lock);
  GB_INFO(GB_LOG_NET, "UCX: %llu messages moved from or into the registered staging slots at %p",
          (unsigned long long)atomic_load(&r->used), (void*)r->base);
  r->lib->api.ucp_mem_unmap(r->lib->context, r->memh);
  free(r);
}

ucp_mem_h gbNetUcxMemFind(const void* buf, size_t bytes) {
  const char* b = buf;
  ucp_mem_h memh = NULL;
  pthread_mutex_lock(&lock);
  for (region_t* r = regions; r != NULL; r = r->next) {
    if (b >= r->base && bytes <= r->bytes && (size_t)(b - r->base) <= r->bytes - bytes) {
      memh = r->memh;
      atomic_fetch_add_explicit(&r->used, 1, memory_order_relaxed);
      break;
    }
  }
  pthread_mutex_unlock(&lock);
  return memh;
}
