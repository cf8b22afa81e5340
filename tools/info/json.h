/* A small JSON reader for gpubridge-info --trace: recursive descent over one
 * document held in memory, no dependency beyond libc. Errors say where (line
 * and column, both 1-based) and what was expected; nesting deeper than
 * JSON_MAX_DEPTH is refused rather than recursed into. Numbers keep their
 * exact 64-bit integer value when they are integers (nanosecond stamps do not
 * fit a double), and a double always. */
#ifndef GB_INFO_JSON_H
#define GB_INFO_JSON_H

#include <stddef.h>
#include <stdint.h>

#define JSON_MAX_DEPTH 64

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } jsonType_t;

typedef struct jsonValue {
  jsonType_t type;
  int boolean;            /* JSON_BOOL */
  int isInt;              /* JSON_NUMBER: an integer literal within int64 */
  int64_t integer;        /* JSON_NUMBER when isInt */
  double number;          /* JSON_NUMBER, always */
  char* string;           /* JSON_STRING: UTF-8, NUL-terminated (an escaped \u0000 ends it early) */
  size_t count;           /* JSON_ARRAY, JSON_OBJECT: members */
  struct jsonValue* items;/* JSON_ARRAY, JSON_OBJECT: the values, in document order */
  char** keys;            /* JSON_OBJECT: the keys, parallel to items */
} jsonValue_t;

/* Parses text[0..len) as one JSON document. Returns 0 and sets *out (free it
 * with jsonFree), or -1 with err holding "line L, column C: what was wrong". */
int jsonParse(const char* text, size_t len, jsonValue_t** out, char* err, size_t errLen);
void jsonFree(jsonValue_t* v);

/* The member named key of an object, or NULL (also when v is not an object).
 * With duplicate keys, the last one counts (as in most readers). */
const jsonValue_t* jsonGet(const jsonValue_t* v, const char* key);
/* The string of v, or NULL when v is absent or not a string. */
const char* jsonString(const jsonValue_t* v);
/* Sets *out to v's integer value; returns 0, or -1 when v is absent, null or not an integer. */
int jsonInt(const jsonValue_t* v, int64_t* out);
/* 1 for true, 0 for false, dflt otherwise. */
int jsonBool(const jsonValue_t* v, int dflt);

#endif
