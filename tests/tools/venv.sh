#!/bin/sh
# usage: venv.sh VENV BASE_PYTHON REQUIREMENTS [PIP_ARG...]
# The virtual environment `make test` runs the Python suites in
# (tests/README.md). Creates VENV with BASE_PYTHON where VENV has no working
# pip, then installs REQUIREMENTS into it unless VENV/requirements.installed
# (a copy of REQUIREMENTS as last installed) has the same text: made once,
# again after an edit. Where BASE_PYTHON is the system's python3 without its
# venv module (Debian's python3-venv), it installs that first
# (system_package.sh). PIP_ARGs go to pip install (an index, a proxy).
set -eu
venv=$1 base=$2 req=$3
shift 3
here=$(dirname "$0")
stamp=$venv/requirements.installed
own="or run make test GB_NO_VENV=1 PYTHON=... with an interpreter that has what $req lists"

if ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
  if ! base_path=$(command -v "$base"); then
    echo "make test: $base not found: install Python 3 (3.10 or newer), or name one with VENV_BASE=..., $own" >&2
    exit 1
  fi
  echo "make test: creating the virtual environment $venv with $base_path"
  if ! "$base" -m venv "$venv"; then
    if "$base" -c "import ensurepip" 2>/dev/null; then
      echo "make test: '$base -m venv $venv' failed (above): fix that, $own" >&2
      exit 1
    fi
    case "$base_path" in
      /usr/bin/*) "$here/system_package.sh" "$base_path has no venv module" python3-venv ;;
      *) echo "make test: $base_path has no venv module (ensurepip): install it, name another" \
           "interpreter with VENV_BASE=..., $own" >&2
         exit 1 ;;
    esac
    "$base" -m venv "$venv"
  fi
  rm -f "$stamp"
fi

if cmp -s "$req" "$stamp"; then
  exit 0
fi
echo "make test: installing $req into $venv (once; again when that file changes)"
if ! "$venv/bin/python" -m pip install --quiet "$@" -r "$req"; then
  echo "make test: pip could not install $req into $venv (its message is above). PIP_ARGS='...' passes" \
    "options to pip (an index that has torch's CPU build, a proxy), $own" >&2
  exit 1
fi
cp "$req" "$stamp"
