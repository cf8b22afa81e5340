/* The host device: "device" memory is host memory and a stream is a worker
 * thread that runs a FIFO of tasks (copies, flag writes and waits, host
 * functions). Simulated and CPU ranks run the same schedules as GPU ranks
 * through it; only the ops table differs. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/dtype.h"
#include "base/param.h"
#include "base/wire.h"
#include "base/result.h"
#include "device/device.h"
#include "os/cond.h"

#define ALIGN 64
#define TASKS_PER_CHUNK 64
#define STREAM_MAGIC 0x6762737472656d31ull /* catches foreign stream handles */
/* Synchronize warns (and keeps waiting) after this long past the timeout:
 * every task is bounded, so a wait this long points at a bug worth a line. */
#define SYNC_WARN_MARGIN_SEC 10

/* ------------------------------------------------------------------ memory */

static gbResult_t alignedAlloc(void** ptr, size_t bytes, const char* what) {
  if (ptr == NULL) return gbErrorSet(gbInvalidArgument, "%s: the output pointer is NULL", what);
  void* p = NULL;
  /* Size 0 still yields a unique pointer, as cudaMalloc callers expect. */
  int rc = posix_memalign(&p, ALIGN, bytes ? bytes : 1);
  if (rc != 0)
    return gbErrorSet(gbSystemError, "%s of %zu bytes failed: %s; free memory or use smaller buffers",
                      what, bytes, strerror(rc));
  *ptr = p;
  return gbSuccess;
}

static gbResult_t memAlloc(void** ptr, size_t bytes) {
  return alignedAlloc(ptr, bytes, "host device memory allocation");
}

static gbResult_t memFree(void* ptr) {
  free(ptr);
  return gbSuccess;
}

static gbResult_t copyChecked(void* dst, const void* src, size_t bytes, const char* what) {
  if (bytes == 0) return gbSuccess;
  if (dst == NULL || src == NULL)
    return gbErrorSet(gbInvalidArgument, "%s of %zu bytes with a NULL %s pointer", what, bytes,
                      dst == NULL ? "destination" : "source");
  if (dst != src) memmove(dst, src, bytes);
  return gbSuccess;
}

static gbResult_t memcpyToDevice(void* dst, const void* src, size_t bytes) {
  return copyChecked(dst, src, bytes, "copy to the host device");
}

static gbResult_t memcpyToHost(void* dst, const void* src, size_t bytes) {
  return copyChecked(dst, src, bytes, "copy from the host device");
}

static gbResult_t hostAlloc(void** ptr, size_t bytes) {
  GB_CHECK(alignedAlloc(ptr, bytes, "host staging allocation"));
  /* Zeroed: flags placed here must start at value 0, error 0. */
  memset(*ptr, 0, bytes ? bytes : 1);
  return gbSuccess;
}

static gbResult_t hostFree(void* ptr) {
  free(ptr);
  return gbSuccess;
}

/* ------------------------------------------------------------------ tasks */

typedef enum { TASK_COPY, TASK_FLAG_WRITE, TASK_FLAG_WAIT, TASK_HOST_FN, TASK_REDUCE, TASK_EXCHANGE, TASK_ENCODE } taskKind_t;

typedef struct task {
  struct task* next;
  taskKind_t kind;
  union {
    struct {
      void* dst;
      const void* src;
      size_t bytes;
    } copy;
    struct {
      gbFlag_t* flag;
      uint64_t value;
    } flag;
    struct {
      gbStreamFn_t fn;
      void* arg;
      void (*freeArg)(void*);
    } host;
    gbReduceArgs_t reduce;
    gbExchangeArgs_t exchange;
    gbEncodeArgs_t encode;
  } u;
} task_t;

/* Task nodes come in chunks and are recycled through a free list, so an
 * enqueue in steady state costs one lock round and no allocation. */
typedef struct chunk {
  struct chunk* next;
  task_t tasks[TASKS_PER_CHUNK];
} chunk_t;

