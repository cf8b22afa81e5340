/* A client of torch's TCPStore: the key-value store that torchrun's agent
 * serves on MASTER_ADDR:MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True). Only
 * what the start-up needs: set a key unless it is set, and wait for a key and
 * read it. Keys and values are bytes; every call has a deadline, and a reply
 * that is not the store's (a value larger than asked for, the connection
 * closed) is an error naming the address. */
#ifndef GB_BOOT_STORE_H
#define GB_BOOT_STORE_H

#include <stddef.h>
#include "base/clock.h"
#include "gpubridge/gpubridge.h"
#include "os/socket.h"

typedef struct {
  int fd;
  char where[96]; /* "127.0.0.1:29500", for messages */
} gbBootStore_t;

/* Connects (retrying a refused connection until the deadline) and introduces
 * this client as the store expects. */
gbResult_t gbBootStoreOpen(const gbSockAddr_t* addr, gbDeadline_t deadline, gbBootStore_t* out);
void gbBootStoreClose(gbBootStore_t* s);

/* Sets key to value when the key holds nothing; *outLen bytes of what the key
 * holds afterwards go to out (value itself when this call set it). */
gbResult_t gbBootStoreSetIfAbsent(gbBootStore_t* s, const char* key, const void* value, size_t len, void* out,
                                  size_t cap, size_t* outLen, gbDeadline_t deadline);

/* Waits until key is set, then reads its value into out (at most cap bytes). */
gbResult_t gbBootStoreWaitGet(gbBootStore_t* s, const char* key, void* out, size_t cap, size_t* outLen,
                              gbDeadline_t deadline);

#endif
