/* ncclConfig_t of any NCCL version from 2.14 on, read by its header: size
 * says which fields the caller's struct has (NCCL appends fields, never
 * moves them), magic that it was initialized with NCCL_CONFIG_INITIALIZER.
 * Only fields the size covers are read. gpubridge honours blocking (and
 * NCCL_COMM_BLOCKING when the config leaves it unset, as NCCL does) and
 * keeps commName for its logs; every other field tunes NCCL's own kernels
 * or transports, so it is ignored and named at INFO. Settings gpubridge
 * has beyond NCCL's (policy, transport, timeout, chunk) come from its
 * GPUBRIDGE_* variables. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"

_Static_assert(sizeof(ncclUniqueId) == sizeof(gbUniqueId), "ids are 128 bytes on both sides");
_Static_assert(offsetof(ncclConfig_t, blocking) == 16, "NCCL 2.14 layout");
_Static_assert(offsetof(ncclConfig_t, netName) == 32, "NCCL 2.17 layout");
_Static_assert(offsetof(ncclConfig_t, splitShare) == 40 && offsetof(ncclConfig_t, trafficClass) == 44,
               "NCCL 2.18 and 2.26 layouts: 48 bytes");
_Static_assert(offsetof(ncclConfig_t, commName) == 48 && offsetof(ncclConfig_t, nvlsCTAs) == 68,
               "NCCL 2.27 layout: 72 bytes");
_Static_assert(sizeof(ncclConfig_t) == 80, "NCCL 2.28 layout: 80 bytes");

#define COVERS(cfg, field) \
  ((cfg)->size >= offsetof(ncclConfig_t, field) + sizeof(((ncclConfig_t*)0)->field))

/* Which NCCL versions declare a config of this size. */
static const char* layoutName(size_t size) {
  if (size < 24) return "shorter than any NCCL's";
  if (size < 40) return "NCCL 2.14-2.16";
  if (size < 48) return "NCCL 2.17";
  if (size < 72) return "NCCL 2.18-2.26";
  if (size < 80) return "NCCL 2.27";
  if (size == 80) return "NCCL 2.28";
  return "newer than NCCL 2.28; fields past 80 bytes are not read";
}

/* Appends to list the names of the covered hint fields the caller set. */
static void setHints(const ncclConfig_t* c, char* list, size_t len) {
  struct { const char* name; size_t off; } ints[] = {
      {"cgaClusterSize", offsetof(ncclConfig_t, cgaClusterSize)},
      {"minCTAs", offsetof(ncclConfig_t, minCTAs)},
      {"maxCTAs", offsetof(ncclConfig_t, maxCTAs)},
      {"splitShare", offsetof(ncclConfig_t, splitShare)},
      {"trafficClass", offsetof(ncclConfig_t, trafficClass)},
      {"collnetEnable", offsetof(ncclConfig_t, collnetEnable)},
      {"CTAPolicy", offsetof(ncclConfig_t, CTAPolicy)},
      {"shrinkShare", offsetof(ncclConfig_t, shrinkShare)},
      {"nvlsCTAs", offsetof(ncclConfig_t, nvlsCTAs)},
      {"nChannelsPerNetPeer", offsetof(ncclConfig_t, nChannelsPerNetPeer)},
      {"nvlinkCentricSched", offsetof(ncclConfig_t, nvlinkCentricSched)},
  };
  size_t used = 0;
  list[0] = '\0';
  for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
    if (c->size < ints[i].off + sizeof(int)) continue;
    int v;
    memcpy(&v, (const char*)c + ints[i].off, sizeof(v));
    if (v == NCCL_CONFIG_UNDEF_INT) continue;
    int w = snprintf(list + used, len - used, "%s%s=%d", used ? ", " : "", ints[i].name, v);
    if (w < 0 || used + (size_t)w >= len) return;
    used += (size_t)w;
  }
  if (COVERS(c, netName) && c->netName)
    snprintf(list + used, len - used, "%snetName=%.64s", used ? ", " : "", c->netName);
}

/* NCCL_COMM_BLOCKING, which NCCL reads when the config leaves blocking unset. */
static gbResult_t envBlocking(const char* fn, int* blocking) {
  const char* v = getenv("NCCL_COMM_BLOCKING");
  if (!v || !v[0]) return gbSuccess;
  if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
    return gbNcclErrorSet(gbInvalidArgument, "%s: NCCL_COMM_BLOCKING=%s: use 0 or 1, or unset it", fn, v);
  *blocking = v[0] - '0';
  return gbSuccess;
}

gbResult_t gbNcclConfigRead(const char* fn, const ncclConfig_t* c, gbConfig_t* out, char* name, size_t nameLen) {
  gbConfig_t init = GB_CONFIG_INITIALIZER;
  *out = init;
  name[0] = '\0';
  int blocking = GB_CONFIG_UNDEF_INT;
  if (c) {
    if (c->size < offsetof(ncclConfig_t, blocking))
      return gbNcclErrorSet(gbInvalidArgument, "%s: config->size is %zu, smaller than the config header (16 bytes): "
                                               "initialize the config with NCCL_CONFIG_INITIALIZER", fn, c->size);
    if (c->magic != NCCL_CONFIG_MAGIC)
      return gbNcclErrorSet(gbInvalidArgument, "%s: config->magic is 0x%08x, not 0xcafebeef: initialize the config "
                                               "with NCCL_CONFIG_INITIALIZER", fn, c->magic);
    if (COVERS(c, blocking) && c->blocking != NCCL_CONFIG_UNDEF_INT) {
      if (c->blocking != 0 && c->blocking != 1)
        return gbNcclErrorSet(gbInvalidArgument, "%s: config->blocking is %d: use 0 or 1, or leave it "
                                                 "NCCL_CONFIG_UNDEF_INT", fn, c->blocking);
      blocking = c->blocking;
    }
    if (COVERS(c, commName) && c->commName) snprintf(name, nameLen, "%s", c->commName);
    char hints[512];
    setHints(c, hints, sizeof(hints));
    GB_NCCL_INFO("%s: config of %zu bytes (%s), version %u: blocking %s%s%s%s%s", fn, c->size,
                 layoutName(c->size), c->version, blocking == GB_CONFIG_UNDEF_INT ? "unset" : blocking ? "1" : "0",
                 name[0] ? ", commName " : "", name, hints[0] ? "; ignored (they tune NCCL's own kernels): " : "",
                 hints);
  }
  if (blocking == GB_CONFIG_UNDEF_INT) {
    gbResult_t res = envBlocking(fn, &blocking);
    if (res != gbSuccess) return res;
  }
  out->blocking = blocking;
  return gbSuccess;
}
