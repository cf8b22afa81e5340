/* gpubridge-helpdoc: a tool's --help text, parsed once, written as its man
 * page (roff) and its bash completion, so that neither can drift from what
 * the tool itself says. Built and run at build time (cmake/tool_docs.cmake);
 * never installed. libc only. */
#ifndef GB_HELPDOC_H
#define GB_HELPDOC_H

#include <stdio.h>

/* A piece of the text after the usage lines, in order:
 *   ITEM      a line indented 1..8 columns that starts with '-' or has a gap
 *             of two spaces (the tag, e.g. "-b, --minbytes N", then the
 *             body), with the lines indented deeper that follow it
 *   TEXT      lines at column 0, one paragraph (a blank line, or a line that
 *             ends with '.', ends it)
 *   VERBATIM  any other indented line, or a line ending with '\' (a command
 *             continued on the next), kept as it is */
typedef enum { GB_DOC_ITEM, GB_DOC_TEXT, GB_DOC_VERBATIM } gbDocKind_t;

typedef struct {
  gbDocKind_t kind;
  char* tag;  /* ITEM only */
  char* body; /* ITEM: its text joined on one line; TEXT: its lines, '\n' between; VERBATIM: the line */
} gbDocBlock_t;

typedef struct {
  char** usage; /* the synopsis: "usage: " taken off the first line, as much indent off the others */
  int nUsage;
  gbDocBlock_t* blocks;
  int nBlocks;
  char** options; /* every -x and --name of the items' tags, in order, once each */
  int nOptions;
} gbHelpDoc_t;

/* What the man page says besides the help text. */
typedef struct {
  const char* name;      /* gpubridge-run */
  const char* summary;   /* the NAME line after "gpubridge-run - " */
  const char* version;   /* what `name --version` printed */
  const char* seeAlso;   /* "gpubridge-perf gpubridge-info": names of section 1 pages */
  const char* license;   /* the LICENSE's first line: "BSD 3-Clause License" */
  const char* copyright; /* the LICENSE's "Copyright (c) ..." line */
} gbManInfo_t;

/* 0, or -1 with the reason in err (errLen bytes). */
int gbHelpParse(const char* text, gbHelpDoc_t* doc, char* err, size_t errLen);
void gbHelpFree(gbHelpDoc_t* doc);
/* The length of the option (-x, --name) that starts at p inside tag, or 0:
 * a dash at the tag's start or after a space, ',', '[' or '|', then letters,
 * digits, '_' and '-' with a letter or digit first. */
size_t gbHelpOptionLength(const char* tag, const char* p);

/* Each returns 0, or -1 when a write failed (errno). */
int gbManWrite(FILE* f, const gbHelpDoc_t* doc, const gbManInfo_t* info);
int gbCompletionWrite(FILE* f, const gbHelpDoc_t* doc, const char* name, const char* version);

#endif
