/* Communicator cases of rank_nccl_abi.c: configs of several NCCL versions
 * (blocking and not), split, scalable init, a clique of one, abort, a
 * deadline, and the whole sequence (caseAll). */
#ifndef GB_TESTS_MP_RANK_NCCL_ABI_COMMS_H
#define GB_TESTS_MP_RANK_NCCL_ABI_COMMS_H

/* Size, rank, device (0 on a simulated rank) and one all-reduce: members
 * contribute worldRank + 1 + i, so element i is memberSum + n * i. */
static void checkWorks(ncclComm_t comm, const char* what, int n, int rank, int memberSum) {
  int got = -1;
  NCCL_OK(N.ncclCommCount(comm, &got));
  EXPECT(got == n, "%s: ncclCommCount says %d, expected %d", what, got, n);
  NCCL_OK(N.ncclCommUserRank(comm, &got));
  EXPECT(got == rank, "%s: ncclCommUserRank says %d, expected %d", what, got, rank);
  NCCL_OK(N.ncclCommCuDevice(comm, &got));
  EXPECT(got == 0, "%s: ncclCommCuDevice says %d on a simulated rank, expected 0", what, got);
  int32_t h[7], want[7];
  for (int i = 0; i < 7; i++) h[i] = gRank + 1 + i, want[i] = memberSum + n * i;
  void* d = devAlloc(sizeof(h));
  toDev(d, h, sizeof(h));
  NCCL_OK(N.ncclAllReduce(d, d, 7, T_INT32, OP_SUM, comm, gStream));
  toHost(h, d, sizeof(h));
  expectBytes(what, T_INT32, h, want, 7);
  devFree(d);
}

static int worldSum(void) { return gN * (gN + 1) / 2; }

static void waitReady(ncclComm_t comm, const char* what) {
  double end = nowS() + ASYNC_WAIT_S;
  nr_t state = R_IN_PROGRESS;
  for (;;) {
    NCCL_OK(N.ncclCommGetAsyncError(comm, &state));
    if (state != R_IN_PROGRESS) break;
    if (nowS() > end) DIE("%s: still in progress after %.0f s", what, ASYNC_WAIT_S);
    pause10ms();
  }
  EXPECT(state == R_SUCCESS, "%s: non-blocking init ended with %d: %s", what, state, N.ncclGetLastError(comm));
}

/* ------------------------------------------------------------- configs */

static const configField_t* field(const char* name) {
  for (size_t i = 0; i < sizeof(configFields) / sizeof(configFields[0]); i++)
    if (strcmp(configFields[i].name, name) == 0) return &configFields[i];
  DIE("no config field %s", name);
}

static void setInt(char* cfg, size_t size, const char* name, int v) {
  const configField_t* f = field(name);
  if (f->offset + sizeof(int) <= size) memcpy(cfg + f->offset, &v, sizeof(v));
}

static void setPtr(char* cfg, size_t size, const char* name, const char* v) {
  const configField_t* f = field(name);
  if (f->offset + sizeof(v) <= size) memcpy(cfg + f->offset, &v, sizeof(v));
}

/* What NCCL_CONFIG_INITIALIZER of that version holds, then blocking and a
 * few of NCCL's tuning fields (ignored by gpubridge) where they exist. */
static void fillConfig(uint64_t* store, size_t size, unsigned version, unsigned magic, int blocking,
                       const char* name) {
  char* cfg = (char*)store;
  memset(cfg, 0, 128);
  memcpy(cfg, &size, sizeof(size));
  memcpy(cfg + 8, &magic, 4);
  memcpy(cfg + 12, &version, 4);
  for (size_t i = 0; i < sizeof(configFields) / sizeof(configFields[0]); i++)
    if (!configFields[i].isPointer) setInt(cfg, size, configFields[i].name, UNDEF_INT);
  setInt(cfg, size, "blocking", blocking);
  setPtr(cfg, size, "netName", "Socket");
  setInt(cfg, size, "splitShare", 1);
  setPtr(cfg, size, "commName", name);
  setInt(cfg, size, "CTAPolicy", 1);
  setInt(cfg, size, "nvlinkCentricSched", 0);
  setInt(cfg, size, "graphUsageMode", 1);
}

