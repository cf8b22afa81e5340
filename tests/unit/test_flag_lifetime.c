/* A flag's waiter may free it as soon as it sees the value it waits for
 * (device.h), so gbFlagSetHost must touch nothing of the flag after the
 * store of value.
 *
 * 1. Touch after the store, seen deterministically: the flag is placed so
 *    that value ends a page and the rest of the flag lies on the next page,
 *    which is made inaccessible. A setter that touches that page faults; the
 *    SIGSEGV handler notes whether value already held the new value (a
 *    touch after the store: what lets a freeing waiter's memory be read),
 *    opens the page and lets the access run. Done with and without a waiter
 *    asleep on another flag (setters then take their wake-up path).
 * 1b. An error set together with a value (stored first, so that a waiter
 *    that sees the value sees the error) must not release the waiter before
 *    the value is in: value is placed on a read-only page, so the setter
 *    stops at its store in a SIGSEGV handler that gives the waiter 200 ms
 *    to return on the error alone.
 * 2. Set-then-free across threads, many times over: a waiter frees each
 *    flag the moment it sees the value, as gbCommSplit's exchange and
 *    teardown do. A read after free is reported by the sanitizer builds
 *    (GPUBRIDGE_SANITIZE=address or thread), which run this test in CI.
 * 3. Waking still works: waiters asleep on flags are released by host
 *    setters and see the values. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "device/device.h"

_Static_assert(offsetof(gbFlag_t, value) == 0, "the test places value at the end of a page");

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------ 1. touch after the store */

static char* guardPage;
static size_t pageBytes;
static gbFlag_t* guarded;
static uint64_t storing;
static volatile sig_atomic_t touchedAfter, touchedBefore;

static void onSegv(int sig, siginfo_t* info, void* ctx) {
  (void)ctx;
  char* addr = info->si_addr;
  if (addr >= guardPage && addr < guardPage + pageBytes) {
    if (atomic_load_explicit(&guarded->value, memory_order_seq_cst) == storing) touchedAfter = 1;
    else touchedBefore = 1;
    mprotect(guardPage, pageBytes, PROT_READ | PROT_WRITE);
    return;
  }
  signal(sig, SIG_DFL); /* not ours: the access runs again and crashes as it would */
}

typedef struct {
  gbFlag_t flag;
  pid_t tid;
  gbResult_t res;
} sleeper_t;

