/* The command line, nccl-tests' flags. Parsed before gbCommInitFromEnv: every
 * rank gets the same argv, so a bad flag stops every rank alike with exit 2
 * instead of leaving the others waiting in init. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "perf.h"

static const char usageText[] =
    "usage: gpubridge-perf COLLECTIVE [flags]\n"
    "  COLLECTIVE: all_reduce, broadcast, reduce, all_gather, reduce_scatter, alltoall, sendrecv\n"
    "  -b, --minbytes N        smallest size in bytes, K/M/G suffixes (1024-based) (32M)\n"
    "  -e, --maxbytes N        largest size in bytes (32M)\n"
    "  -f, --stepfactor N      multiply the size by N each step (2)\n"
    "  -i, --stepbytes N       add N bytes each step instead; 0: use -f (0)\n"
    "  -n, --iters N           timed iterations per size (20)\n"
    "  -w, --warmup_iters N    untimed iterations first (1)\n"
    "  -c, --check N           check runs per size against values computed here, before\n"
    "                          timing; 0: none (1)\n"
    "  -N, --run_cycles N      run the whole sweep N times (1)\n"
    "  -o, --op OP             sum|prod|min|max|avg|all (sum)\n"
    "  -d, --datatype T        int8|uint8|int32|uint32|int64|uint64|half|float16|float|\n"
    "                          float32|double|float64|bfloat16|\n"
    "                          float8e4m3|f8e4m3|float8e5m2|f8e5m2|all (float)\n"
    "  -r, --root N            root of broadcast and reduce (0)\n"
    "  -z, --blocking 0|1      0: enqueue all iterations, then synchronize; 1: synchronize\n"
    "                          after each (0)\n"
    "  -a, --average 0|1|2|3   printed time: 0 rank 0's, 1 mean, 2 min, 3 max over ranks (1)\n"
    "  -E, --events 0|1        1: time with device events on real GPUs (every rank must have\n"
    "                          them, else the host clock); 0: the host clock (1)\n"
    "  -T, --timeout S         every wait's deadline in seconds (GPUBRIDGE_TIMEOUT)\n"
    "  -J, --output_file F     also write the results to F, one JSON object a line\n"
    "      --tune FILE         all_reduce: time every policy per size, write the fastest\n"
    "                          as a thresholds file (GPUBRIDGE_THRESHOLDS, policy tuned)\n"
    "      --baseline          real GPUs: also run each size through NCCL or RCCL alone\n"
    "      --phases            also print rank 0's mean time per phase of a call (check,\n"
    "                          island, wait, bridge, after), from the flight recorder\n"
    "      --progress 0|1      1: rank 0 says on stderr which size of how many runs and\n"
    "                          the time left (default: when its stderr is a terminal)\n"
    "      --version           the library's version, MAJOR.MINOR.PATCH, alone on a line\n"
    "  -h, --help              this text\n"
    "nccl-tests flags taken at the values that mean what gpubridge-perf does: -t 1, -g 1\n"
    "(one GPU per process), -m 1, -p 0|1, and 0 for -y -G -C -R -S -M -x -D -V (so -V is\n"
    "nccl-tests' device CTA count, not the version).\n"
    "Start one process per rank: gpubridge-run -n 4 --vendors nvidia:2,amd:2 -- \\\n"
    "  gpubridge-perf all_reduce -b 8 -e 64M -f 2\n"
    "Started with no launcher (no RANK/WORLD_SIZE, SLURM_PROCID, OMPI_COMM_WORLD_RANK,\n"
    "PMI_RANK, GPUBRIDGE_UNIQUE_ID), it runs as a job of one rank.\n";

/* One write, so a launcher that stops this rank midway cuts no line. */
static int fail(const char* fmt, const char* arg) {
  char why[512], line[640];
  snprintf(why, sizeof(why), fmt, arg);
  snprintf(line, sizeof(line), "gpubridge-perf: %s\nrun gpubridge-perf -h for the flags\n", why);
  fputs(line, stderr);
  return PERF_EXIT_USAGE;
}

/* Whether this process prints -h and --version: once per job, not once per
 * rank, when a launcher set RANK. */
static int firstRank(void) {
  const char* rank = getenv("RANK");
  return !rank || strcmp(rank, "0") == 0;
}

/* The flag getopt just rejected, for the message. */
static const char* flagName(char** argv) {
  static char buf[8];
  if (optopt == 0) return argv[optind - 1]; /* a long option */
  snprintf(buf, sizeof(buf), "-%c", optopt);
  return buf;
}

