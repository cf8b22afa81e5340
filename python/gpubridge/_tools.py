"""Console scripts of the wheel: gpubridge-run, gpubridge-perf and
gpubridge-info run the programs bundled in the package (gpubridge/bin), which
find the package's libgpubridge through their rpath ($ORIGIN/../lib). Outside
the wheel (a checkout with GPUBRIDGE_LIBRARY, an installed prefix) they run
the programs in bin/ beside the lib/ folder of the library the package loads.
`python -m gpubridge` is gpubridge-info."""
import os
import sys

from . import _lib

BIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")


def tool_path(tool):
    """The program gpubridge-<tool> (run, perf, info): the package's, else the
    one beside the loaded library (<build>/bin for <build>/lib/libgpubridge.so)."""
    name = "gpubridge-" + tool
    bundled = os.path.join(BIN_DIR, name)
    if os.access(bundled, os.X_OK):
        return bundled
    try:
        beside = os.path.join(os.path.dirname(os.path.dirname(_lib._loaded_file())), "bin", name)
    except _lib.Error:
        return bundled
    return beside if os.access(beside, os.X_OK) else bundled


def _exec(tool):
    path = tool_path(tool)
    if not os.access(path, os.X_OK):
        try:
            lib = "the library it loads, " + _lib._loaded_file()
        except _lib.Error as e:
            lib = "a library it loads (%s)" % e
        sys.stderr.write("gpubridge-%s: %s is missing: this gpubridge package was not installed from the wheel "
                         "(pip install .), and no bin/gpubridge-%s lies beside %s; build the tools "
                         "(cmake --build BUILD) and set GPUBRIDGE_LIBRARY=BUILD, or run BUILD/bin/gpubridge-%s\n"
                         % (tool, path, tool, lib, tool))
        sys.exit(127)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(path, [path] + sys.argv[1:])


def run():
    _exec("run")


def perf():
    _exec("perf")


def info():
    _exec("info")
