/* base/param: the vendor-list parser (GPUBRIDGE_VENDORS, gpubridge-run
 * --vendors) and how GPUBRIDGE_VENDORS gives a process its GPUBRIDGE_VENDOR
 * from its launcher rank; a list that does not fit the job is an error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/param.h"

#include "unit/check.h"

extern char** environ;

static void clearEnv(void) {
  static const char* launcherVars[] = {"RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "OMPI_COMM_WORLD_RANK",
                                       "OMPI_COMM_WORLD_SIZE"};
  for (size_t i = 0; i < sizeof(launcherVars) / sizeof(launcherVars[0]); i++) unsetenv(launcherVars[i]);
  for (int again = 1; again;) {
    again = 0;
    for (char** e = environ; e && *e; e++)
      if (strncmp(*e, "GPUBRIDGE_", 10) == 0) {
        char name[256];
        snprintf(name, sizeof(name), "%.*s", (int)strcspn(*e, "="), *e);
        unsetenv(name);
        again = 1;
        break;
      }
  }
  gbParamReset();
}

/* Every label of spec, "/"-joined, from gbParamVendorsLabel. */
static const char* labels(const char* spec, int n, char* buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (int r = 0; r < n; r++) {
    char label[GB_PARAM_VENDOR_LABEL_MAX + 1];
    int ok = gbParamVendorsLabel(spec, r, label);
    used += (size_t)snprintf(buf + used, len - used, "%s%s", r ? "/" : "", ok == 0 ? label : "!");
  }
  return buf;
}

