"""``jwmma demo``: emulate hundreds of waves of a few builtins, check them against an
independent numpy reference, then a whole GEMM."""
from __future__ import annotations

import time
import zlib

import jax
import numpy as np

from .. import models
from ..engine import fragments, sparsity
from ..engine.builtins import FUNCTIONS
from ..engine.step import context
from ..isa.conventions import hip_args
from ..isa.table import BuiltinSpec
from ..isa.types import element_type
from ..numerics.host import cast
from . import gemm as gemm_cmd
from .common import CliError, add_target_arg, all_targets, spec_of

__all__ = ["DEMO_CASES", "compare", "run_demo", "cmd_demo", "add"]

# ================================================================================== demo
#: (builtin, models, extra keyword arguments of the call): what `jwmma demo` runs
DEMO_CASES = (
    ("smfmac_f32_16x16x128_fp8_fp8", ("cdna3", "exact"), {}),
    ("smfmac_f32_16x16x64_f16", ("cdna3",), {}),
    ("swmmac_f32_16x16x32_f16_w32", ("gfx12_dot4", "fma_chain"), {}),
    ("swmmac_i32_16x16x32_iu8_w32", ("staged_clamp",), {"clamp": False}),
    ("swmmac_i32_16x16x32_iu8_w32", ("staged_clamp",), {"clamp": True}),
    ("smfmac_f32_16x16x64_fp8_fp8", ("cdna3",), {}),  # gfx942 (MI300), FNUZ fp8
    ("wmma_f32_16x16x16_f16_w32_gfx12", ("gfx12_dot4",), {}),  # RDNA4 dense
)


def _random_case(spec: BuiltinSpec, waves: int, rng: np.random.Generator):
    """Random dense A (to be pruned), B and C as numpy arrays of the logical types."""
    if spec.integer:
        signed = element_type(spec.a_type).int_format(True)
        lo, hi = signed.lo, signed.hi + 1
        a = rng.integers(lo, hi, (waves, spec.m, spec.k), dtype=np.int8)
        b = rng.integers(lo, hi, (waves, spec.k, spec.n), dtype=np.int8)
        # uniform over all of int32, so that some sums overflow (wrap / clamp matter)
        c = rng.integers(-(2**31), 2**31, (waves, spec.m, spec.n), dtype=np.int64).astype(np.int32)
        return a, b, c
    # one rounding from float64 (numerics.cast): the same operands on every machine
    a = cast(rng.standard_normal((waves, spec.m, spec.k)), spec.a_format.dtype)
    b = cast(rng.standard_normal((waves, spec.k, spec.n)), spec.b_format.dtype)
    c = rng.standard_normal((waves, spec.m, spec.n)).astype(np.float32)
    return a, b, c


def _prepare(specs, operands):
    """prune_2_4 + compress_2_4 + pack_* of every builtin in ``specs`` (``operands``: its
    (a, b, c) each): per builtin (A24 dense, A, B, C, index registers); a dense builtin packs
    A as it is (its index registers are zeros it does not read). At the demo's sizes every
    step runs in numpy (`host_sparsity`, `host_codec`: nothing to compile; the 2:4 steps had
    been one jitted program, 0.9 s of a cold demo on a 2-core CPU)."""
    out = []
    for spec, (a, b, c) in zip(specs, operands):
        name, t = spec.name, spec.target
        if spec.dense:
            a24, values, pos = a, a, np.zeros(a.shape, np.int32)
        else:
            a24 = np.asarray(sparsity.prune_2_4(a))
            values, pos = (np.asarray(x) for x in sparsity.compress_2_4(a24))
        out.append((a24, fragments.pack_a(name, values, target=t), fragments.pack_b(name, b, target=t),
                    fragments.pack_c(name, c, target=t), fragments.pack_index(name, pos)))
    return out


def _reference(spec: BuiltinSpec, a24, b, c, clamp=False):
    """Independent numpy reference D = C + A24 @ B: float64 rounded once to f32 (integers:
    int64, wrapped, or saturated when ``clamp``). Returns (rounded, float64 or int64 exact,
    scale |C| + |A24| @ |B| or None)."""
    if spec.integer:
        d = c.astype(np.int64) + np.matmul(a24.astype(np.int64), b.astype(np.int64))
        r = np.clip(d, -(2**31), 2**31 - 1) if clamp else (d + 2**31) % 2**32 - 2**31
        return r.astype(np.int32), d, None
    a64, b64, c64 = a24.astype(np.float64), b.astype(np.float64), c.astype(np.float64)
    d64 = c64 + np.matmul(a64, b64)
    scale = np.abs(c64) + np.matmul(np.abs(a64), np.abs(b64))
    return d64.astype(np.float32), d64, scale


