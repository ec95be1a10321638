"""Rounding of int32 magnitudes into float bit patterns with int32 arithmetic only.

`jwmma.rounding.round_to_format` works on int64; a gfx12 step total fits int32
(NUMERICS.md 2.2: |total| < 2**29), so the per-step rounding can stay in 32-bit lanes (int64
costs two or more instructions per operation on a GPU). Same bits for mag < 2**31.
Also the float shortcut for f32 results: an int32 -> f32 conversion is one RNE to 24 bits,
and scaling by a power of two is exact while the result is normal.
"""
from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from ...numerics.formats import FloatFormat

from . import kernel_lib as kl

__all__ = ["round_to_format32", "f32_normal_ok", "round_f32_by_float", "with_f32_subnormals"]


def _shift_rne(mag, shift):
    """mag * 2**-shift rounded to an integer, ties to even: int32 mag in [0, 2**31), shift of
    either sign (a left shift when negative; 0 beyond 31 to the right)."""
    right = jnp.clip(shift, 0, 31)
    left = jnp.clip(-shift, 0, 31)
    q = jnp.where(shift > 0, mag >> right, mag << left)
    rem = mag & ((jnp.int32(1) << right) - 1)
    half = jnp.where(right > 0, jnp.int32(1) << jnp.maximum(right - 1, 0), 0)
    far = shift > 31
    up = ~far & ((rem > half) | ((rem == half) & (rem != 0) & ((q & 1) == 1)))
    return jnp.where(far, 0, q) + up.astype(jnp.int32)


def round_to_format32(sign, mag, scale, fmt: FloatFormat):
    """Bits of (-1)**sign * mag * 2**scale rounded to ``fmt`` (RNE, gradual underflow,
    overflow to Inf); mag int32 in [0, 2**31), scale int32. Returns int32 bits."""
    lead = kl.bitlen32(mag) - 1 + scale
    ovf = (mag != 0) & (lead > fmt.max_exp)
    te = jnp.clip(lead, fmt.min_exp, fmt.max_exp)
    q = _shift_rne(mag, te - fmt.mbits - scale)
    bits = ((te + fmt.bias - 1) << fmt.mbits) + q
    bits = jnp.where(mag == 0, 0, bits)
    emask = (1 << fmt.ebits) - 1
    limit = (emask << fmt.mbits) if fmt.inf else (1 << (fmt.ebits + fmt.mbits)) - 1
    bits = jnp.where(ovf, limit, jnp.minimum(bits, limit))
    return bits | (sign << (fmt.bits - 1))


def f32_normal_ok(total, G):
    """Tile-wide scalar: every nonzero total * 2**G is at least 2**-126 (no subnormal f32
    result), so `round_f32_by_float` gives the exact bits for the whole tile."""
    mag = jnp.abs(total)
    lead = kl.bitlen32(mag) - 1 + G
    return jnp.min(jnp.min(jnp.where(mag == 0, 0, lead), axis=1), axis=0) >= -126  # one axis at a time (Mosaic GPU)


def round_f32_by_float(total, G):
    """f32 bits of RNE(total * 2**G) for int32 total, G in [-152, 254], normal results
    (`f32_normal_ok`): one conversion (the only rounding) and two exact power-of-two
    scalings (each factor a normal f32; an overflow gives Inf as RNE does)."""
    g1 = G >> 1  # clipped: a zero total may come with any G, and must give +0, not 0 * Inf
    x = total.astype(jnp.float32) * kl.pow2_f32(jnp.clip(g1, -126, 127)) * kl.pow2_f32(jnp.clip(G - g1, -126, 127))
    return lax.bitcast_convert_type(x, jnp.int32)


def with_f32_subnormals(total, G, bits):
    """``bits`` (`round_f32_by_float`'s, right for every normal result of the tile) with each
    nonzero result below 2**-126 rounded at 2**-149, ties to even, on int32: the rare branch
    of a tile that holds one. A whole `round_to_format32` there took a sixth of Triton's compile
    of the gfx12 kernels and made the fp8 one spill (benchmarks/RESULTS.md)."""
    mag = jnp.abs(total)
    sub = (mag != 0) & (kl.bitlen32(mag) - 1 + G < -126)
    q = _shift_rne(mag, -149 - G)  # in units of 2**-149: `round_to_format32` at its least exponent
    return jnp.where(sub, q | ((total < 0).astype(jnp.int32) << 31), bits)
