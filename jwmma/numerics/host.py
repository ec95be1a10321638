"""Host (numpy) conversions into the narrow formats, rounded once whatever the library versions.

Why this exists (docs/ARCHITECTURE.md, "Same bits on every device"): ``x.astype(bfloat16)`` on
a float64 array rounds twice, through float32, in ml_dtypes before 0.7 (0.6.0 is what one
H200 image carries) and in XLA's convert on the CPU (JAX 0.10.2), and once in ml_dtypes 0.7.
A float64 value just off a bfloat16 tie then lands on different bits on two machines, and a
"GPU drift" is really two different operands. `cast` rounds float64 to odd in float32 first
(exact truncation plus a sticky bit), after which the library's float32 -> narrow rounding,
which every version does once, gives the correctly rounded result (the classic round-to-odd
argument: float32 keeps at least two bits more than every narrow format here).
"""
from __future__ import annotations

import numpy as np

__all__ = ["to_f32_odd", "cast"]


def to_f32_odd(x) -> np.ndarray:
    """float64 -> float32 rounded to odd: truncate, and set the last bit if anything was cut.

    Args:
        x: array-like of any real dtype.
    Returns:
        float32 array of x's shape. A format with at most 22 significand bits rounded (RNE)
        from it gets the correct RNE of ``x``; NaN stays NaN, beyond the float32 range the
        result is float32's largest finite value with the sticky bit (so RNE narrower gives Inf).
    """
    x = np.asarray(x, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        r = x.astype(np.float32)
        over = np.abs(r.astype(np.float64)) > np.abs(x)
        r = np.where(over, np.nextafter(r, np.float32(0)), r)  # round toward zero
        inexact = r.astype(np.float64) != x
    bits = r.view(np.uint32) | inexact.astype(np.uint32)
    return bits.view(np.float32)


def cast(x, dtype) -> np.ndarray:
    """``x`` rounded once (nearest even, gradual underflow) to ``dtype``.

    Args:
        x: array-like of any real dtype (float64 typically).
        dtype: float32, float16, bfloat16 or any ml_dtypes 8-bit float (OCP or FNUZ).
    Returns:
        numpy array of ``dtype``: the same bits with every numpy / ml_dtypes version (out of
        range values follow the library's cast: Inf, or NaN for formats without Inf).
    """
    dtype = np.dtype(dtype)
    if dtype.kind not in "fV" and "float" not in dtype.name:
        raise TypeError(f"dtype must be a float type, got {dtype}")
    x = np.asarray(x)
    if x.dtype == dtype:
        return x
    # sources whose every value float32 holds exactly: the library's cast rounds once
    f32_exact = x.dtype == np.float32 or x.dtype.itemsize <= 2 and x.dtype.kind in "fiuV"
    if dtype in (np.dtype(np.float32), np.dtype(np.float64)) or f32_exact:
        return x.astype(dtype)
    with np.errstate(over="ignore"):
        if dtype == np.float16:
            return np.asarray(x, np.float64).astype(np.float16)  # numpy rounds float64 -> float16 once
        return to_f32_odd(x).astype(dtype)
