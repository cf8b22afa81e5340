/* The host device: selection, memory, stream order, flags between streams and
 * host threads, error propagation and recovery, default stream, many streams,
 * destroy with queued work. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/param.h"
#include "base/result.h"
#include "device/device.h"

#define CHECK(cond)                                                           \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);         \
      exit(1);                                                                \
    }                                                                         \
  } while (0)
#define CHECK_OK(call)                                                        \
  do {                                                                        \
    gbResult_t r_ = (call);                                                   \
    if (r_ != gbSuccess) {                                                    \
      fprintf(stderr, "FAIL %s:%d: %s returned %d (%s)\n", __FILE__, __LINE__, \
              #call, r_, gbErrorLast());                                      \
      exit(1);                                                                \
    }                                                                         \
  } while (0)

static const gbDeviceOps* dev;

/* ------------------------------------------------ a gate with a deadline */

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int open;
} gate_t;

static void gateInit(gate_t* g) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, &ca);
  pthread_condattr_destroy(&ca);
  g->open = 0;
}

static void gateOpen(gate_t* g) {
  pthread_mutex_lock(&g->mu);
  g->open = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

/* 0 when opened, -1 when the deadline passed first. */
static int gateWait(gate_t* g, double seconds) {
  gbDeadline_t d = gbDeadlineIn(seconds);
  struct timespec ts = {(time_t)(d.ns / 1000000000LL), (long)(d.ns % 1000000000LL)};
  pthread_mutex_lock(&g->mu);
  int rc = 0;
  while (!g->open && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&g->cv, &g->mu, &ts);
  int ok = g->open;
  pthread_mutex_unlock(&g->mu);
  return ok ? 0 : -1;
}

/* ------------------------------------------------ host functions */

static int frees; /* freeArg calls, atomically */
static void countFree(void* arg) {
  __atomic_fetch_add(&frees, 1, __ATOMIC_RELAXED);
  free(arg);
}

typedef struct {
  int* log;
  int* pos;
  int value;
} logArg_t;

static gbResult_t logFn(void* p) {
  logArg_t* a = p;
  a->log[(*a->pos)++] = a->value;
  return gbSuccess;
}

static void enqueueLog(void* stream, int* log, int* pos, int value) {
  logArg_t* a = malloc(sizeof(*a));
  CHECK(a != NULL);
  a->log = log;
  a->pos = pos;
  a->value = value;
  CHECK_OK(dev->launchHostFn(stream, logFn, a, countFree));
}

static int ticket;
static gbResult_t ticketFn(void* p) {
  *(int*)p = __atomic_fetch_add(&ticket, 1, __ATOMIC_SEQ_CST);
  return gbSuccess;
}

static gbResult_t incFn(void* p) {
  __atomic_fetch_add((int*)p, 1, __ATOMIC_RELAXED);
  return gbSuccess;
}

static gbResult_t failFn(void* p) {
  return gbErrorSet(gbInternalError, "test failure %d", *(int*)p);
}

static gbResult_t gateFn(void* p) {
  if (gateWait((gate_t*)p, 10.0) != 0) return gbErrorSet(gbTimeout, "test gate never opened");
  return gbSuccess;
}

/* ------------------------------------------------ tests */

static void testSelectionCpu(void) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    alarm(30); /* bounds the parent's wait below */
    unsetenv("GPUBRIDGE_VENDOR");
    setenv("CUDA_VISIBLE_DEVICES", "", 1); /* no GPU, also on a GPU machine */
    gbParamReset();
    const gbDeviceOps* d = NULL;
    if (gbDeviceGet(&d) != gbSuccess) _exit(2);
    if (strcmp(d->name, "host") != 0) _exit(3);
    if (strcmp(d->vendor, "cpu") != 0) _exit(4);
    if (d->runKind != gbRunCpu) _exit(5);
    _exit(0);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fprintf(stderr, "cpu selection child: status 0x%x\n", status);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void testSelectionSimulated(void) {
  setenv("GPUBRIDGE_VENDOR", "nvidia", 1);
  gbParamReset();
  const gbDeviceOps* d = NULL;
  CHECK_OK(gbDeviceGet(&d));
  CHECK(strcmp(d->name, "host") == 0);
  CHECK(strcmp(d->vendor, "nvidia") == 0);
  CHECK(d->runKind == gbRunSimulated);
  CHECK(d->launchHostFn == gbDeviceHostOps()->launchHostFn);
  /* The shared table is untouched by the process's choice. */
  CHECK(strcmp(gbDeviceHostOps()->vendor, "cpu") == 0);
  const gbDeviceOps* again = NULL;
  CHECK_OK(gbDeviceGet(&again));
  CHECK(again == d);
}

static void testMemory(void) {
  void *a = NULL, *b = NULL, *c = NULL, *h = NULL;
  CHECK_OK(dev->memAlloc(&a, 0));
  CHECK_OK(dev->memAlloc(&b, 0));
  CHECK(a != NULL && b != NULL && a != b);
  CHECK_OK(dev->memAlloc(&c, 1000));
  CHECK(((uintptr_t)c % 64) == 0);
  unsigned char src[1000], back[1000];
  for (int i = 0; i < 1000; i++) src[i] = (unsigned char)(i * 7 + 3);
  memset(back, 0, sizeof(back));
  CHECK_OK(dev->memcpyToDevice(c, src, sizeof(src)));
  CHECK_OK(dev->memcpyToHost(back, c, sizeof(back)));
  CHECK(memcmp(src, back, sizeof(src)) == 0);
  CHECK_OK(dev->hostAlloc(&h, 4096));
  CHECK(((uintptr_t)h % 64) == 0);
  for (int i = 0; i < 4096; i++) CHECK(((unsigned char*)h)[i] == 0);
  CHECK_OK(dev->hostFree(h));
  CHECK_OK(dev->memFree(a));
  CHECK_OK(dev->memFree(b));
  CHECK_OK(dev->memFree(c));
}

static void testOrder(void) {
  enum { N = 1000 };
  void* s = NULL;
  CHECK_OK(dev->streamCreate(&s));
  static int log[N];
  int pos = 0;
  int before = __atomic_load_n(&frees, __ATOMIC_RELAXED);
  for (int i = 0; i < N; i++) enqueueLog(s, log, &pos, i);
  CHECK_OK(dev->streamSynchronize(s));
  CHECK(pos == N);
  for (int i = 0; i < N; i++) CHECK(log[i] == i);
  CHECK(__atomic_load_n(&frees, __ATOMIC_RELAXED) - before == N);
  CHECK_OK(dev->streamDestroy(s));
}

typedef struct {
  const unsigned char* a;
  const unsigned char* b;
  size_t n;
  int equal;
} cmpArg_t;
static gbResult_t cmpFn(void* p) {
  cmpArg_t* c = p;
  c->equal = memcmp(c->a, c->b, c->n) == 0;
  return gbSuccess;
}

static void testCopyAsync(void) {
  enum { BYTES = 1 << 20 };
  void* s = NULL;
  CHECK_OK(dev->streamCreate(&s));
  unsigned char* src = malloc(BYTES);
  unsigned char* mid = calloc(1, BYTES);
  unsigned char* dst = calloc(1, BYTES);
  CHECK(src && mid && dst);
  unsigned x = 12345;
  for (int i = 0; i < BYTES; i++) {
    x = x * 1103515245u + 12345u;
    src[i] = (unsigned char)(x >> 16);
  }
  /* The second copy reads what the first wrote: stream order. */
  CHECK_OK(dev->copyAsync(mid, src, BYTES, s));
  CHECK_OK(dev->copyAsync(dst, mid, BYTES, s));
  cmpArg_t cmp = {src, dst, BYTES, 0};
  CHECK_OK(dev->launchHostFn(s, cmpFn, &cmp, NULL));
  CHECK_OK(dev->streamSynchronize(s));
  CHECK(cmp.equal == 1);
  CHECK(memcmp(src, dst, BYTES) == 0);
  CHECK_OK(dev->copyAsync(dst, dst, BYTES, s)); /* in place: a no-op */
  CHECK_OK(dev->copyAsync(dst, src, 0, s));
  CHECK_OK(dev->streamSynchronize(s));
  CHECK(memcmp(src, dst, BYTES) == 0);
  free(src);
  free(mid);
  free(dst);
  CHECK_OK(dev->streamDestroy(s));
}

/* Two streams hand a baton back and forth through two flags: the log must
 * alternate B1 A1 B2 A2 ..., which only holds if each wait really waits. */
static void testFlagBetweenStreams(void) {
  enum { ROUNDS = 200 };
  void *a = NULL, *b = NULL;
  CHECK_OK(dev->streamCreate(&a));
  CHECK_OK(dev->streamCreate(&b));
  gbFlag_t* f1 = NULL;
  gbFlag_t* f2 = NULL;
  CHECK_OK(dev->hostAlloc((void**)&f1, sizeof(*f1)));
  CHECK_OK(dev->hostAlloc((void**)&f2, sizeof(*f2)));
  static int log[2 * ROUNDS];
  int pos = 0; /* only one worker touches it at a time: the flags order them */
  /* A is queued first, so without working waits it would log first. */
  for (int i = 1; i <= ROUNDS; i++) {
    CHECK_OK(dev->flagWait(f1, (uint64_t)i, a));
    enqueueLog(a, log, &pos, 2 * i + 1);
    CHECK_OK(dev->flagWrite(f2, (uint64_t)i, a));
  }
  for (int i = 1; i <= ROUNDS; i++) {
    enqueueLog(b, log, &pos, 2 * i);
    CHECK_OK(dev->flagWrite(f1, (uint64_t)i, b));
    CHECK_OK(dev->flagWait(f2, (uint64_t)i, b));
  }
  CHECK_OK(dev->streamSynchronize(a));
  CHECK_OK(dev->streamSynchronize(b));
  CHECK(pos == 2 * ROUNDS);
  for (int i = 0; i < 2 * ROUNDS; i++) CHECK(log[i] == i + 2);
  CHECK(f1->value == ROUNDS && f2->value == ROUNDS && f1->error == 0 && f2->error == 0);
  CHECK_OK(dev->hostFree(f1));
  CHECK_OK(dev->hostFree(f2));
  CHECK_OK(dev->streamDestroy(a));
  CHECK_OK(dev->streamDestroy(b));
}

typedef struct {
  gbFlag_t* flag;
  int ticketBefore;
  int error;
} releaser_t;

static void* releaserMain(void* p) {
  releaser_t* r = p;
  gbFlagSetHost(r->flag, 3, 0); /* below the target: the stream keeps waiting */
  r->ticketBefore = __atomic_fetch_add(&ticket, 1, __ATOMIC_SEQ_CST);
  gbFlagSetHost(r->flag, 5, r->error);
  return NULL;
}

static void testHostThreadRelease(void) {
  void* s = NULL;
  CHECK_OK(dev->streamCreate(&s));
  gbFlag_t flag;
  memset(&flag, 0, sizeof(flag));
  int ticketStream = -1;
  CHECK_OK(dev->flagWait(&flag, 5, s));
  CHECK_OK(dev->launchHostFn(s, ticketFn, &ticketStream, NULL));
  releaser_t r = {&flag, -1, 0};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, releaserMain, &r) == 0);
  CHECK_OK(dev->streamSynchronize(s));
  CHECK(pthread_join(t, NULL) == 0);
  CHECK(r.ticketBefore >= 0 && ticketStream > r.ticketBefore);

  /* A flag carrying an error fails the stream and drops what follows. */
  gbFlag_t bad;
  memset(&bad, 0, sizeof(bad));
  int count = 0;
  int before = __atomic_load_n(&frees, __ATOMIC_RELAXED);
  CHECK_OK(dev->flagWait(&bad, 5, s));
  int* arg = malloc(sizeof(int));
  CHECK(arg != NULL);
  *arg = 0;
  CHECK_OK(dev->launchHostFn(s, incFn, &count, NULL));
  CHECK_OK(dev->launchHostFn(s, incFn, arg, countFree));
  releaser_t rb = {&bad, -1, gbRemoteError};
  CHECK(pthread_create(&t, NULL, releaserMain, &rb) == 0);
  CHECK(dev->streamSynchronize(s) == gbRemoteError);
  CHECK(pthread_join(t, NULL) == 0);
  CHECK(count == 0);
  CHECK(__atomic_load_n(&frees, __ATOMIC_RELAXED) - before == 1);
  CHECK_OK(dev->streamSynchronize(s));
  CHECK_OK(dev->streamDestroy(s));
}

