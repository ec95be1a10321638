"""Cross-device bit check: the same inputs through every builtin and model on two backends.

    python benchmarks/crosscheck.py --save ref_cpu.npz        # on the CPU
    python benchmarks/crosscheck.py --compare ref_cpu.npz     # on a GPU: same bits?

Inputs are drawn with numpy from a fixed seed (random values, plus subnormals, zeros, NaN/Inf,
huge spreads), so both machines build the same operands.

``--parts builtins,gemm`` (default both): ``gemm`` adds whole GEMMs of every Pallas kernel
family (`GEMMS`, tile-padded codes with an adversarial corner) through the matrix path with
``--backend`` (default 'auto': XLA on the CPU; give 'pallas' on a GPU to run every family's
Pallas kernel against the CPU's XLA bits).
"""
from __future__ import annotations

import argparse
import sys

import jax
import numpy as np

import jwmma
from jwmma.isa.conventions import hip_args

WAVES = 64

#: (builtin, model, M, N, steps of K) of the ``gemm`` part: every Pallas kernel family
GEMMS = [
    ("smfmac_f32_16x16x128_fp8_fp8", "cdna3", 128, 128, 4),
    ("smfmac_f32_16x16x64_f16", "cdna3", 128, 128, 4),
    ("smfmac_f32_32x32x32_bf16", "cdna3", 128, 128, 4),
    ("swmmac_f32_16x16x32_f16_w32", "gfx12_dot4", 128, 128, 8),
    ("swmmac_f16_16x16x32_f16_w32", "gfx12_dot4", 128, 128, 8),
    ("swmmac_f32_16x16x32_fp8_fp8_w32", "gfx12_dot4", 128, 128, 8),
    ("smfmac_f32_16x16x128_fp8_fp8", "exact", 128, 128, 4),
    ("swmmac_f32_16x16x32_f16_w32", "exact", 128, 128, 8),
    ("smfmac_f32_16x16x128_fp8_fp8", "fma_chain_k", 128, 128, 4),
    ("smfmac_f32_16x16x128_fp8_fp8", "fma_chain", 128, 128, 4),  # register order, NaN words
    ("swmmac_bf16_16x16x32_bf16_w32", "fma_chain", 128, 128, 8),  # truncation
    ("smfmac_f32_16x16x64_bf16", "fma_chain_k", 128, 128, 4),
    ("swmmac_i32_16x16x32_iu8_w32", "exact", 128, 128, 8),
    ("smfmac_i32_16x16x128_i8", "exact", 128, 128, 4),
    # dense RDNA4 WMMA (the driver's dense reading, issue #20)
    ("wmma_f32_16x16x16_f16_w32_gfx12", "gfx12_dot4", 128, 128, 8),
    ("wmma_f32_16x16x16_bf16_w32_gfx12", "gfx12_dot4", 128, 128, 8),
    ("wmma_bf16_16x16x16_bf16_w32_gfx12", "gfx12_dot4", 128, 128, 8),
    ("wmma_f32_16x16x16_fp8_bf8_w32_gfx12", "gfx12_dot4", 128, 128, 8),
    ("wmma_f32_16x16x16_fp8_fp8_w32_gfx12", "cdna3", 128, 128, 8),
    ("wmma_f32_16x16x16_f16_w32_gfx12", "exact", 128, 128, 8),
    ("wmma_f16_16x16x16_f16_w32_gfx12", "fma_chain_k", 128, 128, 8),
    ("wmma_i32_16x16x32_iu4_w32_gfx12", "staged_clamp", 128, 128, 8),
]


def gemm_cases(backend):
    """(key, D bits) of every `GEMMS` row through `jwmma.tiled.paths.matrix_path`."""
    from jwmma.backends.pallas.testdata import gemm_codes
    from jwmma.engine.options import Options, resolve
    from jwmma.engine.step import context
    from jwmma.numerics.rounding import x64_scope
    from jwmma.tiled import paths

    opts = resolve(Options(backend=backend))
    for name, model, m, n, steps in GEMMS:
        spec = jwmma.BUILTINS[name]
        m_obj = jwmma.models.resolve(model, context(spec), spec.default_model)
        a, p, b, c = (jax.numpy.asarray(x) for x in gemm_codes(spec, m, n, steps * spec.k, seed=7))
        with x64_scope():
            d = paths.matrix_path(a, p, b, c, spec=spec, model=m_obj, options=opts, a_signed=True, b_signed=True,
                                  clamp=False)
        d = np.asarray(d).astype(np.uint32)
        yield f"gemm|{name}|{model}", (d if spec.c_type in ("f32", "i32") else d.astype(np.uint16))


