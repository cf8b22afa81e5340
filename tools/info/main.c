/* gpubridge-info: version, build, this process's device, and the table of
 * GPUBRIDGE_* parameters (docs/ENV.md is generated from `-c --markdown`);
 * `--trace DIR` analyzes a job's flight-recorder dumps (trace.h);
 * `--preflight` checks a node before a job (preflight.h).
 * Uses the public API only, as any program could. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpubridge/gpubridge.h"
#include "preflight.h"
#include "trace.h"
#include "version.h"

/* clang's __VERSION__ names itself; gcc's is the bare number. */
#if defined(__clang__)
#define COMPILER __VERSION__
#elif defined(__GNUC__)
#define COMPILER "gcc " __VERSION__
#else
#define COMPILER "unknown compiler"
#endif

static void usage(FILE* f) {
  fprintf(f,
          "usage: gpubridge-info [-c [--markdown]] [--version] [--trace DIR] [-h]\n"
          "       gpubridge-info --preflight [--peers HOST,HOST,... [--port P] [--wait SECONDS]]\n"
          "  (no option)    version, compiler, and the device this process would use\n"
          "  --version      the library's version, MAJOR.MINOR.PATCH, alone on a line\n"
          "  -c, --config   the GPUBRIDGE_* parameters: type, default, current value, description\n"
          "  --markdown     with -c: a Markdown table (as in docs/ENV.md)\n"
          "  --trace DIR    read the flight-recorder dumps a job wrote to DIR (GPUBRIDGE_TRACE_DIR) and\n"
          "                 name the rank at fault; the last line is 'verdict: ...' (docs/TRACE.md).\n"
          "                 Exit 0: analyzed (fault or none), 2: no dump in DIR, 1: unreadable\n"
          "  --preflight    check this node before a job: library, device, settings, the interface\n"
          "                 communicators would use, locked-memory and open-file limits, the clock;\n"
          "                 the last line is 'preflight: PASS ...' or 'preflight: FAIL ...: why'.\n"
          "                 Exit 0: PASS, 1: FAIL\n"
          "  --peers LIST   with --preflight: every node of the job, by its name or address on the\n"
          "                 interface gpubridge uses (this node's own entry is skipped); run the same\n"
          "                 command on each: each listens on its interface and checks that it reaches\n"
          "                 every peer and every peer reaches it\n"
          "  --port P       with --peers: the TCP port every node listens on (default 29551)\n"
          "  --wait SECONDS with --peers: how long to wait for the others (default 30)\n"
          "  -h, --help     this text\n");
}

static const char* runKindName(int kind) {
  switch (kind) {
    case gbRunReal: return "real";
    case gbRunSimulated: return "simulated";
    case gbRunCpu: return "cpu";
    default: return "unknown";
  }
}

/* The invalid values, one line each, as communicator init would report them. */
static int printParamErrors(void) {
  const char* errors = NULL;
  if (gbGetParamErrors(&errors) != gbSuccess) {
    printf("settings  unavailable: %s\n", gbGetLastError(NULL));
    return 1;
  }
  if (!errors[0]) {
    printf("settings  ok (gpubridge-info -c lists them)\n");
    return 0;
  }
  printf("settings  INVALID (communicator init will fail):\n");
  for (const char* line = errors; *line;) {
    size_t n = strcspn(line, "\n");
    printf("  %.*s\n", (int)n, line);
    line += n + (line[n] == '\n');
  }
  return 1;
}

/* The staging memory a rank would hold under the current settings
 * (gbGetMemoryEstimate), for jobs of 2, 4 and 8 ranks on a host. */
static void printMemory(int gpu) {
  printf("memory    per rank, current settings, %s, ranks on one host in two islands (MiB):\n",
         gpu ? "on this GPU" : "simulated");
  for (int n = 2; n <= 8; n *= 2) {
    gbCommMemory_t m;
    if (gbGetMemoryEstimate(n, gpu, &m) != gbSuccess) {
      printf("          unavailable: %s\n", gbGetLastError(NULL));
      return;
    }
    printf("          %d ranks: shared segments %llu, device scratch up to %llu, private slots %llu if a call takes "
           "them\n", n, (unsigned long long)(m.segmentBytes >> 20), (unsigned long long)(m.deviceBytes >> 20),
           (unsigned long long)(m.pinnedBytes >> 20));
  }
}

static int printSummary(void) {
  int status = 0, code = 0;
  printf("gpubridge %s (header)\n", GB_VERSION_STRING);
  if (gbGetVersion(&code) == gbSuccess)
    printf("library   %d.%d.%d (version code %d)\n", code / 10000, code / 100 % 100, code % 100, code);
  else
    printf("library   version unavailable: %s\n", gbGetLastError(NULL));
  if (code != GB_VERSION_CODE) status = 1;
  printf("compiler  %s, C %ld\n", COMPILER, (long)__STDC_VERSION__);

  gbDeviceInfo_t dev;
  if (gbGetDeviceInfo(&dev) == gbSuccess) {
    printf("device    %s, vendor %s, run kind %s\n", dev.backend, dev.vendor[0] ? dev.vendor : "-",
           runKindName(dev.runKind));
  } else {
    printf("device    unavailable: %s\n", gbGetLastError(NULL));
    status = 1;
  }
  if (printParamErrors() != 0) status = 1;
  printMemory(gbGetDeviceInfo(&dev) == gbSuccess && dev.runKind == gbRunReal);
  return status;
}