static const char* taskName(taskKind_t k) {
  switch (k) {
    case TASK_COPY: return "copy";
    case TASK_FLAG_WRITE: return "flag write";
    case TASK_FLAG_WAIT: return "flag wait";
    case TASK_HOST_FN: return "host function";
    case TASK_REDUCE: return "reduction";
    case TASK_EXCHANGE: return "exchange";
    case TASK_ENCODE: return "encoding";
  }
  return "unknown";
}

/* ---------------------------------------------------------------- streams */

typedef struct {
  uint64_t magic;
  pthread_mutex_t mu;
  pthread_cond_t wake; /* the worker: work arrived, or stop */
  pthread_cond_t idle; /* synchronizers: queue empty and worker idle */
  task_t* head;
  task_t* tail;
  task_t* freeList;
  chunk_t* chunks;
  int sleeping;    /* the worker waits on wake */
  int busy;        /* the worker runs a task outside the lock */
  taskKind_t running;
  int stopping;
  int syncWaiters;
  gbResult_t error; /* first failure since the last synchronize */
  char errText[1024];
  double flagWaitSec;
  int id;
  pthread_t thread;
} stream_t;

static atomic_int nextStreamId;

static task_t* takeNode(stream_t* s) {
  if (s->freeList == NULL) {
    chunk_t* c = malloc(sizeof(*c));
    if (c == NULL) return NULL;
    c->next = s->chunks;
    s->chunks = c;
    for (int i = 0; i < TASKS_PER_CHUNK; i++) {
      c->tasks[i].next = s->freeList;
      s->freeList = &c->tasks[i];
    }
  }
  task_t* t = s->freeList;
  s->freeList = t->next;
  return t;
}

/* Runs one task outside the lock. drop: the stream has an error, so only the
 * argument is released, as a GPU stream skips work after a fault. */
static gbResult_t runTask(stream_t* s, task_t* t, gbResult_t streamError) {
  int drop = streamError != gbSuccess;
  switch (t->kind) {
    case TASK_COPY:
      if (!drop && t->u.copy.dst != t->u.copy.src)
        memmove(t->u.copy.dst, t->u.copy.src, t->u.copy.bytes);
      return gbSuccess;
    case TASK_FLAG_WRITE:
      /* A dropped write still tells its waiter why it will never come, so the
       * proxy fails now instead of at its deadline. */
      if (drop && !t->u.flag.flag->foreign)
        atomic_store_explicit(&t->u.flag.flag->error, (int)streamError, memory_order_release);
      else gbFlagSetHost(t->u.flag.flag, t->u.flag.value, 0);
      return gbSuccess;
    case TASK_FLAG_WAIT:
      if (drop) return gbSuccess;
      return gbFlagWaitHost(t->u.flag.flag, t->u.flag.value, gbFlagStreamWaitSec(t->u.flag.flag, s->flagWaitSec),
                            NULL);
    case TASK_HOST_FN: {
      gbResult_t res = drop ? gbSuccess : t->u.host.fn(t->u.host.arg);
      if (t->u.host.freeArg) t->u.host.freeArg(t->u.host.arg);
      return res;
    }
    case TASK_REDUCE: {
      const gbReduceArgs_t* r = &t->u.reduce;
      if (drop) return gbSuccess;
      if (r->wire != GB_WIRE_PLAIN) gbWireFold(r->dst, r->src, r->nsrc, r->count, r->dtype, r->wire, r->divisor);
      else gbReduceOrdered(r->dst, r->src, r->nsrc, r->count, r->dtype, r->op, r->divisor, r->ring);
      return gbSuccess;
    }
    case TASK_ENCODE: {
      const gbEncodeArgs_t* e = &t->u.encode;
      if (!drop) gbWireEncode(e->dst, e->src, e->count, e->dtype, e->wire);
      return gbSuccess;
    }
    case TASK_EXCHANGE:
      return drop ? gbSuccess : gbDeviceHostExchange(&t->u.exchange, s->flagWaitSec);
  }
  return gbSuccess;
}

