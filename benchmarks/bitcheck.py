"""Bit snapshot of the whole public surface, to prove that a change of structure changes no bit.

    python benchmarks/bitcheck.py --save before.npz                 # old code
    python benchmarks/bitcheck.py --compare before.npz              # new code: identical?
    python benchmarks/bitcheck.py --variant nodots --save x.npz     # one execution variant
    python benchmarks/bitcheck.py --all --save before.npz           # every family of the table

What it runs, on operands drawn with numpy from fixed seeds:
* every builtin x every model that applies, on random register bit patterns (NaN/Inf, subnormals
  everywhere: the special-value paths) and on finite wide-range data (the finite fast paths);
* `jwmma.gemm` on both paths for several builtins (odd shapes: padding; batch dims; given C);
* `jwmma.dot` for every input format, models and long K (the scanned groups).

``--all`` adds the families that earlier snapshots did not have (gfx942 SMFMAC, dense WMMA and
MFMA, block-scaled MFMA); compare such a snapshot with one taken by ``--all`` too.
``--variant`` picks an execution choice that must not change any bit either: ``default``,
``nodots`` / ``dots`` (fp8 group sums per product / as matrix products), ``noalign`` (integer
alignment instead of the float multiply), ``tile128`` (the GPU's matrix-path tile on a CPU).
It works with the code before and after `jwmma.Options` existed (environment variables and the
class flag then), so old and new snapshots can be compared. Results are compared bit for bit,
NaN payloads included (same machine, same code paths).
"""
from __future__ import annotations

import argparse
import os
import sys

VARIANTS = ("default", "nodots", "dots", "noalign", "tile128")


def _parse():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--save", metavar="NPZ")
    g.add_argument("--compare", metavar="NPZ")
    ap.add_argument("--variant", choices=VARIANTS, default="default")
    ap.add_argument("--only", default=None, help="only keys containing this text")
    ap.add_argument("--all", action="store_true", help="every family of the table (module doc)")
    return ap.parse_args()


ARGS = _parse()
_OLD_ENV = {"nodots": ("JWMMA_DOTS", "0"), "dots": ("JWMMA_DOTS", "1"), "tile128": ("JWMMA_TILE_N", "128")}

import jax  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

import jwmma  # noqa: E402

WAVES = 24
NEW = hasattr(jwmma, "Options")
if NEW:
    OPTIONS = {
        "default": None,
        "nodots": jwmma.Options(group_dots=False),
        "dots": jwmma.Options(group_dots=True),
        "noalign": jwmma.Options(float_alignment=False),
        "tile128": jwmma.Options(tile_n=128),
    }[ARGS.variant]
    KW = {} if OPTIONS is None else {"options": OPTIONS}
else:  # the code before Options: environment variables read while tracing, a class flag
    if ARGS.variant in _OLD_ENV:
        os.environ[_OLD_ENV[ARGS.variant][0]] = _OLD_ENV[ARGS.variant][1]
    if ARGS.variant == "noalign":
        from jwmma.models.fused import FusedGroups

        FusedGroups.float_alignment = False
    KW = {}


def bits(x) -> np.ndarray:
    x = np.asarray(x)
    return x.view({4: np.uint32, 2: np.uint16, 1: np.uint8}[x.dtype.itemsize]).copy()


def models_for(spec) -> list[str]:
    if spec.integer:
        return ["exact"] + (["staged_clamp"] if spec.a_type in ("iu8", "iu4") else [])
    mods = ["exact", "fma_chain"]
    if spec.c_type == "f32":
        mods += ["cdna3", "cdna3_c785138"]
    if spec.arch == "gfx12":
        mods.append("gfx12_dot4")
    if ARGS.all and spec.default_model not in mods:  # the block-scaled rows' own model
        mods.append(spec.default_model)
    return mods


def call(spec, model, a, b, c, idx, clamp=True):
    fn = getattr(jwmma, spec.name)
    conv = spec.convention.name
    if conv == "mfma_scale":  # block-scaled: fp8 x fp8, no scale registers (every scale 1)
        return fn(a, b, c, model=model, **KW)
    if conv in ("mfma", "mfma_cdna3"):  # dense MFMA: cbsz, abid, blgp 0
        return fn(a, b, c, model=model, **KW)
    if getattr(spec, "dense", False):  # RDNA4 dense WMMA : no index
        if spec.a_type in ("iu8", "iu4"):
            return fn(True, a, False, b, c, clamp, model=model, **KW)
        return fn(a, b, c, model=model, **KW)
    if spec.arch == "gfx942":  # CDNA3 SMFMAC: abid 1 of its sets
        return fn(a, b, c, idx, 0, 1, model=model, **KW)
    if spec.a_type in ("iu8", "iu4"):
        return fn(True, a, False, b, c, idx, clamp, model=model, **KW)
    if spec.arch == "gfx950":
        return fn(a, b, c, idx, 0, 1, model=model, **KW)
    return fn(a, b, c, idx, model=model, **KW)


