/* The job: start every rank, then one poll() loop that forwards output, reaps
 * ranks (SIGCHLD through the signalfd), and stops the job when a rank fails,
 * the timeout passes or the launcher is told to stop. Stopping is SIGCONT (a
 * stopped rank must wake to die), SIGTERM, then SIGKILL for whatever is still
 * running GB_RUN_STOP_GRACE_S later. Every wait is against a deadline. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>
#include "run.h"

enum { STOP_NONE, STOP_TERM, STOP_KILL };

typedef struct {
  const gbRunOptions_t* opts;
  gbRunRank_t* ranks;
  int started;          /* ranks forked */
  int running;          /* forked and not reaped */
  int sigfd;
  int exitCode;         /* -1 until something decides it */
  int stopping;
  int64_t jobDeadline;  /* 0: no --timeout */
  int64_t stopDeadline; /* the current stop stage's */
  struct pollfd* pfds;  /* the signalfd, then every open rank stream */
  gbRunStream_t** streams; /* streams[i] is polled as pfds[i] (i >= 1) */
  struct {
    int rank, status;
  } * reaped;             /* one look's ended ranks (reap) */
} job_t;

static void signalRanks(job_t* job, int sig) {
  /* Only unreaped pids: a reaped one may already belong to another process. */
  for (int i = 0; i < job->started; i++)
    if (job->ranks[i].pid > 0) kill(job->ranks[i].pid, sig);
}

static void stopBegin(job_t* job) {
  job->stopping = STOP_TERM;
  signalRanks(job, SIGCONT);
  signalRanks(job, SIGTERM);
  job->stopDeadline = gbRunClockNowNs() + (int64_t)(GB_RUN_STOP_GRACE_S * 1e9);
}

static void stopEscalate(job_t* job, const char* why) {
  fprintf(stderr, "gpubridge-run: %d rank(s) still running %s; killing them\n", job->running, why);
  job->stopping = STOP_KILL;
  signalRanks(job, SIGKILL);
  job->stopDeadline = gbRunClockNowNs() + (int64_t)(GB_RUN_REAP_GRACE_S * 1e9);
}

static int failed(int wstatus) {
  return WIFSIGNALED(wstatus) || WEXITSTATUS(wstatus) != 0;
}

static void onReaped(job_t* job, gbRunRank_t* r, int wstatus) {
  /* The rank's last output goes out before any word about its end. */
  gbRunStreamFinish(&r->out);
  gbRunStreamFinish(&r->err);
  r->pid = 0;
  r->status = wstatus;
  job->running--;
  if (job->stopping != STOP_NONE || !failed(wstatus)) return;

  char what[64];
  gbRunStatusDescribe(wstatus, what, sizeof(what));
  if (job->exitCode < 0) job->exitCode = gbRunStatusCode(wstatus);
  if (job->opts->keepGoing) {
    fprintf(stderr, "gpubridge-run: rank %d %s\n", r->rank, what);
  } else if (job->running > 0) {
    fprintf(stderr, "gpubridge-run: rank %d %s; stopping the other ranks\n", r->rank, what);
    stopBegin(job);
  } else {
    fprintf(stderr, "gpubridge-run: rank %d %s\n", r->rank, what);
  }
}

/* Every rank that ended since the last look. Ranks whose peers end fast (a
 * killed peer seen within microseconds) can end in the same batch as the
 * rank that caused it, in any order of waitpid's: a rank a signal ended is
 * taken first, so the job's status is the victim's, not a survivor's. */
static void reap(job_t* job) {
  int n = 0;
  for (;;) {
    int wstatus;
    pid_t pid = waitpid(-1, &wstatus, WNOHANG);
    if (pid == 0) break;
    if (pid < 0) {
      if (errno == EINTR) continue;
      break; /* ECHILD: nothing left */
    }
    for (int i = 0; i < job->started; i++) {
      if (job->ranks[i].pid == pid) {
        job->reaped[n].rank = i;
        job->reaped[n++].status = wstatus;
        break;
      }
    }
  }
  for (int pass = 0; pass < 2; pass++)
    for (int k = 0; k < n; k++)
      if ((WIFSIGNALED(job->reaped[k].status) != 0) == (pass == 0))
        onReaped(job, &job->ranks[job->reaped[k].rank], job->reaped[k].status);
}

static void onLauncherSignal(job_t* job, int sig) {
  char num[16];
  const char* name = gbRunSignalName(sig, num, sizeof(num));
  if (job->stopping == STOP_NONE) {
    fprintf(stderr, "gpubridge-run: received %s; stopping the ranks\n", name);
    job->exitCode = 128 + sig;
    signalRanks(job, sig); /* forwarded first, so a rank may end its own way */
    stopBegin(job);
  } else if (job->stopping == STOP_TERM) {
    /* Asked again while waiting: do not make the user wait out the grace. */
    char why[64];
    snprintf(why, sizeof(why), "after a second %s", name);
    stopEscalate(job, why);
  }
}

