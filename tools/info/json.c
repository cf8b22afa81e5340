/* The JSON reader (json.h): RFC 8259, one value per document, whitespace
 * around it. Every error names the line and column of the offending byte. */
#include "json.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char* p;
  const char* end;
  const char* start;
  char* err;
  size_t errLen;
  int failed;
} reader_t;

/* Records the first error with the position of r->p. */
static int fail(reader_t* r, const char* fmt, ...) {
  if (r->failed) return -1;
  r->failed = 1;
  int line = 1, col = 1;
  for (const char* q = r->start; q < r->p && q < r->end; q++) {
    if (*q == '\n') line++, col = 1;
    else col++;
  }
  char what[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  if (r->err && r->errLen) snprintf(r->err, r->errLen, "line %d, column %d: %s", line, col, what);
  return -1;
}

static const char* seen(reader_t* r) {
  static const char* const eof = "the end of the file";
  static char one[32];
  if (r->p >= r->end) return eof;
  unsigned char c = (unsigned char)*r->p;
  if (c >= 0x20 && c < 0x7f) snprintf(one, sizeof(one), "'%c'", c);
  else snprintf(one, sizeof(one), "byte 0x%02x", c);
  return one;
}

static void skipSpace(reader_t* r) {
  while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

static int parseValue(reader_t* r, jsonValue_t* v, int depth);

static int literal(reader_t* r, const char* word) {
  size_t n = strlen(word);
  if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0) return fail(r, "expected a value, found %s", seen(r));
  r->p += n;
  return 0;
}

static int parseNumber(reader_t* r, jsonValue_t* v) {
  const char* s = r->p;
  const char* q = s;
  int integer = 1;
  if (q < r->end && *q == '-') q++;
  if (q >= r->end || *q < '0' || *q > '9') {
    r->p = q;
    return fail(r, "expected a digit, found %s", seen(r));
  }
  if (*q == '0') q++;
  else while (q < r->end && *q >= '0' && *q <= '9') q++;
  if (q < r->end && *q == '.') {
    integer = 0;
    q++;
    if (q >= r->end || *q < '0' || *q > '9') {
      r->p = q;
      return fail(r, "expected a digit after '.', found %s", seen(r));
    }
    while (q < r->end && *q >= '0' && *q <= '9') q++;
  }
  if (q < r->end && (*q == 'e' || *q == 'E')) {
    integer = 0;
    q++;
    if (q < r->end && (*q == '+' || *q == '-')) q++;
    if (q >= r->end || *q < '0' || *q > '9') {
      r->p = q;
      return fail(r, "expected a digit in the exponent, found %s", seen(r));
    }
    while (q < r->end && *q >= '0' && *q <= '9') q++;
  }
  char buf[400];
  size_t n = (size_t)(q - s);
  if (n >= sizeof(buf)) return fail(r, "a number of %zu characters is too long", n);
  memcpy(buf, s, n);
  buf[n] = '\0';
  v->type = JSON_NUMBER;
  v->number = strtod(buf, NULL);
  if (integer) {
    errno = 0;
    long long x = strtoll(buf, NULL, 10);
    if (errno == 0) v->isInt = 1, v->integer = (int64_t)x;
  }
  r->p = q;
  return 0;
}

static int hex4(reader_t* r, unsigned* out) {
  unsigned x = 0;
  for (int i = 0; i < 4; i++, r->p++) {
    if (r->p >= r->end) return fail(r, "expected 4 hex digits after \\u, found %s", seen(r));
    char c = *r->p;
    x <<= 4;
    if (c >= '0' && c <= '9') x |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') x |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') x |= (unsigned)(c - 'A' + 10);
    else return fail(r, "expected 4 hex digits after \\u, found %s", seen(r));
  }
  *out = x;
  return 0;
}

