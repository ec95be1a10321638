"""The sweep of a study: points computed in batches of seeds, GEMMs issued in a few shapes.

`run` validates the sweep, resumes from a `PointStore`, and for every (distribution, format,
K) draws the operands and the exact reference once and emulates every model and remedy on
them (`emulate`). Definitions of everything measured: the module docstring of `jwmma.study`.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import time
from typing import NamedTuple

import numpy as np

from .. import models as _models
from ..engine.step import context
from ..isa.table import BuiltinSpec, lookup
from ..keywords import strict_keywords
from ..models.parse import model_label, parse_model
from ..tiled import gemm, processes
from ..tiled.operands import accumulator_dtype
from ..version import __version__
from . import share as _share
from .data import (DISTRIBUTIONS, SCALINGS, auto_scaling, effective_values, make_operands, resolve_format,
                   to_f32_odd)
from .measures import metrics
from .exact_product import reference
from .parts import part_config_path, write_json_atomic
from .remedies import parse_remedy
from .stats import aggregate
from .store import PointStore, Study, json_default, point_key, read_all, write_outputs

__all__ = ["DEFAULT_KS", "DEFAULT_MODELS", "DEFAULT_SEEDS", "DEFAULT_M", "DEFAULT_N", "emulate", "run"]

DEFAULT_KS = tuple(2**e for e in range(7, 15))  # 128 .. 16384
DEFAULT_MODELS = ("exact", "cdna3", "fma_chain")
DEFAULT_SEEDS = 4
DEFAULT_M = DEFAULT_N = 64


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
    x, m, _ = a.shape
    n = b.shape[-1]
    per = max(1, _MAX_STEP_ELEMS // max(1, m * n * spec.kc))
    size = min(_pow2ceil(per + 1) // 2, _pow2ceil(x))
    out = np.empty((x, m, n), accumulator_dtype(spec))
    for s in range(0, x, size):
        aa, bb, cc = a[s:s + size], b[s:s + size], c[s:s + size]
        got = aa.shape[0]
        if got < size:
            aa, bb, cc = (np.concatenate([t, np.zeros((size - got,) + t.shape[1:], t.dtype)]) for t in (aa, bb, cc))
        fmts = dict(fmt_a=spec.fmt_codes[0], fmt_b=spec.fmt_codes[1]) if spec.scaled else {}  # (uint16 words)
        d = gemm(aa, bb, cc, builtin=spec.name, target=spec.target, model=model, path=path, **fmts,
                 **(gemm_kw or {}))
        out[s:s + got] = np.asarray(d)[:got]
    return out


def _chain(a, b, spec: BuiltinSpec, model, path: str, gemm_kw=None) -> np.ndarray:
    """One GEMM from C = 0 per batch element: (X, M, L) x (X, L, N) -> (X, M, N) accumulators.

    The K-steps are issued in blocks of `_BLOCK_STEPS` (or single) steps, each block's D the
    next block's C: bit-identical to one jwmma.gemm over all of L (the kernel is a chain of
    builtins), but with a handful of array shapes, so JAX compiles once per model instead of
    once per K."""
    x, m, length = a.shape
    n = b.shape[-1]
    step = spec.k
    full = length // step
    g = _BLOCK_STEPS if full % _BLOCK_STEPS == 0 else 1
    c = np.zeros((x, m, n), accumulator_dtype(spec))
    for s in range(0, full * step, g * step):
        c = _gemm_batched(a[..., s:s + g * step], b[:, s:s + g * step], c, spec, model, path, gemm_kw)
    if full * step < length:  # a partial last step (gemm pads it with zeros)
        c = _gemm_batched(a[..., full * step:], b[:, full * step:], c, spec, model, path, gemm_kw)
    return c


@strict_keywords
def emulate(a24, b, builtin="smfmac_f32_16x16x128_fp8_fp8", model=None, remedy="none",
            path: str = "matrix", gemm_kw: dict | None = None, target: str | None = None) -> np.ndarray:
    """D = A24 @ B emulated with ``builtin`` under ``model``, with ``remedy`` applied.

    Args:
        a24: (*batch, M, K) 2:4-sparse, b: (*batch, K, N) (numpy, the builtin's input dtypes;
            the batch dims must be equal).
        builtin: a name or `BuiltinSpec`; model: as `jwmma.gemm`; remedy: a `Remedy` or its
            text (`parse_remedy`); path: gemm's path; gemm_kw: more `jwmma.gemm` keywords
            (devices, mesh, options...); target: the chip of a builtin named by ``builtin``
            that runs on several (`jwmma.gemm`'s target=; a `BuiltinSpec` carries its own).
    Returns:
        (*batch, M, N) of the accumulator dtype (float32, float16 or bfloat16). The remedies' exact definitions: the module docstring of
        `jwmma.study`.
    """
    spec = lookup(builtin, target) if isinstance(builtin, str) else builtin
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
        dt = partials[0].dtype  # one rounding into the accumulator format (16-bit: via f32 rounded to odd)
        out = acc.astype(np.float32) if dt == np.float32 else to_f32_odd(acc).astype(dt)
    else:
        out = partials[0]
        for p in partials[1:]:
            # IEEE addition in the accumulator's format (RNE), in chunk order (16-bit formats:
            # the float32 sum of two of them rounds once, correctly)
            out = (out.astype(np.float32) + p.astype(np.float32)).astype(out.dtype)
    return out.reshape(batch + (m, n))


# ---------------------------------------------------------------------------- the sweep
class _Task(NamedTuple):
    """One (dist, format, K, model, remedy) of the sweep and the seeds still to compute."""

    dist: str
    fmt: str
    spec: BuiltinSpec
    scaling: str
    k: int
    label: str
    model: object
    remedy: object
    base: dict
    missing: list


def _progress(total: int, enabled: bool, desc: str):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, unit="pt", leave=True)


def _checked(ks, models, dists, formats, remedies, seeds, m, n, scaling, target=None):
    """The sweep's lists, validated: (ks, [(label, model)], [(fmt, spec)], remedies, seeds)."""
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
    fmts = [resolve_format(f, target) for f in formats]
    for _, spec in fmts:
        auto_scaling(spec, scaling)  # 'mx' only where the builtin applies block scales
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
    for _, spec in fmts:  # every model on every builtin, before starting
        for label, mo in mods:
            try:
                _models.resolve(mo, context(spec), spec.default_model)
            except (ValueError, TypeError) as e:
                raise ValueError(f"model {label} cannot run {spec.name}: {e}") from None
    return ks, mods, fmts, rems, seed_list


def _tasks(dists, fmts, ks, mods, rems, seed_list, m, n, scaling, done, mine=None) -> list[_Task]:
    """Every (dist, format, K, model, remedy) with the seeds not in ``done`` (and, with
    ``mine``, only those of the data units ``mine(unit)`` says this process owns)."""
    tasks = []
    for dist in dists:
        for fmt, spec in fmts:
            sc = auto_scaling(spec, scaling)
            for k in ks:
                for label, mo in mods:
                    for rem in rems:
                        base = dict(builtin=spec.name, format=fmt, dist=dist, scaling=sc, model=label,
                                    remedy=rem.label, K=k, M=m, N=n)
                        missing = [s for s in seed_list if point_key({**base, "seed": s}) not in done
                                   and (mine is None or mine(_share.unit_of({**base, "seed": s})))]
                        tasks.append(_Task(dist, fmt, spec, sc, k, label, mo, rem, base, missing))
    return tasks


def _compute(todo: list[_Task], m: int, n: int, path: str, gemm_kw, add, bar) -> None:
    """The numeric loop: operands and references once per (dist, format, K); ``add(rows)``
    for the finished points of every task."""
    cache_key, cache = None, None
    for t in todo:
        ck = (t.dist, t.fmt, t.k)
        if ck != cache_key:
            need = sorted({s for u in todo if (u.dist, u.fmt, u.k) == ck for s in u.missing})
            ops = {s: make_operands(t.dist, t.k, m, n, s, t.spec, t.scaling) for s in need}
            refs = {s: reference(effective_values(t.spec, ops[s][0], "a"), effective_values(t.spec, ops[s][1], "b"),
                                 t.spec.a_type, t.spec.b_type) for s in need}
            cache_key, cache = ck, (ops, refs)
        ops, refs = cache
        t0 = time.perf_counter()
        a = np.stack([ops[s][0] for s in t.missing])
        b = np.stack([ops[s][1] for s in t.missing])
        d = emulate(a, b, t.spec, t.model, t.remedy, path, gemm_kw)
        secs = time.perf_counter() - t0
        rows = []
        for i, s in enumerate(t.missing):
            row = dict(t.base, seed=s, steps=-(-t.k // t.spec.k))
            row.update(metrics(d[i], refs[s]))
            row["seconds"] = secs / len(t.missing)
            rows.append(row)
        add(rows)
        if bar is not None:
            bar.set_postfix_str(f"{t.label} K={t.k} {t.dist} {t.fmt} {t.remedy.label}", refresh=False)
            bar.update(1)


@strict_keywords
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
    options=None,
    backend: str | None = None,
    share=None,
    merge_timeout: float | None = None,
    target: str | None = None,
) -> Study:
    """Run a sweep.

    Args:
        ks: GEMM depths (dense K); models: preset names, model texts, `jwmma.models` objects,
            or (label, model) pairs; dists: names of `DISTRIBUTIONS`; formats: 'fp8', 'bf8',
            'f16', 'bf16' (-> `FORMATS`' gfx950 builtin) or builtin names; remedies: see
            `parse_remedy`; seeds: a count (seeds 0..seeds-1) or a list; m, n: output size of
            every point; scaling: see `quantise`.
        out: directory for points.jsonl/csv, summary.csv/json, config.json and figures (None:
            nothing is written). resume: skip the points already in out/points.jsonl
            (``False`` starts the files afresh). progress: a tqdm bar when installed.
            figures: PNGs (needs matplotlib; skipped with a note if it is missing).
        path: gemm's path; log: a print-like function for progress notes (default: none).
        gemm_kw: extra `jwmma.gemm` keywords, e.g. ``{"devices": 8}`` or ``{"mesh": mesh}``
            to spread every GEMM (its seeds batch) over devices; the bits do not change.
        options, backend: execution options of every GEMM (`jwmma.Options`).
        share: ``(index, count)``: compute share ``index`` of ``count`` of the points without a
            coordinator (job-array tasks); None: this process's share of a `jax.distributed`
            job (all of it in a one-process run). merge_timeout: how long process 0 of a job
            waits for the others before merging what exists (None: as long as they live).
        target: the chip every builtin of ``formats`` runs on (None: each row's default; the
            CDNA3 SMFMAC: 'gfx942', FNUZ fp8/bf8, their points labelled format 'fp8_fnuz'...,
            or 'gfx950', OCP); ValueError for a builtin whose row does not list it.
    Returns:
        A `Study`.

    Several processes (README "Several machines"): the sweep's data units (`share`: one draw of
    operands and its reference, every model and remedy on it) are split over the processes by
    a rule of the configuration alone; each process runs its points on its own devices and
    appends them to out/parts/points-<index>.jsonl (a directory every process sees); process 0
    of a job then waits for the others and writes the merged tables, equal to a one-process
    run's. A process that dies loses only its unfinished points: rerunning the same command
    (any process count) computes just the missing ones. With ``share=`` merge at the end
    (`jwmma.study.store.merge`, ``jwmma study --merge-only``).
    """
    t_start = time.perf_counter()
    ks, mods, fmts, rems, seed_list = _checked(ks, models, dists, formats, remedies, seeds, m, n, scaling, target)
    index, count = _share.resolve_share(share)
    coordinated = share is None and count > 1  # a jax.distributed job: collectives available
    gemm_kw = _share.local_gemm_kw(gemm_kw, count)
    gemm_kw.update({k: v for k, v in (("options", options), ("backend", backend)) if v is not None})
    config = dict(ks=ks, models=[lab for lab, _ in mods], dists=list(dists), formats=[f for f, _ in fmts],
                  builtins=[s.name for _, s in fmts], targets=[s.target for _, s in fmts],
                  remedies=[r.label for r in rems], seeds=seed_list,
                  m=m, n=n, scaling=scaling, path=path)
    if coordinated:  # the same sweep everywhere, else the assignment below would differ
        processes.agree(dict(config=config, models=[repr(mo) for _, mo in mods], jwmma=__version__,
                             resume=bool(resume), out=out is not None,
                             options=repr(gemm_kw.get("options")), backend=gemm_kw.get("backend")),
                        "the study's configuration")
    store = PointStore(out, index, count)
    if not resume:
        store.clear(everything=index == 0 and (coordinated or count == 1))
    if coordinated and out is not None:
        processes.check_shared_directory(out)  # also a barrier: the fresh start is done
    store.read()
    # who computes what: a function of the configuration and the process count only
    all_tasks = _tasks(dists, fmts, ks, mods, rems, seed_list, m, n, scaling, {})
    owner = _share.assign([_share.unit_of({**t.base, "seed": s}) for t in all_tasks for s in seed_list],
                          count, points_per_unit=len(mods) * len(rems))
    tasks = _tasks(dists, fmts, ks, mods, rems, seed_list, m, n, scaling, store.done,
                   mine=None if count == 1 else (lambda u: owner[u] == index))
    todo = [t for t in tasks if t.missing]
    bar = _progress(len(todo), progress and len(todo) > 0, "jwmma study" + (f" [{index}/{count}]" if count > 1 else ""))
    if log and count > 1:
        units = sum(1 for p in owner.values() if p == index)
        log(f"process {index} of {count}: {units} of {len(owner)} data units "
            f"({100 * _share.balance(owner, count)[index]:.0f}% of the work), {len(todo)} task(s) to do")
    elif log and len(todo) < len(tasks):
        log(f"resuming: {len(tasks) - len(todo)} of {len(tasks)} (model, K, ...) points already done")
    if out is not None and count > 1:  # the configuration next to the part, for `merge`
        write_json_atomic(part_config_path(out, index), config, sort_keys=True)
    try:
        with store:
            _compute(todo, m, n, path, gemm_kw, store.add, bar)
    finally:
        if bar is not None:
            bar.close()

    wanted = {point_key({**t.base, "seed": s}) for t in all_tasks for s in seed_list}
    done, computed, unfinished = store.done, store.added, []
    if coordinated and out is None:  # nothing on disk: every process's rows through the job
        blobs = processes.process_allgather_bytes(json.dumps(list(done.values()), default=json_default).encode())
        done = {point_key(r): r for blob in blobs for r in json.loads(blob)}
    if count > 1 and out is not None:
        if not coordinated:
            if log:
                log(f"share {index} of {count} done ({computed} points); merge with jwmma study --merge-only -o {out}")
            return write_outputs(None, read_all(out), wanted, config, time.perf_counter() - t_start, computed)
        if log:
            log(f"process {index}: {computed} point(s) computed in {time.perf_counter() - t_start:.1f} s; "
                f"waiting for the other processes")
        name = f"study/{next(_RUN_IDS)}/{_digest(config)}"  # every process counts its run() calls alike
        unfinished, counts = processes.wait_all(name, merge_timeout, value=str(computed))
        computed = sum(int(v) for v in counts.values())  # the points the job computed, all processes
        if unfinished and log:
            log(f"process(es) {unfinished} did not finish; the tables hold what exists: rerun the same "
                f"command to compute the missing points")
        done = read_all(out)
        if index != 0:  # process 0 writes the merged tables
            return write_outputs(None, done, wanted, config, time.perf_counter() - t_start, computed)
    return write_outputs(out, done, wanted, config, time.perf_counter() - t_start, computed, figures, log, unfinished)


_RUN_IDS = itertools.count()


def _digest(config: dict) -> str:
    return hashlib.blake2b(json.dumps(config, sort_keys=True, default=str).encode(), digest_size=8).hexdigest()
