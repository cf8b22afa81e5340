/* The bash completion of one tool: a word starting with '-' completes to the
 * options its --help lists; any other word, and every word after a '--',
 * completes as bash would without it (files; -o bashdefault -o default). The
 * function is _NAME with every character but letters and digits as '_';
 * bash-completion loads the file by the command's name. */
#include <ctype.h>
#include <string.h>
#include "helpdoc.h"

int gbCompletionWrite(FILE* f, const gbHelpDoc_t* doc, const char* name, const char* version) {
  char func[256] = "_";
  size_t n = 1;
  for (const char* p = name; *p && n + 1 < sizeof(func); p++) func[n++] = isalnum((unsigned char)*p) ? *p : '_';
  func[n] = '\0';

  fprintf(f, "# bash completion for %s (gpubridge %s): its options, made at build time\n", name, version);
  fprintf(f, "# from `%s --help` by gpubridge-helpdoc (tools/helpdoc).\n", name);
  fprintf(f, "%s()\n{\n", func);
  fputs("    local cur=${COMP_WORDS[COMP_CWORD]} i\n", f);
  fputs("    COMPREPLY=()\n", f);
  fputs("    for ((i = 1; i < COMP_CWORD; i++)); do\n", f);
  fputs("        [[ ${COMP_WORDS[i]} == -- ]] && return 0\n", f);
  fputs("    done\n", f);
  fputs("    if [[ $cur == -* ]]; then\n", f);
  fputs("        COMPREPLY=($(compgen -W '", f);
  for (int i = 0; i < doc->nOptions; i++) fprintf(f, "%s%s", i ? " " : "", doc->options[i]);
  fputs("' -- \"$cur\"))\n", f);
  fputs("    fi\n", f);
  fputs("    return 0\n", f);
  fputs("}\n", f);
  fprintf(f, "complete -o bashdefault -o default -F %s %s\n", func, name);
  return ferror(f) ? -1 : 0;
}
