"""The Pallas backend's speed at scale (RESULTS.md "Pallas backend, one H200"), one table in one run, with its bits checked.

    python benchmarks/bench_pallas.py --out DIR              # on a GPU: the table (~2-3 min)
    python benchmarks/bench_pallas.py --out DIR --sweep      # + tilings/variants at 4096x4096x8192
    python benchmarks/bench_pallas.py --check DIR            # on the CPU: the GPU's sampled blocks

Each row times `jwmma.backends.pallas.matrix_path` (operand-word and summary pre-passes
included) on M = N = K = 8192 (``--size``) tile-padded codes of realistic random values with an
adversarial corner (`jwmma.backends.pallas.testdata`), beside `jnp.dot(f32, HIGHEST)` of the
same shape in the same run: one warm-up call (compile), then the median of ``--reps`` calls,
each ended by `block_until_ready`. MAC = emulated multiply-add: M*N*K/2 for a sparse
builtin (compressed A), M*N*K for a dense one (RDNA4 WMMA rows). Two
blocks of every D (the corner tile, rows/cols 0..31/0..63, and an interior one) go to
``DIR/samples.npz``; ``--check DIR`` rebuilds the same operands on the CPU and compares
those blocks with the XLA path's bits (an output depends only on its row of A and column of B).
The rows (builtin, model), the baseline and the timer are `rows.py`'s (this folder); the
operands are the Pallas backend's own test codes.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from rows import ROWS, macs, native_dot, timed  # noqa: E402  (this folder: the shared rows)

import jwmma  # noqa: E402
from jwmma.backends import pallas  # noqa: E402
from jwmma.backends.pallas.testdata import gemm_codes  # noqa: E402
from jwmma.engine.options import Options, PallasOptions, resolve  # noqa: E402
from jwmma.engine.step import context  # noqa: E402
from jwmma.numerics.rounding import x64_scope  # noqa: E402
from jwmma.tiled import paths  # noqa: E402

#: the table's rows: labels of `rows.ROWS`, each under its builtin's Pallas tiling (PallasOptions())
TABLE = ["fp8_cdna3", "f16_cdna3", "f16_gfx12", "fp8_gfx12", "fp8_exact", "fp8_fma_chain_k",
         "fp8_fma_chain",  # rocjitsu: register order, NaN words
         "f16_wmma_gfx12", "bf16_wmma_gfx12"]  # dense RDNA4 WMMA
#: --sweep: cheaper variants toward 1e12 for cdna3 / gfx12 (same bits; bit-tested on the CPU):
#: (label, row of `rows.ROWS`, PallasOptions fields)
SWEEP = [
    ("fp8_cdna3_16x64_int", "fp8_cdna3", dict(tm=16, float_combine=False)),
    ("fp8_cdna3_8x128", "fp8_cdna3", dict(tm=8, tn=128)),
    ("fp8_cdna3_8x32_w2", "fp8_cdna3", dict(tm=8, tn=32, num_warps=2)),
    ("fp8_cdna3_8x64_w2", "fp8_cdna3", dict(tm=8, tn=64, num_warps=2)),
    ("f16_cdna3_16x64_int", "f16_cdna3", dict(tm=16, float_combine=False)),
    ("f16_cdna3_8x128", "f16_cdna3", dict(tm=8, tn=128)),
    ("f16_gfx12_int", "f16_gfx12", dict(float_round=False)),
    ("f16_gfx12_16x64", "f16_gfx12", dict(tm=16)),
    ("f16_gfx12_32x32_w2", "f16_gfx12", dict(tn=32, num_warps=2)),
    ("f16_gfx12_16x128", "f16_gfx12", dict(tm=16, tn=128)),
]
BLOCKS = ((0, 0), (4096, 4096))  # corners of the sampled (32 x 64) blocks (scaled into the size)


def _model(spec, name):
    return jwmma.models.resolve(name, context(spec), spec.default_model)


def _blocks(size):
    return [(min(r, size - 32), min(c, size - 64)) for r, c in BLOCKS]


SAMPLES: dict = {}


def bench_row(label, builtin, model, kw, m, n, k, reps, out_dir):
    spec = jwmma.BUILTINS[builtin]
    m_obj = _model(spec, model)
    opts = resolve(Options(backend="pallas", pallas=PallasOptions(**kw)))
    t = pallas.tiling(spec, m_obj, opts.pallas)
    a, p, b, c = (jnp.asarray(x) for x in gemm_codes(spec, m, n, k, seed=11))
    fn = jax.jit(lambda a, p, b, c: pallas.matrix_path(a, p, b, c, spec=spec, model=m_obj, options=opts))
    with x64_scope():
        first, med, d = timed(lambda: fn(a, p, b, c), reps)
    d = np.asarray(d)
    if out_dir:  # one small uncompressed file, rewritten after every row
        SAMPLES.update({f"{label}|r{r}_c{cc}": d[r:r + 32, cc:cc + 64] for r, cc in _blocks(m)})
        np.savez(os.path.join(out_dir, "samples.npz"), **SAMPLES)
    return dict(label=label, builtin=builtin, model=model, options=kw, m=m, n=n, k=k,
                tiling=f"{t.tm}x{t.tn} w{t.num_warps} s{t.num_stages}{' vec3' if t.vec3 else ''}",
                compile_s=round(first - med, 2), time_ms=round(med * 1e3, 2),
                mac_per_s=macs(spec, m, n, k) / med)


def bench_dot(m, n, k, reps):
    f, xy = native_dot("f32 HIGHEST", m, n, k)
    med = timed(lambda: f(*xy), reps).median
    return dict(label="jnp.dot f32 HIGHEST", m=m, n=n, k=k, time_ms=round(med * 1e3, 2), mac_per_s=m * n * k / med)


def check(out_dir):
    """Recompute the sampled blocks on the CPU with the XLA path; print mismatches."""
    res = json.load(open(os.path.join(out_dir, "results.json")))
    xla = resolve(Options(backend="xla"))
    bad_total = 0
    samples = np.load(os.path.join(out_dir, "samples.npz"))
    for row in res["rows"]:
        if "builtin" not in row or f"{row['label']}|r0_c0" not in samples:
            print(f"{row['label']}: no samples")
            continue
        spec = jwmma.BUILTINS[row["builtin"]]
        m_obj = _model(spec, row["model"])
        a, p, b, c = gemm_codes(spec, row["m"], row["n"], row["k"], seed=11)
        for r, cc in _blocks(row["m"]):
            with x64_scope():
                ref = np.asarray(paths.matrix_path(
                    jnp.asarray(a[r:r + 32]), jnp.asarray(p[r:r + 32]), jnp.asarray(b[:, cc:cc + 64]),
                    jnp.asarray(c[r:r + 32, cc:cc + 64]), spec=spec, model=m_obj, options=xla, a_signed=True,
                    b_signed=True, clamp=False))
            bad = int((ref.astype(np.uint32) != samples[f"{row['label']}|r{r}_c{cc}"].astype(np.uint32)).sum())
            bad_total += bad
            print(f"{row['label']} block ({r}, {cc}): {bad} of {ref.size} differ from the CPU", flush=True)
    print(f"total mismatches: {bad_total}")
    return 1 if bad_total else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="folder for results.json and the sampled blocks")
    ap.add_argument("--check", help="on the CPU: compare a GPU run's sampled blocks")
    ap.add_argument("--size", type=int, default=8192, help="M = N = K")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rows", help="comma list of row labels (default: all)")
    ap.add_argument("--sweep", action="store_true", help="also the SWEEP variants at (size/2, size/2, size)")
    ap.add_argument("--budget", type=float, default=1e9, help="seconds: skip rows once past this")
    args = ap.parse_args(argv)
    if args.check:
        return check(args.check)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    t_start = time.time()
    dev = jax.devices()[0]
    head = dict(device=f"{dev.platform} {dev.device_kind}", jax=jax.__version__, size=args.size, reps=args.reps,
                load=open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else None)
    print("#", head, flush=True)
    s = args.size
    rows = [bench_dot(s, s, s, args.reps)]
    print(rows[-1], flush=True)
    todo = [(label, label, {}) for label in TABLE if not args.rows or label in args.rows.split(",")]
    todo = [(r, (s, s, s)) for r in todo] + ([(r, (s // 2, s // 2, s)) for r in SWEEP] if args.sweep else [])
    for (label, row, kw), (m, n, k) in todo:
        builtin, model = ROWS[row].builtin, ROWS[row].model_name
        if time.time() - t_start > args.budget:
            print(f"{label}: skipped (budget)", flush=True)
            continue
        try:
            rows.append(bench_row(label, builtin, model, kw, m, n, k, args.reps, args.out))
        except Exception as e:  # noqa: BLE001 - a failed row is reported, the table goes on
            rows.append(dict(label=label, builtin=builtin, model=model, options=kw, error=f"{type(e).__name__}: {e}"[:800]))
        print({k_: v for k_, v in rows[-1].items()}, flush=True)
        if args.out:
            json.dump(dict(head, rows=rows), open(os.path.join(args.out, "results.json"), "w"), indent=1, default=str)
    dot = rows[0]["time_ms"]
    print(f"\n{'row':22} {'tiling':22} {'M x N x K':18} {'ms':>9} {'MAC/s':>9} {'x dot':>6} {'compile':>7}")
    for r in rows:
        if "error" in r:
            print(f"{r['label']:22} ERROR {r['error'][:200]}")
            continue
        print(f"{r['label']:22} {r.get('tiling', ''):22} {r['m']}x{r['n']}x{r['k']:<8} {r['time_ms']:9.2f} "
              f"{r['mac_per_s']:9.2e} {r['time_ms'] / dot * (s**3 / (r['m'] * r['n'] * r['k'])):6.1f} "
              f"{r.get('compile_s', ''):>7}")
    print(f"total {time.time() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
