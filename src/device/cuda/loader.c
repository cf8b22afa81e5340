/* Loads the CUDA runtime and driver with dlopen, picks this process's GPU,
 * decides how flags are signalled, and translates CUDA error codes. Nothing
 * here needs a CUDA header or library at build time, so the same binary runs
 * on machines without CUDA (gbDeviceCudaOpen then reports "not found"). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/param.h"
#include "base/result.h"
#include "device/cuda/api.h"
#include "device/cuda/cuda.h"
#include "device/gpu/gpu.h"
#include "device/gpu/kernels/kernels.h"
#include "os/dl.h"

/* Filled once by gbDeviceCudaOpen (under choose.c's once-guard), read-only after. */
static gbCudaApi_t api;
static int apiReady;

/* ------------------------------------------------------------ error text */

gbResult_t gbDeviceCudaFail(gbCudaError_t err, const char* fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  const char* name = api.cudaGetErrorName ? api.cudaGetErrorName(err) : NULL;
  const char* text = api.cudaGetErrorString ? api.cudaGetErrorString(err) : NULL;
  /* A non-sticky error stays the runtime's "last error" until read: read it
   * here so that an unrelated later call does not report it again. */
  if (api.cudaGetLastError) (void)api.cudaGetLastError();
  return gbErrorSet(gbUnhandledCudaError,
                    "%s failed on GPU %d: CUDA error %d %s (%s); a sticky error (illegal address, "
                    "launch failure) leaves the process unusable: look for the first failing call",
                    what, api.rt.device, err, name ? name : "?", text ? text : "no description");
}

gbResult_t gbDeviceCudaDriverFail(gbCuResult_t err, const char* fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  const char* name = NULL;
  const char* text = NULL;
  if (api.cuGetErrorName && api.cuGetErrorName(err, &name) != GB_CU_SUCCESS) name = NULL;
  if (api.cuGetErrorString && api.cuGetErrorString(err, &text) != GB_CU_SUCCESS) text = NULL;
  return gbErrorSet(gbUnhandledCudaError, "%s failed on GPU %d: CUDA driver error %d %s (%s)", what,
                    api.rt.device, err, name ? name : "?", text ? text : "no description");
}

/* ---------------------------------------------------------------- loading */

#define RT(sym) {#sym, &api.sym}
#define SH(sym, field) {#sym, &api.rt.field} /* shared with HIP: device/gpu */
static gbResult_t bindRuntime(void) {
  const gbOsSym_t syms[] = {RT(cudaGetDeviceCount), SH(cudaSetDevice, setDevice), SH(cudaMalloc, memAlloc),
              SH(cudaFree, memFree), SH(cudaMemcpy, copy), SH(cudaMemcpyAsync, copyAsync),
              SH(cudaHostAlloc, hostAlloc), SH(cudaFreeHost, hostFree),
              SH(cudaHostGetDevicePointer, hostGetDevicePointer),
              SH(cudaStreamCreateWithFlags, streamCreateWithFlags), SH(cudaStreamDestroy, streamDestroy),
              SH(cudaStreamSynchronize, streamSynchronize), SH(cudaDeviceSynchronize, deviceSynchronize),
              SH(cudaLaunchHostFunc, launchHostFunc), SH(cudaHostRegister, hostRegister),
              SH(cudaHostUnregister, hostUnregister), SH(cudaDeviceGetAttribute, deviceGetAttribute),
              RT(cudaGetLastError), RT(cudaGetErrorString),
              RT(cudaGetErrorName), RT(cudaRuntimeGetVersion), RT(cudaDriverGetVersion),
              RT(cudaDeviceGetPCIBusId)};
  const char* missing = gbOsSymbolsBind(api.rtHandle, syms, sizeof(syms) / sizeof(syms[0]), 1);
  if (missing != NULL)
    return gbErrorSet(gbUnhandledCudaError,
                      "the CUDA runtime %s has no symbol %s: it is too old or not a CUDA runtime; "
                      "use CUDA 11.0 or newer (GPUBRIDGE_CUDART_LIBRARY names another)",
                      api.rtName, missing);
  return gbSuccess;
}

static gbResult_t bindDriver(void) {
  const gbOsSym_t syms[] = {RT(cuInit), RT(cuDeviceGet), RT(cuDeviceGetAttribute), RT(cuDeviceGetName),
              RT(cuGetErrorString), RT(cuGetErrorName), SH(cuModuleLoadData, moduleLoadData),
              SH(cuModuleGetFunction, moduleGetFunction), SH(cuModuleUnload, moduleUnload),
              SH(cuLaunchKernel, launchKernel)};
  const char* missing = gbOsSymbolsBind(api.drvHandle, syms, sizeof(syms) / sizeof(syms[0]), 1);
  if (missing != NULL)
    return gbErrorSet(gbUnhandledCudaError, "the CUDA driver library %s has no symbol %s; update the driver",
                      api.drvName, missing);
  return gbSuccess;
}
#undef SH
#undef RT