static void testFlagWaitHost(void) {
  gbFlag_t f;
  memset(&f, 0, sizeof(f));
  gbFlagSetHost(&f, 7, 0);
  CHECK_OK(gbFlagWaitHost(&f, 7, 1.0, NULL));
  CHECK_OK(gbFlagWaitHost(&f, 3, 1.0, NULL));
  int64_t t0 = gbClockNowNs();
  CHECK(gbFlagWaitHost(&f, 8, 0.05, NULL) == gbTimeout);
  double waited = (double)(gbClockNowNs() - t0) / 1e9;
  CHECK(waited >= 0.05 && waited < 5.0);
  CHECK(strstr(gbErrorLast(), "flag") != NULL);
  atomic_int abortFlag = 1;
  CHECK(gbFlagWaitHost(&f, 8, 10.0, &abortFlag) == gbRemoteError);
  abortFlag = 0;
  CHECK(gbFlagWaitHost(&f, 8, 0.01, &abortFlag) == gbTimeout);
  gbFlagSetHost(&f, 7, gbSystemError);
  CHECK(gbFlagWaitHost(&f, 8, 10.0, NULL) == gbSystemError);
  CHECK(f.value == 7 && f.error == gbSystemError);
  /* Released with an error, then lowered by a writer that does not look (a
   * member's late signal): the error's value is due again, yet an abort
   * still ends the wait at once, and without one the wait goes on. */
  gbFlagSetHost(&f, 1000, gbRemoteError);
  gbFlagSetHost(&f, 9, 0);
  abortFlag = 1;
  t0 = gbClockNowNs();
  CHECK(gbFlagWaitHost(&f, 9, 10.0, &abortFlag) == gbRemoteError);
  CHECK((double)(gbClockNowNs() - t0) / 1e9 < 5.0);
  CHECK(gbFlagWaitHost(&f, 9, 0.02, NULL) == gbTimeout);
}

