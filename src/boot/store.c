/* torch's TCPStore wire protocol, as its server reads it: a one-byte command,
 * then its arguments; a string or value is a 64-bit length (host byte order,
 * as torch writes it) and the bytes. A new connection first sends VALIDATE
 * with the store's magic number, and gets no reply to it; then PING with a
 * 32-bit nonce, which the store sends back (torch's own client does the
 * same). Tested against torch 2.8 and 2.13, whose stores agree on all of it. */
#include "boot/store.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/result.h"
#include "boot/torch_version.h"

/* torch's command numbers (c10d::detail::QueryType) and its magic. */
enum { CMD_VALIDATE = 0, CMD_COMPARE_SET = 2, CMD_GET = 3, CMD_WAIT = 6, CMD_PING = 13 };
#define STORE_MAGIC 0x3C85F7CEu
#define TORCH_TESTED "torch 2.8 to 2.13"
/* A store answers a ping at once; one that says nothing for this long does
 * not speak the protocol (a store of another magic ignores the connection). */
#define PING_ANSWER_S 10.0
#define WAIT_STOP 0 /* WaitResponseType::STOP_WAITING */
#define MAX_KEY 1024

/* A request built in one buffer, so it leaves in one send. */
typedef struct {
  uint8_t buf[2 * MAX_KEY + 64];
  size_t len;
  int overflow;
} request_t;

static void put(request_t* r, const void* p, size_t n) {
  if (r->len + n > sizeof(r->buf)) {
    r->overflow = 1;
    return;
  }
  memcpy(r->buf + r->len, p, n);
  r->len += n;
}

static void putBytes(request_t* r, const void* p, size_t n) {
  uint64_t len = n;
  put(r, &len, sizeof(len));
  put(r, p, n);
}

static gbResult_t sendRequest(gbBootStore_t* s, const request_t* r, gbDeadline_t deadline, const char* what) {
  if (r->overflow)
    return gbErrorSet(gbInternalError, "torchrun's store: %s does not fit in a request (keys up to %d bytes)", what,
                      MAX_KEY);
  if (gbSockSendAll(s->fd, r->buf, r->len, deadline, NULL, what) != gbSuccess)
    return gbErrorSet(gbRemoteError, "torchrun's store at %s: %s", s->where, gbErrorLast());
  return gbSuccess;
}

static gbResult_t recvValue(gbBootStore_t* s, void* out, size_t cap, size_t* outLen, gbDeadline_t deadline,
                            const char* key) {
  uint64_t len = 0;
  if (gbSockRecvAll(s->fd, &len, sizeof(len), deadline, NULL, "a value from torchrun's store") != gbSuccess)
    return gbErrorSet(gbRemoteError, "torchrun's store at %s: no answer for key %s: %s", s->where, key, gbErrorLast());
  if (len > cap)
    return gbErrorSet(gbRemoteError, "torchrun's store at %s answered %llu bytes for key %s (at most %zu expected); "
                      "is MASTER_ADDR:MASTER_PORT torchrun's agent store?", s->where, (unsigned long long)len, key, cap);
  if (len && gbSockRecvAll(s->fd, out, (size_t)len, deadline, NULL, "a value from torchrun's store") != gbSuccess)
    return gbErrorSet(gbRemoteError, "torchrun's store at %s: the value of key %s was cut short: %s", s->where, key,
                      gbErrorLast());
  *outLen = (size_t)len;
  return gbSuccess;
}

/* The answer to the hello is not torch's: an error naming the store, what
 * it did, and the torch that launched this process. */
static gbResult_t notTorchStore(gbBootStore_t* s, const char* what) {
  char torch[64];
  int known = gbBootTorchVersion(torch, sizeof(torch));
  return gbErrorSet(gbRemoteError,
                    "torchrun's store at %s %s: it does not speak the TCPStore protocol gpubridge knows (tested: "
                    TORCH_TESTED "); torch here is %s%s. Run torchrun of a torch gpubridge was tested with, or "
                    "check that MASTER_ADDR:MASTER_PORT is torchrun's agent store", s->where, what, torch,
                    known ? "" : " (no torch loaded in this process's launcher)");
}

