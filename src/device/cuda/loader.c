/* Loads the CUDA runtime and driver with dlopen, picks this process's GPU,
 * decides how flags are signalled, and translates CUDA error codes. Nothing
 * here needs a CUDA header or library at build time, so the same binary runs
 * on machines without CUDA (gbDeviceCudaOpen then reports "not found"). */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/param.h"
#include "base/result.h"
#include "device/cuda/api.h"
#include "device/cuda/cuda.h"

/* Filled once by gbDeviceCudaOpen (under device.c's once-guard), read-only after. */
static gbCudaApi_t api;
static int apiReady;

const gbCudaApi_t* gbDeviceCudaApi(void) { return apiReady ? &api : NULL; }

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
                    what, api.device, err, name ? name : "?", text ? text : "no description");
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
                    api.device, err, name ? name : "?", text ? text : "no description");
}

/* ---------------------------------------------------------------- loading */

/* dlsym into a function-pointer field (POSIX guarantees the representation). */
static int bindSym(void* handle, const char* sym, void* field) {
  dlerror();
  void* p = dlsym(handle, sym);
  if (p == NULL) return 0;
  memcpy(field, &p, sizeof(p));
  return 1;
}

/* Opens the first of names that loads; tried lists them with the last dlerror. */
static void* openFirst(const char* const* names, int n, char* loaded, size_t loadedLen, char* tried,
                       size_t triedLen) {
  size_t used = 0;
  const char* lastError = "";
  tried[0] = '\0';
  for (int i = 0; i < n; i++) {
    void* h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h != NULL) {
      snprintf(loaded, loadedLen, "%s", names[i]);
      return h;
    }
    const char* e = dlerror();
    lastError = e ? e : "";
    int w = snprintf(tried + used, triedLen - used, "%s%s", used ? ", " : "", names[i]);
    if (w > 0 && used + (size_t)w < triedLen) used += (size_t)w;
  }
  if (used + 4 < triedLen) snprintf(tried + used, triedLen - used, " (%s)", lastError);
  return NULL;
}

#define RT(sym) {#sym, &api.sym}
static gbResult_t bindRuntime(void) {
  struct {
    const char* name;
    void* field;
  } syms[] = {RT(cudaGetDeviceCount), RT(cudaSetDevice), RT(cudaMalloc), RT(cudaFree),
              RT(cudaMemcpy), RT(cudaMemcpyAsync), RT(cudaHostAlloc), RT(cudaFreeHost),
              RT(cudaHostGetDevicePointer), RT(cudaStreamCreateWithFlags), RT(cudaStreamDestroy),
              RT(cudaStreamSynchronize), RT(cudaDeviceSynchronize), RT(cudaLaunchHostFunc), RT(cudaGetLastError),
              RT(cudaGetErrorString), RT(cudaGetErrorName), RT(cudaRuntimeGetVersion),
              RT(cudaDriverGetVersion), RT(cudaDeviceGetPCIBusId)};
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++)
    if (!bindSym(api.rtHandle, syms[i].name, syms[i].field))
      return gbErrorSet(gbUnhandledCudaError,
                        "the CUDA runtime %s has no symbol %s: it is too old or not a CUDA runtime; "
                        "use CUDA 11.0 or newer (GPUBRIDGE_CUDART_LIBRARY names another)",
                        api.rtName, syms[i].name);
  return gbSuccess;
}

static gbResult_t bindDriver(void) {
  struct {
    const char* name;
    void* field;
  } syms[] = {RT(cuInit), RT(cuDeviceGet), RT(cuDeviceGetAttribute), RT(cuDeviceGetName),
              RT(cuGetErrorString), RT(cuGetErrorName)};
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++)
    if (!bindSym(api.drvHandle, syms[i].name, syms[i].field))
      return gbErrorSet(gbUnhandledCudaError, "the CUDA driver library %s has no symbol %s; update the driver",
                        api.drvName, syms[i].name);
  return gbSuccess;
}
#undef RT

/* Stream memory ops: the v2 entry points (CUDA 11.7+) work on every platform;
 * older drivers have only v1, which may be disabled (NVreg_EnableStreamMemOPs).
 * Without either, flags go through host functions. */
