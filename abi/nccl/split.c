/* ncclCommSplit over gbCommSplit: collective over the parent's ranks; ranks
 * with NCCL_SPLIT_NOCOLOR (-1, gpubridge's GB_SPLIT_NOCOLOR too) get NULL.
 * A NULL config inherits the parent's settings, blocking included, as in
 * NCCL (and its commName, for logs). The child serves the parent's GPU. */
#include "abi.h"
#include "nccl_exports.h"

_Static_assert(NCCL_SPLIT_NOCOLOR == GB_SPLIT_NOCOLOR, "the no-color values agree");

typedef struct {
  gbComm_t parent;
  int color, key;
  gbConfig_t config;
  int hasConfig;
} splitArgs_t;

static gbResult_t makeSplit(void* p, gbComm_t* gb) {
  splitArgs_t* a = p;
  return gbCommSplit(a->parent, a->color, a->key, gb, a->hasConfig ? &a->config : NULL);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  GB_NCCL_FORWARD(ncclCommSplit, comm, color, key, newcomm, config);
  static const char fn[] = "ncclCommSplit";
  if (!newcomm) return gbNcclResult(gbNcclErrorSet(gbInvalidArgument, "%s: newcomm is NULL", fn));
  *newcomm = NULL;
  splitArgs_t a = {.color = color, .key = key, .hasConfig = config != NULL};
  char name[GB_NCCL_NAME_LEN];
  gbResult_t res = gbNcclCommGet(fn, comm, &a.parent);
  if (res == gbSuccess) res = gbNcclConfigRead(fn, config, &a.config, name, sizeof(name));
  if (res == gbSuccess) res = gbNcclCommCreate(fn, comm->cudaDev, config ? name : comm->name, makeSplit, &a, newcomm);
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclCommSplit)
