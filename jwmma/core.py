"""One sparse instruction step in matrix form, shared by the builtins and the GEMM drivers.

Generic semantics (BUILTINS.md section 1): stored A element (i, c) multiplies the B row
k = 4*(c//2) + pos(i, c). The selected B rows are *gathered* (never is A densified with zeros,
so NaN/Inf in pruned B rows cannot leak), giving per output (i, j) the Kc products in
compressed-K order, which the arithmetic model accumulates onto C.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .formats import decode, decode_int, int_format
from .isa import BuiltinSpec
from .models import Context


def context(spec: BuiltinSpec, clamp: bool = False) -> Context:
    return Context(spec.a_format, spec.b_format, spec.c_format, clamp, spec.arch)


def decode_a(spec: BuiltinSpec, codes, signed: bool):
    if spec.integer:
        return decode_int(int_format(spec.a_type, signed), codes)
    return decode(spec.a_format, codes)


def decode_b(spec: BuiltinSpec, codes, signed: bool):
    if spec.integer:
        return decode_int(int_format(spec.b_type, signed), codes)
    return decode(spec.b_format, codes)


def select_rows(b, pos):
    """b: (..., Kd, N) (an array or a pytree of them); pos: (..., M, Kc) positions 0..3.

    Returns the selected rows (..., M, Kc, N): out[..., i, c, :] = b[..., 4*(c//2) + pos, :]."""
    m, kc = pos.shape[-2:]
    k = 4 * (jnp.arange(kc, dtype=jnp.int32) // 2) + pos.astype(jnp.int32)  # (..., M, Kc)

    def one(x):
        batch = jnp.broadcast_shapes(x.shape[:-2], k.shape[:-2])
        xb = jnp.broadcast_to(x, batch + x.shape[-2:])
        kb = jnp.broadcast_to(k, batch + k.shape[-2:]).reshape(*batch, m * kc, 1)
        out = jnp.take_along_axis(xb, kb, axis=-2, mode="promise_in_bounds")
        return out.reshape(*batch, m, kc, x.shape[-1])

    return jax.tree_util.tree_map(one, b)


def step(spec: BuiltinSpec, model, a_codes, pos, b_codes, c, *, a_signed=True, b_signed=True, clamp=False):
    """D = model(A_comp, selected B, C) for one instruction on whole matrices.

    a_codes: (..., M, Kc) int32 element bit patterns; pos: (..., M, Kc) ints 0..3;
    b_codes: (..., Kd, N); c: (..., M, N) accumulator bit patterns (floats) or int32 values.
    Returns (..., M, N) int32: result bit patterns (floats) or values (integers).
    Must run inside `x64_scope()`."""
    a = decode_a(spec, a_codes, a_signed)
    b = decode_b(spec, b_codes, b_signed)
    b_sel = select_rows(b, pos)
    a_col = jax.tree_util.tree_map(lambda t: t[..., None], a)
    return model.accumulate(a_col, b_sel, c, context(spec, clamp))
