/* The cases of rank_nccl_abi.c (included once, after its helpers). Every
 * rank runs the same sequence; error checks are local and need no peer. */
#ifndef GB_TESTS_MP_RANK_NCCL_ABI_CASES_H
#define GB_TESTS_MP_RANK_NCCL_ABI_CASES_H

/* ----------------------------------------------------------- collectives */

static void allReduceOne(ncclComm_t comm, int dt, int op, size_t count, int inPlace) {
  size_t bytes = count * dtSize(dt);
  char* send = malloc(bytes + 1);
  char* want = malloc(bytes + 1);
  char* got = malloc(bytes + 1);
  if (!send || !want || !got) DIE("out of memory");
  for (size_t i = 0; i < count; i++) {
    encode(dt, gen(dt, op, gRank, i), send + i * dtSize(dt));
    encode(dt, expected(dt, op, i), want + i * dtSize(dt));
  }
  void* dSend = devAlloc(bytes);
  void* dRecv = inPlace ? dSend : devAlloc(bytes);
  toDev(dSend, send, bytes);
  NCCL_OK(N.ncclAllReduce(dSend, dRecv, count, dt, op, comm, gStream));
  toHost(got, dRecv, bytes);
  char what[96];
  snprintf(what, sizeof(what), "ncclAllReduce type %d op %d count %zu%s", dt, op, count, inPlace ? " in place" : "");
  expectBytes(what, dt, got, want, count);
  devFree(dSend);
  if (!inPlace) devFree(dRecv);
  free(send), free(want), free(got);
}

static void checkAllReduce(ncclComm_t comm) {
  for (int dt = 0; dt < T_FP8E4M3; dt++)
    for (int op = OP_SUM; op <= OP_MIN; op++) allReduceOne(comm, dt, op, COUNT, 0);
  /* fp8: max and min of -5..5 are exact in both types */
  for (int dt = T_FP8E4M3; dt <= T_FP8E5M2; dt++)
    for (int op = OP_MAX; op <= OP_MIN; op++) allReduceOne(comm, dt, op, COUNT, dt == T_FP8E5M2);
  if ((gN & (gN - 1)) == 0) /* averages over 2 or 4 ranks are exact */
    for (int dt = T_FLOAT16; dt <= T_BFLOAT16; dt++) allReduceOne(comm, dt, OP_AVG, COUNT, 0);
  allReduceOne(comm, T_INT32, OP_SUM, COUNT, 1);
  allReduceOne(comm, T_FLOAT32, OP_MAX, 1, 1);
  /* count 0: nothing happens, nothing is written */
  int32_t keep = 12345, after = 0;
  void* d = devAlloc(4);
  toDev(d, &keep, 4);
  NCCL_OK(N.ncclAllReduce(d, d, 0, T_INT32, OP_SUM, comm, gStream));
  toHost(&after, d, 4);
  EXPECT(after == keep, "ncclAllReduce of 0 elements changed the buffer to %d", after);
  devFree(d);
}

static void checkBroadcastReduce(ncclComm_t comm) {
  size_t bytes = COUNT * 4;
  int32_t *h = ints(COUNT), *want = ints(COUNT);
  void *dSend = devAlloc(bytes), *dRecv = devAlloc(bytes);
  int root = 1 % gN;
  for (size_t i = 0; i < COUNT; i++) h[i] = gRank == root ? (int32_t)(7 * i + 3) : -1, want[i] = (int32_t)(7 * i + 3);
  toDev(dSend, h, bytes);
  NCCL_OK(N.ncclBroadcast(dSend, dRecv, COUNT, T_INT32, root, comm, gStream));
  toHost(h, dRecv, bytes);
  expectBytes("ncclBroadcast", T_INT32, h, want, COUNT);

  root = gN - 1; /* ncclBcast: in place */
  for (size_t i = 0; i < COUNT; i++) h[i] = gRank == root ? (int32_t)(5 * i - 40) : 0, want[i] = (int32_t)(5 * i - 40);
  toDev(dSend, h, bytes);
  NCCL_OK(N.ncclBcast(dSend, COUNT, T_INT32, root, comm, gStream));
  toHost(h, dSend, bytes);
  expectBytes("ncclBcast", T_INT32, h, want, COUNT);

  /* reduce to the last rank; the others pass a NULL receive buffer */
  for (size_t i = 0; i < COUNT; i++) h[i] = (int32_t)gen(T_INT32, OP_SUM, gRank, i), want[i] = (int32_t)expected(T_INT32, OP_SUM, i);
  toDev(dSend, h, bytes);
  NCCL_OK(N.ncclReduce(dSend, gRank == root ? dRecv : NULL, COUNT, T_INT32, OP_SUM, root, comm, gStream));
  if (gRank == root) {
    toHost(h, dRecv, bytes);
    expectBytes("ncclReduce", T_INT32, h, want, COUNT);
  }
  devFree(dSend);
  devFree(dRecv);
  free(h), free(want);
}