static void* worker(void* p) {
  stream_t* s = p;
  char name[16];
  snprintf(name, sizeof(name), "gb-stream-%d", s->id);
  pthread_setname_np(pthread_self(), name);

  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (s->head == NULL && !s->stopping) {
      s->sleeping = 1;
      pthread_cond_wait(&s->wake, &s->mu);
      s->sleeping = 0;
    }
    if (s->head == NULL) break; /* stopping, and drained */
    task_t* t = s->head;
    s->head = t->next;
    if (s->head == NULL) s->tail = NULL;
    s->busy = 1;
    s->running = t->kind;
    gbResult_t streamError = s->error;
    pthread_mutex_unlock(&s->mu);

    gbResult_t res = runTask(s, t, streamError);
    if (res != gbSuccess) GB_TRACE(GB_LOG_DEVICE, "stream %d: %s failed (%d)", s->id, taskName(t->kind), res);
    else if (streamError != gbSuccess) GB_TRACE(GB_LOG_DEVICE, "stream %d: %s dropped", s->id, taskName(t->kind));

    pthread_mutex_lock(&s->mu);
    if (res != gbSuccess && s->error == gbSuccess) {
      s->error = res;
      /* The failing call set the text on this thread; keep it for the
       * thread that synchronizes. */
      snprintf(s->errText, sizeof(s->errText), "%s", gbErrorLast());
    }
    s->busy = 0;
    t->next = s->freeList;
    s->freeList = t;
    if (s->head == NULL && s->syncWaiters > 0) pthread_cond_broadcast(&s->idle);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static gbResult_t streamNew(stream_t** out) {
  stream_t* s = calloc(1, sizeof(*s));
  if (s == NULL) return gbErrorSet(gbSystemError, "could not allocate a host device stream: out of memory");
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->wake, NULL);
  gbCondInit(&s->idle);
  s->magic = STREAM_MAGIC;
  s->error = gbSuccess;
  s->flagWaitSec = (double)gbParamInt(GB_PARAM_TIMEOUT) + GB_FLAG_WAIT_MARGIN_SEC;
  s->id = atomic_fetch_add_explicit(&nextStreamId, 1, memory_order_relaxed);
  int rc = pthread_create(&s->thread, NULL, worker, s);
  if (rc != 0) {
    pthread_cond_destroy(&s->idle);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return gbErrorSet(gbSystemError,
                      "could not start a host device stream thread: %s; lower the number of "
                      "streams or raise the process's thread limit",
                      strerror(rc));
  }
  GB_TRACE(GB_LOG_DEVICE, "stream %d created", s->id);
  *out = s;
  return gbSuccess;
}

/* The default stream (stream NULL), created on first use, lives for the process. */
static _Atomic(stream_t*) defaultStream;
static pthread_mutex_t defaultMu = PTHREAD_MUTEX_INITIALIZER;

static gbResult_t resolve(void* stream, stream_t** out) {
  if (stream == NULL) {
    stream_t* s = atomic_load_explicit(&defaultStream, memory_order_acquire);
    if (s == NULL) {
      gbResult_t res = gbSuccess;
      pthread_mutex_lock(&defaultMu);
      s = atomic_load_explicit(&defaultStream, memory_order_relaxed);
      if (s == NULL) {
        res = streamNew(&s);
        if (res == gbSuccess) atomic_store_explicit(&defaultStream, s, memory_order_release);
      }
      pthread_mutex_unlock(&defaultMu);
      GB_CHECK(res);
    }
    *out = s;
    return gbSuccess;
  }
  stream_t* s = stream;
  if (s->magic != STREAM_MAGIC)
    return gbErrorSet(gbInvalidArgument,
                      "stream %p is not a stream of the host device (destroyed, or made by a GPU "
                      "runtime); simulated and CPU ranks take NULL or a stream from gbStreamCreate",
                      stream);
  *out = s;
  return gbSuccess;
}

