/* Loads the HIP runtime with dlopen, picks this process's GPU, decides how
 * flags are signalled, and translates HIP error codes. Nothing here needs a
 * HIP header or library at build time, so the same binary runs on machines
 * without ROCm (gbDeviceHipOpen then reports "not found"). */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/param.h"
#include "base/result.h"
#include "device/hip/api.h"
#include "device/hip/hip.h"

/* Filled once by gbDeviceHipOpen (under device.c's once-guard), read-only after. */
static gbHipApi_t api;
static int apiReady;

const gbHipApi_t* gbDeviceHipApi(void) { return apiReady ? &api : NULL; }

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
                    what, api.device, err, name ? name : "", text ? text : "no description",
                    api.emulated ? " [emulated AMD]" : "");
}

/* ---------------------------------------------------------------- loading */

/* dlsym into a function-pointer field (POSIX guarantees the representation). */
static int bindSym(const char* sym, void* field) {
  dlerror();
  void* p = dlsym(api.handle, sym);
  if (p == NULL) return 0;
  memcpy(field, &p, sizeof(p));
  return 1;
}

/* Opens the first of names that loads; tried lists them with the last dlerror. */
static void* openFirst(const char* const* names, int n, char* tried, size_t triedLen) {
  size_t used = 0;
  const char* lastError = "";
  tried[0] = '\0';
  for (int i = 0; i < n; i++) {
    void* h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h != NULL) {
      snprintf(api.name, sizeof(api.name), "%s", names[i]);
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

/* GPUBRIDGE_HIP_LIBRARY, or "" when unset. */
static const char* namedLibrary(void) {
  const char* v = getenv("GPUBRIDGE_HIP_LIBRARY");
  return v ? v : "";
}

/* Loads the runtime. *found = 0 with why when none is here. */
static gbResult_t loadRuntime(int* found, char* why, size_t whyLen) {
  char tried[512];
  const char* named = namedLibrary();
  if (named[0] != '\0') {
    api.handle = openFirst(&named, 1, tried, sizeof(tried));
    if (api.handle == NULL)
      return gbErrorSet(gbUnhandledCudaError,
                        "GPUBRIDGE_HIP_LIBRARY=%s did not load: %s; give the path of libamdhip64.so, "
                        "or unset it to search the default names",
                        named, tried);
    return gbSuccess;
  }
  static const char* const names[] = {"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so"};
  api.handle = openFirst(names, 3, tried, sizeof(tried));
  if (api.handle == NULL) {
    *found = 0;
    snprintf(why, whyLen, "no HIP runtime: tried %s; set GPUBRIDGE_HIP_LIBRARY to its path", tried);
  }
  return gbSuccess;
}

#define SYM(s) {#s, &api.s}
static gbResult_t bindRuntime(void) {
  struct {
    const char* name;
    void* field;
  } syms[] = {SYM(hipGetDeviceCount), SYM(hipSetDevice), SYM(hipMalloc), SYM(hipFree), SYM(hipMemcpy),
              SYM(hipMemcpyAsync), SYM(hipHostMalloc), SYM(hipHostFree), SYM(hipHostGetDevicePointer),
              SYM(hipStreamCreateWithFlags), SYM(hipStreamDestroy), SYM(hipStreamSynchronize),
              SYM(hipStreamQuery), SYM(hipDeviceSynchronize), SYM(hipGetLastError), SYM(hipGetErrorString)};
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++)
    if (!bindSym(syms[i].name, syms[i].field))
      return gbErrorSet(gbUnhandledCudaError,
                        "the HIP runtime %s has no symbol %s: it is too old or not a HIP runtime; "
                        "use ROCm 6 or newer (GPUBRIDGE_HIP_LIBRARY names another)",
                        api.name, syms[i].name);
  /* Optional ones: messages, versions, identity, and the flag paths flag.c chooses among. */
  struct {
    const char* name;
    void* field;
  } optional[] = {SYM(hipGetErrorName), SYM(hipRuntimeGetVersion), SYM(hipDriverGetVersion), SYM(hipDeviceGet),
                  SYM(hipDeviceGetUuid), SYM(hipDeviceGetPCIBusId), SYM(hipLaunchHostFunc),
                  SYM(hipStreamWriteValue32), SYM(hipStreamWriteValue64), SYM(hipStreamWaitValue32),
                  SYM(hipStreamWaitValue64)};
  for (size_t i = 0; i < sizeof(optional) / sizeof(optional[0]); i++) (void)bindSym(optional[i].name, optional[i].field);
  return gbSuccess;
}
#undef SYM

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
      const char* hip = getenv("HIP_VISIBLE_DEVICES");
      const char* rocr = getenv("ROCR_VISIBLE_DEVICES");
      return gbErrorSet(gbInvalidArgument,
                        "GPUBRIDGE_DEVICE=%lld, but this process sees %d GPU%s (HIP_VISIBLE_DEVICES=%s, "
                        "ROCR_VISIBLE_DEVICES=%s); use an index from 0 to %d, or unset it to use the local rank",
                        (long long)want, api.deviceCount, api.deviceCount == 1 ? "" : "s", hip ? hip : "unset",
                        rocr ? rocr : "unset", api.deviceCount - 1);
    }
    api.device = (int)want;
    GB_INFO(GB_LOG_DEVICE, "GPU %d of %d from GPUBRIDGE_DEVICE", api.device, api.deviceCount);
    return gbSuccess;
  }
  const char* from = NULL;
  int lr = localRank(&from);
  if (lr >= api.deviceCount && api.deviceCount > 1) {
    const char* hip = getenv("HIP_VISIBLE_DEVICES");
    return gbErrorSet(gbInvalidArgument,
                      "%s=%d names GPU %d, but this process sees %d GPUs (HIP_VISIBLE_DEVICES=%s): start at most "
                      "%d ranks on this node, or give each rank its own GPU (HIP_VISIBLE_DEVICES per rank; Slurm: "
                      "--gpus-per-task=1) or set GPUBRIDGE_DEVICE",
                      from, lr, lr, api.deviceCount, hip ? hip : "unset", api.deviceCount);
  }
  /* One visible GPU (HIP_VISIBLE_DEVICES per rank, Slurm's --gpus-per-task)
   * is this rank's whatever its local rank. */
  api.device = lr >= 0 && api.deviceCount > 1 ? lr : 0;
  if (lr >= 0)
    GB_INFO(GB_LOG_DEVICE, "GPU %d of %d from %s=%d", api.device, api.deviceCount, from, lr);
  else
    GB_INFO(GB_LOG_DEVICE, "GPU 0 of %d (no GPUBRIDGE_DEVICE and no local rank variable)", api.deviceCount);
  return gbSuccess;
}

