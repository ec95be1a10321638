"""One exactly emulated f64 fused multiply-add, on integer bits (NUMERICS.md 10).

RN_f64(a * b + c) with a single rounding to nearest even, IEEE gradual underflow, overflow to
Inf and IEEE specials, for decoded f64 operands. No float arithmetic is used: XLA has no f64 FMA
it promises to round once, and XLA's CPU backend flushes f64 subnormals in float arithmetic.
The 53 x 53-bit significand product is formed exactly in 128 bits (uint64 hi/lo words from
32-bit limbs), C is aligned against it in the same 128-bit frame, the sum or difference is
exact up to a sticky bit, and one rounding gives the f64 bit pattern. Needs 64-bit types: call
inside `x64_scope()`.

Signed zeros follow IEEE 754 under round to nearest: an exact zero sum of nonzero terms is +0;
a zero product plus a zero C is -0 only when both are -0.
"""
from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from .formats import F64, Fields

__all__ = ["fma_f64", "QNAN_F64", "INF_F64"]

#: the canonical quiet NaN and +Inf bit patterns (int64)
QNAN_F64 = F64.qnan
INF_F64 = 0x7FF << 52
_FRAME = 125  # both terms are shifted so that their leading bit sits at bit 125 of 128
_ZERO_SCALE = -(1 << 20)  # the frame exponent given to a zero term: below every other one
_U = jnp.uint64


def _shl(x, s):
    """x << s for uint64 x and int64 s; 0 where s is outside 0..63 (XLA leaves such shifts to
    the backend)."""
    return jnp.where((s < 0) | (s > 63), _U(0), x << jnp.clip(s, 0, 63).astype(_U))


def _shr(x, s):
    """x >> s (logical) for uint64 x and int64 s; 0 where s is outside 0..63."""
    return jnp.where((s < 0) | (s > 63), _U(0), x >> jnp.clip(s, 0, 63).astype(_U))


def _shl128(hi, lo, s):
    """(hi, lo) << s for any s >= 0 (bits beyond 128 are dropped)."""
    return _shl(hi, s) | _shr(lo, 64 - s) | _shl(lo, s - 64), _shl(lo, s)


def _shr128(hi, lo, s):
    """(hi, lo) >> s for any s >= 0, and whether a nonzero bit was shifted out (sticky)."""
    nh, nl = _shr(hi, s), _shr(lo, s) | _shl(hi, 64 - s) | _shr(hi, s - 64)
    bh, bl = _shl128(nh, nl, s)
    return nh, nl, (bh != hi) | (bl != lo)


def _bitlen(x):
    return 64 - lax.clz(x).astype(jnp.int64)


def _bitlen128(hi, lo):
    """Position of the leading one plus 1 (0 for zero), as int64."""
    return jnp.where(hi != 0, 64 + _bitlen(hi), _bitlen(lo))


def _product(sa, sb):
    """The exact product of two significands below 2**53 as 128-bit (hi, lo) uint64 words."""
    sa, sb = sa.astype(_U), sb.astype(_U)
    mask = _U(0xFFFFFFFF)
    a0, a1, b0, b1 = sa & mask, sa >> _U(32), sb & mask, sb >> _U(32)
    ll = a0 * b0  # < 2**64
    mid = a0 * b1 + a1 * b0  # < 2**54
    lo = ll + (mid << _U(32))
    carry = (lo < ll).astype(_U)
    return a1 * b1 + (mid >> _U(32)) + carry, lo


def _normalize(hi, lo, scale):
    """(hi, lo) * 2**scale with the leading bit moved to `_FRAME`; a zero gets `_ZERO_SCALE`."""
    lead = _bitlen128(hi, lo) - 1
    s = jnp.where(lead < 0, 0, _FRAME - lead)
    hi, lo = _shl128(hi, lo, s)
    return hi, lo, jnp.where(lead < 0, _ZERO_SCALE, scale - s)


def _round(sign, hi, lo, scale, sticky):
    """int64 f64 bits of (-1)**sign * ((hi, lo) + sticky * tiny) * 2**scale, RNE, gradual
    underflow, overflow to Inf; ``sticky``: the exact value lies a little above (hi, lo) (less
    than one unit of its last bit). (hi, lo) must be nonzero."""
    lead = _bitlen128(hi, lo) - 1 + scale  # exponent of the leading bit
    te = jnp.maximum(lead, F64.min_exp)
    drop = te - F64.mbits - scale  # low bits of (hi, lo) below the result's last place
    # keep one more bit than the result (the half bit); what lies below it is sticky
    _, q2, below = _shr128(hi, lo, jnp.maximum(drop - 1, 0))
    _, left = _shl128(hi, lo, jnp.maximum(-drop, 0))
    half = jnp.where(drop >= 1, q2 & _U(1), _U(0))
    q = jnp.where(drop >= 1, q2 >> _U(1), left)
    up = (half == 1) & ((below | sticky) | ((q & _U(1)) == 1))
    q = (q + up.astype(_U)).astype(jnp.int64)
    # (te + bias - 1) << mbits plus q: a carry out of q moves into the exponent (subnormal to
    # normal, or the next binade); te is clamped so the shift stays in int64
    bits = ((jnp.minimum(te, F64.max_exp + 1) + F64.bias - 1) << F64.mbits) + q
    bits = jnp.where(bits >= INF_F64, INF_F64, bits)
    return bits | (sign.astype(jnp.int64) << 63)


