"""Exact rounding into bit patterns, with integer arithmetic only.

The matrix cores keep subnormals; XLA's CPU backend flushes them in float arithmetic and in
its f64->f32 cast. So every result is rounded here, from an exact integer or float64 value,
straight into the destination's bit pattern (round to nearest even, gradual underflow,
overflow to Inf). These functions need 64-bit types: call them inside `x64_scope()`.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from .formats import F32, FloatFormat, decode, with_sign

__all__ = ["x64_scope", "pow2_f64", "fields_to_f64", "value_f64", "two_sum", "round_to_odd", "round_to_format", "round_f64",
           "round_f64_to_f32",
           "add_rn", "bits_to", "float_bits"]


def x64_scope():
    """A context in which 64-bit types exist, whatever the user's ``jax_enable_x64``.

    The emulator needs int64/float64 internally (exact sums, 2**k scaling). It enters this
    scope around its own jitted kernels only; the user's global setting is never changed.
    """
    if hasattr(jax, "enable_x64") and callable(jax.enable_x64):
        return jax.enable_x64(True)
    from jax.experimental import enable_x64  # older JAX

    return enable_x64()


def pow2_f64(n):
    """2**n as float64 for integer n in [-1022, 1023], written into the exponent bits (an exact
    power, unlike jnp.exp2)."""
    n = jnp.asarray(n).astype(jnp.int64)
    return lax.bitcast_convert_type((n + 1023) << 52, jnp.float64)


def fields_to_f64(sign, sig, exp, mbits: int):
    """Exact float64 value of decoded fields (finite values only)."""
    mag = sig.astype(jnp.float64) * pow2_f64(exp - mbits)
    return with_sign(mag, sign)  # keeps -0 in the Pallas kernels too


def value_f64(f, mbits: int):
    """Exact float64 value of decoded fields, +-Inf and NaN included.

    Args:
        f: decoded fields (`formats.Fields` or anything with sign, sig, exp, nan, inf).
        mbits: the format's mantissa bits.
    Returns:
        float64 array (NaN positive; a zero keeps its sign)."""
    v = fields_to_f64(f.sign, f.sig, jnp.where(f.nan | f.inf, 0, f.exp), mbits)
    v = jnp.where(f.inf, jnp.where(f.sign == 1, -jnp.inf, jnp.inf), v)
    return jnp.where(f.nan, jnp.nan, v)


def two_sum(a, b):
    """Knuth's error-free sum: a + b == s + e exactly (no overflow)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def round_to_odd(s, e):
    """The float64 nearest-odd rounding of the exact value s + e, given s = RN(s + e).

    Rounding the result once more to a format with at most 51 bits gives the correctly
    rounded value of s + e (the classic round-to-odd argument).
    """
    bits = lax.bitcast_convert_type(s, jnp.int64)
    even = (bits & 1) == 0
    toward = jnp.where((e > 0) == (s > 0), 1, -1).astype(jnp.int64)
    bits = jnp.where((e != 0) & even, bits + toward, bits)
    return lax.bitcast_convert_type(bits, jnp.float64)


def _bitlen64(x):
    return 64 - lax.clz(x)


def round_to_format(sign, mag, scale, fmt: FloatFormat, sticky=None):
    """Bits of (-1)**sign * (mag + sticky*tiny) * 2**scale rounded to ``fmt`` (RNE).

    sign: 0/1 ints; mag: int64 >= 0, < 2**62; scale: ints; sticky: bool, True when
    the exact value is a little above mag*2**scale (less than one unit of mag). Returns int32
    bit patterns; zero gives +0 or -0 by ``sign``; overflow gives +-Inf (NaN for formats
    without Inf).
    """
    mag = mag.astype(jnp.int64)
    scale = jnp.asarray(scale).astype(jnp.int64)
    if sticky is None:
        sticky = jnp.zeros(mag.shape, bool)
    lead = _bitlen64(mag) - 1 + scale  # exponent of the leading bit
    te = jnp.maximum(lead, fmt.min_exp)
    shift = te - fmt.mbits - scale  # low bits of mag below the target's last place
    right = jnp.clip(shift, 0, 63)
    left = jnp.clip(-shift, 0, 62)
    q = jnp.where(shift > 0, mag >> right, mag << left)
    rem = mag & ((jnp.int64(1) << right) - 1)
    half = jnp.where(right > 0, jnp.int64(1) << jnp.maximum(right - 1, 0), 0)
    above = (rem > half) | ((rem == half) & (rem != 0) & sticky)
    tie = (rem == half) & (rem != 0) & ~sticky
    # beyond 63 dropped bits everything lies below half an ulp
    q = jnp.where(shift > 63, 0, q)
    above = jnp.where(shift > 63, False, above)
    tie = jnp.where(shift > 63, False, tie)
    up = above | (tie & ((q & 1) == 1))
    q = q + up.astype(jnp.int64)
    bits = ((te + fmt.bias - 1) << fmt.mbits) + q
    bits = jnp.where(mag == 0, 0, bits)
    emask = (1 << fmt.ebits) - 1
    if fmt.inf:
        limit = emask << fmt.mbits  # the Inf pattern
        bits = jnp.where(bits >= limit, limit, bits)
    else:
        top = (1 << (fmt.ebits + fmt.mbits)) - 1
        bits = jnp.where(bits >= top, top, bits)  # no Inf: overflow is NaN (0x7F)
    bits = bits | (sign.astype(jnp.int64) << (fmt.bits - 1))
    return bits.astype(jnp.int32)


