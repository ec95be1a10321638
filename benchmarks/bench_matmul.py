"""A transformer-sized layer through jwmma.matmul, forward and backward, beside the native
float32 matmul in the same run on the same device.

The layer: y = x @ w with w (K, N) = 4096 x 4096 and x (tokens, K) with 8192 tokens (the
defaults). For each configuration (format:model) it times

* ``fwd``: jit(jwmma.matmul)(x, w) (quantise both operands, prune w 2:4, the emulated GEMM,
  rescale);
* ``fwd+bwd``: jit(value_and_grad) of sum(matmul(x, w) * g) w.r.t. x and w (a training step:
  the forward value and the straight-through backward pass, two float32 products, precision
  HIGHEST);

and the same two for ``jnp.dot(x, w, precision=HIGHEST)``. Times are medians of --repeat runs
after one compiling run. Emulated multiply-adds are tokens * K * N / 2 (2:4: half the products).

    python benchmarks/bench_matmul.py                                  # full size (one H200)
    python benchmarks/bench_matmul.py --tokens 1024 --k 1024 --n 1024  # a 2-core CPU
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rows import BUILTIN, timed  # noqa: E402  (this folder: the shared rows and timer)

import jwmma  # noqa: E402

HI = jax.lax.Precision.HIGHEST


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=8192, help="rows of x (8192)")
    ap.add_argument("--k", type=int, default=4096, help="input features = w's rows (4096)")
    ap.add_argument("--n", type=int, default=4096, help="output features = w's columns (4096)")
    ap.add_argument("--configs", nargs="+", default=["fp8:cdna3", "f16c:cdna3", "f16:gfx12_dot4"],
                    help=f"format:model, format one of {', '.join(BUILTIN)} (fp8:cdna3 f16c:cdna3 f16:gfx12_dot4)")
    ap.add_argument("--scaling", default="row", help="matmul's scaling (row)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-backward", action="store_true", help="time the forward pass only")
    ap.add_argument("--json", default=None, help="write the rows as JSON here")
    args = ap.parse_args(argv)

    t, k, n = args.tokens, args.k, args.n
    kx, kw, kg = jax.random.split(jax.random.PRNGKey(0), 3)
    x = jax.random.normal(kx, (t, k), jnp.float32)
    w = jax.random.normal(kw, (k, n), jnp.float32) * (1.0 / np.sqrt(k))
    g = jax.random.normal(kg, (t, n), jnp.float32)
    macs = t * k * n / 2
    dev = jax.devices()[0]
    print(f"# device: {dev.device_kind} ({jax.default_backend()}, {platform.machine()}), JAX {jax.__version__}, "
          f"{os.cpu_count()} CPUs")
    print(f"# layer: x ({t}, {k}) @ w ({k}, {n}); emulated multiply-adds {macs:.3g}")

    def fwd_bwd(mm):
        # value_and_grad: a training step needs the forward value (grad alone lets XLA drop the GEMM)
        return jax.jit(jax.value_and_grad(lambda x, w: jnp.sum(mm(x, w) * g), argnums=(0, 1)))

    dense = lambda x, w: jnp.dot(x, w, precision=HI)  # noqa: E731
    rows = []
    dense_f, dense_b = jax.jit(dense), fwd_bwd(dense)
    native_fwd = timed(lambda: dense_f(x, w), args.repeat).median
    native_bwd = None if args.no_backward else timed(lambda: dense_b(x, w), args.repeat).median
    print(f"native jnp.dot f32 HIGHEST: fwd {native_fwd * 1e3:.1f} ms" +
          ("" if native_bwd is None else f", fwd+bwd {native_bwd * 1e3:.1f} ms"), flush=True)
    for cfgtext in args.configs:
        fmt, _, model = cfgtext.partition(":")
        builtin = BUILTIN[fmt]
        mm = lambda x, w, b=builtin, m=model or None: jwmma.matmul(x, w, builtin=b, model=m, scaling=args.scaling)  # noqa: E731
        f, fb = jax.jit(mm), fwd_bwd(mm)
        fwd = timed(lambda: f(x, w), args.repeat).median
        bwd = None if args.no_backward else timed(lambda: fb(x, w), args.repeat).median
        row = dict(builtin=builtin, model=model, scaling=args.scaling, tokens=t, k=k, n=n, fwd_s=fwd,
                   fwd_bwd_s=bwd, native_fwd_s=native_fwd, native_fwd_bwd_s=native_bwd, mac_per_s=macs / fwd,
                   device=dev.device_kind, jax=jax.__version__)
        rows.append(row)
        print(f"{builtin} {model}: fwd {fwd:.3f} s ({macs / fwd:.3g} MAC/s, x{fwd / native_fwd:.0f} native)" +
              ("" if bwd is None else f", fwd+bwd {bwd:.3f} s (x{bwd / native_bwd:.0f} native; backward "
               f"{bwd - fwd:.3f} s)"), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return rows


if __name__ == "__main__":
    main()
