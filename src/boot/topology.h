/* The topology every rank derives, by the same pure function, from the probes
 * the root validated: islands by vendor label, ordered by their lowest rank
 * (the leader); members in rank order. */
#ifndef GB_BOOT_TOPOLOGY_H
#define GB_BOOT_TOPOLOGY_H

#include "boot/probe.h"
#include "gpubridge/gpubridge.h"

#define GB_MAX_RANKS 4096
#define GB_VENDOR_LEN 16

typedef struct {
  int nranks, rank;
  int nislands;
  int island;          /* mine */
  int islandIndex;     /* my index inside my island */
  int isLeader;
  int runKind;
  int* islandOfRank;   /* [nranks] */
  int* indexInIsland;  /* [nranks] */
  int* leaderOfIsland; /* [nislands] */
  int* islandSize;     /* [nislands] */
  int** members;       /* [nislands][islandSize] global ranks, ascending */
  char (*vendor)[GB_VENDOR_LEN];
  const char** vendorNames; /* [nislands] pointers into vendor, for gbTopology_t */
} gbTopo_t;

gbResult_t gbTopoBuild(const gbProbe_t* sorted, int nranks, int rank, gbTopo_t* out);
void gbTopoFree(gbTopo_t* t);

/* "nvidia: ranks 0-1; amd: ranks 2-3", islands in order. */
const char* gbTopoIslandsText(const gbTopo_t* t, char* out, size_t len);
/* Simulated labels that are no known vendor (nvidia, amd, intel, cpu): a
 * typo such as "nvida" quietly forms an island of its own. Writes them
 * ("'nvida' (rank 1)") to out and returns how many there are. */
int gbTopoUnknownVendors(const gbTopo_t* t, char* out, size_t len);

#endif
