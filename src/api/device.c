/* Exported device helpers: this process's device, vendor-neutral. */
#include "api/api.h"
#include "base/result.h"
#include "device/device.h"

static gbResult_t dev(const gbDeviceOps** out) { return gbDeviceGet(out); }

gbResult_t gbMemAlloc(void** ptr, size_t size) {
  const gbDeviceOps* d;
  if (!ptr) return gbErrorSet(gbInvalidArgument, "gbMemAlloc: ptr is NULL");
  GB_CHECK(dev(&d));
  return d->memAlloc(ptr, size);
}

gbResult_t gbMemFree(void* ptr) {
  const gbDeviceOps* d;
  GB_CHECK(dev(&d));
  return ptr ? d->memFree(ptr) : gbSuccess;
}

gbResult_t gbMemcpyToDevice(void* dst, const void* src, size_t size) {
  const gbDeviceOps* d;
  if (size && (!dst || !src)) return gbErrorSet(gbInvalidArgument, "gbMemcpyToDevice: NULL buffer");
  GB_CHECK(dev(&d));
  return d->memcpyToDevice(dst, src, size);
}

gbResult_t gbMemcpyToHost(void* dst, const void* src, size_t size) {
  const gbDeviceOps* d;
  if (size && (!dst || !src)) return gbErrorSet(gbInvalidArgument, "gbMemcpyToHost: NULL buffer");
  GB_CHECK(dev(&d));
  return d->memcpyToHost(dst, src, size);
}

gbResult_t gbStreamCreate(void** stream) {
  const gbDeviceOps* d;
  if (!stream) return gbErrorSet(gbInvalidArgument, "gbStreamCreate: stream is NULL");
  GB_CHECK(dev(&d));
  return d->streamCreate(stream);
}

gbResult_t gbStreamSynchronize(void* stream) {
  const gbDeviceOps* d;
  GB_CHECK(dev(&d));
  return d->streamSynchronize(stream);
}

gbResult_t gbStreamDestroy(void* stream) {
  const gbDeviceOps* d;
  GB_CHECK(dev(&d));
  return stream ? d->streamDestroy(stream) : gbSuccess;
}
