"""Single builtin calls over many waves with device-resident registers (RESULTS.md "Final H200 run").

    python benchmarks/bench_calls.py --waves 65536 --rows fp8:cdna3 fp8:exact f16:gfx12_dot4
    python benchmarks/bench_calls.py --waves 65536 --backend pallas     # each wave on the Pallas kernels

Rate = emulated multiply-adds = compressed products (waves x M x N x K/2) per second, the
unit of benchmarks/RESULTS.md;
the registers are placed on the device first, so host transfers are not timed; ``first_s`` is
the first call (trace, compile and run). ``--mmasim``
also times MMA-Sim in the same run on the CDNA3-datapath rows (`rows.mmasim_rate`: its
per-product rate on 16 rows of a 256-column GEMM of depth 2048) and prints the ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rows import BUILTIN, mmasim_rate, timed  # noqa: E402  (this folder: the shared rows and timer)

import jwmma  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", nargs="+", default=["fp8:cdna3", "fp8:exact", "f16:gfx12_dot4"])
    ap.add_argument("--waves", type=int, default=65536)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--mmasim", action="store_true", help="also time MMA-Sim on the cdna3 rows (CPU, about a minute each)")
    ap.add_argument("--backend", choices=("auto", "xla", "pallas"), default=None,
                    help="the calls' backend (default: the options' own, 'auto'); 'pallas' runs each wave's "
                         "instruction on the family's kernel (jwmma.backends.pallas.call_kernel)")
    args = ap.parse_args()
    print("#", jax.devices()[0].device_kind, jax.__version__, "waves", args.waves)
    for row in args.rows:
        fmt, model = row.split(":")
        name = BUILTIN[fmt]
        spec = jwmma.BUILTINS[name]
        ka, kb, kc = jax.random.split(jax.random.PRNGKey(0), 3)
        a = jax.random.normal(ka, (args.waves, spec.m, spec.k), jnp.float32).astype(spec.a_format.dtype)
        b = jax.random.normal(kb, (args.waves, spec.k, spec.n), jnp.float32).astype(spec.b_format.dtype)
        c = jax.random.normal(kc, (args.waves, spec.m, spec.n), jnp.float32)
        values, pos = jwmma.compress_2_4(jwmma.prune_2_4(a))
        regs = jax.block_until_ready([jax.device_put(r) for r in (
            jwmma.pack_a(name, values), jwmma.pack_b(name, b), jwmma.pack_c(name, c), jwmma.pack_index(name, pos))])
        fn = getattr(jwmma, name)
        kw = {} if args.backend is None else {"backend": args.backend}
        t = timed(lambda: fn(*regs, model=model, **kw), args.repeat)
        sec = t.median
        macs = args.waves * spec.m * spec.n * spec.kc
        out = dict(row=row, builtin=name, backend=args.backend or "auto", seconds=sec, mac_per_s=macs / sec,
                   first_s=round(t.first, 3))  # trace, compile and run of the first call (issue 35)
        if args.mmasim:
            rate = mmasim_rate(name, model, 256, 2048)
            out.update(mmasim_mac_per_s=rate, speedup_vs_mmasim=None if rate is None else macs / sec / rate)
        print(json.dumps(out))


if __name__ == "__main__":
    main()
