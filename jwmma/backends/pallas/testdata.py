"""Operand codes for tests and benchmarks: random with an adversarial corner (numpy, seeded).

`gemm_codes` returns tile-padded element codes as `jwmma.gemm` prepares them: a (M, K/2) and
pos (M, K/2) int32 (compressed A, positions 0..3), b (K, N), c (M, N) int32 accumulator bits
(integer builtins: values). Away from the corner, float elements span a few binades (sign,
exponent field near the bias, uniform mantissa) and positions are distinct sorted pairs, as
`compress_2_4` gives. The corner, rows 0..31 of A and columns 0..63 of B (the first tile of
every tiling), is adversarial:

* A rows 0-7: any bit pattern (NaN, Inf, subnormals, extremes); 8-15: the full exponent range
  (huge spreads); 16-23: zeros and subnormals (all-zero groups); 24-31: duplicate positions
  whose second value is the first negated (exact cancellation).
* B columns 0-15: one element in 16 any bit pattern; 16-31: the full exponent range; 32-47:
  zeros and subnormals; 48-63: plain.
* C: subnormals, +-0, Inf, NaN, extremes; integer C: values near INT32_MIN / INT32_MAX.

Dense builtins (RDNA4 WMMA): a (M, K) and pos zeros (M, K), as `jwmma.tiled.operands` gives
them; rows 24-31 of A negate the even column in the odd one of a pair, and B columns 48-63
repeat every even row in the odd one, so those products cancel exactly.
"""
from __future__ import annotations

import numpy as np

from ...numerics.formats import F32, FLOAT_FORMATS
from ...isa.table import BuiltinSpec

__all__ = ["gemm_codes"]

PAIRS = np.array([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)], np.int32)
INT_RANGE = {"iu8": (-128, 255), "i8": (-128, 127), "iu4": (-8, 15)}


def _plain(rng, fmt, shape, spread=3):
    """Codes of values of random sign over a few binades around 1."""
    e = rng.integers(max(fmt.bias - spread, 1), fmt.bias + spread + 1, shape, dtype=np.int32)
    top = (1 << fmt.ebits) - (2 if fmt.nan == "ieee" else 1)
    e = np.minimum(e, top)
    m = rng.integers(0, 1 << fmt.mbits, shape, dtype=np.int32)
    if fmt.nan == "fn":  # E4M3FN: exponent and mantissa all ones is NaN
        m = np.where(e == top, np.minimum(m, (1 << fmt.mbits) - 2), m)
    s = rng.integers(0, 2, shape, dtype=np.int32)
    return (s << (fmt.bits - 1)) | (e << fmt.mbits) | m


def _any(rng, fmt, shape):
    return rng.integers(0, 1 << fmt.bits, shape, dtype=np.int64).astype(np.int32) if fmt.bits < 32 else \
        rng.integers(-(2**31), 2**31, shape, dtype=np.int64).astype(np.int32)


def _wide(rng, fmt, shape):
    """Finite codes over the whole exponent range (subnormals included)."""
    top = (1 << fmt.ebits) - (2 if fmt.nan == "ieee" else 1)
    e = rng.integers(0, top + 1, shape, dtype=np.int32)
    m = rng.integers(0, 1 << fmt.mbits, shape, dtype=np.int32)
    if fmt.nan == "fn":
        m = np.where(e == top, np.minimum(m, (1 << fmt.mbits) - 2), m)
    s = rng.integers(0, 2, shape, dtype=np.int32)
    return (s << (fmt.bits - 1)) | (e << fmt.mbits) | m


def _tiny(rng, fmt, shape):
    """Zeros (of either sign) and subnormals."""
    m = rng.integers(0, 1 << fmt.mbits, shape, dtype=np.int32)
    m = np.where(rng.random(shape) < 0.6, 0, m)
    s = rng.integers(0, 2, shape, dtype=np.int32)
    return (s << (fmt.bits - 1)) | m


