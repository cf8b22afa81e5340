/* The unique id: the rendezvous root's address and the random job secret,
 * packed into gbUniqueId's 128 bytes. */
#ifndef GB_BOOT_UNIQUEID_H
#define GB_BOOT_UNIQUEID_H

#include <stdint.h>
#include "gpubridge/gpubridge.h"
#include "net/net.h"
#include "os/socket.h"

typedef struct {
  gbSockAddr_t root;
  uint8_t secret[GB_NET_SECRET_BYTES];
} gbBootId_t;

gbResult_t gbBootIdPack(const gbBootId_t* in, gbUniqueId* out);
/* Fails with gbInvalidArgument when the bytes are not a gpubridge id. */
gbResult_t gbBootIdUnpack(const gbUniqueId* in, gbBootId_t* out);
/* A 64-bit name of the communicator the id makes (from the secret). */
uint64_t gbBootIdHash(const gbBootId_t* id);

/* Hex text of the 128 bytes (256 digits, for GPUBRIDGE_UNIQUE_ID) and back. */
void gbBootIdToHex(const gbUniqueId* id, char out[2 * GB_UNIQUE_ID_BYTES + 1]);
gbResult_t gbBootIdFromHex(const char* hex, gbUniqueId* out);

/* A 32-byte secret derived from text (GPUBRIDGE_JOB_SECRET or job variables). */
void gbBootSecretFromText(const char* text, uint8_t secret[GB_NET_SECRET_BYTES]);

#endif