static gbResult_t chooseFlagMode(gbCuDevice_t dev) {
  int v2 = bindSym(api.drvHandle, "cuStreamWriteValue32_v2", &api.cuStreamWriteValue32) &&
           bindSym(api.drvHandle, "cuStreamWaitValue32_v2", &api.cuStreamWaitValue32);
  int v1 = 0;
  if (!v2)
    v1 = bindSym(api.drvHandle, "cuStreamWriteValue32", &api.cuStreamWriteValue32) &&
         bindSym(api.drvHandle, "cuStreamWaitValue32", &api.cuStreamWaitValue32);
  int has64 = 0;
  if (v2) {
    has64 = bindSym(api.drvHandle, "cuStreamWriteValue64_v2", &api.cuStreamWriteValue64) &&
            bindSym(api.drvHandle, "cuStreamWaitValue64_v2", &api.cuStreamWaitValue64);
  } else if (v1) {
    has64 = bindSym(api.drvHandle, "cuStreamWriteValue64", &api.cuStreamWriteValue64) &&
            bindSym(api.drvHandle, "cuStreamWaitValue64", &api.cuStreamWaitValue64);
  }
  api.flagMode = GB_CUDA_FLAGS_HOSTFN;
  if (!v1 && !v2) return gbSuccess;
  int ok = 1;
  gbCuResult_t r;
  if (v1) {
    r = api.cuDeviceGetAttribute(&ok, GB_CU_ATTR_CAN_USE_STREAM_MEM_OPS_V1, dev);
    if (r != GB_CU_SUCCESS) return gbDeviceCudaDriverFail(r, "cuDeviceGetAttribute(CAN_USE_STREAM_MEM_OPS)");
    if (!ok) return gbSuccess;
  }
  api.flagMode = GB_CUDA_FLAGS_MEMOPS32;
  if (!has64) return gbSuccess;
  int ok64 = 0;
  r = api.cuDeviceGetAttribute(&ok64, v2 ? GB_CU_ATTR_CAN_USE_64_BIT_STREAM_MEM_OPS : GB_CU_ATTR_CAN_USE_64_BIT_STREAM_MEM_OPS_V1,
                               dev);
  if (r != GB_CU_SUCCESS) return gbDeviceCudaDriverFail(r, "cuDeviceGetAttribute(CAN_USE_64_BIT_STREAM_MEM_OPS)");
  if (ok64) api.flagMode = GB_CUDA_FLAGS_MEMOPS64;
  return gbSuccess;
}

/* GPUBRIDGE_STREAM_FLAGS may ask for a weaker mode than the GPU offers, so
 * the fallbacks can be tested on GPUs that have every mode. */
static void capFlagMode(void) {
  int64_t want = gbParamInt(GB_PARAM_STREAM_FLAGS); /* 0 auto, 1 64-bit, 2 32-bit, 3 host functions */
  if (want == 3) api.flagMode = GB_CUDA_FLAGS_HOSTFN;
  if (want == 2 && api.flagMode == GB_CUDA_FLAGS_MEMOPS64) api.flagMode = GB_CUDA_FLAGS_MEMOPS32;
}

/* The launcher's local rank, or -1. */
static int localRank(const char** from) {
  static const char* const names[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    const char* v = getenv(names[i]);
    if (v == NULL || v[0] == '\0') continue;
    char* end = NULL;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno == 0 && end != v && *end == '\0' && n >= 0 && n < 1 << 20) {
      *from = names[i];
      return (int)n;
    }
  }
  return -1;
}