/* The reduction kernels: the embedded PTX, which the driver compiles for
 * this GPU when the module loads. */
static gbResult_t kernelImage(const void** image, void** owned) {
  GB_INFO(GB_LOG_DEVICE, "cuda: loading the reduction kernels' PTX (%s)", gbGpuKernelsCompiler);
  *image = gbGpuKernelsPtx;
  *owned = NULL;
  return gbSuccess;
}

/* The names device/gpu puts in the ops table and its messages. */
static void describe(void) {
  gbGpuRuntime_t* rt = &api.rt;
  rt->name = "cuda";
  rt->runtime = GB_DEVICE_RUNTIME_CUDA;
  rt->vendor = "nvidia";
  rt->hostAllocName = "cudaHostAlloc";
  rt->hostFreeName = "cudaFreeHost";
  rt->nullStream = "legacy stream";
  rt->memOpPrefix = "cuStream";
  rt->visibleVars[0] = "CUDA_VISIBLE_DEVICES";
  rt->fail = gbDeviceCudaFail;
  rt->memOpFail = gbDeviceCudaDriverFail;
  rt->attrMultiprocessorCount = GB_CUDA_ATTR_MULTIPROCESSOR_COUNT;
  rt->kernelImage = kernelImage;
  rt->modulePrefix = "cu";
  rt->launchName = "cuLaunchKernel";
  rt->moduleHint = "the driver compiles their PTX, made by CUDA 13's nvcc: it must be a driver for CUDA 13 or "
                   "newer; update the NVIDIA driver";
  rt->moduleFail = gbDeviceCudaDriverFail;
}

/* Loads the runtime. *found = 0 with why when none is here. */
static gbResult_t loadRuntime(int* found, char* why, size_t whyLen) {
  static const char* const names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
  const gbGpuLibrary_t lib = {
      "GPUBRIDGE_CUDART_LIBRARY",
      gbParamIsSet(GB_PARAM_CUDART_LIBRARY) ? gbParamString(GB_PARAM_CUDART_LIBRARY) : "",
      "libcudart.so.N", "CUDA", names, 3};
  return gbGpuRuntimeLoad(&lib, &api.rtHandle, api.rtName, sizeof(api.rtName), found, why, whyLen);
}

static gbResult_t loadDriver(void) {
  char tried[512];
  const char* named = gbParamIsSet(GB_PARAM_CUDA_LIBRARY) ? gbParamString(GB_PARAM_CUDA_LIBRARY) : "";
  const char* dflt = "libcuda.so.1";
  const char* name = named[0] != '\0' ? named : dflt;
  api.drvHandle = gbOsLibraryOpenFirst(&name, 1, api.drvName, sizeof(api.drvName), tried, sizeof(tried));
  if (api.drvHandle == NULL)
    return gbErrorSet(gbUnhandledCudaError,
                      "the CUDA runtime %s sees %d GPU%s, but the driver library did not load: tried %s; "
                      "check the NVIDIA driver installation%s",
                      api.rtName, api.rt.deviceCount, api.rt.deviceCount == 1 ? "" : "s", tried,
                      named[0] != '\0' ? " or GPUBRIDGE_CUDA_LIBRARY" : " or set GPUBRIDGE_CUDA_LIBRARY");
  return gbSuccess;
}

static void unload(void) {
  gbOsLibraryClose(api.drvHandle);
  gbOsLibraryClose(api.rtHandle);
  memset(&api, 0, sizeof(api));
}

