/* gpubridge-run, the local launcher: the pieces its files share.
 * The launcher calls libgpubridge for --version only (gbGetVersion);
 * otherwise it borrows gbResult_t. */
#ifndef GB_TOOLS_RUN_RUN_H
#define GB_TOOLS_RUN_RUN_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/types.h>
#include "gpubridge/gpubridge.h"

#define GB_RUN_MAX_RANKS 1024
#define GB_RUN_LABEL_MAX 15       /* vendor label: 1..15 chars of [a-z0-9_-] */
#define GB_RUN_STOP_GRACE_S 3.0   /* SIGTERM -> SIGKILL */
#define GB_RUN_REAP_GRACE_S 5.0   /* SIGKILL -> give up waiting (a rank stuck in the kernel) */

/* ---- options.c: the command line ---- */
typedef struct {
  int nranks;
  char (*vendors)[GB_RUN_LABEL_MAX + 1]; /* one label per rank, or NULL (inherit) */
  int keepGoing;
  double timeoutS;  /* 0: no limit */
  int port;         /* 0: pick a free one */
  int noTag;
  int help;         /* -h: print usage, run nothing */
  int version;      /* --version: print the library's version, run nothing */
  char** argv;      /* PROGRAM ARGS..., NULL-terminated; points into main's argv */
} gbRunOptions_t;

/* Bad usage prints the exact cause on stderr and returns gbInvalidArgument. */
gbResult_t gbRunOptionsParse(int argc, char** argv, gbRunOptions_t* opts);
void gbRunOptionsFree(gbRunOptions_t* opts);
void gbRunUsagePrint(FILE* f);

/* Prints "gpubridge-run: <message>" on stderr and returns res: called once,
 * where an error is detected. */
gbResult_t gbRunFail(gbResult_t res, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* Propagate a failure already reported by gbRunFail. */
#define GB_RUN_CHECK(call)              \
  do {                                  \
    gbResult_t gb_run_r_ = (call);      \
    if (gb_run_r_ != gbSuccess) return gb_run_r_; \
  } while (0)

/* ---- env.c: the rendezvous environment every rank shares ---- */
/* Sets WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT,
 * GPUBRIDGE_JOB_SECRET (unless already set) and, with more than one rank,
 * OMP_NUM_THREADS=1 (unless already set; said on stderr at GPUBRIDGE_DEBUG=INFO;
 * a value set that gives the ranks more threads than cores is warned of) in
 * the launcher's environment. */
gbResult_t gbRunEnvPrepare(const gbRunOptions_t* opts);

/* ---- output.c: one rank's stdout or stderr, forwarded whole lines at a time ---- */
typedef struct {
  int fd;        /* read end of the rank's pipe; -1 once closed */
  int dest;      /* 1 or 2: the launcher's stream it goes to */
  char tag[16];  /* "[r] ", or "" with --no-tag */
  int addNewline; /* end a flushed partial line with '\n' (tagged output) */
  char* buf;     /* the pending partial line */
  size_t len, cap;
} gbRunStream_t;

void gbRunStreamInit(gbRunStream_t* s, int fd, int dest, int rank, int noTag);
/* Reads what the pipe holds now (the fd is non-blocking) and forwards the
 * complete lines. At end of file the partial line is flushed and the stream
 * closed. */
void gbRunStreamRead(gbRunStream_t* s);
/* The rank has exited: forward what is left in the pipe, flush the partial
 * line, close. */
void gbRunStreamFinish(gbRunStream_t* s);

/* ---- spawn.c: one rank's process ---- */
typedef struct {
  sigset_t mask;             /* the launcher's signal mask before it blocked any */
  struct sigaction sigpipe;  /* SIGPIPE's disposition before the launcher ignored it */
  struct rlimit nofile;      /* RLIMIT_NOFILE before the launcher raised it */
  pid_t launcher;
} gbRunRestore_t;

typedef struct {
  int rank;
  pid_t pid;      /* 0 before start and once reaped */
  int status;     /* wait status, once reaped */
  gbRunStream_t out, err;
} gbRunRank_t;

/* Starts rank r->rank of the job with pipes on its stdout and stderr. */
gbResult_t gbRunRankSpawn(const gbRunOptions_t* opts, const gbRunRestore_t* restore, gbRunRank_t* r);

/* ---- status.c: wait statuses and signal names ---- */
const char* gbRunSignalName(int sig, char* buf, size_t len);
/* "exited with status 3" / "was killed by signal SIGKILL" */
const char* gbRunStatusDescribe(int wstatus, char* buf, size_t len);
/* The launcher's exit code for a rank's wait status: its status, or 128 + signal. */
int gbRunStatusCode(int wstatus);

/* ---- job.c: start the ranks, forward output, reap, stop ---- */
/* Runs the whole job; returns the launcher's exit code. sigfd delivers
 * SIGCHLD, SIGINT and SIGTERM. */
int gbRunJob(const gbRunOptions_t* opts, const gbRunRestore_t* restore, int sigfd);

/* ---- clock.c: monotonic time for deadlines ---- */
int64_t gbRunClockNowNs(void);
/* Milliseconds until deadlineNs for poll(): 0 if passed, rounded up. */
int gbRunClockMsUntil(int64_t deadlineNs);

#endif
