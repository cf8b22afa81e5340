/* What this rank runs on, for the header and the JSON metadata: pid, host,
 * device, vendor library version. On a real GPU the device is asked of the
 * runtime gpubridge already loaded (RTLD_NOLOAD: never a second copy), so the
 * tool needs no CUDA or HIP header; when that fails it says "?". */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "perf.h"

const char* const perfHipNames[] = {"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so", NULL};

void* perfLoadedLibrary(const char* envVar, const char* const* names) {
  const char* given = getenv(envVar);
  if (given && *given) {
    void* h = dlopen(given, RTLD_LAZY | RTLD_NOLOAD);
    if (h) return h;
  }
  for (; *names; names++) {
    void* h = dlopen(*names, RTLD_LAZY | RTLD_NOLOAD);
    if (h) return h;
  }
  return NULL;
}

/* CUDA driver API: cuCtxGetDevice, cuDeviceGetName, cuDeviceGetPCIBusId. */
static int describeCuda(char* buf, size_t len) {
  static const char* const names[] = {"libcuda.so.1", "libcuda.so", NULL};
  void* h = perfLoadedLibrary("GPUBRIDGE_CUDA_LIBRARY", names);
  if (!h) return -1;
  int (*getDevice)(int*) = (int (*)(int*))dlsym(h, "cuCtxGetDevice");
  int (*getName)(char*, int, int) = (int (*)(char*, int, int))dlsym(h, "cuDeviceGetName");
  int (*getBus)(char*, int, int) = (int (*)(char*, int, int))dlsym(h, "cuDeviceGetPCIBusId");
  int dev = -1, rc = -1;
  char name[48] = "?", bus[24] = "?";
  if (getDevice && getDevice(&dev) == 0) {
    if (getName) getName(name, (int)sizeof(name), dev);
    if (getBus) getBus(bus, (int)sizeof(bus), dev);
    snprintf(buf, len, "cuda:%d %s (%s)", dev, name, bus);
    rc = 0;
  }
  dlclose(h);
  return rc;
}

/* HIP runtime: hipGetDevice, hipDeviceGetName, hipDeviceGetPCIBusId. */
static int describeHip(char* buf, size_t len) {
  void* h = perfLoadedLibrary("GPUBRIDGE_HIP_LIBRARY", perfHipNames);
  if (!h) return -1;
  int (*getDevice)(int*) = (int (*)(int*))dlsym(h, "hipGetDevice");
  int (*getName)(char*, int, int) = (int (*)(char*, int, int))dlsym(h, "hipDeviceGetName");
  int (*getBus)(char*, int, int) = (int (*)(char*, int, int))dlsym(h, "hipDeviceGetPCIBusId");
  int dev = -1, rc = -1;
  char name[48] = "?", bus[24] = "?";
  if (getDevice && getDevice(&dev) == 0) {
    if (getName) getName(name, (int)sizeof(name), dev);
    if (getBus) getBus(bus, (int)sizeof(bus), dev);
    snprintf(buf, len, "hip:%d %s (%s)", dev, name, bus);
    rc = 0;
  }
  dlclose(h);
  return rc;
}

static void describeDevice(const gbTopology_t* t, char* buf, size_t len) {
  const char* vendor = t->islandVendor[t->island];
  if (t->runKind == gbRunSimulated) {
    snprintf(buf, len, "simulated %s", vendor);
    return;
  }
  if (t->runKind == gbRunCpu) {
    snprintf(buf, len, "cpu");
    return;
  }
  const char* lib = perfVendorLibraryOf(vendor);
  int rc = -1;
  if (lib && strcmp(lib, "nccl") == 0) rc = describeCuda(buf, len);
  else if (lib) rc = describeHip(buf, len);
  if (rc != 0) snprintf(buf, len, "%s ?", vendor);
}

void perfDescribeSelf(const perfCtx_t* ctx, perfRankInfo_t* mine) {
  const gbTopology_t* t = &ctx->topo;
  mine->pid = (int32_t)getpid();
  char host[sizeof(mine->host)];
  if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "?");
  host[sizeof(host) - 1] = '\0';
  /* One machine pretending to be several hosts says so. */
  const char* sim = getenv("GPUBRIDGE_SIM_HOST");
  if (sim && *sim) snprintf(mine->host, sizeof(mine->host), "%.28s(as %.24s)", host, sim);
  else snprintf(mine->host, sizeof(mine->host), "%s", host);
  describeDevice(t, mine->device, sizeof(mine->device));
  mine->library[0] = '\0';
  if (t->runKind == gbRunReal)
    perfVendorVersionText(perfVendorLibraryOf(t->islandVendor[t->island]), mine->library, sizeof(mine->library));
}
