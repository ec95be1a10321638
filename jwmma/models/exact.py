"""The `exact` model: products exact, their sum with C exact, one rounding to the destination
(round to nearest even, gradual underflow, overflow to Inf), IEEE special values. The sum
itself (float64 bands, int64 limbs, error-free sums for few products) is `exact_sums`.
"""
from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
from jax import lax

from ..numerics.formats import BF16, F16, F64, ZERO_EXP, decode
from ..numerics.rounding import fields_to_f64, round_f64, round_to_odd, two_sum
from ..varying import vary_like
from . import fused_dots
from .base import Context, Model, as_column
from .exact_sums import exact_sum_bits, few_products, few_products_span, few_products_sum_bits, one_band
from .fields import Bool, Int, declare
from .fma_chain import IEEEAsFMAChain
from .grouping import loops, over_groups, unroll_for
from .specials import product_specials as _product_specials
from .specials import specials_possible, specials_shortcut

#: products per kernel when the sum is a matrix product (as `jwmma.models.fused`)
_DOTS_BLOCK_ELEMS = 2**24

__all__ = ["Exact", "CDNA1"]


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
            bits, is_zero = few_products_sum_bits(p_all, cfin, ctx, loop)
        elif span is not None:  # bf16: the error-free sums where the data's exponents allow them
            nz = p_all != 0
            e = jnp.broadcast_to(pexp, p_all.shape)
            spread = jnp.max(jnp.where(nz, e, -(1 << 20)), axis=-2) - jnp.min(jnp.where(nz, e, 1 << 20), axis=-2)
            bits, is_zero = lax.cond(jnp.all(spread <= span), lambda: few_products_sum_bits(p_all, cfin, ctx, loop),
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



