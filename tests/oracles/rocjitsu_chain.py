"""Slow reference of rocjitsu's matrix FMA chain (issue #14 item 4: shared/mma_exec.h, mma/arithmetic.h): acc <- fma_f32(a_k, b_k, acc)
in a given order, each step one IEEE round-to-nearest-even to f32 (gradual underflow, signed
zeros), NaN results chosen as rocjitsu's `matrix_fma` does; then the narrowing to a 16-bit
accumulator. Python integers and fractions only; decodes bit patterns itself."""
from __future__ import annotations

from fractions import Fraction

from .fdpa import decode, round_to, value

INVALID = 0xFFC00000


def f32_image(fmt, code):
    """f32 bits of a NaN code of ``fmt``, quieted: IEEE widening keeps sign and payload."""
    k, sign, _, _ = decode(fmt, code)
    assert k == "nan"
    if fmt == "f32":
        return int(code) | 0x400000
    if fmt == "f16":
        return (sign << 31) | 0x7F800000 | ((int(code) & 0x3FF) << 13) | 0x400000
    if fmt == "bf16":
        return (int(code) << 16) | 0x400000
    return (sign << 31) | 0x7FC00000  # 8-bit NaNs: payload not modelled


def rne_f32(x: Fraction, neg_zero: bool) -> int:
    """f32 code of x (RNE, subnormals, overflow to Inf); an exact zero is -0 iff neg_zero, an
    underflow to zero keeps the sign of x (`round_to` gives +0 for both)."""
    if x == 0:
        return 0x80000000 if neg_zero else 0
    return round_to(x, "f32", 23, "nearest") or (int(x < 0) << 31)


def f32_value(code):
    k, s, sig, e = decode("f32", code)
    return k, s, (value("f32", s, sig, e) if k == "num" else None)


def fma_step(a, fa, b, fb, acc):
    """One rocjitsu matrix_fma: a, b codes of fa/fb; acc f32 code. Returns the f32 code."""
    A, B, C = decode(fa, a), decode(fb, b), decode("f32", acc)
    if A[0] == "nan":
        return f32_image(fa, a)
    if B[0] == "nan":
        return f32_image(fb, b)
    if C[0] == "nan":
        return int(acc) | 0x400000
    if A[0] == "inf" or B[0] == "inf":
        other = B if A[0] == "inf" else A
        if other[0] == "num" and other[2] == 0:
            return INVALID
        ps = A[1] ^ B[1]
        if C[0] == "inf" and C[1] != ps:
            return INVALID
        return (ps << 31) | 0x7F800000
    if C[0] == "inf":
        return int(acc)
    p = value(fa, *A[1:]) * value(fb, *B[1:])
    c = value("f32", *C[1:])
    pneg = (A[1] ^ B[1]) == 1
    return rne_f32(p + c, neg_zero=(p == 0 and pneg and c == 0 and C[1] == 1))


def chain(a_codes, b_codes, c_code, fa, fb, fc, order=None, narrowing="nearest", nan="propagate"):
    """The chain over the products in ``order`` (step -> position), C of format fc widened."""
    k = len(a_codes)
    order = range(k) if order is None else order
    C = decode(fc, c_code)
    if fc == "f32":
        acc = int(c_code)
    elif C[0] == "nan":
        acc = f32_image(fc, c_code)
    elif C[0] == "inf":
        acc = (C[1] << 31) | 0x7F800000
    else:
        acc = rne_f32(value(fc, *C[1:]), neg_zero=C[1] == 1)
    for i in order:
        acc = fma_step(a_codes[i], fa, b_codes[i], fb, acc)
    k_, s, v = f32_value(acc)
    if k_ == "nan" and nan == "canonical":
        acc = 0x7FC00000
    if fc == "f32":
        return acc
    if narrowing == "truncate":
        return acc >> 16
    raise NotImplementedError("nearest narrowing: use the landed fma_chain's tests")
