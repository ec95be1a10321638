"""The `exact` model: products exact, their sum with C exact, one rounding to the destination
(round to nearest even, gradual underflow, overflow to Inf), IEEE special values.

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
from dataclasses import dataclass

import jax
import jax.numpy as jnp
from jax import lax

from ..numerics.formats import BF16, F16, F32, F64, ZERO_EXP, decode
from ..numerics.rounding import (fields_to_f64, pow2_f64, round_f64, round_f64_to_f32, round_to_format, round_to_odd,
                                 two_sum)
from ..varying import vary_like
from . import fused_dots
from .base import Context, Model, as_column
from .fields import Bool, Int, declare
from .fma_chain import IEEEAsFMAChain
from .grouping import loops, over_groups, unroll_for
from .specials import product_specials as _product_specials
from .specials import specials_possible, specials_shortcut

#: products per kernel when the sum is a matrix product (as `jwmma.models.fused`)
_DOTS_BLOCK_ELEMS = 2**24

__all__ = ["Exact", "CDNA1", "exact_sum_bits", "few_products", "few_products_span", "few_products_sum_bits",
           "band_sums_bits", "one_band", "limbs_plus_c"]


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


def few_products_sum_bits(p_f64, c_fields, ctx: Context):
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
        for i in range(1, k):
            ph, err = two_sum(ph, p_f64[..., i, :])
            pl = pl + err  # exact (`few_products`)
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


@dataclass(frozen=True)
class Exact(Model):
    """Exact products and sum (C included), one RNE rounding to the destination format.

    An exact zero is +0 unless every product and C are -0 (IEEE sum rule).

    ``group``: None (default): all the instruction's products are one sum. An int L: the
    products in consecutive groups of L (K order; a shorter last group), each group's exact
    sum with the running accumulator rounded once, the result the next group's accumulator
    (MMA-Sim 2.1.1's ``MMA_E_FDPA(L_max)``, its CDNA1 arithmetic; NUMERICS.md 9.3).

    ``signed_zero``: True (default): an exact zero is -0 when every product and C are -0 (IEEE);
    False: every exact zero is +0, as a fixed-point sum gives it (MMA-Sim 2.1.1's
    ``MMA_E_FDPA``: its error-free parts start at +0; CDNA3's fused groups alike)."""

    group: int | None = declare(Int(lo=1, hi=256, optional=True), default=None)
    signed_zero: bool = declare(Bool(), default=True)

    name = "exact"

    def describe(self):
        fields = [f"{k}={getattr(self, k)!r}" for k, d in (("group", None), ("signed_zero", type(self)().signed_zero))
                  if getattr(self, k) != d]
        return f"{type(self).__name__}({', '.join(fields)})"

    def group_of(self, ctx: Context) -> int | None:
        """The products per group for these formats (None: one group)."""
        return self.group

    def _grouped(self, ctx: Context, k: int) -> int | None:
        """The group size when it splits K products, else None."""
        g = self.group_of(ctx)
        return g if g is not None and g < k else None

    def check(self, ctx: Context):
        why = super().check(ctx)
        if why is None and not ctx.integer and ctx.a.mbits + ctx.b.mbits > 2 * 10:
            return (f"{self.describe()} sums products of up to 11 x 11 significand bits exactly (xf32 and "
                    f"narrower); {ctx.a.name} x {ctx.b.name} products have {ctx.a.mbits + ctx.b.mbits + 2} bits: use "
                    f"cdna3 (MMA-Sim's FMA chain for f32 MFMA) or fma_chain_k")
        return why

    def instruction(self, ctx: Context, a, pos, b, c, select, options):
        """`Model.instruction` with the special-value work skipped when no operand is NaN/Inf.
        With ``options.group_dots`` and foldable shapes (`dots_apply`), finite operands take the
        float64 matrix product instead.

        Under the 'fast' compile effort (`grouping.loops`) the program holds one copy of the
        exact sum: the products' special values, which IEEE propagation decides before any sum,
        are looked for in a `lax.cond` whose other branch is all clear. Otherwise the sum is
        traced once per branch of `specials_shortcut`, which runs faster (f16 builtin calls
        over 4096 waves on a CPU: 0.24-0.31 s against 0.38 s for the one copy)."""
        a_col = as_column(a)  # once, outside the branches (XLA fuses the branches better)

        def per_product(specials):
            return self.accumulate(a_col, select(b, pos), c, ctx, options, product_specials=specials)

        if self._grouped(ctx, a.sig.shape[-1]):  # groups carry the accumulator: the per-group sums
            if loops(options):  # one copy, each group's special flags always formed (a small call)
                return per_product(True)
            return specials_shortcut(ctx, a, b, per_product)
        if self.dots_apply(ctx, options, a.sig.shape, b.sig.shape):
            def finite():  # a -0 C is the one case where the sign of each zero product matters
                neg_zero = jnp.any(c == jnp.int32(-(1 << 31) if ctx.c.bits == 32 else 1 << (ctx.c.bits - 1)))
                return lax.cond(neg_zero, lambda: per_product(False), lambda: self._dots(ctx, a, pos, b, c))

            return specials_shortcut(ctx, a, b, per_product, finite)
        if not loops(options):
            return specials_shortcut(ctx, a, b, per_product)
        b_sel = select(b, pos)
        out = jnp.broadcast_shapes(a_col.sig.shape, b_sel.sig.shape, c.shape[:-1] + (1, c.shape[-1]))
        out = out[:-2] + out[-1:]

        like = (*jax.tree_util.tree_leaves((a_col, b_sel)), c)  # varying axes inside a user's shard_map

        def flags():
            return tuple(vary_like(jnp.broadcast_to(f.any(-2), out), *like) for f in _product_specials(a_col, b_sel))

        clear = tuple(vary_like(jnp.zeros(out, bool), *like) for _ in range(3))
        return self._sum(a_col, b_sel, c, ctx, lax.cond(specials_possible(ctx, a, b), flags, lambda: clear),
                         loop=loops(options, cpu=True))

    def dots_apply(self, ctx: Context, options, a_shape, b_shape) -> bool:
        """Static: the products' sum as one float64 matrix product (`one_band`) when the
        options allow (``group_dots``) and the shapes fold into large products."""
        return bool(options.group_dots) and not ctx.integer and fused_dots.foldable(a_shape, b_shape) \
            and one_band(ctx, a_shape[-1]) and not self._grouped(ctx, a_shape[-1])

    def working_set(self, ctx: Context, options, a_shape, b_shape) -> int:
        """`Model.working_set`; matrix products want large blocks."""
        budget = super().working_set(ctx, options, a_shape, b_shape)
        if options.block_elems is None and self.dots_apply(ctx, options, a_shape, b_shape):
            return max(budget, _DOTS_BLOCK_ELEMS)
        return budget

    def _dots(self, ctx: Context, a, pos, b, c_bits):
        """D for finite A, B and no -0 in C: the exact sum S of the products as one float64
        matrix product (`one_band` proves it exact in any order), then RN(S + C) by an
        error-free float64 sum rounded to odd (a few operations per output instead of the
        limbs of `band_sums_bits`, which dominated the per-output cost)."""
        fa, fb, fc = ctx.a, ctx.b, ctx.c
        a, pos, b, c_bits, unfold = fused_dots.fold(a, pos, b, c_bits)
        pa = fields_to_f64(a.sign, a.sig, a.exp, fa.mbits)
        pb = fields_to_f64(b.sign, b.sig, b.exp, fb.mbits)
        s = fused_dots.dense_dot(pa, pos, pb, jnp.float64)
        cf = decode(fc, c_bits)
        special = cf.nan | cf.inf
        cfin = cf._replace(sig=jnp.where(special, 0, cf.sig), exp=jnp.where(special, ZERO_EXP, cf.exp))
        # RN(S + C) for the exact float64 S and C: an error-free sum, rounded to odd in float64
        # and then once to the destination (>= 2 more bits than any target: one correct
        # rounding; S + C is a normal float64 or 0 here, far from float64 overflow)
        hi, lo = two_sum(s, fields_to_f64(cfin.sign, cfin.sig, cfin.exp, fc.mbits))
        bits = round_f64(round_to_odd(hi, lo), fc)
        bits = jnp.where(hi == 0, 0, bits)  # no -0 C: an exact zero is +0
        inf_bits = ((1 << fc.ebits) - 1) << fc.mbits
        bits = jnp.where(cf.inf & (cf.sign == 0), inf_bits, bits)
        bits = jnp.where(cf.inf & (cf.sign == 1), inf_bits | (1 << (fc.bits - 1)), bits)
        bits = jnp.where(cf.nan, fc.qnan, bits)
        return unfold(bits.astype(jnp.int32))

    def accumulate(self, a, b, c_bits, ctx: Context, options=None, product_specials: bool = True):
        """`Model.accumulate`; ``product_specials=False`` promises that no operand is NaN/Inf
        (C may be)."""
        k = jnp.broadcast_shapes(a.sig.shape, b.sig.shape)[-2]
        group = self._grouped(ctx, k)
        if group:
            def step(ga, gb, acc):
                flags = tuple(f.any(-2) for f in _product_specials(ga, gb)) if product_specials else None
                return self._sum(ga, gb, acc, ctx, flags, loop=loops(options, cpu=True))

            # unrolled: with `few_products_sum_bits` a group's sum is a few dozen operations,
            # and XLA:CPU ran the unrolled groups 1.5-4x faster than a loop (CDNA1 GEMMs
            # 256x256x2048: 0.19-0.31 s against 0.88-1.21 s; with the bands and limbs the loop
            # had been the faster, RESULTS.md "programs per new shape")
            return over_groups(a, b, c_bits, group, step, unroll_for(options))
        flags = tuple(f.any(-2) for f in _product_specials(a, b)) if product_specials else None
        return self._sum(a, b, c_bits, ctx, flags, loop=loops(options, cpu=True))

    def _sum(self, a, b, c_bits, ctx: Context, flags, loop: bool = False):
        """The exact sum of the products and C, rounded once, and the special values.

        Args:
            a, b, c_bits, ctx: as `accumulate`; flags: (NaN, +Inf, -Inf) products per output
                (`product_specials` reduced over K), or None when no operand is NaN/Inf;
            loop: the band sums as a loop (`exact_sum_bits`).
        Returns:
            (..., N) int32 D bits.
        """
        fa, fb, fc = ctx.a, ctx.b, ctx.c
        k = jnp.broadcast_shapes(a.sig.shape, b.sig.shape)[-2]
        cf = decode(fc, c_bits)
        any_nan = cf.nan
        pinf = cf.inf & (cf.sign == 0)
        ninf = cf.inf & (cf.sign == 1)
        pa = fields_to_f64(a.sign, a.sig, a.exp, fa.mbits)
        pb = fields_to_f64(b.sign, b.sig, b.exp, fb.mbits)
        p = pa * pb
        pexp = a.exp + b.exp
        if flags is not None:  # special products leave the finite sum (their flags decide)
            any_nan, pinf, ninf = any_nan | flags[0], pinf | flags[1], ninf | flags[2]
            finite = ~(a.nan | a.inf) & ~(b.nan | b.inf)
            p = jnp.where(finite, p, 0.0)
            pexp = jnp.where(finite, pexp, ZERO_EXP)
        psign = a.sign ^ b.sign
        cfin = cf._replace(sig=jnp.where(cf.nan | cf.inf, 0, cf.sig), exp=jnp.where(cf.nan | cf.inf, ZERO_EXP, cf.exp))
        p_all = jnp.broadcast_to(p, jnp.broadcast_shapes(p.shape, psign.shape))
        span = few_products_span(ctx, k)
        if few_products(ctx, k):
            bits, is_zero = few_products_sum_bits(p_all, cfin, ctx)
        elif span is not None:  # bf16: the error-free sums where the data's exponents allow them
            nz = p_all != 0
            e = jnp.broadcast_to(pexp, p_all.shape)
            spread = jnp.max(jnp.where(nz, e, -(1 << 20)), axis=-2) - jnp.min(jnp.where(nz, e, 1 << 20), axis=-2)
            bits, is_zero = lax.cond(jnp.all(spread <= span), lambda: few_products_sum_bits(p_all, cfin, ctx),
                                     lambda: exact_sum_bits(psign, p, pexp, cfin, ctx, k, loop))
        else:
            bits, is_zero = exact_sum_bits(psign, p, pexp, cfin, ctx, k, loop)
        all_neg_zero = jnp.all((p == 0) & (psign == 1), axis=-2) & (cf.sig == 0) & (cf.sign == 1) & ~cf.nan & ~cf.inf
        all_neg_zero = all_neg_zero & self.signed_zero
        bits = jnp.where(is_zero, jnp.where(all_neg_zero, 1 << (fc.bits - 1), 0), bits)
        inf_bits = ((1 << fc.ebits) - 1) << fc.mbits
        bits = jnp.where(pinf, inf_bits, bits)
        bits = jnp.where(ninf, inf_bits | (1 << (fc.bits - 1)), bits)
        bits = jnp.where(any_nan | (pinf & ninf), fc.qnan, bits)
        return bits.astype(jnp.int32)


@dataclass(frozen=True)
class CDNA1(IEEEAsFMAChain, Exact):
    """MMA-Sim 2.1.1's CDNA1 (MI100, gfx908) MFMA arithmetic (NUMERICS.md 9.3): f16 and bf16
    products in groups of 4 (f16) / 2 (bf16) consecutive k from C, each group's exact sum with
    the accumulator rounded once to f32 (``MMA_E_FDPA(L_max)``: `Exact` with ``group``); f32
    operands an f32 FMA chain in K order (``MMA_FMA``, `FMAChain()`). ``group`` None picks the
    group from the formats; an int overrides it for 16-bit operands. An exact zero is +0
    (``signed_zero=False``), as MMA-Sim's. The preset ``"cdna1"`` is ``CDNA1()``."""

    signed_zero: bool = declare(Bool(), default=False)

    name = "cdna1"
    chain_lacks = "has no group and no zero rule"

    def group_of(self, ctx: Context) -> int | None:
        if self.group is not None:
            return self.group
        return 2 if BF16 in (ctx.a, ctx.b) else 4

    def check(self, ctx: Context):
        if F64 in (ctx.a, ctx.b):  # MMA-Sim's CDNA1 list has no f64 instruction
            return (f"{self.describe()} models MI100 (gfx908), which has no f64 MFMA (LLVM selects the f64 rows on "
                    f"gfx90a and later); use CDNA2() or CDNA3() (presets cdna2, cdna3) or FMAChain()")
        why = super().check(ctx)  # f32: the FMA chain's rules (`IEEEAsFMAChain.check`)
        if why is None and not self.on_chain(ctx) and not {ctx.a, ctx.b} <= {F16, BF16}:
            return (f"{self.describe()} models MI100's f32, f16 and bf16 MFMA; {ctx.a.name} x {ctx.b.name} is none of "
                    f"them (use Exact(group=...) for exact groups of other formats)")
        return why




#: the static band/limb geometry, public for the Pallas kernel of this model (jwmma.backends.pallas)
band_plan = _plan
