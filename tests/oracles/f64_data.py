"""Random and adversarial float64 operands for the f64 MFMA tests (numpy only; the arithmetic's
reference is `fma64`). Imports nothing of the package."""
from __future__ import annotations

import numpy as np

__all__ = ["float64_values"]

U64 = np.uint64


def float64_values(rng, shape, kind: str) -> np.ndarray:
    """'random': moderate values over a few binades; 'adversarial': also subnormals, tiny normals
    (products underflow), huge values (products and sums overflow), zeros, Inf, NaN, both signs."""
    x = rng.standard_normal(shape) * 2.0 ** rng.integers(-20, 21, shape)
    if kind == "random":
        return x
    bits = x.view(U64).copy()
    mant = lambda n: rng.integers(0, 1 << 52, n, dtype=U64)
    pick = rng.random(shape)
    for lo, hi, fill in ((0.0, 0.12, lambda n: rng.integers(1, 1 << 52, n, dtype=U64)),  # subnormal
                         (0.12, 0.2, lambda n: (rng.integers(1, 60, n).astype(U64) << U64(52)) | mant(n)),
                         (0.2, 0.27, lambda n: (rng.integers(1990, 2047, n).astype(U64) << U64(52)) | mant(n)),
                         (0.27, 0.33, lambda n: np.zeros(n, U64)),
                         (0.33, 0.34, lambda n: np.full(n, 0x7FF << 52, U64)),
                         (0.34, 0.345, lambda n: np.full(n, 0x7FF8000000000000, U64) | mant(n) >> U64(1))):
        sel = (pick >= lo) & (pick < hi)
        bits[sel] = fill(int(sel.sum()))
    bits ^= (rng.random(shape) < 0.5).astype(U64) << U64(63)
    return bits.view(np.float64)
