"""Reading gpubridge-perf -J files (one JSON object a line) for
python -m gpubridge.plot: each line's object with where it came from, or an
InputError naming the file and line."""
import json


class InputError(Exception):
    pass


def json_rows(paths):
    """Yields (path, line number, object) for every non-empty line of paths."""
    for path in paths:
        try:
            f = open(path)
        except OSError as e:
            raise InputError("%s: %s" % (path, e.strerror)) from None
        with f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    yield path, n, json.loads(line)
                except ValueError as e:
                    raise InputError("%s:%d: not a JSON line of gpubridge-perf -J (%s)" % (path, n, e)) from None
