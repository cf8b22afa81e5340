/* NCCL's variables as fallbacks: a job that sets NCCL_DEBUG,
 * NCCL_DEBUG_SUBSYS or NCCL_SOCKET_IFNAME for NCCL gets the same from
 * gpubridge, unless it sets the GPUBRIDGE_ one too (which wins). Done once,
 * when the library is loaded (before main for LD_PRELOAD and linking), by
 * setting the GPUBRIDGE_ variable in the environment, which libgpubridge and
 * this library read on their first call. NCCL's levels: VERSION, WARN and
 * ABORT become WARN; INFO and TRACE stay. NCCL's subsystems that gpubridge
 * has keep their names (INIT, COLL, NET, PROXY, ENV, ALL), BOOTSTRAP becomes
 * BOOT, SHM NET, P2P COLL, ALLOC DEVICE; the others name nothing here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "abi.h"

#define LIST_BYTES 256

static int unset(const char* name) {
  const char* v = getenv(name);
  return v == NULL || v[0] == '\0';
}

/* gpubridge's level for NCCL_DEBUG's value, or NULL. */
static const char* levelOf(const char* v) {
  static const char* const map[][2] = {{"VERSION", "WARN"}, {"WARN", "WARN"}, {"ABORT", "WARN"},
                                       {"INFO", "INFO"},     {"TRACE", "TRACE"}, {"NONE", "NONE"}};
  for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
    if (strcasecmp(v, map[i][0]) == 0) return map[i][1];
  return NULL;
}

/* gpubridge's subsystem for one of NCCL's names (n bytes at p), or NULL. */
static const char* subsysOf(const char* p, size_t n) {
  static const char* const map[][2] = {{"INIT", "INIT"}, {"COLL", "COLL"},       {"NET", "NET"},
                                       {"PROXY", "PROXY"}, {"ENV", "ENV"},       {"ALL", "ALL"},
                                       {"BOOTSTRAP", "BOOT"}, {"SHM", "NET"},   {"P2P", "COLL"},
                                       {"ALLOC", "DEVICE"}};
  for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
    if (strlen(map[i][0]) == n && strncasecmp(p, map[i][0], n) == 0) return map[i][1];
  return NULL;
}

/* NCCL_DEBUG_SUBSYS in gpubridge's names: "^GRAPH" selects everything,
 * "GRAPH" nothing ("^ALL"). */
static void subsysList(const char* v, char* out, size_t len) {
  int negate = v[0] == '^';
  size_t used = (size_t)snprintf(out, len, "%s", negate ? "^" : ""), first = used;
  if (negate) v++;
  while (*v) {
    size_t n = strcspn(v, ",");
    const char* name = subsysOf(v, n);
    if (name && used + strlen(name) + 2 < len)
      used += (size_t)snprintf(out + used, len - used, "%s%s", used > first ? "," : "", name);
    v += n;
    if (*v == ',') v++;
  }
  if (used == first) snprintf(out, len, "%s", negate ? "ALL" : "^ALL");
}

__attribute__((constructor)) static void ncclVariables(void) {
  const char* bad = NULL;
  const char* v = getenv("NCCL_DEBUG");
  if (v && v[0] && unset("GPUBRIDGE_DEBUG")) {
    const char* level = levelOf(v);
    if (level) setenv("GPUBRIDGE_DEBUG", level, 1);
    else bad = v;
  }
  v = getenv("NCCL_DEBUG_SUBSYS");
  if (v && v[0] && unset("GPUBRIDGE_DEBUG_SUBSYS")) {
    char list[LIST_BYTES];
    subsysList(v, list, sizeof(list));
    setenv("GPUBRIDGE_DEBUG_SUBSYS", list, 1);
  }
  v = getenv("NCCL_SOCKET_IFNAME");
  if (v && v[0] && unset("GPUBRIDGE_SOCKET_IFNAME")) setenv("GPUBRIDGE_SOCKET_IFNAME", v, 1);
  if (bad)
    GB_NCCL_WARN("NCCL_DEBUG=%s is none of NCCL's levels (VERSION, WARN, INFO, ABORT, TRACE): gpubridge keeps "
                 "its own level (GPUBRIDGE_DEBUG)", bad);
}
