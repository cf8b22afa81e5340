#include "boot/uniqueid.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "base/result.h"

/* Layout of the 128 bytes: magic, version, family, port, address, secret. */
#define ID_MAGIC 0x67624964u /* "gbId" */
#define ID_VERSION 1u

typedef struct {
  uint32_t magic;
  uint32_t version;
  uint16_t family;
  uint16_t port; /* network order */
  uint32_t scope;
  uint8_t addr[16];
  uint8_t secret[GB_NET_SECRET_BYTES];
} packedId_t;

_Static_assert(sizeof(packedId_t) <= GB_UNIQUE_ID_BYTES, "unique id layout too large");

gbResult_t gbBootIdPack(const gbBootId_t* in, gbUniqueId* out) {
  packedId_t p;
  memset(&p, 0, sizeof(p));
  p.magic = ID_MAGIC;
  p.version = ID_VERSION;
  p.family = (uint16_t)in->root.sa.ss_family;
  if (p.family == AF_INET) {
    const struct sockaddr_in* s = (const struct sockaddr_in*)&in->root.sa;
    p.port = s->sin_port;
    memcpy(p.addr, &s->sin_addr, 4);
  } else if (p.family == AF_INET6) {
    const struct sockaddr_in6* s = (const struct sockaddr_in6*)&in->root.sa;
    p.port = s->sin6_port;
    p.scope = s->sin6_scope_id;
    memcpy(p.addr, &s->sin6_addr, 16);
  } else {
    return gbErrorSet(gbInternalError, "unique id: root address family %d is not IPv4 or IPv6", p.family);
  }
  memcpy(p.secret, in->secret, sizeof(p.secret));
  memset(out, 0, sizeof(*out));
  memcpy(out->internal, &p, sizeof(p));
  return gbSuccess;
}

gbResult_t gbBootIdUnpack(const gbUniqueId* in, gbBootId_t* out) {
  packedId_t p;
  memcpy(&p, in->internal, sizeof(p));
  if (p.magic != ID_MAGIC || p.version != ID_VERSION)
    return gbErrorSet(gbInvalidArgument,
                      "the unique id is not one gbGetUniqueId made (or comes from another gpubridge "
                      "version): pass every rank the bytes one process got from gbGetUniqueId");
  memset(out, 0, sizeof(*out));
  if (p.family == AF_INET) {
    struct sockaddr_in* s = (struct sockaddr_in*)&out->root.sa;
    s->sin_family = AF_INET;
    s->sin_port = p.port;
    memcpy(&s->sin_addr, p.addr, 4);
    out->root.len = sizeof(*s);
  } else if (p.family == AF_INET6) {
    struct sockaddr_in6* s = (struct sockaddr_in6*)&out->root.sa;
    s->sin6_family = AF_INET6;
    s->sin6_port = p.port;
    s->sin6_scope_id = p.scope;
    memcpy(&s->sin6_addr, p.addr, 16);
    out->root.len = sizeof(*s);
  } else {
    return gbErrorSet(gbInvalidArgument, "the unique id holds no valid root address (family %u)", p.family);
  }
  memcpy(out->secret, p.secret, sizeof(p.secret));
  return gbSuccess;
}

static uint64_t fnv1a(const void* data, size_t len, uint64_t h) {
  const uint8_t* b = data;
  for (size_t i = 0; i < len; i++) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t gbBootIdHash(const gbBootId_t* id) {
  return fnv1a(id->secret, sizeof(id->secret), 0xcbf29ce484222325ull);
}

void gbBootIdToHex(const gbUniqueId* id, char out[2 * GB_UNIQUE_ID_BYTES + 1]) {
  static const char digits[] = "0123456789abcdef";
  const uint8_t* b = (const uint8_t*)id->internal;
  for (int i = 0; i < GB_UNIQUE_ID_BYTES; i++) {
    out[2 * i] = digits[b[i] >> 4];
    out[2 * i + 1] = digits[b[i] & 15];
  }
  out[2 * GB_UNIQUE_ID_BYTES] = '\0';
}

static int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

gbResult_t gbBootIdFromHex(const char* hex, gbUniqueId* out) {
  if (strlen(hex) != 2 * GB_UNIQUE_ID_BYTES)
    return gbErrorSet(gbInvalidArgument, "GPUBRIDGE_UNIQUE_ID must be %d hex digits, not %zu",
                      2 * GB_UNIQUE_ID_BYTES, strlen(hex));
  uint8_t* b = (uint8_t*)out->internal;
  for (int i = 0; i < GB_UNIQUE_ID_BYTES; i++) {
    int hi = hexValue(hex[2 * i]), lo = hexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return gbErrorSet(gbInvalidArgument, "GPUBRIDGE_UNIQUE_ID holds a non-hex character at %d", 2 * i);
    b[i] = (uint8_t)(hi << 4 | lo);
  }
  return gbSuccess;
}

void gbBootSecretFromText(const char* text, uint8_t secret[GB_NET_SECRET_BYTES]) {
  /* Four differently seeded FNV-1a passes: the secret only tells peers of one
   * job from strangers; it is not a cryptographic key. */
  for (int k = 0; k < GB_NET_SECRET_BYTES / 8; k++) {
    uint64_t h = fnv1a(text, strlen(text), 0xcbf29ce484222325ull ^ (0x9e3779b97f4a7c15ull * (uint64_t)(k + 1)));
    memcpy(secret + 8 * k, &h, 8);
  }
}
