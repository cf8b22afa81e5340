/* A program written for NCCL, run over gpubridge's drop-in (README.md's
 * drop-in quick start, docs/DROP_IN.md; tests/install builds and runs it).
 * It includes <nccl.h> (gpubridge's, include/gpubridge/nccl/nccl.h, where no
 * NCCL is installed) and links libgpubridge-nccl.so:
 *
 *   cc -std=c11 nccl_allreduce.c $(pkg-config --cflags --libs gpubridge-nccl) -o nccl_allreduce
 *   gpubridge-run -n 4 --vendors nvidia:2,amd:2 -- ./nccl_allreduce ID_FILE
 *
 * Every rank all-reduces rank-dependent values and checks the sums. As NCCL
 * leaves it to the program to hand the unique id from rank 0 to the others
 * (MPI_Bcast, a store), here it goes through a file: ID_FILE.<MASTER_PORT>
 * (the launcher's port names this job, so a file an earlier failed run left
 * is not read), which rank 0 writes, the others wait for, and rank 0
 * removes once every rank has joined.
 * NCCL also leaves streams and copies to CUDA; so that the program runs
 * without CUDA (simulated ranks) as well as on GPUs, it takes them from
 * gpubridge (gbStreamCreate, gbMemcpyToDevice: CUDA streams and copies on a
 * GPU). Rank and size come from the launcher's RANK and WORLD_SIZE.
 * Prints "ok: rank R of N over NCCL's API" on success. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <gpubridge/gpubridge.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define COUNT 4099 /* odd */
#define ID_WAIT_S 60

static int fail(const char* what, ncclResult_t res) {
  fprintf(stderr, "nccl_allreduce: %s failed: %s: %s\n", what, ncclGetErrorString(res), ncclGetLastError(NULL));
  return 1;
}

static int envInt(const char* name) {
  const char* text = getenv(name);
  if (!text) {
    fprintf(stderr, "nccl_allreduce: %s is not set: start it with gpubridge-run or torchrun, which set RANK, WORLD_SIZE and MASTER_PORT\n", name);
    exit(1);
  }
  return atoi(text);
}

/* Rank 0 writes the id to a temporary name and renames it, so no rank reads half a file. */
static int shareId(const char* path, int rank, ncclUniqueId* id) {
  if (rank == 0) {
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE* f = fopen(tmp, "wb");
    if (!f || fwrite(id, sizeof(*id), 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0) {
      perror("nccl_allreduce: cannot write the unique id");
      return 1;
    }
    return 0;
  }
  time_t end = time(NULL) + ID_WAIT_S;
  for (;;) {
    FILE* f = fopen(path, "rb");
    if (f) {
      size_t got = fread(id, sizeof(*id), 1, f);
      fclose(f);
      if (got == 1) return 0;
    }
    if (time(NULL) > end) {
      fprintf(stderr, "nccl_allreduce: rank %d: no unique id in %s after %d s (did rank 0 start?)\n", rank, path,
              ID_WAIT_S);
      return 1;
    }
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL); /* poll every 10 ms */
  }
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: nccl_allreduce ID_FILE (a path every rank can read; rank 0 writes ID_FILE.<MASTER_PORT>)\n");
    return 2;
  }
  int rank = envInt("RANK"), nranks = envInt("WORLD_SIZE");
  char path[4096];
  snprintf(path, sizeof(path), "%s.%d", argv[1], envInt("MASTER_PORT"));
  ncclUniqueId id;
  ncclResult_t res;
  if (rank == 0 && (res = ncclGetUniqueId(&id)) != ncclSuccess) return fail("ncclGetUniqueId", res);
  if (shareId(path, rank, &id) != 0) return 1;
  ncclComm_t comm;
  if ((res = ncclCommInitRank(&comm, nranks, id, rank)) != ncclSuccess) return fail("ncclCommInitRank", res);
  if (rank == 0) remove(path); /* every rank has joined, so every rank has read it */

  static double host[COUNT];
  for (int i = 0; i < COUNT; i++) host[i] = (double)(rank + 1) * i;
  void* dev = NULL;
  void* stream = NULL;
  if ((res = ncclMemAlloc(&dev, sizeof(host))) != ncclSuccess) return fail("ncclMemAlloc", res);
  if (gbStreamCreate(&stream) != gbSuccess || gbMemcpyToDevice(dev, host, sizeof(host)) != gbSuccess) {
    fprintf(stderr, "nccl_allreduce: stream or copy failed: %s\n", gbGetLastError(NULL));
    return 1;
  }
  if ((res = ncclAllReduce(dev, dev, COUNT, ncclFloat64, ncclSum, comm, stream)) != ncclSuccess)
    return fail("ncclAllReduce", res);
  if (gbStreamSynchronize(stream) != gbSuccess || gbMemcpyToHost(host, dev, sizeof(host)) != gbSuccess) {
    fprintf(stderr, "nccl_allreduce: synchronize or copy failed: %s\n", gbGetLastError(NULL));
    return 1;
  }
  /* Sum over ranks r of (r + 1) * i = i * n(n+1)/2: exact in doubles at these sizes. */
  double factor = nranks * (nranks + 1) / 2.0;
  for (int i = 0; i < COUNT; i++) {
    if (host[i] != factor * i) {
      fprintf(stderr, "nccl_allreduce: rank %d element %d is %.17g, expected %.17g\n", rank, i, host[i], factor * i);
      return 1;
    }
  }
  gbStreamDestroy(stream);
  ncclMemFree(dev);
  if ((res = ncclCommDestroy(comm)) != ncclSuccess) return fail("ncclCommDestroy", res);
  printf("ok: rank %d of %d over NCCL's API\n", rank, nranks);
  return 0;
}