static gbResult_t chooseDevice(void) {
  int64_t want = gbParamInt(GB_PARAM_DEVICE);
  if (gbParamIsSet(GB_PARAM_DEVICE) && want >= 0) {
    if (want >= api.deviceCount) {
      const char* vis = getenv("CUDA_VISIBLE_DEVICES");
      return gbErrorSet(gbInvalidArgument,
                        "GPUBRIDGE_DEVICE=%lld, but this process sees %d GPU%s (CUDA_VISIBLE_DEVICES=%s); "
                        "use an index from 0 to %d, or unset it to use the local rank",
                        (long long)want, api.deviceCount, api.deviceCount == 1 ? "" : "s", vis ? vis : "unset",
                        api.deviceCount - 1);
    }
    api.device = (int)want;
    GB_INFO(GB_LOG_DEVICE, "GPU %d of %d from GPUBRIDGE_DEVICE", api.device, api.deviceCount);
    return gbSuccess;
  }
  const char* from = NULL;
  int lr = localRank(&from);
  if (lr >= api.deviceCount && api.deviceCount > 1) {
    const char* vis = getenv("CUDA_VISIBLE_DEVICES");
    return gbErrorSet(gbInvalidArgument,
                      "%s=%d names GPU %d, but this process sees %d GPUs (CUDA_VISIBLE_DEVICES=%s): start at most "
                      "%d ranks on this node, or give each rank its own GPU (CUDA_VISIBLE_DEVICES per rank; Slurm: "
                      "--gpus-per-task=1) or set GPUBRIDGE_DEVICE",
                      from, lr, lr, api.deviceCount, vis ? vis : "unset", api.deviceCount);
  }
  /* One visible GPU (CUDA_VISIBLE_DEVICES per rank, Slurm's --gpus-per-task)
   * is this rank's whatever its local rank. */
  api.device = lr >= 0 && api.deviceCount > 1 ? lr : 0;
  if (lr >= 0)
    GB_INFO(GB_LOG_DEVICE, "GPU %d of %d from %s=%d", api.device, api.deviceCount, from, lr);
  else
    GB_INFO(GB_LOG_DEVICE, "GPU 0 of %d (no GPUBRIDGE_DEVICE and no local rank variable)", api.deviceCount);
  return gbSuccess;
}

/* Loads the runtime. *found = 0 with why when none is here. */
static gbResult_t loadRuntime(int* found, char* why, size_t whyLen) {
  char tried[512];
  const char* named = gbParamIsSet(GB_PARAM_CUDART_LIBRARY) ? gbParamString(GB_PARAM_CUDART_LIBRARY) : "";
  if (named[0] != '\0') {
    api.rtHandle = openFirst(&named, 1, api.rtName, sizeof(api.rtName), tried, sizeof(tried));
    if (api.rtHandle == NULL)
      return gbErrorSet(gbUnhandledCudaError,
                        "GPUBRIDGE_CUDART_LIBRARY=%s did not load: %s; give the path of libcudart.so.N, "
                        "or unset it to search the default names",
                        named, tried);
    return gbSuccess;
  }
  static const char* const names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
  api.rtHandle = openFirst(names, 3, api.rtName, sizeof(api.rtName), tried, sizeof(tried));
  if (api.rtHandle == NULL) {
    *found = 0;
    snprintf(why, whyLen, "no CUDA runtime: tried %s; set GPUBRIDGE_CUDART_LIBRARY to its path", tried);
  }
  return gbSuccess;
}

static gbResult_t loadDriver(void) {
  char tried[512];
  const char* named = gbParamIsSet(GB_PARAM_CUDA_LIBRARY) ? gbParamString(GB_PARAM_CUDA_LIBRARY) : "";
  const char* dflt = "libcuda.so.1";
  const char* name = named[0] != '\0' ? named : dflt;
  api.drvHandle = openFirst(&name, 1, api.drvName, sizeof(api.drvName), tried, sizeof(tried));
  if (api.drvHandle == NULL)
    return gbErrorSet(gbUnhandledCudaError,
                      "the CUDA runtime %s sees %d GPU%s, but the driver library did not load: tried %s; "
                      "check the NVIDIA driver installation%s",
                      api.rtName, api.deviceCount, api.deviceCount == 1 ? "" : "s", tried,
                      named[0] != '\0' ? " or GPUBRIDGE_CUDA_LIBRARY" : " or set GPUBRIDGE_CUDA_LIBRARY");
  return gbSuccess;
}

static void unload(void) {
  if (api.drvHandle) dlclose(api.drvHandle);
  if (api.rtHandle) dlclose(api.rtHandle);
  memset(&api, 0, sizeof(api));
}

static const char* flagModeName(gbCudaFlagMode_t m) {
  return m == GB_CUDA_FLAGS_MEMOPS64 ? "64-bit stream memory ops"
         : m == GB_CUDA_FLAGS_MEMOPS32 ? "32-bit stream memory ops"
                                       : "host functions (no stream memory ops)";
}

