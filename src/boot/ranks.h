/* Rank lists as text, for messages. */
#ifndef GB_BOOT_RANKS_H
#define GB_BOOT_RANKS_H

#include <stddef.h>

/* Writes a rank list as "0-2,5" (sorted, runs joined) into buf. */
const char* gbBootRankList(const int* ranks, int n, char* buf, size_t len);

#endif
