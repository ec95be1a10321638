"""Numerical studies of accumulation error in emulated sparse GEMMs (``jwmma study``).

A *point* of a study is one (builtin, input format, data distribution, scaling, model,
software remedy, K, M, N, seed). For each point the study

1. draws float64 data (`DISTRIBUTIONS`), 2:4-prunes A in float64 (the two largest |values|
   of every group of four along K are kept, ties to the lower position, as
   `jwmma.prune_2_4`), scales it into the format's range and quantises it with ml_dtypes
   (round to nearest even; see `make_operands`);
2. emulates the GEMM D = A24 @ B (C = 0) with `jwmma.gemm` under the model, with the remedy
   (`Remedy`) applied around it;
3. compares D with the exact product of the *same quantised inputs* (`reference`): the exact
   float64 sum (computed error-free by exponent banding + `math.fsum`) and its correctly
   rounded float32 value.

Error measures (per output (i, j), `metrics`):

* ``rel``: |d - ref| / s with s = sum_k |a_ik * b_kj| (the componentwise scale of the
  dot product: |ref| <= s, equality for same-sign data; the standard error bound of
  a summation is a multiple of s). Outputs with s = 0 have ref = d = 0 and rel = 0.
  ``max_rel`` and ``mean_rel`` are its maximum and mean over the M x N outputs.
* ``bias``: mean over outputs of (d - ref) / s, the mean signed relative error
  (negative: the model loses magnitude on positive data / rounds down).
* ``fro_rel``: ||D - ref||_F / ||ref||_F, the usual normwise relative error.
* ulps: ``ulp`` = (ordered f32 index of d) - (ordered f32 index of ref32), i.e. how many
  float32 values lie between the result and the correctly rounded reference (signed; +0 and
  -0 are one value). ``ident``: fraction of outputs with ulp == 0 (bit-identical to the
  correctly rounded reference, up to the sign of zero). ``mean_ulp`` (signed), ``mean_abs_ulp``,
  ``max_abs_ulp`` and ``ulp_hist``, a histogram over signed log2 bins: bin 0 holds ulp == 0,
  bin +b (-b) holds 2**(b-1) <= ulp < 2**b (the same, negative).
* ``nonfinite``: outputs that are NaN/Inf (they count as rel = inf and are left out of the
  ulp statistics).
* ``rn_mean_rel``: mean_rel of the correctly rounded reference itself, |ref32 - ref| / s:
  the floor that no float32 result can beat (a model at the floor is "as good as f32 gets").

Across seeds, `aggregate` gives for every metric the mean and a 95% Student-t interval of
the mean (``<metric>_lo``, ``<metric>_hi``; equal to the mean when there is one seed);
``ulp_hist`` is summed.

Remedies (`Remedy`; chunk results are always computed from C = 0, i.e. the matrix-core
accumulator restarts at every chunk):

* ``none``: one GEMM over all of K (the kernel issues ceil(K/k) builtins in K order, each
  builtin's D the next one's C).
* ``split_k:S``: K is cut into S contiguous slices of K/S (K must be a multiple of 4*S); each
  slice is a GEMM from C = 0 and the S float32 partials are added **in slice order in
  float32**: D = fl32(...fl32(fl32(P_0 + P_1) + P_2)... + P_{S-1}) (a serial split-K
  reduction; an atomic reduction would add in a non-deterministic order).
* ``promote:N`` / ``promote:N:f64`` (DeepSeek-V3 style accumulator promotion): every N
  builtin K-steps (N*k dense K, the last chunk may be shorter) the accumulator is added into
  a master accumulator and restarted from zero: with an f32 master
  (default) master = fl32(master + P_c) in chunk order, D = master; with an f64 master
  master = master + P_c in float64 and D = fl32(master) (round to nearest even) at the end.
  ``promote:N`` with an f32 master is ``split_k`` with fixed-length chunks.

Output of `run` with ``out=DIR``: ``points.jsonl`` / ``points.csv`` (one row per point,
appended as each point finishes, so an interrupted run resumes where it stopped),
``summary.csv`` / ``summary.json`` (aggregated rows), ``config.json``, and PNG figures.
"""
from __future__ import annotations