def compare(d: np.ndarray, ref: np.ndarray, exact: np.ndarray, scale) -> dict:
    """Agreement of D with the reference: bit-identical outputs (fraction and count), max
    relative error against the unrounded value (integers: against the rounded reference),
    and for floats the max error in units of the dot product's scale |C| + sum |a*b|."""
    same = d.view(np.uint32) == ref.view(np.uint32)
    out = {"identical": float(same.mean()), "mismatches": int((~same).sum()), "max_scaled": None}
    if scale is None:
        diff = np.abs(d.astype(np.int64) - ref.astype(np.int64))
        out["max_rel"] = float((diff / np.maximum(np.abs(ref.astype(np.int64)), 1)).max(initial=0.0))
        return out
    err = np.abs(d.astype(np.float64) - exact)
    nz = exact != 0
    out["max_rel"] = float((err[nz] / np.abs(exact[nz])).max(initial=0.0))
    out["max_scaled"] = float((err[scale > 0] / scale[scale > 0]).max(initial=0.0))
    return out


def _call(spec: BuiltinSpec, regs, model: str, clamp: bool):
    a, b, c, idx = regs
    kw = {"target": spec.target} if spec.convention.name_of("target") else {}  # the chip: its fp8 decoding
    return FUNCTIONS[spec.name](*hip_args(spec.convention, a, b, c, idx, clamp=clamp), model=model, **kw)


def _refusal(spec: BuiltinSpec, model: str, clamp: bool) -> str | None:
    """Why ``model`` cannot run ``spec`` now (e.g. a model still being written), else None."""
    try:
        models.resolve(model, context(spec, clamp), spec.default_model)
    except (ValueError, TypeError) as e:
        return str(e)
    return None


def run_demo(waves: int, seed: int, only=None, models=None, out=print, target=None) -> list[dict]:
    """Emulate ``waves`` waves of each DEMO_CASES builtin and model (or only the builtins in
    ``only``, the models in ``models``, the builtins that run on ``target``, decoded there);
    print one line each, return the measurements."""
    cases = [c for c in DEMO_CASES if (only is None or c[0] in only)
             and (models is None or set(c[1]) & set(models))
             and (target is None or target in spec_of(c[0]).targets)]
    results = []
    on = "" if target is None else f", the builtins of {target} decoded there"
    out(f"jwmma demo: {waves} waves per builtin, seed {seed}, {jax.device_count()} {jax.default_backend()} "
        f"device(s){on}")
    out("data: A ~ N(0,1) pruned 2:4 (prune_2_4, compress_2_4; wmma_*: dense A), B, C ~ N(0,1); integers uniform, "
        "C over all of int32")
    out("reference: numpy D = C + A24 @ B in float64 rounded once to f32 (integers: int64, wrapped or clamped)")
    cols = (f"{'builtin':<30} {'model':<22} {'waves':>6} {'bit-identical':>13} {'max rel err':>11} "
            f"{'max err/scale':>13} {'inst/s':>9} {'1st call':>8}")
    out("")
    out(cols)
    out("-" * len(cols))
    names = list(dict.fromkeys(name for name, _, _ in cases))
    specs = [spec_of(name, target) for name in names]
    # one stream per builtin: the data do not depend on which cases run
    operands = [_random_case(spec, waves, np.random.default_rng([seed, zlib.crc32(spec.name.encode())]))
                for spec in specs]
    prepared = {name: (spec, regs, np.asarray(a24)) + ops[1:]
                for name, spec, ops, (a24, *regs) in zip(names, specs, operands, _prepare(specs, operands))}
    for name, model_names, kw in cases:
        clamp = bool(kw.get("clamp", False))
        spec, regs, a24, b, c = prepared[name]
        ref, exact, scale = _reference(spec, a24, b, c, clamp)
        for model in model_names:
            if models is not None and model not in models:
                continue
            label = model + ("*" if model == spec.default_model else "")
            if spec.signed_choice:
                label += f", clamp={int(clamp)}"
            why = _refusal(spec, model, clamp)
            if why:
                out(f"{name:<30} {label:<22} skipped: {why}")
                results.append({"builtin": name, "model": model, "clamp": clamp, "skipped": why})
                continue
            t0 = time.perf_counter()
            jax.block_until_ready(_call(spec, regs, model, clamp))  # compiles
            t1 = time.perf_counter()
            d_regs = jax.block_until_ready(_call(spec, regs, model, clamp))
            t2 = time.perf_counter()
            d = np.asarray(fragments.unpack_c(name, d_regs))  # (CPU results: unpacked in numpy, `host_codec`)
            r = compare(d, ref, exact, scale)
            r.update(builtin=name, target=spec.target, model=model, clamp=clamp, waves=waves,
                     inst_per_s=waves / (t2 - t1), first_call_s=t1 - t0)
            results.append(r)
            # floor, so that 100% means every output is identical
            pct = np.floor(100 * r["identical"] * 1000) / 1000
            scaled = "-" if r["max_scaled"] is None else f"{r['max_scaled']:.2e}"
            out(f"{name:<30} {label:<22} {waves:>6} {pct:>12.3f}% {r['max_rel']:>11.2e} {scaled:>13} "
                f"{r['inst_per_s']:>9,.0f} {r['first_call_s']:>7.2f}s")
    return results


