"""What both kinds of python -m gpubridge.plot share: reading gpubridge-perf
-J files (one JSON object a line; each line's object with where it came
from, or an InputError naming the file and line), the CSV, matplotlib."""
import csv
import json


def write_csv(rows, path, fields):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow(r)


def pyplot():
    """matplotlib.pyplot drawing to files, or None when matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


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
