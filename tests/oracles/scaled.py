"""Exact sums as scaled Python integers: every value of the narrow formats (and their
products) is a multiple of 2**-SCALE, so a sum of them is an int; `round_scaled` rounds such a
sum once into an accumulator format. Used by the GEMM references of the tests; never imports
jwmma."""
from __future__ import annotations

import math

from .formats import FMTS, encode, to_float

SCALE = 400  # every value of these formats (and their products) is a multiple of 2**-400


def to_scaled_int(x: float) -> int:
    """The float ``x`` as an integer number of units 2**-SCALE (exact; asserts it is)."""
    if x == 0:
        return 0
    m, e = math.frexp(x)
    v = int(m * 2**53) * 2 ** (e - 53 + SCALE) if e - 53 + SCALE >= 0 else None
    assert v is not None and v * 2.0 ** -SCALE == x
    return v


def round_scaled(t: int, c_type: str) -> float:
    """t * 2**-SCALE rounded to nearest even in the accumulator format 'f32', 'f16' or
    'bf16' (gradual underflow, overflow to Inf), as a Python float (exactly representable)."""
    f = FMTS[c_type]
    return to_float(encode(f, t, -SCALE), f)
