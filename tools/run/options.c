/* gpubridge-run's command line. Options come first; the first word that is not
 * an option (or the word after "--") is the program, and the rest are its
 * arguments, untouched. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "run.h"

void gbRunUsagePrint(FILE* f) {
  fprintf(f,
    "usage: gpubridge-run -n N [--vendors nvidia:2,amd:2 | --vendors nvidia,amd,...]\n"
    "                     [--keep-going] [--timeout SECONDS] [--port P] [--no-tag]\n"
    "                     [--] PROGRAM ARGS...\n"
    "       gpubridge-run --version | -h\n"
    "Starts N local ranks of PROGRAM with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
    "GROUP_RANK, MASTER_ADDR, MASTER_PORT, GPUBRIDGE_JOB_SECRET and\n"
    "GPUBRIDGE_LAUNCHER=gpubridge-run set, and\n"
    "OMP_NUM_THREADS=1 when N > 1 and it is not set (as torchrun does; set it to override).\n"
    "  -n N               number of ranks (default: the total of --vendors); also spelled\n"
    "                     -np N, --np N (mpirun), --nproc-per-node N, --nproc_per_node N\n"
    "                     (torchrun), with N attached by '=' in the long forms\n"
    "  --vendors SPEC     GPUBRIDGE_VENDOR per rank: LABEL:COUNT blocks in rank order,\n"
    "                     or one LABEL per rank; labels are 1..%d chars of [a-z0-9_-]\n"
    "  --keep-going       when a rank fails, let the others finish\n"
    "  --timeout SECONDS  stop the job after SECONDS (exit 124)\n"
    "  --port P           MASTER_PORT (default: a free port on 127.0.0.1 below the\n"
    "                     ephemeral range)\n"
    "  --no-tag           do not prefix output lines with [rank]\n"
    "  --version          the library's version, MAJOR.MINOR.PATCH, alone on a line\n"
    "  -h, --help         this text\n",
    GB_RUN_LABEL_MAX);
}

static gbResult_t parseInt(const char* opt, const char* text, long lo, long hi, int* out) {
  char* end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (text[0] == '\0' || *end != '\0' || errno != 0 || v < lo || v > hi)
    return gbRunFail(gbInvalidArgument, "%s '%s': expected a whole number in %ld..%ld", opt, text, lo, hi);
  *out = (int)v;
  return gbSuccess;
}

static int labelValid(const char* s, size_t len) {
  if (len < 1 || len > GB_RUN_LABEL_MAX) return 0;
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return 0;
  }
  return 1;
}

/* SPEC is comma-separated LABEL[:COUNT] items (COUNT defaults to 1), so both
 * "nvidia:2,amd:2" (blocks) and "nvidia,amd,nvidia,amd" (per rank) work. */
static gbResult_t parseVendors(const char* spec, char (**out)[GB_RUN_LABEL_MAX + 1], int* nOut) {
  int total = 0, cap = 0;
  char (*labels)[GB_RUN_LABEL_MAX + 1] = NULL;
  const char* p = spec;
  for (;;) {
    const char* itemEnd = strchr(p, ',');
    if (!itemEnd) itemEnd = p + strlen(p);
    const char* colon = memchr(p, ':', (size_t)(itemEnd - p));
    const char* labelEnd = colon ? colon : itemEnd;
    size_t labelLen = (size_t)(labelEnd - p);
    if (!labelValid(p, labelLen)) {
      free(labels);
      return gbRunFail(gbInvalidArgument,
                       "--vendors '%s': bad label '%.*s' (want 1..%d chars of [a-z0-9_-], "
                       "as in nvidia:2,amd:2 or nvidia,amd)",
                       spec, (int)labelLen, p, GB_RUN_LABEL_MAX);
    }
    int count = 1;
    if (colon) {
      char num[16];
      size_t numLen = (size_t)(itemEnd - colon - 1);
      if (numLen == 0 || numLen >= sizeof(num)) {
        free(labels);
        return gbRunFail(gbInvalidArgument, "--vendors '%s': bad count after '%.*s:'", spec,
                         (int)labelLen, p);
      }
      memcpy(num, colon + 1, numLen);
      num[numLen] = '\0';
      if (parseInt("--vendors count", num, 1, GB_RUN_MAX_RANKS, &count) != gbSuccess) {
        free(labels);
        return gbInvalidArgument;
      }
    }
    if (total + count > GB_RUN_MAX_RANKS) {
      free(labels);
      return gbRunFail(gbInvalidArgument, "--vendors '%s': more than %d ranks", spec, GB_RUN_MAX_RANKS);
    }
    if (total + count > cap) {
      cap = (total + count) * 2;
      void* grown = realloc(labels, (size_t)cap * sizeof(*labels));
      if (!grown) {
        free(labels);
        return gbRunFail(gbSystemError, "out of memory parsing --vendors");
      }
      labels = grown;
    }
    for (int i = 0; i < count; i++) {
      memcpy(labels[total], p, labelLen);
      labels[total][labelLen] = '\0';
      total++;
    }
    if (*itemEnd == '\0') break;
    p = itemEnd + 1;
  }
  *out = labels;
  *nOut = total;
  return gbSuccess;
}

