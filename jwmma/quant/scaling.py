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
   ``"mx"`` (OCP MX v1.0, for the block-scaled builtins): every block of 32 consecutive
   elements along the reduction axis gets the power of two 2**X, X = floor(log2(amax)) - emax
   of the element format, clamped to [-127, 127], as its E8M0 scale X + 127 (an all-zero block
   127, a block holding NaN or Inf 0xFF: NaN), and the elements v / 2**X are rounded with
   saturation; the scales go to the instruction, which applies them (no factor to undo);
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
from ..numerics.rounding import pow2_f64, round_f64, value_f64

__all__ = ["SCALINGS", "MX_BLOCK", "Quantised", "exact_f64", "f32_bits_to_f64", "amax", "quantise", "rescale",
           "effective", "overflow_limit", "cast"]

#: the values of ``scaling=``
SCALINGS = ("row", "tensor", "none", "mx")
#: elements per E8M0 scale of ``scaling="mx"`` (OCP MX v1.0; the CDNA4 scaled MFMA's block)
MX_BLOCK = 32


class Quantised(NamedTuple):
    """One operand quantised: ``values`` in the format's dtype (the builtin's input; uint8 codes
    for the OCP MX FP6/FP4 formats, which JAX holds no arrays of on every version), ``inv``
    the float32 inverse factors (broadcastable against the operand; 1 for ``"none"`` and
    ``"mx"``) and ``scales`` the E8M0 codes (uint8) of ``"mx"``'s blocks along the reduction
    axis (else None)."""

    values: jnp.ndarray
    inv: jnp.ndarray
    scales: jnp.ndarray | None = None


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
    if fmt.bits < 8:  # FP6/FP4: their codes (JAX 0.10 has no float6 arrays; gemm takes codes with fmt_a/fmt_b)
        return bits.astype(jnp.uint8)
    if np.dtype(fmt.dtype) == np.dtype(np.float32):  # f32 (and xf32: its code is the top 19 bits of an f32)
        return lax.bitcast_convert_type(bits.astype(jnp.uint32) << (32 - fmt.bits), jnp.float32)
    width = jnp.uint16 if fmt.bits == 16 else jnp.uint8
    return lax.bitcast_convert_type(bits.astype(width), jnp.dtype(fmt.dtype))


def _values_f64(values, fmt: FloatFormat):
    """The exact float64 value of quantised values (a dtype's values, or FP6/FP4 codes)."""
    if np.dtype(values.dtype) == np.dtype(np.uint8) and fmt.bits < 8:
        return value_f64(decode(fmt, values.astype(jnp.int32)), fmt.mbits)
    return exact_f64(values)


def _mx(v, fmt: FloatFormat, axis: int) -> Quantised:
    """``scaling="mx"`` (module doc, step 2): E8M0 block scales along ``axis`` and the elements."""
    axis = axis % v.ndim
    k = v.shape[axis]
    nb = -(-k // MX_BLOCK)
    vb = jnp.moveaxis(v, axis, -1)
    vb = jnp.concatenate([vb, jnp.zeros(vb.shape[:-1] + (nb * MX_BLOCK - k,), vb.dtype)], -1) if nb * MX_BLOCK > k \
        else vb
    vb = vb.reshape(vb.shape[:-1] + (nb, MX_BLOCK))
    m = jnp.max(jnp.abs(vb), axis=-1, keepdims=True)  # NaN wins
    bits = lax.bitcast_convert_type(m, jnp.int64)
    e = ((bits >> 52) & 0x7FF) - 1023  # floor(log2(amax)): amax is a float32 value, a normal float64
    x = jnp.clip(e - fmt.max_exp, -127, 127)
    zero, bad = m == 0, ~jnp.isfinite(m)
    x = jnp.where(zero | bad, 0, x)
    q = _round(vb * pow2_f64(-x), fmt, clip=True)  # v / 2**X is exact in float64
    q = jnp.where(bad, 0, q)
    codes = jnp.where(bad, 0xFF, x + 127).astype(jnp.uint8)[..., 0]
    q = q.reshape(q.shape[:-2] + (nb * MX_BLOCK,))[..., :k]
    values = jnp.moveaxis(_codes_to_values(fmt, q), -1, axis)
    return Quantised(values, jnp.ones((1,) * v.ndim, jnp.float32), jnp.moveaxis(codes, -1, axis))


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
    if scaling == "mx":
        return _mx(v, fmt, axis)
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
    or bfloat16 results) with both factors undone, as float32. The second product is rounded
    once, straight to float32 (`_f32`: as float64 first and rounded again, it gave the same
    bits for 172 more operations of the forward program)."""
    return _f32(_mul_f32(acc64, exact_f64(inv_a)) * exact_f64(inv_b))


def effective(q: Quantised, fmt: FloatFormat, axis: int = -1):
    """The operand the hardware multiplies, rescaled: fl32(q * inv), float32 (what the
    straight-through backward pass differentiates through); ``"mx"``: q * 2**(scale - 127)
    of its block along ``axis``, rounded once to float32. ``fmt``: q's format."""
    v = _values_f64(q.values, fmt)
    if q.scales is not None:
        k = v.shape[axis]
        s = jnp.repeat(q.scales.astype(jnp.int32), MX_BLOCK, axis=axis)
        s = lax.slice_in_dim(s, 0, k, axis=axis % v.ndim)
        return _f32(v * pow2_f64(jnp.where(s == 0xFF, 0, s - 127)) + jnp.where(s == 0xFF, jnp.nan, 0.0))
    return _f32(v * exact_f64(q.inv))  # one rounding of the exact product