# ------------------------------------------------------------------------------ builtins
def random_regs(rng, spec):
    """Register operands from random bit patterns: every special value appears."""
    def regs(op):
        words = rng.integers(0, 1 << 32, (WAVES, spec.lanes, op.n), dtype=np.uint64).astype(np.uint32)
        if op.elem_bits < 16:
            return words.view(np.int32)
        if op.elem_bits == 32:  # f32 (and xf32) operands: random float32 bit patterns
            return words.view(np.float32)
        return (words & 0xFFFF).astype(np.uint16).view(op.dtype)

    a, b = regs(spec.a), regs(spec.b)
    shape = (WAVES, spec.lanes, spec.c.n)
    if spec.c_type == "f32":
        c = (rng.standard_normal(shape) * 10.0 ** rng.integers(-40, 30, shape)).astype(np.float32)
    elif spec.c_type == "i32":
        c = rng.integers(-(2**31), 2**31, shape).astype(np.int32)
    else:
        c = rng.integers(0, 1 << 16, shape).astype(np.uint16).view(spec.c.dtype)
    idx = rng.integers(0, 1 << 32, (WAVES, spec.lanes), dtype=np.uint64).astype(np.uint32).view(np.int32)
    return a, b, c, idx


_VALUE_DTYPE = {"f32": np.float32, "xf32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "fp8": ml_dtypes.float8_e4m3fn,
                "bf8": ml_dtypes.float8_e5m2}


def finite_values(rng, t, shape):
    """Finite values with huge spreads, subnormals, zeros and exact cancellation pairs."""
    dt = _VALUE_DTYPE[t]
    fin = ml_dtypes.finfo(dt)
    e = rng.integers(int(np.log2(float(fin.smallest_subnormal))), int(np.log2(float(fin.max))), shape)
    x = rng.choice([-1.0, 1.0], shape) * np.exp2(e.astype(np.float64)) * rng.uniform(1, 2, shape)
    x = np.where(rng.random(shape) < 0.1, 0.0, x)
    x = np.clip(x, -float(fin.max), float(fin.max)).astype(np.float32).astype(dt)
    q = shape[-1] // 4 * 4  # exact cancellation: element 4t+1 = -(element 4t) now and then
    odd, even = x[..., 1:q:4], x[..., 0:q:4]
    x[..., 1:q:4] = np.where(rng.random(odd.shape) < 0.2, -even, odd)
    return x


