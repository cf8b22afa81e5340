/* Where a plan's chunks lie, in elements of the call: chunk i's length,
 * split-rail's slices of a chunk, and the part of a chunk this rank stages. */
#include "plan/plan.h"

size_t gbPlanChunkLen(const gbPlan_t* p, size_t i) {
  size_t left = p->count - i * p->chunkCount;
  return left < p->chunkCount ? left : p->chunkCount;
}

/* Slice r of k: [r*n/k, (r+1)*n/k), computed without overflowing r*n. */
void gbPlanRailSlice(const gbPlan_t* p, size_t n, int r, size_t* begin, size_t* len) {
  size_t k = (size_t)p->rails;
  size_t q = n / k, rem = n % k;
  size_t b = q * (size_t)r + rem * (size_t)r / k;
  size_t e = q * (size_t)(r + 1) + rem * (size_t)(r + 1) / k;
  *begin = b;
  *len = e - b;
}

void gbPlanStagedPart(const gbPlan_t* p, size_t i, size_t* off, size_t* n) {
  *off = i * p->chunkCount;
  *n = gbPlanChunkLen(p, i);
  if (p->rails > 0 && p->myRail >= 0) {
    size_t b, len;
    gbPlanRailSlice(p, *n, p->myRail, &b, &len);
    *off += b;
    *n = len;
  }
}
