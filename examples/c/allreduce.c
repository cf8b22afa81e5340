/* A complete gpubridge program, built outside the project against an
 * installed gpubridge (README.md, docs/INSTALL.md; tests/install builds and
 * runs it): every rank of a job all-reduces rank-dependent values and
 * checks the sums; it also checks that the header and the library it runs
 * with are the same version. Prints "ok: rank R of N, version V" on success. */
#include <gpubridge/gpubridge.h>
#include <stdio.h>
#include <stdlib.h>

#define COUNT 4099 /* odd */

static int fail(const char* what, gbResult_t res) {
  fprintf(stderr, "allreduce: %s failed: %s: %s\n", what, gbGetErrorString(res), gbGetLastError(NULL));
  return 1;
}

int main(void) {
  int code = 0, rank = -1, nranks = 0;
  gbResult_t res = gbGetVersion(&code);
  if (res != gbSuccess) return fail("gbGetVersion", res);
  if (code != GB_VERSION_CODE) {
    fprintf(stderr, "allreduce: library version code %d, header %d (%s)\n", code, GB_VERSION_CODE, GB_VERSION_STRING);
    return 1;
  }
  gbComm_t comm;
  if ((res = gbCommInitFromEnv(&comm, NULL)) != gbSuccess) return fail("gbCommInitFromEnv", res);
  if ((res = gbCommUserRank(comm, &rank)) != gbSuccess) return fail("gbCommUserRank", res);
  if ((res = gbCommCount(comm, &nranks)) != gbSuccess) return fail("gbCommCount", res);

  static double host[COUNT];
  for (int i = 0; i < COUNT; i++) host[i] = (double)(rank + 1) * i;
  void* dev = NULL;
  void* stream = NULL;
  if ((res = gbMemAlloc(&dev, sizeof(host))) != gbSuccess) return fail("gbMemAlloc", res);
  if ((res = gbStreamCreate(&stream)) != gbSuccess) return fail("gbStreamCreate", res);
  if ((res = gbMemcpyToDevice(dev, host, sizeof(host))) != gbSuccess) return fail("gbMemcpyToDevice", res);
  if ((res = gbAllReduce(dev, dev, COUNT, gbFloat64, gbSum, comm, stream)) != gbSuccess) return fail("gbAllReduce", res);
  if ((res = gbStreamSynchronize(stream)) != gbSuccess) return fail("gbStreamSynchronize", res);
  if ((res = gbMemcpyToHost(host, dev, sizeof(host))) != gbSuccess) return fail("gbMemcpyToHost", res);

  /* Sum over ranks r of (r + 1) * i = i * n(n+1)/2: exact in doubles at these sizes. */
  double factor = nranks * (nranks + 1) / 2.0;
  for (int i = 0; i < COUNT; i++) {
    if (host[i] != factor * i) {
      fprintf(stderr, "allreduce: rank %d element %d is %.17g, expected %.17g\n", rank, i, host[i], factor * i);
      return 1;
    }
  }
  gbStreamDestroy(stream);
  gbMemFree(dev);
  if ((res = gbCommDestroy(comm)) != gbSuccess) return fail("gbCommDestroy", res);
  printf("ok: rank %d of %d, version %s\n", rank, nranks, GB_VERSION_STRING);
  return 0;
}