import ast
import csv
import dataclasses
import io
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from . import models as _models
from . import sharding as _sharding
from .accuracy import (  # noqa: F401  (public names re-exported: jwmma.study.make_operands, ...)
    DISTRIBUTIONS, FORMAT_ALIASES, FORMATS, HIST_BINS, SCALINGS, U32, Reference, _auto_scaling, _DTYPES,
    _rng, make_operands, metrics, ordered, prune_2_4_f64, quantise, reference, sample, to_f32_odd, ulp_bins,
    ulp_diff, ulp_histogram,
)
from .isa import BuiltinSpec, lookup

# ---------------------------------------------------------------------------- defaults
DEFAULT_KS = tuple(2**e for e in range(7, 15))  # 128 .. 16384
DEFAULT_MODELS = ("exact", "cdna3", "fma_chain")
DEFAULT_SEEDS = 4
DEFAULT_M = DEFAULT_N = 64


# ---------------------------------------------------------------------------- names
def resolve_format(fmt: str) -> tuple[str, BuiltinSpec]:
    """A format name ('fp8', 'bf8', 'f16', 'bf16' or an alias) or a builtin name ->
    (format label, builtin spec). The label of a builtin with mixed inputs is 'fp8_bf8'..."""
    key = FORMAT_ALIASES.get(str(fmt).lower(), str(fmt).lower())
    if key in FORMATS:
        return key, lookup(FORMATS[key])
    try:
        spec = lookup(fmt)
    except (ValueError, KeyError):
        raise ValueError(
            f"unknown format or builtin {fmt!r}; formats: {', '.join(FORMATS)} (aliases "
            f"{', '.join(FORMAT_ALIASES)}), or a float builtin of jwmma.BUILTINS"
        ) from None
    if spec.integer or spec.a_type not in _DTYPES or spec.b_type not in _DTYPES:
        raise ValueError(f"{spec.name} is not a floating-point builtin; the study needs one")
    label = spec.a_type if spec.a_type == spec.b_type else f"{spec.a_type}_{spec.b_type}"
    return label, spec


def model_label(model) -> str:
    """Stable text for a model: the preset name, or ClassName(non-default fields)."""
    if isinstance(model, str):
        return model
    if dataclasses.is_dataclass(model):
        parts = []
        for f in dataclasses.fields(model):
            v = getattr(model, f.name)
            if f.default is not dataclasses.MISSING and v == f.default:
                continue
            parts.append(f"{f.name}={v!r}")
        return f"{type(model).__name__}({', '.join(parts)})"
    return repr(model)


def parse_model(text: str):
    """'cdna3' -> 'cdna3'; 'FusedGroups(group=32, product_rounding="nearest")' -> the object.

    Only the classes of `jwmma.models` with literal keyword arguments are accepted."""
    text = text.strip()
    if "(" not in text:
        return text
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        raise ValueError(f"cannot parse model {text!r}") from None
    classes = {n: getattr(_models, n) for n in _models.__all__ if isinstance(getattr(_models, n), type)}
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in classes):
        raise ValueError(f"model {text!r}: expected a preset name or one of {', '.join(sorted(classes))}(...)")
    if node.args:
        raise ValueError(f"model {text!r}: give the fields as keywords, e.g. FusedGroups(group=32)")
    try:
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
    except ValueError:
        raise ValueError(f"model {text!r}: field values must be literals") from None
    return classes[node.func.id](**kwargs)


def _split_list(text) -> list[str]:
    """'a,b(x=1,y=2),c' -> ['a', 'b(x=1,y=2)', 'c'] (commas inside parentheses kept)."""
    out, depth, cur = [], 0, ""
    for ch in str(text):
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    out.append(cur)
    return [x.strip() for x in out if x.strip()]