def fma_f64(a: Fields, b: Fields, c: Fields):
    """int64 bits of RN_f64(a * b + c), IEEE 754 fusedMultiplyAdd under round to nearest even.

    Args:
        a, b, c: decoded f64 operands (`jwmma.numerics.formats.decode(F64, ...)`: int64 ``sig``,
            int32 ``exp``, value (-1)**sign * sig * 2**(exp - 52)); shapes broadcast.
    Returns:
        int64 bit patterns; a NaN result is `QNAN_F64` (a NaN operand, Inf * 0, Inf - Inf).
    """
    zero_a = (a.sig == 0) & ~a.nan & ~a.inf
    zero_b = (b.sig == 0) & ~b.nan & ~b.inf
    sp = a.sign ^ b.sign
    p_nan = a.nan | b.nan | (a.inf & zero_b) | (b.inf & zero_a)
    p_inf = (a.inf | b.inf) & ~p_nan
    nan = p_nan | c.nan | (p_inf & c.inf & (sp != c.sign))
    inf = (p_inf | c.inf) & ~nan
    inf_sign = jnp.where(p_inf, sp, c.sign)

    # the exact terms in one 128-bit frame each: value = (hi, lo) * 2**scale
    ph, pl = _product(jnp.where(p_inf | p_nan, 0, a.sig), jnp.where(p_inf | p_nan, 0, b.sig))
    ph, pl, pe = _normalize(ph, pl, a.exp.astype(jnp.int64) + b.exp - 2 * F64.mbits)
    sig_c = jnp.where(c.inf | c.nan, 0, c.sig).astype(_U)
    ch, cl, ce = _normalize(jnp.zeros_like(sig_c), sig_c, c.exp.astype(jnp.int64) - F64.mbits)
    ph, pl, ch, cl = jnp.broadcast_arrays(ph, pl, ch, cl)
    pe, ce = jnp.broadcast_arrays(pe, ce)

    # X: the term of larger magnitude; Y is aligned to it (its lost low bits become sticky)
    p_big = (pe > ce) | ((pe == ce) & ((ph > ch) | ((ph == ch) & (pl >= cl))))
    xh, xl, yh, yl = (jnp.where(p_big, u, v) for u, v in ((ph, ch), (pl, cl), (ch, ph), (cl, pl)))
    scale = jnp.maximum(pe, ce)
    yh, yl, sticky = _shr128(yh, yl, jnp.minimum(jnp.abs(pe - ce), 256))
    sx = jnp.where(p_big, sp, c.sign)
    same = sx == jnp.where(p_big, c.sign, sp)
    # same signs: X + Y; else X - Y - sticky (the exact X - Y lies in (M, M + 1) when Y lost bits;
    # then Y < 2**124 <= X / 2, so the result's last place is far above bit 0)
    add_l = xl + yl
    add_h = xh + yh + (add_l < xl).astype(_U)
    sub = yl + sticky.astype(_U)
    sub_h = yh + (sub < yl).astype(_U)
    sub_l = xl - sub
    sub_h = xh - sub_h - (xl < sub).astype(_U)
    mh, ml = jnp.where(same, add_h, sub_h), jnp.where(same, add_l, sub_l)

    exact_zero = (mh == 0) & (ml == 0)
    # exact zero: +0, unless a zero product meets a zero C and both are -0
    zero_sign = jnp.where((zero_a | zero_b) & (c.sig == 0) & ~c.nan & ~c.inf, sp & c.sign, 0)
    finite = jnp.where(exact_zero, zero_sign.astype(jnp.int64) << 63,
                       _round(sx, jnp.where(exact_zero, _U(0), mh), jnp.where(exact_zero, _U(1), ml), scale, sticky))
    out = jnp.where(inf, jnp.int64(INF_F64) | (inf_sign.astype(jnp.int64) << 63), finite)
    return jnp.where(nan, jnp.int64(QNAN_F64), out)
