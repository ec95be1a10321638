"""The ``jwmma`` command line: ``jwmma list``, ``jwmma layout``, ``jwmma demo``.

One function per subcommand (``cmd_<name>(args) -> exit code``), registered in
`build_parser`; add a subcommand by writing ``cmd_x`` and an ``_add_x(subparsers)``.
`main` takes an argv list, so tests can run the CLI in-process.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import zlib

import numpy as np

from . import layout_view
from .fragments import unpack_c
from .isa import BUILTINS, BuiltinSpec, lookup


class CliError(Exception):
    """A user error: printed as ``jwmma: error: ...`` with exit code 2."""


def _spec(name: str) -> BuiltinSpec:
    try:
        return lookup(name)
    except (ValueError, TypeError) as e:
        raise CliError(str(e)) from None


# ================================================================================== list
_EVIDENCE_KIND = (("measured", "measured"), ("assumed", "assumed"), ("second-hand", "second-hand"))


def evidence_kind(spec: BuiltinSpec) -> str:
    """'measured' / 'measured*' / 'assumed' / 'second-hand', from the default model's evidence."""
    ev = spec.default_evidence.lower()
    for prefix, kind in _EVIDENCE_KIND:
        if ev.startswith(prefix):
            # measured on a related instruction, transfer to the sparse one assumed
            return kind + "*" if kind == "measured" and "assumed" in ev else kind
    return "assumed"


def _vector_types(spec: BuiltinSpec) -> dict:
    """HIP vector type of A, B, C as the prototype spells them (v8half, v2int, int...)."""
    sig = spec.signature()
    return {k: re.search(rf"(\w+) {k.upper()}\b", sig).group(1) for k in ("a", "b", "c")}


