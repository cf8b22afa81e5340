/* Exported: gbSend, gbRecv, gbGroupStart, gbGroupEnd. Groups are per
 * thread, as in NCCL: sends and receives made inside one are collected per
 * communicator and issued at the outermost gbGroupEnd as one fused
 * operation each; outside a group each call is its own. A bad argument in a
 * group fails that call at once, and gbGroupEnd then issues nothing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "base/dtype.h"
#include "base/result.h"

typedef struct {
  gbComm_t comm;
  gbCommP2p_t* ops;
  int n, cap;
} batch_t;

typedef struct {
  int depth;
  int failed;        /* gbResult_t of the first bad call in the group */
  char failText[512];
  batch_t* batches;
  int nbatches, capBatches;
} groupState_t;

static _Thread_local groupState_t group;

static void groupReset(void) {
  for (int b = 0; b < group.nbatches; b++) free(group.batches[b].ops);
  free(group.batches);
  memset(&group, 0, sizeof(group));
}

static gbResult_t append(gbComm_t comm, const gbCommP2p_t* op) {
  batch_t* b = NULL;
  for (int k = 0; k < group.nbatches; k++)
    if (group.batches[k].comm == comm) b = &group.batches[k];
  if (!b) {
    if (group.nbatches == group.capBatches) {
      int cap = group.capBatches ? 2 * group.capBatches : 4;
      batch_t* nb = realloc(group.batches, sizeof(batch_t) * (size_t)cap);
      if (!nb) return gbErrorSet(gbSystemError, "gbGroupEnd: out of memory");
      group.batches = nb;
      group.capBatches = cap;
    }
    b = &group.batches[group.nbatches++];
    memset(b, 0, sizeof(*b));
    b->comm = comm;
  }
  if (b->n == b->cap) {
    int cap = b->cap ? 2 * b->cap : 8;
    gbCommP2p_t* ops = realloc(b->ops, sizeof(gbCommP2p_t) * (size_t)cap);
    if (!ops) return gbErrorSet(gbSystemError, "gbGroupEnd: out of memory");
    b->ops = ops;
    b->cap = cap;
  }
  if (b->n > 0 && b->ops[0].stream != op->stream)
    return gbErrorSet(gbInvalidUsage, "%s: the sends and receives of one communicator in one group must use one "
                                      "stream; this one uses another than the group's first", op->isSend ? "gbSend"
                                                                                                        : "gbRecv");
  b->ops[b->n++] = *op;
  return gbSuccess;
}

static gbResult_t p2p(const char* fn, int isSend, void* buf, size_t count, gbDataType_t dt, int peer, gbComm_t comm,
                      void* stream) {
  gbResult_t res = gbApiCheckComm(fn, comm);
  if (res == gbSuccess && ((int)dt < 0 || dt >= gbNumTypes))
    res = gbErrorSet(gbInvalidArgument, "%s: datatype %d is not a gbDataType_t (0..%d)", fn, (int)dt,
                     gbNumTypes - 1);
  if (res == gbSuccess && (peer < 0 || peer >= comm->nranks))
    res = gbErrorSet(gbInvalidArgument, "%s: peer %d is not a rank in [0, %d)", fn, peer, comm->nranks);
  if (res == gbSuccess && count > SIZE_MAX / 2 / gbDtypeSize(dt))
    res = gbErrorSet(gbInvalidArgument, "%s: count %zu of %s overflows the address space", fn, count,
                     gbDtypeName(dt));
  if (res == gbSuccess && count > 0 && !buf)
    res = gbErrorSet(gbInvalidArgument, "%s: buffer is NULL with count %zu", fn, count);
  gbCommP2p_t op = {peer, isSend, buf, count, dt, stream};
  if (group.depth == 0) {
    if (res != gbSuccess) return res;
    return gbCommEnqueueSendRecv(comm, &op, 1, stream);
  }
  if (res == gbSuccess) res = append(comm, &op);
  if (res != gbSuccess && !group.failed) {
    group.failed = res;
    snprintf(group.failText, sizeof(group.failText), "%s", gbErrorLast());
  }
  return res;
}

gbResult_t gbSend(const void* sendbuff, size_t count, gbDataType_t datatype, int peer, gbComm_t comm,
                  void* stream) {
  GB_API_ON_COMM("gbSend", comm, p2p("gbSend", 1, (void*)sendbuff, count, datatype, peer, comm, stream));
}

gbResult_t gbRecv(void* recvbuff, size_t count, gbDataType_t datatype, int peer, gbComm_t comm, void* stream) {
  GB_API_ON_COMM("gbRecv", comm, p2p("gbRecv", 0, recvbuff, count, datatype, peer, comm, stream));
}

/* One batch of the group, issued as a call on its communicator. */
static gbResult_t issue(batch_t* b) {
  gbResult_t res = gbApiCheckComm("gbGroupEnd", b->comm);
  return res == gbSuccess ? gbCommEnqueueSendRecv(b->comm, b->ops, b->n, b->ops[0].stream) : res;
}

static gbResult_t issueOnComm(batch_t* b) { GB_API_ON_COMM("gbGroupEnd", b->comm, issue(b)); }

gbResult_t gbGroupStart(void) {
  group.depth++;
  return gbSuccess;
}

gbResult_t gbGroupEnd(void) {
  if (group.depth == 0)
    return gbErrorSet(gbInvalidUsage, "gbGroupEnd: no group is open (call gbGroupStart first)");
  if (--group.depth > 0) return gbSuccess;
  gbResult_t res = gbSuccess;
  if (group.failed) {
    res = gbErrorSet((gbResult_t)group.failed, "gbGroupEnd: nothing was issued: a call in the group failed: %s",
                     group.failText);
  } else {
    for (int k = 0; k < group.nbatches && res == gbSuccess; k++) {
      res = issueOnComm(&group.batches[k]);
    }
  }
  groupReset();
  return res;
}
