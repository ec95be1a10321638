"""In-kernel building blocks shared by the Pallas kernels (bits only, no model choices).

Everything here runs inside a Pallas kernel body on 2-D (rows, cols) tiles and lowers to
Triton: int32/int64/float32 elementwise ops, `lax.clz` on int32 only (the Pallas Triton
lowering of `clz` on int64 emits an i32 result and fails, JAX 0.10.2), selects instead of
gathers. `decode` is `numerics.formats.decode_fields` itself (it needs nothing else);
`round_to_format` mirrors `numerics.rounding.round_to_format` bit for bit and differs only in
how it is built (NUMERICS.md section 1.3, 2.2).
"""
from __future__ import annotations

import contextlib
import contextvars

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ...numerics.formats import Fields as Dec  # decoded fields, one record for XLA and the kernels
from ...numerics.formats import FloatFormat, decode_fields, f32_magnitude, pow2_f32, with_sign
from ...numerics.formats import exactly_normal_in_f32 as exactly_f32

__all__ = ["fori", "cond", "tile_layout", "on_tile", "Dec", "pow2_f32", "exactly_f32", "decode", "exp_code", "select4",
           "triton_native", "trunc_i32", "tile_any", "bitlen32", "bitlen64",
           "shift64", "round_to_format"]

#: (cast, layout) while a Mosaic GPU kernel is traced (`tile_layout`), else None
_TILE = contextvars.ContextVar("jwmma_tile_layout", default=None)
#: True while a kernel is traced for Triton on a GPU (`triton_native`), not in interpret mode
_NATIVE = contextvars.ContextVar("jwmma_triton_native", default=False)


@contextlib.contextmanager
def triton_native():
    """While a kernel body is traced for Triton on a GPU (not interpret mode, not Mosaic GPU):
    `trunc_i32` may use PTX."""
    token = _NATIVE.set(True)
    try:
        yield
    finally:
        _NATIVE.reset(token)


def trunc_i32(x):
    """int32 of f32 ``x`` rounded toward zero, saturating, NaN -> 0: ``x.astype(int32)``. On
    Triton the conversion is one ``cvt.rzi.s32.f32`` (whose saturation and NaN rule are these),
    where the Pallas lowering of ``astype`` clamps x to the int32 range with two float
    min/max first: two instructions of the fused kernels' twenty to thirty a product."""
    if not _NATIVE.get():
        return x.astype(jnp.int32)
    from jax.experimental.pallas import triton as pl_triton

    return pl_triton.elementwise_inline_asm("cvt.rzi.s32.f32 $0, $1;", args=[x], constraints="=r,r", pack=1,
                                           result_shape_dtypes=[jax.ShapeDtypeStruct(x.shape, jnp.int32)])[0]


@contextlib.contextmanager
def tile_layout(cast, layout):
    """While a kernel body is traced for Mosaic GPU (`mosaic`): every 2-D value where
    branches and loop carries meet is given ``layout`` by ``cast`` (`on_tile`)."""
    token = _TILE.set((cast, layout))
    try:
        yield
    finally:
        _TILE.reset(token)


def on_tile(tree):
    """The 2-D arrays of ``tree`` in the tile layout of `tile_layout` (Mosaic GPU gives a
    constant a splat layout and a loaded tile another, and refuses branches or loop carries
    whose layouts differ); unchanged otherwise (Triton, interpret mode)."""
    ctx = _TILE.get()
    if ctx is None:
        return tree
    cast, layout = ctx

    def fix(x):
        if getattr(x, "ndim", 0) != 2:
            return x
        if jnp.issubdtype(x.dtype, jnp.signedinteger):
            # Mosaic GPU also keys loop carries by a signedness it tracks per value (a bitcast
            # from f32 gives an unsigned int32): a round trip through the unsigned type resets it
            x = x.astype(jnp.dtype(f"uint{x.dtype.itemsize * 8}")).astype(x.dtype)
        return cast(x, layout)

    return jax.tree_util.tree_map(fix, tree)


def cond(pred, true_fn, false_fn):
    """``lax.cond(pred, true_fn, false_fn)`` whose branches give their tiles one layout (`on_tile`)."""
    return lax.cond(pred, lambda: on_tile(true_fn()), lambda: on_tile(false_fn()))


def fori(n: int, body, init, wide: bool = False):
    """``lax.fori_loop(0, n, body, init)`` as a loop Pallas lowers to one ``scf.for``.

    The kernels are traced inside `x64_scope` but may be lowered outside it (inside a user's
    jit): there an int64 counter made JAX 0.11 warn that it truncates the index arithmetic to
    int32. So by default the counter is int32 (a scan). ``wide``: an int64 counter
    (`lax.fori_loop` with Python bounds, inside the scope), for kernels lowered inside the
    scope (an eager `jwmma.gemm`): Triton compiles the main loop of the bf16 fused kernel to
    code twice as fast with it on an H200 (benchmarks/RESULTS.md, "bf16 regression")."""
    init = on_tile(init)
    if wide:
        return lax.fori_loop(0, n, lambda i, x: on_tile(body(i, x)), init)

    def step(carry, _):
        i, x = carry
        return (i + np.int32(1), on_tile(body(i, x))), None

    return lax.scan(step, (np.int32(0), init), None, length=n)[0][1]


