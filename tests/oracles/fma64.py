"""The f64 MFMA's arithmetic in plain Python ints: a chain of IEEE 754 fused multiply-adds.

Written from IEEE 754-2019 (fusedMultiplyAdd: the exact a*b + c rounded once; 6.3 signed zeros;
7.2 invalid operations) and MMA-Sim 2.1.1's ``MMA_FMA`` (``c = fma(a[..., i], b[..., i], c)`` for
i in K order, ``std::fma`` on doubles), never from jwmma and never importing it. Codes are
64-bit ints (the doubles' bit patterns). `gemm` is the tiled GEMM of the f64 MFMA written from
docs/spec/BUILTINS_DENSE.md 11: every output one chain over the whole K in order.
"""
from __future__ import annotations

import numpy as np

from .formats import F64, decode, encode, qnan

__all__ = ["fma", "chain", "gemm", "QNAN"]

QNAN = qnan(F64)


def fma(a: int, b: int, c: int) -> int:
    """Bits of RN_f64(a * b + c) (ties to even, gradual underflow, overflow to Inf); every NaN
    result is `QNAN` (the tests compare NaN by NaN-ness)."""
    x, y, z = (decode(v, F64) for v in (a, b, c))
    if "nan" in (x.kind, y.kind, z.kind):
        return QNAN
    neg_p = x.neg ^ y.neg
    if x.kind == "inf" or y.kind == "inf":
        if x.zero or y.zero:  # Inf * 0
            return QNAN
        if z.kind == "inf" and z.neg != neg_p:  # Inf - Inf
            return QNAN
        return encode(F64, -1 if neg_p else 1, 2000)  # rounds to Inf of the product's sign
    if z.kind == "inf":
        return encode(F64, -1 if z.neg else 1, 2000)
    # exact: n * 2**e with a common exponent e
    p = x.sig * y.sig * (-1 if neg_p else 1)
    ep = x.exp + y.exp - 2 * F64.mbits
    q = z.sig * (-1 if z.neg else 1)
    eq = z.exp - F64.mbits
    e = min(ep, eq)
    n = (p << (ep - e)) + (q << (eq - e))
    # an exact zero is -0 only when the product and C are both zeros of negative sign
    both_neg_zero = (x.zero or y.zero) and z.zero and neg_p and z.neg
    return encode(F64, n, e, neg_zero=both_neg_zero)


def chain(a: list[int], b: list[int], c: int) -> int:
    """D = fma(a[K-1], b[K-1], ... fma(a[0], b[0], c)): one rounding per product, k from 0."""
    for x, y in zip(a, b):
        c = fma(x, y, c)
    return c


def gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, step: int = 1) -> np.ndarray:
    """D = A x B + C as the tiled GEMM issues the f64 MFMA: every output one `chain` over k =
    0..K-1 from C (+0 without C), K padded with +0 products to a multiple of ``step`` (the
    builtin's K).

    Args:
        a: (M, K) float64; b: (K, N) float64; c: (M, N) float64 or None; step: K per instruction.
    Returns:
        (M, N) float64 (every NaN `QNAN`).
    """
    (m, k), n = a.shape, b.shape[1]
    kp = -(-k // step) * step
    bits = lambda x: [int(v) for v in np.ascontiguousarray(x).view(np.uint64)] + [0] * (kp - len(x))
    c_bits = np.zeros((m, n), np.uint64) if c is None else np.ascontiguousarray(c).view(np.uint64)
    return np.array([[chain(bits(a[i]), bits(b[:, j]), int(c_bits[i, j])) for j in range(n)] for i in range(m)],
                    np.uint64).view(np.float64)
