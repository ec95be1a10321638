"""The number formats of the independent oracles: decoding and rounding in plain Python ints.

One module for every oracle (the builtins' reference, the models' references, the gfx12
reference, the GEMM references): written from NUMERICS.md section 3 (formats), IEEE 754
(round to nearest even, gradual underflow) and BUILTINS.md section 1 (integer packing).
Nothing here imports jwmma: it is what jwmma is checked against.

A value is ``n * 2**e`` with ``n`` a Python int; `decode` splits a code into sign,
significand and exponent, `encode` rounds ``n * 2**e`` into a code.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction

import ml_dtypes
import numpy as np


# =========================================================================== formats
@dataclass(frozen=True)
class Fmt:
    """A binary float format. ``nan``: which codes are NaN: 'ieee' (exponent all ones,
    mantissa != 0; all ones and mantissa 0 is Inf), 'fn' (OCP E4M3FN: only S.1111.111, no
    Inf), 'fnuz' (only 0x80, no Inf, no -0). ``dtype``: the numpy/ml_dtypes dtype."""

    name: str
    ebits: int
    mbits: int
    bias: int
    nan: str
    dtype: object

    @property
    def bits(self):
        return 1 + self.ebits + self.mbits

    @property
    def emask(self):
        """The all-ones exponent field."""
        return (1 << self.ebits) - 1

    emax_field = emask

    @property
    def mmask(self):
        return (1 << self.mbits) - 1

    @property
    def kind(self):
        """The NaN encoding (`nan`), by its other name."""
        return self.nan

    @property
    def min_exp(self):
        return 1 - self.bias

    @property
    def max_exp(self):
        top = (1 << self.ebits) - 1
        return top - 1 - self.bias if self.nan == "ieee" else top - self.bias

    @property
    def has_inf(self):
        return self.nan == "ieee"

    @property
    def uint(self):
        return {64: np.uint64, 32: np.uint32, 16: np.uint16, 8: np.uint8}[self.bits]


F32 = Fmt("f32", 8, 23, 127, "ieee", np.float32)
F16 = Fmt("f16", 5, 10, 15, "ieee", np.float16)
BF16 = Fmt("bf16", 8, 7, 127, "ieee", ml_dtypes.bfloat16)
FP8 = Fmt("fp8", 4, 3, 7, "fn", ml_dtypes.float8_e4m3fn)  # OCP E4M3FN: no Inf, NaN = 0x7F / 0xFF
BF8 = Fmt("bf8", 5, 2, 15, "ieee", ml_dtypes.float8_e5m2)  # OCP E5M2
FP8_FNUZ = Fmt("fp8_fnuz", 4, 3, 8, "fnuz", ml_dtypes.float8_e4m3fnuz)
BF8_FNUZ = Fmt("bf8_fnuz", 5, 2, 16, "fnuz", ml_dtypes.float8_e5m2fnuz)
F64 = Fmt("f64", 11, 52, 1023, "ieee", np.float64)  # IEEE binary64 (the f64 MFMA)
FMTS = {f.name: f for f in (F32, F16, BF16, FP8, BF8, FP8_FNUZ, BF8_FNUZ)}


# =========================================================================== decoding
@dataclass(frozen=True)
class Val:
    """A decoded code: kind 'num' (value (-1)**neg * sig * 2**(exp - mbits), exp = the
    exponent of the format's hidden bit position: max(field, 1) - bias), 'inf' or 'nan'."""

    kind: str
    neg: int
    sig: int = 0
    exp: int = 0

    @property
    def zero(self):
        return self.kind == "num" and self.sig == 0


def decode(code: int, f: Fmt) -> Val:
    """The `Val` of a code of ``f`` (its low ``f.bits`` bits)."""
    return _decode(int(code) & ((1 << f.bits) - 1), f)


@functools.lru_cache(maxsize=1 << 17)
def _decode(code: int, f: Fmt) -> Val:
    """`decode` of a code already masked to ``f.bits`` bits, remembered: the references decode
    each operand element once per output it enters (a `Val` is frozen, so sharing is safe)."""
    neg = code >> (f.bits - 1)
    ef = (code >> f.mbits) & f.emask
    mant = code & f.mmask
    if f.nan == "ieee" and ef == f.emask:
        return Val("nan" if mant else "inf", neg)
    if f.nan == "fn" and ef == f.emask and mant == f.mmask:
        return Val("nan", neg)
    if f.nan == "fnuz" and code == 1 << (f.bits - 1):
        return Val("nan", 0)
    sig = mant | ((1 << f.mbits) if ef else 0)
    return Val("num", neg, sig, max(ef, 1) - f.bias)


def value(code: int, f: Fmt):
    """Exact value as a Fraction (or float inf/nan)."""
    v = decode(code, f)
    if v.kind == "nan":
        return float("nan")
    if v.kind == "inf":
        return float("-inf") if v.neg else float("inf")
    x = Fraction(v.sig) * Fraction(2) ** (v.exp - f.mbits)
    return -x if v.neg else x


def is_nan(bits: int, f: Fmt) -> bool:
    return decode(bits, f).kind == "nan"


def qnan(f: Fmt) -> int:
    """The canonical quiet NaN code (IEEE: exponent all ones and the top mantissa bit)."""
    return {"ieee": ((1 << (f.ebits + 1)) - 1) << (f.mbits - 1), "fn": (1 << (f.bits - 1)) - 1,
            "fnuz": 1 << (f.bits - 1)}[f.nan]


def inf_bits(f: Fmt, neg) -> int:
    assert f.has_inf
    return (f.emask << f.mbits) | (int(bool(neg)) << (f.bits - 1))


# =========================================================================== rounding
def encode(f: Fmt, n: int, e: int, neg_zero: bool = False) -> int:
    """Bits of n * 2**e (n a signed int) rounded to ``f``: round to nearest, ties to even,
    gradual underflow, overflow to +-Inf (NaN for formats without Inf). A nonzero value that
    rounds to zero keeps its sign (IEEE); an exact zero is -0 only if ``neg_zero``."""
    sbit = 1 << (f.bits - 1)
    if n == 0:
        return sbit if neg_zero else 0
    neg = n < 0
    m = -n if neg else n
    lead = m.bit_length() - 1 + e
    qe = max(lead, f.min_exp) - f.mbits  # exponent of the last kept place
    if e >= qe:
        q = m << (e - qe)
    else:
        sh = qe - e
        q, r = divmod(m, 1 << sh)
        half = 1 << (sh - 1)
        if r > half or (r == half and q & 1):
            q += 1
    if q >> (f.mbits + 1):  # the rounding carried into a new binade
        q >>= 1
        qe += 1
    s = sbit if neg else 0
    if q == 0:
        return s
    if q < (1 << f.mbits):  # subnormal
        return s | q
    top = qe + f.mbits  # exponent of the leading bit
    if top > f.max_exp or (f.nan == "fn" and top == f.max_exp and (q & f.mmask) == f.mmask):
        return (inf_bits(f, neg) if f.has_inf else qnan(f) | (s if f.nan == "fn" else 0))
    return s | ((top + f.bias) << f.mbits) | (q - (1 << f.mbits))


def encode_fraction(f: Fmt, x: Fraction, neg_zero=False) -> int:
    """`encode` of a dyadic Fraction."""
    x = Fraction(x)
    den = x.denominator
    assert den & (den - 1) == 0, "not dyadic"
    return encode(f, x.numerator, -(den.bit_length() - 1), neg_zero)


def to_float(bits: int, f: Fmt) -> float:
    """The code as a Python float (exact for every format here)."""
    return float(np.array(bits & ((1 << f.bits) - 1)).astype(f.uint).view(f.dtype))


# =========================================================================== integers and codes
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


def int_decode(code: int, bits: int, signed: bool) -> int:
    """Sign- or zero-extend a ``bits``-wide integer code."""
    code = int(code) & ((1 << bits) - 1)
    if signed and code >> (bits - 1):
        code -= 1 << bits
    return code


def wrap32(x: int) -> int:
    return ((x + 2**31) % 2**32) - 2**31


def sat32(x: int) -> int:
    return min(max(x, I32_MIN), I32_MAX)


def codes_of(x) -> np.ndarray:
    """int64 bit patterns of a numpy float array (any width)."""
    x = np.asarray(x)
    w = {4: np.uint32, 2: np.uint16, 1: np.uint8}[x.dtype.itemsize]
    return x.view(w).astype(np.int64)


def from_codes(codes, f: Fmt) -> np.ndarray:
    return np.asarray(codes).astype(f.uint).view(f.dtype)


def same_bits(got: int, want: int, f: Fmt) -> bool:
    """Bit equality, NaN by NaN-ness."""
    if is_nan(want, f):
        return is_nan(got, f)
    return (int(got) & ((1 << f.bits) - 1)) == (int(want) & ((1 << f.bits) - 1))
