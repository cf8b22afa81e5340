#include "boot/env_store.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/param.h"
#include "base/result.h"
#include "boot/root.h"
#include "boot/store.h"

/* A value rank 0 publishes instead of the id when it cannot host the root. */
#define FAILED_PREFIX "failed: "
#define VALUE_MAX 1024

int gbBootEnvAgentStore(void) {
  const char* v = getenv("TORCHELASTIC_USE_AGENT_STORE");
  return v && strcmp(v, "True") == 0;
}

/* Inits that went through the store in this process: every rank makes the
 * same sequence of gbCommInitFromEnv calls, so the n-th of each meets under
 * the n-th key, and a second init never reads the first one's id. */
static atomic_int storeInits;

static void jobKey(char* buf, size_t len, const char* leaf) {
  const char* run = getenv("TORCHELASTIC_RUN_ID");
  const char* restart = getenv("TORCHELASTIC_RESTART_COUNT");
  /* torch's own clients put a "/" before every key; so does this one, so
   * the key reads the same from Python (store.get("gpubridge/...")). */
  snprintf(buf, len, "/gpubridge/%s/%s/%d/%s", run && *run ? run : "none", restart && *restart ? restart : "0",
           atomic_load_explicit(&storeInits, memory_order_relaxed), leaf);
}

/* Rank 0: the root on a free port of the bind address or the chosen
 * interface, with a random secret. */
static gbResult_t startRoot(const gbBootStoreRdv_t* in, gbBootId_t* id) {
  memset(id, 0, sizeof(*id));
  gbSockAddr_t bind;
  if (in->bind) {
    bind = *in->bind;
  } else {
    char ifname[64];
    if (gbSockFindInterface(gbParamString(GB_PARAM_SOCKET_IFNAME), &bind, ifname, sizeof(ifname)) != gbSuccess)
      return gbErrorSet(gbSystemError, "no network interface for the rendezvous root: %s; set "
                        "GPUBRIDGE_SOCKET_IFNAME to an interface the other ranks reach", gbErrorLast());
  }
  gbSockAddrSetPort(&bind, 0);
  GB_CHECK(gbRandomBytes(id->secret, sizeof(id->secret)));
  gbSockAddr_t bound;
  GB_CHECK(gbBootRootStart(&bind, id->secret, gbBootIdHash(id), &bound));
  id->root = bound;
  return gbSuccess;
}

static gbResult_t publish(gbBootStore_t* s, const char* key, const char* value, gbDeadline_t d) {
  char held[VALUE_MAX];
  size_t n = 0;
  GB_CHECK(gbBootStoreSetIfAbsent(s, key, value, strlen(value), held, sizeof(held), &n, d));
  if (n != strlen(value) || memcmp(held, value, n) != 0)
    return gbErrorSet(gbInternalError, "torchrun's store at %s: key %s already holds another value; is a second "
                      "process started with RANK=0?", s->where, key);
  return gbSuccess;
}

/* The id (or rank 0's failure) under key, waited for until the deadline. */
static gbResult_t readId(gbBootStore_t* s, const gbBootStoreRdv_t* in, const char* key, gbDeadline_t d,
                         gbBootId_t* id) {
  char value[VALUE_MAX + 1];
  size_t n = 0;
  gbResult_t res = gbBootStoreWaitGet(s, key, value, VALUE_MAX, &n, d);
  if (res == gbTimeout)
    return gbErrorSet(gbTimeout, "rank %d waited %.0f s for rank 0 to publish the rendezvous address in torchrun's "
                      "store (key %s at %s); is rank 0 running and calling gbCommInitFromEnv (gpubridge.init()) "
                      "as this rank does? GPUBRIDGE_TIMEOUT sets the limit", in->rank, in->timeoutSec, key, s->where);
  GB_CHECK(res);
  value[n] = '\0';
  if (strncmp(value, FAILED_PREFIX, strlen(FAILED_PREFIX)) == 0)
    return gbErrorSet(gbInvalidUsage, "gbCommInitFromEnv: rank 0 cannot host the rendezvous: %s",
                      value + strlen(FAILED_PREFIX));
  gbUniqueId uid;
  if (gbBootIdFromHex(value, &uid) != gbSuccess || gbBootIdUnpack(&uid, id) != gbSuccess)
    return gbErrorSet(gbInvalidUsage, "torchrun's store at %s: key %s holds no gpubridge unique id (%zu bytes); "
                      "install the same gpubridge on every node", s->where, key, n);
  return gbSuccess;
}

gbResult_t gbBootStoreRendezvous(const gbBootStoreRdv_t* in, gbBootId_t* id, int* hostsRoot, char* rival,
                                 size_t rivalLen) {
  *hostsRoot = 0;
  rival[0] = '\0';
  gbDeadline_t d = gbDeadlineIn(in->timeoutSec);
  char idKey[256], rootKey[256];
  jobKey(idKey, sizeof(idKey), "unique_id");
  jobKey(rootKey, sizeof(rootKey), "rank0");
  atomic_fetch_add_explicit(&storeInits, 1, memory_order_relaxed);
  gbBootStore_t s;
  GB_CHECK(gbBootStoreOpen(in->store, d, &s));
  gbResult_t res = gbSuccess;
  if (in->claimRoot) {
    /* Who is rank 0: the first process to claim it. */
    char me[128], held[VALUE_MAX + 1];
    size_t n = 0;
    snprintf(me, sizeof(me), "pid %d on %s", (int)getpid(), gbHostName());
    res = gbBootStoreSetIfAbsent(&s, rootKey, me, strlen(me), held, VALUE_MAX, &n, d);
    if (res != gbSuccess) goto done;
    held[n] = '\0';
    if (strcmp(held, me) != 0) {
      snprintf(rival, rivalLen, "%s", held);
    } else {
      res = startRoot(in, id);
      if (res != gbSuccess) {
        char failed[VALUE_MAX];
        snprintf(failed, sizeof(failed), FAILED_PREFIX "%s", gbErrorLast());
        char why[VALUE_MAX];
        snprintf(why, sizeof(why), "%s", gbErrorLast());
        (void)publish(&s, idKey, failed, d); /* the others fail at once with it */
        res = gbErrorSet(res, "gbCommInitFromEnv: rank 0 cannot host the rendezvous: %s", why);
        goto done;
      }
      *hostsRoot = 1;
      gbUniqueId uid;
      char hex[2 * GB_UNIQUE_ID_BYTES + 1];
      res = gbBootIdPack(id, &uid);
      if (res != gbSuccess) goto done;
      gbBootIdToHex(&uid, hex);
      res = publish(&s, idKey, hex, d);
      char where[96];
      if (res == gbSuccess)
        GB_INFO(GB_LOG_BOOT, "published the rendezvous root %s in torchrun's store at %s (key %s)",
                gbSockAddrString(&id->root, where, sizeof(where)), s.where, idKey);
      goto done;
    }
  }
  res = readId(&s, in, idKey, d, id);
done:
  gbBootStoreClose(&s);
  return res;
}