def gemm_codes(spec: BuiltinSpec, m: int, n: int, k: int, seed: int = 0, clamp: bool = False,
               corner: bool = True):
    """(a, pos, b, c) int32 codes of an M x N x K GEMM of ``spec`` (M, N, K multiples of the
    instruction shape; see the module doc): a and pos (M, K/2), or (M, K) for a dense
    builtin; b (K, N); c (M, N)."""
    rng = np.random.default_rng(seed)
    kc = k if spec.dense else k // 2
    pos = PAIRS[rng.integers(0, 6, (m, kc // 2))].reshape(m, kc)
    if spec.dense:
        pos = np.zeros((m, kc), np.int32)
    r0, c0 = min(m, 32), min(n, 64)
    if spec.integer:
        lo, hi = INT_RANGE[spec.a_type]
        if spec.signed_choice:  # values valid for the default signed use
            lo, hi = (-128, 127) if spec.a_type == "iu8" else (-8, 7)
        a = rng.integers(lo, hi + 1, (m, kc), dtype=np.int32)
        b = rng.integers(lo, hi + 1, (k, n), dtype=np.int32)
        c = rng.integers(-(2**20), 2**20, (m, n), dtype=np.int32)
        if corner:
            a[:r0] = np.where(rng.random((r0, kc)) < 0.5, np.where(rng.random((r0, kc)) < 0.5, lo, hi), a[:r0])
            b[:, :c0] = np.where(rng.random((k, c0)) < 0.5, np.where(rng.random((k, c0)) < 0.5, lo, hi), b[:, :c0])
            edge = np.where(rng.random((r0, c0)) < 0.5, 2**31 - 1, -(2**31)) - rng.integers(-2**16, 2**16, (r0, c0))
            c[:r0, :c0] = np.clip(edge, -(2**31), 2**31 - 1).astype(np.int32)
        return a, pos.astype(np.int32), b, c
    fa, fb = spec.a_format, spec.b_format
    fc = F32 if spec.c_type == "f32" else FLOAT_FORMATS[spec.c_type]
    a = _plain(rng, fa, (m, kc))
    b = _plain(rng, fb, (k, n))
    c = _plain(rng, fc, (m, n))
    if corner:
        h = max(r0 // 4, 1)
        a[0:h] = _any(rng, fa, (h, kc))
        a[h:2 * h] = _wide(rng, fa, (h, kc))
        a[2 * h:3 * h] = _tiny(rng, fa, (h, kc))
        dup = rng.random((h, kc // 2)) < 0.5
        if not spec.dense:
            p3 = pos[3 * h:4 * h].reshape(h, kc // 2, 2)
            p3[..., 1] = np.where(dup, p3[..., 0], p3[..., 1])
            pos[3 * h:4 * h] = p3.reshape(h, kc)
        a3 = a[3 * h:4 * h].reshape(h, kc // 2, 2)
        a3[..., 1] = np.where(dup, a3[..., 0] ^ (1 << (fa.bits - 1)), a3[..., 1])
        a[3 * h:4 * h] = a3.reshape(h, kc)
        w = max(c0 // 4, 1)
        sp = rng.random((k, w)) < 1 / 16
        b[:, 0:w] = np.where(sp, _any(rng, fb, (k, w)), b[:, 0:w])
        b[:, w:2 * w] = _wide(rng, fb, (k, w))
        b[:, 2 * w:3 * w] = _tiny(rng, fb, (k, w))
        if spec.dense:  # the pairs of A rows 24-31 cancel against equal B rows
            b[1::2, 3 * w:4 * w] = b[0::2, 3 * w:4 * w]
        cc = c[:r0, :c0]
        cc[:, 0:w] = _tiny(rng, fc, (r0, w))
        cc[:, w:2 * w] = _wide(rng, fc, (r0, w))
        cc[::7, 2 * w] = _any(rng, fc, cc[::7, 2 * w].shape)
        c[:r0, :c0] = cc
    if fc.bits < 32:
        c = c & ((1 << fc.bits) - 1)
    return a.astype(np.int32), pos.astype(np.int32), b.astype(np.int32), c.astype(np.int32)