static size_t putUtf8(char* o, unsigned cp) {
  if (cp < 0x80) return (size_t)(o[0] = (char)cp, 1);
  if (cp < 0x800) {
    o[0] = (char)(0xc0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xe0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  o[0] = (char)(0xf0 | (cp >> 18));
  o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
  o[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* A string starting at the opening quote; *out is malloc'd. The decoded text
 * is never longer than the escaped one, so one buffer of that size holds it. */
static int parseString(reader_t* r, char** out) {
  r->p++; /* the opening quote */
  const char* q = r->p;
  while (q < r->end && *q != '"') q += (*q == '\\' && q + 1 < r->end) ? 2 : 1;
  char* s = malloc((size_t)(q - r->p) + 1);
  if (!s) return fail(r, "out of memory reading a string");
  size_t n = 0;
  for (;;) {
    if (r->p >= r->end) {
      free(s);
      return fail(r, "the string has no closing '\"'");
    }
    unsigned char c = (unsigned char)*r->p;
    if (c == '"') break;
    if (c < 0x20) {
      free(s);
      return fail(r, "a control character (0x%02x) inside a string must be escaped", c);
    }
    if (c != '\\') {
      s[n++] = (char)c;
      r->p++;
      continue;
    }
    r->p++;
    char e = r->p < r->end ? *r->p : '\0';
    const char* plain = strchr("\"\\/bfnrt", e);
    if (e && plain) {
      static const char out[] = "\"\\/\b\f\n\r\t";
      s[n++] = out[plain - "\"\\/bfnrt"];
      r->p++;
      continue;
    }
    if (e != 'u') {
      free(s);
      return fail(r, "unknown escape \\%s in a string", seen(r));
    }
    r->p++;
    unsigned cp;
    if (hex4(r, &cp) != 0) return free(s), -1;
    if (cp >= 0xd800 && cp < 0xdc00) { /* a high surrogate: a low one must follow */
      unsigned lo;
      if (r->end - r->p < 2 || r->p[0] != '\\' || r->p[1] != 'u') {
        free(s);
        return fail(r, "a \\u%04X (high surrogate) must be followed by a \\u low surrogate", cp);
      }
      r->p += 2;
      if (hex4(r, &lo) != 0) return free(s), -1;
      if (lo < 0xdc00 || lo > 0xdfff) {
        free(s);
        return fail(r, "\\u%04X is not a low surrogate after \\u%04X", lo, cp);
      }
      cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    } else if (cp >= 0xdc00 && cp <= 0xdfff) {
      free(s);
      return fail(r, "a lone low surrogate \\u%04X", cp);
    }
    n += putUtf8(s + n, cp);
  }
  r->p++; /* the closing quote */
  s[n] = '\0';
  *out = s;
  return 0;
}

/* Appends one slot to a growing array or object; returns it zeroed, or NULL. */
static jsonValue_t* grow(reader_t* r, jsonValue_t* v, size_t* cap, int withKeys) {
  if (v->count == *cap) {
    size_t ncap = *cap ? *cap * 2 : 8;
    jsonValue_t* items = realloc(v->items, ncap * sizeof(*items));
    if (!items) return fail(r, "out of memory"), NULL;
    v->items = items;
    if (withKeys) {
      char** keys = realloc(v->keys, ncap * sizeof(*keys));
      if (!keys) return fail(r, "out of memory"), NULL;
      v->keys = keys;
    }
    *cap = ncap;
  }
  jsonValue_t* slot = &v->items[v->count];
  memset(slot, 0, sizeof(*slot));
  if (withKeys) v->keys[v->count] = NULL;
  v->count++;
  return slot;
}

static int parseArray(reader_t* r, jsonValue_t* v, int depth) {
  size_t cap = 0;
  v->type = JSON_ARRAY;
  r->p++;
  skipSpace(r);
  if (r->p < r->end && *r->p == ']') return r->p++, 0;
  for (;;) {
    jsonValue_t* item = grow(r, v, &cap, 0);
    if (!item || parseValue(r, item, depth + 1) != 0) return -1;
    skipSpace(r);
    if (r->p < r->end && *r->p == ',') {
      r->p++;
      continue;
    }
    if (r->p < r->end && *r->p == ']') return r->p++, 0;
    return fail(r, "expected ',' or ']' in an array, found %s", seen(r));
  }
}

static int parseObject(reader_t* r, jsonValue_t* v, int depth) {
  size_t cap = 0;
  v->type = JSON_OBJECT;
  r->p++;
  skipSpace(r);
  if (r->p < r->end && *r->p == '}') return r->p++, 0;
  for (;;) {
    skipSpace(r);
    if (r->p >= r->end || *r->p != '"') return fail(r, "expected a key in quotes, found %s", seen(r));
    jsonValue_t* item = grow(r, v, &cap, 1);
    if (!item || parseString(r, &v->keys[v->count - 1]) != 0) return -1;
    skipSpace(r);
    if (r->p >= r->end || *r->p != ':') return fail(r, "expected ':', found %s", seen(r));
    r->p++;
    if (parseValue(r, item, depth + 1) != 0) return -1;
    skipSpace(r);
    if (r->p < r->end && *r->p == ',') {
      r->p++;
      continue;
    }
    if (r->p < r->end && *r->p == '}') return r->p++, 0;
    return fail(r, "expected ',' or '}' in an object, found %s", seen(r));
  }
}

static int parseValue(reader_t* r, jsonValue_t* v, int depth) {
  if (depth > JSON_MAX_DEPTH) return fail(r, "nested deeper than %d levels", JSON_MAX_DEPTH);
  skipSpace(r);
  if (r->p >= r->end) return fail(r, "expected a value, found %s", seen(r));
  switch (*r->p) {
    case '{': return parseObject(r, v, depth);
    case '[': return parseArray(r, v, depth);
    case '"': v->type = JSON_STRING; return parseString(r, &v->string);
    case 't': v->type = JSON_BOOL, v->boolean = 1; return literal(r, "true");
    case 'f': v->type = JSON_BOOL, v->boolean = 0; return literal(r, "false");
    case 'n': v->type = JSON_NULL; return literal(r, "null");
    default:
      if (*r->p == '-' || (*r->p >= '0' && *r->p <= '9')) return parseNumber(r, v);
      return fail(r, "expected a value, found %s", seen(r));
  }
}

static void freeMembers(jsonValue_t* v) {
  if (v->type == JSON_STRING) free(v->string);
  for (size_t i = 0; i < v->count; i++) {
    freeMembers(&v->items[i]);
    if (v->keys) free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
}

int jsonParse(const char* text, size_t len, jsonValue_t** out, char* err, size_t errLen) {
  reader_t r = {text, text + len, text, err, errLen, 0};
  jsonValue_t* v = calloc(1, sizeof(*v));
  if (!v) {
    if (err && errLen) snprintf(err, errLen, "out of memory");
    return -1;
  }
  if (parseValue(&r, v, 0) == 0) {
    skipSpace(&r);
    if (r.p < r.end) fail(&r, "expected the end of the file after the value, found %s", seen(&r));
  }
  if (r.failed) {
    jsonFree(v);
    return -1;
  }
  *out = v;
  return 0;
}

void jsonFree(jsonValue_t* v) {
  if (!v) return;
  freeMembers(v);
  free(v);
}

const jsonValue_t* jsonGet(const jsonValue_t* v, const char* key) {
  if (!v || v->type != JSON_OBJECT) return NULL;
  for (size_t i = v->count; i-- > 0;)
    if (v->keys[i] && strcmp(v->keys[i], key) == 0) return &v->items[i];
  return NULL;
}

const char* jsonString(const jsonValue_t* v) { return v && v->type == JSON_STRING ? v->string : NULL; }

int jsonInt(const jsonValue_t* v, int64_t* out) {
  if (!v || v->type != JSON_NUMBER || !v->isInt) return -1;
  *out = v->integer;
  return 0;
}

int jsonBool(const jsonValue_t* v, int dflt) { return v && v->type == JSON_BOOL ? v->boolean : dflt; }
