/* Choosing the interface whose address this host gives its peers, with
 * NCCL_SOCKET_IFNAME's syntax: "eth,ib" (prefixes), "^docker,lo" (all but
 * these prefixes), "=eth0" (exact names), "^=eth0" (all but these names). */
#include "os/socket.h"

#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "base/result.h"

#define MAX_ITEMS 32
#define ITEM_LEN 64

typedef struct {
  int exclude, exact, n;
  char item[MAX_ITEMS][ITEM_LEN];
} ifSpec_t;

static void parseSpec(const char* spec, ifSpec_t* s) {
  memset(s, 0, sizeof(*s));
  if (*spec == '^') { s->exclude = 1; spec++; }
  if (*spec == '=') { s->exact = 1; spec++; }
  while (*spec && s->n < MAX_ITEMS) {
    size_t len = strcspn(spec, ",");
    if (len > 0) {
      size_t keep = len < ITEM_LEN - 1 ? len : ITEM_LEN - 1;
      memcpy(s->item[s->n], spec, keep);
      s->item[s->n][keep] = '\0';
      s->n++;
    }
    spec += len;
    if (*spec == ',') spec++;
  }
}

static int specMatches(const ifSpec_t* s, const char* name) {
  int hit = 0;
  for (int i = 0; i < s->n && !hit; i++)
    hit = s->exact ? strcmp(name, s->item[i]) == 0 : strncmp(name, s->item[i], strlen(s->item[i])) == 0;
  return s->exclude ? !hit : hit;
}

/* An address peers can use: IPv4, or IPv6 other than link-local (which would
 * need a scope id every peer agrees on). */
static int usableFamily(const struct sockaddr* sa, int family) {
  if (sa == NULL || sa->sa_family != family) return 0;
  if (family == AF_INET6) {
    const struct in6_addr* a = &((const struct sockaddr_in6*)sa)->sin6_addr;
    if (IN6_IS_ADDR_LINKLOCAL(a)) return 0;
  }
  return 1;
}

/* Default choice: anything up except loopback and docker bridges (pass 0),
 * then loopback (pass 1). */
static int defaultMatches(const struct ifaddrs* ifa, int pass) {
  int loop = (ifa->ifa_flags & IFF_LOOPBACK) || strncmp(ifa->ifa_name, "lo", 2) == 0;
  if (pass == 0) return !loop && strncmp(ifa->ifa_name, "docker", 6) != 0;
  return loop;
}

/* "eth0 (IPv4), lo (IPv4, IPv6), ifb0 (down)": what the error names. */
static void listSeen(const struct ifaddrs* all, char* buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (const struct ifaddrs* a = all; a; a = a->ifa_next) {
    int seenBefore = 0;
    for (const struct ifaddrs* b = all; b != a && !seenBefore; b = b->ifa_next)
      seenBefore = strcmp(a->ifa_name, b->ifa_name) == 0;
    if (seenBefore) continue;
    int v4 = 0, v6 = 0;
    for (const struct ifaddrs* b = a; b; b = b->ifa_next) {
      if (strcmp(a->ifa_name, b->ifa_name) != 0) continue;
      v4 |= usableFamily(b->ifa_addr, AF_INET);
      v6 |= usableFamily(b->ifa_addr, AF_INET6);
    }
    const char* what = !(a->ifa_flags & IFF_UP) ? "down"
                       : v4 && v6             ? "IPv4, IPv6"
                       : v4                   ? "IPv4"
                       : v6                   ? "IPv6"
                                              : "no address";
    int w = snprintf(buf + used, len - used, "%s%s (%s)", used ? ", " : "", a->ifa_name, what);
    if (w < 0 || (size_t)w >= len - used) break;
    used += (size_t)w;
  }
  if (used == 0) snprintf(buf, len, "none");
}

gbResult_t gbSockFindInterface(const char* spec, gbSockAddr_t* out, char* ifname, size_t ifnameLen) {
  struct ifaddrs* all = NULL;
  if (spec == NULL) spec = "";
  if (getifaddrs(&all) != 0) {
    char eb[128];
    return gbErrorSet(gbSystemError, "cannot list network interfaces: getifaddrs: %s",
                      strerror_r(errno, eb, sizeof(eb)));
  }
  ifSpec_t s;
  parseSpec(spec, &s);
  const struct ifaddrs* pick = NULL;
  int passes = spec[0] == '\0' ? 2 : 1;
  static const int families[2] = {AF_INET, AF_INET6}; /* IPv4 preferred */
  for (int pass = 0; pass < passes && !pick; pass++) {
    for (int f = 0; f < 2 && !pick; f++) {
      for (const struct ifaddrs* a = all; a && !pick; a = a->ifa_next) {
        if (!(a->ifa_flags & IFF_UP) || !usableFamily(a->ifa_addr, families[f])) continue;
        if (spec[0] == '\0' ? defaultMatches(a, pass) : specMatches(&s, a->ifa_name)) pick = a;
      }
    }
  }
  if (pick == NULL) {
    char seen[1024];
    listSeen(all, seen, sizeof(seen));
    freeifaddrs(all);
    return gbErrorSet(gbSystemError,
                      "no network interface matches \"%s\" (interfaces seen: %s); set "
                      "GPUBRIDGE_SOCKET_IFNAME to one that is up and that the other hosts can reach",
                      spec, seen);
  }
  memset(out, 0, sizeof(*out));
  out->len = pick->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
  memcpy(&out->sa, pick->ifa_addr, out->len);
  gbSockAddrSetPort(out, 0);
  if (ifname != NULL && ifnameLen > 0) snprintf(ifname, ifnameLen, "%s", pick->ifa_name);
  freeifaddrs(all);
  return gbSuccess;
}
