"""IEEE special values of products, and the shortcut that skips their work when none can occur.

`product_specials` classifies products (NaN: a NaN factor or Inf times zero; +-Inf), shared by
the models that follow IEEE propagation (exact, cdna3). `specials_shortcut` is the step those
models share: NaN/Inf operands are rare, so the per-product special-value work runs only when
some operand is NaN/Inf (or, for bf16, some product could overflow); the other branch gives
the same bits without it.
"""
from __future__ import annotations

import jax.numpy as jnp
from jax import lax

__all__ = ["product_specials", "specials_possible", "specials_shortcut"]


def product_specials(a, b):
    """(nan, +inf, -inf) boolean arrays of the products a_k * b_k (broadcast shapes).

    Args:
        a, b: decoded operands (`Fields`).
    Returns:
        Three boolean arrays of the broadcast shape.
    """
    a_zero = (a.sig == 0) & ~a.nan & ~a.inf
    b_zero = (b.sig == 0) & ~b.nan & ~b.inf
    nan = a.nan | b.nan | (a.inf & b_zero) | (a_zero & b.inf)
    inf = (a.inf | b.inf) & ~nan
    neg = (a.sign ^ b.sign) == 1
    return nan, inf & ~neg, inf & neg


def specials_possible(ctx, a, b):
    """Scalar: could any product of these operands be NaN/Inf (or, for bf16, overflow to Inf)?

    Args:
        ctx: the `Context` (operand formats); a, b: decoded operands, any shapes.
    Returns:
        A boolean scalar (traced).
    """
    flag = jnp.any(a.nan | a.inf) | jnp.any(b.nan | b.inf)
    fa, fb = ctx.a, ctx.b
    if fa.max_exp + fb.max_exp + 2 > 128:  # bf16: finite products can reach 2**128
        ea = jnp.max(jnp.where(a.sig != 0, a.exp, -1000))
        eb = jnp.max(jnp.where(b.sig != 0, b.exp, -1000))
        flag = flag | (ea + eb + 2 > 127)
    return flag


def specials_shortcut(ctx, a, b, per_product, finite=None):
    """``per_product(True)`` when a special product is possible, else ``finite()`` (default:
    ``per_product(False)``), as one `lax.cond`.

    Args:
        ctx, a, b: as `specials_possible`.
        per_product: ``per_product(product_specials: bool)`` -> D; with False it may assume
            that no operand is NaN/Inf and no product overflows.
        finite: another way to D for finite operands (same bits), or None.
    Returns:
        D.
    """
    if finite is None:
        def finite():
            return per_product(False)
    return lax.cond(specials_possible(ctx, a, b), lambda: per_product(True), finite)
