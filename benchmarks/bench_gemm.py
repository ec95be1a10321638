"""GEMM emulation throughput, side by side in one run on one device.

For each configuration: jwmma.gemm on the matrix and register paths, native `jnp.dot`
(float32, precision=HIGHEST) of the same dense shape, and MMA-Sim where it finishes (CPU,
when installed). Throughput counts emulated multiply-adds = compressed products
= M * N * K / 2. Times are the median of --repeat runs after one compiling run.

    python benchmarks/bench_gemm.py --sizes 1024 --k 2048 --configs fp8:cdna3 f16:gfx12_dot4
    python benchmarks/bench_gemm.py --sizes 8192 --options tile_n=16,group_dots=0    # execution choices

``--options`` takes `jwmma.Options` fields (ints, 0/1 for booleans); the bits never change.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys

import jax

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rows  # noqa: E402  (this folder: the shared rows, their operands, the native dot and the timer)
from rows import BUILTIN  # noqa: E402, F401  (format name -> builtin)

import jwmma  # noqa: E402


def timed(fn, repeat):
    """Median seconds of ``repeat`` calls of ``fn`` after a compiling one (`rows.timed`)."""
    return rows.timed(fn, repeat).median


def operands(builtin, m, n, k, seed):
    """``((values, positions), b)`` on the device: `rows.operands`' compressed A (m, k) and B
    (k, n) of ``builtin`` (standard normal values rounded into its formats)."""
    a, b, _, _ = rows.operands(builtin, m, n, k, seed=seed)
    return jax.device_put(a), jax.device_put(b)


def parse_options(text):
    """'tile_n=16,group_dots=0' -> jwmma.Options(tile_n=16, group_dots=False) (None: no text)."""
    if not text:
        return None
    fields = {}
    for part in text.split(","):
        key, _, value = part.partition("=")
        key = key.strip()
        if key in ("group_dots", "float_alignment"):
            fields[key] = value.strip() not in ("0", "false", "False")
        elif key in ("backend", "platform"):
            fields[key] = value.strip()
        else:
            fields[key] = int(value)
    return jwmma.Options(**fields)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[512], help="M = N values")
    ap.add_argument("--k", type=int, default=None, help="dense K (default: 2*M)")
    ap.add_argument("--configs", nargs="+", default=["fp8:cdna3", "f16:gfx12_dot4"], help="format:model")
    ap.add_argument("--paths", nargs="+", default=["matrix", "registers"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--mmasim", action="store_true", help="also time MMA-Sim (CPU, slow)")
    ap.add_argument("--json", default=None, help="write the rows as JSON here")
    ap.add_argument("--options", default=None, help="jwmma.Options fields, e.g. tile_n=16,group_dots=0")
    args = ap.parse_args(argv)
    gemm_kw = {} if args.options is None else {"options": parse_options(args.options)}

    dev = jax.devices()[0]
    print(f"# device: {dev.platform} {dev.device_kind}; jax {jax.__version__}; {platform.processor() or platform.machine()}; "
          f"cpus {os.cpu_count()}", flush=True)
    table = []
    for size in args.sizes:
        m = n = size
        k = args.k or 2 * size
        dot, xy = rows.native_dot("f32 HIGHEST", m, n, k)
        t_dot = timed(lambda: dot(*xy), args.repeat)
        for cfg in args.configs:
            fmt, model = cfg.split(":")
            builtin = BUILTIN[fmt]
            a, b = operands(builtin, m, n, k, 0)
            for path in args.paths:
                t = timed(lambda: jwmma.gemm(a, b, builtin=builtin, model=model, path=path, **gemm_kw), args.repeat)
                macs = m * n * k / 2
                row = dict(builtin=builtin, model=model, path=path, m=m, n=n, k=k, seconds=t,
                           macs_per_s=macs / t, dot_seconds=t_dot, slowdown_vs_dot=t / t_dot)
                if args.mmasim and path == "matrix":
                    r = rows.mmasim_rate(builtin, model, n, k)
                    row["mmasim_macs_per_s"] = r
                    row["speedup_vs_mmasim"] = None if r is None else (macs / t) / r
                table.append(row)
                extra = ""
                if row.get("mmasim_macs_per_s"):
                    extra = f"  mmasim {row['mmasim_macs_per_s']:.3e}/s  x{row['speedup_vs_mmasim']:.0f}"
                print(f"{builtin:32s} {model:11s} {path:9s} M=N={m} K={k}: {t:8.3f} s  {macs / t:.3e} MAC/s  "
                      f"jnp.dot {t_dot * 1e3:.2f} ms (x{t / t_dot:.0f}){extra}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=f"{dev.platform} {dev.device_kind}", jax=jax.__version__, rows=table), f, indent=1)
    return table


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
