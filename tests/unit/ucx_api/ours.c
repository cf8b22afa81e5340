/* test_net_ucx_api: src/net/ucx/api.h declares UCX's API without UCX's
 * headers; every struct size, field offset and size, and constant must be
 * UCX's (theirs.c, compiled against ucp/api/ucp.h). */
#include <stdio.h>
#include <string.h>

#include "net/ucx/api.h"
#include "fields.h"

extern const gbUcxLayout_t gbUcxTheirs[];
extern const size_t gbUcxTheirsCount;

#define STRUCT(T) {#T, 0, (long long)sizeof(T)},
#define FIELD(T, f) {#T "." #f, (long long)offsetof(T, f), (long long)sizeof(((T*)0)->f)},
#define CONSTANT(ours, theirs) {#ours, (long long)(ours), 0},
static const gbUcxLayout_t mine[] = {GB_UCX_STRUCTS(STRUCT) GB_UCX_FIELDS(FIELD) GB_UCX_CONSTANTS(CONSTANT)};

int main(void) {
  size_t n = sizeof(mine) / sizeof(mine[0]);
  int bad = 0;
  if (n != gbUcxTheirsCount) {
    fprintf(stderr, "FAIL: %zu entries against %zu\n", n, gbUcxTheirsCount);
    return 1;
  }
  for (size_t i = 0; i < n; i++) {
    if (strcmp(mine[i].name, gbUcxTheirs[i].name) != 0 || mine[i].offset != gbUcxTheirs[i].offset ||
        mine[i].size != gbUcxTheirs[i].size) {
      fprintf(stderr, "FAIL: %s: ours %lld/%lld, UCX's %lld/%lld (offset or value / size)\n", mine[i].name,
              mine[i].offset, mine[i].size, gbUcxTheirs[i].offset, gbUcxTheirs[i].size);
      bad++;
    }
  }
  if (bad) return 1;
  printf("test_net_ucx_api: %zu structs, fields and constants match UCX %d.%d's headers\n", n, GB_UCP_API_MAJOR,
         GB_UCP_API_MINOR);
  return 0;
}
