/* The layout of UCX's own declarations (ucp/api/ucp.h), for test_net_ucx_api. */
#include <stddef.h>
#include <ucp/api/ucp.h>

#include "fields.h"

#define STRUCT(T) {#T, 0, (long long)sizeof(T)},
#define FIELD(T, f) {#T "." #f, (long long)offsetof(T, f), (long long)sizeof(((T*)0)->f)},
#define CONSTANT(ours, theirs) {#ours, (long long)(theirs), 0},
const gbUcxLayout_t gbUcxTheirs[] = {GB_UCX_STRUCTS(STRUCT) GB_UCX_FIELDS(FIELD) GB_UCX_CONSTANTS(CONSTANT)};
const size_t gbUcxTheirsCount = sizeof(gbUcxTheirs) / sizeof(gbUcxTheirs[0]);