def cmd_demo(args) -> int:
    """``jwmma demo``: the demo cases, then (unless narrowed) a whole-GEMM showcase."""
    if args.waves < 1:
        raise CliError(f"--waves must be >= 1, got {args.waves}")
    only = None
    if args.builtin:
        only = [spec_of(n).name for n in args.builtin]
        unknown = [n for n in only if n not in {c[0] for c in DEMO_CASES}]
        if unknown:
            raise CliError(f"--builtin {unknown[0]} is not in the demo; it runs {', '.join(dict.fromkeys(c[0] for c in DEMO_CASES))}")
    all_models = {m for c in DEMO_CASES for m in c[1]}
    if args.model and not set(args.model) <= all_models:
        bad = sorted(set(args.model) - all_models)[0]
        raise CliError(f"--model {bad} is not in the demo; it runs {', '.join(sorted(all_models))}")
    if only and args.model:  # else the table would be empty, with no word of why
        runs = {c[0]: c[1] for c in DEMO_CASES}
        for name in only:
            if not set(runs[name]) & set(args.model):
                raise CliError(f"--model {', '.join(args.model)} is not in the demo of {name}: it runs "
                               f"{', '.join(runs[name])} there (any model: jwmma gemm --builtin {name} --model NAME)")
    target = args.target
    if target is not None:
        known = all_targets()
        if target not in known:
            raise CliError(f"--target must be one of {', '.join(known)} (the chips of the table's rows), "
                           f"got {target!r}")
        for name in only or ():
            spec_of(name, target)  # a builtin named by --builtin must run on --target
    t0 = time.perf_counter()
    run_demo(args.waves, args.seed, only, args.model, target=target)
    showcase = "smfmac_f32_16x16x128_fp8_fp8"
    if not only and not args.model and not args.no_gemm and target in (None, *spec_of(showcase).targets):
        print("\nA whole GEMM, emulated as the tiled kernel issuing the builtin once per K step "
              "(`jwmma gemm --help` for more):")
        rows = gemm_cmd.run(showcase, ["exact", "cdna3"], 64, 64, 2048,
                            seed=args.seed, progress=False)
        gemm_cmd.print_table(rows)
    print(f"\ntotal {time.perf_counter() - t0:.1f} s. inst/s = waves (one instruction each) per second, "
          "second call, after compilation; 1st call includes compilation.")
    print("* = the builtin's default model. bit-identical = outputs equal to the reference bit for bit;")
    print("models other than exact round differently by design (NUMERICS.md). scale = |C| + sum |a*b|.")
    return 0


def add(sub):
    """Register ``jwmma demo`` on an argparse subparsers object."""
    p = sub.add_parser("demo", help="emulate hundreds of waves of a few builtins and check them",
                       description="Emulate a batch of waves of a few builtins on random 2:4 data and "
                       "compare each model with an independent numpy reference.")
    p.add_argument("--waves", type=int, default=256, help="waves (instructions) per builtin (256)")
    p.add_argument("--seed", type=int, default=0, help="random seed (0)")
    p.add_argument("--builtin", action="append", metavar="NAME", help="only this demo builtin (repeatable)")
    p.add_argument("--model", action="append", metavar="NAME", help="only this model (repeatable)")
    p.add_argument("--no-gemm", action="store_true", help="skip the closing whole-GEMM showcase")
    add_target_arg(p, "each demo builtin")
    p.set_defaults(func=cmd_demo)