static void checkConfigs(void) {
  static const struct { const char* label; size_t size; unsigned version; int blocking; } cases[] = {
      {"2.14", 24, 21403, 1}, {"2.17", 40, 21703, 0}, {"2.18", 48, 21805, 0}, {"2.26", 48, 22605, 1},
      {"2.27", 72, 22703, 0}, {"2.28", 80, 22809, 1}, {"2.30", 96, 23000, 0},
  };
  uint64_t store[16];
  for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
    char what[64];
    snprintf(what, sizeof(what), "config of NCCL %s (%zu bytes)", cases[k].label, cases[k].size);
    ncclUniqueId id = shareId(cases[k].label);
    fillConfig(store, cases[k].size, cases[k].version, CONFIG_MAGIC, cases[k].blocking, what);
    ncclComm_t c = NULL;
    nr_t r = N.ncclCommInitRankConfig(&c, gN, id, gRank, store);
    gChecks++;
    if (r != (cases[k].blocking ? R_SUCCESS : R_IN_PROGRESS) || !c)
      DIE("%s: ncclCommInitRankConfig returned %d (comm %p), expected %d: %s", what, r, (void*)c,
          cases[k].blocking ? R_SUCCESS : R_IN_PROGRESS, N.ncclGetLastError(NULL));
    if (!cases[k].blocking) waitReady(c, what);
    checkWorks(c, what, gN, gRank, worldSum());
    if (strcmp(cases[k].label, "2.27") == 0) { /* a split without a config inherits non-blocking */
      ncclComm_t child = NULL;
      int color = gRank % 2, n = 0, rank = 0, sum = 0;
      for (int p = color; p < gN; p += 2) n++, sum += p + 1, rank += p < gRank;
      NCCL_ERR(N.ncclCommSplit(c, color, gRank, &child, NULL), R_IN_PROGRESS, NULL);
      waitReady(child, "split of a non-blocking communicator");
      checkWorks(child, "split of a non-blocking communicator", n, rank, sum);
      NCCL_OK(N.ncclCommDestroy(child));
    }
    NCCL_OK(N.ncclCommDestroy(c));
  }
  /* refused before any rendezvous: no peer needed */
  ncclUniqueId zero;
  memset(&zero, 0, sizeof(zero));
  ncclComm_t c = (ncclComm_t)&zero;
  fillConfig(store, 80, 22809, 0x12345678u, 1, "bad");
  NCCL_ERR(N.ncclCommInitRankConfig(&c, gN, zero, gRank, store), R_INVALID_ARGUMENT, "magic");
  EXPECT(c == NULL, "a failed init left comm %p", (void*)c);
  fillConfig(store, 80, 22809, CONFIG_MAGIC, 2, "bad");
  NCCL_ERR(N.ncclCommInitRankConfig(&c, gN, zero, gRank, store), R_INVALID_ARGUMENT, "blocking");
  fillConfig(store, 8, 22809, CONFIG_MAGIC, 1, "bad");
  NCCL_ERR(N.ncclCommInitRankConfig(&c, gN, zero, gRank, store), R_INVALID_ARGUMENT, "size");
}

/* --------------------------------------------------- other communicators */

static void checkSplit(ncclComm_t world) {
  /* parity, keys -rank: members in descending world rank */
  int color = gRank % 2, n = 0, rank = 0, sum = 0;
  for (int p = color; p < gN; p += 2) n++, sum += p + 1, rank += p > gRank;
  ncclComm_t child = NULL;
  NCCL_OK(N.ncclCommSplit(world, color, -gRank, &child, NULL));
  EXPECT(child != NULL, "ncclCommSplit gave no communicator for color %d", color);
  checkWorks(child, "split by parity, keys reversed", n, rank, sum);
  /* rank 0 takes no part */
  ncclComm_t rest = (ncclComm_t)&n;
  NCCL_OK(N.ncclCommSplit(world, gRank == 0 ? SPLIT_NOCOLOR : 0, gRank, &rest, NULL));
  if (gRank == 0) EXPECT(rest == NULL, "NCCL_SPLIT_NOCOLOR gave communicator %p", (void*)rest);
  else checkWorks(rest, "split without rank 0", gN - 1, gRank - 1, worldSum() - 1);
  NCCL_OK(N.ncclCommDestroy(child));
  if (rest) NCCL_OK(N.ncclCommDestroy(rest));
}