gbResult_t gbBootStoreOpen(const gbSockAddr_t* addr, gbDeadline_t deadline, gbBootStore_t* out) {
  out->fd = -1;
  gbSockAddrString(addr, out->where, sizeof(out->where));
  if (gbSockConnect(addr, deadline, NULL, &out->fd) != gbSuccess)
    return gbErrorSet(gbRemoteError, "cannot reach torchrun's store at %s (MASTER_ADDR:MASTER_PORT): %s", out->where,
                      gbErrorLast());
  request_t r = {.len = 0};
  uint8_t cmd = CMD_VALIDATE;
  uint32_t magic = STORE_MAGIC, nonce = (uint32_t)getpid(), answer = 0;
  put(&r, &cmd, 1);
  put(&r, &magic, sizeof(magic));
  cmd = CMD_PING;
  put(&r, &cmd, 1);
  put(&r, &nonce, sizeof(nonce));
  gbResult_t res = sendRequest(out, &r, deadline, "hello to torchrun's store");
  if (res == gbSuccess) {
    gbDeadline_t ping = gbDeadlineIn(PING_ANSWER_S);
    if (ping.ns > deadline.ns) ping = deadline;
    double waited = (double)(ping.ns - gbClockNowNs()) / 1e9;
    res = gbSockRecvAll(out->fd, &answer, sizeof(answer), ping, NULL, "the answer to a ping");
    char what[256];
    if (res == gbTimeout) {
      snprintf(what, sizeof(what), "said nothing for %.0f s to gpubridge's hello (VALIDATE with magic 0x%08X, then "
               "PING)", waited < 0 ? 0.0 : waited, STORE_MAGIC);
      res = notTorchStore(out, what);
    } else if (res != gbSuccess) {
      snprintf(what, sizeof(what), "ended the connection at gpubridge's hello (VALIDATE with magic 0x%08X, then "
               "PING) without answering", STORE_MAGIC);
      res = notTorchStore(out, what);
    } else if (answer != nonce) {
      snprintf(what, sizeof(what), "answered 0x%08X to a PING of 0x%08X", answer, nonce);
      res = notTorchStore(out, what);
    } else if (gbLogEnabled(GB_LOG_INFO, GB_LOG_BOOT)) {
      char torch[64];
      (void)gbBootTorchVersion(torch, sizeof(torch));
      GB_INFO(GB_LOG_BOOT, "torchrun's store at %s answers as torch's TCPStore (tested: " TORCH_TESTED
              "; torch here is %s)", out->where, torch);
    }
  }
  if (res != gbSuccess) gbBootStoreClose(out);
  return res;
}

void gbBootStoreClose(gbBootStore_t* s) {
  if (s->fd >= 0) gbSockClose(s->fd);
  s->fd = -1;
}

gbResult_t gbBootStoreSetIfAbsent(gbBootStore_t* s, const char* key, const void* value, size_t len, void* out,
                                  size_t cap, size_t* outLen, gbDeadline_t deadline) {
  request_t r = {.len = 0};
  uint8_t cmd = CMD_COMPARE_SET;
  put(&r, &cmd, 1);
  putBytes(&r, key, strlen(key));
  putBytes(&r, "", 0); /* expected: nothing, so only an unset key is set */
  putBytes(&r, value, len);
  GB_CHECK(sendRequest(s, &r, deadline, key));
  return recvValue(s, out, cap, outLen, deadline, key);
}

gbResult_t gbBootStoreWaitGet(gbBootStore_t* s, const char* key, void* out, size_t cap, size_t* outLen,
                              gbDeadline_t deadline) {
  request_t r = {.len = 0};
  uint8_t cmd = CMD_WAIT;
  uint64_t nkeys = 1;
  put(&r, &cmd, 1);
  put(&r, &nkeys, sizeof(nkeys));
  putBytes(&r, key, strlen(key));
  GB_CHECK(sendRequest(s, &r, deadline, key));
  /* The store answers once the key is set; closing the connection at the
   * deadline withdraws the wait. */
  uint8_t reply = 0xff;
  gbResult_t res = gbSockRecvAll(s->fd, &reply, 1, deadline, NULL, "the wait for a key in torchrun's store");
  if (res != gbSuccess) return res;
  if (reply != WAIT_STOP)
    return gbErrorSet(gbRemoteError, "torchrun's store at %s answered %u to a wait for key %s; is "
                      "MASTER_ADDR:MASTER_PORT torchrun's agent store?", s->where, reply, key);
  r.len = 0;
  cmd = CMD_GET;
  put(&r, &cmd, 1);
  putBytes(&r, key, strlen(key));
  GB_CHECK(sendRequest(s, &r, deadline, key));
  return recvValue(s, out, cap, outLen, deadline, key);
}
