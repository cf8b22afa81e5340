#!/bin/sh
# usage: system_package.sh WHY PACKAGE...
# Installs Debian packages for `make test` with apt-get, as root or through
# passwordless sudo. Where it cannot, it fails naming the command to run.
set -eu
why=$1
shift
if [ "$(id -u)" -eq 0 ]; then
  sudo=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  sudo="sudo -n"
else
  echo "make test: $why; it cannot install $* here (not root, no passwordless sudo)." >&2
  echo "Run: sudo apt-get install -y $*   (or your system's package for it), then make test again." >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "make test: $why; this system has no apt-get: install Debian's $* through its own package manager," \
    "then make test again." >&2
  exit 1
fi
echo "make test: $why: installing $* with apt-get"
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
