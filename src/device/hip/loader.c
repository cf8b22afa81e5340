/* Loads the HIP runtime with dlopen, picks this process's GPU, decides how
 * flags are signalled, and translates HIP error codes. Nothing here needs a
 * HIP header or library at build time, so the same binary runs on machines
 * without ROCm (gbDeviceHipOpen then reports "not found"). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/param.h"
#include "base/result.h"
#include "device/hip/api.h"
#include "device/hip/hip.h"
#include "device/gpu/gpu.h"
#include "os/dl.h"

/* Filled once by gbDeviceHipOpen (under choose.c's once-guard), read-only after. */
static gbHipApi_t api;
static int apiReady;

const char* gbDeviceHipModeLabel(void) { return api.emulated ? "emulated AMD" : "real amd"; }

/* ------------------------------------------------------------ error text */

gbResult_t gbDeviceHipFail(gbHipError_t err, const char* fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  const char* name = api.hipGetErrorName ? api.hipGetErrorName(err) : NULL;
  const char* text = api.hipGetErrorString ? api.hipGetErrorString(err) : NULL;
  /* The runtime keeps the error as its "last error" until read: read it here
   * so that an unrelated later call does not report it again. */
  if (api.hipGetLastError) (void)api.hipGetLastError();
  return gbErrorSet(gbUnhandledCudaError,
                    "%s failed on GPU %d: HIP error %d %s (%s)%s; a fatal error (illegal address, "
                    "launch failure) leaves the process unusable: look for the first failing call",
                    what, api.rt.device, err, name ? name : "", text ? text : "no description",
                    api.emulated ? " [emulated AMD]" : "");
}

/* ---------------------------------------------------------------- loading */

/* Loads the runtime. *found = 0 with why when none is here. */
static gbResult_t loadRuntime(int* found, char* why, size_t whyLen) {
  static const char* const names[] = {"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so"};
  const gbGpuLibrary_t lib = {"GPUBRIDGE_HIP_LIBRARY",
                              gbParamIsSet(GB_PARAM_HIP_LIBRARY) ? gbParamString(GB_PARAM_HIP_LIBRARY) : "",
                              "libamdhip64.so", "HIP", names, 3};
  return gbGpuRuntimeLoad(&lib, &api.handle, api.name, sizeof(api.name), found, why, whyLen);
}

#define SYM(s) {#s, &api.s}
#define SH(s, field) {#s, &api.rt.field} /* shared with CUDA: device/gpu */
static gbResult_t bindRuntime(void) {
  const gbOsSym_t syms[] = {SYM(hipGetDeviceCount), SH(hipSetDevice, setDevice), SH(hipMalloc, memAlloc), SH(hipFree, memFree),
              SH(hipMemcpy, copy), SH(hipMemcpyAsync, copyAsync), SH(hipHostMalloc, hostAlloc),
              SH(hipHostFree, hostFree), SH(hipHostGetDevicePointer, hostGetDevicePointer),
              SH(hipStreamCreateWithFlags, streamCreateWithFlags), SH(hipStreamDestroy, streamDestroy),
              SH(hipStreamSynchronize, streamSynchronize), SYM(hipStreamQuery),
              SH(hipDeviceSynchronize, deviceSynchronize), SYM(hipGetLastError), SYM(hipGetErrorString)};
  const char* missing = gbOsSymbolsBind(api.handle, syms, sizeof(syms) / sizeof(syms[0]), 1);
  if (missing != NULL)
    return gbErrorSet(gbUnhandledCudaError,
                      "the HIP runtime %s has no symbol %s: it is too old or not a HIP runtime; "
                      "use ROCm 6 or newer (GPUBRIDGE_HIP_LIBRARY names another)",
                      api.name, missing);
  /* Optional ones: messages, versions, identity, the flag paths flag.c
   * chooses among, and the bridge's GPU work (device/gpu/reduce.c says when
   * one is missing). */
  const gbOsSym_t optional[] = {SYM(hipGetErrorName), SYM(hipRuntimeGetVersion), SYM(hipDriverGetVersion), SYM(hipDeviceGet),
                  SYM(hipDeviceGetUuid), SYM(hipDeviceGetPCIBusId), SH(hipLaunchHostFunc, launchHostFunc),
                  SYM(hipStreamWriteValue32), SYM(hipStreamWriteValue64), SYM(hipStreamWaitValue32),
                  SYM(hipStreamWaitValue64), SH(hipHostRegister, hostRegister),
                  SH(hipHostUnregister, hostUnregister), SH(hipDeviceGetAttribute, deviceGetAttribute),
                  SH(hipModuleLoadData, moduleLoadData), SH(hipModuleGetFunction, moduleGetFunction),
                  SH(hipModuleUnload, moduleUnload), SH(hipModuleLaunchKernel, launchKernel)};
  (void)gbOsSymbolsBind(api.handle, optional, sizeof(optional) / sizeof(optional[0]), 0);
  return gbSuccess;
}
#undef SH
#undef SYM