static void readSignals(job_t* job) {
  struct signalfd_siginfo si;
  int child = 0;
  for (;;) {
    ssize_t n = read(job->sigfd, &si, sizeof(si));
    if (n != (ssize_t)sizeof(si)) {
      if (n < 0 && errno == EINTR) continue;
      break; /* EAGAIN: all read */
    }
    if (si.ssi_signo == SIGCHLD) child = 1;
    else onLauncherSignal(job, (int)si.ssi_signo);
  }
  /* waitpid, not the SIGCHLD count: several exits can share one SIGCHLD. */
  if (child) reap(job);
}

static void checkDeadlines(job_t* job) {
  int64_t now = gbRunClockNowNs();
  if (job->stopping == STOP_NONE && job->jobDeadline != 0 && now >= job->jobDeadline) {
    fprintf(stderr, "gpubridge-run: job still running after %g s; stopping it\n", job->opts->timeoutS);
    job->exitCode = 124;
    stopBegin(job);
  } else if (job->stopping == STOP_TERM && now >= job->stopDeadline) {
    char why[64];
    snprintf(why, sizeof(why), "%g s after SIGTERM", GB_RUN_STOP_GRACE_S);
    stopEscalate(job, why);
  }
}

static int pollTimeoutMs(const job_t* job) {
  if (job->stopping != STOP_NONE) return gbRunClockMsUntil(job->stopDeadline);
  if (job->jobDeadline != 0) return gbRunClockMsUntil(job->jobDeadline);
  return -1; /* nothing to time: only output and exits can happen */
}

/* Runs until every started rank is reaped (or, after SIGKILL, the last grace ends). */
static void supervise(job_t* job) {
  struct pollfd* pfds = job->pfds;
  gbRunStream_t** streams = job->streams;
  while (job->running > 0) {
    int nfds = 0;
    pfds[nfds++] = (struct pollfd){.fd = job->sigfd, .events = POLLIN};
    for (int i = 0; i < job->started; i++) {
      gbRunStream_t* two[2] = {&job->ranks[i].out, &job->ranks[i].err};
      for (int k = 0; k < 2; k++) {
        if (two[k]->fd < 0) continue;
        streams[nfds] = two[k];
        pfds[nfds++] = (struct pollfd){.fd = two[k]->fd, .events = POLLIN};
      }
    }
    int ready = poll(pfds, (nfds_t)nfds, pollTimeoutMs(job));
    if (ready < 0 && errno != EINTR) {
      gbRunFail(gbSystemError, "poll: %s; stopping the job", strerror(errno));
      if (job->exitCode < 0) job->exitCode = 1;
      if (job->stopping == STOP_NONE) stopBegin(job);
    }
    for (int i = 1; ready > 0 && i < nfds; i++)
      if (pfds[i].revents) gbRunStreamRead(streams[i]);
    if (ready > 0 && pfds[0].revents) readSignals(job);
    checkDeadlines(job);
    if (job->stopping == STOP_KILL && job->running > 0 && gbRunClockNowNs() >= job->stopDeadline) {
      fprintf(stderr, "gpubridge-run: %d rank(s) did not end %g s after SIGKILL; leaving them\n",
              job->running, GB_RUN_REAP_GRACE_S);
      break;
    }
  }
  for (int i = 0; i < job->started; i++) {
    gbRunStreamFinish(&job->ranks[i].out);
    gbRunStreamFinish(&job->ranks[i].err);
  }
}

int gbRunJob(const gbRunOptions_t* opts, const gbRunRestore_t* restore, int sigfd) {
  job_t job = {.opts = opts, .sigfd = sigfd, .exitCode = -1};
  size_t maxFds = 1 + 2 * (size_t)opts->nranks;
  job.ranks = calloc((size_t)opts->nranks, sizeof(*job.ranks));
  job.pfds = calloc(maxFds, sizeof(*job.pfds));
  job.streams = calloc(maxFds, sizeof(*job.streams));
  job.reaped = calloc((size_t)opts->nranks, sizeof(*job.reaped));
  if (!job.ranks || !job.pfds || !job.streams || !job.reaped) {
    free(job.ranks), free(job.pfds), free(job.streams), free(job.reaped);
    gbRunFail(gbSystemError, "out of memory for %d ranks", opts->nranks);
    return 1;
  }
  int64_t start = gbRunClockNowNs();
  if (opts->timeoutS > 0) job.jobDeadline = start + (int64_t)(opts->timeoutS * 1e9);
  for (int i = 0; i < opts->nranks; i++) {
    gbRunRank_t* r = &job.ranks[i];
    r->rank = i;
    r->out.fd = r->err.fd = -1;
    if (gbRunRankSpawn(opts, restore, r) != gbSuccess) {
      job.exitCode = 1;
      if (job.started > 0) {
        fprintf(stderr, "gpubridge-run: stopping the %d rank(s) already started\n", job.started);
        stopBegin(&job);
      }
      break;
    }
    job.started++;
    job.running++;
  }
  supervise(&job);
  free(job.ranks), free(job.pfds), free(job.streams), free(job.reaped);
  return job.exitCode < 0 ? 0 : job.exitCode;
}
