"""``jwmma gemm``: emulate one 2:4-sparse GEMM under several models and report their error.

    jwmma gemm --format fp8 -m 512 -n 512 -k 8192 --model exact,cdna3,fma_chain --dist normal

For every model: the time, the throughput (emulated multiply-adds = compressed products per
second), and the error against the exact product of the same quantised operands (float64 /
integer reference): max and mean relative error (|D - exact| / sum_k |a_ik b_kj|), the mean
signed error (bias), the fraction of outputs bit-identical to the exact product rounded once
into D's format (f32, or f16/bf16 for the 16-bit accumulators), and a histogram of the ulp
distance in that format. The reference is the product over all of K rounded once; the
emulated kernel rounds after every K step (every model, exact included). Long runs show a progress bar: the K steps
are issued in chunks, each chunk's D the next chunk's C, which gives the same bits.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import jax
import numpy as np

from ..engine.sparsity import prune_2_4
from ..isa.table import lookup
from ..isa.types import element_type
from ..numerics.host import cast
from ..models.parse import model_label
from ..study import data as study_data
from ..study.exact_product import reference
from ..study.measures import metrics
from ..study.stats import percent
from ..tiled import gemm
from .common import CliError, add_target_arg, models_of, spec_of
from .devices import add_device_args, mesh_from_args
from .processes import add_process_args, init_from_args, leave

__all__ = ["int_operands", "int_reference", "run", "print_table", "cmd_gemm", "add"]


def _progress(total, desc):
    try:
        from tqdm.auto import tqdm
    except ImportError:  # tqdm is optional
        return None
    return tqdm(total=total, desc=desc, unit="step", leave=False, disable=not sys.stderr.isatty())


def int_operands(spec, m, n, k, seed, batch, signed=True):
    """Random integers in the builtin's range (read ``signed`` or not); A pruned 2:4.

    Returns:
        (A (*batch, m, k), B (*batch, k, n)) numpy int8/uint8.
    """
    rng = np.random.default_rng(seed)
    fmt = element_type(spec.a_type).int_format(signed)
    dt = np.int8 if signed else np.uint8
    a = rng.integers(fmt.lo, fmt.hi + 1, batch + (m, k)).astype(dt)
    b = rng.integers(fmt.lo, fmt.hi + 1, batch + (k, n)).astype(dt)
    return np.asarray(prune_2_4(a)), b


def int_reference(a, b, step, clamp):
    """The exact integer GEMM as the kernel forms it: one exact dot per instruction of
    ``step`` dense K, added to the int32 accumulator with saturation (clamp) or wrap."""
    acc = np.zeros(np.broadcast_shapes(a.shape[:-1], b.shape[:-2] + (1,))[:-1] + (a.shape[-2], b.shape[-1]), np.int64)
    for s in range(0, a.shape[-1], step):
        acc = acc + np.matmul(a[..., s:s + step].astype(np.int64), b[..., s:s + step, :].astype(np.int64))
        acc = np.clip(acc, -(2**31), 2**31 - 1) if clamp else ((acc + 2**31) % 2**32) - 2**31
    return acc


def run(builtin, models, m, n, k, *, batch=(), dist="normal", scaling="auto", scale=None, seed=0,
        path="matrix", clamp=False, chunk_steps=None, distribute=None, progress=True, options=None,
        target=None):
    """Emulate one GEMM under several models and measure each.

    Args:
        builtin: the builtin's name; models: preset names, model texts or objects;
        m, n, k: the GEMM (dense K); batch: leading batch dims; dist, scaling, scale, seed:
        the operands (`jwmma.study.make_operands`; integers: `int_operands`); path: gemm's
        path; clamp: integer builtins saturate; chunk_steps: K steps per gemm call (each
        chunk's D the next chunk's C: same bits); distribute: gemm's device keywords;
        progress: a tqdm bar on long runs; options: execution options (`jwmma.Options`);
        target: the chip of a builtin that runs on several (`jwmma.gemm`'s target=: the CDNA3
        SMFMAC on 'gfx942', FNUZ fp8/bf8, or 'gfx950', OCP); the operands are drawn in its formats.
    Returns:
        One dict per model: time, throughput and the error measures.
    """
    spec = lookup(builtin, target)
    k4 = -(-k // 4) * 4  # operands drawn for whole 2:4 groups, then cut to K (gemm pads K again)
    if spec.integer:
        a, b = int_operands(spec, m, n, k4, seed, batch)
        a, b = a[..., :k], b[..., :k, :]
        ref_int = int_reference(a, b, spec.k, clamp)
    else:
        a, b = study_data.make_operands(dist, k4, m, n, seed, builtin=spec, scaling=scaling)
        a, b = a[..., :k], b[..., :k, :]
        if scale is not None:  # a real-valued scale of the quantised data (re-rounded)
            a = cast(a.astype(np.float64) * scale, a.dtype)  # once-rounded on every machine
            b = cast(b.astype(np.float64) * scale, b.dtype)
        if batch:
            a = np.broadcast_to(a, batch + a.shape).copy()
            b = np.broadcast_to(b, batch + b.shape).copy()
        ref = reference(a, b, spec.a_type, spec.b_type)
    step = spec.k
    n_steps = -(-k // step)
    chunk = chunk_steps or max(1, n_steps // 8 if n_steps >= 64 else n_steps)
    kw = dict(builtin=spec.name, path=path, options=options, target=spec.target)
    if spec.signed_choice:
        kw.update(a_neg=True, b_neg=True, clamp=clamp)
    kw.update(distribute or {})  # devices= / mesh= (devices.mesh_from_args)
    results = []
    for model in models:
        c = None
        t0 = time.perf_counter()
        t_first = None
        bar = _progress(n_steps, f"{spec.name} {model_label(model)}") if progress else None
        for s0 in range(0, n_steps, chunk):
            lo, hi = s0 * step, min(k, (s0 + chunk) * step)
            d = gemm(a[..., lo:hi], b[..., lo:hi, :], c, model=model, **kw)
            jax.block_until_ready(d)
            c = d
            if t_first is None:
                t_first = time.perf_counter() - t0
            if bar is not None:
                bar.update(min(chunk, n_steps - s0))
        if bar is not None:
            bar.close()
        seconds = time.perf_counter() - t0
        d = _host(c)
        macs = m * n * (k * spec.kc / spec.k) * max(1, int(np.prod(batch)))  # stored products (dense: all k)
        n_chunks = -(-n_steps // chunk)
        if n_chunks > 1:  # the chunks after the first ran compiled
            steady = (seconds - t_first) * n_chunks / (n_chunks - 1)
        else:  # one chunk: its time included compilation, so run it once more, compiled
            t1 = time.perf_counter()
            jax.block_until_ready(gemm(a, b, None, model=model, **kw))
            steady = time.perf_counter() - t1
        row = dict(builtin=spec.name, target=spec.target, model=model_label(model), m=m, n=n, k=k, batch=list(batch),
                   dist=dist, seed=seed, path=path, seconds=seconds, first_chunk_seconds=t_first,
                   compiled_seconds=steady, macs_per_s=macs / steady)
        if spec.integer:
            want = ref_int
            row.update(identical=float(np.mean(d == want)), max_abs_err=int(np.max(np.abs(d.astype(np.int64) - want))))
        else:
            row.update(metrics(d, ref))
        results.append(row)
    return results


def _host(d) -> np.ndarray:
    """D as a numpy array on this host; a global array over several processes is gathered
    (every process holds the operands and the reference already in this command)."""
    if isinstance(d, jax.Array) and not d.is_fully_addressable:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(d, tiled=True))
    return np.asarray(d)


def _hist_line(h: dict) -> str:
    """Compact signed-log2 ulp histogram: bin b > 0 holds distances in [2**(b-1), 2**b)."""
    total = sum(h.values()) or 1
    parts = []
    for key in sorted(h, key=lambda s: (abs(int(s)), int(s))):
        b = int(key)
        lo = 2 ** (abs(b) - 1) if b else 0
        span = f"{lo}" if abs(b) <= 1 else f"{lo}..{2 * lo - 1}"
        label = "0" if b == 0 else ("+" if b > 0 else "-") + span
        parts.append(f"{label}:{percent(h[key] / total)}")
    return " ".join(parts[:9]) + (" ..." if len(parts) > 9 else "")


def print_table(rows, out=None):
    """The rows of `run` as a table (integer builtins: identical fraction and max |error|)."""
    out = sys.stdout if out is None else out  # resolved per call (redirected/captured stdout)
    if not rows:
        return
    integer = "identical" in rows[0] and "ident" not in rows[0]
    r0 = rows[0]
    on = f" on {r0['target']}" if r0.get("target") and len(lookup(r0["builtin"]).targets) > 1 else ""
    print(f"{r0['builtin']}{on}: M={r0['m']} N={r0['n']} K={r0['k']} batch={tuple(r0['batch'])} "
          f"dist={r0['dist']} seed={r0['seed']} path={r0['path']} (time: wall clock with compilation; "
          f"MAC/s: compressed products per second, compiled)", file=out)
    w = max([14] + [len(r["model"]) for r in rows])
    if integer:
        print(f"{'model':{w}s} {'time':>9s} {'MAC/s':>10s} {'identical':>9s} {'max|err|':>9s}", file=out)
        for r in rows:
            print(f"{r['model']:{w}s} {r['seconds']:8.2f}s {r['macs_per_s']:10.3e} {r['identical']:9.4f} "
                  f"{r['max_abs_err']:9d}", file=out)
        return
    dest = {"f32": "f32", "f16": "f16", "bf16": "bf16"}.get(lookup(r0["builtin"]).c_type, "f32")
    print(f"{'model':{w}s} {'time':>9s} {'MAC/s':>10s} {'max rel':>9s} {'mean rel':>9s} {'bias':>10s} "
          f"{'identical':>9s}  {dest} ulp distance to the exact product rounded once to {dest}", file=out)
    for r in rows:
        print(f"{r['model']:{w}s} {r['seconds']:8.2f}s {r['macs_per_s']:10.3e} {r['max_rel']:9.2e} "
              f"{r['mean_rel']:9.2e} {r['bias']:10.2e} {r['ident']:9.4f}  {_hist_line(r['ulp_hist'])}", file=out)


def cmd_gemm(args) -> int:
    """``jwmma gemm``: one GEMM under several models, a table or JSON (over every process's
    devices in a multi-process job, printed by process 0)."""
    init_from_args(args)  # a jax.distributed job: before any other JAX call
    try:
        return _cmd_gemm(args)
    finally:
        leave()


def _cmd_gemm(args) -> int:
    fmt = study_data.FORMAT_ALIASES.get(args.format, args.format)
    if not args.builtin and fmt not in study_data.FORMATS:
        raise CliError(f"unknown --format {args.format!r}; valid: {', '.join(study_data.FORMATS)} (or --builtin NAME)")
    builtin = args.builtin or study_data.FORMATS[fmt]
    spec = spec_of(builtin, args.target)
    for option, value, low in (("-m", args.m, 1), ("-n", args.n, 1), ("-k", args.k, 1), ("--seed", args.seed, 0)):
        if value is not None and value < low:
            raise CliError(f"{option} must be {'positive' if low else 'non-negative'}, got {value}")
    bad = [x for x in args.batch if x < 1]
    if bad:
        raise CliError(f"--batch dims must be positive, got {bad[0]}")
    if args.scale is not None and not np.isfinite(args.scale):
        raise CliError(f"--scale must be a finite number, got {args.scale}")
    if args.clamp and not spec.signed_choice:
        raise CliError(f"--clamp applies to the RDNA4 iu8/iu4 builtins only, not {spec.name}")
    try:
        models = models_of(args.model) if args.model else ([spec.default_model] + ([] if spec.default_model == "exact" else ["exact"]))
    except ValueError as e:
        raise CliError(f"--model: {e}") from None
    if args.dist not in study_data.DISTRIBUTIONS:
        raise CliError(f"unknown distribution {args.dist!r}; valid: {', '.join(study_data.DISTRIBUTIONS)}")
    k = 2 * args.m if args.k is None else args.k
    try:
        distribute = mesh_from_args(args)
        rows = run(builtin, models, args.m, args.n, k, batch=tuple(args.batch), dist=args.dist,
                   scaling=args.scaling, scale=args.scale, seed=args.seed, path=args.path,
                   clamp=args.clamp, distribute=distribute, progress=not args.no_progress, target=spec.target)
    except (ValueError, TypeError) as e:
        raise CliError(str(e)) from None
    if jax.process_index() != 0:
        return 0  # process 0 prints
    if args.json:
        json.dump(rows, sys.stdout, indent=1, default=float)
        print()
    else:
        print_table(rows)
    return 0


def add(sub):
    """Register ``jwmma gemm`` on an argparse subparsers object."""
    p = sub.add_parser("gemm", help="emulate a 2:4-sparse GEMM under several models and report their error",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--builtin", help="builtin to issue (default: by --format)")
    g.add_argument("--format", default="fp8", help="input format fp8|bf8|f16|bf16 (gfx950 builtin) [fp8]")
    p.add_argument("-m", type=int, default=256)
    p.add_argument("-n", type=int, default=256)
    p.add_argument("-k", type=int, default=None, help="dense K (default 2*M)")
    p.add_argument("--batch", type=int, nargs="*", default=[], help="leading batch dims")
    p.add_argument("--model", action="append", help="model name(s), comma separated or repeated "
                   "(default: the builtin's default and exact); e.g. 'FusedGroups(group=32)'")
    p.add_argument("--dist", default="normal", help=f"data distribution: {', '.join(study_data.DISTRIBUTIONS)}")
    p.add_argument("--scaling", default="auto", choices=study_data.SCALINGS, help="quantisation scaling [auto]")
    p.add_argument("--scale", type=float, default=None, help="multiply the quantised data by this real factor")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--path", default="matrix", choices=("matrix", "registers"))
    p.add_argument("--clamp", action="store_true", help="integer builtins: saturate")
    add_target_arg(p)
    add_device_args(p)
    add_process_args(p)
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_gemm)
    return p

