"""A free-standing dot product under an arithmetic model: the models without the sparse
instruction around them. Useful to study a model, and to compare it with other simulators
(MMA-Sim's ``dpa``) or hardware captures on plain vectors.

    d = jwmma.dot(a, b, c, model="cdna3")   # a, b: (..., K); c: (...) -> (...)

The K products are accumulated in order, in the model's groups/steps starting at k = 0.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from . import models
from .formats import BF8, BF8_FNUZ, BF16, F16, F32, FP8, FP8_FNUZ, IntFormat, decode, decode_int
from .models import Context
from .rounding import bits_to, float_bits, x64_scope
from .validation import as_array, broadcast_batch

_BY_DTYPE = {
    np.dtype(np.float16): F16,
    np.dtype(ml_dtypes.bfloat16): BF16,
    np.dtype(ml_dtypes.float8_e4m3fn): FP8,
    np.dtype(ml_dtypes.float8_e5m2): BF8,
    np.dtype(ml_dtypes.float8_e4m3fnuz): FP8_FNUZ,
    np.dtype(ml_dtypes.float8_e5m2fnuz): BF8_FNUZ,
}
_ACC = {np.dtype(np.float32): F32, np.dtype(np.float16): F16, np.dtype(ml_dtypes.bfloat16): BF16}
_INTS = {
    np.dtype(np.int8): IntFormat("i8", 8, True),
    np.dtype(np.uint8): IntFormat("u8", 8, False),
    np.dtype(ml_dtypes.int4): IntFormat("i4", 4, True),
    np.dtype(ml_dtypes.uint4): IntFormat("u4", 4, False),
}


def _codes(x):
    width = {2: jnp.uint16, 1: jnp.uint8}[np.dtype(x.dtype).itemsize]
    return jax.lax.bitcast_convert_type(x, width).astype(jnp.int32)


@functools.partial(jax.jit, static_argnames=("model", "ctx", "fa", "fb"))
def _dot(a, b, c, *, model, ctx, fa, fb):
    if ctx.integer:
        av = decode_int(fa, a.astype(jnp.int32))[..., None]
        bv = decode_int(fb, b.astype(jnp.int32))[..., None]
        return model.accumulate(av, bv, c[..., None], ctx)[..., 0]
    af = jax.tree_util.tree_map(lambda t: t[..., None], decode(fa, _codes(a)))
    bf = jax.tree_util.tree_map(lambda t: t[..., None], decode(fb, _codes(b)))
    bits = model.accumulate(af, bf, float_bits(c)[..., None], ctx)[..., 0]
    return bits_to(ctx.c, bits)


def dot(a, b, c, *, model="exact", clamp: bool = False):
    """Accumulate sum_k a[..., k] * b[..., k] onto c under ``model``.

    a, b: (..., K) arrays of float16, bfloat16, float8_e4m3fn, float8_e5m2 (or the FNUZ fp8
    types), or of int8/uint8/int4/uint4 (signedness from the dtype); c: (...) float32 (or
    float16/bfloat16 for models with a 16-bit accumulator) or int32. Leading dims broadcast.
    Returns an array of c's dtype."""
    a, b, c = as_array(a, "a"), as_array(b, "b"), as_array(c, "c")
    da, db, dc = np.dtype(a.dtype), np.dtype(b.dtype), np.dtype(c.dtype)
    if da in _INTS or db in _INTS:
        if da not in _INTS or db not in _INTS:
            raise TypeError(f"a and b must both be integer or both be float, got {da} and {db}")
        if dc != np.int32:
            raise TypeError(f"c must be int32 for integer operands, got {dc}")
        fa, fb, fc = _INTS[da], _INTS[db], None
    else:
        for what, d in (("a", da), ("b", db)):
            if d not in _BY_DTYPE:
                raise TypeError(f"{what} must be one of {[str(k) for k in _BY_DTYPE]}, got {d}")
        if dc not in _ACC:
            raise TypeError(f"c must be float32, float16 or bfloat16, got {dc}")
        fa, fb, fc = _BY_DTYPE[da], _BY_DTYPE[db], _ACC[dc]
    if a.ndim < 1 or b.ndim < 1 or a.shape[-1] != b.shape[-1]:
        raise ValueError(f"a and b must be (..., K) with the same K, got {tuple(a.shape)} and {tuple(b.shape)}")
    ctx = Context(None if fc is None else fa, None if fc is None else fb, fc, bool(clamp))
    m = models.resolve(model, ctx, "exact")
    (a, b, c), _ = broadcast_batch((a, 1), (b, 1), (c, 0))
    with x64_scope():
        return _dot(a, b, c, model=m, ctx=ctx, fa=fa, fb=fb)