/* The names device/gpu puts in the ops table and its messages. */
static void describe(void) {
  gbGpuRuntime_t* rt = &api.rt;
  rt->name = "hip";
  rt->runtime = GB_DEVICE_RUNTIME_HIP;
  rt->vendor = "amd";
  rt->hostAllocName = "hipHostMalloc";
  rt->hostFreeName = "hipHostFree";
  rt->nullStream = "null stream";
  rt->memOpPrefix = "hipStream";
  rt->visibleVars[0] = "HIP_VISIBLE_DEVICES";
  rt->visibleVars[1] = "ROCR_VISIBLE_DEVICES";
  rt->fail = gbDeviceHipFail;
  rt->memOpFail = gbDeviceHipFail;
  rt->attrMultiprocessorCount = GB_HIP_ATTR_MULTIPROCESSOR_COUNT;
  rt->kernelImage = gbDeviceHipKernelImage;
  rt->modulePrefix = "hip";
  rt->launchName = "hipModuleLaunchKernel";
  rt->moduleHint = "hiprtc compiled them for this GPU; check that the ROCm runtime and hiprtc are the same release";
  rt->moduleFail = gbDeviceHipFail;
}

static void unload(void) {
  gbOsLibraryClose(api.handle);
  memset(&api, 0, sizeof(api));
}

/* The rig marks itself with a text symbol; real ROCm has none. */
static void detectEmulation(void) {
  const char* marker = gbOsSymbolFind(api.handle, "gbEmulatedAmd");
  api.emulated = marker != NULL ? (marker[0] ? marker : "emulated AMD") : NULL;
}

