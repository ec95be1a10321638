"""Sweeps over shapes: programs compiled and CPU seconds for ten GEMM shapes of one unit
(issue 35, goal 5; `jwmma.tiled.buckets`).

    python benchmarks/bench_shapes.py                 # Options(shape_buckets=True)
    python benchmarks/bench_shapes.py --own-shapes    # the default, shape_buckets=False: one program per shape

Three sweeps over the same ten random shapes (M, N in 64..512, K a multiple of 4 in 512..4096 (the user's `prune_2_4` needs one), seed 0), each in
a fresh process after a JAX warm-up: ``gemm`` (``jwmma.gemm`` of fp8 cdna3 with ``prune=True`` on
numpy operands), ``gemm+user`` (the same after the user's own `jwmma.prune_2_4` and
`jwmma.compress_2_4` on each A, as issue 35 counted them), ``unit`` (``jwmma.dot_general``
through ``Unit('smfmac_f32_16x16x128_fp8_fp8', scaling='row')`` on float32 data). A program is
one XLA backend compile (JAX's ``/jax/core/compile/backend_compile_duration`` event); CPU
seconds are the process's (every thread), per call: the first, and the other nine's sum.
"""
from __future__ import annotations

import argparse
import json
import subprocess

from children import child_command  # this folder's: the child imports the jwmma this process would

_CHILD = r'''
import json, sys, time
import numpy as np, jax, jax.numpy as jnp
from jax import monitoring
jax.block_until_ready(jax.jit(lambda x: x * 2 + 1)(jnp.ones(8)))   # JAX's own warm-up
import ml_dtypes, jwmma
sweep, own = sys.argv[1], sys.argv[2] == "1"
n = {"c": 0}
monitoring.register_event_duration_secs_listener(
    lambda e, d, **k: n.__setitem__("c", n["c"] + (e == "/jax/core/compile/backend_compile_duration")))
rng = np.random.default_rng(0)
shapes = [(int(rng.integers(64, 513)), 4 * int(rng.integers(128, 1025)), int(rng.integers(64, 513))) for _ in range(10)]
opts = jwmma.Options(shape_buckets=not own)
unit = jwmma.Unit("smfmac_f32_16x16x128_fp8_fp8", scaling="row", options=opts)
out = []
for m, k, nn in shapes:
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((k, nn)).astype(np.float32)
    c0, t0 = n["c"], time.process_time()
    if sweep == "unit":
        d = jwmma.dot_general(x, w, (((1,), (0,)), ((), ())), unit=unit)
    else:
        a = jwmma.numerics.cast(x, ml_dtypes.float8_e4m3fn)
        b = jwmma.numerics.cast(w, ml_dtypes.float8_e4m3fn)
        if sweep == "gemm+user":
            a = jwmma.compress_2_4(jwmma.prune_2_4(a))
            d = jwmma.gemm(a, b, options=opts)
        else:
            d = jwmma.gemm(a, b, prune=True, options=opts)
    jax.block_until_ready(d)
    out.append(dict(shape=(m, k, nn), programs=n["c"] - c0, cpu_s=round(time.process_time() - t0, 3)))
print(json.dumps(out))
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--own-shapes", action="store_true", help="Options(shape_buckets=False)")
    ap.add_argument("--sweeps", nargs="+", default=["gemm", "gemm+user", "unit"], choices=["gemm", "gemm+user", "unit"])
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    results = {}
    for sweep in args.sweeps:
        run = subprocess.run(child_command(_CHILD, sweep, "1" if args.own_shapes else "0"),
                             capture_output=True, text=True, check=True)
        rows = json.loads(run.stdout.strip().splitlines()[-1])
        results[sweep] = rows
        total = sum(r["programs"] for r in rows)
        rest = sum(r["cpu_s"] for r in rows[1:])
        print(f"{sweep:10s} programs {total:3d}   first call {rows[0]['cpu_s']:.2f} CPU s   nine others "
              f"{rest:.2f} CPU s   ({'own shapes' if args.own_shapes else 'buckets'})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
