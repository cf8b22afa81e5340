/* The Open MPI baseline: fp32 MPI_Allreduce (sum, MPI_IN_PLACE) timed like
 * gpubridge-perf: per size one checked call, -w warm-up calls, a barrier,
 * then -n calls and the mean time per call, averaged over ranks. Rank 0
 * prints one JSON object a size: size_bytes, time_us, algbw_gbps, busbw_gbps,
 * wrong. Build: mpicc -O2 -o mpi_allreduce mpi_allreduce.c
 * Run: mpirun -n 2 ./mpi_allreduce [-b 8] [-e 64M] [-f 2] [-n 20] [-w 5] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t parseSize(const char* s) {
  char* end;
  size_t v = strtoull(s, &end, 10);
  switch (*end) {
    case 'K': case 'k': return v << 10;
    case 'M': case 'm': return v << 20;
    case 'G': case 'g': return v << 30;
    default: return v;
  }
}

int main(int argc, char** argv) {
  size_t lo = 8, hi = (size_t)64 << 20, factor = 2;
  int iters = 20, warmup = 5;
  for (int k = 1; k + 1 < argc; k += 2) {
    if (strcmp(argv[k], "-b") == 0) lo = parseSize(argv[k + 1]);
    else if (strcmp(argv[k], "-e") == 0) hi = parseSize(argv[k + 1]);
    else if (strcmp(argv[k], "-f") == 0) factor = parseSize(argv[k + 1]);
    else if (strcmp(argv[k], "-n") == 0) iters = atoi(argv[k + 1]);
    else if (strcmp(argv[k], "-w") == 0) warmup = atoi(argv[k + 1]);
    else {
      fprintf(stderr, "mpi_allreduce: unknown flag %s\n", argv[k]);
      return 2;
    }
  }
  if (lo < 1 || factor < 2 || iters < 1 || warmup < 0) {
    fprintf(stderr, "mpi_allreduce: want -b >= 1, -f >= 2, -n >= 1, -w >= 0\n");
    return 2;
  }
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  float* x = malloc(hi < 4 ? 4 : hi);
  if (!x) MPI_Abort(MPI_COMM_WORLD, 1);
  double factorBus = 2.0 * (n - 1) / n;
  for (size_t size = lo; size <= hi; size *= factor) {
    int count = (int)(size / 4 ? size / 4 : 1);
    for (int i = 0; i < count; i++) x[i] = (float)(rank + 1);
    MPI_Allreduce(MPI_IN_PLACE, x, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double wrong = 0;
    for (int i = 0; i < count; i++) wrong += x[i] != (float)(n * (n + 1) / 2);
    for (int k = 0; k < warmup; k++) MPI_Allreduce(MPI_IN_PLACE, x, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int k = 0; k < iters; k++) MPI_Allreduce(MPI_IN_PLACE, x, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double mine[2] = {(MPI_Wtime() - t0) / iters, wrong}, sum[2];
    MPI_Reduce(mine, sum, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      double sec = sum[0] / n, algbw = (double)count * 4 / sec / 1e9;
      printf("{\"size_bytes\": %d, \"time_us\": %.3f, \"algbw_gbps\": %.6f, \"busbw_gbps\": %.6f, \"wrong\": %.0f}\n",
             count * 4, sec * 1e6, algbw, algbw * factorBus, sum[1]);
      fflush(stdout);
    }
  }
  free(x);
  MPI_Finalize();
  return 0;
}