def random_codes(rng, bits, shape, special_rate=0.02):
    codes = rng.integers(0, 1 << bits, shape)
    return codes


def cases():
    rng = np.random.default_rng(1234)
    for name, spec in jwmma.BUILTINS.items():
        lanes = spec.lanes
        # registers straight from random bit patterns: covers subnormals, NaN/Inf, zeros
        def regs(op):
            words = rng.integers(0, 1 << 32, (WAVES, lanes, op.n), dtype=np.uint64).astype(np.uint32)
            if op.packed:
                return words.view(np.int32)
            return (words & 0xFFFF).astype(np.uint16).view(op.dtype)
        a = regs(spec.a)
        b = regs(spec.b)
        if spec.c_type == "f32":
            c = (rng.standard_normal((WAVES, lanes, spec.c.n)) * 10.0 ** rng.integers(-40, 30, (WAVES, lanes, spec.c.n))).astype(np.float32)
        elif spec.c_type == "i32":
            c = rng.integers(-(2**31), 2**31, (WAVES, lanes, spec.c.n)).astype(np.int32)
        else:
            c = (rng.integers(0, 1 << 16, (WAVES, lanes, spec.c.n)).astype(np.uint16)).view(spec.c.dtype)
        idx = rng.integers(0, 1 << 32, (WAVES, lanes), dtype=np.uint64).astype(np.uint32).view(np.int32)
        if spec.integer:
            mods = ["exact"] + (["staged_clamp"] if spec.signed_choice else [])
        else:
            mods = ["exact", "fma_chain"] + (["cdna3"] if spec.c_type == "f32" else [])
            if spec.arch == "gfx12" and jwmma.models.PRESETS["gfx12_dot4"][0].check(
                jwmma.models.Context(spec.a_format, spec.b_format, spec.c_format)
            ) is None:
                mods.append("gfx12_dot4")
        for model in mods:
            yield name, model, (a, b, c, idx)


def run_case(name, model, ops):
    spec = jwmma.BUILTINS[name]
    a, b, c, idx = ops
    fn = getattr(jwmma, name)
    d = fn(*hip_args(spec.convention, a, b, c, idx, a_signed=True, b_signed=False, clamp=True, abid=1), model=model)
    d = np.asarray(d)
    return d.view(np.uint32 if d.itemsize == 4 else np.uint16)


def nan_mask(name, bits):
    spec = jwmma.BUILTINS[name]
    if spec.c_type == "i32":
        return np.zeros(bits.shape, bool)
    v = bits.view(np.float32 if bits.itemsize == 4 else np.float16)
    if spec.c_type == "bf16":
        return ((bits & 0x7F80) == 0x7F80) & ((bits & 0x7F) != 0)
    return np.isnan(v)


def main(argv=None):
    ap = argparse.ArgumentParser()
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--save")
    g.add_argument("--compare")
    ap.add_argument("--parts", default="builtins,gemm", help="comma list of: builtins, gemm")
    ap.add_argument("--backend", default="auto", help="backend of the gemm part: auto, xla, pallas")
    args = ap.parse_args(argv)
    parts = set(args.parts.split(","))
    print(f"# backend {jax.default_backend()} {jax.devices()[0].device_kind}; gemm part: {args.backend}", flush=True)
    out = {}
    if "builtins" in parts:
        for i, (name, model, ops) in enumerate(cases()):
            out[f"{name}|{model}"] = run_case(name, model, ops)
            if args.save and i % 10 == 9:  # what is done survives a time limit
                np.savez(args.save, **out)
                print(f"{i + 1} builtin/model results saved", flush=True)
    if "gemm" in parts:
        for key, bits in gemm_cases(args.backend):
            out[key] = bits
            print(f"{key}: done", flush=True)
    if args.save:
        np.savez_compressed(args.save, **out)
        print(f"saved {len(out)} results to {args.save}")
        return 0
    ref = np.load(args.compare)
    bad = 0
    for key, bits in out.items():
        if key not in ref:
            print(f"{key}: not in reference")
            continue
        r = ref[key]
        name = key.split("|")[1 if key.startswith("gemm|") else 0]
        same = (bits == r) | (nan_mask(name, bits) & nan_mask(name, r))
        if not same.all():
            bad += 1
            print(f"{key}: {int((~same).sum())} of {same.size} differ")
    print(f"{len(out) - bad} of {len(out)} builtin/model results bit-identical to the reference")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