static void testFailingFn(void) {
  void* s = NULL;
  CHECK_OK(dev->streamCreate(&s));
  int ran = 0;
  int code = 42;
  gbFlag_t flag;
  memset(&flag, 0, sizeof(flag));
  int before = __atomic_load_n(&frees, __ATOMIC_RELAXED);
  CHECK_OK(dev->launchHostFn(s, incFn, &ran, NULL));
  CHECK_OK(dev->launchHostFn(s, failFn, &code, NULL));
  for (int i = 0; i < 3; i++) {
    int* arg = malloc(sizeof(int));
    CHECK(arg != NULL);
    CHECK_OK(dev->launchHostFn(s, incFn, &ran, NULL));
    CHECK_OK(dev->launchHostFn(s, incFn, arg, countFree));
  }
  unsigned char src[16] = {1, 2, 3}, dst[16] = {0};
  CHECK_OK(dev->copyAsync(dst, src, sizeof(src), s));
  CHECK_OK(dev->flagWrite(&flag, 1, s));
  CHECK(dev->streamSynchronize(s) == gbInternalError);
  CHECK(strstr(gbErrorLast(), "test failure 42") != NULL);
  CHECK(ran == 1);                                               /* later work dropped */
  CHECK(__atomic_load_n(&frees, __ATOMIC_RELAXED) - before == 3); /* yet released */
  CHECK(dst[0] == 0);
  /* The dropped flag write tells its waiter why, without moving the value. */
  CHECK(flag.value == 0 && flag.error == gbInternalError);
  /* The error is returned once; the stream then works again. */
  CHECK_OK(dev->streamSynchronize(s));
  CHECK_OK(dev->launchHostFn(s, incFn, &ran, NULL));
  CHECK_OK(dev->copyAsync(dst, src, sizeof(src), s));
  CHECK_OK(dev->streamSynchronize(s));
  CHECK(ran == 2 && memcmp(dst, src, sizeof(src)) == 0);
  CHECK_OK(dev->streamDestroy(s));
}

