"""Checks of the installed documentation, shared by test_install.py (a
`cmake --install` prefix) and test_wheel.py (a venv the wheel went into):
the tools' man pages and bash completions, each against the options the
installed tool's own --help lists (read here, with a parser of this file, not
gpubridge-helpdoc's), and share/doc/gpubridge against the source tree."""
import glob
import os
import re
import shutil
import subprocess

import installtest as it

TOOLS = ("gpubridge-run", "gpubridge-perf", "gpubridge-info")
# An option in --help: a line indented 1..8 columns that starts with '-'; its
# options are the -x and --name words before the first two-space gap.
OPTION_LINE = re.compile(r"^ {1,8}(-\S.*?)(?: {2,}|$)", re.M)
OPTION = re.compile(r"(?:^|(?<=[\s,\[|]))(--?[A-Za-z0-9][\w-]*)")


def help_options(help_text):
    """The options a --help text lists, in order, once each."""
    found = []
    for tag in OPTION_LINE.findall(help_text):
        for name in OPTION.findall(tag):
            if name not in found:
                found.append(name)
    return found


def tool_help(bin_dir, tool, env=None):
    text = it.run([os.path.join(bin_dir, tool), "--help"], tool + " --help", 60, env)
    options = help_options(text)
    if "--help" not in options or "--version" not in options or len(options) < 4:
        it.fail("%s --help: parsed options %s (want --help, --version and more): the parser is wrong\n%s"
                % (tool, options, text))
    return options


def roff_plain(text):
    """Roff source with the escapes the pages use undone (fonts, \\-, \\e, \\&, \\:)."""
    text = re.sub(r"\\f[BIRP]", "", text)
    return text.replace("\\-", "-").replace("\\&", "").replace("\\:", "").replace("\\e", "\\")


def words(text):
    return set(re.findall(r"(?<![\w-])--?[A-Za-z0-9][\w-]*", text))


def check_man(path, tool, options):
    """The roff structure, every --help option in an OPTIONS tag, and man's rendering."""
    if not os.path.isfile(path):
        it.fail("%s is not installed" % path)
    with open(path, encoding="utf-8") as f:
        source = f.read()
    lines = source.splitlines()
    problems = []
    th = [line for line in lines if line.startswith(".TH ")]
    if len(th) != 1 or roff_plain(th[0]).split()[1].strip('"') != tool.upper():
        problems.append("one .TH line naming %s, got %s" % (tool.upper(), th))
    elif roff_plain(th[0]).split()[2] != "1":
        problems.append(".TH says section %s, not 1" % roff_plain(th[0]).split()[2])
    sections = [line[4:].strip() for line in lines if line.startswith(".SH ")]
    for want in ("NAME", "SYNOPSIS", "OPTIONS", "SEE ALSO", "COPYRIGHT"):
        if want not in sections:
            problems.append("no .SH %s (sections: %s)" % (want, sections))
    if "NAME" in sections:
        name_line = lines[lines.index(".SH NAME") + 1]
        if not roff_plain(name_line).startswith(tool + " - ") or len(name_line) < len(tool) + 10:
            problems.append("the NAME line is %r, want '%s \\- summary'" % (name_line, tool))
    if th and it.version() not in th[0]:
        problems.append(".TH does not carry the version %s" % it.version())
    tags = [roff_plain(lines[i + 1]) for i, line in enumerate(lines[:-1]) if line == ".TP"]
    tagged = set().union(*(words(t) for t in tags)) if tags else set()
    missing = [o for o in options if o not in tagged]
    if missing:
        problems.append("options of --help with no .TP entry: %s" % missing)
    extra = sorted(tagged - set(options))
    if extra:
        problems.append(".TP entries for options --help does not list: %s" % extra)
    if problems:
        it.fail("%s: %s" % (path, "; ".join(problems)))

    if not shutil.which("man"):
        print("SKIP: man is not installed: %s checked as roff source only" % path, flush=True)
        return "roff source"
    env = it.clean_env(LC_ALL="C", MANWIDTH="200")
    p = subprocess.run(["man", "--warnings", "-l", "-P", "cat", path], capture_output=True, text=True,
                       timeout=60, env=env)
    rendered = re.sub(r".\x08", "", p.stdout)
    if p.returncode != 0 or p.stderr.strip():
        it.fail("man -l %s: exit %d, warnings:\n%s" % (path, p.returncode, p.stderr[-2000:]))
    missing = [o for o in options if o not in words(rendered)]
    if missing or not re.search(r"^NAME\s*$", rendered, re.M) or tool not in rendered:
        it.fail("man -l %s renders without NAME, %s or the options %s:\n%s"
                % (path, tool, missing, rendered[:3000]))
    return "rendered by man"