@dataclass(frozen=True)
class Remedy:
    """A software remedy around the emulated GEMM (see the module docstring).

    kind: 'none', 'split_k' (n = number of slices) or 'promote' (n = builtin K-steps per
    chunk; master 'f32' or 'f64')."""

    kind: str = "none"
    n: int = 1
    master: str = "f32"

    def __post_init__(self):
        if self.kind not in ("none", "split_k", "promote"):
            raise ValueError(f"remedy kind must be none, split_k or promote, got {self.kind!r}")
        if not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"remedy n must be a positive int, got {self.n!r}")
        if self.master not in ("f32", "f64"):
            raise ValueError(f"remedy master must be f32 or f64, got {self.master!r}")

    @property
    def label(self) -> str:
        if self.kind == "none":
            return "none"
        if self.kind == "split_k":
            return f"split_k:{self.n}"
        return f"promote:{self.n}" + (":f64" if self.master == "f64" else "")

    def chunk_length(self, k: int, step: int) -> int:
        """Dense K per chunk for a GEMM of depth k on a builtin of K-step ``step``."""
        if self.kind == "none":
            return k
        if self.kind == "split_k":
            if k % (4 * self.n):
                raise ValueError(f"split_k:{self.n} needs K to be a multiple of {4 * self.n}, got K={k}")
            return k // self.n
        return self.n * step


def parse_remedy(x) -> Remedy:
    """'none', 'split_k:4' (also 'splitk:4', 'split-k:4'), 'promote:4', 'promote:4:f64'."""
    if isinstance(x, Remedy):
        return x
    text = str(x).strip().lower().replace("-", "_")
    parts = text.split(":")
    kind = {"splitk": "split_k", "split": "split_k"}.get(parts[0], parts[0])
    try:
        if kind == "none" and len(parts) == 1:
            return Remedy()
        if kind == "split_k" and len(parts) == 2:
            return Remedy("split_k", int(parts[1]))
        if kind == "promote" and len(parts) in (2, 3):
            return Remedy("promote", int(parts[1]), parts[2] if len(parts) == 3 else "f32")
    except ValueError as e:
        raise ValueError(f"bad remedy {x!r}: {e}") from None
    raise ValueError(f"bad remedy {x!r}; use none, split_k:S, promote:N or promote:N:f64")


# ---------------------------------------------------------------------------- emulation
#: cap on batch * M * N * (compressed K per step) of one gemm call (bounds the memory)
_MAX_STEP_ELEMS = 1 << 21
#: K-steps per gemm call when a chunk has a multiple of it (else one step per call)
_BLOCK_STEPS = 8


