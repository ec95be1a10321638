"""`jwmma.numerics.rounding.round_f64_to_f32`: float64 values rounded to f32 bits (RNE) on
32-bit words, against the exact rounding of Python ints (`oracles.formats.encode`).

The documented rules: a float64 subnormal counts as zero (its sign kept), NaN gives the quiet
NaN 0x7FC00000, Inf keeps its sign, a finite value beyond the largest f32 rounds to Inf, a
nonzero value that rounds to zero keeps its sign. The values span 2**-170 to 2**129 (normal and
subnormal f32 results, and values below half the smallest subnormal), with exact ties at every
place, all-ones fractions and specials.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jwmma.numerics.rounding import round_f64_to_f32, x64_scope
from oracles.formats import F32, encode

EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0**-126, -(2.0**-126), 2.0**-126 * (1 + 2.0**-24),
         2.0**128, 3.4028235677973366e38, 3.4028235677973362e38, 2.0**127 * (2 - 2.0**-24), 1e300, -1e300,
         5e-324, -5e-324, 1.0 + 2.0**-24, 1.0 + 3 * 2.0**-24, 2.0**-149, 2.0**-150, 3 * 2.0**-151, 2.0**-127,
         -(2.0**-130) * 1.5, 2.0**-126 * (1 - 2.0**-30), 2.0**-126 * (1 - 2.0**-24), 2.0**-150 * (1 + 2.0**-52),
         2.0**-151, 2.0**-1000]


def _oracle(x: float) -> int:
    bits = int(np.float64(x).view(np.uint64))
    neg, ef, frac = bits >> 63, (bits >> 52) & 0x7FF, bits & ((1 << 52) - 1)
    if ef == 0x7FF:
        return 0x7FC00000 if frac else (neg << 31) | 0x7F800000
    if ef == 0:  # zero, and float64 subnormals (documented: zero)
        return neg << 31
    m = (1 << 52) | frac
    return encode(F32, -m if neg else m, ef - 1075) & 0xFFFFFFFF


def _doubles(rng, n):
    ef = rng.integers(1023 - 170, 1023 + 130, n)
    frac = rng.integers(0, 2**52, n, dtype=np.uint64)
    # exactly half a place at a random depth (the subnormal results' places lie deeper)
    place = rng.integers(0, 52, n).astype(np.uint64)
    tie = rng.random(n) < 0.3
    frac = np.where(tie, (frac >> place << place) | (np.uint64(1) << place >> np.uint64(1)), frac)
    frac = np.where(rng.random(n) < 0.05, np.uint64(2**52 - 1), frac)
    sign = rng.integers(0, 2, n).astype(np.uint64)
    x = ((sign << np.uint64(63)) | (ef.astype(np.uint64) << np.uint64(52)) | frac).view(np.float64)
    return np.concatenate([np.array(EDGES), x])


def test_matches_exact_rounding(rng):
    x = _doubles(rng, 6000)
    with x64_scope():
        got = np.asarray(jax.jit(round_f64_to_f32)(jnp.asarray(x))).astype(np.int64) & 0xFFFFFFFF
    want = np.array([_oracle(v) for v in x], np.int64)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (f"{bad.size} of {x.size} differ; first {x[bad[0]]!r}: got {int(got[bad[0]]):#010x} "
                           f"want {int(want[bad[0]]):#010x}")
