"""A free-standing dot product under an arithmetic model: the models without the sparse
instruction around them. Useful to study a model, and to compare it with other simulators
(MMA-Sim's ``dpa``) or hardware captures on plain vectors.

    d = jwmma.dot(a, b, c, model="cdna3")   # a, b: (..., K); c: (...) -> (...)

The K products are accumulated in order, in the model's groups/steps starting at k = 0.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import models
from ..isa.types import TYPES
from ..keywords import strict_keywords
from ..models.base import Context, as_column
from ..numerics.formats import F32, FLOAT_FORMATS, I32, INT_FORMATS, decode, decode_int, format_of
from ..numerics.rounding import bits_to, float_bits, x64_scope
from .effort import effort_jit, settle, shapes_key
from .options import resolve as resolve_options
from .validation import as_array, batch_shape, broadcast_batch

__all__ = ["dot"]

#: operand formats: every narrow float (the FNUZ fp8 variants too) and every narrow integer
# the narrow float formats (float32 is the accumulator: f32/xf32 MFMA operands are builtin-only)
_FLOAT_INPUTS = tuple(f.dtype for f in FLOAT_FORMATS.values() if f.dtype != np.dtype(np.float32))
_INT_INPUTS = tuple(f.dtype for f in INT_FORMATS.values() if f is not I32)
#: float accumulators: those of the table's element types (f64 aside: no model of `dot` takes it)
_FLOAT_ACCS = tuple(t.format.dtype for t in TYPES.values() if t.accumulator and t.is_float and t.bits <= 32)


def _codes(x):
    width = {2: jnp.uint16, 1: jnp.uint8}[np.dtype(x.dtype).itemsize]
    return jax.lax.bitcast_convert_type(x, width).astype(jnp.int32)


def _dot(a, b, c, *, model, ctx, fa, fb, options):
    (a, b, c), _ = broadcast_batch((a, 1), (b, 1), (c, 0))
    if ctx.integer:
        av = decode_int(fa, a.astype(jnp.int32))[..., None]
        bv = decode_int(fb, b.astype(jnp.int32))[..., None]
        return model.accumulate(av, bv, c[..., None], ctx, options)[..., 0]
    af = as_column(decode(fa, _codes(a)))
    bf = as_column(decode(fb, _codes(b)))
    bits = model.accumulate(af, bf, float_bits(c)[..., None], ctx, options)[..., 0]
    return bits_to(ctx.c, bits)


_dot_jit = effort_jit(_dot, static_argnames=("model", "ctx", "fa", "fb", "options"))


def _formats(da, db, dc):
    if da in _INT_INPUTS or db in _INT_INPUTS:
        if da not in _INT_INPUTS or db not in _INT_INPUTS:
            raise TypeError(f"a and b must both be integer or both be float, got {da} and {db}")
        if dc != np.int32:
            raise TypeError(f"c must be int32 for integer operands, got {dc}")
        return format_of(da), format_of(db), None
    for what, d in (("a", da), ("b", db)):
        if d not in _FLOAT_INPUTS:
            raise TypeError(f"{what} must be one of {[str(k) for k in _FLOAT_INPUTS]} (floats) or "
                            f"{[str(k) for k in _INT_INPUTS]} (integers, with int32 c), got {d}")
    if dc not in _FLOAT_ACCS:
        raise TypeError(f"c must be float32, float16 or bfloat16, got {dc}")
    return format_of(da), format_of(db), format_of(dc)


@strict_keywords
def dot(a, b, c, *, model="exact", clamp: bool = False, options=None, backend=None):
    """Accumulate sum_k a[..., k] * b[..., k] onto c under ``model``.

    Args:
        a, b: (..., K) arrays of float16, bfloat16, float8_e4m3fn, float8_e5m2 (or the FNUZ
            fp8 types), or of int8/uint8/int4/uint4 (signedness from the dtype).
        c: (...) float32 (or float16/bfloat16 for models with a 16-bit accumulator) or int32.
            Leading dims broadcast.
        model: a preset name, model text or `jwmma.models` object (default 'exact').
        clamp: integer operands: saturate the i32 result.
        options, backend: execution options (`jwmma.Options`).
    Returns:
        An array of c's dtype and the broadcast leading shape.
    """
    a, b, c = as_array(a, "a"), as_array(b, "b"), as_array(c, "c")
    fa, fb, fc = _formats(np.dtype(a.dtype), np.dtype(b.dtype), np.dtype(c.dtype))
    if a.ndim < 1 or b.ndim < 1 or a.shape[-1] != b.shape[-1]:
        raise ValueError(f"a and b must be (..., K) with the same K, got {tuple(a.shape)} and {tuple(b.shape)}")
    ctx = Context(None if fc is None else fa, None if fc is None else fb, fc, bool(clamp))
    m = models.resolve(model, ctx, "exact")
    opts = resolve_options(options, backend)
    batch = batch_shape((a, 1), (b, 1), (c, 0))
    opts = settle(opts, int(np.prod(batch, dtype=np.int64)) * a.shape[-1], m, (m, ctx, opts, shapes_key(a, b, c)))
    with x64_scope():  # broadcast inside the program (an eager broadcast compiles a program of its own)
        return _dot_jit(a, b, c, model=m, ctx=ctx, fa=fa, fb=fb, options=opts)
