/* The man page (section 1, roff as man(7) reads it) of one tool from its
 * parsed --help: NAME, SYNOPSIS (the usage lines), DESCRIPTION (what comes
 * before the first item), OPTIONS (the items and what follows them), SEE
 * ALSO and COPYRIGHT. Options are bold; hyphenation is off, so no option is
 * split across lines. */
#include <ctype.h>
#include <string.h>
#include "helpdoc.h"

/* s with roff's specials escaped: a backslash as \e, '-' as \- (a minus,
 * so options can be searched and pasted); after a '|' a place to break the
 * line (\:, nothing printed), for lists as "int8|uint8|...". */
static void putEscaped(FILE* f, const char* s, size_t n) {
  for (size_t i = 0; i < n && s[i]; i++) {
    if (s[i] == '\\')
      fputs("\\e", f);
    else if (s[i] == '-')
      fputs("\\-", f);
    else if (s[i] == '|')
      fputs("|\\:", f);
    else
      fputc(s[i], f);
  }
}

/* One output line; a leading '.' or '\'' would read as a request. */
static void putLine(FILE* f, const char* s) {
  if (s[0] == '.' || s[0] == '\'') fputs("\\&", f);
  putEscaped(f, s, strlen(s));
  fputc('\n', f);
}

static void putBold(FILE* f, const char* s, size_t n) {
  fputs("\\fB", f);
  putEscaped(f, s, n);
  fputs("\\fR", f);
}

/* A tag, or a usage line, with every option in bold. */
static void putTag(FILE* f, const char* tag) {
  if (tag[0] == '.' || tag[0] == '\'') fputs("\\&", f);
  for (const char* p = tag; *p;) {
    size_t len = gbHelpOptionLength(tag, p);
    if (len > 0) {
      putBold(f, p, len);
      p += len;
    } else {
      putEscaped(f, p, 1);
      p++;
    }
  }
  fputc('\n', f);
}

/* A usage line: the tool's name, where it starts the line, bold too. */
static void putUsage(FILE* f, const char* line, const char* name) {
  size_t ind = strspn(line, " "), n = strlen(name);
  if (strncmp(line + ind, name, n) == 0 && (line[ind + n] == ' ' || line[ind + n] == '\0')) {
    fprintf(f, "%.*s", (int)ind, line);
    putBold(f, name, n);
    putTag(f, line + ind + n);
  } else {
    putTag(f, line);
  }
}

static void putBlock(FILE* f, const gbHelpDoc_t* doc, int i) {
  const gbDocBlock_t* b = &doc->blocks[i];
  int prevVerbatim = i > 0 && doc->blocks[i - 1].kind == GB_DOC_VERBATIM;
  int nextVerbatim = i + 1 < doc->nBlocks && doc->blocks[i + 1].kind == GB_DOC_VERBATIM;
  switch (b->kind) {
    case GB_DOC_ITEM:
      fputs(".TP\n", f);
      putTag(f, b->tag);
      if (b->body[0]) putLine(f, b->body);
      break;
    case GB_DOC_TEXT:
      fputs(".PP\n", f);
      for (const char* p = b->body; *p;) {
        const char* end = strchr(p, '\n');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (p[0] == '.' || p[0] == '\'') fputs("\\&", f);
        putEscaped(f, p, n);
        fputc('\n', f);
        p += n + (end ? 1 : 0);
      }
      break;
    case GB_DOC_VERBATIM:
      if (!prevVerbatim) fputs(".PP\n.nf\n", f);
      putLine(f, b->body);
      if (!nextVerbatim) fputs(".fi\n", f);
      break;
  }
}

int gbManWrite(FILE* f, const gbHelpDoc_t* doc, const gbManInfo_t* info) {
  fprintf(f, ".\\\" %s(1), made at build time from `%s --help` by gpubridge-helpdoc\n", info->name, info->name);
  fputs(".\\\" (tools/helpdoc): change the tool's help text, not this file.\n", f);
  fputs(".TH \"", f);
  for (const char* p = info->name; *p; p++) {
    if (*p == '-')
      fputs("\\-", f);
    else
      fputc(toupper((unsigned char)*p), f);
  }
  fprintf(f, "\" 1 \"\" \"gpubridge %s\" \"gpubridge manual\"\n.nh\n.ad l\n", info->version);

  fputs(".SH NAME\n", f);
  putEscaped(f, info->name, strlen(info->name));
  fputs(" \\- ", f);
  putEscaped(f, info->summary, strlen(info->summary));
  fputs("\n.SH SYNOPSIS\n.nf\n", f);
  for (int i = 0; i < doc->nUsage; i++) putUsage(f, doc->usage[i], info->name);
  fputs(".fi\n", f);

  int first = 0;
  while (first < doc->nBlocks && doc->blocks[first].kind != GB_DOC_ITEM) first++;
  if (first > 0) fputs(".SH DESCRIPTION\n", f);
  for (int i = 0; i < doc->nBlocks; i++) {
    if (i == first) fputs(".SH OPTIONS\n", f);
    putBlock(f, doc, i);
  }

  fputs(".SH SEE ALSO\n", f);
  int n = 0;
  for (const char* p = info->seeAlso; *p;) {
    size_t len = strcspn(p, " ");
    if (len > 0) {
      fputs(n++ ? ",\n" : "", f);
      putBold(f, p, len);
      fputs("(1)", f);
    }
    p += len + strspn(p + len, " ");
  }
  fputs(n ? ".\n" : "", f);
  fputs(".PP\nThe documentation, README.md and docs/*.md, is installed in share/doc/gpubridge.\n", f);
  fputs(".SH COPYRIGHT\n", f);
  putLine(f, info->copyright);
  fputs(".br\ngpubridge is distributed under the ", f);
  putEscaped(f, info->license, strlen(info->license));
  fputs(": share/doc/gpubridge/LICENSE.\n", f);
  return ferror(f) ? -1 : 0;
}
