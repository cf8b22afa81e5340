/* gpubridge-run: starts N local ranks of a program with the rendezvous
 * environment, forwards their output tagged by rank, and stops them all when
 * one fails. See README.md. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>
#include "run.h"
#include "version.h"

gbResult_t gbRunFail(gbResult_t res, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("gpubridge-run: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return res;
}

/* With 0, 1 or 2 closed, a pipe could land there and dup2 in the child would
 * then not clear its close-on-exec flag. */
static void openStdFds(void) {
  for (int fd = 0; fd <= 2; fd++) {
    if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    int null = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (null >= 0 && null != fd) { /* cannot happen: lowest free fd is fd */
      dup2(null, fd);
      close(null);
    }
  }
}

/* Two pipe ends per rank stay open in the launcher. */
static gbResult_t raiseFileLimit(int nranks, struct rlimit* before) {
  if (getrlimit(RLIMIT_NOFILE, before) != 0)
    return gbRunFail(gbSystemError, "getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
  rlim_t need = (rlim_t)(2 * nranks + 32);
  if (before->rlim_cur == RLIM_INFINITY || before->rlim_cur >= need) return gbSuccess;
  struct rlimit raised = *before;
  raised.rlim_cur = need;
  if ((before->rlim_max != RLIM_INFINITY && before->rlim_max < need) || setrlimit(RLIMIT_NOFILE, &raised) != 0)
    return gbRunFail(gbSystemError, "%d ranks need %lu open files, and the limit is %lu (raise ulimit -n)",
                     nranks, (unsigned long)need, (unsigned long)before->rlim_max);
  return gbSuccess;
}

/* SIGCHLD, SIGINT and SIGTERM arrive through a signalfd that the main poll()
 * watches; SIGPIPE is ignored so that a closed stdout is an error, not death. */
static gbResult_t setUpSignals(gbRunRestore_t* restore, int* sigfd) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  if (sigprocmask(SIG_BLOCK, &set, &restore->mask) != 0)
    return gbRunFail(gbSystemError, "sigprocmask: %s", strerror(errno));
  *sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (*sigfd < 0) return gbRunFail(gbSystemError, "signalfd: %s", strerror(errno));
  struct sigaction ignore;
  memset(&ignore, 0, sizeof(ignore));
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  if (sigaction(SIGPIPE, &ignore, &restore->sigpipe) != 0)
    return gbRunFail(gbSystemError, "sigaction(SIGPIPE): %s", strerror(errno));
  return gbSuccess;
}

int main(int argc, char** argv) {
  openStdFds();
  gbRunOptions_t opts;
  gbResult_t res = gbRunOptionsParse(argc, argv, &opts);
  if (res == gbInvalidArgument) {
    gbRunUsagePrint(stderr);
    return 2;
  }
  if (res != gbSuccess) return 1;
  if (opts.help) {
    gbRunUsagePrint(stdout);
    return 0;
  }
  if (opts.version) return gbToolPrintVersion("gpubridge-run");
  gbRunRestore_t restore;
  memset(&restore, 0, sizeof(restore));
  restore.launcher = getpid();
  int sigfd = -1;
  if (raiseFileLimit(opts.nranks, &restore.nofile) != gbSuccess || gbRunEnvPrepare(&opts) != gbSuccess ||
      setUpSignals(&restore, &sigfd) != gbSuccess) {
    gbRunOptionsFree(&opts);
    return 1;
  }
  fflush(stdout);
  int code = gbRunJob(&opts, &restore, sigfd);
  close(sigfd);
  gbRunOptionsFree(&opts);
  return code;
}
