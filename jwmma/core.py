"""One sparse instruction step in matrix form, shared by the builtins and the GEMM drivers.

Generic semantics (BUILTINS.md section 1): stored A element (i, c) multiplies the B row
k = 4*(c//2) + pos(i, c). The selected B rows are *gathered* (never is A densified with zeros,
so NaN/Inf in pruned B rows cannot leak), giving per output (i, j) the Kc products in
compressed-K order, which the arithmetic model accumulates onto C.
"""
from __future__ import annotations

import os

import jax
import jax.numpy as jnp
from jax import lax

from .formats import decode, decode_int, int_format, pack_fields, unpack_fields
from .isa import BuiltinSpec
from .models import Context, fused_dots


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
    """b: (..., Kd, N) array; pos: (..., M, Kc) positions 0..3.

    Returns the selected rows (..., M, Kc, N): out[..., i, c, :] = b[..., 4*(c//2) + pos, :]."""
    m, kc = pos.shape[-2:]
    k = 4 * (jnp.arange(kc, dtype=jnp.int32) // 2) + pos.astype(jnp.int32)  # (..., M, Kc)
    batch = jnp.broadcast_shapes(b.shape[:-2], k.shape[:-2])
    xb = jnp.broadcast_to(b, batch + b.shape[-2:])
    kb = jnp.broadcast_to(k, batch + k.shape[-2:]).reshape(*batch, m * kc, 1)
    out = jnp.take_along_axis(xb, kb, axis=-2, mode="promise_in_bounds")
    return out.reshape(*batch, m, kc, b.shape[-1])


def _specials_possible(spec: BuiltinSpec, a, b):
    """Scalar: could any product be NaN/Inf (or, for bf16, overflow to Inf)?"""
    flag = jnp.any(a.nan | a.inf) | jnp.any(b.nan | b.inf)
    fa, fb = spec.a_format, spec.b_format
    if fa.max_exp + fb.max_exp + 2 > 128:  # bf16: finite products can reach 2**128
        ea = jnp.max(jnp.where(a.sig != 0, a.exp, -1000))
        eb = jnp.max(jnp.where(b.sig != 0, b.exp, -1000))
        flag = flag | (ea + eb + 2 > 127)
    return flag


def step(spec: BuiltinSpec, model, a_codes, pos, b_codes, c, *, a_signed=True, b_signed=True, clamp=False):
    """D = model(A_comp, selected B, C) for one instruction on whole matrices.

    a_codes: (..., M, Kc) int32 element bit patterns; pos: (..., M, Kc) ints 0..3;
    b_codes: (..., Kd, N); c: (..., M, N) accumulator bit patterns (floats) or int32 values.
    Returns (..., M, N) int32: result bit patterns (floats) or values (integers).
    Must run inside `x64_scope()`."""
    ctx = context(spec, clamp)
    a = decode_a(spec, a_codes, a_signed)
    if spec.integer:
        b_sel = select_rows(decode_b(spec, b_codes, b_signed), pos)
        return model.accumulate(a[..., None], b_sel, c, ctx)
    b = decode(spec.b_format, b_codes)
    a_col = jax.tree_util.tree_map(lambda t: t[..., None], a)

    def per_product(**kw):
        # one word per element travels through the row selection, then is unpacked again
        b_sel = unpack_fields(spec.b_format, select_rows(pack_fields(b), pos))
        if b.val is not None:  # the exact f32 value travels on its own (cheaper than rebuilding it)
            b_sel = b_sel._replace(val=select_rows(b.val, pos))
        return model.accumulate(a_col, b_sel, c, ctx, **kw)

    if not getattr(model, "takes_specials_hint", False):
        return per_product()
    if fused_dots.applies(model, ctx, a_codes.shape, b_codes.shape) and use_dots():

        def finite_operands():  # matrix products, or per product where they cannot stand in
            bits, ok = fused_dots.accumulate(model, ctx, a, pos, b, c)
            return lax.cond(ok, lambda: bits, lambda: per_product(product_specials=False))
    else:

        def finite_operands():
            return per_product(product_specials=False)

    # NaN/Inf operands are rare: skip the per-product special-value work unless present
    return lax.cond(_specials_possible(spec, a, b), lambda: per_product(product_specials=True), finite_operands)


def use_dots() -> bool:
    """Form fp8 fused-group sums with matrix products (`jwmma.models.fused_dots`)?
    JWMMA_DOTS=1/0 decides; by default on CPUs, where the per-product path is memory-bound."""
    env = os.environ.get("JWMMA_DOTS")
    if env in ("0", "1"):
        return env == "1"
    return jax.default_backend() == "cpu"