gbResult_t gbDeviceHipOpen(gbDeviceOps* ops, int* found, char* why, size_t whyLen) {
  if (ops == NULL || found == NULL || why == NULL || whyLen == 0)
    return gbErrorSet(gbInternalError, "gbDeviceHipOpen: a NULL argument");
  *found = 1;
  why[0] = '\0';
  if (apiReady) return gbErrorSet(gbInternalError, "gbDeviceHipOpen called twice");
  describe();
  gbResult_t res = loadRuntime(found, why, whyLen);
  if (res != gbSuccess || !*found) goto fail;
  GB_CHECK_GOTO(bindRuntime(), res, fail);
  detectEmulation();
  /* From here on every line of this rank says so (choose.c sets it again). */
  if (api.emulated) gbLogSetMode(gbDeviceHipModeLabel());

  gbHipError_t e = api.hipGetDeviceCount(&api.rt.deviceCount);
  if (e != GB_HIP_SUCCESS || api.rt.deviceCount <= 0) {
    const char* text = api.hipGetErrorString(e);
    (void)api.hipGetLastError();
    if (e == GB_HIP_SUCCESS)
      snprintf(why, whyLen, "%s loaded, but hipGetDeviceCount found no GPU", api.name);
    else
      snprintf(why, whyLen, "%s loaded, but hipGetDeviceCount failed: HIP error %d (%s)", api.name, e,
               text ? text : "");
    /* No driver or no GPU is a plain CPU machine; anything else is worth a line. */
    if (e != GB_HIP_SUCCESS && e != GB_HIP_ERROR_NO_DEVICE && e != GB_HIP_ERROR_INSUFFICIENT_DRIVER)
      GB_WARN("%s; continuing without a HIP GPU", why);
    *found = 0;
    goto fail;
  }
  GB_CHECK_GOTO(gbGpuDeviceChoose(&api.rt), res, fail);
  apiReady = 1; /* error helpers and MakeCurrent need the table from here on */
  e = api.rt.setDevice(api.rt.device);
  if (e != GB_HIP_SUCCESS) {
    res = gbDeviceHipFail(e, "hipSetDevice(%d) (is the GPU taken in exclusive mode, or out of memory?)", api.rt.device);
    goto fail;
  }
  api.rt.flagWaitSec = (double)gbParamInt(GB_PARAM_TIMEOUT) + GB_FLAG_WAIT_MARGIN_SEC;
  GB_CHECK_GOTO(gbDeviceHipFlagModeChoose(&api), res, fail);
  if (api.hipRuntimeGetVersion) (void)api.hipRuntimeGetVersion(&api.runtimeVersion);
  if (api.hipDriverGetVersion) (void)api.hipDriverGetVersion(&api.driverVersion);
  if (api.emulated)
    GB_WARN("%s exports gbEmulatedAmd (%s): this rank is an emulated AMD GPU, for testing only", api.name,
            api.emulated);
  GB_INFO(GB_LOG_DEVICE | GB_LOG_INIT, "hip: GPU %d of %d, runtime %s version %d, driver version %d, flags by %s%s",
          api.rt.device, api.rt.deviceCount, api.name, api.runtimeVersion, api.driverVersion,
          gbGpuFlagModeName(api.rt.flagMode), api.emulated ? " (emulated AMD)" : "");
  api.hipDev = api.rt.device;
  if (api.hipDeviceGet && api.hipDeviceGet(&api.hipDev, api.rt.device) != GB_HIP_SUCCESS) {
    (void)api.hipGetLastError();
    api.hipDev = api.rt.device; /* hipDevice_t is the ordinal on ROCm */
  }
  gbGpuOpsFill(&api.rt, ops);
  ops->identify = gbDeviceHipIdentify;
  if (api.emulated) ops->vendor = GB_DEVICE_HIP_EMULATED_VENDOR;
  return gbSuccess;
fail:
  apiReady = 0;
  unload();
  return res;
}

void gbDeviceHipIdentify(char* uuid, size_t uuidLen, char* pci, size_t pciLen, int* index) {
  uuid[0] = pci[0] = '\0';
  *index = api.rt.device;
  gbHipUuid_t u;
  memset(&u, 0, sizeof(u));
  int any = 0;
  if (api.hipDeviceGetUuid && api.hipDeviceGetUuid(&u, api.hipDev) == GB_HIP_SUCCESS)
    for (int i = 0; i < 16; i++) any |= u.bytes[i];
  /* All zeros is "unknown" (some GPUs report no UUID): the PCI id decides then. */
  if (any) {
    size_t used = (size_t)snprintf(uuid, uuidLen, "GPU-");
    for (int i = 0; i < 16 && used + 2 < uuidLen; i++) used += (size_t)snprintf(uuid + used, uuidLen - used, "%02x", u.bytes[i]);
  }
  if (api.hipDeviceGetPCIBusId == NULL || api.hipDeviceGetPCIBusId(pci, (int)pciLen, api.rt.device) != GB_HIP_SUCCESS)
    pci[0] = '\0';
  (void)api.hipGetLastError();
}

gbResult_t gbDeviceHipMakeCurrent(void) {
  if (!apiReady)
    return gbErrorSet(gbInternalError, "the HIP device is not open; this process did not choose a HIP GPU");
  return gbGpuMakeCurrent(&api.rt);
}
