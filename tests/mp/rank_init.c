/* One rank of the start-up validation tests (tests/mp/test_validation.py).
 *
 * Usage: rank_init [--retries K] [--bad-config-for-rank R] [--env-for-rank R NAME=VALUE]...
 * Applies each NAME=VALUE (setenv) when this process's RANK, as the launcher
 * gave it, is R (RANK itself may be overridden), then initialises from the
 * environment. Prints "init-error: <gbGetLastError text>" on one line and
 * exits 1 when init fails; prints "init-ok" and exits 0 when it succeeds.
 * With --retries K: K rounds of init with the overrides (expected to fail),
 * then, at once, init with the environment as it was (printing init-ok).
 * With --bad-config-for-rank R: rank R passes a gbConfig_t whose
 * timeoutSeconds is 0 (out of range). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpubridge/gpubridge.h"

#define MAX_OVERRIDES 32

static int launcherRank(void) {
  const char* names[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"};
  for (int i = 0; i < 3; i++)
    if (getenv(names[i])) return atoi(getenv(names[i]));
  return -1;
}

typedef struct {
  int rank;
  char* assign;
} override_t;

/* One init (with config, or NULL): prints init-error and init-result on one
 * line each when it fails, init-ok when it succeeds; returns 0 when the
 * outcome is the expected one. */
static int initOnce(int expectOk, gbConfig_t* config) {
  gbComm_t comm = NULL;
  gbResult_t res = gbCommInitFromEnv(&comm, config);
  if (res != gbSuccess) {
    char text[8192]; /* one line, whatever the text holds */
    snprintf(text, sizeof(text), "%s", gbGetLastError(NULL));
    for (char* p = text; *p; p++)
      if (*p == '\n' || *p == '\r') *p = ' ';
    printf("init-error: %s\n", text);
    printf("init-result: %d\n", (int)res);
    return expectOk ? 1 : 0;
  }
  int rank = -1;
  (void)gbCommUserRank(comm, &rank);
  res = gbCommDestroy(comm);
  printf("init-ok rank %d destroy %d\n", rank, (int)res);
  return res == gbSuccess && expectOk ? 0 : 1;
}

/* Rounds of a failing init (overrides applied) and an immediate retry
 * without them. */
static int retryRounds(int me, override_t* ov, int nov, int rounds) {
  char* saved[MAX_OVERRIDES];
  int bad = 0;
  for (int k = 0; k < nov; k++) {
    char* eq = strchr(ov[k].assign, '=');
    *eq = '\0';
    saved[k] = getenv(ov[k].assign) ? strdup(getenv(ov[k].assign)) : NULL;
    *eq = '=';
  }
  for (int round = 0; round < rounds; round++) {
    for (int k = 0; k < nov; k++) {
      if (ov[k].rank != me) continue;
      char* eq = strchr(ov[k].assign, '=');
      *eq = '\0';
      setenv(ov[k].assign, eq + 1, 1);
      *eq = '=';
    }
    bad |= initOnce(0, NULL);
    for (int k = 0; k < nov; k++) {
      if (ov[k].rank != me) continue;
      char* eq = strchr(ov[k].assign, '=');
      *eq = '\0';
      if (saved[k]) setenv(ov[k].assign, saved[k], 1);
      else unsetenv(ov[k].assign);
      *eq = '=';
    }
    bad |= initOnce(1, NULL);
  }
  for (int k = 0; k < nov; k++) free(saved[k]);
  return bad;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int me = launcherRank();
  override_t ov[MAX_OVERRIDES];
  int nov = 0, retries = 0, badConfigRank = -1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--retries") == 0 && i + 1 < argc) {
      retries = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--bad-config-for-rank") == 0 && i + 1 < argc) {
      badConfigRank = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--env-for-rank") == 0 && i + 2 < argc && strchr(argv[i + 2], '=') &&
        nov < MAX_OVERRIDES) {
      ov[nov].rank = atoi(argv[i + 1]);
      ov[nov].assign = argv[i + 2];
      nov++;
      i += 2;
    } else {
      printf("rank_init: bad argument '%s' (usage: --env-for-rank R NAME=VALUE ...)\n", argv[i]);
      return 2;
    }
  }
  if (retries > 0) return retryRounds(me, ov, nov, retries);
  /* Decide on the launcher's rank first, then apply: an override of RANK
   * must not change which later overrides apply. */
  for (int k = 0; k < nov; k++) {
    if (ov[k].rank != me) continue;
    char* eq = strchr(ov[k].assign, '=');
    *eq = '\0';
    if (setenv(ov[k].assign, eq + 1, 1) != 0) {
      printf("rank_init: setenv %s failed\n", ov[k].assign);
      return 2;
    }
    *eq = '=';
  }

  gbConfig_t config = GB_CONFIG_INITIALIZER;
  config.timeoutSeconds = 0;
  return initOnce(1, me == badConfigRank ? &config : NULL);
}
