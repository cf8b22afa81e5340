/* Loading UCX at run time (dlopen, as the vendor libraries are), once per
 * process, and the process's UCP context (tag matching), shared by the
 * workers of every communicator (worker.c). A rank
 * asked to use UCX where it does not load fails at start-up with what to
 * do; the one build runs where UCX is absent. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"
#include "base/param.h"
#include "base/result.h"
#include "net/ucx/ucx.h"
#include "os/dl.h"

#define SYM(name) {#name, &lib.api.name}

static gbNetUcxLib_t lib;
static gbResult_t loadResult = gbSuccess;
static char loadError[1024];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Keeps the failure every later call repeats: "GPUBRIDGE_TRANSPORT=ucx,
 * but " and the format's text. */
static gbResult_t failLoad(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static gbResult_t failLoad(const char* fmt, ...) {
  int n = snprintf(loadError, sizeof(loadError), "GPUBRIDGE_TRANSPORT=ucx, but ");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(loadError + n, sizeof(loadError) - (size_t)n, fmt, ap);
  va_end(ap);
  return gbSystemError;
}

static gbResult_t bindAll(void* h) {
  const gbOsSym_t syms[] = {
      SYM(ucp_get_version), SYM(ucp_config_read), SYM(ucp_config_modify), SYM(ucp_config_release),
      SYM(ucp_init_version), SYM(ucp_cleanup), SYM(ucp_worker_create), SYM(ucp_worker_destroy),
      SYM(ucp_worker_query), SYM(ucp_worker_release_address), SYM(ucp_worker_progress), SYM(ucp_ep_create), SYM(ucp_ep_close_nbx),
      SYM(ucp_tag_send_nbx), SYM(ucp_tag_recv_nbx), SYM(ucp_request_check_status), SYM(ucp_request_cancel),
      SYM(ucp_request_free), SYM(ucp_mem_map), SYM(ucp_mem_unmap), SYM(ucs_status_string)};
  const char* missing = gbOsSymbolsBind(h, syms, sizeof(syms) / sizeof(syms[0]), 1);
  if (missing)
    return failLoad("%s has no %s: UCX 1.10 or newer is needed (ucx_info -v; update UCX, or set "
                    "GPUBRIDGE_TRANSPORT=tcp)", lib.from, missing);
  lib.api.ucp_get_version(&lib.version[0], &lib.version[1], &lib.version[2]);
  if (lib.version[0] < GB_UCP_MIN_MAJOR || (lib.version[0] == GB_UCP_MIN_MAJOR && lib.version[1] < GB_UCP_MIN_MINOR)) {
    return failLoad("%s is UCX %u.%u.%u: UCX 1.10 or newer is needed (update UCX, or set GPUBRIDGE_TRANSPORT=tcp)",
                    lib.from, lib.version[0], lib.version[1], lib.version[2]);
  }
  return gbSuccess;
}

/* UCX's own variables (UCX_*) pass through. Ranks that are different hosts
 * only by name (GPUBRIDGE_SIM_HOST: the test rig's namespaces, or one
 * machine) must cross the network: UCX judges "same host" by the machine and
 * would move their bytes through shared memory, so TLS becomes tcp unless
 * the user chose UCX_TLS. */
static gbResult_t makeContext(void) {
  const gbUcpApi_t* u = &lib.api;
  ucp_config_t* cfg = NULL;
  ucs_status_t st = u->ucp_config_read(NULL, NULL, &cfg);
  if (st != GB_UCS_OK)
    return failLoad("UCX could not read its configuration (UCX_* variables): %s", u->ucs_status_string(st));
  if (gbParamIsSet(GB_PARAM_SIM_HOST) && getenv("UCX_TLS") == NULL) {
    lib.tlsTcp = u->ucp_config_modify(cfg, "TLS", "tcp") == GB_UCS_OK;
    if (lib.tlsTcp) GB_INFO(GB_LOG_NET, "UCX: GPUBRIDGE_SIM_HOST is set and UCX_TLS is not: UCX_TLS=tcp");
  }
  ucp_params_t p = {.field_mask = GB_UCP_PARAM_FIELD_FEATURES | GB_UCP_PARAM_FIELD_MT_WORKERS_SHARED,
                    .features = GB_UCP_FEATURE_TAG,
                    .mt_workers_shared = 1};
  st = u->ucp_init_version(GB_UCP_API_MAJOR, GB_UCP_API_MINOR, &p, cfg, &lib.context);
  u->ucp_config_release(cfg);
  if (st != GB_UCS_OK)
    return failLoad("UCX's context could not be made: %s (ucx_info -d lists the transports; check UCX_TLS and "
                    "UCX_NET_DEVICES)", u->ucs_status_string(st));
  return gbSuccess;
}

static void load(void) {
  const char* named = gbParamIsSet(GB_PARAM_UCX_LIBRARY) ? gbParamString(GB_PARAM_UCX_LIBRARY) : "";
  const char* names[1] = {named[0] ? named : "libucp.so.0"};
  char tried[512];
  void* h = gbOsLibraryOpenFirst(names, 1, lib.from, sizeof(lib.from), tried, sizeof(tried));
  if (h == NULL) {
    loadResult = failLoad("UCX did not load: tried %s; install UCX (Debian, Ubuntu: apt-get install libucx0; RHEL: "
                          "dnf install ucx), name it with GPUBRIDGE_UCX_LIBRARY, or set GPUBRIDGE_TRANSPORT=tcp",
                          tried);
    return;
  }
  loadResult = bindAll(h);
  if (loadResult != gbSuccess) {
    gbOsLibraryClose(h);
    return;
  }
  /* Once UCX ran, it stays loaded even if it failed: reading its
   * configuration loads its other libraries, and making a context may
   * install libucm's memory hooks before it fails; unloaded, they would
   * point into unmapped code. */
  loadResult = makeContext();
  if (loadResult != gbSuccess) return;
  GB_INFO(GB_LOG_NET, "UCX %u.%u.%u loaded from %s", lib.version[0], lib.version[1], lib.version[2], lib.from);
  /* The context lives as long as the process: connections of any
   * communicator, on any thread, may still be closing at exit. */
}

gbResult_t gbNetUcxLib(const gbNetUcxLib_t** out) {
  pthread_once(&once, load);
  *out = loadResult == gbSuccess ? &lib : NULL;
  if (loadResult != gbSuccess) return gbErrorSet(loadResult, "%s", loadError);
  return gbSuccess;
}
