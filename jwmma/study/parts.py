"""The files of a study directory and how they are written so that nothing is lost (README "Several machines").

Layout of a study directory OUT:

* ``OUT/points.jsonl``: the merged table (and what a one-process run appends to; never
  rewritten in place: whole rewrites go through a temporary file and an atomic rename);
* ``OUT/parts/config-<index>.json``: the sweep's configuration, as process <index> saw it
  (what `merge` needs when no process wrote config.json);
* ``OUT/parts/points-<index>.jsonl``: the rows process <index> of a multi-process run
  computed, appended one line per point as it finishes (flushed and fsync'ed), never
  written by anyone else: no file is shared between writers, so no locking is needed (file
  locks on NFS / Lustre are not to be relied on);
* ``OUT/points.csv``, ``summary.*``, ``config.json``: derived tables (`jwmma.study.store`:
  process 0 after every process finished, or ``jwmma study --merge-only``), written atomically.

Invariants: a row is appended only by the point's owner (`jwmma.study.share.assign`), after the
point finished; a reader takes every file, ignores a torn last line (a writer killed
mid-line), and keeps one row per key. So a killed process loses at most its in-flight
points, which the next run redoes; finished points are found in whatever file holds them
and are never recomputed; and no key appears twice in the merged table. Before appending,
a writer cuts its own file back to the last complete line, so a torn line never glues onto
the next row.
"""
from __future__ import annotations

import csv
import glob
import json
import os

__all__ = ["PARTS", "part_path", "part_config_path", "part_configs", "point_files", "write_json_atomic",
           "write_csv_atomic", "write_jsonl_atomic", "cut_torn_tail", "PartWriter", "read_rows", "canonical_order"]

PARTS = "parts"


def part_path(out: str, index: int) -> str:
    """OUT/parts/points-<index>.jsonl: the points process ``index`` computed."""
    return os.path.join(out, PARTS, f"points-{int(index):05d}.jsonl")


def part_config_path(out: str, index: int) -> str:
    """OUT/parts/config-<index>.json: the sweep's configuration as process ``index`` saw it."""
    return os.path.join(out, PARTS, f"config-{int(index):05d}.json")


def part_configs(out: str) -> list:
    """Every process's saved configuration file in OUT/parts, sorted."""
    return sorted(glob.glob(os.path.join(out, PARTS, "config-*.json")))


def _replace(tmp: str, path: str, f) -> None:
    f.flush()
    os.fsync(f.fileno())
    f.close()
    os.replace(tmp, path)


def write_json_atomic(path: str, obj, default=None, sort_keys: bool = False) -> None:
    """``obj`` as JSON in ``path`` through a temporary file and an atomic rename."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    f = open(tmp, "w")
    json.dump(obj, f, indent=1, sort_keys=sort_keys, default=default)
    _replace(tmp, path, f)


def write_csv_atomic(path: str, header, lines) -> None:
    """A CSV file (``header`` row, then the ``lines`` rows of cells) written atomically."""
    tmp = f"{path}.tmp-{os.getpid()}"
    f = open(tmp, "w", newline="")
    w = csv.writer(f)
    w.writerow(header)
    w.writerows(lines)
    _replace(tmp, path, f)


def point_files(out: str) -> list:
    """Every file that may hold finished points: the merged table first, then the parts."""
    files = [os.path.join(out, "points.jsonl")]
    files += sorted(glob.glob(os.path.join(out, PARTS, "points-*.jsonl")))
    return [f for f in files if os.path.exists(f)]


def cut_torn_tail(path: str) -> int:
    """Truncate ``path`` after its last newline (drops a line torn by a killed writer).
    Returns the number of bytes dropped. Only the file's own writer may call this."""
    if not os.path.exists(path):
        return 0
    size = os.path.getsize(path)
    if size == 0:
        return 0
    with open(path, "rb+") as f:
        back = min(size, 1 << 20)
        pos = size
        while pos > 0:  # scan backwards for the last b"\n"
            start = max(0, pos - back)
            f.seek(start)
            chunk = f.read(pos - start)
            i = chunk.rfind(b"\n")
            if i >= 0:
                keep = start + i + 1
                break
            pos = start
        else:
            keep = 0
        if keep < size:
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())
        return size - keep


class PartWriter:
    """Appends finished rows to one file that only this writer appends to (a process's part
    file, or a one-process run's points.jsonl): its torn tail cut first, then one JSON line
    per point, flushed and fsync'ed."""

    def __init__(self, path: str, default=None):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        cut_torn_tail(path)
        self.path = path
        self._f = open(path, "a")
        self._default = default

    def write(self, rows) -> None:
        """Append ``rows`` (one JSON line each), then flush and fsync."""
        for r in rows:
            self._f.write(json.dumps(r, default=self._default) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())  # a finished point survives the host, not only the process

    def close(self) -> None:
        """Close the file."""
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_rows(out: str, read_points, key) -> tuple:
    """({key: row} over every point file (first occurrence kept), conflicts) where conflicts
    lists keys found twice with different values (other than the timing column ``seconds``):
    a deterministic sweep never produces one, so any is reported, not hidden."""
    rows: dict = {}
    conflicts = []
    for path in point_files(out):
        for r in read_points(path):
            k = key(r)
            if k in rows:
                a = {c: v for c, v in rows[k].items() if c != "seconds"}
                b = {c: v for c, v in r.items() if c != "seconds"}
                if a != b:
                    conflicts.append((k, path))
                continue
            rows[k] = r
    return rows, conflicts


def write_jsonl_atomic(path: str, rows, default=None) -> None:
    """Write all rows to ``path`` through a temporary file and an atomic rename: a reader (or
    a crash) sees the old table or the new one, never half of one."""
    tmp = f"{path}.tmp-{os.getpid()}"
    f = open(tmp, "w")
    for r in rows:
        f.write(json.dumps(r, default=default) + "\n")
    _replace(tmp, path, f)


def canonical_order(rows, model_order=()) -> list:
    """Rows sorted by a total order on their key, models in the sweep's order: the merged
    table of a multi-process run and the table of a one-process run list the same rows in
    the same order."""
    pos = {m: i for i, m in enumerate(model_order)}

    def k(r):
        return (r["dist"], r["format"], r["builtin"], r["scaling"], pos.get(r["model"], len(pos)), r["model"],
                r["remedy"], r["K"], r["M"], r["N"], r["seed"])

    return sorted(rows, key=k)
