"""The exact product of quantised study operands, and its correctly rounded float32 value.

`reference` forms a GEMM of the quantised operands exactly: error-free float64 parts (exponent
bands, each matmul exact) added with `math.fsum`, rounded to odd in float64 and then to float32.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .data import INPUT_FORMATS, format_dtype, precision, to_f32_odd

__all__ = ["Reference", "reference"]


@dataclass
class Reference:
    """Exact product of the quantised operands: ``exact`` (float64, the exact sum rounded to
    nearest in float64), ``f32`` (the exact sum correctly rounded to float32), ``scale``
    (sum_k |a_ik b_kj|, float64)."""

    exact: np.ndarray
    f32: np.ndarray
    scale: np.ndarray
    odd: np.ndarray | None = None  # the exact sum rounded to odd in float64 (any narrower rounding)

    def rounded(self, dtype) -> np.ndarray:
        """The exact sum correctly rounded (RNE) to ``dtype``: float32, float16 or bfloat16."""
        dtype = np.dtype(dtype)
        if dtype == np.float32 or self.odd is None:
            return self.f32 if dtype == np.float32 else self.f32.astype(dtype)
        if dtype == np.float16:  # numpy rounds float64 -> float16 directly (once)
            return self.odd.astype(np.float16)
        return to_f32_odd(self.odd).astype(dtype)  # float32 rounded to odd, then RNE: one rounding


def _exponent_bands(x: np.ndarray, width: int):
    """Split x into sum of parts whose nonzero elements have frexp exponents in
    [lo, lo + width): yields (lo, part)."""
    nz = x != 0
    if not nz.any():
        return
    _, e = np.frexp(x)
    lo_all = int(e[nz].min())
    hi_all = int(e[nz].max())
    for lo in range(lo_all, hi_all + 1, width):
        sel = nz & (e >= lo) & (e < lo + width)
        if sel.any():
            yield lo, np.where(sel, x, 0.0)


def _exact_parts(a: np.ndarray, b: np.ndarray, pa: int, pb: int) -> list[np.ndarray]:
    """float64 matrices whose exact (real) sum is a @ b, each computed without any rounding.

    An element x with frexp exponent e of a format with p significand bits is an integer
    multiple of 2**(e - p) below 2**e. Bands of exponents [lo, lo + w) of A and B give
    products that are multiples of 2**(lo_a + lo_b - pa - pb) below 2**(lo_a + lo_b + 2w);
    a K-term sum of them is an integer below K * 2**(2w + pa + pb) <= 2**53, so float64 holds
    every partial sum exactly whatever order the matmul adds in."""
    k = a.shape[-1]
    lg = max(1, math.ceil(math.log2(max(k, 2))))
    w = (53 - pa - pb - lg) // 2
    if w < 1:  # pragma: no cover - K of 2**40 and more
        raise ValueError(f"K={k} is too large for the exact reference")
    parts = []
    bands_b = list(_exponent_bands(b, w))
    for _, pa_ in _exponent_bands(a, w):
        for _, pb_ in bands_b:
            parts.append(np.matmul(pa_, pb_))
    return parts


def _round_to_odd(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """hi + lo (hi = RN64 of the exact sum, lo the sign of the rest) rounded to odd in float64."""
    bits = hi.view(np.int64)
    even = (bits & 1) == 0
    toward = np.where(lo > 0, np.inf, -np.inf)
    return np.where((lo != 0) & even, np.nextafter(hi, toward), hi)


def reference(a24: np.ndarray, b: np.ndarray, a_format: str | None = None, b_format: str | None = None) -> Reference:
    """The exact GEMM of quantised operands (leading batch dims allowed).

    ``a_format``/``b_format`` ('fp8', 'bf8', 'f16', 'bf16', 'fp8_fnuz', 'bf8_fnuz') default to
    the operands' dtypes.
    The exact sum is formed as a few error-free float64 matmuls (`_exact_parts`) added with
    `math.fsum` (hi) plus the sign of the remainder (lo), then rounded to odd in float64 and
    to float32 with RNE: a correct rounding of the exact value (float64 keeps 29 extra bits)."""
    fa = a_format or _format_of(a24.dtype)
    fb = b_format or _format_of(b.dtype)
    a = np.asarray(a24).astype(np.float64)
    bb = np.asarray(b).astype(np.float64)
    batch = np.broadcast_shapes(a.shape[:-2], bb.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    bb = np.broadcast_to(bb, batch + bb.shape[-2:])
    out_shape = batch + (a.shape[-2], bb.shape[-1])
    hi = np.zeros(out_shape)
    lo = np.zeros(out_shape)
    for idx in np.ndindex(*batch):
        parts = _exact_parts(a[idx], bb[idx], precision(fa), precision(fb))
        if not parts:
            continue
        if len(parts) == 1:
            hi[idx] = parts[0]
            continue
        stack = np.stack(parts, axis=-1).reshape(-1, len(parts)).tolist()
        h = [math.fsum(r) for r in stack]
        lo[idx] = np.reshape([math.fsum(r + [-x]) for r, x in zip(stack, h)], out_shape[-2:])
        hi[idx] = np.reshape(h, out_shape[-2:])
    odd = _round_to_odd(hi, lo)
    scale = np.matmul(np.abs(a), np.abs(bb))
    return Reference(hi, odd.astype(np.float32), scale, odd)


def _format_of(dtype) -> str:
    for name in INPUT_FORMATS:
        if np.dtype(dtype) == format_dtype(name):
            return name
    raise TypeError(f"no input format for dtype {dtype}; expected one of "
                    f"{[format_dtype(f).name for f in INPUT_FORMATS]}")