static gbResult_t enqueue(void* stream, const task_t* proto) {
  stream_t* s;
  GB_CHECK(resolve(stream, &s));
  pthread_mutex_lock(&s->mu);
  task_t* t = takeNode(s);
  if (t == NULL) {
    pthread_mutex_unlock(&s->mu);
    return gbErrorSet(gbSystemError, "could not queue a %s on host device stream %d: out of memory",
                      taskName(proto->kind), s->id);
  }
  *t = *proto;
  t->next = NULL;
  if (s->tail) s->tail->next = t;
  else s->head = t;
  s->tail = t;
  int wake = s->sleeping; /* a running worker picks the task up by itself */
  pthread_mutex_unlock(&s->mu);
  if (wake) pthread_cond_signal(&s->wake);
  return gbSuccess;
}

static gbResult_t streamCreate(void** stream) {
  if (stream == NULL) return gbErrorSet(gbInvalidArgument, "stream create: the output pointer is NULL");
  stream_t* s;
  GB_CHECK(streamNew(&s));
  *stream = s;
  return gbSuccess;
}

static gbResult_t streamSynchronize(void* stream) {
  stream_t* s;
  GB_CHECK(resolve(stream, &s));
  char text[sizeof(s->errText)];
  double warnAfter = (double)gbParamInt(GB_PARAM_TIMEOUT) + SYNC_WARN_MARGIN_SEC;
  gbDeadline_t warnAt = gbDeadlineIn(warnAfter);
  int64_t start = gbClockNowNs();

  pthread_mutex_lock(&s->mu);
  s->syncWaiters++;
  while (s->head != NULL || s->busy) {
    if (gbCondWaitUntil(&s->idle, &s->mu, warnAt) && (s->head != NULL || s->busy)) {
      /* Every task carries its own deadline, so this should not happen; say
       * what the stream is stuck on and keep waiting for it. */
      GB_WARN("synchronize has waited %.0f s for host device stream %d, which is still running a %s",
              (double)(gbClockNowNs() - start) / 1e9, s->id, taskName(s->running));
      warnAt = gbDeadlineIn(warnAfter);
    }
  }
  s->syncWaiters--;
  gbResult_t res = s->error;
  s->error = gbSuccess;
  memcpy(text, s->errText, sizeof(text));
  s->errText[0] = '\0';
  pthread_mutex_unlock(&s->mu);

  if (res != gbSuccess) gbErrorRecord(text); /* the failure was logged where it happened */
  return res;
}

static gbResult_t streamDestroy(void* stream) {
  if (stream == NULL)
    return gbErrorSet(gbInvalidUsage, "the default stream (NULL) lives for the process and cannot be destroyed");
  stream_t* s;
  GB_CHECK(resolve(stream, &s));
  pthread_mutex_lock(&s->mu);
  s->stopping = 1;
  int wake = s->sleeping;
  pthread_mutex_unlock(&s->mu);
  if (wake) pthread_cond_signal(&s->wake);
  /* The worker drains the queue first; each task is bounded by its own deadline. */
  pthread_join(s->thread, NULL);
  if (s->error != gbSuccess)
    GB_INFO(GB_LOG_DEVICE, "stream %d destroyed with an error nobody synchronized: %s", s->id, s->errText);
  while (s->chunks) {
    chunk_t* c = s->chunks;
    s->chunks = c->next;
    free(c);
  }
  s->magic = 0;
  pthread_cond_destroy(&s->idle);
  pthread_cond_destroy(&s->wake);
  pthread_mutex_destroy(&s->mu);
  GB_TRACE(GB_LOG_DEVICE, "stream %d destroyed", s->id);
  free(s);
  return gbSuccess;
}

static gbResult_t copyAsync(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return gbSuccess;
  if (dst == NULL || src == NULL)
    return gbErrorSet(gbInvalidArgument, "stream copy of %zu bytes with a NULL %s pointer", bytes,
                      dst == NULL ? "destination" : "source");
  task_t t = {.kind = TASK_COPY, .u.copy = {dst, src, bytes}};
  return enqueue(stream, &t);
}