def _vgprs(op) -> int:
    return max(1, -(-op.elems * op.elem_bits // 32))


def _row(spec: BuiltinSpec) -> dict:
    vec = _vector_types(spec)
    ops = {}
    for k in ("a", "b", "c"):
        op = getattr(spec, k)
        ops[k] = {
            "type": getattr(spec, f"{k}_type"), "hip_vector": vec[k], "n": op.n,
            "elements": op.elems, "elem_bits": op.elem_bits, "vgprs": _vgprs(op),
        }
    return {
        "name": spec.name, "hip_name": spec.hip_name, "signature": spec.signature(),
        "arch": spec.arch, "wave": spec.wave, "m": spec.m, "n": spec.n, "k_dense": spec.k,
        "k_compressed": spec.kc, "operands": ops,
        "index_sets": [{"set": i, "bits": [s + (31 if len(spec.index_sets) == 1 else 15), s]}
                       for i, s in enumerate(spec.index_sets)],
        "default_model": spec.default_model, "evidence": evidence_kind(spec),
        "evidence_note": spec.default_evidence,
    }


def cmd_list(args) -> int:
    specs = [s for s in BUILTINS.values() if args.arch in (None, s.arch)]
    if args.json:
        print(json.dumps([_row(s) for s in specs], indent=2))
        return 0
    notes: dict[str, int] = {}
    table = []
    for s in specs:
        r = _row(s)
        o = r["operands"]
        note = notes.setdefault(s.default_evidence, len(notes) + 1)
        table.append([
            s.name, s.arch, str(s.wave), f"{s.m}x{s.n}x{s.k}",
            f"{s.a_type}*{s.b_type}->{s.c_type}",
            " ".join(f"{o[k]['hip_vector']}({o[k]['vgprs']})" for k in ("a", "b", "c")),
            "2x16b" if len(s.index_sets) == 2 else "1x32b",
            f"{s.default_model} ({r['evidence']} [{note}])",
        ])
    head = ["builtin", "arch", "wave", "MxNxK", "A*B->C/D", "A B C vectors (VGPRs)", "index", "default model"]
    widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(head)]
    fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    print(fmt(head))
    print(fmt(["-" * w for w in widths]))
    for t in table:
        print(fmt(t))
    print()
    print("Legend: names drop the __builtin_amdgcn_ prefix. K in MxNxK is the DENSE K (A holds K/2")
    print("compressed values per row, with a 2-bit position each in the index register).")
    print("Vectors are the HIP register types of A, B, C with their VGPRs per lane; 8/4-bit data")
    print("are packed 4/8 per int, f16/bf16 2 per VGPR. index: 2x16b = two 16-bit index sets")
    print("(bits 15:0 / 31:16), 1x32b = one 32-bit set. gfx12 = RDNA4 (wave32), gfx950 = CDNA4 (wave64).")
    print("Default model evidence (measured* = measured on a dense relative, transfer assumed):")
    for text, n in notes.items():
        print(f"  [{n}] {text}")
    print("Other models: jwmma.models.PRESETS (model=... on every builtin).")
    return 0


def _add_list(sub):
    p = sub.add_parser("list", help="the 25 builtins: shapes, types, registers, default model",
                       description="List every builtin of the instruction table.")
    p.add_argument("--arch", choices=["gfx12", "gfx950"], help="only RDNA4 (gfx12) or CDNA4 (gfx950)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_list)


# ================================================================================ layout
def _int_list(text: str, what: str) -> list[int]:
    """'3' / '0-3,16' -> [..]"""
    out = []
    try:
        for part in text.split(","):
            if "-" in part.strip()[1:]:
                lo, hi = part.split("-", 1)
                out.extend(range(int(lo), int(hi) + 1))
            else:
                out.append(int(part))
    except ValueError:
        raise CliError(f"{what} must look like 3 or 0-3,16, got {text!r}") from None
    return out


def cmd_layout(args) -> int:
    spec = _spec(args.name)
    operand = "c" if args.operand == "d" else args.operand
    if not 0 <= args.index_set < len(spec.index_sets):
        raise CliError(
            f"--index-set for {spec.name} must be one of {list(range(len(spec.index_sets)))} "
            f"({layout_view.index_set_note(spec)})"
        )
    lanes = None
    if args.lane is not None:
        lanes = _int_list(args.lane, "--lane")
        bad = [x for x in lanes if not 0 <= x < spec.lanes]
        if bad:
            raise CliError(f"--lane: {spec.name} has lanes 0..{spec.lanes - 1}, got {bad[0]}")
    element = None
    if args.element is not None:
        element = _int_list(args.element, "--element")
        if len(element) != 2:
            raise CliError(f"--element takes ROW,COL, got {args.element!r}")
        try:
            layout_view.where_is(spec, operand, *element, index_set=args.index_set)
        except ValueError as e:
            raise CliError(str(e)) from None
    if args.json:
        rows = layout_view.entries(spec, operand, args.index_set)
        rows = [r for r in rows if (lanes is None or r.lane in lanes) and (element is None or [r.row, r.col] == element)]
        print(json.dumps([r.__dict__ for r in rows]))
        return 0
    if args.grid:
        lines = layout_view.render_grid(spec, operand, index_set=args.index_set, panel=args.panel)
    else:
        lines = layout_view.render_list(spec, operand, index_set=args.index_set, lanes=lanes, element=element)
    print("\n".join(lines))
    return 0


def _add_layout(sub):
    p = sub.add_parser(
        "layout", help="which matrix element each (lane, VGPR, bits) holds",
        description="Register layout of one operand of a builtin, in the spirit of AMD's matrix "
        "instruction calculator. A is shown in compressed coordinates A[i][c]: c//2 is the dense "
        "group q, and the dense k is 4q + the 2-bit index field.",
    )
    p.add_argument("name", help="builtin name, with or without __builtin_amdgcn_")
    p.add_argument("--operand", "-o", choices=["a", "b", "c", "d", "index"], default="a",
                   help="a (compressed), b, c (= d) or index (default a)")
    p.add_argument("--index-set", type=int, default=0, metavar="N",
                   help="index set shown by '--operand index' (default 0)")
    p.add_argument("--grid", action="store_true", help="matrix-shaped table of lane:vgpr cells")
    p.add_argument("--panel", type=int, default=16, metavar="COLS", help="grid columns per panel (16)")
    p.add_argument("--lane", metavar="LANES", help="only these lanes, e.g. 16 or 0-3,16")
    p.add_argument("--element", metavar="ROW,COL",
                   help="only this matrix element (A: i,c compressed; B: k,j; C: i,j; index: A's i,c)")
    p.add_argument("--json", action="store_true", help="machine-readable entries")
    p.set_defaults(func=cmd_layout)


# ================================================================================== demo
#: (builtin, models, extra keyword arguments of the call): what `jwmma demo` runs
DEMO_CASES = (
    ("smfmac_f32_16x16x128_fp8_fp8", ("cdna3", "exact"), {}),
    ("smfmac_f32_16x16x64_f16", ("cdna3",), {}),
    ("swmmac_f32_16x16x32_f16_w32", ("gfx12_dot4", "exact", "fma_chain"), {}),
    ("swmmac_i32_16x16x32_iu8_w32", ("staged_clamp",), {"clamp": False}),
    ("swmmac_i32_16x16x32_iu8_w32", ("staged_clamp",), {"clamp": True}),
)


def _random_case(spec: BuiltinSpec, waves: int, rng: np.random.Generator):
    """Random dense A (to be pruned), B and C as numpy arrays of the logical types."""
    import ml_dtypes

    dt = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "fp8": ml_dtypes.float8_e4m3fn,
          "bf8": ml_dtypes.float8_e5m2}
    if spec.integer:
        lo, hi = {"iu8": (-128, 128), "i8": (-128, 128), "iu4": (-8, 8)}[spec.a_type]
        a = rng.integers(lo, hi, (waves, spec.m, spec.k), dtype=np.int8)
        b = rng.integers(lo, hi, (waves, spec.k, spec.n), dtype=np.int8)
        # uniform over all of int32, so that some sums overflow (wrap / clamp matter)
        c = rng.integers(-(2**31), 2**31, (waves, spec.m, spec.n), dtype=np.int64).astype(np.int32)
        return a, b, c
    a = rng.standard_normal((waves, spec.m, spec.k)).astype(dt[spec.a_type])
    b = rng.standard_normal((waves, spec.k, spec.n)).astype(dt[spec.b_type])
    c = rng.standard_normal((waves, spec.m, spec.n)).astype(np.float32)
    return a, b, c


def _prepare(name: str, a, b, c):
    """prune_2_4 + compress_2_4 + pack_*, jitted: (A24 dense, A, B, C, index registers)."""
    import jax

    from . import fragments, sparsity

    def prep(a, b, c):
        a24 = sparsity.prune_2_4(a)
        values, pos = sparsity.compress_2_4(a24)
        return (a24, fragments.pack_a(name, values), fragments.pack_b(name, b),
                fragments.pack_c(name, c), fragments.pack_index(name, pos))

    return jax.jit(prep)(a, b, c)


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
    import jwmma

    fn = getattr(jwmma, spec.name)
    a, b, c, idx = regs
    if spec.signed_choice:
        return fn(True, a, True, b, c, idx, clamp, model=model)
    return fn(a, b, c, idx, model=model)


def _refusal(spec: BuiltinSpec, model: str, clamp: bool) -> str | None:
    """Why ``model`` cannot run ``spec`` now (e.g. a model still being written), else None."""
    from . import core, models

    try:
        models.resolve(model, core.context(spec, clamp), spec.default_model)
    except (ValueError, TypeError) as e:
        return str(e)
    return None


def run_demo(waves: int, seed: int, only=None, models=None, out=print) -> list[dict]:
    """Emulate ``waves`` waves of each DEMO_CASES builtin and model (or only the builtins in
    ``only`` and the models in ``models``); print one line each, return the measurements."""
    import jax

    cases = [c for c in DEMO_CASES if (only is None or c[0] in only)
             and (models is None or set(c[1]) & set(models))]
    results = []
    out(f"jwmma demo: {waves} waves per builtin, seed {seed}, {jax.device_count()} {jax.default_backend()} device(s)")
    out("data: A ~ N(0,1) pruned 2:4 (prune_2_4, compress_2_4), B, C ~ N(0,1); integers uniform, C over all of int32")
    out("reference: numpy D = C + A24 @ B in float64 rounded once to f32 (integers: int64, wrapped or clamped)")
    cols = (f"{'builtin':<30} {'model':<22} {'waves':>6} {'bit-identical':>13} {'max rel err':>11} "
            f"{'max err/scale':>13} {'inst/s':>9} {'1st call':>8}")
    out("")
    out(cols)
    out("-" * len(cols))
    prepared = {}
    for name, model_names, kw in cases:
        spec = _spec(name)
        clamp = bool(kw.get("clamp", False))
        if name not in prepared:
            # one stream per builtin: the data do not depend on which cases run
            rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
            a, b, c = _random_case(spec, waves, rng)
            a24, *regs = _prepare(name, a, b, c)
            prepared[name] = (regs, np.asarray(a24), b, c)
        regs, a24, b, c = prepared[name]
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
            d = np.asarray(unpack_c(name, d_regs))
            r = compare(d, ref, exact, scale)
            r.update(builtin=name, model=model, clamp=clamp, waves=waves,
                     inst_per_s=waves / (t2 - t1), first_call_s=t1 - t0)
            results.append(r)
            # floor, so that 100% means every output is identical
            pct = np.floor(100 * r["identical"] * 1000) / 1000
            scaled = "-" if r["max_scaled"] is None else f"{r['max_scaled']:.2e}"
            out(f"{name:<30} {label:<22} {waves:>6} {pct:>12.3f}% {r['max_rel']:>11.2e} {scaled:>13} "
                f"{r['inst_per_s']:>9,.0f} {r['first_call_s']:>7.2f}s")
    return results


def cmd_demo(args) -> int:
    if args.waves < 1:
        raise CliError(f"--waves must be >= 1, got {args.waves}")
    only = None
    if args.builtin:
        only = [_spec(n).name for n in args.builtin]
        unknown = [n for n in only if n not in {c[0] for c in DEMO_CASES}]
        if unknown:
            raise CliError(f"--builtin {unknown[0]} is not in the demo; it runs {', '.join(dict.fromkeys(c[0] for c in DEMO_CASES))}")
    all_models = {m for c in DEMO_CASES for m in c[1]}
    if args.model and not set(args.model) <= all_models:
        bad = sorted(set(args.model) - all_models)[0]
        raise CliError(f"--model {bad} is not in the demo; it runs {', '.join(sorted(all_models))}")
    t0 = time.perf_counter()
    run_demo(args.waves, args.seed, only, args.model)
    if not only and not args.model and not args.no_gemm:
        from . import gemm_cli

        print("\nA whole GEMM, emulated as the tiled kernel issuing the builtin once per K step "
              "(`jwmma gemm --help` for more):")
        rows = gemm_cli.run("smfmac_f32_16x16x128_fp8_fp8", ["exact", "cdna3", "fma_chain"], 128, 128, 2048,
                            seed=args.seed, progress=False)
        gemm_cli.print_table(rows)
    print(f"\ntotal {time.perf_counter() - t0:.1f} s. inst/s = waves (one instruction each) per second, "
          "second call, after compilation; 1st call includes compilation.")
    print("* = the builtin's default model. bit-identical = outputs equal to the reference bit for bit;")
    print("models other than exact round differently by design (NUMERICS.md). scale = |C| + sum |a*b|.")
    return 0


def _add_demo(sub):
    p = sub.add_parser("demo", help="emulate thousands of waves of a few builtins and check them",
                       description="Emulate a batch of waves of a few builtins on random 2:4 data and "
                       "compare each model with an independent numpy reference.")
    p.add_argument("--waves", type=int, default=2048, help="waves (instructions) per builtin (2048)")
    p.add_argument("--seed", type=int, default=0, help="random seed (0)")
    p.add_argument("--builtin", action="append", metavar="NAME", help="only this demo builtin (repeatable)")
    p.add_argument("--model", action="append", metavar="NAME", help="only this model (repeatable)")
    p.add_argument("--no-gemm", action="store_true", help="skip the closing whole-GEMM showcase")
    p.set_defaults(func=cmd_demo)


# ================================================================================== main
def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    p = argparse.ArgumentParser(
        prog="jwmma",
        description="Bit-exact JAX emulator of AMD sparse matrix-core builtins "
        "(RDNA4 swmmac_*_w32, CDNA4 smfmac_*).",
    )
    p.add_argument("--version", action="version", version=f"jwmma {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for add in (_add_list, _add_layout, _add_demo):
        add(sub)
    __import__("jwmma.study", fromlist=["add_cli"]).add_cli(sub)  # `jwmma study`: jwmma/study.py
    __import__("jwmma.gemm_cli", fromlist=["add_cli"]).add_cli(sub)  # `jwmma gemm`: jwmma/gemm_cli.py
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.func(args)
    except CliError as e:
        print(f"jwmma: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `jwmma layout ... | head`: silence the flush at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