/* all-gather, reduce-scatter, all-to-all: [rank][COUNT] blocks */
static void checkBlocks(ncclComm_t comm) {
  size_t total = (size_t)gN * COUNT, bytes = total * 4;
  int32_t *h = ints(total), *want = ints(total);
  void *dAll = devAlloc(bytes), *dOne = devAlloc(COUNT * 4);
  for (int inPlace = 0; inPlace < 2; inPlace++) {
    for (size_t i = 0; i < COUNT; i++) h[i] = gRank * 1000 + (int32_t)i;
    for (size_t j = 0; j < total; j++) want[j] = (int32_t)(j / COUNT) * 1000 + (int32_t)(j % COUNT);
    void* send = inPlace ? (char*)dAll + (size_t)gRank * COUNT * 4 : dOne;
    toDev(send, h, COUNT * 4);
    NCCL_OK(N.ncclAllGather(send, dAll, COUNT, T_INT32, comm, gStream));
    toHost(h, dAll, bytes);
    expectBytes(inPlace ? "ncclAllGather in place" : "ncclAllGather", T_INT32, h, want, total);

    int op = inPlace ? OP_MAX : OP_SUM; /* element j of rank r is r + j (sum) or (r * 7 + j) % 11 (max) */
    for (size_t j = 0; j < total; j++) h[j] = op == OP_SUM ? gRank + (int32_t)j : (gRank * 7 + (int32_t)j) % 11;
    for (size_t i = 0; i < COUNT; i++) {
      size_t j = (size_t)gRank * COUNT + i;
      int32_t acc = op == OP_SUM ? 0 : INT32_MIN;
      for (int r = 0; r < gN; r++) {
        int32_t v = op == OP_SUM ? r + (int32_t)j : (r * 7 + (int32_t)j) % 11;
        acc = op == OP_SUM ? acc + v : (v > acc ? v : acc);
      }
      want[i] = acc;
    }
    toDev(dAll, h, bytes);
    void* recv = inPlace ? (char*)dAll + (size_t)gRank * COUNT * 4 : dOne;
    NCCL_OK(N.ncclReduceScatter(dAll, recv, COUNT, T_INT32, op, comm, gStream));
    toHost(h, recv, COUNT * 4);
    expectBytes(inPlace ? "ncclReduceScatter in place (max)" : "ncclReduceScatter", T_INT32, h, want, COUNT);
  }
  void* dTo = devAlloc(bytes);
  for (size_t j = 0; j < total; j++) h[j] = gRank * 100000 + (int32_t)(j / COUNT) * 1000 + (int32_t)(j % COUNT);
  for (size_t j = 0; j < total; j++) want[j] = (int32_t)(j / COUNT) * 100000 + gRank * 1000 + (int32_t)(j % COUNT);
  toDev(dAll, h, bytes);
  NCCL_OK(N.ncclAlltoAll(dAll, dTo, COUNT, T_INT32, comm, gStream));
  toHost(h, dTo, bytes);
  expectBytes("ncclAlltoAll", T_INT32, h, want, total);
  /* In place (NCCL 2.28: sendbuff == recvbuff), as nccl-tests' alltoall_perf
   * runs it; overlapping without being equal stays an error. */
  for (size_t j = 0; j < total; j++) h[j] = gRank * 100000 + (int32_t)(j / COUNT) * 1000 + (int32_t)(j % COUNT);
  toDev(dAll, h, bytes);
  NCCL_ERR(N.ncclAlltoAll((char*)dAll + 4, dAll, COUNT, T_INT32, comm, gStream), R_INVALID_ARGUMENT, "overlap");
  NCCL_OK(N.ncclAlltoAll(dAll, dAll, COUNT, T_INT32, comm, gStream));
  toHost(h, dAll, bytes);
  expectBytes("ncclAlltoAll in place", T_INT32, h, want, total);
  devFree(dTo);
  devFree(dAll);
  devFree(dOne);
  free(h), free(want);
}