gbResult_t gbDeviceCudaOpen(gbDeviceOps* ops, int* found, char* why, size_t whyLen) {
  if (ops == NULL || found == NULL || why == NULL || whyLen == 0)
    return gbErrorSet(gbInternalError, "gbDeviceCudaOpen: a NULL argument");
  *found = 1;
  why[0] = '\0';
  if (apiReady) return gbErrorSet(gbInternalError, "gbDeviceCudaOpen called twice");
  gbResult_t res = loadRuntime(found, why, whyLen);
  if (res != gbSuccess || !*found) goto fail;
  GB_CHECK_GOTO(bindRuntime(), res, fail);

  gbCudaError_t e = api.cudaGetDeviceCount(&api.deviceCount);
  if (e != GB_CUDA_SUCCESS || api.deviceCount <= 0) {
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
  GB_CHECK_GOTO(chooseDevice(), res, fail);
  GB_CHECK_GOTO(loadDriver(), res, fail);
  GB_CHECK_GOTO(bindDriver(), res, fail);
  apiReady = 1; /* error helpers and MakeCurrent need the table from here on */
  e = api.cudaSetDevice(api.device);
  if (e != GB_CUDA_SUCCESS) {
    res = gbDeviceCudaFail(e, "cudaSetDevice(%d) (is the GPU in exclusive mode and taken, or out of memory?)",
                           api.device);
    goto fail;
  }
  gbCuResult_t r = api.cuInit(0);
  if (r != GB_CU_SUCCESS) {
    res = gbDeviceCudaDriverFail(r, "cuInit");
    goto fail;
  }
  gbCuDevice_t cuDev = 0;
  r = api.cuDeviceGet(&cuDev, api.device);
  if (r != GB_CU_SUCCESS) {
    res = gbDeviceCudaDriverFail(r, "cuDeviceGet(%d)", api.device);
    goto fail;
  }
  GB_CHECK_GOTO(chooseFlagMode(cuDev), res, fail);
  capFlagMode();
  (void)api.cudaRuntimeGetVersion(&api.runtimeVersion);
  (void)api.cudaDriverGetVersion(&api.driverVersion);
  api.flagWaitSec = (double)gbParamInt(GB_PARAM_TIMEOUT) + 5.0;
  char gpuName[128] = "?";
  if (api.cuDeviceGetName(gpuName, (int)sizeof(gpuName), cuDev) != GB_CU_SUCCESS) snprintf(gpuName, sizeof(gpuName), "?");
  GB_INFO(GB_LOG_DEVICE | GB_LOG_INIT, "cuda: GPU %d of %d (%s), runtime %s version %d, driver version %d, flags by %s",
          api.device, api.deviceCount, gpuName, api.rtName, api.runtimeVersion, api.driverVersion,
          flagModeName(api.flagMode));
  api.cuDev = cuDev;
  if (!bindSym(api.drvHandle, "cuDeviceGetUuid_v2", &api.cuDeviceGetUuid))
    (void)bindSym(api.drvHandle, "cuDeviceGetUuid", &api.cuDeviceGetUuid);
  gbDeviceCudaFillOps(ops);
  return gbSuccess;
fail:
  apiReady = 0;
  unload();
  return res;
}

void gbDeviceCudaIdentify(char* uuid, size_t uuidLen, char* pci, size_t pciLen, int* index) {
  uuid[0] = pci[0] = '\0';
  *index = api.device;
  unsigned char b[16];
  if (api.cuDeviceGetUuid && api.cuDeviceGetUuid(b, api.cuDev) == GB_CU_SUCCESS)
    snprintf(uuid, uuidLen, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  if (api.cudaDeviceGetPCIBusId(pci, (int)pciLen, api.device) != GB_CUDA_SUCCESS) pci[0] = '\0';
}

gbResult_t gbDeviceCudaMakeCurrent(void) {
  if (!apiReady)
    return gbErrorSet(gbInternalError, "the CUDA device is not open; this process did not choose a CUDA GPU");
  gbCudaError_t e = api.cudaSetDevice(api.device);
  if (e != GB_CUDA_SUCCESS) return gbDeviceCudaFail(e, "cudaSetDevice(%d)", api.device);
  return gbSuccess;
}
