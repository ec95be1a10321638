"""Compile time of representative programs under sets of XLA compile options, and whether the
bits stay the same (what `jwmma.engine.effort` may use for 'fast').

    python benchmarks/bench_compile_options.py                       # this machine's default device
    python benchmarks/bench_compile_options.py --sets gpu --rows gemm_fp8 waves_bf16

Each row is one program as a user's call builds it (a `jwmma.gemm` of a small odd shape, a
builtin call over --waves waves, or a `jwmma.matmul` layer: ``--rows matmul_fp8``), lowered
once and then compiled under each option set (options XLA does not know are reported and
skipped); the program runs once per set on random bit patterns (NaN/Inf included) and its bits
are compared with the first set's (XLA's defaults). Times are process CPU seconds and wall seconds of the compile alone, and the
median wall time of three runs.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import jax
import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rows import ROWS as SHARED  # noqa: E402  (this folder: the shared rows and their operands)
from rows import operands, registers  # noqa: E402

import jwmma  # noqa: E402
from jwmma.numerics.rounding import x64_scope  # noqa: E402

SETS = {
    "cpu": {
        "default": {},
        "O0": {"xla_backend_optimization_level": 0},
        "O1": {"xla_backend_optimization_level": 1},
        # XLA:CPU's loop emitters instead of its MLIR fusion emitters (JAX 0.10; JAX 0.11 refuses it)
        "O0_loop_emitters": {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False},
    },
    "gpu": {
        "default": {},
        "autotune0": {"xla_gpu_autotune_level": 0},
        "O0": {"xla_backend_optimization_level": 0},
        "ptxO0": {"xla_gpu_disable_gpuasm_optimizations": True},
        "cheap_llvm": {"xla_llvm_disable_expensive_passes": True},
        "no_triton_gemm": {"xla_gpu_enable_triton_gemm": False},
        "fast_all": {"xla_gpu_autotune_level": 0, "xla_backend_optimization_level": 0,
                     "xla_gpu_disable_gpuasm_optimizations": True, "xla_llvm_disable_expensive_passes": True},
        "autotune0_ptxO0": {"xla_gpu_autotune_level": 0, "xla_gpu_disable_gpuasm_optimizations": True},
    },
}

#: label -> (row of `rows.ROWS`, backend); gemm rows run jwmma.gemm, waves rows the builtin
ROWS = {
    "gemm_fp8": ("fp8_cdna3", "xla"),
    "gemm_fp8_pallas": ("fp8_cdna3", "pallas"),
    "gemm_bf16": ("bf16_cdna3", "xla"),
    "gemm_exact": ("fp8_exact", "xla"),
    "gemm_mfma_fp8": ("mfma_fp8_cdna3", "xla"),
    "gemm_mx": ("mxfp8_mxfp4_cdna4_mx", "xla"),
    "gemm_gfx12_f16": ("f16_gfx12", "xla"),
    "gemm_i8": ("int8_cdna4", "xla"),
    "waves_fp8": ("fp8_cdna3", "auto"),
    "waves_bf16": ("bf16_cdna3", "auto"),
    "waves_exact": ("fp8_exact", "auto"),
}
#: label -> jwmma.matmul keywords: a layer's whole program (quantisation, pruning, the GEMM and
#: the rescale) on x (256, 512) @ w (512, 256) of normal values, as a new shape compiles it
MATMULS = {
    "matmul_mfma_fp8": dict(builtin="mfma_f32_16x16x32_fp8_fp8"),
    "matmul_fp8": dict(builtin="smfmac_f32_16x16x128_fp8_fp8"),
    "matmul_mx": dict(builtin="mfma_scale_f32_16x16x128_f8f6f4", scaling="mx", formats=("fp4", "fp8")),
}


def program(label, waves, seed=0, size=None, effort="full"):
    """(jitted function of arrays, its arguments) for one row (gemm rows: M = N = K = ``size``
    when given, else a small odd shape), on random bit patterns (`rows.operands`,
    `rows.registers`: ``kind="bits"``), built at compile ``effort`` ('fast': the looped programs)."""
    if label in MATMULS:
        rng = np.random.default_rng(seed)
        x, w = (rng.standard_normal(shape).astype(np.float32) for shape in ((256, 512), (512, 256)))
        return jax.jit(lambda x, w: jwmma.matmul(x, w, **MATMULS[label])), (x, w)
    row_label, backend = ROWS[label]
    row = SHARED[row_label]
    name, model, spec = row.builtin, row.model, row.spec
    opts = jwmma.Options(backend=backend, compile_effort=effort)
    if label.startswith("gemm"):
        m, n, k = (size, size, size) if size else (2 * spec.m - 3, 2 * spec.n - 5, 3 * spec.k + 2 * 4 * 4)
        a, b, c, extra = operands(row, m, n, k, seed=seed, kind="bits")
        fn = lambda a, b, c: jwmma.gemm(a, b, c, builtin=name, model=model, options=opts, **extra)  # noqa: E731
        return jax.jit(fn), (a, b, c)
    fn = getattr(jwmma, name)
    return jax.jit(lambda a, b, c, i: fn(a, b, c, i, model=model, options=opts)), \
        registers(row, waves, seed=seed, kind="bits")


def bits(x):
    x = np.asarray(x)
    return x.view(f"u{x.dtype.itemsize}")


def same(x, y):
    bx, by = bits(x), bits(y)
    if np.asarray(x).dtype.kind == "f" or np.asarray(x).dtype == ml_dtypes.bfloat16:
        nan = np.isnan(np.asarray(x, np.float32)) & np.isnan(np.asarray(y, np.float32))
        return int(((bx == by) | nan).sum()), int(bx.size)
    return int((bx == by).sum()), int(bx.size)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS) + list(MATMULS))
    ap.add_argument("--sets", default=None, help="cpu or gpu (default: this machine's platform)")
    ap.add_argument("--waves", type=int, default=64)
    ap.add_argument("--size", type=int, default=None, help="gemm rows: M = N = K (default: a small odd shape)")
    ap.add_argument("--only-sets", nargs="+", default=None, help="these option sets only (default: all)")
    ap.add_argument("--effort", default="full", choices=("fast", "full"),
                    help="the programs' compile effort ('fast': the looped programs a first call builds)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    platform = jax.default_backend()
    sets = SETS[args.sets or ("gpu" if platform == "gpu" else "cpu")]
    if args.only_sets:
        sets = {k: v for k, v in sets.items() if k in args.only_sets}
    print(f"# {jax.devices()[0].device_kind} ({platform}), JAX {jax.__version__}", flush=True)
    out = []
    for label in args.rows:
        try:
            fn, xs = program(label, args.waves, size=args.size, effort=args.effort)
            xs = jax.device_put(xs)
            with x64_scope():
                t = time.process_time()
                lowered = fn.lower(*xs)
                lower_s = time.process_time() - t
        except Exception as e:  # noqa: BLE001 - a row that cannot build is reported
            print(json.dumps(dict(row=label, error=f"{type(e).__name__}: {str(e)[:200]}")), flush=True)
            continue
        ref = None
        for set_name, options in sets.items():
            r = dict(row=label, set=set_name, trace_lower_cpu_s=round(lower_s, 3))
            try:
                t, tw = time.process_time(), time.perf_counter()
                compiled = lowered.compile(options) if options else lowered.compile()
                r.update(compile_cpu_s=round(time.process_time() - t, 3), compile_wall_s=round(time.perf_counter() - tw, 3))
                res = jax.block_until_ready(compiled(*xs))
                runs = []
                for _ in range(3):
                    tw = time.perf_counter()
                    jax.block_until_ready(compiled(*xs))
                    runs.append(time.perf_counter() - tw)
                r["run_ms"] = round(statistics.median(runs) * 1e3, 3)
                host = np.asarray(res)
                if ref is None:
                    ref = host
                r["identical"], r["outputs"] = same(host, ref)
            except Exception as e:  # noqa: BLE001 - an unknown option is reported
                r["error"] = f"{type(e).__name__}: {str(e)[:160]}"
            print(json.dumps(r), flush=True)
            out.append(r)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
