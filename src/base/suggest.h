/* "Did you mean": the known word closest to a misspelt one, for the
 * messages about unknown GPUBRIDGE_* names and enum values. */
#ifndef GB_BASE_SUGGEST_H
#define GB_BASE_SUGGEST_H

#include <stddef.h>

/* The edit distance (insertions, deletions, substitutions, and swaps of two
 * neighbours), case-insensitive, between word[0..n) and known; stops
 * counting past 8. */
int gbSuggestDistance(const char* word, size_t n, const char* known);

/* Whether a distance between word[0..n) and a known word makes it a likely
 * misspelling: at most 2 edits, and under a third of the word's length. */
int gbSuggestClose(size_t n, int distance);

#endif
