"""A study's results: the `Study` value and its directory of files (points.jsonl / points.csv
appended as points finish, so that a rerun resumes; summary.csv / summary.json; config.json).
"""
from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass, field

import numpy as np

from . import plots
from .stats import KEY, METRICS, SUMMARY_KEY, aggregate, format_table

__all__ = ["POINT_COLUMNS", "SUMMARY_COLUMNS", "Study", "PointStore", "point_key", "write_csv", "read_points", "load"]

POINT_COLUMNS = KEY + ("steps",) + METRICS + ("ulp_hist", "seconds")
SUMMARY_COLUMNS = SUMMARY_KEY + ("steps", "seeds") + tuple(
    c for mname in METRICS for c in (mname, f"{mname}_lo", f"{mname}_hi")) + ("ulp_hist",)


@dataclass
class Study:
    """The result of `jwmma.study.run` (or `load`): per-seed ``points``, aggregated
    ``summary`` rows, the run's ``config``, its output directory ``out`` and ``seconds``."""

    points: list
    summary: list
    config: dict = field(default_factory=dict)
    out: str | None = None
    seconds: float = 0.0

    def select(self, rows=None, **where) -> list[dict]:
        """Rows (default: summary) whose fields equal the given values (a list: any of them)."""
        rows = self.summary if rows is None else rows
        def ok(r):
            return all(r[k] in v if isinstance(v, (list, tuple, set)) else r[k] == v for k, v in where.items())
        return [r for r in rows if ok(r)]

    def table(self, metrics=("mean_rel", "max_rel", "bias", "ident", "mean_abs_ulp")) -> str:
        """A plain-text table of the summary."""
        return format_table(self.summary, metrics)

    def figures(self, out_dir=None, prefix: str = "") -> list[str]:
        """Error vs K, bias vs K and ulp histograms as PNGs (needs matplotlib)."""
        return plots.save_figures(self.summary, out_dir or self.out or ".", prefix=prefix)


def point_key(row: dict) -> tuple:
    """The identity of a point: its `KEY` fields."""
    return tuple(row[k] for k in KEY)


def json_default(o):
    """JSON for numpy scalars."""
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    raise TypeError(type(o).__name__)


def _csv_value(v):
    """A CSV cell: dicts as compact JSON, floats with repr (exact)."""
    if isinstance(v, dict):
        return json.dumps(v, separators=(",", ":"))
    if isinstance(v, float):
        return repr(v)
    return v


def write_csv(path: str, rows: list[dict], columns) -> None:
    """Rows as a CSV file with a header (dicts as compact JSON, floats exactly)."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for row in rows:
            w.writerow([_csv_value(row.get(c)) for c in columns])


def read_points(path: str) -> list[dict]:
    """Rows of a points.jsonl file (a torn last line from an interrupted run is ignored)."""
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            if all(k in r for k in POINT_COLUMNS):
                rows.append(r)
    return rows


def load(out: str) -> Study:
    """A study from a directory written by `run` (points.jsonl and config.json)."""
    points = read_points(os.path.join(out, "points.jsonl"))
    cfg_path = os.path.join(out, "config.json")
    config = json.load(open(cfg_path)) if os.path.exists(cfg_path) else {}
    return Study(points, aggregate(points), config, out)


_FILES = ("points.jsonl", "points.csv", "summary.csv", "summary.json", "config.json")


class PointStore:
    """The points of a study so far, and (with a directory) the files that keep them.

    ``PointStore(out, resume)``: with ``resume`` the points already in out/points.jsonl count as
    done (a torn last line from an interrupted run is dropped); otherwise the files start
    afresh. ``out=None`` keeps the points in memory only. `appending` opens the point files for
    `add`; `finish` writes the summary and the configuration.
    """

    def __init__(self, out: str | None, resume: bool = True):
        self.out = out
        self.done: dict = {}
        self._files = None
        if out is None:
            return
        os.makedirs(out, exist_ok=True)
        self.paths = {x: os.path.join(out, x) for x in _FILES}
        if resume:
            for row in read_points(self.paths["points.jsonl"]):
                self.done[point_key(row)] = row
        else:
            for p in self.paths.values():
                if os.path.exists(p):
                    os.remove(p)
        # rewrite the JSONL from the parsed rows (drops a torn last line), then append
        with open(self.paths["points.jsonl"], "w") as f:
            for row in self.done.values():
                f.write(json.dumps(row, default=json_default) + "\n")
        write_csv(self.paths["points.csv"], list(self.done.values()), POINT_COLUMNS)

    def __enter__(self):
        if self.out is not None:
            self._files = (open(self.paths["points.jsonl"], "a"), open(self.paths["points.csv"], "a", newline=""))
        return self

    def __exit__(self, *exc):
        if self._files is not None:
            for f in self._files:
                f.close()
            self._files = None
        return False

    def add(self, row: dict) -> None:
        """Record a finished point (appended to the files at once, inside ``with store:``)."""
        self.done[point_key(row)] = row
        if self._files is not None:
            jsonl, csvf = self._files
            jsonl.write(json.dumps(row, default=json_default) + "\n")
            jsonl.flush()
            csv.writer(csvf).writerow([_csv_value(row.get(c)) for c in POINT_COLUMNS])
            csvf.flush()

    def finish(self, summary: list[dict], config: dict) -> None:
        """Write every point (rewritten in order), the summary and the configuration."""
        if self.out is None:
            return
        write_csv(self.paths["points.csv"], list(self.done.values()), POINT_COLUMNS)
        write_csv(self.paths["summary.csv"], summary, SUMMARY_COLUMNS)
        with open(self.paths["summary.json"], "w") as f:
            json.dump(summary, f, indent=1, default=json_default)
        with open(self.paths["config.json"], "w") as f:
            json.dump(config, f, indent=1)
