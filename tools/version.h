/* --version, the same in every tool: the loaded library's version
 * (gbGetVersion, the file VERSION of its source) as MAJOR.MINOR.PATCH alone
 * on a line, for scripts to compare. */
#ifndef GB_TOOLS_VERSION_H
#define GB_TOOLS_VERSION_H

#include <stdio.h>
#include "gpubridge/gpubridge.h"

/* Prints the version on stdout; returns the tool's exit status (1, with the
 * reason on stderr, if the library cannot say). */
static inline int gbToolPrintVersion(const char* tool) {
  int code = 0;
  if (gbGetVersion(&code) != gbSuccess) {
    fprintf(stderr, "%s: %s\n", tool, gbGetLastError(NULL));
    return 1;
  }
  printf("%d.%d.%d\n", code / 10000, code / 100 % 100, code % 100);
  return fflush(stdout) == 0 ? 0 : 1;
}

#endif
