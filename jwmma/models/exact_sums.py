"""The exact sum of finite products and C, rounded once: the arithmetic of the `exact` model
(`jwmma.models.exact`) and of its Pallas kernel (`jwmma.backends.pallas.exact`).

How the exact sum is formed without arbitrary precision: the products of two narrow formats
have a bounded exponent range, so they are summed in float64 in a few exponent *bands*, each
band sum being exact (its terms share a grid and their total fits 53 bits). The band sums and
C are then added exactly as integers in a few int64 *limbs* of W bits on one global grid, and
the leading 2-3 limbs plus a sticky bit are rounded into the destination format.

Up to 64 products whose formats allow it (`few_products`: CDNA1's groups, f16 and 8-bit
instructions; not bf16 beyond two) take a shorter way: error-free float64 sums, rounded to
odd in float64 and then once into the destination.
"""
from __future__ import annotations

import math

import jax.numpy as jnp
from jax import lax

from ..numerics.formats import F32
from ..numerics.rounding import (fields_to_f64, pow2_f64, round_f64, round_f64_to_f32, round_to_format, round_to_odd,
                                 two_sum)
from .base import Context

__all__ = ["exact_sum_bits", "few_products", "few_products_span", "few_products_sum_bits", "band_sums_bits",
           "one_band", "limbs_plus_c", "band_plan"]


