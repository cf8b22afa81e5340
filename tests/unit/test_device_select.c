/* Device selection where the vendor runtime is missing (as on CI): a forced
 * backend fails with a message naming what was looked for; auto falls back to
 * a CPU rank. Each case runs in a child, since the choice is made once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/param.h"
#include "base/result.h"
#include "device/device.h"

static int failures;

/* Runs the selection in a child with the given variables; expect NULL means
 * success as a CPU rank, else the error text must contain expect. */
static void expectSelection(const char* name, const char* const* env, const char* expect) {
  pid_t pid = fork();
  if (pid == 0) {
    alarm(30);
    unsetenv("GPUBRIDGE_VENDOR");
    for (int i = 0; env[i]; i += 2) setenv(env[i], env[i + 1], 1);
    gbParamReset();
    const gbDeviceOps* d = NULL;
    gbResult_t r = gbDeviceGet(&d);
    if (!expect) _exit(r == gbSuccess && strcmp(d->vendor, "cpu") == 0 ? 0 : 1);
    if (r == gbSuccess) _exit(2);
    if (!strstr(gbErrorLast(), expect)) {
      printf("  got: %s\n", gbErrorLast());
      _exit(3);
    }
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  printf("%s %s\n", ok ? "PASS" : "FAIL", name);
  failures += !ok;
}

int main(void) {
  /* Hide any GPU of this machine: the cases are about missing runtimes. */
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  setenv("HIP_VISIBLE_DEVICES", "", 1);
  const char* const autoEnv[] = {"GPUBRIDGE_DEVICE_BACKEND", "auto", NULL};
  expectSelection("auto without a usable GPU falls back to a CPU rank", autoEnv, NULL);
  const char* const hipEnv[] = {"GPUBRIDGE_DEVICE_BACKEND", "hip", "GPUBRIDGE_HIP_LIBRARY", "/nonexistent/libamdhip64.so",
                                NULL};
  expectSelection("hip forced, its library missing: the path is named", hipEnv, "/nonexistent/libamdhip64.so");
  const char* const cudaEnv[] = {"GPUBRIDGE_DEVICE_BACKEND", "cuda", "GPUBRIDGE_CUDART_LIBRARY",
                                 "/nonexistent/libcudart.so", NULL};
  expectSelection("cuda forced, its runtime missing: the path is named", cudaEnv, "/nonexistent/libcudart.so");
  const char* const cudaAuto[] = {"GPUBRIDGE_DEVICE_BACKEND", "cuda", NULL};
  expectSelection("cuda forced without a usable GPU: says so and how to fall back", cudaAuto,
                  "unset it to fall back to the CPU");
  return failures ? 1 : 0;
}
