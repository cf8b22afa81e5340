/* Socket addresses: parsing "host:port" / "[v6]:port" (names resolved),
 * formatting, and the port. */
#include "os/socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/result.h"

/* A decimal port in [0, 65535]; -1 when the text is not one. */
static int parsePort(const char* s) {
  if (*s == '\0' || strlen(s) > 5) return -1;
  int port = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return -1;
    port = port * 10 + (*s - '0');
  }
  return port <= 65535 ? port : -1;
}

/* Resolves host (numeric or a name), preferring an IPv4 address. */
static gbResult_t resolve(const char* text, const char* host, int port, gbSockAddr_t* out) {
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host, NULL, &hints, &res);
  if (rc != 0) {
    return gbErrorSet(gbInvalidArgument,
                      "cannot resolve the host in address \"%s\": %s (use a numeric address or "
                      "a name this host can resolve)",
                      text, rc == EAI_SYSTEM ? "system error" : gai_strerror(rc));
  }
  const struct addrinfo* pick = NULL;
  for (const struct addrinfo* ai = res; ai; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) { pick = ai; break; }
    if (ai->ai_family == AF_INET6 && pick == NULL) pick = ai;
  }
  if (pick == NULL || pick->ai_addrlen > sizeof(out->sa)) {
    freeaddrinfo(res);
    return gbErrorSet(gbInvalidArgument, "host in address \"%s\" has no IPv4 or IPv6 address", text);
  }
  memset(out, 0, sizeof(*out));
  memcpy(&out->sa, pick->ai_addr, pick->ai_addrlen);
  out->len = (socklen_t)pick->ai_addrlen;
  freeaddrinfo(res);
  gbSockAddrSetPort(out, port);
  return gbSuccess;
}

gbResult_t gbSockAddrParse(const char* text, int defaultPort, gbSockAddr_t* out) {
  if (text == NULL || out == NULL) return gbErrorSet(gbInvalidArgument, "gbSockAddrParse: NULL argument");
  char host[NI_MAXHOST];
  const char* portText = NULL;
  size_t n = strlen(text);
  if (n == 0) return gbErrorSet(gbInvalidArgument, "empty address (expected host:port, [v6]:port or host)");
  if (text[0] == '[') {
    const char* close = strchr(text, ']');
    if (close == NULL || (size_t)(close - text - 1) >= sizeof(host) || close == text + 1)
      return gbErrorSet(gbInvalidArgument, "bad address \"%s\": expected [v6-address]:port", text);
    memcpy(host, text + 1, (size_t)(close - text - 1));
    host[close - text - 1] = '\0';
    if (close[1] == ':') portText = close + 2;
    else if (close[1] != '\0')
      return gbErrorSet(gbInvalidArgument, "bad address \"%s\": unexpected text after ']'", text);
  } else {
    const char* colon = strchr(text, ':');
    /* More than one ':' without brackets: a bare IPv6 address, no port. */
    if (colon != NULL && strchr(colon + 1, ':') == NULL) {
      if ((size_t)(colon - text) >= sizeof(host) || colon == text)
        return gbErrorSet(gbInvalidArgument, "bad address \"%s\": expected host:port", text);
      memcpy(host, text, (size_t)(colon - text));
      host[colon - text] = '\0';
      portText = colon + 1;
    } else {
      if (n >= sizeof(host)) return gbErrorSet(gbInvalidArgument, "bad address \"%s\": host name too long", text);
      memcpy(host, text, n + 1);
    }
  }
  int port = defaultPort;
  if (portText != NULL) {
    port = parsePort(portText);
    if (port < 0)
      return gbErrorSet(gbInvalidArgument, "bad port in address \"%s\": expected a number in 0..65535", text);
  } else if (port < 0 || port > 65535) {
    return gbErrorSet(gbInvalidArgument, "address \"%s\" has no port (expected host:port)", text);
  }
  return resolve(text, host, port, out);
}

const char* gbSockAddrHost(const gbSockAddr_t* a, char* buf, size_t len) {
  char ip[INET6_ADDRSTRLEN];
  if (buf == NULL || len == 0) return buf;
  if (a != NULL && a->sa.ss_family == AF_INET) {
    inet_ntop(AF_INET, &((const struct sockaddr_in*)&a->sa)->sin_addr, ip, sizeof(ip));
    snprintf(buf, len, "%s", ip);
  } else if (a != NULL && a->sa.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &((const struct sockaddr_in6*)&a->sa)->sin6_addr, ip, sizeof(ip));
    snprintf(buf, len, "[%s]", ip);
  } else {
    snprintf(buf, len, "<no address (family %d)>", a ? (int)a->sa.ss_family : -1);
  }
  return buf;
}

const char* gbSockAddrString(const gbSockAddr_t* a, char* buf, size_t len) {
  char host[INET6_ADDRSTRLEN + 32];
  gbSockAddrHost(a, host, sizeof(host));
  if (buf == NULL || len == 0) return buf;
  if (a != NULL && (a->sa.ss_family == AF_INET || a->sa.ss_family == AF_INET6))
    snprintf(buf, len, "%s:%d", host, gbSockAddrPort(a));
  else
    snprintf(buf, len, "%s", host);
  return buf;
}

int gbSockAddrPort(const gbSockAddr_t* a) {
  if (a->sa.ss_family == AF_INET) return ntohs(((const struct sockaddr_in*)&a->sa)->sin_port);
  if (a->sa.ss_family == AF_INET6) return ntohs(((const struct sockaddr_in6*)&a->sa)->sin6_port);
  return -1;
}

void gbSockAddrSetPort(gbSockAddr_t* a, int port) {
  if (a->sa.ss_family == AF_INET) ((struct sockaddr_in*)&a->sa)->sin_port = htons((uint16_t)port);
  else if (a->sa.ss_family == AF_INET6) ((struct sockaddr_in6*)&a->sa)->sin6_port = htons((uint16_t)port);
}

int gbSockAddrIsLocal(const gbSockAddr_t* a) {
  if (a->sa.ss_family != AF_INET && a->sa.ss_family != AF_INET6) return 0;
  /* Binding a datagram socket to the address (any port) succeeds exactly
   * when one of this host's interfaces carries it. */
  gbSockAddr_t probe = *a;
  gbSockAddrSetPort(&probe, 0);
  int fd = socket(a->sa.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  int ok = bind(fd, (const struct sockaddr*)&probe.sa, probe.len) == 0;
  close(fd);
  return ok;
}

int gbSockAddrIsLoopback(const gbSockAddr_t* a) {
  if (a->sa.ss_family == AF_INET)
    return (ntohl(((const struct sockaddr_in*)&a->sa)->sin_addr.s_addr) >> 24) == 127;
  if (a->sa.ss_family == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6*)&a->sa)->sin6_addr);
  return 0;
}
