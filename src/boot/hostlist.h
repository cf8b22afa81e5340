#ifndef GPUBRIDGE_BOOT_HOSTLIST_H
#define GPUBRIDGE_BOOT_HOSTLIST_H

#include <stddef.h>

/* The first host of a Slurm host list ("node[01-04,07],gpu[1-2]" ->
 * "node01"; "a,b" -> "a"; "rack[1-2]-n[3-4]" -> "rack1-n3"): where srun puts
 * task 0 (its block and cyclic distributions both start on the first node).
 * Returns 1 and fills out, or 0 when list is empty or malformed (an
 * unclosed bracket, an empty name) or out is too small. */
int gbBootHostlistFirst(const char* list, char* out, size_t len);

/* Whether host is one of list's hosts ("node[08-10]" has node09, not node9).
 * 0 as well when list is empty or malformed. */
int gbBootHostlistHas(const char* list, const char* host);

#endif