static void unload(void) {
  if (api.handle) dlclose(api.handle);
  memset(&api, 0, sizeof(api));
}

static const char* flagModeName(gbHipFlagMode_t m) {
  return m == GB_HIP_FLAGS_MEMOPS64 ? "64-bit stream memory ops"
         : m == GB_HIP_FLAGS_MEMOPS32 ? "32-bit stream memory ops"
                                      : "host functions (no stream memory ops)";
}

/* The rig marks itself with a text symbol; real ROCm has none. */
static void detectEmulation(void) {
  dlerror();
  const char* marker = dlsym(api.handle, "gbEmulatedAmd");
  api.emulated = marker != NULL ? (marker[0] ? marker : "emulated AMD") : NULL;
}

gbResult_t gbDeviceHipOpen(gbDeviceOps* ops, int* found, char* why, size_t whyLen) {
  if (ops == NULL || found == NULL || why == NULL || whyLen == 0)
    return gbErrorSet(gbInternalError, "gbDeviceHipOpen: a NULL argument");
  *found = 1;
  why[0] = '\0';
  if (apiReady) return gbErrorSet(gbInternalError, "gbDeviceHipOpen called twice");
  gbResult_t res = loadRuntime(found, why, whyLen);
  if (res != gbSuccess || !*found) goto fail;
  GB_CHECK_GOTO(bindRuntime(), res, fail);
  detectEmulation();
  /* From here on every line of this rank says so (device.c sets it again). */
  if (api.emulated) gbLogSetMode(gbDeviceHipModeLabel());

  gbHipError_t e = api.hipGetDeviceCount(&api.deviceCount);
  if (e != GB_HIP_SUCCESS || api.deviceCount <= 0) {
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
  GB_CHECK_GOTO(chooseDevice(), res, fail);
  apiReady = 1; /* error helpers and MakeCurrent need the table from here on */
  e = api.hipSetDevice(api.device);
  if (e != GB_HIP_SUCCESS) {
    res = gbDeviceHipFail(e, "hipSetDevice(%d) (is the GPU taken in exclusive mode, or out of memory?)", api.device);
    goto fail;
  }
  api.flagWaitSec = (double)gbParamInt(GB_PARAM_TIMEOUT) + 5.0;
  GB_CHECK_GOTO(gbDeviceHipFlagModeChoose(&api), res, fail);
  if (api.hipRuntimeGetVersion) (void)api.hipRuntimeGetVersion(&api.runtimeVersion);
  if (api.hipDriverGetVersion) (void)api.hipDriverGetVersion(&api.driverVersion);
  if (api.emulated)
    GB_WARN("%s exports gbEmulatedAmd (%s): this rank is an emulated AMD GPU, for testing only", api.name,
            api.emulated);
  GB_INFO(GB_LOG_DEVICE | GB_LOG_INIT, "hip: GPU %d of %d, runtime %s version %d, driver version %d, flags by %s%s",
          api.device, api.deviceCount, api.name, api.runtimeVersion, api.driverVersion, flagModeName(api.flagMode),
          api.emulated ? " (emulated AMD)" : "");
  api.hipDev = api.device;
  if (api.hipDeviceGet && api.hipDeviceGet(&api.hipDev, api.device) != GB_HIP_SUCCESS) {
    (void)api.hipGetLastError();
    api.hipDev = api.device; /* hipDevice_t is the ordinal on ROCm */
  }
  gbDeviceHipFillOps(ops);
  if (api.emulated) ops->vendor = GB_DEVICE_HIP_EMULATED_VENDOR;
  return gbSuccess;
fail:
  apiReady = 0;
  unload();
  return res;
}

void gbDeviceHipIdentify(char* uuid, size_t uuidLen, char* pci, size_t pciLen, int* index) {
  uuid[0] = pci[0] = '\0';
  *index = api.device;
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
  if (api.hipDeviceGetPCIBusId == NULL || api.hipDeviceGetPCIBusId(pci, (int)pciLen, api.device) != GB_HIP_SUCCESS)
    pci[0] = '\0';
  (void)api.hipGetLastError();
}

gbResult_t gbDeviceHipMakeCurrent(void) {
  if (!apiReady)
    return gbErrorSet(gbInternalError, "the HIP device is not open; this process did not choose a HIP GPU");
  gbHipError_t e = api.hipSetDevice(api.device);
  if (e != GB_HIP_SUCCESS) return gbDeviceHipFail(e, "hipSetDevice(%d)", api.device);
  return gbSuccess;
}
