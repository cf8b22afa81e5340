/* Starting one rank: fork, pipes on its stdout and stderr, its own variables,
 * the launcher's signal changes undone, then execvp. The launcher is single
 * threaded, so the child may call setenv and dprintf before exec. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>
#include "run.h"

static void childFail(const char* what, const char* arg) {
  dprintf(2, "gpubridge-run: %s %s: %s\n", what, arg, strerror(errno));
  _exit(127);
}

static void childSetInt(const char* name, int value) {
  char text[16];
  snprintf(text, sizeof(text), "%d", value);
  if (setenv(name, text, 1) != 0) childFail("cannot set", name);
}

/* Never returns. */
static void childRun(const gbRunOptions_t* opts, const gbRunRestore_t* restore, int rank, int outFd,
                     int errFd) {
  /* No rank may outlive the launcher, however the launcher ends. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != restore->launcher) _exit(127); /* it ended before prctl took effect */

  if (dup2(outFd, 1) < 0 || dup2(errFd, 2) < 0) childFail("cannot redirect", "stdout and stderr to the launcher");
  /* Like mpirun: rank 0 reads the launcher's stdin, the others read nothing. */
  if (rank != 0) {
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0 || dup2(null, 0) < 0) childFail("cannot open", "/dev/null");
  }

  childSetInt("RANK", rank);
  childSetInt("LOCAL_RANK", rank);
  if (opts->vendors && setenv("GPUBRIDGE_VENDOR", opts->vendors[rank], 1) != 0)
    childFail("cannot set", "GPUBRIDGE_VENDOR");

  setrlimit(RLIMIT_NOFILE, &restore->nofile);
  sigaction(SIGPIPE, &restore->sigpipe, NULL);
  sigprocmask(SIG_SETMASK, &restore->mask, NULL);

  execvp(opts->argv[0], opts->argv);
  childFail("cannot run", opts->argv[0]);
}

gbResult_t gbRunRankSpawn(const gbRunOptions_t* opts, const gbRunRestore_t* restore, gbRunRank_t* r) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0)
    return gbRunFail(gbSystemError, "pipe for rank %d: %s", r->rank, strerror(errno));
  if (pipe2(err, O_CLOEXEC) != 0) {
    int e = errno;
    close(out[0]);
    close(out[1]);
    return gbRunFail(gbSystemError, "pipe for rank %d: %s", r->rank, strerror(e));
  }
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(out[0]), close(out[1]), close(err[0]), close(err[1]);
    return gbRunFail(gbSystemError, "cannot start rank %d: fork: %s", r->rank, strerror(e));
  }
  if (pid == 0) childRun(opts, restore, r->rank, out[1], err[1]);

  close(out[1]);
  close(err[1]);
  /* Only our read ends are non-blocking: the rank's writes must block when the pipe is full. */
  fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
  fcntl(err[0], F_SETFL, fcntl(err[0], F_GETFL) | O_NONBLOCK);
  r->pid = pid;
  gbRunStreamInit(&r->out, out[0], 1, r->rank, opts->noTag);
  gbRunStreamInit(&r->err, err[0], 2, r->rank, opts->noTag);
  return gbSuccess;
}
