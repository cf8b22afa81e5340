/* The collectives gpubridge-perf measures, as nccl-tests sees them: the size
 * of a row is the total buffer (all_gather, reduce_scatter, alltoall: nranks
 * parts of `count` elements), busbw = algbw x a factor that makes it
 * comparable with a link's peak whatever the number of ranks, and the
 * in-place forms are the header's. */
#include <string.h>
#include "perf.h"

static const struct {
  const char* name;
  const char* alias;
  const char* call; /* for error messages */
  int reduces, rooted, inPlace, parts;
} colls[PERF_NUM_COLLS] = {
    /* alltoall in place is sendbuff == recvbuff (NCCL 2.28); sendrecv has no in-place form in the header. */
    [PERF_ALL_REDUCE] = {"all_reduce", "allreduce", "gbAllReduce", 1, 0, 1, 0},
    [PERF_BROADCAST] = {"broadcast", "bcast", "gbBroadcast", 0, 1, 1, 0},
    [PERF_REDUCE] = {"reduce", "reduce", "gbReduce", 1, 1, 1, 0},
    [PERF_ALL_GATHER] = {"all_gather", "allgather", "gbAllGather", 0, 0, 1, 1},
    [PERF_REDUCE_SCATTER] = {"reduce_scatter", "reducescatter", "gbReduceScatter", 1, 0, 1, 1},
    [PERF_ALLTOALL] = {"alltoall", "all_to_all", "gbAllToAll", 0, 0, 1, 1},
    [PERF_SENDRECV] = {"sendrecv", "send_recv", "gbSend/gbRecv", 0, 0, 0, 0},
};

const char* perfCollName(perfColl_t coll) {
  return (unsigned)coll < PERF_NUM_COLLS ? colls[coll].name : "unknown";
}

int perfCollFromName(const char* name, perfColl_t* coll) {
  for (int c = 0; c < PERF_NUM_COLLS; c++) {
    if (strcmp(name, colls[c].name) == 0 || strcmp(name, colls[c].alias) == 0) {
      *coll = (perfColl_t)c;
      return 0;
    }
  }
  return -1;
}

const char* perfCollCall(perfColl_t coll) { return colls[coll].call; }
int perfCollReduces(perfColl_t coll) { return colls[coll].reduces; }
int perfCollRooted(perfColl_t coll) { return colls[coll].rooted; }
int perfCollHasInPlace(perfColl_t coll) { return colls[coll].inPlace; }
int perfCollParts(perfColl_t coll, int nranks) { return colls[coll].parts ? nranks : 1; }

double perfCollBusFactor(perfColl_t coll, int nranks) {
  double n = nranks;
  switch (coll) {
    case PERF_ALL_REDUCE: return 2.0 * (n - 1) / n;
    case PERF_ALL_GATHER:
    case PERF_REDUCE_SCATTER:
    case PERF_ALLTOALL: return (n - 1) / n;
    default: return 1.0; /* broadcast, reduce, sendrecv */
  }
}

void perfCollLayout(perfColl_t coll, size_t count, int rank, int nranks, perfLayout_t* l) {
  size_t total = count * (size_t)nranks;
  memset(l, 0, sizeof(*l));
  l->sendElems = l->recvElems = count;
  switch (coll) {
    case PERF_ALL_GATHER:
      l->recvElems = total;
      l->sendOff = (size_t)rank * count; /* send == recv + rank*count */
      break;
    case PERF_REDUCE_SCATTER:
      l->sendElems = total;
      l->recvOff = (size_t)rank * count; /* recv == send + rank*count */
      break;
    case PERF_ALLTOALL:
      l->sendElems = l->recvElems = total;
      break;
    default: break;
  }
  l->inPlaceElems = l->sendElems > l->recvElems ? l->sendElems : l->recvElems;
}

/* Each rank sends to the next and receives from the previous, as nccl-tests'
 * sendrecv; one group, so neither waits for the other. */
static gbResult_t sendRecv(const void* send, void* recv, size_t count, gbDataType_t dt, gbComm_t comm,
                           void* stream) {
  int rank = 0, n = 1;
  gbResult_t res = gbCommUserRank(comm, &rank);
  if (res == gbSuccess) res = gbCommCount(comm, &n);
  if (res != gbSuccess) return res;
  res = gbGroupStart();
  if (res != gbSuccess) return res;
  res = gbSend(send, count, dt, (rank + 1) % n, comm, stream);
  if (res == gbSuccess) res = gbRecv(recv, count, dt, (rank + n - 1) % n, comm, stream);
  gbResult_t end = gbGroupEnd(); /* always closes the group */
  return res != gbSuccess ? res : end;
}

gbResult_t perfCollEnqueue(perfColl_t coll, const void* send, void* recv, size_t count, gbDataType_t dt,
                           gbRedOp_t op, int root, gbComm_t comm, void* stream) {
  switch (coll) {
    case PERF_ALL_REDUCE: return gbAllReduce(send, recv, count, dt, op, comm, stream);
    case PERF_BROADCAST: return gbBroadcast(send, recv, count, dt, root, comm, stream);
    case PERF_REDUCE: return gbReduce(send, recv, count, dt, op, root, comm, stream);
    case PERF_ALL_GATHER: return gbAllGather(send, recv, count, dt, comm, stream);
    case PERF_REDUCE_SCATTER: return gbReduceScatter(send, recv, count, dt, op, comm, stream);
    case PERF_ALLTOALL: return gbAllToAll(send, recv, count, dt, comm, stream);
    case PERF_SENDRECV: return sendRecv(send, recv, count, dt, comm, stream);
    default: return gbInvalidArgument;
  }
}
