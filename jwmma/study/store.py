"""A study's results: the `Study` value and its directory of files (points.jsonl appended as
points finish, so that a rerun resumes; per-process part files of a sweep over several
processes, `parts`; points.csv, summary.csv / summary.json and config.json derived from them).

Nothing finished is ever rewritten in place: appends go to a file only its writer appends to
(its torn tail cut first), whole files are replaced atomically (temporary file + rename), so
a kill at any moment loses at most the points in flight.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import numpy as np

from . import parts, plots
from .stats import KEY, METRICS, SUMMARY_KEY, aggregate, format_table

__all__ = ["POINT_COLUMNS", "SUMMARY_COLUMNS", "Study", "PointStore", "point_key", "write_csv", "read_points", "load",
           "read_all", "write_outputs", "merge", "wanted_by_config"]

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
    """Rows as a CSV file with a header (dicts as compact JSON, floats exactly), replaced
    atomically."""
    parts.write_csv_atomic(path, columns, ([_csv_value(row.get(c)) for c in columns] for row in rows))


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


def read_all(out: str) -> dict:
    """{key: row} of every point in ``out`` (points.jsonl and every process's part file);
    ValueError when a key appears twice with different values (timing aside)."""
    rows, conflicts = parts.read_rows(out, read_points, point_key)
    if conflicts:
        raise ValueError(f"{len(conflicts)} point(s) appear twice in {out} with different values, e.g. "
                         f"{conflicts[0][0]} in {conflicts[0][1]}: the files come from different code or "
                         f"settings; use another directory or --fresh")
    return rows


def _read_json(path: str):
    """The JSON document in ``path`` (the file closed before returning)."""
    with open(path) as f:
        return json.load(f)


def load(out: str) -> Study:
    """A study from a directory written by `run` (points.jsonl, the part files of a sweep over
    several processes, and config.json), points in canonical order."""
    rows, _ = parts.read_rows(out, read_points, point_key)
    cfg_path = os.path.join(out, "config.json")
    config = _read_json(cfg_path) if os.path.exists(cfg_path) else {}
    points = parts.canonical_order(rows.values(), config.get("models", ()))
    return Study(points, aggregate(points), config, out)


_FILES = ("points.jsonl", "points.csv", "summary.csv", "summary.json", "config.json")
_RUN_FIELDS = ("seconds", "computed_points", "missing_points", "unfinished_processes")


class PointStore:
    """The points of a study so far, and (with a directory) the files that keep them.

    ``PointStore(out, index, count)``: process ``index`` of ``count`` (1: a one-process run).
    `clear` starts afresh (``everything``: every process's files; else this one's part);
    `read` takes every finished point of the directory as done; ``with store:`` opens this
    process's file for `add` (``count`` > 1: parts/points-<index>.jsonl; else points.jsonl,
    its torn tail cut, appended to, never rewritten). ``out=None`` keeps points in memory only.
    """

    def __init__(self, out: str | None, index: int = 0, count: int = 1):
        self.out, self.index, self.count = out, index, count
        self.done: dict = {}
        self.added = 0
        self._writer = None
        if out is not None:
            os.makedirs(out, exist_ok=True)
            self.paths = {x: os.path.join(out, x) for x in _FILES}

    def clear(self, everything: bool) -> None:
        """Remove finished points: every file of the directory, or this process's part only."""
        if self.out is None:
            return
        if everything:
            files = list(self.paths.values()) + parts.point_files(self.out) + parts.part_configs(self.out)
        else:
            files = [parts.part_path(self.out, self.index), parts.part_config_path(self.out, self.index)]
        for p in files:
            if os.path.exists(p):
                os.remove(p)

    def read(self) -> None:
        """Every finished point of the directory counts as done (`read_all`)."""
        if self.out is not None:
            self.done.update(read_all(self.out))

    def __enter__(self):
        if self.out is not None:
            mine = parts.part_path(self.out, self.index) if self.count > 1 else self.paths["points.jsonl"]
            self._writer = parts.PartWriter(mine, default=json_default)
        return self

    def __exit__(self, *exc):
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        return False

    def add(self, rows: list[dict]) -> None:
        """Record finished points (appended and fsync'ed at once, inside ``with store:``)."""
        for row in rows:
            self.done[point_key(row)] = row
        self.added += len(rows)
        if self._writer is not None:
            self._writer.write(rows)


def write_outputs(out, rows: dict, wanted, config: dict, seconds: float = 0.0, computed: int = 0,
                  figures: bool = False, log=None, unfinished=()) -> Study:
    """The `Study` of the ``wanted`` keys of ``rows``; with ``out``, the merged tables of every
    row (points.jsonl/csv in canonical order, replaced atomically), the summary, config.json
    (with the run's ``seconds``, ``computed_points``, ``missing_points`` and
    ``unfinished_processes``) and the figures."""
    all_rows = parts.canonical_order(rows.values(), config.get("models", ()))
    points = [r for r in all_rows if point_key(r) in wanted]
    summary = aggregate(points)
    study = Study(points, summary, config, out, seconds)
    if out is None:
        return study
    parts.write_jsonl_atomic(os.path.join(out, "points.jsonl"), all_rows, default=json_default)
    write_csv(os.path.join(out, "points.csv"), all_rows, POINT_COLUMNS)
    write_csv(os.path.join(out, "summary.csv"), summary, SUMMARY_COLUMNS)
    parts.write_json_atomic(os.path.join(out, "summary.json"), summary, default=json_default)
    parts.write_json_atomic(os.path.join(out, "config.json"), dict(
        config, seconds=seconds, computed_points=computed, missing_points=len(wanted) - len(points),
        unfinished_processes=list(unfinished)))
    if figures:
        try:
            written = study.figures(out)
            if log:
                log("figures: " + ", ".join(written))
        except ImportError as e:
            if log:
                log(f"figures skipped: {e}")
    return study


def wanted_by_config(key: tuple, config: dict) -> bool:
    """Whether the point ``key`` belongs to the sweep described by ``config`` (config.json)."""
    r = dict(zip(KEY, key))
    return (r["builtin"] in config["builtins"] and r["dist"] in config["dists"] and r["model"] in config["models"]
            and r["remedy"] in config["remedies"] and r["K"] in config["ks"] and r["seed"] in config["seeds"]
            and r["M"] == config["m"] and r["N"] == config["n"])


def merge(out: str, figures: bool = False, log=None) -> Study:
    """Merge a study directory's point files (points.jsonl and every process's part) into the
    tables, for the configuration of config.json (else the one the parts saved, which must
    agree; else every point found). For runs whose processes could not merge themselves
    (``share=`` without a coordinator, a host that died): ``jwmma study --merge-only -o OUT``."""
    if not os.path.isdir(out):
        raise ValueError(f"no study directory {out!r} to merge")
    rows = read_all(out)
    cfg_path = os.path.join(out, "config.json")
    if os.path.exists(cfg_path):  # written by the last coordinated (or one-process) run
        config = _read_json(cfg_path)
    else:  # shares without a coordinator: the configuration each saved next to its part
        configs = [_read_json(p) for p in parts.part_configs(out)]
        if any(c != configs[0] for c in configs[1:]):
            raise ValueError(f"the part files in {out}/parts come from different sweeps (their config-*.json "
                             f"differ); merge each sweep in its own directory")
        config = configs[0] if configs else {}
    config = {k: v for k, v in config.items() if k not in _RUN_FIELDS}
    wanted = {k for k in rows if wanted_by_config(k, config)} if "ks" in config else set(rows)
    return write_outputs(out, rows, wanted, config, figures=figures, log=log)
