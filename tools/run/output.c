/* Forwarding a rank's stdout or stderr to the launcher's, whole lines at a
 * time, each prefixed "[rank] ", so that lines of different ranks never mix.
 * A partial line waits in the stream's buffer until its newline arrives, the
 * rank closes the pipe or exits, or it grows past LINE_LIMIT. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "run.h"

#define READ_CHUNK 65536
#define LINE_LIMIT (1 << 20)    /* a longer "line" is forwarded in pieces */
#define READS_PER_WAKEUP 16     /* so that one chatty rank cannot starve the others */
#define FINISH_READS 256        /* a rank's leftover is at most a pipe's capacity */

/* Lines gathered for one write() per read; indexed by the destination fd. */
typedef struct {
  char* p;
  size_t len, cap;
  int broken; /* the reader of our stdout/stderr went away: drop, keep draining ranks */
} batch_t;
static batch_t batches[3];

static void writeAll(int fd, const char* p, size_t n) {
  batch_t* b = &batches[fd];
  while (n > 0 && !b->broken) {
    ssize_t w = write(fd, p, n);
    if (w >= 0) {
      p += w;
      n -= (size_t)w;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      /* Our stdout was handed to us non-blocking: wait until its reader takes more. */
      struct pollfd pfd = {.fd = fd, .events = POLLOUT};
      if (poll(&pfd, 1, -1) < 0 && errno != EINTR) b->broken = 1;
    } else if (errno != EINTR) {
      b->broken = 1;
    }
  }
}

static void batchFlush(int fd) {
  batch_t* b = &batches[fd];
  writeAll(fd, b->p, b->len);
  b->len = 0;
}

/* Queues tag + text (+ '\n') for the stream's destination. */
static void emit(gbRunStream_t* s, const char* text, size_t n, int newline) {
  batch_t* b = &batches[s->dest];
  size_t tagLen = strlen(s->tag);
  size_t need = tagLen + n + (newline ? 1 : 0);
  if (b->len + need > b->cap) {
    batchFlush(s->dest);
    if (need > b->cap) {
      size_t cap = need < 2 * READ_CHUNK ? 2 * READ_CHUNK : need;
      char* p = realloc(b->p, cap);
      if (!p) { /* no memory: write the pieces as they are, still in order */
        writeAll(s->dest, s->tag, tagLen);
        writeAll(s->dest, text, n);
        if (newline) writeAll(s->dest, "\n", 1);
        return;
      }
      b->p = p;
      b->cap = cap;
    }
  }
  memcpy(b->p + b->len, s->tag, tagLen);
  memcpy(b->p + b->len + tagLen, text, n);
  if (newline) b->p[b->len + tagLen + n] = '\n';
  b->len += need;
}

/* The pending partial line goes out now; tagged output ends it with '\n' so
 * that the next rank's line starts on its own line. */
static void emitPartial(gbRunStream_t* s) {
  if (s->len == 0) return;
  emit(s, s->buf, s->len, s->addNewline);
  s->len = 0;
}

static void append(gbRunStream_t* s, const char* p, size_t n) {
  if (s->len + n > LINE_LIMIT) emitPartial(s);
  if (s->len + n > s->cap) {
    size_t cap = s->cap ? s->cap : 256;
    while (cap < s->len + n) cap *= 2;
    char* grown = realloc(s->buf, cap);
    if (!grown) {
      emitPartial(s);
      emit(s, p, n, s->addNewline);
      return;
    }
    s->buf = grown;
    s->cap = cap;
  }
  memcpy(s->buf + s->len, p, n);
  s->len += n;
}

static void feed(gbRunStream_t* s, const char* p, size_t n) {
  while (n > 0) {
    const char* nl = memchr(p, '\n', n);
    if (!nl) {
      append(s, p, n);
      break;
    }
    size_t seg = (size_t)(nl - p) + 1;
    if (s->len == 0) {
      emit(s, p, seg, 0);
    } else {
      append(s, p, seg);
      emit(s, s->buf, s->len, 0);
      s->len = 0;
    }
    p += seg;
    n -= seg;
  }
  batchFlush(s->dest);
}

void gbRunStreamInit(gbRunStream_t* s, int fd, int dest, int rank, int noTag) {
  memset(s, 0, sizeof(*s));
  s->fd = fd;
  s->dest = dest;
  if (noTag) {
    s->tag[0] = '\0';
    s->addNewline = 0; /* pass bytes through unchanged */
  } else {
    snprintf(s->tag, sizeof(s->tag), "[%d] ", rank);
    s->addNewline = 1;
  }
}

static void streamClose(gbRunStream_t* s) {
  emitPartial(s);
  batchFlush(s->dest);
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
  free(s->buf);
  s->buf = NULL;
  s->cap = 0;
}

/* Reads up to maxReads chunks; returns 1 at end of file or on a read error. */
static int readSome(gbRunStream_t* s, int maxReads) {
  char chunk[READ_CHUNK];
  for (int i = 0; i < maxReads; i++) {
    ssize_t n = read(s->fd, chunk, sizeof(chunk));
    if (n > 0) {
      feed(s, chunk, (size_t)n);
    } else if (n == 0) {
      return 1;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return 0;
    } else if (errno != EINTR) {
      fprintf(stderr, "gpubridge-run: reading a rank's output failed: %s; dropping the rest of it\n",
              strerror(errno));
      return 1;
    }
  }
  return 0;
}

void gbRunStreamRead(gbRunStream_t* s) {
  if (s->fd < 0) return;
  /* Once our own reader is gone, closing the rank's pipe passes that on (EPIPE,
   * SIGPIPE), as in a shell pipeline: `gpubridge-run ... | head` ends. */
  if (readSome(s, READS_PER_WAKEUP) || batches[s->dest].broken) streamClose(s);
}

void gbRunStreamFinish(gbRunStream_t* s) {
  if (s->fd < 0) return;
  /* What the rank wrote before it exited is all in the pipe now. A child it
   * left behind may still hold the pipe open; its later output is dropped. */
  readSome(s, FINISH_READS);
  streamClose(s);
}