def complete(path, tool, words_before, current):
    """COMPREPLY of the completion file's function for `tool WORDS... CURRENT`."""
    script = ('source "$1" || exit 3; spec=$(complete -p "$2") || exit 4; '
              'func=$(sed -n "s/.* -F \\([^ ]*\\) .*/\\1/p" <<<"$spec"); [ -n "$func" ] || exit 5; '
              'shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; '
              '"$func" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"; '
              'printf "%s\\n" "${COMPREPLY[@]}"')
    cmd = ["bash", "--norc", "--noprofile", "-c", script, "bash", path, tool] + words_before + [current]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=it.clean_env())
    if p.returncode != 0:
        it.fail("completing %r with %s: exit %d (3: source failed, 4: no complete -p %s, 5: no -F function)\n%s"
                % (" ".join([tool] + words_before + [current]), path, p.returncode, tool, p.stderr[-2000:]))
    return [w for w in p.stdout.split("\n") if w]


def check_completion(path, tool, options):
    """'-' completes to every option of --help, '--' to the long ones, and after '--' nothing."""
    if not os.path.isfile(path):
        it.fail("%s is not installed" % path)
    got = complete(path, tool, [], "-")
    if sorted(got) != sorted(options):
        it.fail("%s: '%s -<TAB>' offers %s; --help lists %s" % (path, tool, sorted(got), sorted(options)))
    longs = complete(path, tool, [], "--")
    if sorted(longs) != sorted(o for o in options if o.startswith("--")):
        it.fail("%s: '%s --<TAB>' offers %s" % (path, tool, sorted(longs)))
    after = complete(path, tool, ["--"], "-")
    if after:
        it.fail("%s: '%s -- -<TAB>' offers %s; after '--' the words are the program's" % (path, tool, after))


def check_tools(bin_dir, prefix, env=None):
    """Each tool's man page under prefix/share/man/man1 and completion under
    prefix/share/bash-completion/completions, against its --help."""
    how = set()
    counts = []
    for tool in TOOLS:
        options = tool_help(bin_dir, tool, env)
        how.add(check_man(os.path.join(prefix, "share", "man", "man1", tool + ".1"), tool, options))
        check_completion(os.path.join(prefix, "share", "bash-completion", "completions", tool), tool, options)
        counts.append("%s %d" % (tool, len(options)))
    print("ok: man pages (%s) and bash completions list every option of each tool's --help (%s)"
          % (", ".join(sorted(how)), ", ".join(counts)), flush=True)


def doc_sources():
    """{path under share/doc/gpubridge: source file} for README.md, LICENSE, CHANGELOG.md, docs/*.md."""
    files = {name: os.path.join(it.SOURCE_DIR, name) for name in ("README.md", "LICENSE", "CHANGELOG.md")}
    pages = glob.glob(os.path.join(it.SOURCE_DIR, "docs", "*.md"))
    if len(pages) < 5:
        it.fail("found %d docs/*.md in %s" % (len(pages), it.SOURCE_DIR))
    files.update({"docs/" + os.path.basename(p): p for p in pages})
    return files


def check_docs(doc_dir):
    """share/doc/gpubridge holds each documentation file of the source, the same bytes."""
    problems = []
    sources = doc_sources()
    for rel, src in sorted(sources.items()):
        path = os.path.join(doc_dir, rel)
        if not os.path.isfile(path):
            problems.append("%s is not installed" % path)
            continue
        with open(path, "rb") as a, open(src, "rb") as b:
            if a.read() != b.read():
                problems.append("%s differs from %s" % (path, src))
    if problems:
        it.fail("; ".join(problems))
    print("ok: %s holds README.md, LICENSE, CHANGELOG.md and the %d docs/*.md, as in the source"
          % (doc_dir, len(sources) - 3), flush=True)