def _plan(ctx: Context, k: int):
    """Static band/limb geometry for K products of formats ctx.a x ctx.b and accumulator ctx.c."""
    fa, fb, fc = ctx.a, ctx.b, ctx.c
    mab = fa.mbits + fb.mbits
    sigbits = mab + 2
    emin = fa.min_exp + fb.min_exp
    emax = fa.max_exp + fb.max_exp
    lg = max(1, math.ceil(math.log2(max(k, 2))))
    w_bound = 54 - sigbits - lg
    need = fc.mbits + 4  # bits of the rounding window: target precision + guard bits
    for w in range(min(31, w_bound), 0, -1):
        nw = max(2, -(-(need - 1) // w) + 1)
        if nw * w <= 62:
            break
    else:  # pragma: no cover - K beyond any use
        raise ValueError(f"K={k} is too large for the exact model")
    nb = -(-(emax - emin + 1) // w)
    c_lsb = fc.min_exp - fc.mbits
    t = max(0, -(-((emin - mab) - c_lsb) // w))
    g0 = emin - mab - t * w
    top = max(emax - mab + sigbits + lg + 1, fc.max_exp + 2)
    nl = -(-(top - g0) // w) + 2
    return dict(w=w, nw=nw, nb=nb, t=t, g0=g0, nl=nl, emin=emin, mab=mab)


def exact_sum_bits(p_sign, p_f64, p_exp, c_fields, ctx: Context, k: int, loop: bool = False):
    """Bits of RN(sum_k p_k + C) in ``ctx.c`` for finite products.

    p_f64 (..., K, N): exact float64 products (0 where absent); p_exp: MMA-Sim exponent sums
    (the band key); p_sign: product signs (for the sign of an exact zero); c_fields: decoded
    finite accumulator; loop: the band sums one `lax.fori_loop` (one traced copy; `Exact`
    loops in 'fast' programs and on CPUs, `grouping.loops(options, cpu=True)`: 4096 waves of a
    bf16 `exact` builtin at 'full' ran as fast and compiled in 0.72x the time, 143 -> 79 fused
    computations) rather than one reduction per band (which XLA:GPU fuses into few kernels).
    Same values: each band sum is exact in any order. Returns (bits, is_zero)."""
    g = _plan(ctx, k)
    w, nb = g["w"], g["nb"]
    if nb == 1:
        return band_sums_bits(p_f64.sum(axis=-2)[None], c_fields, ctx, k)
    band = jnp.clip((p_exp - g["emin"]) // w, 0, nb - 1)
    out = jnp.broadcast_shapes(band.shape, p_f64.shape)
    out = out[:-2] + out[-1:]
    # exact: a band's terms share a grid and fit 53 bits
    if loop:
        def one(j, sums):
            return lax.dynamic_update_index_in_dim(sums, jnp.where(band == j, p_f64, 0.0).sum(axis=-2), j, 0)

        sums = lax.fori_loop(0, nb, one, jnp.zeros((nb, *out), p_f64.dtype))
    else:
        sums = jnp.stack([jnp.broadcast_to(jnp.where(band == j, p_f64, 0.0).sum(axis=-2), out) for j in range(nb)])
    return band_sums_bits(sums, c_fields, ctx, k)


def few_products(ctx: Context, k: int) -> bool:
    """Static: is `few_products_sum_bits` exact for K products of ctx.a x ctx.b? K <= 64 (an
    instruction's products; the cascade is unrolled), and the errors of a two-sum cascade over
    the products sum exactly in float64: every product is a multiple of 2**(emin - mab) below
    2**(emax + 2), so each error is such a multiple of at most 2**(top - 53), top bounding
    every partial sum (two products: always; f16 x f16 in fours: 31 of the 53 bits, in 32s 37;
    fp8 / bf8 in 64s: -5 / 23; bf16 beyond two: not). On a CPU this ran builtin calls 2-3x
    faster than the bands and limbs (f16 / fp8 / bf8 `exact`, 16-64 products)."""
    span = few_products_span(ctx, k)
    if span is None:
        return False
    if k <= 2:  # a two-sum is exact whatever the exponents
        return True
    return (ctx.a.max_exp + ctx.b.max_exp) - (ctx.a.min_exp + ctx.b.min_exp) <= span  # the formats' widest spread


def few_products_span(ctx: Context, k: int) -> int | None:
    """Static: the largest spread of product exponents (``a.exp + b.exp`` of the nonzero
    products of one output) for which `few_products_sum_bits` is exact on K products whose
    formats `few_products` does not clear (bf16: 78 for an instruction's 32 products), or None
    (K > 64, or a destination wider than 51 bits: rounding to odd first needs <= 51). The
    condition of `few_products`, 53 >= (hi + 2 + lg - 53 + lg) - (lo - mab), solved for the
    spread hi - lo of the exponents."""
    if k > 64 or ctx.c.mbits > 51:
        return None
    lg = math.ceil(math.log2(max(k, 2)))
    return 102 - 2 * lg - (ctx.a.mbits + ctx.b.mbits)


#: products above which `few_products_sum_bits` loops its cascade where asked: unrolled, the 63
#: two-sums of an fp8 instruction's 64 products were half of its `exact` program (first call
#: 1.11 -> 0.91 CPU s looped, 2-core Zen 1); at 16 and 32 products the loop saved nothing
SCAN_PRODUCTS = 32


def few_products_sum_bits(p_f64, c_fields, ctx: Context, loop: bool = False):
    """Bits of RN(sum_k p_k + C) in ``ctx.c`` for a few finite products (`few_products`), by
    error-free float64 sums instead of bands and limbs (CDNA1's groups of 2 and 4: an order of
    magnitude fewer operations; an f16 or 8-bit instruction's 16-64 products).

    The products' sum P is first an exact pair ph + pl with ph = RN(P) (a two-sum cascade,
    its errors summed exactly). Then T = C + ph + pl: (th, tl) = two_sum(C, ph),
    (vh, vl) = two_sum(tl, pl), (zh, zl) = two_sum(th, vh), so T = zh + zl + vl exactly, and
    ``round_to_odd(zh, zl + vl)`` is RO(T): zh + (zl + vl) lies strictly between zh's float64
    neighbours. Either C + ph was exact (tl = 0, so vl = 0 and zh = RN(T)), or |ph| <= 2|th|,
    so |tl + pl| <= 1.5 ulp(th), |vl| < 2**-50 ulp(zh) and |zl| <= ulp(zh)/2 (ulp below / 2
    at a power of two). RO in float64 and then RN into ``ctx.c`` (<= 51 bits, subnormals
    included) is RN(T). No float64 subnormal occurs: every value is a multiple of the
    products' or C's grid, >= 2**-300.

    Args:
        p_f64: (..., K, N) exact float64 products (0 where absent or special).
        c_fields: decoded finite accumulator (NaN / Inf given as 0).
        loop: for K > `SCAN_PRODUCTS`, the two-sum cascade as one `lax.scan` over K
            (`jwmma.models.grouping.loops`): the same operations in the same order.
    Returns:
        (bits, is_zero): (..., N) int32 bits of ``ctx.c``, and where the exact sum is 0.
    """
    fc = ctx.c
    k = p_f64.shape[-2]
    pl = jnp.zeros(p_f64.shape[:-2] + p_f64.shape[-1:], jnp.float64)
    ph = p_f64[..., 0, :] if k else pl  # K = 0: D = RN(C)
    if k == 2:
        ph, pl = two_sum(ph, p_f64[..., 1, :])
    elif k > 2:
        def add(acc, p):
            ph, err = two_sum(acc[0], p)
            return (ph, acc[1] + err), None  # exact (`few_products`)

        if loop and k > SCAN_PRODUCTS:
            (ph, pl), _ = lax.scan(add, (ph, pl), jnp.moveaxis(p_f64[..., 1:, :], -2, 0))
        else:
            for i in range(1, k):
                (ph, pl), _ = add((ph, pl), p_f64[..., i, :])
        ph, pl = two_sum(ph, pl)
    c = fields_to_f64(c_fields.sign, c_fields.sig, c_fields.exp, fc.mbits)
    th, tl = two_sum(c, ph)
    vh, vl = two_sum(tl, pl)
    zh, zl = two_sum(th, vh)
    z = round_to_odd(zh, zl + vl)
    # f32 on 32-bit words: a GPU's 64-bit integer operations cost two or more instructions each
    return (round_f64_to_f32(z) if fc == F32 else round_f64(z, fc)), z == 0


def one_band(ctx: Context, k: int) -> bool:
    """Static: are K products of ctx.a x ctx.b one band (`band_sums_bits`)? Then their sum is
    exact in float64 in any order (every partial sum lies on the band's grid within 53 bits),
    so a float64 matrix product forms it (fp8 x fp8: products are multiples of 2**-18 below
    2**14; bf8 and 16-bit formats span more than one band)."""
    return _plan(ctx, k)["nb"] == 1


def band_sums_bits(sums, c_fields, ctx: Context, k: int):
    """Bits of RN(sum_j sums[j] + C) (`exact_sum_bits` after its band sums): ``sums`` (nb, ...,
    N) are the exact float64 band sums, band j on the grid 2**(emin - mab + j w) of `_plan`.
    The limbs are one stacked array throughout: a list of them made a small kernel per limb
    and band (most of the fusions of a bf16 `exact` program)."""
    fc = ctx.c
    g = _plan(ctx, k)
    w, nw, t, g0, nl = g["w"], g["nw"], g["t"], g["g0"], g["nl"]
    nb = sums.shape[0]
    shape = jnp.broadcast_shapes(sums.shape[1:], c_fields.sig.shape)
    # band j lands on limb t + j: exactly, as an integer (its sum is a multiple of its grid)
    scale = pow2_f64(-(g["emin"] - g["mab"] + w * jnp.arange(nb, dtype=jnp.int32))).reshape((nb,) + (1,) * len(shape))
    bands = jnp.broadcast_to(sums * scale, (nb, *shape)).astype(jnp.int64)
    limbs = jnp.concatenate([jnp.zeros((t, *shape), jnp.int64), bands, jnp.zeros((nl - t - nb, *shape), jnp.int64)])
    stack, neg = limbs_plus_c(limbs, c_fields.sign, c_fields.sig, c_fields.exp, fc, g0, w, loop=True)
    stack = jnp.moveaxis(stack, 0, -1)  # (..., N, nl), each in [0, 2**w)
    nz = stack != 0
    idx = jnp.arange(nl)
    h = jnp.max(jnp.where(nz, idx, -1), axis=-1)
    pad = jnp.concatenate([jnp.zeros(stack.shape[:-1] + (nw - 1,), jnp.int64), stack], axis=-1)
    mag = jnp.zeros(shape, jnp.int64)
    for d in range(nw):  # limbs h, h-1, ..., h-nw+1 (padded index h + nw - 1 - d)
        pick = jnp.take_along_axis(pad, (jnp.maximum(h, 0) + nw - 1 - d)[..., None], axis=-1)[..., 0]
        mag = (mag << w) | pick
    below = jnp.cumsum(nz.astype(jnp.int32), axis=-1)  # nonzero limbs at or below each index
    lo_idx = jnp.maximum(h, 0) - nw  # highest limb index under the window
    sticky = jnp.where(
        lo_idx >= 0,
        jnp.take_along_axis(below, jnp.maximum(lo_idx, 0)[..., None], axis=-1)[..., 0] > 0,
        False,
    )
    scale = g0 + (jnp.maximum(h, 0) - nw + 1) * w
    is_zero = h < 0
    bits = round_to_format(neg.astype(jnp.int32), jnp.where(is_zero, 0, mag), scale, fc, sticky)
    return bits, is_zero


def limbs_plus_c(limbs, c_sign, c_sig, c_exp, fc, g0: int, w: int, loop: bool = False):
    """The exact sum of the limbs and C, as a sign and magnitude limbs (`band_sums_bits`).

    Args:
        limbs: a list of int64 arrays (all of one shape), limb q on the grid 2**(g0 + q w)
            (`band_plan`), with headroom above the sum; with ``loop``, one (nl, ...) array.
        c_sign, c_sig, c_exp: C's fields, finite (NaN/Inf given as sig 0):
            C = (-1)**c_sign * c_sig * 2**(c_exp - fc.mbits).
        fc: C's `FloatFormat`; g0, w: the grid of `band_plan`; loop: the limbs as one array,
            carried by `lax.scan` (`_scan_carries`; XLA programs), rather than as a list with
            an unrolled carry chain (the Pallas kernels). Same values.
    Returns:
        (limbs, neg): the magnitude as limbs in [0, 2**w) on the same grid (a list, or with
        ``loop`` one (nl, ...) array), and a bool array (True: the sum is negative). Plain jnp
        operations on a list of arrays, so the Pallas kernel of this model
        (`jwmma.backends.pallas.exact`) runs the same code.
    """
    nl = len(limbs)
    zero = jnp.zeros(limbs[0].shape, jnp.int64)
    # C = +-csig * 2**(ec - mbits), placed on the limb grid (it spans at most 3 limbs)
    csig = c_sig.astype(jnp.int64)
    off = (c_exp - fc.mbits - g0).astype(jnp.int64)
    off = jnp.where(csig == 0, 0, off)
    # off >= 0 (`_plan` puts g0 at or below C's last place), so truncating division is the floor:
    # jnp's // and % on int64 lower in Pallas Triton through a sign helper traced at lowering
    # time, outside `x64_scope` under a user's jit (JAX warns that int64 is truncated)
    li, r = lax.div(off, jnp.int64(w)), lax.rem(off, jnp.int64(w))
    v = csig << r
    parts = [v & ((1 << w) - 1), (v >> w) & ((1 << w) - 1), v >> (2 * w)]
    cneg = c_sign == 1

    def c_part(q):  # C's part on limb q (an int, or the limb index broadcast along axis 0)
        add = zero
        for d, part in enumerate(parts):
            add = add + jnp.where(li + d == q, part, 0)
        return jnp.where(cneg, -add, add)

    if loop:  # the limbs as one (nl, ...) array: C placed by broadcasting, carries by a scan
        q = jnp.arange(nl, dtype=jnp.int64).reshape((nl,) + (1,) * li.ndim)
        stack, carry = _scan_carries(limbs + c_part(q), w)
        neg = carry < 0  # the top carry is the sign: 0 or -1 (there is headroom above the sum)
        stack = stack.at[-1].add(carry << w)
        stack, _ = _scan_carries(jnp.where(neg, -stack, stack), w)
        return stack, neg
    limbs = list(limbs)
    for q in range(nl):
        limbs[q] = limbs[q] + c_part(q)
    limbs, carry = _normalize(limbs, w)
    neg = carry < 0  # the top carry is the sign: 0 or -1 (there is headroom above the sum)
    limbs[-1] = limbs[-1] + (carry << w)
    limbs, _ = _normalize([jnp.where(neg, -x, x) for x in limbs], w)
    return limbs, neg


def _scan_carries(stack, w):
    """`_normalize` on limbs stacked along axis 0, as one `lax.scan` (XLA programs): the
    unrolled chain let XLA copy every lower limb's carry chain into each limb's own kernel
    (13 copies of it, most of the `exact` program). Same values."""
    mask = (1 << w) - 1

    def step(carry, x):
        v = x + carry
        return v >> w, v & mask

    carry, out = lax.scan(step, jnp.zeros_like(stack[0]), stack)
    return out, carry


def _normalize(limbs, w):
    mask = (1 << w) - 1
    out, carry = [], jnp.zeros_like(limbs[0])
    for x in limbs:
        v = x + carry
        out.append(v & mask)
        carry = v >> w
    return out, carry


#: the static band/limb geometry, public for the Pallas kernel of the `exact` model (jwmma.backends.pallas)
band_plan = _plan
