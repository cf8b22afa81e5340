"""Console scripts of the wheel: gpubridge-run, gpubridge-perf and
gpubridge-info run the programs bundled in the package (gpubridge/bin), which
find the package's libgpubridge through their rpath ($ORIGIN/../lib)."""
import os
import sys

BIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")


def tool_path(tool):
    """The bundled program gpubridge-<tool> (run, perf, info)."""
    return os.path.join(BIN_DIR, "gpubridge-" + tool)


def _exec(tool):
    path = tool_path(tool)
    if not os.access(path, os.X_OK):
        sys.stderr.write("gpubridge-%s: %s is missing: this gpubridge package was not installed from the wheel "
                         "(pip install .); from a build directory run <build>/bin/gpubridge-%s\n"
                         % (tool, path, tool))
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
