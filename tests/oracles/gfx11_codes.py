"""Random 16-bit operand codes for the RDNA3 WMMA tests (numpy; the arithmetic's reference is
`ref_gfx11`, Python integers only). Imports nothing of the package."""
from __future__ import annotations

import numpy as np

from .ref_gfx11 import FORMATS


def random_codes(rng, fmt: str, shape, spread: int = 6) -> np.ndarray:
    """16-bit codes of ``fmt`` ('f16' or 'bf16'): mostly ordinary values (exponent fields within
    ``spread`` of the bias), with zeros of both signs, subnormals, Inf and NaN."""
    fb, bias, emask = FORMATS[fmt]
    field = rng.integers(bias - spread, bias + spread, shape)
    field = np.where(rng.random(shape) < 0.1, 0, field)
    special = rng.random(shape)
    field = np.where(special < 0.004, emask, field)
    frac = rng.integers(0, 1 << fb, shape)
    frac = np.where((field == emask) & (special < 0.002), 0, frac)
    frac = np.where(rng.random(shape) < 0.05, 0, frac)
    sign = rng.integers(0, 2, shape)
    return ((sign << 15) | (field << fb) | frac).astype(np.uint16)