static void checkScalable(void) {
  ncclUniqueId ids[1] = {shareId("scalable")};
  ncclComm_t c = NULL;
  NCCL_ERR(N.ncclCommInitRankScalable(&c, gN, gRank, 0, ids, NULL), R_INVALID_ARGUMENT, "nId");
  NCCL_OK(N.ncclCommInitRankScalable(&c, gN, gRank, 1, ids, NULL));
  checkWorks(c, "ncclCommInitRankScalable", gN, gRank, worldSum());
  NCCL_OK(N.ncclCommDestroy(c));
}

static void checkInitAllOfOne(void) {
  ncclComm_t one = NULL;
  NCCL_OK(N.ncclCommInitAll(&one, 1, NULL));
  checkWorks(one, "ncclCommInitAll of one", 1, 0, gRank + 1);
  NCCL_OK(N.ncclCommDestroy(one));
}

/* Every rank has finished its work on c before any aborts it: an abort
 * drops what peers have not received yet. The all-reduce on the world
 * completes on a rank only after every rank contributed, that is after each
 * finished (synchronized) its all-reduce on c. */
static void checkAbort(ncclComm_t world) {
  ncclComm_t c = NULL;
  NCCL_OK(N.ncclCommInitRank(&c, gN, shareId("abort"), gRank));
  checkWorks(c, "before ncclCommAbort", gN, gRank, worldSum());
  checkWorks(world, "barrier before ncclCommAbort", gN, gRank, worldSum());
  NCCL_OK(N.ncclCommAbort(c));
  int n;
  nr_t state;
  NCCL_ERR(N.ncclCommCount(c, &n), R_INVALID_ARGUMENT, "destroyed or aborted");
  NCCL_ERR(N.ncclCommGetAsyncError(c, &state), R_INVALID_ARGUMENT, "ncclCommGetAsyncError");
  NCCL_ERR(N.ncclCommDestroy(c), R_INVALID_ARGUMENT, "ncclCommDestroy");
}

static void caseAll(void) {
  checkVersionAndStrings();
  ncclComm_t world = NULL;
  NCCL_OK(N.ncclCommInitRank(&world, gN, shareId("world"), gRank));
  checkWorks(world, "world", gN, gRank, worldSum());
  checkAllReduce(world);
  checkBroadcastReduce(world);
  checkBlocks(world);
  checkRooted(world);
  checkP2p(world);
  checkPreMulSum(world);
  checkErrors(world);
  checkSplit(world);
  checkConfigs();
  checkScalable();
  checkInitAllOfOne();
  checkAbort(world);
  NCCL_OK(N.ncclCommFinalize(world));
  NCCL_OK(N.ncclCommDestroy(world));
  int n;
  NCCL_ERR(N.ncclCommCount(world, &n), R_INVALID_ARGUMENT, "destroyed");
}

/* A rank that never comes: the communicator cannot form within
 * GPUBRIDGE_TIMEOUT. The driver checks the code and the text. */
static void caseTimeout(void) {
  ncclComm_t c = NULL;
  nr_t r = N.ncclCommInitRank(&c, gN + 1, shareId("timeout"), gRank);
  printf("timeout-result: %d: %s\n", r, r == R_SUCCESS ? "" : N.ncclGetLastError(NULL));
  EXPECT(r != R_SUCCESS && c == NULL, "init of %d ranks with %d present returned %d", gN + 1, gN, r);
}

/* A vendor library (--fake: a libnccl.so.2 the driver compiles) that calls
 * its own exported ncclCommGetAsyncError through its PLT while
 * libgpubridge-nccl is preloaded: the call must come back to the vendor's
 * definition (which answers 42), while this program's own call reaches
 * gpubridge's (a NULL comm: ncclInvalidArgument). */
static void caseInterpose(const char* fake) {
  if (!fake) DIE("--case interpose needs --fake PATH");
  void* lib = dlopen(fake, RTLD_NOW | RTLD_LOCAL);
  if (!lib) DIE("dlopen %s: %s", fake, dlerror());
  void* sym = dlsym(lib, "fakeCallsItself");
  if (!sym) DIE("%s has no fakeCallsItself", fake);
  nr_t (*callsItself)(void);
  memcpy(&callsItself, &sym, sizeof(sym));
  nr_t got = callsItself();
  EXPECT(got == 42, "the vendor's call to its own ncclCommGetAsyncError returned %d, not its own answer 42", got);
  nr_t state;
  NCCL_ERR(N.ncclCommGetAsyncError(NULL, &state), R_INVALID_ARGUMENT, "comm is NULL");
  printf("interpose: vendor-internal call answered %d\n", got);
}

#endif