/* The table of parameters: text (current values), or Markdown (docs/ENV.md). */
static int printParams(int markdown) {
  int count = 0;
  if (gbGetParamCount(&count) != gbSuccess) {
    fprintf(stderr, "gpubridge-info: %s\n", gbGetLastError(NULL));
    return 1;
  }
  if (markdown) {
    /* `make env-doc` writes this output to docs/ENV.md as it is. */
    printf("# Environment variables\n\n"
           "Generated by `make env-doc` (`gpubridge-info -c --markdown > docs/ENV.md`) from the\n"
           "parameter table in src/base/param.c; edit the table, not this file. Values marked\n"
           "\"must agree\" have to be the same on every rank: communicator init fails with a\n"
           "message naming the ranks that differ. An invalid value also fails init, on every rank.\n\n"
           "| Variable | Type | Default | Must agree | Description |\n"
           "|---|---|---|---|---|\n");
  }
  for (int i = 0; i < count; i++) {
    gbParamInfo_t p;
    if (gbGetParamInfo(i, &p) != gbSuccess) {
      fprintf(stderr, "gpubridge-info: %s\n", gbGetLastError(NULL));
      return 1;
    }
    const char* def = p.defaultValue[0] ? p.defaultValue : "(empty)";
    if (markdown) {
      const char* tick = p.defaultValue[0] ? "`" : "";
      printf("| `%s` | %s | %s%s%s | %s | %s |\n", p.name, p.type, tick, def, tick, p.mustAgree ? "yes" : "no",
             p.doc);
      continue;
    }
    if (!p.isSet) printf("%-26s = (default)\n", p.name);
    else if (p.error) printf("%-26s = INVALID: %s\n", p.name, p.error);
    else printf("%-26s = %s\n", p.name, p.value[0] ? p.value : "(empty)");
    printf("    %s; default %s%s\n", p.type, def, p.mustAgree ? "; must agree on every rank" : "");
    printf("    %s\n", p.doc);
  }
  return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  int config = 0, markdown = 0, version = 0, preflight = 0, port = GB_PREFLIGHT_PORT, portGiven = 0;
  double waitS = GB_PREFLIGHT_WAIT_S;
  const char* traceDir = NULL;
  const char* peers = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--trace") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "gpubridge-info: --trace needs a directory (the job's GPUBRIDGE_TRACE_DIR)\n");
        usage(stderr);
        return 2;
      }
      traceDir = argv[++i];
    } else if (strcmp(argv[i], "--preflight") == 0) {
      preflight = 1;
    } else if (strcmp(argv[i], "--peers") == 0 || strcmp(argv[i], "--port") == 0 || strcmp(argv[i], "--wait") == 0) {
      const char* v = i + 1 < argc ? argv[i + 1] : NULL;
      char* end = NULL;
      if (strcmp(argv[i], "--peers") == 0 && v && *v) {
        peers = v;
      } else if (strcmp(argv[i], "--port") == 0 && v && (port = (int)strtol(v, &end, 10), *end == '\0') && port > 0 &&
                 port < 65536) {
        portGiven = 1;
      } else if (strcmp(argv[i], "--wait") == 0 && v && (waitS = strtod(v, &end), *end == '\0') && waitS > 0 &&
                 waitS <= 3600) {
      } else {
        fprintf(stderr, "gpubridge-info: %s needs %s\n", argv[i],
                strcmp(argv[i], "--peers") == 0 ? "a comma-separated list of nodes"
                : strcmp(argv[i], "--port") == 0 ? "a TCP port (1..65535)" : "seconds (0 < S <= 3600)");
        usage(stderr);
        return 2;
      }
      i++;
    } else if (strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "--config") == 0) {
      config = 1;
    } else if (strcmp(argv[i], "--version") == 0) {
      version = 1;
    } else if (strcmp(argv[i], "--markdown") == 0) {
      markdown = 1;
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "gpubridge-info: unknown option '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  if (markdown && !config) {
    fprintf(stderr, "gpubridge-info: --markdown goes with -c\n");
    usage(stderr);
    return 2;
  }
  if ((peers || portGiven || waitS != GB_PREFLIGHT_WAIT_S) && !preflight) {
    fprintf(stderr, "gpubridge-info: --peers, --port and --wait go with --preflight\n");
    usage(stderr);
    return 2;
  }
  if (preflight) {
    if (config || version || traceDir) {
      fprintf(stderr, "gpubridge-info: --preflight goes alone (without -c, --version or --trace)\n");
      usage(stderr);
      return 2;
    }
    return preflightMain(peers, port, waitS);
  }
  if (traceDir) {
    if (config || version) {
      fprintf(stderr, "gpubridge-info: --trace DIR goes alone (without -c or --version)\n");
      usage(stderr);
      return 2;
    }
    return traceMain(traceDir);
  }
  if (version) return gbToolPrintVersion("gpubridge-info");
  if (config) return printParams(markdown);
  return printSummary();
}
