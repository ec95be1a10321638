"""IEEE special values of products, and the shortcut that skips their work when none can occur.

`product_specials` classifies products (NaN: a NaN factor or Inf times zero; +-Inf), shared by
the models that follow IEEE propagation (exact, cdna3). `specials_shortcut` is the step those
models share: NaN/Inf operands are rare, so the per-product special-value work runs only when
some operand is NaN/Inf (or, for bf16, some product could overflow); the other branch gives
the same bits without it.

`factor_codes` does the same for a chained-step model (RDNA3's `gfx11_dot2`), whose every
step gives its special result from its own products: it finds the specials of every step's
group of products once, before the steps, as 4-bit codes carried in int32 words (`next_code`
reads them step by step, `code_flags` unpacks one).
"""
from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from ..varying import vary_like

__all__ = ["product_specials", "factor_specials_possible", "specials_possible", "specials_shortcut", "factor_flags",
           "factor_codes", "next_code", "code_flags",
           "PLUS_INF", "MINUS_INF", "INVALID_PRODUCT", "NAN_FACTOR"]

#: a group's factor specials (`factor_codes`): bits of its 4-bit code
PLUS_INF, MINUS_INF, INVALID_PRODUCT, NAN_FACTOR = 1, 2, 4, 8
CODES_PER_WORD = 8


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


def factor_specials_possible(a, b):
    """Scalar: is any factor of these decoded operands NaN or Inf (traced boolean)?"""
    return jnp.any(a.nan | a.inf) | jnp.any(b.nan | b.inf)


def specials_possible(ctx, a, b):
    """Scalar: could any product of these operands be NaN/Inf (or, for bf16, overflow to Inf)?

    Args:
        ctx: the `Context` (operand formats); a, b: decoded operands, any shapes.
    Returns:
        A boolean scalar (traced).
    """
    flag = factor_specials_possible(a, b)
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


def factor_flags(a, b, subnormals_zero=None):
    """Per product, the factor specials of a chained-step model's codes (`factor_codes`):
    (Inf product of + sign, Inf product of - sign, Inf times zero, a NaN factor), boolean
    arrays of the broadcast shape. Unlike `product_specials`, a NaN factor and Inf times zero
    stay apart (RDNA3 gives them different NaN payloads).

    Args:
        a, b: decoded operands (`Fields`); subnormals_zero: None, or the (a, b) formats whose
            subnormal factors the model reads as zeros.
    """
    zero_a, zero_b = a.sig == 0, b.sig == 0
    if subnormals_zero is not None:  # subnormal factors count as zeros: Inf times one is invalid
        fa, fb = subnormals_zero
        zero_a = zero_a | ((a.exp <= fa.min_exp) & (a.sig < (1 << fa.mbits)))
        zero_b = zero_b | ((b.exp <= fb.min_exp) & (b.sig < (1 << fb.mbits)))
    zero_a, zero_b = zero_a & ~a.nan & ~a.inf, zero_b & ~b.nan & ~b.inf
    neg = (a.sign ^ b.sign) == 1
    inf = a.inf | b.inf
    return inf & ~neg, inf & neg, (a.inf & zero_b) | (b.inf & zero_a), a.nan | b.nan


def _group_codes(a, b, group: int, out, n_words: int, subnormals_zero):
    """The words of `factor_codes` (its possible branch)."""
    per_product = factor_flags(a, b, subnormals_zero)
    k = jnp.broadcast_shapes(a.sig.shape, b.sig.shape)[-2]
    groups = -(-k // group)

    def per_group(f):  # (..., K, N) -> (..., groups, N): any over each group
        f = jnp.broadcast_to(f, (*out[:-1], k, out[-1]))
        if groups * group != k:
            f = jnp.concatenate([f, jnp.zeros((*out[:-1], groups * group - k, out[-1]), bool)], axis=-2)
        return f.reshape(*out[:-1], groups, group, out[-1]).any(axis=-2)

    pi, ni, invalid, nan = (per_group(f) for f in per_product)
    code = (jnp.where(pi, PLUS_INF, 0) | jnp.where(ni, MINUS_INF, 0)
            | jnp.where(invalid | (pi & ni), INVALID_PRODUCT, 0) | jnp.where(nan, NAN_FACTOR, 0)).astype(jnp.int32)
    shifts = jnp.asarray([4 * (i % CODES_PER_WORD) for i in range(groups)], jnp.int32)[:, None]
    code = code << shifts  # the codes of one word occupy distinct bits: their sum is their OR
    return tuple(code[..., w * CODES_PER_WORD:(w + 1) * CODES_PER_WORD, :].sum(axis=-2, dtype=jnp.int32)
                 if w * CODES_PER_WORD < groups else jnp.zeros(out, jnp.int32) for w in range(n_words))


def factor_codes(a, b, group: int, out, like=(), subnormals_zero=None):
    """Every step's factor specials, found once: 4-bit codes in int32 words, all clear (zeros,
    in a `lax.cond`) when no operand is NaN/Inf.

    Step i multiplies the products ``group * i`` to ``group * (i + 1)`` along axis -2 (the
    last step fewer when K is not a multiple). Its code has PLUS_INF / MINUS_INF (an Inf
    product of that sign), INVALID_PRODUCT (Inf times zero, or Inf products of both signs) and
    NAN_FACTOR (a NaN factor), and sits at bits ``4 * (i % 8)`` of word ``i // 8``.

    Args:
        a, b: decoded operands (`Fields`), products along axis -2, broadcasting to (..., K, N)
            with ``out`` = (..., N); group: products per step; like: the arrays whose varying
            axes (inside a user's shard_map) the words take; subnormals_zero: None, or the
            (a, b) formats whose subnormal factors the model reads as zeros.
    Returns:
        A tuple of ``ceil(steps / 8)`` (at least 1) int32 arrays of shape ``out``.
    """
    k = jnp.broadcast_shapes(a.sig.shape, b.sig.shape)[-2]
    steps = -(-k // group)
    n_words = max(1, -(-steps // CODES_PER_WORD))
    possible = factor_specials_possible(a, b)
    clear = tuple(vary_like(jnp.zeros(out, jnp.int32), *like) for _ in range(n_words))

    def codes():
        words = _group_codes(a, b, group, out, n_words, subnormals_zero)
        return tuple(vary_like(w, *like) for w in words)

    return lax.cond(possible, codes, lambda: clear)


def next_code(words):
    """(this step's code, the words moved on to the next step's): a logical shift by 4 bits
    across the words."""
    code = words[0] & 0xF
    moved = tuple(lax.shift_right_logical(w, jnp.int32(4)) | (words[i + 1] << 28 if i + 1 < len(words) else 0)
                  for i, w in enumerate(words))
    return code, moved


def code_flags(code):
    """A step's code (`factor_codes`) -> (plus_inf, minus_inf, invalid, nan_factor) booleans."""
    return tuple((code & bit) != 0 for bit in (PLUS_INF, MINUS_INF, INVALID_PRODUCT, NAN_FACTOR))
