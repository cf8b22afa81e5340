#ifndef GPUBRIDGE_TOOLS_INFO_PREFLIGHT_H
#define GPUBRIDGE_TOOLS_INFO_PREFLIGHT_H

/* gpubridge-info --preflight [--peers LIST --port P --wait S] (preflight.c):
 * prints one line per check and a verdict line; returns the exit status (0:
 * PASS, 1: FAIL). peers: comma-separated host names or addresses, NULL for
 * none. */
#define GB_PREFLIGHT_PORT 29551
#define GB_PREFLIGHT_WAIT_S 30.0
int preflightMain(const char* peers, int port, double waitS);

#endif
