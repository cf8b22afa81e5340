/* The HIP device (dlopen'd libamdhip64): what choose.c and the RCCL island
 * need from it. */
#ifndef GB_DEVICE_HIP_HIP_H
#define GB_DEVICE_HIP_HIP_H

#include <stddef.h>

#include "device/device.h"

/* The island label of a HIP device running on the emulated-AMD test rig
 * (tests/gpu/emulated_amd: HIP calls served by an NVIDIA GPU). It reaches
 * every rank through the start-up exchange, so topologies and results name it. */
#define GB_DEVICE_HIP_EMULATED_VENDOR "amd-emulated"

/* Loads the HIP runtime (GPUBRIDGE_HIP_LIBRARY, else libamdhip64.so.7, .6,
 * libamdhip64.so) and picks this process's GPU (GPUBRIDGE_DEVICE; else the
 * launcher's local rank, which must name a visible GPU unless exactly one is
 * visible; else 0). Outcomes:
 *  - gbSuccess, *found = 1: *ops is the "hip" device (run kind real, vendor
 *    "amd", or GB_DEVICE_HIP_EMULATED_VENDOR on the test rig);
 *  - gbSuccess, *found = 0: no HIP here (no library, no driver, no GPU); why
 *    says what was looked for. Nothing is logged at WARN;
 *  - an error: HIP is here but unusable, or GPUBRIDGE_HIP_LIBRARY did not
 *    load, or GPUBRIDGE_DEVICE names a GPU that is not visible. Recorded with
 *    gbErrorSet.
 * Call once (choose.c does, under its once-guard). */
gbResult_t gbDeviceHipOpen(gbDeviceOps* ops, int* found, char* why, size_t whyLen);

/* Makes this process's GPU current on the calling thread (hipSetDevice).
 * Every hip op does this first, since streams are used from any thread. */
gbResult_t gbDeviceHipMakeCurrent(void);

/* The log mode for the opened device: "real amd", or "emulated AMD" on the
 * test rig (so every log line of such a rank says so). */
const char* gbDeviceHipModeLabel(void);

/* The chosen GPU's UUID ("GPU-" and 32 hex digits) and PCI bus id; "" where
 * the runtime does not say. */
void gbDeviceHipIdentify(char* uuid, size_t uuidLen, char* pci, size_t pciLen, int* index);

#endif