/* ncclGather and ncclScatter, out of place and in place on the root */
static void checkRooted(ncclComm_t comm) {
  size_t total = (size_t)gN * COUNT, bytes = total * 4;
  int32_t *h = ints(total), *want = ints(total);
  void *dAll = devAlloc(bytes), *dOne = devAlloc(COUNT * 4);
  for (int inPlace = 0; inPlace < 2; inPlace++) {
    int root = inPlace ? 0 : 1 % gN;
    char* rootBlock = (char*)dAll + (size_t)root * COUNT * 4;
    for (size_t i = 0; i < COUNT; i++) h[i] = gRank * 1000 + (int32_t)i + 1;
    void* send = inPlace && gRank == root ? rootBlock : dOne;
    toDev(send, h, COUNT * 4);
    NCCL_OK(N.ncclGather(send, gRank == root ? dAll : NULL, COUNT, T_INT32, root, comm, gStream));
    if (gRank == root) {
      for (size_t j = 0; j < total; j++) want[j] = (int32_t)(j / COUNT) * 1000 + (int32_t)(j % COUNT) + 1;
      toHost(h, dAll, bytes);
      expectBytes(inPlace ? "ncclGather in place" : "ncclGather", T_INT32, h, want, total);
      for (size_t j = 0; j < total; j++) h[j] = -(int32_t)j;
      toDev(dAll, h, bytes);
    }
    void* recv = inPlace && gRank == root ? rootBlock : dOne;
    NCCL_OK(N.ncclScatter(gRank == root ? dAll : NULL, recv, COUNT, T_INT32, root, comm, gStream));
    for (size_t i = 0; i < COUNT; i++) want[i] = -(int32_t)((size_t)gRank * COUNT + i);
    toHost(h, recv, COUNT * 4);
    expectBytes(inPlace ? "ncclScatter in place" : "ncclScatter", T_INT32, h, want, COUNT);
  }
  devFree(dAll);
  devFree(dOne);
  free(h), free(want);
}

/* a ring shift in one group, then both ways with a partner in nested groups */
static void checkP2p(ncclComm_t comm) {
  int32_t *h = ints(COUNT), *want = ints(COUNT);
  void *dSend = devAlloc(COUNT * 4), *dRecv = devAlloc(COUNT * 4);
  int next = (gRank + 1) % gN, prev = (gRank + gN - 1) % gN;
  for (size_t i = 0; i < COUNT; i++) h[i] = gRank * 100 + (int32_t)i, want[i] = prev * 100 + (int32_t)i;
  toDev(dSend, h, COUNT * 4);
  NCCL_OK(N.ncclGroupStart());
  NCCL_OK(N.ncclSend(dSend, COUNT, T_INT32, next, comm, gStream));
  NCCL_OK(N.ncclRecv(dRecv, COUNT, T_INT32, prev, comm, gStream));
  NCCL_OK(N.ncclGroupEnd());
  toHost(h, dRecv, COUNT * 4);
  expectBytes("ring of ncclSend/ncclRecv", T_INT32, h, want, COUNT);

  int partner = gRank ^ 1;
  if (partner < gN) {
    for (size_t i = 0; i < COUNT; i++) h[i] = -gRank - (int32_t)i, want[i] = -partner - (int32_t)i;
    toDev(dSend, h, COUNT * 4);
    NCCL_OK(N.ncclGroupStart());
    NCCL_OK(N.ncclGroupStart());
    NCCL_OK(N.ncclRecv(dRecv, COUNT, T_INT32, partner, comm, gStream));
    NCCL_OK(N.ncclGroupEnd());
    NCCL_OK(N.ncclSend(dSend, COUNT, T_INT32, partner, comm, gStream));
    NCCL_OK(N.ncclGroupEnd());
    toHost(h, dRecv, COUNT * 4);
    expectBytes("pair exchange in nested groups", T_INT32, h, want, COUNT);
  }
  devFree(dSend);
  devFree(dRecv);
  free(h), free(want);
}

/* sum of scalar * x: a host int32 scalar 3 (overwritten after creation),
 * a device float32 scalar 2 */
static void checkPreMulSum(ncclComm_t comm) {
  int32_t *h = ints(COUNT), *want = ints(COUNT);
  void* d = devAlloc(COUNT * 4);
  int op = -1;
  int32_t three = 3;
  NCCL_OK(N.ncclRedOpCreatePreMulSum(&op, &three, T_INT32, SCALAR_HOST, comm));
  EXPECT(op >= 5, "ncclRedOpCreatePreMulSum made op %d, not a dynamic op (>= ncclNumOps = 5)", op);
  three = 100;
  for (size_t i = 0; i < COUNT; i++) h[i] = (int32_t)gen(T_INT32, OP_SUM, gRank, i), want[i] = 3 * (int32_t)expected(T_INT32, OP_SUM, i);
  toDev(d, h, COUNT * 4);
  NCCL_OK(N.ncclAllReduce(d, d, COUNT, T_INT32, op, comm, gStream));
  toHost(h, d, COUNT * 4);
  expectBytes("PreMulSum, host scalar 3", T_INT32, h, want, COUNT);
  NCCL_OK(N.ncclRedOpDestroy(op, comm));

  float two = 2.0f, *f = (float*)h, *fw = (float*)want;
  void* dScalar = devAlloc(sizeof(float));
  toDev(dScalar, &two, sizeof(two));
  NCCL_OK(N.ncclRedOpCreatePreMulSum(&op, dScalar, T_FLOAT32, SCALAR_DEVICE, comm));
  for (size_t i = 0; i < COUNT; i++) f[i] = (float)gen(T_FLOAT32, OP_SUM, gRank, i), fw[i] = 2.0f * (float)expected(T_FLOAT32, OP_SUM, i);
  toDev(d, f, COUNT * 4);
  NCCL_OK(N.ncclAllReduce(d, d, COUNT, T_FLOAT32, op, comm, gStream));
  toHost(f, d, COUNT * 4);
  expectBytes("PreMulSum, device scalar 2", T_FLOAT32, f, fw, COUNT);
  NCCL_OK(N.ncclRedOpDestroy(op, comm));
  devFree(dScalar);
  devFree(d);
  free(h), free(want);
}

