/* A topology for plan/'s unit tests, from island sizes: ranks numbered
 * island by island, `me` the rank the plan is for. */
#ifndef GB_TESTS_UNIT_PLAN_LAYOUT_H
#define GB_TESTS_UNIT_PLAN_LAYOUT_H

#include <string.h>

#include "boot/topology.h"

typedef struct {
  gbTopo_t topo;
  int sizes[8], islandOf[64], indexIn[64], leaders[8];
} layout_t;

static inline void makeLayout(layout_t* l, const int* sizes, int nislands, int me) {
  memset(l, 0, sizeof(*l));
  int r = 0;
  for (int i = 0; i < nislands; i++) {
    l->sizes[i] = sizes[i];
    l->leaders[i] = r;
    for (int j = 0; j < sizes[i]; j++, r++) {
      l->islandOf[r] = i;
      l->indexIn[r] = j;
    }
  }
  gbTopo_t* t = &l->topo;
  t->nranks = r;
  t->rank = me;
  t->nislands = nislands;
  t->island = l->islandOf[me];
  t->islandIndex = l->indexIn[me];
  t->isLeader = t->islandIndex == 0;
  t->islandOfRank = l->islandOf;
  t->indexInIsland = l->indexIn;
  t->leaderOfIsland = l->leaders;
  t->islandSize = l->sizes;
}

#endif