#: offset of the 10-bit exponent codes carried next to a selected value (see `exp_code`)
EXP_OFFSET = 512
EXP_MASK = 1023


def decode(fmt: FloatFormat, code, with_val: bool = True) -> Dec:
    """``fmt`` bit patterns in the low bits of int32 ``code`` -> fields (`formats.decode_fields`);
    ``val``, the exact f32 value of the finite part (NaN/Inf factors read 0), only
    ``with_val`` and for formats `exactly_f32`."""
    sign, sig, exp, nan, inf = decode_fields(fmt, code)
    mag = f32_magnitude(fmt, sig, exp) if with_val else None
    val = None if mag is None else with_sign(mag, sign)  # -mag would lose -0 under Triton
    return Dec(sign, sig, exp, nan, inf, val)


def exp_code(d: Dec, zero_exponent: int | None):
    """10-bit code of the exponent a factor brings to its products' group maximum:
    exp + 512, or 0 for a zero (or NaN/Inf) factor when zeros take no part in the maximum
    (any product with such a factor then has exponent <= -512 + 127, below every real
    product exponent and below every C exponent (>= -126), so it never sets a maximum
    that matters); with ``zero_exponent`` an int, zeros carry that exponent."""
    if zero_exponent is None:
        return jnp.where(d.sig == 0, 0, d.exp + EXP_OFFSET)
    return jnp.where(d.sig == 0, zero_exponent, d.exp) + EXP_OFFSET


def select4(pos, rows):
    """rows[pos] elementwise: pos (tm, 1) in 0..3, rows four (1, tn) tensors -> (tm, tn).

    A select chain instead of a gather (Triton has no in-register gather), by the position's
    two bits: the tests are made on the (tm, 1) column, so the (tm, tn) work is three selects
    (two where ptxas predicates one), and a 3-D kernel carries two predicates from A's layout
    to the product's instead of three (`pos == 0`, `pos == 2`, `pos < 2` before: 5 % fewer
    instructions in the sparse fp8 kernel, benchmarks/RESULTS.md)."""
    r0, r1, r2, r3 = rows
    odd, high = (pos & 1) == 1, (pos & 2) == 2
    lo = jnp.where(odd, r1, r0)
    hi = jnp.where(odd, r3, r2)
    return jnp.where(high, hi, lo)


def tile_any(x) -> jnp.ndarray:
    """Scalar: is any element of the bool tile true? (`jnp.any` lowers to reduce_or, which
    the Pallas Triton lowering lacks; one axis at a time, as Mosaic GPU lowers reductions.)"""
    v = jnp.where(x, 1, 0)
    while v.ndim:
        v = jnp.max(v, axis=-1)
    return v > 0


def bitlen32(x):
    """Bit length of non-negative int32 values."""
    return 32 - lax.clz(x)


def bitlen64(x):
    """Bit length of non-negative int64 values, from two int32 clz (see module doc)."""
    hi = (x >> 32).astype(jnp.int32)
    lo = (x & 0xFFFFFFFF).astype(jnp.int32)
    return jnp.where(hi != 0, 64 - lax.clz(hi), 32 - lax.clz(lo))


def shift64(x, n):
    """floor(x * 2**n) for int64 x and int n of either sign (jwmma.models.fused._shift)."""
    n = n.astype(jnp.int64)
    return jnp.where(n >= 0, x << jnp.clip(n, 0, 63), x >> jnp.clip(-n, 0, 63))


def round_to_format(sign, mag, scale, fmt: FloatFormat, sticky=None):
    """Bits of (-1)**sign * (mag + sticky*tiny) * 2**scale rounded to ``fmt`` (RNE, gradual
    underflow, overflow to Inf): `jwmma.rounding.round_to_format` with `bitlen64`."""
    mag = mag.astype(jnp.int64)
    scale = scale.astype(jnp.int64)
    lead = bitlen64(mag).astype(jnp.int64) - 1 + scale
    te = jnp.maximum(lead, fmt.min_exp)
    shift = te - fmt.mbits - scale
    right = jnp.clip(shift, 0, 63)
    left = jnp.clip(-shift, 0, 62)
    q = jnp.where(shift > 0, mag >> right, mag << left)
    one = jnp.int64(1)
    rem = mag & ((one << right) - 1)
    half = jnp.where(right > 0, one << jnp.maximum(right - 1, 0), 0)
    if sticky is None:
        above = rem > half
        tie = (rem == half) & (rem != 0)
    else:
        above = (rem > half) | ((rem == half) & (rem != 0) & sticky)
        tie = (rem == half) & (rem != 0) & ~sticky
    far = shift > 63
    q = jnp.where(far, 0, q)
    up = ~far & (above | (tie & ((q & 1) == 1)))
    q = q + up.astype(jnp.int64)
    bits = ((te + fmt.bias - 1) << fmt.mbits) + q
    bits = jnp.where(mag == 0, 0, bits)
    emask = (1 << fmt.ebits) - 1
    if fmt.inf:
        limit = emask << fmt.mbits
        bits = jnp.minimum(bits, limit)
    else:
        top = (1 << (fmt.ebits + fmt.mbits)) - 1
        bits = jnp.minimum(bits, top)
    bits = bits | (sign.astype(jnp.int64) << (fmt.bits - 1))
    return bits.astype(jnp.int32)
