"""First calls of the register codec and the 2:4 helpers, as a user meets them: process CPU
seconds (all threads) of each call on a new shape, after a JAX warm-up, in one process.

    python benchmarks/bench_codec.py                                  # f16 cdna3 SMFMAC, 4 waves
    python benchmarks/bench_codec.py --builtin swmmac_f32_16x16x32_f16_w32 --waves 64

Each line is one call: ``pack_a``, ``pack_b``, ``pack_c``, ``unpack_c``, ``unpack_a``, then
``prune_2_4``, ``compress_2_4`` and ``decompress_2_4`` of a (64, 512) matrix of the builtin's
A type, and the same eight again on new shapes (a notebook that changes a shape pays that).
For a block-scaled builtin (``--builtin mfma_scale_f32_16x16x128_f8f6f4``) ``pack_scale`` and
``unpack_scale`` of A's and B's scale registers follow in each round.
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def _timed(label, fn):
    t = time.process_time()
    out = fn()
    import jax

    jax.block_until_ready(out)
    print(f"{label:34s} {time.process_time() - t:6.3f} CPU s", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--builtin", default="smfmac_f32_16x16x64_f16")
    ap.add_argument("--waves", type=int, default=4)
    args = ap.parse_args()
    import jax.numpy as jnp

    import jwmma

    jnp.ones(3).block_until_ready()  # JAX's own start-up out of the first line
    name, spec = args.builtin, jwmma.BUILTINS[args.builtin]
    dtype = np.dtype(jnp.dtype(spec.a_format.dtype)) if not spec.integer else np.dtype(np.int8)
    rng = np.random.default_rng(0)
    for round_, waves in (("", args.waves), (" (new shape)", args.waves + 1)):
        a = jwmma.numerics.cast(rng.standard_normal((waves, *spec.a_shape)), dtype) if not spec.integer else \
            rng.integers(-8, 8, (waves, *spec.a_shape)).astype(dtype)
        b = jwmma.numerics.cast(rng.standard_normal((waves, *spec.b_shape)), dtype) if not spec.integer else \
            rng.integers(-8, 8, (waves, *spec.b_shape)).astype(dtype)
        c = np.zeros((waves, *spec.c_shape), np.dtype(jnp.dtype(spec.c.dtype)))
        A = _timed("pack_a" + round_, lambda: jwmma.pack_a(name, a))
        _timed("pack_b" + round_, lambda: jwmma.pack_b(name, b))
        C = _timed("pack_c" + round_, lambda: jwmma.pack_c(name, c))
        _timed("unpack_c" + round_, lambda: jwmma.unpack_c(name, C))
        _timed("unpack_a" + round_, lambda: jwmma.unpack_a(name, A))
        x = jwmma.numerics.cast(rng.standard_normal((64, 512 + 4 * (waves - args.waves))), np.float16)
        p = _timed("prune_2_4" + round_, lambda: jwmma.prune_2_4(x))
        v, pos = _timed("compress_2_4" + round_, lambda: jwmma.compress_2_4(p))
        _timed("decompress_2_4" + round_, lambda: jwmma.decompress_2_4(v, pos))
        if spec.scaled:
            nb = spec.k // 32
            for which, shape in (("a", (waves, spec.m, nb)), ("b", (waves, nb, spec.n))):
                e8m0 = rng.integers(120, 135, shape).astype(np.uint8)
                regs = _timed(f"pack_scale {which}" + round_, lambda: jwmma.pack_scale(name, e8m0, which))
                _timed(f"unpack_scale {which}" + round_, lambda: jwmma.unpack_scale(name, regs, which))


if __name__ == "__main__":
    main()