/* Matches "--name VALUE" and "--name=VALUE"; *value is NULL if VALUE is missing. */
static int optionWithValue(const char* name, int argc, char** argv, int* i, const char** value) {
  size_t n = strlen(name);
  if (strncmp(argv[*i], name, n) != 0) return 0;
  if (argv[*i][n] == '=') {
    *value = argv[*i] + n + 1;
    return 1;
  }
  if (argv[*i][n] != '\0') return 0;
  *value = (*i + 1 < argc) ? argv[++*i] : NULL;
  return 1;
}

/* The number of ranks under the spellings people bring from other launchers:
 * -n N and -nN (gpubridge-run), -np N and --np N (mpirun), --nproc-per-node N
 * and --nproc_per_node N (torchrun; all ranks are on this host), the long
 * ones also with "=N". Returns the spelling used, or NULL if argv[*i] is none
 * of them; *value is NULL if N is missing. */
static const char* rankCountOption(int argc, char** argv, int* i, const char** value) {
  static const char* const longNames[] = {"-np", "--np", "--nproc-per-node", "--nproc_per_node"};
  for (size_t k = 0; k < sizeof(longNames) / sizeof(longNames[0]); k++)
    if (optionWithValue(longNames[k], argc, argv, i, value)) return longNames[k];
  const char* a = argv[*i];
  if (strncmp(a, "-n", 2) != 0) return NULL;
  *value = a[2] ? a + 2 : (*i + 1 < argc ? argv[++*i] : NULL);
  return "-n";
}

static gbResult_t parseTimeout(const char* text, double* out) {
  char* end;
  errno = 0;
  double v = strtod(text, &end);
  if (text[0] == '\0' || *end != '\0' || errno != 0 || !isfinite(v) || v <= 0 || v > 1e9)
    return gbRunFail(gbInvalidArgument, "--timeout '%s': expected a number of seconds > 0", text);
  *out = v;
  return gbSuccess;
}

gbResult_t gbRunOptionsParse(int argc, char** argv, gbRunOptions_t* opts) {
  memset(opts, 0, sizeof(*opts));
  int nGiven = 0;
  const char* vendorSpec = NULL;
  int i = 1;
  for (; i < argc; i++) {
    const char* a = argv[i];
    const char* v = NULL;
    const char* name = NULL;
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (a[0] != '-' || a[1] == '\0') break; /* the program ("-" alone is a name too) */
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      opts->help = 1;
      return gbSuccess;
    } else if (strcmp(a, "--version") == 0) {
      opts->version = 1;
      return gbSuccess;
    } else if (strcmp(a, "--keep-going") == 0) {
      opts->keepGoing = 1;
    } else if (strcmp(a, "--no-tag") == 0) {
      opts->noTag = 1;
    } else if ((name = rankCountOption(argc, argv, &i, &v)) != NULL) {
      if (!v) return gbRunFail(gbInvalidArgument, "%s needs a number of ranks", name);
      GB_RUN_CHECK(parseInt(name, v, 1, GB_RUN_MAX_RANKS, &opts->nranks));
      nGiven = 1;
    } else if (optionWithValue("--vendors", argc, argv, &i, &v)) {
      if (!v) return gbRunFail(gbInvalidArgument, "--vendors needs a list such as nvidia:2,amd:2");
      vendorSpec = v;
    } else if (optionWithValue("--timeout", argc, argv, &i, &v)) {
      if (!v) return gbRunFail(gbInvalidArgument, "--timeout needs a number of seconds");
      GB_RUN_CHECK(parseTimeout(v, &opts->timeoutS));
    } else if (optionWithValue("--port", argc, argv, &i, &v)) {
      if (!v) return gbRunFail(gbInvalidArgument, "--port needs a port number");
      GB_RUN_CHECK(parseInt("--port", v, 1, 65535, &opts->port));
    } else {
      return gbRunFail(gbInvalidArgument, "unknown option '%s'", a);
    }
  }
  if (i >= argc) return gbRunFail(gbInvalidArgument, "no program to run");
  opts->argv = argv + i;

  if (vendorSpec) {
    int total = 0;
    GB_RUN_CHECK(parseVendors(vendorSpec, &opts->vendors, &total));
    if (nGiven && total != opts->nranks) {
      gbRunOptionsFree(opts);
      return gbRunFail(gbInvalidArgument, "-n %d disagrees with --vendors '%s', which names %d ranks",
                       opts->nranks, vendorSpec, total);
    }
    opts->nranks = total;
  } else if (!nGiven) {
    return gbRunFail(gbInvalidArgument, "-n N (or --vendors) is required");
  }
  return gbSuccess;
}

void gbRunOptionsFree(gbRunOptions_t* opts) {
  free(opts->vendors);
  opts->vendors = NULL;
}
