/* A tool's --help text into usage lines, blocks and options (helpdoc.h).
 * The shape it reads is the one the three tools print:
 *   usage: NAME ARGS              the synopsis, continued by lines indented
 *          ... | more ARGS        7 columns or more
 *   Text at column 0.             a paragraph, ended by a blank line or a
 *                                 line that ends with '.'
 *     -x, --long ARG   what it    an item: tag, a gap of two spaces, body,
 *                      does       continued by lines indented deeper
 *     other indented lines        kept as they are, as is a line at column
 *                                 0 that ends with '\' (a command, continued) */
#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "helpdoc.h"

#define USAGE "usage: "
#define ITEM_MAX_INDENT 8

static char* copyN(const char* s, size_t n) {
  char* c = malloc(n + 1);
  if (!c) return NULL;
  memcpy(c, s, n);
  c[n] = '\0';
  return c;
}

/* *dst + sep + s, or NULL (out of memory; *dst is kept for gbHelpFree). */
static char* appendTo(char** dst, const char* sep, const char* s) {
  size_t a = *dst ? strlen(*dst) : 0, b = strlen(sep), c = strlen(s);
  char* out = realloc(*dst, a + b + c + 1);
  if (!out) return NULL;
  memcpy(out + a, sep, b);
  memcpy(out + a + b, s, c + 1);
  *dst = out;
  return out;
}

static int pushString(char*** list, int* n, char* s) {
  if (!s) return -1;
  char** grown = realloc(*list, sizeof(char*) * (size_t)(*n + 1));
  if (!grown) {
    free(s);
    return -1;
  }
  grown[(*n)++] = s;
  *list = grown;
  return 0;
}

static gbDocBlock_t* pushBlock(gbHelpDoc_t* doc, gbDocKind_t kind) {
  gbDocBlock_t* grown = realloc(doc->blocks, sizeof(gbDocBlock_t) * (size_t)(doc->nBlocks + 1));
  if (!grown) return NULL;
  doc->blocks = grown;
  gbDocBlock_t* b = &grown[doc->nBlocks++];
  memset(b, 0, sizeof(*b));
  b->kind = kind;
  return b;
}

static size_t indentOf(const char* line) {
  size_t i = 0;
  while (line[i] == ' ') i++;
  return i;
}

/* Where the first gap of two spaces after text starts in s, or NULL. */
static const char* gapIn(const char* s) {
  for (const char* p = s; *p; p++)
    if (p > s && p[0] == ' ' && p[1] == ' ' && p[-1] != ' ') return p;
  return NULL;
}

static int hasOption(const gbHelpDoc_t* doc, const char* name) {
  for (int i = 0; i < doc->nOptions; i++)
    if (strcmp(doc->options[i], name) == 0) return 1;
  return 0;
}

size_t gbHelpOptionLength(const char* tag, const char* p) {
  if (*p != '-' || (p > tag && !strchr(" ,[|", p[-1]))) return 0;
  const char* q = p;
  while (*q == '-') q++;
  if (q - p > 2 || !isalnum((unsigned char)*q)) return 0;
  while (isalnum((unsigned char)*q) || *q == '_' || *q == '-') q++;
  return (size_t)(q - p);
}

static int collectOptions(gbHelpDoc_t* doc, const char* tag) {
  for (const char* p = tag; *p; p++) {
    size_t len = gbHelpOptionLength(tag, p);
    if (len == 0) continue;
    char* name = copyN(p, len);
    if (!name) return -1;
    if (hasOption(doc, name))
      free(name);
    else if (pushString(&doc->options, &doc->nOptions, name) != 0)
      return -1;
    p += len - 1;
  }
  return 0;
}

static int fail(char* err, size_t errLen, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errLen, fmt, ap);
  va_end(ap);
  return -1;
}