/* "32M" -> 33554432. Digits, then at most one of K/M/G (1024-based). */
static int parseSize(const char* s, size_t* out) {
  if (s[0] < '0' || s[0] > '9') return -1;
  errno = 0;
  char* end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0) return -1;
  unsigned shift = 0;
  switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
  }
  if (*end != '\0') return -1;
  if (v > (SIZE_MAX >> shift)) return -1;
  *out = (size_t)v << shift;
  return 0;
}

static int parseInt(const char* s, int lo, int hi, int* out) {
  if (s[0] == '\0') return -1;
  errno = 0;
  char* end;
  long v = strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

static const struct { const char* name; gbDataType_t dt; } typeNames[] = {
    {"int8", gbInt8},         {"uint8", gbUint8},     {"int32", gbInt32},
    {"uint32", gbUint32},     {"int64", gbInt64},     {"uint64", gbUint64},
    {"half", gbFloat16},      {"float16", gbFloat16}, {"float", gbFloat32},
    {"float32", gbFloat32},   {"double", gbFloat64},  {"float64", gbFloat64},
    {"bfloat16", gbBfloat16}, {"float8e4m3", gbFloat8e4m3}, {"f8e4m3", gbFloat8e4m3},
    {"fp8_e4m3", gbFloat8e4m3}, {"float8e5m2", gbFloat8e5m2}, {"f8e5m2", gbFloat8e5m2},
    {"fp8_e5m2", gbFloat8e5m2},
};

static int parseTypes(const char* s, perfOptions_t* opts) {
  if (strcmp(s, "all") == 0) {
    opts->nTypes = 0;
    for (int t = 0; t < gbNumTypes; t++) opts->types[opts->nTypes++] = (gbDataType_t)t;
    return 0;
  }
  for (size_t k = 0; k < sizeof(typeNames) / sizeof(typeNames[0]); k++) {
    if (strcmp(s, typeNames[k].name) == 0) {
      opts->nTypes = 1;
      opts->types[0] = typeNames[k].dt;
      return 0;
    }
  }
  return -1;
}

static int parseOps(const char* s, perfOptions_t* opts) {
  if (strcmp(s, "all") == 0) {
    opts->nOps = 0;
    for (int o = 0; o < gbNumOps; o++) opts->ops[opts->nOps++] = (gbRedOp_t)o;
    return 0;
  }
  for (int o = 0; o < gbNumOps; o++) {
    if (strcmp(s, perfOpName((gbRedOp_t)o)) == 0) {
      opts->nOps = 1;
      opts->ops[0] = (gbRedOp_t)o;
      return 0;
    }
  }
  return -1;
}

static void setDefaults(perfOptions_t* opts) {
  memset(opts, 0, sizeof(*opts));
  opts->minBytes = opts->maxBytes = (size_t)32 << 20;
  opts->stepFactor = 2;
  opts->stepBytes = 0;
  opts->iters = 20;
  opts->warmup = 1;
  opts->check = 1;
  opts->cycles = 1;
  opts->blocking = 0;
  opts->average = PERF_AVG_MEAN;
  opts->events = 1;
  opts->progress = -1;
  opts->root = 0;
  opts->nTypes = 1;
  opts->types[0] = gbFloat32;
  opts->nOps = 1;
  opts->ops[0] = gbSum;
}

/* Whether at least one requested (type, op) pair is defined. */
static int anyValidPair(const perfOptions_t* opts) {
  if (!perfCollReduces(opts->coll)) return 1;
  for (int t = 0; t < opts->nTypes; t++)
    for (int o = 0; o < opts->nOps; o++)
      if (perfOpValid(opts->ops[o], opts->types[t])) return 1;
  return 0;
}

/* "-o mulsum" is nccl-tests' too: say why it is missing. */
static int failOp(const char* a) {
  if (strcmp(a, "mulsum") == 0)
    return fail("-o mulsum: gpubridge-perf does not measure pre-multiplied sums (gbRedOpCreatePreMulSum); "
                "-o sum moves the same bytes%s", "");
  return fail("-o wants sum, prod, min, max, avg or all; got '%s'", a);
}

static int failType(const char* a) {
  return fail("-d wants int8, uint8, int32, uint32, int64, uint64, half, float16, float, float32, double, "
              "float64, bfloat16, float8e4m3 (f8e4m3), float8e5m2 (f8e5m2) or all; got '%s'", a);
}

/* The long options: gpubridge-perf's own, then the fixed ones of fixed.c. */
#define OWN_FLAGS ":b:e:f:i:n:w:c:N:o:d:r:z:a:E:T:J:h"
#define MAX_LONG 48

static void buildOptions(struct option* longOpts, char* shortOpts, size_t shortLen) {
  static const struct option own[] = {
      {"minbytes", required_argument, 0, 'b'},   {"maxbytes", required_argument, 0, 'e'},
      {"stepfactor", required_argument, 0, 'f'}, {"stepbytes", required_argument, 0, 'i'},
      {"iters", required_argument, 0, 'n'},      {"warmup_iters", required_argument, 0, 'w'},
      {"check", required_argument, 0, 'c'},      {"run_cycles", required_argument, 0, 'N'},
      {"op", required_argument, 0, 'o'},
      {"datatype", required_argument, 0, 'd'},   {"root", required_argument, 0, 'r'},
      {"blocking", required_argument, 0, 'z'},   {"average", required_argument, 0, 'a'},
      {"events", required_argument, 0, 'E'},
      {"timeout", required_argument, 0, 'T'},    {"output_file", required_argument, 0, 'J'},
      {"tune", required_argument, 0, 'U'},       {"baseline", no_argument, 0, 'B'},
      {"phases", no_argument, 0, 'P'},
      {"progress", required_argument, 0, 'Q'},
      {"help", no_argument, 0, 'h'},             {"version", no_argument, 0, 'v'}};
  int n = 0;
  for (size_t k = 0; k < sizeof(own) / sizeof(own[0]); k++) longOpts[n++] = own[k];
  size_t used = (size_t)snprintf(shortOpts, shortLen, "%s", OWN_FLAGS);
  for (int k = 0; k < perfFixedFlagCount && n < MAX_LONG - 2; k++) {
    longOpts[n++] = (struct option){perfFixedFlags[k].longName, required_argument, 0, perfFixedFlags[k].flag};
    if (used + 3 < shortLen) {
      shortOpts[used++] = (char)perfFixedFlags[k].flag;
      shortOpts[used++] = ':';
      shortOpts[used] = '\0';
    }
  }
  /* nccl-tests has spelled -M's long form both ways. */
  longOpts[n++] = (struct option){"memory", required_argument, 0, 'M'};
  longOpts[n] = (struct option){0, 0, 0, 0};
}

int perfOptionsParse(int argc, char** argv, perfOptions_t* opts) {
  struct option longOpts[MAX_LONG];
  char shortOpts[96];
  buildOptions(longOpts, shortOpts, sizeof(shortOpts));
  setDefaults(opts);
  opterr = 0; /* our own messages, with the flag's name */
  int c;
  while ((c = getopt_long(argc, argv, shortOpts, longOpts, NULL)) != -1) {
    const char* a = optarg;
    switch (c) {
      case 'b': if (parseSize(a, &opts->minBytes) != 0 || opts->minBytes == 0)
                  return fail("-b wants a size of at least 1 byte, like 8, 64K, 32M or 1G; got '%s'", a);
                break;
      case 'e': if (parseSize(a, &opts->maxBytes) != 0 || opts->maxBytes == 0)
                  return fail("-e wants a size of at least 1 byte, like 8, 64K, 32M or 1G; got '%s'", a);
                break;
      case 'f': if (parseSize(a, &opts->stepFactor) != 0 || opts->stepFactor < 2)
                  return fail("-f wants a whole step factor of at least 2; got '%s'", a);
                break;
      case 'i': if (parseSize(a, &opts->stepBytes) != 0)
                  return fail("-i wants a step in bytes (0: use -f); got '%s'", a);
                break;
      case 'n': if (parseInt(a, 1, INT_MAX, &opts->iters) != 0)
                  return fail("-n wants at least 1 iteration; got '%s'", a);
                break;
      case 'w': if (parseInt(a, 0, INT_MAX, &opts->warmup) != 0)
                  return fail("-w wants 0 or more warm-up iterations; got '%s'", a);
                break;
      case 'c': if (parseInt(a, 0, INT_MAX, &opts->check) != 0)
                  return fail("-c wants a number of check runs, 0 (none) or more; got '%s'", a);
                break;
      case 'N': if (strcmp(a, "0") == 0)
                  return fail("-N 0 (run until killed) is not supported; give a number of sweeps, like -N 100%s",
                              "");
                if (parseInt(a, 1, INT_MAX, &opts->cycles) != 0)
                  return fail("-N wants a number of sweeps, 1 or more; got '%s'", a);
                break;
      case 'o': if (parseOps(a, opts) != 0) return failOp(a);
                break;
      case 'd': if (parseTypes(a, opts) != 0) return failType(a);
                break;
      case 'r': if (parseInt(a, 0, INT_MAX, &opts->root) != 0)
                  return fail("-r wants a rank, 0 or more; got '%s'", a);
                break;
      case 'z': if (parseInt(a, 0, 1, &opts->blocking) != 0)
                  return fail("-z wants 0 or 1; got '%s'", a);
                break;
      case 'a': if (parseInt(a, 0, 3, &opts->average) != 0)
                  return fail("-a wants 0 (rank 0), 1 (mean), 2 (min) or 3 (max); got '%s'", a);
                break;
      case 'E': if (parseInt(a, 0, 1, &opts->events) != 0)
                  return fail("-E wants 0 (host clock) or 1 (device events); got '%s'", a);
                break;
      case 'T': if (parseInt(a, 1, INT_MAX, &opts->timeoutSeconds) != 0)
                  return fail("-T wants a timeout of at least 1 second; got '%s'", a);
                break;
      case 'J': if (a[0] == '\0') return fail("-J wants a file name%s", "");
                opts->jsonPath = a;
                break;
      case 'U': if (a[0] == '\0') return fail("--tune wants a file name%s", "");
                opts->tunePath = a;
                break;
      case 'B': opts->baseline = 1;
                break;
      case 'P': opts->phases = 1;
                break;
      case 'Q': if (parseInt(a, 0, 1, &opts->progress) != 0)
                  return fail("--progress wants 0 or 1; got '%s'", a);
                break;
      case 'h':
        if (firstRank()) fputs(usageText, stdout);
        return 1;
      case 'v': /* --version only: -V is nccl-tests' device CTA count (fixed.c) */
        opts->version = firstRank();
        return 1;
      case ':': return fail("%s needs a value", flagName(argv));
      case '?': return fail("unknown flag '%s'", flagName(argv));
      default: {
        const perfFixedFlag_t* f = perfFixedFlagFind(c);
        char why[400];
        if (!f) return fail("unknown flag '%s'", flagName(argv));
        if (perfFixedFlagCheck(f, a, why, sizeof(why)) != 0) return fail("%s", why);
        break;
      }
    }
  }
  if (optind >= argc)
    return fail("which collective? all_reduce, broadcast, reduce, all_gather, reduce_scatter, alltoall "
                "or sendrecv%s", "");
  if (optind + 1 < argc) return fail("one collective only; unexpected '%s'", argv[optind + 1]);
  if (perfCollFromName(argv[optind], &opts->coll) != 0)
    return fail("unknown collective '%s': all_reduce, broadcast, reduce, all_gather, reduce_scatter, "
                "alltoall or sendrecv", argv[optind]);
  if (opts->tunePath && opts->coll != PERF_ALL_REDUCE)
    return fail("--tune measures all_reduce only; got '%s'", argv[optind]);
  if (opts->tunePath && opts->baseline) return fail("--tune and --baseline are separate runs%s", "");
  if (opts->tunePath && opts->cycles > 1) return fail("--tune measures once; drop -N%s", "");
  if (opts->tunePath && opts->phases) return fail("--tune and --phases are separate runs%s", "");
  if (opts->minBytes > opts->maxBytes) return fail("-b is larger than -e%s", "");
  if (!anyValidPair(opts))
    return fail("avg needs a floating type (half, float, double, bfloat16, f8e4m3, f8e5m2)%s", "");
  return 0;
}

int perfOptionsNextSize(const perfOptions_t* opts, size_t unit, size_t* raw, size_t* bytes) {
  for (;;) {
    int first = *raw == 0;
    size_t next;
    if (first) {
      next = opts->minBytes;
    } else if (opts->stepBytes > 0) {
      next = *raw + opts->stepBytes;
      if (next < *raw) return 0; /* overflow */
    } else {
      if (*raw > SIZE_MAX / opts->stepFactor) return 0;
      next = *raw * opts->stepFactor;
    }
    if (next > opts->maxBytes) return 0;
    *raw = next;
    size_t units = next / unit;
    if (units == 0) units = 1;
    if (!first && units * unit == *bytes) continue; /* the same size once more */
    *bytes = units * unit;
    return 1;
  }
}

size_t perfOptionsMaxBytes(const perfOptions_t* opts, int nranks) {
  /* Rounded down to whole units, except that one unit (an element per part)
   * is always run. */
  size_t least = 8 * (size_t)perfCollParts(opts->coll, nranks);
  size_t bytes = opts->maxBytes < least ? least : opts->maxBytes;
  return (bytes + 63) & ~(size_t)63;
}
