"""Binary number formats and their bit-level decoding (NUMERICS.md section 3).

Everything here works on integer bit patterns, never on float arithmetic: XLA's CPU backend
flushes f32 subnormals (inputs and results, the f64->f32 cast included), while the matrix
cores keep them. So operands are decoded with integer ops into (sign, significand, exponent)
fields, and results are rounded into bit patterns by `jwmma.numerics.rounding`.

The formats: IEEE f32/f16, bf16, the OCP FP8 formats E4M3FN ("fp8") and E5M2 ("bf8"), their
FNUZ variants, the OCP MX element formats FP6 E2M3 ("fp6"), BF6 E3M2 ("bf6") and FP4 E2M1
("fp4") (no Inf, no NaN), xf32 (the CDNA3 matrix unit's reading of float32: its top 19 bits,
1+8+10; docs/spec/BUILTINS_DENSE.md 6), IEEE f64 (the f64 MFMA only: its codes are int64, so it
decodes inside `x64_scope`), and the integer formats. This module knows no
instruction: which builtin reads which format is `jwmma.isa.types`.
"""
from __future__ import annotations

__all__ = [
    "FloatFormat", "IntFormat", "Fields", "F32", "F16", "BF16", "FP8", "BF8", "FP8_FNUZ", "BF8_FNUZ", "FP6", "BF6",
    "FP4", "XF32", "F64", "E8M0_NAN", "E8M0_BIAS",
    "I8", "U8", "I4", "U4", "I32", "FLOAT_FORMATS", "INT_FORMATS", "ZERO_EXP", "format_of", "decode",
    "value_exponent", "decode_int", "decode_fields", "f32_magnitude", "with_sign", "exactly_normal_in_f32", "pow2_f32", "pack_fields",
    "unpack_fields",
]

from dataclasses import dataclass
from typing import NamedTuple