static void testParse(void) {
  char err[256], buf[512];
  CHECK(gbParamVendorsParse("nvidia:2,amd:2", err, sizeof(err)) == 4, "blocks: %s", err);
  CHECK(strcmp(labels("nvidia:2,amd:2", 4, buf, sizeof(buf)), "nvidia/nvidia/amd/amd") == 0, "blocks: %s", buf);
  CHECK(gbParamVendorsParse("nvidia,amd,nvidia", err, sizeof(err)) == 3, "one per rank: %s", err);
  CHECK(strcmp(labels("nvidia,amd,nvidia", 3, buf, sizeof(buf)), "nvidia/amd/nvidia") == 0, "per rank: %s", buf);
  CHECK(gbParamVendorsParse("intel:1,nvidia:3,amd", err, sizeof(err)) == 5, "mixed: %s", err);
  CHECK(strcmp(labels("intel:1,nvidia:3,amd", 5, buf, sizeof(buf)), "intel/nvidia/nvidia/nvidia/amd") == 0, "mixed: %s",
        buf);
  char label[GB_PARAM_VENDOR_LABEL_MAX + 1];
  CHECK(gbParamVendorsLabel("nvidia:2,amd:2", 4, label) == -1, "rank 4 of a list of 4 has no label");
  CHECK(gbParamVendorsLabel("nvidia:2,amd:2", -1, label) == -1, "rank -1 has no label");
  CHECK(gbParamVendorsParse("a234567890abcde:4096", err, sizeof(err)) == 4096, "15 characters, 4096 ranks: %s", err);

  static const struct {
    const char* spec;
    const char* words;
  } bad[] = {
      {"", "bad label ''"},
      {"nvidia,,amd", "bad label ''"},
      {"nvidia,", "bad label ''"},
      {"Nvidia:2", "bad label 'Nvidia'"},
      {"nv idia", "bad label 'nv idia'"},
      {"a234567890abcdef", "1 to 15 characters"},
      {"nvidia:", "bad count '' after 'nvidia:'"},
      {"nvidia:0", "bad count '0'"},
      {"nvidia:-1", "bad count '-1'"},
      {"nvidia:2x", "bad count '2x'"},
      {"nvidia:4097", "from 1 to 4096"},
      {"nvidia:4096,amd", "more than 4096 ranks"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    err[0] = '\0';
    int n = gbParamVendorsParse(bad[i].spec, err, sizeof(err));
    CHECK(n == -1 && strstr(err, bad[i].words) != NULL, "'%s': got %d, '%s', want '%s'", bad[i].spec, n, err,
          bad[i].words);
  }
}

/* GPUBRIDGE_VENDORS with the launcher's rank variables set as given. */
static void derive(const char* list, const char* rankVar, const char* rank, const char* sizeVar, const char* size) {
  clearEnv();
  setenv("GPUBRIDGE_VENDORS", list, 1);
  if (rankVar) setenv(rankVar, rank, 1);
  if (sizeVar) setenv(sizeVar, size, 1);
  gbParamReset();
}

static void testDerive(void) {
  derive("nvidia:2,amd:2", "RANK", "2", "WORLD_SIZE", "4");
  CHECK(strcmp(gbParamString(GB_PARAM_VENDOR), "amd") == 0 && gbParamIsSet(GB_PARAM_VENDOR), "torchrun rank 2: %s",
        gbParamString(GB_PARAM_VENDOR));
  CHECK(strcmp(gbParamErrors(), "") == 0, "no error: %s", gbParamErrors());

  derive("nvidia:2,amd:2", "SLURM_PROCID", "1", "SLURM_NTASKS", "4");
  CHECK(strcmp(gbParamString(GB_PARAM_VENDOR), "nvidia") == 0, "slurm rank 1: %s", gbParamString(GB_PARAM_VENDOR));

  derive("nvidia,amd,intel", "OMPI_COMM_WORLD_RANK", "2", "OMPI_COMM_WORLD_SIZE", "3");
  CHECK(strcmp(gbParamString(GB_PARAM_VENDOR), "intel") == 0, "openmpi rank 2: %s", gbParamString(GB_PARAM_VENDOR));

  /* A rank's own GPUBRIDGE_VENDOR wins. */
  derive("nvidia:2,amd:2", "RANK", "0", "WORLD_SIZE", "4");
  setenv("GPUBRIDGE_VENDOR", "amd", 1);
  gbParamReset();
  CHECK(strcmp(gbParamString(GB_PARAM_VENDOR), "amd") == 0, "GPUBRIDGE_VENDOR wins: %s", gbParamString(GB_PARAM_VENDOR));

  /* Counts that do not add up to the world size: an error, and the rank is
   * set but invalid (simulated "invalid", not a CPU rank). */
  derive("nvidia:2,amd:1", "RANK", "0", "WORLD_SIZE", "4");
  CHECK(strstr(gbParamErrors(), "GPUBRIDGE_VENDORS=nvidia:2,amd:1 names 3 ranks, but WORLD_SIZE=4") != NULL,
        "sum below the world: %s", gbParamErrors());
  CHECK(gbParamIsSet(GB_PARAM_VENDOR) && strcmp(gbParamString(GB_PARAM_VENDOR), "") == 0, "labelled invalid");

  derive("nvidia:3,amd:2", "RANK", "4", "WORLD_SIZE", "4");
  CHECK(strstr(gbParamErrors(), "names 5 ranks, but WORLD_SIZE=4") != NULL, "sum above the world: %s",
        gbParamErrors());

  derive("nvidia:2", "RANK", "3", NULL, NULL);
  CHECK(strstr(gbParamErrors(), "names 2 ranks, but this process is RANK=3") != NULL, "rank past the list: %s",
        gbParamErrors());

  derive("nvidia:2,amd:2", NULL, NULL, NULL, NULL);
  CHECK(strstr(gbParamErrors(), "needs this process's rank from its launcher") != NULL, "no launcher: %s",
        gbParamErrors());

  derive("nvidia:2,amd:2", "RANK", "two", "WORLD_SIZE", "4");
  CHECK(strstr(gbParamErrors(), "RANK=two is not one") != NULL, "unreadable rank: %s", gbParamErrors());

  derive("nvidia:2,Amd:2", "RANK", "0", "WORLD_SIZE", "4");
  CHECK(strstr(gbParamErrors(), "GPUBRIDGE_VENDORS=nvidia:2,Amd:2: bad label 'Amd'") != NULL, "bad label: %s",
        gbParamErrors());
  clearEnv();
}

int main(void) {
  testParse();
  testDerive();
  if (failures) fprintf(stderr, "%d checks failed\n", failures);
  else printf("test_param_vendors: all checks passed\n");
  return failures ? 1 : 0;
}