/* --------------------------------------------- errors and refused calls */

static void checkErrors(ncclComm_t comm) {
  void* d = devAlloc(64);
  int op;
  NCCL_ERR(N.ncclSend(d, 1, T_NUM, 0, comm, gStream), R_INVALID_ARGUMENT, "datatype 12");
  uint8_t one8 = 0x38; /* 1.0 in float8e4m3: fp8 PreMulSum ops are made (NCCL 2.24's types) */
  NCCL_OK(N.ncclRedOpCreatePreMulSum(&op, &one8, T_FP8E4M3, SCALAR_HOST, comm));
  NCCL_OK(N.ncclRedOpDestroy(op, comm));
  NCCL_ERR(N.ncclAllReduce(d, d, 4, T_INT32, -3, comm, gStream), R_INVALID_ARGUMENT, "op -3");

  ncclComm_t none = NULL;
  NCCL_ERR(N.ncclCommShrink(comm, &gRank, 1, &none, NULL, 0), R_INVALID_USAGE, "ncclCommShrink");
  EXPECT(none == NULL, "a refused ncclCommShrink wrote a communicator");
  void* win = NULL;
  NCCL_ERR(N.ncclCommWindowRegister(comm, d, 64, &win, 0), R_INVALID_USAGE, "ncclCommWindowRegister");
  NCCL_ERR(N.ncclCommWindowDeregister(comm, win), R_INVALID_USAGE, "ncclCommWindowDeregister");
  uint64_t simInfo[4] = {24, 0x74685283u, 0, 0};
  NCCL_ERR(N.ncclGroupSimulateEnd(simInfo), R_INVALID_USAGE, "ncclGroupSimulateEnd");
  NCCL_ERR(N.ncclCommRevoke(comm, 0), R_INVALID_USAGE, "ncclCommRevoke");
  ncclComm_t two[2];
  NCCL_ERR(N.ncclCommInitAll(two, 2, NULL), R_INVALID_USAGE, "ncclCommInitAll");

  void* handle = NULL;
  NCCL_OK(N.ncclCommRegister(comm, d, 64, &handle));
  EXPECT(handle != NULL, "ncclCommRegister gave a NULL handle");
  NCCL_OK(N.ncclCommDeregister(comm, handle));
  NCCL_ERR(N.ncclCommDeregister(comm, &handle), R_INVALID_ARGUMENT, "ncclCommRegister");
  NCCL_ERR(N.ncclAllReduce(d, d, 1, T_INT32, OP_SUM, NULL, gStream), R_INVALID_ARGUMENT, "comm is NULL");
  devFree(d);
  NCCL_OK(N.ncclCommDestroy(NULL));
  NCCL_OK(N.ncclCommAbort(NULL));
}

static void checkVersionAndStrings(void) {
  int v = 0;
  NCCL_OK(N.ncclGetVersion(&v));
  EXPECT(v == 2 * 10000 + 28 * 100 + 0, "simulated ranks must report NCCL 2.28.0 (22800), got %d", v);
  for (int a = 0; a <= R_TIMEOUT; a++) {
    const char* sa = N.ncclGetErrorString(a);
    EXPECT(sa && sa[0], "ncclGetErrorString(%d) is empty", a);
    for (int b = 0; b < a; b++)
      EXPECT(strcmp(sa, N.ncclGetErrorString(b)) != 0, "ncclGetErrorString(%d) equals that of %d: %s", a, b, sa);
  }
  EXPECT(strstr(N.ncclGetErrorString(R_TIMEOUT + 1), "unknown"), "ncclGetErrorString(9) does not say unknown");
}

#include "rank_nccl_abi_comms.h"

#endif
