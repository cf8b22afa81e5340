/* Chooses this process's device once. Selection order:
 *   1. GPUBRIDGE_VENDOR set: the host device simulating that vendor's GPU
 *      (a forced simulation wins even where a real GPU is present).
 *   2. A CUDA runtime found with dlopen and a GPU visible: cuda/ (real nvidia).
 *      CUDA present but unusable (or a library the user named that does not
 *      load) is an error, not a silent CPU rank.
 *   3. A HIP runtime found with dlopen and a GPU visible: hip/ (real amd, or
 *      "emulated AMD" on the test rig), with the same rules as CUDA.
 *   4. Otherwise the host device as a plain CPU rank.
 * GPUBRIDGE_DEVICE_BACKEND narrows steps 2-4: cuda or hip opens that GPU or
 * fails (no silent CPU rank), host goes to step 4; auto (the default) is all. */
#include "device/device.h"

#include <pthread.h>
#include <stdio.h>

#include "base/log.h"
#include "base/param.h"
#include "base/result.h"
#include "device/cuda/cuda.h"
#include "device/hip/hip.h"

/* GPUBRIDGE_DEVICE_BACKEND's values (the order of its choices in param.c). */
enum { BACKEND_AUTO = 0, BACKEND_CUDA = 1, BACKEND_HIP = 2, BACKEND_HOST = 3 };

static pthread_once_t once = PTHREAD_ONCE_INIT;
/* The host device's table is shared by every user; this process's copy
 * carries the vendor label and run kind chosen here. */
static gbDeviceOps chosen;
/* GPUBRIDGE_VENDOR allows at most 15 characters; copied because the
 * parameter table's text may be reset by tests. */
static char vendorLabel[32];
/* The host device cannot fail to open; a real backend's dlopen or runtime
 * init can, and every later gbDeviceGet then reports it. */
static gbResult_t chosenResult = gbSuccess;

static gbDeviceOps unusableOps;
static void fillUnusable(void) {
  unusableOps = *gbDeviceHostOps();
  unusableOps.vendor = "unusable";
  unusableOps.runKind = gbRunReal;
}

static void choose(void) {
  const char* vendor = gbParamString(GB_PARAM_VENDOR);
  chosen = *gbDeviceHostOps();
  /* Set but invalid: still simulated (the start-up verdict reports the value),
   * so the rank is not also counted as a CPU rank. */
  if (gbParamIsSet(GB_PARAM_VENDOR) && (vendor == NULL || vendor[0] == '\0')) vendor = "invalid";
  if (vendor != NULL && vendor[0] != '\0') {
    snprintf(vendorLabel, sizeof(vendorLabel), "%s", vendor);
    chosen.vendor = vendorLabel;
    chosen.runKind = gbRunSimulated;
    char mode[64];
    snprintf(mode, sizeof(mode), "simulated %s", vendorLabel);
    gbLogSetMode(mode);
  } else {
    int backend = (int)gbParamInt(GB_PARAM_DEVICE_BACKEND);
    int found = 0;
    char why[768] = "", whyHip[768] = "";
    gbResult_t res = gbSuccess;
    if (backend == BACKEND_AUTO || backend == BACKEND_CUDA) {
      res = gbDeviceCudaOpen(&chosen, &found, why, sizeof(why));
      if (res != gbSuccess) {
        chosenResult = res;
        return;
      }
      if (found) gbLogSetMode("real nvidia");
      else GB_INFO(GB_LOG_DEVICE | GB_LOG_INIT, "no CUDA GPU: %s", why);
    }
    if (!found && (backend == BACKEND_AUTO || backend == BACKEND_HIP)) {
      res = gbDeviceHipOpen(&chosen, &found, whyHip, sizeof(whyHip));
      if (res != gbSuccess) {
        chosenResult = res;
        return;
      }
      if (found) gbLogSetMode(gbDeviceHipModeLabel());
      else GB_INFO(GB_LOG_DEVICE | GB_LOG_INIT, "no HIP GPU: %s", whyHip);
    }
    if (!found && (backend == BACKEND_CUDA || backend == BACKEND_HIP)) {
      chosenResult = gbErrorSet(gbInvalidUsage,
                                "GPUBRIDGE_DEVICE_BACKEND=%s, but this process has no usable %s GPU: %s; make "
                                "the GPU and its runtime visible, or unset it to fall back to the CPU",
                                backend == BACKEND_CUDA ? "cuda" : "hip", backend == BACKEND_CUDA ? "CUDA" : "HIP",
                                backend == BACKEND_CUDA ? why : whyHip);
      return;
    }
    if (!found) {
      chosen = *gbDeviceHostOps();
      chosen.vendor = "cpu";
      chosen.runKind = gbRunCpu;
      gbLogSetMode("cpu");
    }
  }
  GB_INFO(GB_LOG_DEVICE | GB_LOG_INIT, "device: %s, vendor %s, %s", chosen.name, chosen.vendor,
          chosen.runKind == gbRunSimulated ? "simulated" : chosen.runKind == gbRunCpu ? "cpu" : "real");
  chosenResult = gbSuccess;
}

gbResult_t gbDeviceGet(const gbDeviceOps** out) {
  if (out == NULL) return gbErrorSet(gbInvalidArgument, "gbDeviceGet: the output pointer is NULL");
  pthread_once(&once, choose);
  GB_CHECK(chosenResult);
  *out = &chosen;
  return gbSuccess;
}

const gbDeviceOps* gbDeviceUnusableOps(void) {
  static pthread_once_t unusableOnce = PTHREAD_ONCE_INIT;
  pthread_once(&unusableOnce, fillUnusable);
  return &unusableOps;
}