static void* sleeperMain(void* arg) {
  sleeper_t* s = arg;
  __atomic_store_n(&s->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
  s->res = gbFlagWaitHost(&s->flag, 1, 30.0, NULL);
  return NULL;
}

/* Whether thread tid is asleep in the kernel (state S: its futex wait). */
static int asleep(pid_t tid) {
  char path[64], buf[256];
  snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
  FILE* f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = 0;
  char* close = strrchr(buf, ')');
  return close && close[1] == ' ' && close[2] == 'S';
}

static void guardedSet(uint64_t value, int error, const char* when) {
  memset(guardPage, 0, pageBytes);
  guarded->value = value - 1;
  touchedAfter = touchedBefore = 0;
  storing = value;
  CHECK(mprotect(guardPage, pageBytes, PROT_NONE) == 0, "mprotect: %s", strerror(errno));
  gbFlagSetHost(guarded, value, error);
  mprotect(guardPage, pageBytes, PROT_READ | PROT_WRITE);
  CHECK(guarded->value == value, "%s: the flag holds %llu, not %llu", when, (unsigned long long)guarded->value,
        (unsigned long long)value);
  CHECK(!touchedAfter, "%s: gbFlagSetHost touched the flag after storing the value that releases its waiter (a "
        "waiter that frees the flag then has its memory read or written)", when);
  /* The error is stored before the value (so the waiter sees both). */
  if (error) CHECK(touchedBefore && guarded->error == error, "%s: the error was not stored before the value", when);
}

static void testTouchAfterStore(void) {
  pageBytes = (size_t)sysconf(_SC_PAGESIZE);
  char* base = mmap(NULL, 2 * pageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(base != MAP_FAILED, "mmap: %s", strerror(errno));
  if (base == MAP_FAILED) return;
  guardPage = base + pageBytes;
  guarded = (gbFlag_t*)(void*)(guardPage - sizeof(uint64_t));
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = onSegv;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  struct sigaction old;
  sigaction(SIGSEGV, &sa, &old);

  guardedSet(5, 0, "no waiter asleep");
  guardedSet(9, (int)gbRemoteError, "an error, no waiter asleep");

  /* A waiter asleep on another flag: setters now take their wake-up path. */
  sleeper_t s;
  memset(&s, 0, sizeof(s));
  pthread_t t;
  CHECK(pthread_create(&t, NULL, sleeperMain, &s) == 0, "pthread_create");
  double deadline = now() + 10;
  int slept = 0;
  while (!slept && now() < deadline) {
    slept = __atomic_load_n(&s.tid, __ATOMIC_SEQ_CST) != 0 && asleep(s.tid);
    if (!slept) sched_yield();
  }
  CHECK(slept, "the waiter did not fall asleep within 10 s");
  guardedSet(11, 0, "a waiter asleep on another flag");
  guardedSet(13, (int)gbSystemError, "an error, a waiter asleep on another flag");
  gbFlagSetHost(&s.flag, 1, 0);
  pthread_join(t, NULL);
  CHECK(s.res == gbSuccess, "the sleeping waiter returned %d", (int)s.res);

  sigaction(SIGSEGV, &old, NULL);
  munmap(base, 2 * pageBytes);
}

/* ------------------------- 1b. an error alone does not release the waiter */

/* The value's page is read-only, so the setter stops at the store of value
 * (after storing the error) in this handler, which gives the waiter 200 ms
 * to return. A waiter that returns then, on the error alone, would free the
 * flag before that store. */
static char* valuePage;
static volatile int waiterReturned, returnedEarly;

static void onValueStore(int sig, siginfo_t* info, void* ctx) {
  (void)ctx;
  char* addr = info->si_addr;
  if (addr >= valuePage && addr < valuePage + pageBytes) {
    double until = now() + 0.2;
    while (!__atomic_load_n(&waiterReturned, __ATOMIC_SEQ_CST) && now() < until) sched_yield();
    returnedEarly = __atomic_load_n(&waiterReturned, __ATOMIC_SEQ_CST);
    mprotect(valuePage, pageBytes, PROT_READ | PROT_WRITE);
    return;
  }
  signal(sig, SIG_DFL);
}

typedef struct {
  gbFlag_t* flag;
  gbResult_t res;
} errWaiter_t;

static void* errWaiterMain(void* arg) {
  errWaiter_t* w = arg;
  w->res = gbFlagWaitHost(w->flag, 1, 30.0, NULL);
  __atomic_store_n(&waiterReturned, 1, __ATOMIC_SEQ_CST);
  return NULL;
}

static void testErrorWithValue(void) {
  /* value ends the read-only page; error and errorValue lie on the next. */
  char* base = mmap(NULL, 2 * pageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(base != MAP_FAILED, "mmap: %s", strerror(errno));
  if (base == MAP_FAILED) return;
  valuePage = base;
  gbFlag_t* flag = (gbFlag_t*)(void*)(base + pageBytes - sizeof(uint64_t));
  struct sigaction sa, old;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = onValueStore;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &old);
  CHECK(mprotect(valuePage, pageBytes, PROT_READ) == 0, "mprotect: %s", strerror(errno));
  errWaiter_t w = {flag, gbSuccess};
  pthread_t t;
  pthread_create(&t, NULL, errWaiterMain, &w);
  gbFlagSetHost(flag, 1, (int)gbRemoteError);
  pthread_join(t, NULL);
  sigaction(SIGSEGV, &old, NULL);
  CHECK(!returnedEarly, "the waiter returned on the error before the setter stored the value: a waiter that frees "
        "the flag then has it written after free");
  CHECK(w.res == gbRemoteError, "the waiter returned %d, not the error", (int)w.res);
  munmap(base, 2 * pageBytes);
}

/* ---------------------------------------------- 2. set, then free at once */

#define PAIRS 3
#define HAMMER_SECONDS 1.5

typedef struct {
  gbFlag_t* slot; /* the flag to set next (NULL: none yet) */
  int stop;
  long sets;
} pair_t;

static void* setterMain(void* arg) {
  pair_t* p = arg;
  for (;;) {
    gbFlag_t* f = __atomic_exchange_n(&p->slot, NULL, __ATOMIC_ACQ_REL);
    if (f) {
      /* Every few flags the setter lags, so that its waiter is asleep and
       * the wake-up path runs too. */
      if (p->sets % 64 == 0)
        for (double until = now() + 200e-6; now() < until;) sched_yield();
      gbFlagSetHost(f, 1, 0);
      p->sets++;
    } else if (__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
      return NULL;
    } else {
      sched_yield();
    }
  }
}

static void* freerMain(void* arg) {
  pair_t* p = arg;
  double end = now() + HAMMER_SECONDS;
  long rounds = 0;
  while (now() < end) {
    gbFlag_t* f = calloc(1, sizeof(gbFlag_t));
    __atomic_store_n(&p->slot, f, __ATOMIC_RELEASE);
    gbResult_t res = gbFlagWaitHost(f, 1, 30.0, NULL);
    if (res != gbSuccess) {
      CHECK(0, "a set flag was not seen: %d", (int)res);
      return NULL;
    }
    free(f); /* the waiter owns the flag: it goes the moment the value is seen */
    rounds++;
  }
  __atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
  return NULL;
}

static void testSetThenFree(void) {
  pair_t pairs[PAIRS];
  pthread_t setters[PAIRS], freers[PAIRS];
  memset(pairs, 0, sizeof(pairs));
  for (int i = 0; i < PAIRS; i++) {
    pthread_create(&setters[i], NULL, setterMain, &pairs[i]);
    pthread_create(&freers[i], NULL, freerMain, &pairs[i]);
  }
  long total = 0;
  for (int i = 0; i < PAIRS; i++) {
    pthread_join(freers[i], NULL);
    pthread_join(setters[i], NULL);
    total += pairs[i].sets;
  }
  CHECK(total > 1000, "only %ld flags were set and freed", total);
  printf("set-then-free: %ld flags, %d thread pairs\n", total, PAIRS);
}

/* ----------------------------------------------------------- 3. waking */

static void testWake(void) {
  enum { N = 4 };
  sleeper_t s[N];
  pthread_t t[N];
  memset(s, 0, sizeof(s));
  for (int i = 0; i < N; i++) pthread_create(&t[i], NULL, sleeperMain, &s[i]);
  double deadline = now() + 10;
  for (int i = 0; i < N; i++)
    while (!(__atomic_load_n(&s[i].tid, __ATOMIC_SEQ_CST) != 0 && asleep(s[i].tid)) && now() < deadline)
      sched_yield();
  for (int i = 0; i < N; i++) gbFlagSetHost(&s[i].flag, 1, i == 0 ? (int)gbRemoteError : 0);
  for (int i = 0; i < N; i++) {
    pthread_join(t[i], NULL);
    CHECK(s[i].res == (i == 0 ? gbRemoteError : gbSuccess), "waiter %d returned %d", i, (int)s[i].res);
  }
}

int main(void) {
  testTouchAfterStore();
  testErrorWithValue();
  testSetThenFree();
  testWake();
  if (failures) {
    fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}
