/* How a user tells from the logs that gpubridge, not NCCL, serves a job's
 * NCCL calls. At GPUBRIDGE_DEBUG=INFO every communicator logs one line once
 * it is ready: rank, size, GPU, run kind, islands (vendor, size, leader),
 * the policy, and the NCCL version reported, and one line per job says it
 * for the whole job: rank 0 of each process's first communicator (in a job,
 * the world's rank 0). Both are INFO, as NCCL's own start-up lines: a
 * healthy job is silent at the default level (WARN). */
#include <stdio.h>

#include "abi.h"

static atomic_int firstDone;

static const char* policyName(int p) {
  static const char* const names[] = {"auto", "hierarchical", "native", "flat", "split-rail", "tuned"};
  return p >= 0 && p < (int)(sizeof(names) / sizeof(names[0])) ? names[p] : "unknown";
}

static const char* runKindName(int k) {
  return k == gbRunReal ? "real" : k == gbRunSimulated ? "simulated" : k == gbRunCpu ? "cpu" : "unknown";
}

/* "nvidia:2 (leader 0), amd:2 (leader 2)" */
static void islandsText(const gbTopology_t* t, char* out, size_t len) {
  size_t used = 0;
  out[0] = '\0';
  for (int i = 0; i < t->nislands; i++) {
    int w = snprintf(out + used, len - used, "%s%s:%d (leader %d)", i ? ", " : "", t->islandVendor[i],
                     t->islandSize[i], t->leaderOfIsland[i]);
    if (w < 0 || used + (size_t)w >= len) return;
    used += (size_t)w;
  }
}

void gbNcclCommAnnounce(ncclComm_t comm) {
  if (atomic_exchange(&comm->announced, 1)) return;
  gbComm_t gb = atomic_load(&comm->gb);
  gbTopology_t t;
  if (!gb || gbCommGetTopology(gb, &t) != gbSuccess) return;
  int first = !atomic_exchange(&firstDone, 1);
  if (first) gbNcclLogSetRank(t.rank);
  char islands[512];
  islandsText(&t, islands, sizeof(islands));
  const char* split = t.splitTest ? " (split-test: one vendor relabelled, for testing only)" : "";
  GB_NCCL_INFO("gpubridge serves NCCL calls: comm %p%s%s rank %d of %d, GPU %d, %s run%s; %d island%s: %s; "
               "policy %s; ncclGetVersion reports %d", (void*)comm, comm->name[0] ? " " : "", comm->name, t.rank,
               t.nranks, comm->cudaDev, runKindName(t.runKind), split, t.nislands, t.nislands == 1 ? "" : "s",
               islands, policyName(t.policy), gbNcclVersionReported());
  if (first && t.rank == 0)
    GB_NCCL_INFO("gpubridge serves this job's NCCL calls (libgpubridge-nccl): %d ranks, %s run%s, islands %s, "
                 "policy %s; GPUBRIDGE_DEBUG=INFO shows every communicator", t.nranks, runKindName(t.runKind), split,
                 islands, policyName(t.policy));
}