def finite_regs(rng, spec):
    """Registers packed (pack_*) from finite matrices: the finite fast paths run."""
    if spec.integer or spec.a_type not in _VALUE_DTYPE or spec.b_type not in _VALUE_DTYPE:
        return None
    a = finite_values(rng, spec.a_type, (WAVES, spec.m, spec.kc))
    b = finite_values(rng, spec.b_type, (WAVES, spec.k, spec.n))
    if spec.c_type == "f32":
        c = (rng.standard_normal((WAVES, spec.m, spec.n)) * 10.0 ** rng.integers(-40, 30, (WAVES, spec.m, spec.n))).astype(np.float32)
    else:
        c = finite_values(rng, spec.c_type, (WAVES, spec.m, spec.n))
    if getattr(spec, "dense", False):
        return (jwmma.pack_a(spec.name, a), jwmma.pack_b(spec.name, b), jwmma.pack_c(spec.name, c), None)
    pos = np.sort(np.stack([rng.permutation(4)[:2] for _ in range(WAVES * spec.m * spec.kc // 2)]), -1)
    pos = pos.reshape(WAVES, spec.m, spec.kc).astype(np.int32)
    s = 1 if spec.arch == "gfx950" and spec.a.elem_bits == 16 else 0
    return (jwmma.pack_a(spec.name, a), jwmma.pack_b(spec.name, b), jwmma.pack_c(spec.name, c),
            jwmma.pack_index(spec.name, pos, s))


def builtin_cases(out):
    rng = np.random.default_rng(1234)
    for name, spec in jwmma.BUILTINS.items():
        if not ARGS.all and getattr(spec, "family", "") in ("CDNA3 SMFMAC", "RDNA4 WMMA", "CDNA3 MFMA", "CDNA4 MFMA",
                                                             "CDNA4 block-scaled MFMA"):
            continue  # not in the snapshots taken before these families (tests/test_siblings*.py); --all adds them
        if (getattr(spec, "blocks", 1) > 1 or not set(spec.targets) & {"gfx12", "gfx942", "gfx950"}
                or spec.c_type == "f64"):
            continue  # rows added after the 582-result snapshots (multi-block MFMA, MI100/MI200-only, RDNA3, f64 rows):
            # drawing their operands would move every later row's draws; their own tests pin their bits
        ops = random_regs(rng, spec)
        fin = finite_regs(rng, spec)
        for model in models_for(spec):
            key = f"builtin|{name}|{model}"
            if ARGS.only and ARGS.only not in key:
                continue
            try:
                out[key + "|random"] = bits(call(spec, model, *ops))
                if fin is not None:
                    out[key + "|finite"] = bits(call(spec, model, *fin))
            except ValueError as e:  # a model that does not apply to this builtin
                out[key + "|refused"] = np.frombuffer(str(e).encode(), np.uint8)


# ------------------------------------------------------------------------------ gemm
GEMMS = [  # builtin, model, (batch, M, N, K), extra keywords
    ("smfmac_f32_16x16x128_fp8_fp8", "cdna3", ((), 40, 37, 640), {}),
    ("smfmac_f32_16x16x128_fp8_fp8", "exact", ((2,), 16, 24, 256), {}),
    ("smfmac_f32_32x32x64_bf8_fp8", "cdna3", ((), 33, 40, 192), {}),
    ("swmmac_f32_16x16x32_fp8_bf8_w32", "cdna3", ((), 24, 20, 160), {}),
    ("swmmac_f32_16x16x32_fp8_fp8_w32", "gfx12_dot4", ((), 17, 16, 96), {}),
    ("swmmac_f32_16x16x32_f16_w32", "gfx12_dot4", ((2,), 20, 18, 100), {}),
    ("swmmac_f16_16x16x32_f16_w32", "gfx12_dot4", ((), 16, 16, 64), {}),
    ("swmmac_bf16_16x16x32_bf16_w32", "gfx12_dot4", ((), 16, 17, 64), {}),
    ("smfmac_f32_16x16x64_bf16", "cdna3", ((), 20, 16, 128), {}),
    ("smfmac_f32_32x32x32_f16", "fma_chain", ((), 32, 33, 64), {}),
    ("smfmac_f32_16x16x64_f16", "cdna3_c785138", ((), 16, 16, 192), {}),
    ("swmmac_i32_16x16x32_iu8_w32", "staged_clamp", ((), 18, 16, 96), {"clamp": True, "a_neg": False}),
    ("swmmac_i32_16x16x64_iu4_w32", "exact", ((), 16, 16, 128), {"b_neg": False}),
    ("smfmac_i32_16x16x128_i8", "exact", ((), 16, 20, 256), {}),
]


def gemm_operands(rng, spec, batch, m, n, k):
    if spec.integer:
        signed_hi = {"iu8": 128, "i8": 128, "iu4": 8}[spec.a_type]
        # int16: a dtype without a signedness of its own, so a_neg/b_neg decide (int8 would
        # contradict a_neg=False); the values are those of earlier snapshots
        a = rng.integers(0, signed_hi, batch + (m, k)).astype(np.int16)
        b = rng.integers(0, signed_hi, batch + (k, n)).astype(np.int16)
        c = rng.integers(-(2**31), 2**31, batch + (m, n)).astype(np.int32)
        return np.asarray(jwmma.prune_2_4(a)), b, c
    a = finite_values(rng, spec.a_type, batch + (m, k))
    b = finite_values(rng, spec.b_type, batch + (k, n))
    a = np.array(jwmma.prune_2_4(a))
    if spec.c_type == "f32":
        c = (rng.standard_normal(batch + (m, n)) * 10.0 ** rng.integers(-40, 30, batch + (m, n))).astype(np.float32)
    else:
        c = finite_values(rng, spec.c_type, batch + (m, n))
    # a special value in one output row (the special-value branch of the same compiled kernel),
    # at a kept (non-zero) position so that A stays 2:4 sparse
    if spec.a_type in ("f16", "bf16", "bf8"):
        row = a[..., 1, :]
        first = np.argmax(row.astype(np.float32) != 0, axis=-1)
        np.put_along_axis(row, first[..., None], np.inf, axis=-1)
    return a, b, c


def gemm_cases(out):
    rng = np.random.default_rng(99)
    for name, model, (batch, m, n, k), kw in GEMMS:
        spec = jwmma.BUILTINS[name]
        a, b, c = gemm_operands(rng, spec, batch, m, n, k)
        for path in ("matrix", "registers"):
            key = f"gemm|{name}|{model}|{path}"
            if ARGS.only and ARGS.only not in key:
                continue
            out[key] = bits(jwmma.gemm(a, b, c, builtin=name, model=model, path=path, **kw, **KW))
            out[key + "|c0"] = bits(jwmma.gemm(a, b, builtin=name, model=model, path=path, **kw, **KW))


# ------------------------------------------------------------------------------ dot
DOT_TYPES = [np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
             ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2fnuz]


def dot_cases(out):
    rng = np.random.default_rng(7)
    for dt in DOT_TYPES:
        bw = np.dtype(dt).itemsize * 8
        for k in (48, 1000):
            raw = rng.integers(0, 1 << bw, (2, 300, k)).astype(np.uint16 if bw == 16 else np.uint8)
            a, b = raw[0].view(dt), raw[1].view(dt)
            fin = np.isfinite(a.astype(np.float32)) & np.isfinite(b.astype(np.float32))
            keep = rng.random(a.shape) < 0.999
            a = np.where(fin | ~keep, a, np.zeros((), dt)).astype(dt)
            b = np.where(fin | ~keep, b, np.zeros((), dt)).astype(dt)
            c = (rng.standard_normal(300) * 10.0 ** rng.integers(-45, 38, 300)).astype(np.float32)
            for model in ("exact", "fma_chain", "cdna3", "cdna3_c785138", "gfx12_dot4"):
                key = f"dot|{np.dtype(dt).name}|{k}|{model}"
                if ARGS.only and ARGS.only not in key:
                    continue
                try:
                    out[key] = bits(jwmma.dot(a, b, c, model=model, **KW))
                except (ValueError, TypeError) as e:
                    out[key + "|refused"] = np.frombuffer(str(e).encode(), np.uint8)
            if bw == 16 and k == 48:
                c16 = rng.standard_normal(300).astype(dt)
                key = f"dot|{np.dtype(dt).name}|acc16|gfx12_dot4"
                out[key] = bits(jwmma.dot(a, b, c16, model="gfx12_dot4", **KW))
    ai = rng.integers(-128, 128, (50, 64)).astype(np.int8)
    bi = rng.integers(0, 256, (50, 64)).astype(np.uint8)
    ci = rng.integers(-(2**31), 2**31, 50).astype(np.int32)
    for clamp in (False, True):
        for model in ("exact", "staged_clamp"):
            out[f"dot|int8|{model}|clamp{int(clamp)}"] = bits(jwmma.dot(ai, bi, ci, model=model, clamp=clamp, **KW))


def main():
    print(f"# {jax.default_backend()} jax {jax.__version__}; jwmma from {os.path.dirname(jwmma.__file__)}; "
          f"variant {ARGS.variant} ({'Options' if NEW else 'environment'})", flush=True)
    out: dict = {}
    builtin_cases(out)
    gemm_cases(out)
    dot_cases(out)
    if ARGS.save:
        np.savez_compressed(ARGS.save, **out)
        print(f"saved {len(out)} results to {ARGS.save}")
        return 0
    ref = np.load(ARGS.compare)
    keys = set(out) | set(k for k in ref.files if not ARGS.only or ARGS.only in k)
    bad = 0
    for key in sorted(keys):
        if key not in out or key not in ref.files:
            bad += 1
            print(f"{key}: only in {'the reference' if key not in out else 'this run'}")
            continue
        r, x = ref[key], out[key]
        if r.shape != x.shape or r.dtype != x.dtype or not np.array_equal(r, x):
            bad += 1
            n = int((r != x).sum()) if r.shape == x.shape else -1
            print(f"{key}: differs ({n} of {x.size} elements)")
    print(f"{len(keys) - bad} of {len(keys)} results bit-identical to {ARGS.compare}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