static gbResult_t flagWrite(gbFlag_t* flag, uint64_t value, void* stream) {
  if (flag == NULL) return gbErrorSet(gbInvalidArgument, "stream flag write to a NULL flag");
  task_t t = {.kind = TASK_FLAG_WRITE, .u.flag = {flag, value}};
  return enqueue(stream, &t);
}

static gbResult_t flagWait(gbFlag_t* flag, uint64_t value, void* stream) {
  if (flag == NULL) return gbErrorSet(gbInvalidArgument, "stream flag wait on a NULL flag");
  task_t t = {.kind = TASK_FLAG_WAIT, .u.flag = {flag, value}};
  return enqueue(stream, &t);
}

/* Takes arg in every case: when the work cannot be queued, freeArg runs here. */
static gbResult_t launchHostFn(void* stream, gbStreamFn_t fn, void* arg, void (*freeArg)(void*)) {
  gbResult_t res;
  if (fn == NULL) {
    res = gbErrorSet(gbInvalidArgument, "stream host function is NULL");
  } else {
    task_t t = {.kind = TASK_HOST_FN, .u.host = {fn, arg, freeArg}};
    res = enqueue(stream, &t);
  }
  if (res != gbSuccess && freeArg) freeArg(arg);
  return res;
}

static gbResult_t reduceAsync(const gbReduceArgs_t* args, void* stream) {
  if (args->nsrc < 1 || args->nsrc > GB_REDUCE_MAX_SRCS || args->dst == NULL)
    return gbErrorSet(gbInvalidArgument, "stream reduction of %d sources (1 to %d) into %p", args->nsrc,
                      GB_REDUCE_MAX_SRCS, args->dst);
  task_t t = {.kind = TASK_REDUCE, .u.reduce = *args};
  return enqueue(stream, &t);
}

static gbResult_t encodeAsync(const gbEncodeArgs_t* args, void* stream) {
  GB_CHECK(gbDeviceEncodeCheck(args));
  task_t t = {.kind = TASK_ENCODE, .u.encode = *args};
  return enqueue(stream, &t);
}

static gbResult_t exchangeAsync(const gbExchangeArgs_t* args, void* stream) {
  GB_CHECK(gbDeviceExchangeCheck(args));
  task_t t = {.kind = TASK_EXCHANGE, .u.exchange = *args};
  return enqueue(stream, &t);
}

/* Host memory is the device's: nothing to register. */
static gbResult_t hostRegister(void* ptr, size_t bytes, void** devPtr) {
  (void)bytes;
  *devPtr = ptr;
  return gbSuccess;
}
static gbResult_t hostUnregister(void* ptr) {
  (void)ptr;
  return gbSuccess;
}

static const gbDeviceOps hostOps = {
    .name = "host",
    .runtime = GB_DEVICE_RUNTIME_HOST,
    .runKind = gbRunCpu,
    .vendor = "cpu",
    .memAlloc = memAlloc,
    .memFree = memFree,
    .memcpyToDevice = memcpyToDevice,
    .memcpyToHost = memcpyToHost,
    .hostAlloc = hostAlloc,
    .hostFree = hostFree,
    .streamCreate = streamCreate,
    .streamDestroy = streamDestroy,
    .streamSynchronize = streamSynchronize,
    .copyAsync = copyAsync,
    .flagWrite = flagWrite,
    .flagWait = flagWait,
    .launchHostFn = launchHostFn,
    .hostRegister = hostRegister,
    .hostUnregister = hostUnregister,
    .reduceAsync = reduceAsync,
    .exchangeAsync = exchangeAsync,
    .encodeAsync = encodeAsync,
    .hostMemory = 1,
};

const gbDeviceOps* gbDeviceHostOps(void) { return &hostOps; }