gbResult_t gbDeviceCudaOpen(gbDeviceOps* ops, int* found, char* why, size_t whyLen) {
  if (ops == NULL || found == NULL || why == NULL || whyLen == 0)
    return gbErrorSet(gbInternalError, "gbDeviceCudaOpen: a NULL argument");
  *found = 1;
  why[0] = '\0';
  if (apiReady) return gbErrorSet(gbInternalError, "gbDeviceCudaOpen called twice");
  describe();
  gbResult_t res = loadRuntime(found, why, whyLen);
  if (res != gbSuccess || !*found) goto fail;
  GB_CHECK_GOTO(bindRuntime(), res, fail);

  gbCudaError_t e = api.cudaGetDeviceCount(&api.rt.deviceCount);
  if (e != GB_CUDA_SUCCESS || api.rt.deviceCount <= 0) {
    const char* name = api.cudaGetErrorName(e);
    const char* text = api.cudaGetErrorString(e);
    (void)api.cudaGetLastError();
    if (e == GB_CUDA_SUCCESS)
      snprintf(why, whyLen, "%s loaded, but cudaGetDeviceCount found no GPU", api.rtName);
    else
      snprintf(why, whyLen, "%s loaded, but cudaGetDeviceCount failed: %s (%s)", api.rtName, name ? name : "?",
               text ? text : "");
    /* No driver or no GPU is a plain CPU machine; anything else is worth a line. */
    if (e != GB_CUDA_SUCCESS && e != GB_CUDA_ERROR_NO_DEVICE && e != GB_CUDA_ERROR_INSUFFICIENT_DRIVER)
      GB_WARN("%s; continuing without a GPU", why);
    *found = 0;
    goto fail;
  }
  GB_CHECK_GOTO(gbGpuDeviceChoose(&api.rt), res, fail);
  GB_CHECK_GOTO(loadDriver(), res, fail);
  GB_CHECK_GOTO(bindDriver(), res, fail);
  apiReady = 1; /* error helpers and MakeCurrent need the table from here on */
  e = api.rt.setDevice(api.rt.device);
  if (e != GB_CUDA_SUCCESS) {
    res = gbDeviceCudaFail(e, "cudaSetDevice(%d) (is the GPU in exclusive mode and taken, or out of memory?)",
                           api.rt.device);
    goto fail;
  }
  gbCuResult_t r = api.cuInit(0);
  if (r != GB_CU_SUCCESS) {
    res = gbDeviceCudaDriverFail(r, "cuInit");
    goto fail;
  }
  gbCuDevice_t cuDev = 0;
  r = api.cuDeviceGet(&cuDev, api.rt.device);
  if (r != GB_CU_SUCCESS) {
    res = gbDeviceCudaDriverFail(r, "cuDeviceGet(%d)", api.rt.device);
    goto fail;
  }
  GB_CHECK_GOTO(gbDeviceCudaFlagModeChoose(&api, cuDev), res, fail);
  (void)api.cudaRuntimeGetVersion(&api.runtimeVersion);
  (void)api.cudaDriverGetVersion(&api.driverVersion);
  api.rt.flagWaitSec = (double)gbParamInt(GB_PARAM_TIMEOUT) + GB_FLAG_WAIT_MARGIN_SEC;
  char gpuName[128] = "?";
  if (api.cuDeviceGetName(gpuName, (int)sizeof(gpuName), cuDev) != GB_CU_SUCCESS) snprintf(gpuName, sizeof(gpuName), "?");
  GB_INFO(GB_LOG_DEVICE | GB_LOG_INIT, "cuda: GPU %d of %d (%s), runtime %s version %d, driver version %d, flags by %s",
          api.rt.device, api.rt.deviceCount, gpuName, api.rtName, api.runtimeVersion, api.driverVersion,
          gbGpuFlagModeName(api.rt.flagMode));
  api.cuDev = cuDev;
  if (!gbOsSymbolBind(api.drvHandle, "cuDeviceGetUuid_v2", &api.cuDeviceGetUuid))
    (void)gbOsSymbolBind(api.drvHandle, "cuDeviceGetUuid", &api.cuDeviceGetUuid);
  gbGpuOpsFill(&api.rt, ops);
  ops->identify = gbDeviceCudaIdentify;
  ops->mps = gbDeviceCudaMps;
  return gbSuccess;
fail:
  apiReady = 0;
  unload();
  return res;
}

void gbDeviceCudaIdentify(char* uuid, size_t uuidLen, char* pci, size_t pciLen, int* index) {
  uuid[0] = pci[0] = '\0';
  *index = api.rt.device;
  unsigned char b[16];
  if (api.cuDeviceGetUuid && api.cuDeviceGetUuid(b, api.cuDev) == GB_CU_SUCCESS)
    snprintf(uuid, uuidLen, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  if (api.cudaDeviceGetPCIBusId(pci, (int)pciLen, api.rt.device) != GB_CUDA_SUCCESS) pci[0] = '\0';
}

/* A driver older than the attribute answers an error: no MPS known. */
int gbDeviceCudaMps(void) {
  int on = 0;
  if (api.cuDeviceGetAttribute(&on, GB_CU_ATTR_MPS_ENABLED, api.cuDev) != GB_CU_SUCCESS) return 0;
  return on != 0;
}

gbResult_t gbDeviceCudaMakeCurrent(void) {
  if (!apiReady)
    return gbErrorSet(gbInternalError, "the CUDA device is not open; this process did not choose a CUDA GPU");
  return gbGpuMakeCurrent(&api.rt);
}