static void testDefaultStream(void) {
  unsigned char src[64], dst[64];
  for (int i = 0; i < 64; i++) src[i] = (unsigned char)(255 - i);
  memset(dst, 0, sizeof(dst));
  int ran = 0;
  int code = 7;
  CHECK_OK(dev->copyAsync(dst, src, sizeof(src), NULL));
  CHECK_OK(dev->launchHostFn(NULL, incFn, &ran, NULL));
  CHECK_OK(dev->streamSynchronize(NULL));
  CHECK(memcmp(dst, src, sizeof(src)) == 0 && ran == 1);
  CHECK_OK(dev->launchHostFn(NULL, failFn, &code, NULL));
  CHECK_OK(dev->launchHostFn(NULL, incFn, &ran, NULL));
  CHECK(dev->streamSynchronize(NULL) == gbInternalError);
  CHECK(ran == 1);
  CHECK_OK(dev->launchHostFn(NULL, incFn, &ran, NULL));
  CHECK_OK(dev->streamSynchronize(NULL));
  CHECK(ran == 2);
  CHECK(dev->streamDestroy(NULL) == gbInvalidUsage);
  CHECK_OK(dev->streamSynchronize(NULL)); /* still alive */

  static uint64_t notAStream[32];
  CHECK(dev->streamSynchronize(notAStream) == gbInvalidArgument);
  CHECK(dev->launchHostFn(notAStream, incFn, &ran, NULL) == gbInvalidArgument);
}

