"""Quantising a model's matmul operands into a builtin's input formats (API.md section 9).

The recipe is `jwmma.study`'s (`jwmma.study.data.quantise`), carried out exactly on bit
patterns so that it gives the same bits under jit, on CPU and GPU, whatever
``jax_enable_x64`` says:

1. every input is taken at its exact value (float64 inputs are first rounded to float32, RNE
   with subnormals, so that numpy float64 inputs give the same result with and without the
   user's x64 flag);
2. ``"row"``: each slice along the reduction axis (a row of x, an output channel = a column
   of w) gets the factor s = max_finite / amax (float64, RN); ``"tensor"``: one factor for
   the whole operand; an all-zero slice (or a NaN amax) gets s = 1; ``"none"``: no factor;
3. the value v * s (float64, RN) is clipped to +-max_finite (``"row"``/``"tensor"``) and
   rounded once to the format (RNE, gradual underflow; for ``"none"`` a value beyond the
   range becomes Inf, or NaN in formats without Inf, as ``astype`` does; FNUZ formats have no
   -0);
4. the factor is undone in float32: the inverse r = amax / max_finite is rounded to float32
   (1 for s = 1), and an accumulator d becomes fl32(fl32(d * r_w) * r_x), IEEE float32
   multiplications (subnormals kept).

The XLA CPU backend flushes float32 subnormals in float arithmetic, so the float32 steps are
float64 products (exact: 24 x 24 bits) rounded into float32 bits by
`jwmma.numerics.rounding.round_f64`. Call everything here inside `x64_scope()`.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jax import lax

from ..numerics.formats import F32, FloatFormat, decode, format_of
from ..numerics.rounding import round_f64, value_f64

__all__ = ["SCALINGS", "Quantised", "exact_f64", "f32_bits_to_f64", "amax", "quantise", "rescale", "effective",
           "overflow_limit", "cast"]

#: the values of ``scaling=``
SCALINGS = ("row", "tensor", "none")


class Quantised(NamedTuple):
    """One operand quantised: ``values`` in the format's dtype (the builtin's input), ``inv``
    the float32 inverse factors (broadcastable against the operand; 1 for ``"none"``)."""

    values: jnp.ndarray
    inv: jnp.ndarray


def f32_bits_to_f64(bits):
    """The exact float64 value of float32 bit patterns (int32), subnormals, Inf and NaN kept."""
    return value_f64(decode(F32, bits), F32.mbits)


def exact_f64(x):
    """The exact float64 value of a float array of any jwmma-known dtype (float64 itself is
    rounded to float32 first, see the module doc).

    Args:
        x: float64, float32, float16, bfloat16 or an ml_dtypes fp8 array.
    Returns:
        float64 array of the same shape.
    """
    d = np.dtype(x.dtype)
    if d == np.float64:
        return f32_bits_to_f64(round_f64(x, F32))
    if d == np.float32:
        return f32_bits_to_f64(lax.bitcast_convert_type(x, jnp.int32))
    fmt = format_of(d)
    width = {2: jnp.uint16, 1: jnp.uint8}[d.itemsize]
    return value_f64(decode(fmt, lax.bitcast_convert_type(x, width).astype(jnp.int32)), fmt.mbits)


def amax(v, axis):
    """max |v| along ``axis`` (kept as size 1), or over everything for axis None (NaN wins)."""
    return jnp.max(jnp.abs(v), axis=axis, keepdims=True)


def overflow_limit(fmt: FloatFormat) -> float:
    """The smallest magnitude that rounds (RNE) past the format's largest finite value."""
    return fmt.max_finite + 2.0 ** (fmt.max_exp - fmt.mbits - 1)


def _round(v, fmt: FloatFormat, clip: bool):
    """Codes (int32) of float64 ``v`` rounded once to ``fmt``."""
    hi = fmt.max_finite
    if clip:
        v = jnp.clip(v, -hi, hi)  # NaN stays NaN
    bits = round_f64(v, fmt)
    sign_bit = 1 << (fmt.bits - 1)
    if not fmt.inf:  # beyond the range: NaN (round_to_format saturates FNUZ codes)
        bits = jnp.where(jnp.abs(v) >= overflow_limit(fmt), fmt.qnan, bits)
    if fmt.nan == "fnuz":  # no -0: the sign of a zero is dropped (0x80 is the NaN)
        bits = jnp.where((bits == sign_bit) & ~jnp.isnan(v), 0, bits)
    return bits


def _codes_to_values(fmt: FloatFormat, bits):
    width = jnp.uint16 if fmt.bits == 16 else jnp.uint8
    return lax.bitcast_convert_type(bits.astype(width), jnp.dtype(fmt.dtype))


def cast(v64, fmt: FloatFormat):
    """float64 values rounded once into ``fmt`` as scaling ``"none"`` rounds them (RNE, gradual
    underflow, beyond the range Inf, or NaN in formats without Inf; FNUZ has no -0).

    Args:
        v64: float64 array; fmt: a float format of 8 or 16 bits.
    Returns:
        Array of ``fmt.dtype``, same shape.
    """
    return _codes_to_values(fmt, _round(v64, fmt, clip=False))


def _f32(v64):
    """float64 -> float32 value, correctly rounded (RNE, subnormals kept)."""
    return lax.bitcast_convert_type(round_f64(v64, F32), jnp.float32)


def quantise(v, fmt: FloatFormat, scaling: str, axis) -> Quantised:
    """Quantise exact float64 values ``v`` into ``fmt`` (steps 2-3 of the module doc).

    Args:
        v: float64 array (`exact_f64` of the operand).
        fmt: the destination format; scaling: one of `SCALINGS`.
        axis: the reduction axis of the operand (the slices along it share one factor for
            ``"row"``); ignored for ``"tensor"`` and ``"none"``.
    Returns:
        `Quantised`: values in ``fmt.dtype``, float32 inverse factors.
    """
    if scaling == "none":
        return Quantised(_codes_to_values(fmt, _round(v, fmt, clip=False)), jnp.ones((1,) * v.ndim, jnp.float32))
    m = amax(v, axis if scaling == "row" else None)
    ok = m > 0  # False for NaN, as in jwmma.study's recipe
    hi = fmt.max_finite
    s = jnp.where(ok, hi / jnp.where(ok, m, 1.0), 1.0)
    inv = _f32(jnp.where(ok, m / hi, 1.0))
    return Quantised(_codes_to_values(fmt, _round(v * s, fmt, clip=True)), inv)


def _mul_f32(a64, b64):
    """fl32(a * b) of two float32 values given as float64 (the product is exact in float64)."""
    return f32_bits_to_f64(round_f64(a64 * b64, F32))


def rescale(acc64, inv_a, inv_b):
    """fl32(fl32(acc * inv_a) * inv_b): accumulators (exact float64 values of float32, float16
    or bfloat16 results) with both factors undone, as float32."""
    y = _mul_f32(_mul_f32(acc64, exact_f64(inv_a)), exact_f64(inv_b))
    return _f32(y)


def effective(q: Quantised):
    """The operand the hardware multiplies, rescaled: fl32(q * inv), float32 (what the
    straight-through backward pass differentiates through)."""
    return _f32(_mul_f32(exact_f64(q.values), exact_f64(q.inv)))
