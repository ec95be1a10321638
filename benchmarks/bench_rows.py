"""Every default row at scale through `jwmma.gemm` on the default backend, beside native dots
in the same run (RESULTS.md "Default rows at 8192^3").

    python benchmarks/bench_rows.py --size 8192 --json out.json      # on a GPU (a few minutes)
    python benchmarks/bench_rows.py --size 512 --rows fp8_cdna3 int8_cdna4   # anywhere, small

Each row emulates D = A x B + C for M = N = K = ``--size`` with ``jwmma.gemm`` exactly as a user
calls it (``backend='auto'``, or the row's options): operands of realistic random values placed
on the device first (A sparse rows: the compressed (values, positions) pair), one first call
(trace, compile and run: the "first call" column), then the median of ``--reps`` calls, each
ended by `block_until_ready`. MAC = emulated multiply-adds: M*N*K/2 for a sparse builtin
(compressed A), M*N*K for a dense one. The baselines (`jnp.dot` f32 HIGHEST, bf16 -> f32, int8 ->
int32) are timed on the same shape in the same run; the "x dot" column divides a row's time by
the f32 HIGHEST dot's.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

import jwmma

#: label -> (builtin, model, gemm keywords)
ROWS = {
    "fp8_cdna3": ("smfmac_f32_16x16x128_fp8_fp8", None, {}),
    "bf8fp8_cdna3_942": ("smfmac_f32_16x16x64_bf8_fp8", None, {}),
    "f16_cdna3": ("smfmac_f32_16x16x64_f16", None, {}),
    "bf16_cdna3": ("smfmac_f32_16x16x64_bf16", None, {}),
    "bf16_gfx12": ("swmmac_f32_16x16x32_bf16_w32", None, {}),
    "fp8_gfx12": ("swmmac_f32_16x16x32_fp8_fp8_w32", None, {}),
    "f16acc_gfx12": ("swmmac_f16_16x16x32_f16_w32", None, {}),
    "f16_wmma": ("wmma_f32_16x16x16_f16_w32_gfx12", None, {}),
    "int8_cdna4": ("smfmac_i32_16x16x128_i8", None, {}),
    "iu8_staged": ("swmmac_i32_16x16x32_iu8_w32", None, {"clamp": True}),
    "fp8_exact": ("smfmac_f32_16x16x128_fp8_fp8", "exact", {}),
    "fp8_fma_chain": ("smfmac_f32_16x16x128_fp8_fp8", "fma_chain", {}),
    "fp8_cdna3_xla_dots": ("smfmac_f32_16x16x128_fp8_fp8", None, {"options": dict(backend="xla", group_dots=True)}),
    "mfma_fp8_cdna3": ("mfma_f32_16x16x32_fp8_fp8", None, {}),
    "mfma_f16_cdna3": ("mfma_f32_16x16x16f16", None, {}),
    "mfma_bf16_950": ("mfma_f32_32x32x16_bf16", None, {}),
    "mfma_int8_942": ("mfma_i32_16x16x32_i8", None, {}),
    "mxfp8_cdna4_mx": ("mfma_scale_f32_16x16x128_f8f6f4", None, {"formats": (0, 0)}),
    "mxfp4_cdna4_mx": ("mfma_scale_f32_16x16x128_f8f6f4", None, {"formats": (4, 4)}),
}
FMT = {0: ml_dtypes.float8_e4m3fn, 1: ml_dtypes.float8_e5m2, 2: ml_dtypes.float6_e2m3fn,
       3: ml_dtypes.float6_e3m2fn, 4: ml_dtypes.float4_e2m1fn}


def _time(fn, reps):
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    first = time.perf_counter() - t0
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        ts.append(time.perf_counter() - t0)
    return first, statistics.median(ts)


def operands(name, size, kw, seed=0):
    """(a, b, c, gemm keywords) on the device: random values of the row's formats."""
    spec = jwmma.BUILTINS[name]
    rng = np.random.default_rng(seed)
    kw = dict(kw)
    fmts = kw.pop("formats", None)
    if spec.integer:
        a = rng.integers(-128, 128, (size, size)).astype(np.int8)
        b = rng.integers(-128, 128, (size, size)).astype(np.int8) if spec.b_type != "iu8" else \
            rng.integers(0, 256, (size, size)).astype(np.uint8)
        c = rng.integers(-2**20, 2**20, (size, size)).astype(np.int32)
    elif spec.scaled:
        a = np.asarray(jwmma.numerics.cast(rng.standard_normal((size, size)), FMT[fmts[0]])).view(np.uint8)
        b = np.asarray(jwmma.numerics.cast(rng.standard_normal((size, size)), FMT[fmts[1]])).view(np.uint8)
        c = rng.standard_normal((size, size)).astype(np.float32)
        kw.update(fmt_a=fmts[0], fmt_b=fmts[1], scale_a=rng.integers(120, 135, (size, size // 32)).astype(np.uint8),
                  scale_b=rng.integers(120, 135, (size // 32, size)).astype(np.uint8))
    else:
        a = np.asarray(jwmma.numerics.cast(rng.standard_normal((size, size)), spec.a_format.dtype))
        b = np.asarray(jwmma.numerics.cast(rng.standard_normal((size, size)), spec.b_format.dtype))
        c = rng.standard_normal((size, size)).astype(np.float32) if spec.c_type == "f32" else \
            np.asarray(jwmma.numerics.cast(rng.standard_normal((size, size)), spec.c_format.dtype))
    if "options" in kw:
        kw["options"] = jwmma.Options(**kw["options"])
    if not spec.dense:
        a = jwmma.compress_2_4(jwmma.prune_2_4(a))
    a = jax.tree_util.tree_map(jax.device_put, a)
    return a, jax.device_put(b), jax.device_put(c), kw


def bench_row(label, size, reps):
    name, model, kw = ROWS[label]
    spec = jwmma.BUILTINS[name]
    a, b, c, kw = operands(name, size, kw)
    fn = lambda: jwmma.gemm(a, b, c, builtin=name, model=model, **kw)  # noqa: E731
    first, med = _time(fn, reps)
    mac = size**3 if spec.dense else size**3 / 2
    return dict(label=label, builtin=name, model=model or spec.default_model, first_s=round(first, 2),
                time_ms=round(med * 1e3, 2), mac_per_s=mac / med)


def bench_dots(size, reps):
    rng = np.random.default_rng(0)
    out = {}
    for label, dt, pet in (("f32 HIGHEST", jnp.float32, jnp.float32), ("bf16->f32", jnp.bfloat16, jnp.float32),
                           ("int8->int32", jnp.int8, jnp.int32)):
        x = jnp.asarray(rng.standard_normal((size, size)) * (50 if dt == jnp.int8 else 1)).astype(dt)
        y = jnp.asarray(rng.standard_normal((size, size)) * (50 if dt == jnp.int8 else 1)).astype(dt)
        f = jax.jit(lambda x, y: jnp.dot(x, y, precision=jax.lax.Precision.HIGHEST, preferred_element_type=pet))
        _, med = _time(lambda: f(x, y), reps)
        out[label] = dict(label=f"jnp.dot {label}", time_ms=round(med * 1e3, 2), mac_per_s=size**3 / med)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    ap.add_argument("--json", default=None, help="also write the rows here")
    args = ap.parse_args()
    dev = jax.devices()[0]
    print(f"# {dev.device_kind} ({dev.platform}), JAX {jax.__version__}, M = N = K = {args.size}", flush=True)
    dots = bench_dots(args.size, args.reps)
    base = dots["f32 HIGHEST"]["time_ms"]
    rows = list(dots.values())
    for r in rows:
        print(f"{r['label']:28s} {r['mac_per_s']:9.3g} MAC/s  {r['time_ms']:9.2f} ms", flush=True)
    for label in args.rows:
        try:
            r = bench_row(label, args.size, args.reps)
        except Exception as e:  # noqa: BLE001 (a row that fails is reported, the table goes on)
            r = dict(label=label, error=f"{type(e).__name__}: {str(e)[:200]}")
            print(f"{label:28s} ERROR {r['error']}", flush=True)
            rows.append(r)
            continue
        r["x_dot"] = round(r["time_ms"] / base, 1)
        rows.append(r)
        print(f"{label:28s} {r['mac_per_s']:9.3g} MAC/s  {r['time_ms']:9.2f} ms  x{r['x_dot']:<6}  first {r['first_s']} s"
              f"  ({r['builtin']}, {r['model']})", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=dev.device_kind, jax=jax.__version__, size=args.size, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
