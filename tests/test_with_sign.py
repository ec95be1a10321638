"""`with_sign` sets exactly the sign bit, on every value it is given, inside jit.

Each dtype has its own form (float32 by integer bits, float64 by a multiply; the function's
docstring says why), so each is checked on the values that would expose the other form's
failure: float32 subnormals (a multiply flushes them on XLA:CPU) and zeros (a negation as
0 - x loses -0). The reference is numpy's bits with the top bit set."""
from __future__ import annotations

import jax
import numpy as np

from jwmma.numerics.formats import with_sign
from jwmma.numerics.rounding import x64_scope


def _expected(mag: np.ndarray, sign: np.ndarray, utype) -> np.ndarray:
    top = utype(1) << utype(8 * mag.itemsize - 1)
    return mag.view(utype) | np.where(sign == 1, top, utype(0))


def test_float32_subnormals_zeros_and_specials(rng):
    bits = np.concatenate([
        np.array([0, 1, 2, 0x7FFFFF, 0x800000, 0x7F7FFFFF, 0x7F800000, 0x7FC00000], np.uint32),
        rng.integers(1, 0x800000, 64, dtype=np.uint32),  # subnormals
        rng.integers(0x800000, 0x7F800000, 64, dtype=np.uint32),
    ])
    mag = bits.view(np.float32)
    sign = rng.integers(0, 2, mag.shape).astype(np.int32)
    sign[:8] = 1
    got = np.asarray(jax.jit(with_sign)(mag, sign)).view(np.uint32)
    np.testing.assert_array_equal(got, _expected(mag, sign, np.uint32))


def test_float64_zeros_and_the_values_of_narrow_formats(rng):
    exps = rng.integers(-160, 130, 256)  # every f32 and narrower value lies in this range
    sig = rng.integers(1, 1 << 24, 256)
    mag = np.concatenate([[0.0, 1.0, 2.0**-149, 2.0**127], np.ldexp(sig.astype(np.float64), exps - 23)])
    sign = rng.integers(0, 2, mag.shape).astype(np.int32)
    sign[:2] = 1
    with x64_scope():
        got = np.asarray(jax.jit(with_sign)(mag, sign)).view(np.uint64)
    np.testing.assert_array_equal(got, _expected(mag, sign, np.uint64))