import jax.numpy as jnp
from jax import lax
import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format.

    Fields: ``name``; ``ebits``/``mbits``: exponent and stored mantissa bits; ``bias``;
    ``inf``: whether the format has infinities; ``nan``: which codes are NaN, 'ieee'
    (exponent all ones, mantissa != 0), 'fn' (only exponent and mantissa all ones: OCP
    E4M3FN), 'fnuz' (only 0x80) or 'none' (every code is finite: the OCP MX FP6/FP4);
    ``dtype``: the numpy (ml_dtypes) dtype of its values; ``qnan``: the quiet NaN code
    results take where a model defines no payload ('none' formats: the code a NaN converts
    to, -0, as ml_dtypes converts it).
    """

    name: str
    ebits: int
    mbits: int
    bias: int
    inf: bool
    nan: str
    dtype: np.dtype
    qnan: int

    @property
    def bits(self) -> int:
        """Width of a code: sign, exponent and mantissa bits."""
        return 1 + self.ebits + self.mbits

    @property
    def min_exp(self) -> int:
        """Exponent of the smallest normal number (subnormals share it)."""
        return 1 - self.bias

    @property
    def max_exp(self) -> int:
        """Exponent of the largest finite binade."""
        top = (1 << self.ebits) - 1
        if self.nan == "ieee":
            top -= 1  # the all-ones exponent is Inf/NaN
        return top - self.bias

    @property
    def max_finite(self) -> float:
        """The largest finite value."""
        return float(ml_dtypes.finfo(self.dtype).max)

    @property
    def is_float(self) -> bool:
        return True


@dataclass(frozen=True)
class IntFormat:
    """A two's-complement (``signed``) or unsigned integer format of ``bits`` bits; ``dtype``
    is the narrowest numpy dtype holding its values (int4/uint4 from ml_dtypes)."""

    name: str
    bits: int
    signed: bool
    dtype: np.dtype

    @property
    def is_float(self) -> bool:
        return False

    @property
    def lo(self) -> int:
        """The smallest value."""
        return -(1 << (self.bits - 1)) if self.signed else 0

    @property
    def hi(self) -> int:
        """The largest value."""
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1


F32 = FloatFormat("f32", 8, 23, 127, True, "ieee", np.dtype(np.float32), 0x7FC00000)
F16 = FloatFormat("f16", 5, 10, 15, True, "ieee", np.dtype(np.float16), 0x7E00)
BF16 = FloatFormat("bf16", 8, 7, 127, True, "ieee", np.dtype(ml_dtypes.bfloat16), 0x7FC0)
FP8 = FloatFormat("fp8", 4, 3, 7, False, "fn", np.dtype(ml_dtypes.float8_e4m3fn), 0x7F)
BF8 = FloatFormat("bf8", 5, 2, 15, True, "ieee", np.dtype(ml_dtypes.float8_e5m2), 0x7E)
FP8_FNUZ = FloatFormat("fp8_fnuz", 4, 3, 8, False, "fnuz", np.dtype(ml_dtypes.float8_e4m3fnuz), 0x80)
BF8_FNUZ = FloatFormat("bf8_fnuz", 5, 2, 16, False, "fnuz", np.dtype(ml_dtypes.float8_e5m2fnuz), 0x80)
# OCP MX v1.0 element formats: every code finite, overflow saturates (as ml_dtypes converts)
FP6 = FloatFormat("fp6", 2, 3, 1, False, "none", np.dtype(ml_dtypes.float6_e2m3fn), 0x20)
BF6 = FloatFormat("bf6", 3, 2, 3, False, "none", np.dtype(ml_dtypes.float6_e3m2fn), 0x20)
FP4 = FloatFormat("fp4", 2, 1, 1, False, "none", np.dtype(ml_dtypes.float4_e2m1fn), 0x8)
# CDNA3's xf32: float32 with the low 13 mantissa bits cut (codes are f32 bits >> 13); its
# values are held as float32, so it has no dtype of its own (`format_of(float32)` is F32)
XF32 = FloatFormat("xf32", 8, 10, 127, True, "ieee", np.dtype(np.float32), 0x3FE00)

# IEEE binary64, the f64 MFMA's operands and accumulator (BUILTINS_DENSE.md 11). It is not in
# FLOAT_FORMATS and `format_of(float64)` stays None: everywhere else float64 means exact values
# (quantisation, studies, reference sums), not a format the matrix cores round to
F64 = FloatFormat("f64", 11, 52, 1023, True, "ieee", np.dtype(np.float64), 0x7FF8000000000000)

#: E8M0 block scales (OCP MX): code s is the factor 2**(s - E8M0_BIAS); E8M0_NAN is NaN
E8M0_BIAS = 127
E8M0_NAN = 0xFF

I8 = IntFormat("i8", 8, True, np.dtype(np.int8))
U8 = IntFormat("u8", 8, False, np.dtype(np.uint8))
I4 = IntFormat("i4", 4, True, np.dtype(ml_dtypes.int4))
U4 = IntFormat("u4", 4, False, np.dtype(ml_dtypes.uint4))
I32 = IntFormat("i32", 32, True, np.dtype(np.int32))

FLOAT_FORMATS = {f.name: f for f in (F32, F16, BF16, FP8, BF8, FP8_FNUZ, BF8_FNUZ, FP6, BF6, FP4, XF32)}
INT_FORMATS = {f.name: f for f in (I8, U8, I4, U4, I32)}
_BY_DTYPE = {f.dtype: f for f in (*FLOAT_FORMATS.values(), *INT_FORMATS.values()) if f is not XF32}

#: exponent that MMA-Sim gives to a zero of any format (NUMERICS.md 1.1)
ZERO_EXP = -126


def format_of(dtype) -> FloatFormat | IntFormat | None:
    """The format whose values a numpy ``dtype`` holds (float16 -> F16, int8 -> I8, ...), or
    None for a dtype that is no format here.

    Args:
        dtype: anything `numpy.dtype` accepts.
    Returns:
        The `FloatFormat` or `IntFormat`, or None.
    """
    return _BY_DTYPE.get(np.dtype(dtype))


class Fields(NamedTuple):
    """Decoded float operand, all int32 except the flags (bool) and ``val`` (float32).

    value = (-1)**sign * sig * 2**(exp - mbits); ``exp`` follows MMA-Sim (subnormals share
    ``min_exp``, zero gets -126). ``val`` is the exact float32 value for formats whose every
    value is a normal f32 or zero (f16, fp8, bf8); it is None otherwise.
    """

    sign: jnp.ndarray
    sig: jnp.ndarray
    exp: jnp.ndarray
    nan: jnp.ndarray
    inf: jnp.ndarray
    val: jnp.ndarray | None


def exactly_normal_in_f32(fmt: FloatFormat) -> bool:
    """Every value of ``fmt`` is zero or a normal float32 (f16, fp8, bf8)."""
    return fmt.min_exp - fmt.mbits >= -126 and fmt.max_exp <= 127


def decode_fields(fmt: FloatFormat, code: jnp.ndarray) -> tuple:
    """(sign, sig, exp, nan, inf) of ``fmt`` bit patterns held in the low bits of an integer
    array, as in `Fields`: the one decoder of the XLA path and the Pallas kernels (only
    elementwise int32 ops and selects, so it lowers to Triton too). F64 codes are int64 and
    give an int64 ``sig`` (inside `x64_scope`)."""
    if fmt.bits == 64:
        code = code.astype(jnp.int64)
    else:
        code = code.astype(jnp.int32) & ((1 << fmt.bits) - 1)
    mmask = (1 << fmt.mbits) - 1
    emask = (1 << fmt.ebits) - 1
    sign = ((code >> (fmt.bits - 1)) & 1).astype(jnp.int32)
    ef = ((code >> fmt.mbits) & emask).astype(jnp.int32)
    mant = code & mmask
    sig = jnp.where(ef != 0, mant | (1 << fmt.mbits), mant)
    if fmt.nan == "ieee":
        special = ef == emask
        nan = special & (mant != 0)
        inf = special & (mant == 0)
    elif fmt.nan == "fn":
        nan = (ef == emask) & (mant == mmask)
        inf = jnp.zeros_like(nan)
    elif fmt.nan == "none":  # OCP MX FP6/FP4: every code is a finite value
        nan = jnp.zeros(code.shape, bool)
        inf = jnp.zeros_like(nan)
    else:  # fnuz: 0x80 is the only NaN, there is no -0
        nan = code == (1 << (fmt.bits - 1))
        inf = jnp.zeros_like(nan)
        sign = jnp.where(nan, 0, sign)
    special = nan | inf
    sig = jnp.where(special, 0, sig)
    exp = jnp.where(sig == 0, ZERO_EXP, jnp.maximum(ef, 1) - fmt.bias).astype(jnp.int32)
    return sign, sig, exp, nan, inf


def decode(fmt: FloatFormat, code: jnp.ndarray) -> Fields:
    """Decode ``fmt`` bit patterns held in the low bits of an integer array."""
    sign, sig, exp, nan, inf = decode_fields(fmt, code)
    return Fields(sign, sig, exp, nan, inf, _f32_value(fmt, sign, sig, exp, nan, inf))


def _f32_value(fmt: FloatFormat, sign, sig, exp, nan, inf):
    """The exact float32 value of decoded fields (Inf and NaN included), for formats whose
    every value is a normal f32 or zero; None for the others."""
    mag = f32_magnitude(fmt, sig, exp)
    if mag is None:
        return None
    mag = jnp.where(inf, jnp.float32(np.inf), mag)
    mag = jnp.where(nan, jnp.float32(np.nan), mag)
    return with_sign(mag, sign)


def with_sign(mag: jnp.ndarray, sign: jnp.ndarray) -> jnp.ndarray:
    """``mag`` with its sign bit set where ``sign`` is 1: ``-mag`` for every ``mag`` whose sign
    bit is clear, -0 included.

    Args:
        mag: float32 array (+0, positive, +Inf or +NaN), or float64 array of finite values that
            are 0 or normal (``fields_to_f64``: every value of a 32-bit or narrower format is).
        sign: 0/1 integers, broadcastable to ``mag``.
    Returns:
        ``mag``'s dtype and shape.

    Never ``-mag``: Pallas' Triton lowering computes a negation as 0 - x, which gives +0 for
    x = +0 (an H100 returned +0 where every product and C were -0). Each dtype takes the one
    form that held on every platform:
    - float32 by integer bits: a multiply would flush its subnormals on XLA:CPU.
    - float64 by a multiply with +-1.0, exact for these normal values. Its integer-bits form
      made XLA:GPU (JAX 0.11.2, H100) round 76 `exact` crosscheck keys 1-2 ulp off: the
      builtins of 32 or more products, whose float64 band sums follow this value."""
    if jnp.dtype(mag.dtype) == jnp.float64:
        return mag * jnp.where(jnp.asarray(sign) == 1, -1.0, 1.0).astype(jnp.float64)
    bits = lax.bitcast_convert_type(mag, jnp.int32) | (jnp.asarray(sign).astype(jnp.int32) << 31)
    return lax.bitcast_convert_type(bits, mag.dtype)


def f32_magnitude(fmt: FloatFormat, sig, exp):
    """The exact float32 magnitude of decoded fields, for formats whose every value is a
    normal f32 or zero (so no arithmetic on subnormals); NaN and Inf fields (sig 0) read 0.
    None for the other formats."""
    if not exactly_normal_in_f32(fmt):
        return None
    return sig.astype(jnp.float32) * pow2_f32(jnp.where(sig == 0, 0, exp - fmt.mbits))


def value_exponent(val: jnp.ndarray, fmt: FloatFormat) -> jnp.ndarray:
    """`Fields.exp` of nonzero finite values of ``fmt`` from their exact float32 values (`decode`'s
    ``val``): the float32 exponent, read from the bits (never a float op), or ``fmt``'s least
    exponent for its subnormals (whose float32 values are normal for every format with a
    ``val``).

    Args:
        val: float32 array, exact values of ``fmt``; fmt: their format.
    Returns:
        int32 array of ``val``'s shape (meaningless where ``val`` is zero, NaN or Inf).
    """
    return jnp.maximum(((lax.bitcast_convert_type(val, jnp.int32) >> 23) & 0xFF) - 127, fmt.min_exp)


def decode_int(fmt: IntFormat, code: jnp.ndarray) -> jnp.ndarray:
    """Sign- or zero-extend ``fmt.bits``-wide integers held in the low bits of ``code``."""
    code = code.astype(jnp.int32) & ((1 << fmt.bits) - 1)
    if fmt.signed:
        code = jnp.where(code >= (1 << (fmt.bits - 1)), code - (1 << fmt.bits), code)
    return code


def pow2_f32(n: jnp.ndarray) -> jnp.ndarray:
    """2**n as float32 for integer n in [-126, 127], written into the exponent bits
    (jnp.exp2 is exp(x*ln2) in XLA and not exact)."""
    n = jnp.asarray(n, jnp.int32)
    return lax.bitcast_convert_type(((n + 127) & 0xFF) << 23, jnp.float32)


# ------------------------------------------------------------------ one-word packing of fields
# Moving decoded operands around (the gather of selected B rows) costs one int32 word per
# element instead of five arrays: sig in bits 11:0, exp + 512 in 21:12, sign 22, nan 23, inf 24.
def pack_fields(f: Fields) -> jnp.ndarray:
    """The int32 word of decoded fields (layout above); `unpack_fields` inverts it."""
    return (
        f.sig
        | ((f.exp + 512) << 12)
        | (f.sign << 22)
        | (f.nan.astype(jnp.int32) << 23)
        | (f.inf.astype(jnp.int32) << 24)
    )


def unpack_fields(fmt: FloatFormat, w) -> Fields:
    """Fields of ``fmt`` from the words of `pack_fields` (``val`` rebuilt when ``fmt`` has it)."""
    sig = w & 0xFFF
    exp = ((w >> 12) & 0x3FF) - 512
    sign = (w >> 22) & 1
    nan = ((w >> 23) & 1) == 1
    inf = ((w >> 24) & 1) == 1
    return Fields(sign, sig, exp, nan, inf, _f32_value(fmt, sign, sig, exp, nan, inf))
