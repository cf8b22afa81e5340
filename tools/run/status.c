/* Wait statuses in words, and the launcher's exit code for them (the shell's
 * convention: the status, or 128 + the signal number). */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include "run.h"

static const struct {
  int sig;
  const char* name;
} names[] = {
  {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
  {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
  {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
  {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGCHLD, "SIGCHLD"},
  {SIGCONT, "SIGCONT"}, {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"}, {SIGTTIN, "SIGTTIN"},
  {SIGTTOU, "SIGTTOU"}, {SIGURG, "SIGURG"},   {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"},
  {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"}, {SIGWINCH, "SIGWINCH"}, {SIGSYS, "SIGSYS"},
};

const char* gbRunSignalName(int sig, char* buf, size_t len) {
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (names[i].sig == sig) return names[i].name;
  snprintf(buf, len, "%d", sig);
  return buf;
}

const char* gbRunStatusDescribe(int wstatus, char* buf, size_t len) {
  if (WIFSIGNALED(wstatus)) {
    char num[16];
    snprintf(buf, len, "was killed by signal %s%s", gbRunSignalName(WTERMSIG(wstatus), num, sizeof(num)),
             WCOREDUMP(wstatus) ? " (core dumped)" : "");
  } else {
    snprintf(buf, len, "exited with status %d", WEXITSTATUS(wstatus));
  }
  return buf;
}

int gbRunStatusCode(int wstatus) {
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return WEXITSTATUS(wstatus);
}