def _pow2ceil(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


def _gemm_batched(a, b, c, spec: BuiltinSpec, model, path: str, gemm_kw=None) -> np.ndarray:
    """jwmma.gemm(a, b, c) over a flat batch (X, M, L) x (X, L, N) + (X, M, N), in slices of a
    power-of-two size padded with zero matrices (few distinct shapes: few compilations)."""
    from .gemm import gemm

    x, m, _ = a.shape
    n = b.shape[-1]
    per = max(1, _MAX_STEP_ELEMS // max(1, m * n * spec.kc))
    size = min(_pow2ceil(per + 1) // 2, _pow2ceil(x))
    out = np.empty((x, m, n), np.float32)
    for s in range(0, x, size):
        aa, bb, cc = a[s:s + size], b[s:s + size], c[s:s + size]
        got = aa.shape[0]
        if got < size:
            aa, bb, cc = (np.concatenate([t, np.zeros((size - got,) + t.shape[1:], t.dtype)]) for t in (aa, bb, cc))
        d = gemm(aa, bb, cc, builtin=spec.name, model=model, path=path, **(gemm_kw or {}))
        out[s:s + got] = np.asarray(d)[:got]
    return out


def _chain(a, b, spec: BuiltinSpec, model, path: str, gemm_kw=None) -> np.ndarray:
    """One GEMM from C = 0 per batch element: (X, M, L) x (X, L, N) -> (X, M, N) float32.

    The K-steps are issued in blocks of `_BLOCK_STEPS` (or single) steps, each block's D the
    next block's C: bit-identical to one jwmma.gemm over all of L (the kernel is a chain of
    builtins), but with a handful of array shapes, so JAX compiles once per model instead of
    once per K."""
    x, m, length = a.shape
    n = b.shape[-1]
    step = spec.k
    full = length // step
    g = _BLOCK_STEPS if full % _BLOCK_STEPS == 0 else 1
    c = np.zeros((x, m, n), np.float32)
    for s in range(0, full * step, g * step):
        c = _gemm_batched(a[..., s:s + g * step], b[:, s:s + g * step], c, spec, model, path, gemm_kw)
    if full * step < length:  # a partial last step (gemm pads it with zeros)
        c = _gemm_batched(a[..., full * step:], b[:, full * step:], c, spec, model, path, gemm_kw)
    return c


def emulate(a24, b, builtin="smfmac_f32_16x16x128_fp8_fp8", model=None, remedy="none",
            path: str = "matrix", gemm_kw: dict | None = None) -> np.ndarray:
    """D = A24 @ B emulated with ``builtin`` under ``model``, with ``remedy`` applied.

    a24: (*batch, M, K) 2:4-sparse, b: (*batch, K, N) (numpy, the builtin's input dtypes;
    the batch dims must be equal). Returns float32 (*batch, M, N). See the module docstring
    for the remedies' exact definitions."""
    spec = lookup(builtin) if isinstance(builtin, str) else builtin
    rem = parse_remedy(remedy)
    a24, b = np.asarray(a24), np.asarray(b)
    batch = a24.shape[:-2]
    m, k = a24.shape[-2:]
    n = b.shape[-1]
    a_flat = a24.reshape((-1, m, k))
    b_flat = b.reshape((-1, k, n))
    length = rem.chunk_length(k, spec.k)
    # one chunk after the other, each a GEMM from C = 0 over the whole batch: the gemm calls
    # then have the same few shapes for every K and remedy (one compilation each)
    partials = [_chain(a_flat[..., s:s + length], b_flat[:, s:s + length], spec, model, path, gemm_kw)
                for s in range(0, k, length)]
    if rem.kind == "promote" and rem.master == "f64":
        acc = np.zeros(partials[0].shape, np.float64)
        for p in partials:
            acc = acc + p.astype(np.float64)
        out = acc.astype(np.float32)
    else:
        out = partials[0]
        for p in partials[1:]:
            out = (out + p).astype(np.float32)  # IEEE float32 addition (RNE), in chunk order
    return out.reshape(batch + (m, n))


METRICS = ("max_rel", "mean_rel", "bias", "fro_rel", "ident", "mean_ulp", "mean_abs_ulp", "max_abs_ulp",
           "nonfinite", "rn_mean_rel")
KEY = ("builtin", "format", "dist", "scaling", "model", "remedy", "K", "M", "N", "seed")
POINT_COLUMNS = KEY + ("steps",) + METRICS + ("ulp_hist", "seconds")
SUMMARY_KEY = KEY[:-1]
SUMMARY_COLUMNS = SUMMARY_KEY + ("steps", "seeds") + tuple(
    c for mname in METRICS for c in (mname, f"{mname}_lo", f"{mname}_hi")) + ("ulp_hist",)

# two-sided 95% quantiles of Student's t, df = 1..30
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
         2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
         2.052, 2.048, 2.045, 2.042)


def t975(df: int) -> float:
    return _T975[df - 1] if df <= 30 else 1.96 + 2.5 / df


def mean_ci(values) -> tuple[float, float, float]:
    """(mean, lo, hi): 95% Student-t interval of the mean (lo = hi = mean for one value)."""
    v = np.asarray(values, np.float64)
    mean = float(v.mean())
    if v.size < 2 or not np.all(np.isfinite(v)):
        return mean, mean, mean
    half = t975(v.size - 1) * float(v.std(ddof=1)) / math.sqrt(v.size)
    return mean, mean - half, mean + half


def aggregate(points: list[dict]) -> list[dict]:
    """One row per point without its seed: mean and 95% interval of every metric over seeds,
    ``seeds`` = how many, ``ulp_hist`` summed."""
    groups: dict = {}
    for p in points:
        groups.setdefault(tuple(p[k] for k in SUMMARY_KEY), []).append(p)
    out = []
    for key, rows in groups.items():
        row = dict(zip(SUMMARY_KEY, key))
        row["steps"] = rows[0]["steps"]
        row["seeds"] = len(rows)
        for mname in METRICS:
            mean, lo, hi = mean_ci([r[mname] for r in rows])
            row[mname], row[f"{mname}_lo"], row[f"{mname}_hi"] = mean, lo, hi
        hist: dict = {}
        for r in rows:
            for b, c in r["ulp_hist"].items():
                hist[b] = hist.get(b, 0) + c
        row["ulp_hist"] = dict(sorted(hist.items(), key=lambda kv: int(kv[0])))
        out.append(row)
    return out


# ---------------------------------------------------------------------------- the sweep
@dataclass
class Study:
    """The result of `run` (or `load`): per-seed ``points``, aggregated ``summary`` rows."""

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
        from . import plotting

        return plotting.save_figures(self.summary, out_dir or self.out or ".", prefix=prefix)


def _key(row: dict) -> tuple:
    return tuple(row[k] for k in KEY)


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    raise TypeError(type(o).__name__)


def _csv_value(v):
    if isinstance(v, dict):
        return json.dumps(v, separators=(",", ":"))
    if isinstance(v, float):
        return repr(v)
    return v


def write_csv(path: str, rows: list[dict], columns) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for r in rows:
            w.writerow([_csv_value(r.get(c)) for c in columns])


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


def _progress(total: int, enabled: bool, desc: str):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, unit="pt", leave=True)


def run(
    ks=DEFAULT_KS,
    models=DEFAULT_MODELS,
    dists=("normal",),
    formats=("fp8",),
    remedies=("none",),
    seeds=DEFAULT_SEEDS,
    m: int = DEFAULT_M,
    n: int = DEFAULT_N,
    scaling: str = "auto",
    out: str | None = None,
    resume: bool = True,
    progress: bool = True,
    figures: bool = True,
    path: str = "matrix",
    log=None,
    gemm_kw: dict | None = None,
) -> Study:
    """Run a sweep; return a `Study`.

    ks: GEMM depths (dense K); models: preset names, `jwmma.models` objects, or
    (label, model) pairs; dists: names of `DISTRIBUTIONS`; formats: 'fp8', 'bf8', 'f16',
    'bf16' (-> `FORMATS`' gfx950 builtin) or builtin names; remedies: see `parse_remedy`;
    seeds: a count (seeds 0..seeds-1) or a list; m, n: output size of every point.
    out: directory for points.jsonl/csv, summary.csv/json, config.json and figures (None:
    nothing is written). With ``resume`` (default) the points already in out/points.jsonl
    are not recomputed; ``resume=False`` starts the files afresh. ``figures`` needs
    matplotlib (skipped with a note if it is missing). ``log``: a print-like function for
    progress notes (default: none). ``gemm_kw``: extra `jwmma.gemm` keywords, e.g.
    ``{"devices": 8}`` or ``{"mesh": mesh}`` to spread every GEMM (its seeds batch) over
    devices; the bits do not change."""
    t_start = time.perf_counter()
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    if not seed_list:
        raise ValueError("need at least one seed")
    ks = [int(k) for k in ks]
    if any(k < 4 or k % 4 for k in ks):
        raise ValueError(f"every K must be a positive multiple of 4 (2:4 groups), got {ks}")
    if m < 1 or n < 1:
        raise ValueError(f"M and N must be positive, got {m}x{n}")
    if scaling not in SCALINGS:
        raise ValueError(f"scaling must be one of {SCALINGS}, got {scaling!r}")
    for d in dists:
        if d not in DISTRIBUTIONS:
            raise ValueError(f"unknown distribution {d!r}; valid: {', '.join(DISTRIBUTIONS)}")
    fmts = [resolve_format(f) for f in formats]
    rems = [parse_remedy(r) for r in remedies]
    for r in rems:
        for k in ks:
            r.chunk_length(k, 4)  # raises for a split that does not fit
    mods = []
    for mo in models:
        if isinstance(mo, tuple):
            mods.append((str(mo[0]), mo[1]))
        else:
            mo = parse_model(mo) if isinstance(mo, str) else mo
            mods.append((model_label(mo), mo))
    # check every model on every builtin before starting
    from . import core

    for _, spec in fmts:
        for label, mo in mods:
            try:
                _models.resolve(mo, core.context(spec), spec.default_model)
            except (ValueError, TypeError) as e:
                raise ValueError(f"model {label} cannot run {spec.name}: {e}") from None

    done: dict = {}
    paths = {}
    if out is not None:
        os.makedirs(out, exist_ok=True)
        paths = {x: os.path.join(out, x) for x in
                 ("points.jsonl", "points.csv", "summary.csv", "summary.json", "config.json")}
        if resume:
            for r in read_points(paths["points.jsonl"]):
                done[_key(r)] = r
        else:
            for p in paths.values():
                if os.path.exists(p):
                    os.remove(p)
        # rewrite the JSONL from the parsed rows (drops a torn last line), then append
        with open(paths["points.jsonl"], "w") as f:
            for r in done.values():
                f.write(json.dumps(r, default=_json_default) + "\n")
        write_csv(paths["points.csv"], list(done.values()), POINT_COLUMNS)

    config = dict(ks=ks, models=[lab for lab, _ in mods], dists=list(dists), formats=[f for f, _ in fmts],
                  builtins=[s.name for _, s in fmts], remedies=[r.label for r in rems], seeds=seed_list,
                  m=m, n=n, scaling=scaling, path=path)

    # tasks: (dist, fmt, K) share data and reference; models x remedies reuse them
    tasks = []
    for dist in dists:
        for fmt, spec in fmts:
            sc = _auto_scaling(spec, scaling)
            for k in ks:
                for label, mo in mods:
                    for rem in rems:
                        base = dict(builtin=spec.name, format=fmt, dist=dist, scaling=sc, model=label,
                                    remedy=rem.label, K=k, M=m, N=n)
                        missing = [s for s in seed_list if _key({**base, "seed": s}) not in done]
                        tasks.append((dist, fmt, spec, sc, k, label, mo, rem, base, missing))
    todo = [t for t in tasks if t[-1]]
    bar = _progress(len(todo), progress and len(todo) > 0, "jwmma study")
    if log and len(todo) < len(tasks):
        log(f"resuming: {len(tasks) - len(todo)} of {len(tasks)} (model, K, ...) points already done")
    cache_key, cache = None, None
    jsonl = open(paths["points.jsonl"], "a") if out is not None else None
    csvf = open(paths["points.csv"], "a", newline="") if out is not None else None
    try:
        for dist, fmt, spec, sc, k, label, mo, rem, base, missing in todo:
            ck = (dist, fmt, k)
            if ck != cache_key:
                need = sorted({s for t in todo if t[:2] == (dist, fmt) and t[4] == k for s in t[-1]})
                ops = {s: make_operands(dist, k, m, n, s, spec, sc) for s in need}
                refs = {s: reference(*ops[s], spec.a_type, spec.b_type) for s in need}
                cache_key, cache = ck, (ops, refs)
            ops, refs = cache
            t0 = time.perf_counter()
            a = np.stack([ops[s][0] for s in missing])
            b = np.stack([ops[s][1] for s in missing])
            d = emulate(a, b, spec, mo, rem, path, gemm_kw)
            secs = time.perf_counter() - t0
            for i, s in enumerate(missing):
                row = dict(base, seed=s, steps=-(-k // spec.k))
                row.update(metrics(d[i], refs[s]))
                row["seconds"] = secs / len(missing)
                done[_key(row)] = row
                if jsonl is not None:
                    jsonl.write(json.dumps(row, default=_json_default) + "\n")
                    jsonl.flush()
                    csv.writer(csvf).writerow([_csv_value(row.get(c)) for c in POINT_COLUMNS])
                    csvf.flush()
            if bar is not None:
                bar.set_postfix_str(f"{label} K={k} {dist} {fmt} {rem.label}", refresh=False)
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        if jsonl is not None:
            jsonl.close()
            csvf.close()

    wanted = {_key({**t[8], "seed": s}) for t in tasks for s in seed_list}
    points = [done[k] for k in done if k in wanted]
    order = {(lab): i for i, (lab, _) in enumerate(mods)}
    points.sort(key=lambda r: (r["dist"], r["format"], order.get(r["model"], 0), r["remedy"], r["K"], r["seed"]))
    summary = aggregate(points)
    seconds = time.perf_counter() - t_start
    study = Study(points, summary, config, out, seconds)
    if out is not None:
        all_rows = list(done.values())
        write_csv(paths["points.csv"], all_rows, POINT_COLUMNS)
        write_csv(paths["summary.csv"], summary, SUMMARY_COLUMNS)
        with open(paths["summary.json"], "w") as f:
            json.dump(summary, f, indent=1, default=_json_default)
        with open(paths["config.json"], "w") as f:
            json.dump(dict(config, seconds=seconds, computed_points=sum(len(t[-1]) for t in todo)), f, indent=1)
        if figures:
            try:
                written = study.figures(out)
                if log:
                    log("figures: " + ", ".join(written))
            except ImportError as e:
                if log:
                    log(f"figures skipped: {e}")
    return study


def format_table(summary: list[dict], metrics=("mean_rel", "max_rel", "bias", "ident", "mean_abs_ulp")) -> str:
    """Summary rows as aligned text: one line per (dist, format, model, remedy, K)."""
    head = ["dist", "format", "model", "remedy", "K", "seeds"] + list(metrics)
    lines = []
    for r in summary:
        cells = [r["dist"], r["format"], r["model"], r["remedy"], str(r["K"]), str(r["seeds"])]
        for mname in metrics:
            v = r[mname]
            if mname == "ident":
                cells.append(f"{100 * v:.1f}%")
            elif mname in ("max_abs_ulp", "nonfinite"):
                cells.append(f"{v:.0f}")
            else:
                cells.append(f"{v:.3g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.2e}")
        lines.append(cells)
    widths = [max(len(h), *(len(c[i]) for c in lines)) if lines else len(h) for i, h in enumerate(head)]
    buf = io.StringIO()
    buf.write("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip() + "\n")
    for c in lines:
        buf.write("  ".join(x.ljust(w) for x, w in zip(c, widths)).rstrip() + "\n")
    return buf.getvalue()


# ---------------------------------------------------------------------------- CLI
def _parse_ks(text: str) -> list[int]:
    """'128,1024' or '128:16384' (powers of two from..to) or a mix."""
    out = []
    for part in _split_list(text):
        if ":" in part:
            lo, hi = (int(x) for x in part.split(":", 1))
            if lo < 1 or hi < lo:
                raise ValueError(f"bad K range {part!r}")
            k = 1 << (lo - 1).bit_length()
            while k <= hi:
                out.append(k)
                k <<= 1
        else:
            out.append(int(part))
    return out


def _parse_size(text: str) -> tuple[int, int]:
    t = text.lower().split("x")
    if len(t) == 1:
        return int(t[0]), int(t[0])
    if len(t) == 2:
        return int(t[0]), int(t[1])
    raise ValueError(f"--size takes M or MxN, got {text!r}")


def _many(values, default):
    """Repeatable, comma-separated option -> list (default when not given)."""
    if not values:
        return list(default)
    out = []
    for v in values:
        out.extend(_split_list(v))
    return out


def cmd_study(args) -> int:
    from .cli import CliError

    try:
        ks = _parse_ks(args.k) if args.k else list(DEFAULT_KS)
        m, n = _parse_size(args.size)
        formats = _many(args.format, () if args.builtin else ("fp8",)) + _many(args.builtin, ())
        models = [parse_model(x) for x in _many(args.model, DEFAULT_MODELS)]
        dists = _many(args.dist, ("normal",))
        remedies = _many(args.remedy, ("none",))
        if args.seeds < 1:
            raise ValueError(f"--seeds must be >= 1, got {args.seeds}")
    except ValueError as e:
        raise CliError(str(e)) from None
    say = (lambda *a: None) if args.quiet else (lambda s: print(s, file=sys.stderr))
    t0 = time.perf_counter()
    try:
        st = run(ks, models, dists, formats, remedies, seeds=list(range(args.seed0, args.seed0 + args.seeds)),
                 m=m, n=n, scaling=args.scaling, out=args.out, resume=not args.fresh,
                 progress=not (args.no_progress or args.quiet), figures=not args.no_plots,
                 path=args.path, log=say, gemm_kw=_sharding.mesh_from_args(args))
    except (ValueError, TypeError) as e:
        raise CliError(str(e)) from None
    if args.json:
        print(json.dumps(st.summary, default=_json_default))
    elif not args.quiet:
        print(st.table())
        print(f"{len(st.points)} points ({len(st.summary)} aggregated rows) in {time.perf_counter() - t0:.1f} s; "
              f"rel = |d - ref| / sum|a*b|, bias = mean signed rel, ident = bit-identical to the correctly "
              f"rounded reference, ulp = f32 steps from it; values are means over seeds.")
        if args.out:
            print(f"tables: {args.out}/points.csv, summary.csv, summary.json; rerun the same command to resume.")
    return 0


def add_cli(subparsers) -> None:
    """Register ``jwmma study`` on an argparse subparsers object."""
    p = subparsers.add_parser(
        "study", help="accumulation-error study: sweep K, models, data, formats, remedies",
        description="Sweep GEMM depth K, arithmetic models, data distributions, input formats and "
        "software remedies; measure the error of the emulated sparse GEMM against the exact "
        "product of the same quantised inputs. Points are appended to OUT/points.jsonl as they "
        "finish; rerunning the same command resumes. Lists are comma-separated or repeated.",
    )
    p.add_argument("--k", metavar="LIST", help="GEMM depths: 128,1024 or 128:16384 (powers of two; "
                   "default 128:16384)")
    p.add_argument("--model", "-m", action="append", metavar="LIST",
                   help="models: preset names or e.g. \"FusedGroups(group=32)\" (default exact,cdna3,fma_chain)")
    p.add_argument("--dist", action="append", metavar="LIST",
                   help=f"data distributions: {', '.join(DISTRIBUTIONS)} (default normal)")
    p.add_argument("--format", "-f", action="append", metavar="LIST",
                   help="input formats: fp8 (E4M3), bf8 (E5M2), f16, bf16 (default fp8)")
    p.add_argument("--builtin", action="append", metavar="NAME",
                   help="use this builtin (instead of / besides --format), e.g. swmmac_f32_16x16x32_fp8_fp8_w32")
    p.add_argument("--remedy", "-r", action="append", metavar="LIST",
                   help="none, split_k:S, promote:N (every N builtin steps, f32 master), promote:N:f64 (default none)")
    p.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help=f"seeds per point ({DEFAULT_SEEDS})")
    p.add_argument("--seed0", type=int, default=0, help="first seed (0)")
    p.add_argument("--size", default=f"{DEFAULT_M}x{DEFAULT_N}", metavar="MxN",
                   help=f"output size per point ({DEFAULT_M}x{DEFAULT_N})")
    p.add_argument("--scaling", choices=SCALINGS, default="auto",
                   help="quantisation scaling: row (A per row, B per column, to the format's max), "
                   "tensor, none; auto = row for 8-bit inputs, none for f16/bf16")
    p.add_argument("--out", "-o", default="study_out", metavar="DIR", help="output directory (study_out)")
    p.add_argument("--fresh", action="store_true", help="discard finished points in DIR instead of resuming")
    p.add_argument("--no-plots", action="store_true", help="do not write PNG figures")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--path", choices=["matrix", "registers"], default="matrix",
                   help="gemm execution path (identical bits; registers is slower)")
    p.add_argument("--json", action="store_true", help="print the summary rows as JSON")
    p.add_argument("--quiet", "-q", action="store_true", help="print nothing but errors")
    _sharding.add_device_args(p)  # --devices N|all, --mesh: every GEMM spread over devices
    p.set_defaults(func=cmd_study)
