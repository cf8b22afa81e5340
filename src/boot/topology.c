#include "boot/topology.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/result.h"
#include "boot/ranks.h"

gbResult_t gbTopoBuild(const gbProbe_t* sorted, int nranks, int rank, gbTopo_t* t) {
  memset(t, 0, sizeof(*t));
  t->nranks = nranks;
  t->rank = rank;
  t->runKind = sorted[0].runKind;
  t->islandOfRank = calloc((size_t)nranks, sizeof(int));
  t->indexInIsland = calloc((size_t)nranks, sizeof(int));
  t->leaderOfIsland = calloc((size_t)nranks, sizeof(int));
  t->islandSize = calloc((size_t)nranks, sizeof(int));
  t->members = calloc((size_t)nranks, sizeof(int*));
  t->vendor = calloc((size_t)nranks, GB_VENDOR_LEN);
  t->vendorNames = calloc((size_t)nranks, sizeof(char*));
  if (!t->islandOfRank || !t->indexInIsland || !t->leaderOfIsland || !t->islandSize || !t->members ||
      !t->vendor || !t->vendorNames) {
    gbTopoFree(t);
    return gbErrorSet(gbSystemError, "out of memory building the topology of %d ranks", nranks);
  }
  /* Ranks in order: a vendor label seen for the first time opens an island, so
   * islands come out ordered by their lowest rank. */
  for (int r = 0; r < nranks; r++) {
    int is = -1;
    for (int k = 0; k < t->nislands; k++)
      if (strncmp(t->vendor[k], sorted[r].vendor, GB_VENDOR_LEN) == 0) is = k;
    if (is < 0) {
      is = t->nislands++;
      strncpy(t->vendor[is], sorted[r].vendor, GB_VENDOR_LEN - 1);
      t->leaderOfIsland[is] = r;
      t->vendorNames[is] = t->vendor[is];
    }
    t->islandOfRank[r] = is;
    t->indexInIsland[r] = t->islandSize[is]++;
  }
  for (int k = 0; k < t->nislands; k++) {
    t->members[k] = malloc(sizeof(int) * (size_t)t->islandSize[k]);
    if (!t->members[k]) {
      gbTopoFree(t);
      return gbErrorSet(gbSystemError, "out of memory building the topology");
    }
  }
  for (int r = 0; r < nranks; r++) t->members[t->islandOfRank[r]][t->indexInIsland[r]] = r;
  t->island = t->islandOfRank[rank];
  t->islandIndex = t->indexInIsland[rank];
  t->isLeader = t->leaderOfIsland[t->island] == rank;
  return gbSuccess;
}

void gbTopoFree(gbTopo_t* t) {
  if (t->members)
    for (int k = 0; k < t->nislands; k++) free(t->members[k]);
  free(t->members);
  free(t->islandOfRank);
  free(t->indexInIsland);
  free(t->leaderOfIsland);
  free(t->islandSize);
  free(t->vendor);
  free(t->vendorNames);
  memset(t, 0, sizeof(*t));
}

const char* gbTopoIslandsText(const gbTopo_t* t, char* out, size_t len) {
  size_t used = 0;
  out[0] = '\0';
  for (int k = 0; k < t->nislands && used < len; k++) {
    char list[256];
    int w = snprintf(out + used, len - used, "%s%s: %s %s", k ? "; " : "", t->vendor[k],
                     t->islandSize[k] > 1 ? "ranks" : "rank",
                     gbBootRankList(t->members[k], t->islandSize[k], list, sizeof(list)));
    if (w < 0) break;
    used += (size_t)w;
  }
  return out;
}

int gbTopoUnknownVendors(const gbTopo_t* t, char* out, size_t len) {
  static const char* const known[] = {"nvidia", "amd", "intel", "cpu"};
  int count = 0;
  size_t used = 0;
  out[0] = '\0';
  if (t->runKind != gbRunSimulated) return 0; /* a real device names its own vendor */
  for (int k = 0; k < t->nislands; k++) {
    int isKnown = 0;
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) isKnown |= strcmp(t->vendor[k], known[i]) == 0;
    if (isKnown) continue;
    count++;
    char list[256];
    int w = used < len ? snprintf(out + used, len - used, "%s'%s' (%s %s)", count > 1 ? ", " : "", t->vendor[k],
                                  t->islandSize[k] > 1 ? "ranks" : "rank",
                                  gbBootRankList(t->members[k], t->islandSize[k], list, sizeof(list)))
                       : 0;
    if (w > 0) used += (size_t)w;
  }
  return count;
}
