"""Fused group dot-products with truncated alignment: MMA-Sim's CDNA3 algorithm and its family.

NUMERICS.md section 1.3 (MMA-Sim ``amd_fused_dot_rd_add``; ``MMA_TR_FDPA`` / ``MMA_GTR_FDPA``
with F=24, F2=31). Per output, the K products are taken in consecutive groups; per group:

* specials first (IEEE propagation as a float64 sum would give; bf16 products >= 2**128 give Inf);
* every product P_k * 2**(E_k - mab) is aligned to ``frac_bits`` fractional bits of the group's
  largest exponent E_T, rounding its magnitude toward zero (``product_rounding``);
* fp8 groups are summed in two stages (even and odd positions), merged with floor shifts;
* the sum is floored to ``sum_bits`` fractional bits of Mx = max(E, exponent of C), C to
  ``frac_bits`` (and, in the two-stage path, C far below is dropped), both added exactly and
  rounded to f32 (RNE, gradual underflow). The f32 result is the next group's C.

All product work is int32; the combine step with C uses int64. The model owns two fast paths
to the same bits (`FusedGroups.instruction`): the per-product special-value work is skipped when no
operand is NaN/Inf, and 8-bit groups become matrix products (`jwmma.models.fused_dots`) when
the options allow it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import jax.numpy as jnp
from jax import lax

from ..numerics.formats import F32, decode, pow2_f32
from ..numerics.rounding import round_to_format
from . import fused_dots
from .fma_chain import FMAChain
from .fields import Bool, Choice, Int
from .base import Context, Model, as_column
from .fused_dots import NO_EXP
from .grouping import over_groups
from .specials import product_specials, specials_shortcut

__all__ = ["FusedGroups", "CDNA3", "ROUNDINGS", "align"]

ROUNDINGS = ("truncate", "floor", "nearest")
#: products per kernel when the group sums are matrix products (2**24: 3.8x faster than 2**18)
_DOTS_BLOCK_ELEMS = 2**24


def align(p, r, lead: int, neg, rounding: str, dtype):
    """Signed value of the unsigned magnitude ``p`` times 2**(lead - r), rounded as
    ``rounding`` says ('truncate': toward zero; 'floor'; 'nearest': ties to even).

    r >= 0 is the distance of the product's exponent below the group maximum and ``lead``
    (static) = frac_bits - mab, so truncation and floor are one left and one right shift."""
    p = p.astype(dtype)
    width = 63 if dtype == jnp.int64 else 31
    up_shift, extra = max(lead, 0), max(-lead, 0)
    right = jnp.minimum(r + extra, width).astype(dtype)
    if rounding == "truncate":
        mag = (p << up_shift) >> right
        return jnp.where(neg, -mag, mag)
    v = jnp.where(neg, -p, p) << up_shift
    if rounding == "floor":
        return v >> right
    q = v >> right
    rem = v - (q << right)
    half = jnp.where(right > 0, jnp.asarray(1, dtype) << jnp.maximum(right - 1, 0), 0)
    up = (rem > half) | ((rem == half) & (right > 0) & ((q & 1) == 1))
    return q + up.astype(dtype)


@dataclass(frozen=True)
class FusedGroups(Model):
    """The parametrised fused-group model. ``None`` fields take the CDNA3 choice for the
    operand formats: group 16 and two stages for 8-bit inputs, group 8 otherwise; C is
    dropped far below the sum exactly when the path is two-stage.

    Two details differ between MMA-Sim's published versions; both are parameters:
    ``zero_exponent``: None (MMA-Sim 2.x, PyPI): zero products take no part in the group's
    maximum exponent; an int (-126: MMA-Sim c785138, NUMERICS.md 1.1): every zero factor
    has this exponent, so zero products can set the maximum.
    ``renormalize``: True (2.x): the group sum is floored to sum_bits+1 fractional bits of
    Mx, added to C, renormalised and floored to sum_bits fractional bits of its own leading
    exponent before the f32 rounding; False (c785138): floored to sum_bits bits of Mx and
    added to C exactly.
    """

    group: int | None = None
    frac_bits: int = 24
    sum_bits: int = 31
    two_stage: bool | None = None
    product_rounding: str = "truncate"
    c_drop: bool | None = None
    zero_exponent: int | None = None
    renormalize: bool = True

    name = "fused"

    FIELDS = {"group": Int(lo=1, optional=True), "frac_bits": Int(lo=1, hi=40), "sum_bits": Int(lo=1, hi=48),
              "two_stage": Bool(optional=True), "product_rounding": Choice(values=ROUNDINGS),
              # products of every format have exponents within +-300; the bound keeps zero_exponent
              # clear of the no-exponent marker NO_EXP and of int overflow
              "c_drop": Bool(optional=True), "zero_exponent": Int(lo=-1000, hi=1000, optional=True),
              "renormalize": Bool()}

    def __post_init__(self):
        super().__post_init__()
        if self.sum_bits < self.frac_bits:
            raise ValueError(f"{type(self).__name__}.sum_bits must be an int in [frac_bits={self.frac_bits}, 48], "
                             f"got {self.sum_bits}")

    # ------------------------------------------------------------------ static choices
    def resolved(self, ctx: Context):
        eight = max(ctx.a.bits, ctx.b.bits) == 8
        xf32 = ctx.a.name == "xf32" or ctx.b.name == "xf32"
        group = self.group or (16 if eight else 4 if xf32 else 8)
        two = eight if self.two_stage is None else self.two_stage
        drop = two if self.c_drop is None else self.c_drop
        if two and group < 2:
            raise ValueError("a two-stage model needs group >= 2")
        return group, two, drop

    def check(self, ctx: Context):
        why = super().check(ctx)
        if why:
            return why
        if ctx.c != F32:
            return f"{self.describe()} accumulates in f32; it does not model {ctx.c.name} outputs"
        return None

    def describe(self):
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__dataclass_fields__)
        return f"{type(self).__name__}({fields})"

    # ------------------------------------------------------------------ fast paths
    def dots_apply(self, ctx: Context, options, a_shape, b_shape) -> bool:
        """Whether the options ask for matrix-product group sums and they can stand in here."""
        return bool(options.group_dots) and fused_dots.applies(self, ctx, a_shape, b_shape)

    def instruction(self, ctx: Context, a, pos, b, c, select, options):
        """`Model.instruction`: the special-value work only when some operand is NaN/Inf; for finite
        8-bit operands the group sums as matrix products when ``options.group_dots`` (falling
        back per product where a group fails the window test): the same bits either way."""
        a_col = as_column(a)  # once, outside the branches (XLA fuses the branches better)

        def per_product(specials):
            return self.accumulate(a_col, select(b, pos), c, ctx, options, product_specials=specials)

        finite = None
        if self.dots_apply(ctx, options, a.sig.shape, b.sig.shape):
            def finite():
                bits, ok = fused_dots.accumulate(self, ctx, a, pos, b, c)
                return lax.cond(ok, lambda: bits, lambda: per_product(False))

        return specials_shortcut(ctx, a, b, per_product, finite)

    def working_set(self, ctx: Context, options, a_shape, b_shape) -> int:
        """`Model.working_set`; matrix-product group sums want large blocks."""
        budget = super().working_set(ctx, options, a_shape, b_shape)
        if options.block_elems is None and self.dots_apply(ctx, options, a_shape, b_shape):
            return max(budget, _DOTS_BLOCK_ELEMS)
        return budget

    # ------------------------------------------------------------------ arithmetic
    def accumulate(self, a, b, c_bits, ctx: Context, options=None, product_specials: bool = True):
        """`Model.accumulate`. ``product_specials=False`` promises that no operand is NaN/Inf
        and no product can overflow (the caller checked); C may still be NaN/Inf and is
        handled. ``options.float_alignment`` (default True) aligns f32-exact products (fp8,
        f16) with a float multiply and a truncating conversion instead of integer shifts:
        same bits, fewer operations."""
        group, two, drop = self.resolved(ctx)
        float_alignment = True if options is None else bool(options.float_alignment)
        return over_groups(
            a, b, c_bits, group,
            lambda ga, gb, acc: self._group(ga, gb, acc, ctx, two, drop, product_specials, float_alignment),
        )

    def _group(self, a, b, c_bits, ctx: Context, two: bool, drop: bool, specials: bool, float_alignment: bool):
        S, Es, P, neg = self._group_sum(a, b, ctx, two, float_alignment)
        cf = decode(F32, c_bits)
        bits = self.combine(S, Es, cf, drop)
        if not specials:
            return self.finish(bits, cf)
        fa, fb = ctx.a, ctx.b
        mab = fa.mbits + fb.mbits
        # ---- specials, decided before anything else (IEEE propagation of the float64 sum)
        nan_p, pinf_p, ninf_p = product_specials(a, b)
        if fa.max_exp + fb.max_exp + 2 > 128:  # only bf16 products can reach 2**128
            finite_p = ~(a.nan | a.inf | b.nan | b.inf)
            lead_p = 31 - lax.clz(P) + a.exp + b.exp - mab  # exponent of the leading bit
            big = finite_p & (P != 0) & (lead_p >= 128)
            if self.renormalize:  # MMA-Sim 2.x: an overflowing product is an Inf product
                pinf_p = pinf_p | (big & ~neg)
                ninf_p = ninf_p | (big & neg)
            else:  # c785138: overflow is looked at only when the float64 sum is finite
                bpos = (big & ~neg).any(axis=-2)
                bneg = (big & neg).any(axis=-2)
                bits = jnp.where(bpos, 0x7F800000, bits)
                bits = jnp.where(bneg, jnp.int32(-0x800000), bits)
                bits = jnp.where(bpos & bneg, F32.qnan, bits)
        return self.finish(bits, cf, nan_p.any(axis=-2), pinf_p.any(axis=-2), ninf_p.any(axis=-2))

    def _group_sum(self, a, b, ctx: Context, two: bool, float_alignment: bool):
        """(S, E, P, neg): the group's aligned sum S in units of 2**(E - frac_bits)."""
        fa, fb = ctx.a, ctx.b
        mab = fa.mbits + fb.mbits
        F = self.frac_bits
        g = jnp.broadcast_shapes(a.sig.shape, b.sig.shape)[-2]
        half = -(-g // 2) if two else g
        wide = F + 2 + math.ceil(math.log2(max(half, 2))) + 1 > 31
        dt = jnp.int64 if wide else jnp.int32
        P = a.sig * b.sig  # < 2**(mab+2): exact in int32
        if self.zero_exponent is None:
            E = jnp.where(P == 0, NO_EXP, a.exp + b.exp)
        else:
            z = self.zero_exponent
            E = jnp.where(a.sig == 0, z, a.exp) + jnp.where(b.sig == 0, z, b.exp)
        neg = (a.sign ^ b.sign) == 1
        # Truncating alignment of an exact f32 product is one multiply by 2**(F - E_T) and a
        # conversion toward zero: exact when products fit f32 (fp8, f16) and |q| < 2**(F+2).
        V = None
        if float_alignment and self.product_rounding == "truncate" and a.val is not None and b.val is not None and F <= 28:
            V = a.val * b.val

        def fused_sum(P, E, neg, V, axis):
            ET = E.max(axis=axis)
            ETb = jnp.expand_dims(ET, axis)
            if V is not None:
                scale = pow2_f32(jnp.clip(F - ETb, -126, 127))
                return (V * scale).astype(jnp.int32).astype(dt).sum(axis=axis), ET
            return align(P, ETb - E, F - mab, neg, self.product_rounding, dt).sum(axis=axis), ET

        if two and g > 1 and g % 2 == 0:
            # even and odd positions as an axis of their own (no strided slices)
            split = lambda t: t.reshape(*t.shape[:-2], g // 2, 2, t.shape[-1])
            parts = list(jnp.broadcast_arrays(P, E, neg)) + ([] if V is None else [jnp.broadcast_to(V, P.shape)])
            parts = [split(t) for t in parts]
            S2, ET2 = fused_sum(*parts[:3], parts[3] if V is not None else None, -3)
            S0, S1, E0, E1 = S2[..., 0, :], S2[..., 1, :], ET2[..., 0, :], ET2[..., 1, :]
        elif two and g > 1:  # a partial last group (a group of one has no odd half)
            sl = lambda t, i: None if t is None else t[..., i::2, :]
            S0, E0 = fused_sum(P[..., 0::2, :], E[..., 0::2, :], neg[..., 0::2, :], sl(V, 0), -2)
            S1, E1 = fused_sum(P[..., 1::2, :], E[..., 1::2, :], neg[..., 1::2, :], sl(V, 1), -2)
        if two and g > 1:
            Es = jnp.maximum(E0, E1)
            lim = 63 if wide else 31
            S = (S0 >> jnp.minimum(Es - E0, lim).astype(dt)) + (S1 >> jnp.minimum(Es - E1, lim).astype(dt))
        else:
            S, Es = fused_sum(P, E, neg, V, -2)
        return S, Es, P, neg

    def combine(self, S, Es, cf, drop: bool):
        """f32 bits of the group sum S * 2**(Es - frac_bits) added to the decoded C (finite
        part; `finish` applies the special values)."""
        F, F2 = self.frac_bits, self.sum_bits
        finite_c = ~(cf.nan | cf.inf)
        csig = jnp.where(finite_c, cf.sig, 0).astype(jnp.int64)
        ec = cf.exp
        S = S.astype(jnp.int64)
        Mx = jnp.maximum(Es, ec).astype(jnp.int64)
        d = Mx - Es
        ks = F2 + 1 - F if self.renormalize else F2 - F  # S grid: 2**(Mx - F - ks)
        s_hi = _shift(S, ks - d)
        Cs = jnp.where(cf.sign == 1, -csig, csig)
        c_lo = _shift(Cs, (F - F32.mbits) - (Mx - ec))
        if drop:
            c_lo = jnp.where(ec < Mx - (F + 1), 0, c_lo)
        R = s_hi + (c_lo << ks)  # units of 2**(Mx - F - ks)
        unit = Mx - F - ks
        if self.renormalize:  # floor to sum_bits fractional bits of the sum's own exponent
            lead = 63 - lax.clz(jnp.abs(R)) + unit
            t = jnp.maximum(lead, F32.min_exp) - F2 - unit
            t = jnp.clip(t, 0, 63)
            R = (R >> t) << t
        return round_to_format((R < 0).astype(jnp.int32), jnp.abs(R), unit, F32)

    @staticmethod
    def finish(bits, cf, nan_p=None, pinf_p=None, ninf_p=None):
        """Special results: NaN/Inf from C and (if given) from the products override ``bits``."""
        pinf = cf.inf & (cf.sign == 0)
        ninf = cf.inf & (cf.sign == 1)
        znan = cf.nan
        if nan_p is not None:
            pinf, ninf, znan = pinf | pinf_p, ninf | ninf_p, znan | nan_p
        znan = znan | (pinf & ninf)
        bits = jnp.where(pinf, 0x7F800000, bits)
        bits = jnp.where(ninf, jnp.int32(-0x800000), bits)  # 0xFF800000
        bits = jnp.where(znan, F32.qnan, bits)
        return bits.astype(jnp.int32)


def _shift(x, n):
    """floor(x * 2**n) for int64 x and integer n of either sign."""
    return jnp.where(n >= 0, x << jnp.clip(n, 0, 63), x >> jnp.clip(-n, 0, 63))


@dataclass(frozen=True)
class CDNA3(FusedGroups):
    """MMA-Sim's bit-accurate CDNA3 (gfx942) MFMA algorithm, applied to the compressed
    products (NUMERICS.md 1.3-1.4). The named preset ``"cdna3"`` is ``CDNA3()``, MMA-Sim 2.x
    (PyPI) as it stands; the preset ``"cdna3_c785138"`` is the earlier GitHub version that
    NUMERICS.md section 1.3 transcribes: ``CDNA3(zero_exponent=-126, renormalize=False)``.

    Per input format, as MMA-Sim's CDNA3 MFMA (BUILTINS_DENSE.md 6): f16/bf16 groups of 8,
    fp8/bf8 groups of 16 in two stages, xf32 (f32 operands cut to 10 mantissa bits) groups of
    4, and f32 a plain f32 FMA chain in K order (MMA-Sim's "fma": a fused group cannot hold a
    48-bit f32 product; the fused-group fields do not apply there)."""

    name = "cdna3"

    def instruction(self, ctx: Context, a, pos, b, c, select, options):
        """`FusedGroups.instruction`; f32 operands: the FMA chain (class doc)."""
        if ctx.a == F32:
            return _F32_CHAIN.instruction(ctx, a, pos, b, c, select, options)
        return super().instruction(ctx, a, pos, b, c, select, options)

    def accumulate(self, a, b, c_bits, ctx: Context, options=None, product_specials: bool = True):
        """`FusedGroups.accumulate`; f32 operands: the FMA chain (class doc)."""
        if ctx.a == F32:
            return _F32_CHAIN.accumulate(a, b, c_bits, ctx, options)
        return super().accumulate(a, b, c_bits, ctx, options, product_specials)

    def check(self, ctx: Context):
        why = super().check(ctx)
        if why is None and ctx.a == F32 and self != CDNA3():
            return (f"{self.describe()}: on f32 operands CDNA3 is MMA-Sim's FMA chain, which has none of the "
                    f"fused-group fields; use CDNA3() (preset cdna3) or FMAChain()")
        return why


#: MMA-Sim's CDNA3 f32 MFMA: acc <- RN_f32(a*b + acc) in K order, canonical NaN
_F32_CHAIN = FMAChain()
