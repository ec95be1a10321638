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
the f32 HIGHEST dot's. The rows, their operands, the baselines and the timer are `rows.py`'s
(this folder), which the other benchmarks share.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import jax
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rows import NATIVE, ROWS, macs, native_dot, operands, timed  # noqa: E402  (this folder: the shared rows)

import jwmma  # noqa: E402

#: this table's rows (labels of `rows.ROWS`), in its order
TABLE = ["fp8_cdna3", "bf8fp8_cdna3_942", "f16_cdna3", "bf16_cdna3", "f16_gfx12", "bf16_gfx12", "fp8_gfx12",
         "f16acc_gfx12", "f16_wmma", "bf16_wmma_gfx12", "fp8_wmma_gfx12", "f16acc_wmma_gfx12", "int8_cdna4",
         "iu8_staged", "fp8_exact", "fp8_fma_chain", "fp8_cdna3_xla_dots", "mfma_fp8_cdna3", "mfma_f16_cdna3",
         "mfma_bf16_cdna3", "mfma_bf16_950", "mfma_int8_942", "mxfp8_cdna4_mx", "mxfp4_cdna4_mx"]
#: row -> the row it is measured against (issue 36's goals): a sparse row's dense twin (same
#: input formats, same chip family; goal <= 0.6 of its time) and the MX rows' fp8 MFMA (<= 1.5)
TWINS = {"fp8_cdna3": "mfma_fp8_cdna3", "f16_cdna3": "mfma_f16_cdna3", "bf16_cdna3": "mfma_bf16_cdna3",
         "f16_gfx12": "f16_wmma", "bf16_gfx12": "bf16_wmma_gfx12", "fp8_gfx12": "fp8_wmma_gfx12",
         "f16acc_gfx12": "f16acc_wmma_gfx12", "mxfp8_cdna4_mx": "mfma_fp8_cdna3", "mxfp4_cdna4_mx": "mfma_fp8_cdna3"}


def pallas_options(items) -> dict:
    """``--pallas name=value ...`` -> `jwmma.PallasOptions` fields (ints, true/false, or a
    word such as ``lowering=mosaic``)."""
    out = {}
    for item in items or ():
        name, _, value = item.partition("=")
        if not value:
            raise SystemExit(f"--pallas takes name=value items (PallasOptions fields), got {item!r}")
        out[name] = {"true": True, "false": False}.get(value.lower(), None)
        if out[name] is None:
            out[name] = int(value) if value.lstrip("-").isdigit() else value
    return out


def bench_row(label, size, reps, pallas=None, backend=None):
    row = ROWS[label]
    a, b, c, kw = operands(row, size, size, size)
    a, b, c = jax.device_put((a, b, c))
    kw = {k: jax.device_put(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}  # MX block scales
    if pallas:  # a kernel variant for every row (`--pallas`); rows without a kernel keep XLA
        kw["options"] = (kw.get("options") or jwmma.Options()).replace(pallas=jwmma.PallasOptions(**pallas))
    if backend:  # `--backend`: e.g. 'pallas' for rows that 'auto' runs on XLA (the integer rows)
        kw["options"] = (kw.get("options") or jwmma.Options()).replace(backend=backend)
    fn = lambda: jwmma.gemm(a, b, c, builtin=row.builtin, model=row.model, **kw)  # noqa: E731
    first, med, _ = timed(fn, reps)
    return dict(label=label, builtin=row.builtin, model=row.model_name, first_s=round(first, 2),
                time_ms=round(med * 1e3, 2), mac_per_s=macs(row.spec, size, size, size) / med)


def bench_dots(size, reps):
    rng = np.random.default_rng(0)
    out = {}
    for label in NATIVE:
        f, xy = native_dot(label, size, size, size, rng)
        med = timed(lambda: f(*xy), reps).median
        out[label] = dict(label=f"jnp.dot {label}", time_ms=round(med * 1e3, 2), mac_per_s=size**3 / med)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rows", nargs="+", default=TABLE, choices=list(ROWS))
    ap.add_argument("--json", default=None, help="also write the rows here")
    ap.add_argument("--pallas", nargs="*", metavar="NAME=VALUE",
                    help="jwmma.PallasOptions fields for every row, e.g. float_combine=true tm=8 tn=128 num_warps=4")
    ap.add_argument("--backend", choices=("auto", "xla", "pallas"), default=None,
                    help="Options.backend for every row (default: each row's own; 'pallas' raises for a row "
                         "without a kernel, reported as that row's error)")
    args = ap.parse_args()
    pallas = pallas_options(args.pallas)
    dev = jax.devices()[0]
    print(f"# {dev.device_kind} ({dev.platform}), JAX {jax.__version__}, M = N = K = {args.size}", flush=True)
    dots = bench_dots(args.size, args.reps)
    base = dots["f32 HIGHEST"]["time_ms"]
    rows = list(dots.values())
    for r in rows:
        print(f"{r['label']:28s} {r['mac_per_s']:9.3g} MAC/s  {r['time_ms']:9.2f} ms", flush=True)
    for label in args.rows:
        try:
            r = bench_row(label, args.size, args.reps, pallas, args.backend)
        except Exception as e:  # noqa: BLE001 (a row that fails is reported, the table goes on)
            r = dict(label=label, error=f"{type(e).__name__}: {str(e)[:200]}")
            print(f"{label:28s} ERROR {r['error']}", flush=True)
            rows.append(r)
            continue
        r["x_dot"] = round(r["time_ms"] / base, 1)
        rows.append(r)
        print(f"{label:28s} {r['mac_per_s']:9.3g} MAC/s  {r['time_ms']:9.2f} ms  x{r['x_dot']:<6}  first {r['first_s']} s"
              f"  ({r['builtin']}, {r['model']})", flush=True)
    times = {r["label"]: r["time_ms"] for r in rows if "time_ms" in r}
    ratios = {f"{r} / {t}": round(times[r] / times[t], 2) for r, t in TWINS.items() if r in times and t in times}
    if ratios:
        print("# time ratios: sparse / dense twin (goal <= 0.6), MX / fp8 MFMA (goal <= 1.5)", flush=True)
        for k, v in ratios.items():
            print(f"{k:44s} {v:6.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=dev.device_kind, jax=jax.__version__, size=args.size, rows=rows, ratios=ratios,
                           pallas=pallas, backend=args.backend), f, indent=1)


if __name__ == "__main__":
    main()
