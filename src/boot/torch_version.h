/* Which torch launched this process, for the messages about torchrun's
 * store: torchrun's agent is a Python process with torch loaded, the
 * parent of a rank (or a few generations up, through a wrapper script). */
#ifndef GB_BOOT_TORCH_VERSION_H
#define GB_BOOT_TORCH_VERSION_H

#include <stddef.h>

/* Writes torch's __version__ ("2.13.0+cpu") of the nearest of this process's
 * first 4 ancestors that has torch's libraries mapped, read from
 * torch/version.py beside them, and returns 1; else writes "unknown" and
 * returns 0. */
int gbBootTorchVersion(char* out, size_t len);

#endif