def round_f64(x, fmt: FloatFormat):
    """Bits of the float64 array ``x`` rounded to ``fmt`` (RNE, gradual underflow).

    NaN gives the format's quiet NaN, +-Inf and overflow give +-Inf. float64 subnormals do
    not occur in the emulator's ranges and are treated as zero.
    """
    b = lax.bitcast_convert_type(x, jnp.int64)
    sign = ((b >> 63) & 1).astype(jnp.int32)
    ef = (b >> 52) & 0x7FF
    m = b & ((jnp.int64(1) << 52) - 1)
    mag = jnp.where(ef == 0, 0, m | (jnp.int64(1) << 52))
    bits = round_to_format(sign, mag, ef - 1075, fmt)
    inf_bits = ((1 << fmt.ebits) - 1) << fmt.mbits if fmt.inf else fmt.qnan
    bits = jnp.where((ef == 0x7FF) & (m == 0), inf_bits | (sign << (fmt.bits - 1)), bits)
    bits = jnp.where((ef == 0x7FF) & (m != 0), fmt.qnan, bits)
    return bits


def _srl(x, n):
    """Logical right shift of int32 ``x`` by ``n`` (an int or an int32 array)."""
    return lax.shift_right_logical(x, jnp.asarray(n, jnp.int32))


def round_f64_to_f32(x):
    """`round_f64(x, F32)` on the float64's two 32-bit words: the same bits, without 64-bit
    integer arithmetic (two or more instructions per operation on a GPU), no branch.

    The significand S (53 bits, the leading one included) is the top word's 21 low bits and
    the low word. A normal result keeps S's top 24 bits (RNE on the 29 below: above half, or
    half with an odd last bit; a carry out of the fraction moves into the exponent, and past
    254 into Inf, as the bit pattern's order gives). A subnormal result is S shifted right by
    30 or more places, rounded the same way on the dropped bits (a carry gives the smallest
    normal). float64 subnormals count as zero, NaN gives 0x7FC00000 and Inf keeps its sign,
    as in `round_f64`.

    Args:
        x: float64 array.
    Returns:
        int32 f32 bit patterns of x's shape.
    """
    b = lax.bitcast_convert_type(x, jnp.int64)
    hi = (b >> 32).astype(jnp.int32)
    lo = ((b << 32) >> 32).astype(jnp.int32)  # the low word, sign-extended: fits an int32
    ef = (hi >> 20) & 0x7FF  # the float64 exponent field
    e = ef - (1023 - 127)  # the f32 exponent field of a normal result
    top = (hi & 0xFFFFF) | 0x100000  # S's top 21 bits

    # normal results (e >= 1)
    frac = ((hi & 0xFFFFF) << 3) | _srl(lo, 29)
    rem = lo & 0x1FFFFFFF
    up = (rem > 0x10000000) | ((rem == 0x10000000) & ((frac & 1) == 1))
    normal = ((e << 23) | frac) + up.astype(jnp.int32)

    # subnormal results (e <= 0): q = S >> s with s = 30 - e; beyond s = 63 every bit is gone
    s = jnp.clip(30 - e, 30, 63)
    q = jnp.where(s >= 32, _srl(top, jnp.clip(s - 32, 0, 31)),
                  (top << jnp.clip(32 - s, 0, 2)) | _srl(lo, jnp.clip(s, 0, 31)))
    h = s - 1  # the half bit's place in S
    hh = jnp.clip(h - 32, 0, 30)
    hl = jnp.clip(h, 0, 31)
    half_bit = jnp.where(h >= 32, _srl(top, hh) & 1, _srl(lo, hl) & 1) == 1
    sticky = jnp.where(h >= 32, ((top & ((1 << hh) - 1)) != 0) | (lo != 0), (lo & ((1 << hl) - 1)) != 0)
    sub = q + (half_bit & (sticky | ((q & 1) == 1))).astype(jnp.int32)

    bits = jnp.where(e >= 1, normal, sub)
    bits = jnp.where(e > 254, 0x7F800000, bits)  # beyond the largest finite f32, Inf and NaN: Inf
    bits = jnp.where(ef == 0, 0, bits) | (hi & jnp.int32(-(1 << 31)))
    return jnp.where((ef == 0x7FF) & (((hi & 0xFFFFF) | lo) != 0), F32.qnan, bits)


def add_rn(p, acc, fmt: FloatFormat):
    """float64 of RN_fmt(p + acc): one correct rounding (nearest even, gradual underflow,
    overflow to Inf) of the exact sum of two float64 values, IEEE specials (Inf - Inf and NaN:
    NaN). The sum is split error-free (`two_sum`), rounded to odd in float64 and then into
    ``fmt``'s bits (at most 51 significand bits), which is one rounding of the exact sum; the
    result is read back exactly. An emulated FMA when ``p`` is an exact product."""
    s, e = two_sum(p, acc)
    t = jnp.where(jnp.isfinite(p) & jnp.isfinite(acc), round_to_odd(s, e), p + acc)
    return value_f64(decode(fmt, round_f64(t, fmt)), fmt.mbits)


def bits_to(fmt: FloatFormat, bits):
    """View int32 bit patterns as a float array of ``fmt`` (no arithmetic, no flushing)."""
    if fmt.bits == 32:
        return lax.bitcast_convert_type(bits.astype(jnp.int32), jnp.float32)
    return lax.bitcast_convert_type(bits.astype(jnp.uint16), jnp.dtype(fmt.dtype))


def float_bits(x):
    """int32 bit patterns of a float32/float16/bfloat16 array (no arithmetic)."""
    x = jnp.asarray(x)
    if x.dtype == jnp.float32:
        return lax.bitcast_convert_type(x, jnp.int32)
    return lax.bitcast_convert_type(x, jnp.uint16).astype(jnp.int32)