typedef struct {
  int count;
  pthread_t thread;
} perStream_t;

static gbResult_t perStreamFn(void* p) {
  perStream_t* ps = p;
  ps->count++;
  ps->thread = pthread_self();
  return gbSuccess;
}

static void testManyStreams(void) {
  enum { NS = 64, PER = 200 };
  void* s[NS];
  static perStream_t ps[NS];
  static int total;
  for (int i = 0; i < NS; i++) CHECK_OK(dev->streamCreate(&s[i]));
  for (int k = 0; k < PER; k++) {
    for (int i = 0; i < NS; i++) {
      CHECK_OK(dev->launchHostFn(s[i], perStreamFn, &ps[i], NULL));
      CHECK_OK(dev->launchHostFn(s[i], incFn, &total, NULL));
    }
  }
  for (int i = 0; i < NS; i++) CHECK_OK(dev->streamSynchronize(s[i]));
  CHECK(__atomic_load_n(&total, __ATOMIC_RELAXED) == NS * PER);
  for (int i = 0; i < NS; i++) {
    CHECK(ps[i].count == PER);
    CHECK(!pthread_equal(ps[i].thread, pthread_self()));
    for (int j = 0; j < i; j++) CHECK(!pthread_equal(ps[i].thread, ps[j].thread));
  }
  for (int i = 0; i < NS; i++) CHECK_OK(dev->streamDestroy(s[i]));
}

static void testDestroyQueued(void) {
  enum { N = 1000 };
  void* s = NULL;
  CHECK_OK(dev->streamCreate(&s));
  gate_t gate;
  gateInit(&gate);
  static int count;
  int before = __atomic_load_n(&frees, __ATOMIC_RELAXED);
  /* The worker blocks in the gate while the queue fills: enqueues must not
   * wait for running work, or the gate's deadline fails the stream. */
  CHECK_OK(dev->launchHostFn(s, gateFn, &gate, NULL));
  for (int i = 0; i < N; i++) {
    int* arg = malloc(sizeof(int));
    CHECK(arg != NULL);
    *arg = 0;
    CHECK_OK(dev->launchHostFn(s, incFn, &count, NULL));
    CHECK_OK(dev->launchHostFn(s, incFn, arg, countFree));
  }
  gateOpen(&gate);
  CHECK_OK(dev->streamDestroy(s)); /* drains, then joins */
  CHECK(__atomic_load_n(&count, __ATOMIC_RELAXED) == N);
  CHECK(__atomic_load_n(&frees, __ATOMIC_RELAXED) - before == N);

  /* Destroy of a failed stream still releases every argument. */
  CHECK_OK(dev->streamCreate(&s));
  int code = 1;
  before = __atomic_load_n(&frees, __ATOMIC_RELAXED);
  CHECK_OK(dev->launchHostFn(s, failFn, &code, NULL));
  for (int i = 0; i < 10; i++) {
    int* arg = malloc(sizeof(int));
    CHECK(arg != NULL);
    CHECK_OK(dev->launchHostFn(s, incFn, arg, countFree));
  }
  CHECK_OK(dev->streamDestroy(s));
  CHECK(__atomic_load_n(&frees, __ATOMIC_RELAXED) - before == 10);
}

int main(void) {
  testSelectionCpu(); /* first: forks before any thread exists */
  testSelectionSimulated();
  dev = gbDeviceHostOps();
  testMemory();
  testOrder();
  testCopyAsync();
  testFlagBetweenStreams();
  testHostThreadRelease();
  testFlagWaitHost();
  testFailingFn();
  testDefaultStream();
  testManyStreams();
  testDestroyQueued();
  printf("test_device_host: all passed\n");
  return 0;
}