/* One line (NUL-terminated, without its '\n') after the usage lines. */
static int parseLine(gbHelpDoc_t* doc, const char* line, gbDocBlock_t** item, gbDocBlock_t** text) {
  size_t ind = indentOf(line);
  if (line[ind] == '\0') { /* a blank line ends the item or paragraph */
    *item = *text = NULL;
    return 0;
  }
  size_t len = strlen(line);
  if (ind == 0 && line[len - 1] != '\\') {
    *item = NULL;
    /* A line that ends a sentence ends its paragraph. */
    const char* prev = *text ? (*text)->body : NULL;
    if (prev && prev[strlen(prev) - 1] == '.') *text = NULL;
    if (*text) return appendTo(&(*text)->body, "\n", line) ? 0 : -1;
    if (!(*text = pushBlock(doc, GB_DOC_TEXT))) return -1;
    return ((*text)->body = copyN(line, strlen(line))) ? 0 : -1;
  }
  *text = NULL;
  const char* start = line + ind;
  const char* gap = gapIn(start);
  if (ind <= ITEM_MAX_INDENT && (*start == '-' || gap)) {
    if (!(*item = pushBlock(doc, GB_DOC_ITEM))) return -1;
    size_t tagLen = gap ? (size_t)(gap - start) : strlen(start);
    const char* body = gap ? gap + indentOf(gap) : "";
    if (!((*item)->tag = copyN(start, tagLen)) || !((*item)->body = copyN(body, strlen(body)))) return -1;
    return collectOptions(doc, (*item)->tag);
  }
  if (ind > ITEM_MAX_INDENT && *item) {
    /* A list split after its '|' joins without a space: "float|" + "float32|". */
    const char* b = (*item)->body;
    size_t n = strlen(b);
    const char* sep = (n == 0 || b[n - 1] == '|') ? "" : " ";
    return appendTo(&(*item)->body, sep, start) ? 0 : -1;
  }
  *item = NULL;
  gbDocBlock_t* v = pushBlock(doc, GB_DOC_VERBATIM);
  return v && (v->body = copyN(line, strlen(line))) ? 0 : -1;
}

int gbHelpParse(const char* text, gbHelpDoc_t* doc, char* err, size_t errLen) {
  memset(doc, 0, sizeof(*doc));
  if (strchr(text, '\t')) return fail(err, errLen, "the help text has a tab: indent it with spaces");
  while (*text == '\n') text++;
  if (strncmp(text, USAGE, strlen(USAGE)) != 0)
    return fail(err, errLen, "the help text does not start with '%s'", USAGE);

  gbDocBlock_t *item = NULL, *para = NULL;
  int inUsage = 1, lineNo = 0;
  for (const char* p = text; *p;) {
    const char* end = strchr(p, '\n');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    char* line = copyN(p, len);
    if (!line) goto oom;
    lineNo++;
    size_t ind = indentOf(line);
    if (lineNo == 1) {
      if (pushString(&doc->usage, &doc->nUsage, copyN(line + strlen(USAGE), len - strlen(USAGE))) != 0) goto oomLine;
    } else if (inUsage && line[ind] != '\0' && ind >= strlen(USAGE)) {
      if (pushString(&doc->usage, &doc->nUsage, copyN(line + strlen(USAGE), len - strlen(USAGE))) != 0) goto oomLine;
    } else {
      inUsage = 0;
      if (parseLine(doc, line, &item, &para) != 0) goto oomLine;
    }
    free(line);
    p = end ? end + 1 : p + len;
    continue;
  oomLine:
    free(line);
    goto oom;
  }
  if (doc->nOptions == 0) {
    gbHelpFree(doc);
    return fail(err, errLen, "the help text lists no option (a line indented 1..%d columns starting with '-')",
                ITEM_MAX_INDENT);
  }
  return 0;
oom:
  gbHelpFree(doc);
  return fail(err, errLen, "out of memory");
}

void gbHelpFree(gbHelpDoc_t* doc) {
  for (int i = 0; i < doc->nUsage; i++) free(doc->usage[i]);
  for (int i = 0; i < doc->nBlocks; i++) {
    free(doc->blocks[i].tag);
    free(doc->blocks[i].body);
  }
  for (int i = 0; i < doc->nOptions; i++) free(doc->options[i]);
  free(doc->usage);
  free(doc->blocks);
  free(doc->options);
  memset(doc, 0, sizeof(*doc));
}
