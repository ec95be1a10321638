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

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..numerics.formats import F32, decode, pow2_f32, value_exponent, with_sign
from ..numerics.rounding import round_to_format
from ..varying import vary_like
from . import fused_dots
from .fma_chain import IEEEAsFMAChain
from .fields import Bool, Choice, Int, declare
from .base import Context, Model, as_column
from .fused_dots import NO_EXP
from .fused_fields import F32FusedModel, frac_bits_field
from .grouping import loops, over_groups, unroll_for
from .specials import product_specials, specials_possible, specials_shortcut

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
class FusedGroups(F32FusedModel):
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

    group: int | None = declare(Int(lo=1, optional=True), default=None)
    frac_bits: int = frac_bits_field()
    sum_bits: int = declare(Int(lo=1, hi=48), default=31)
    two_stage: bool | None = declare(Bool(optional=True), default=None)
    product_rounding: str = declare(Choice(values=ROUNDINGS), default="truncate")
    c_drop: bool | None = declare(Bool(optional=True), default=None)
    # products of every format have exponents within +-300; the bound keeps zero_exponent
    # clear of the no-exponent marker NO_EXP and of int overflow
    zero_exponent: int | None = declare(Int(lo=-1000, hi=1000, optional=True), default=None)
    renormalize: bool = declare(Bool(), default=True)

    name = "fused"

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

    # ------------------------------------------------------------------ fast paths
    def dots_apply(self, ctx: Context, options, a_shape, b_shape) -> bool:
        """Whether the options ask for matrix-product group sums and they can stand in here."""
        return bool(options.group_dots) and fused_dots.applies(self, ctx, a_shape, b_shape)

    def instruction(self, ctx: Context, a, pos, b, c, select, options):
        """`Model.accumulate` on whole matrices, as one `lax.scan` over the groups: each step
        selects its group's B rows, sums the group (8-bit operands with ``options.group_dots``:
        the matrix-product sums where its window test passed) and combines the sum with C.
        The special-value flags of every group are computed before the loop, only when some
        operand is NaN/Inf (a small `lax.cond`; all clear otherwise). The same bits as
        `accumulate`, one traced copy of the group arithmetic.

        Off the CPU (``options.platform``), and for operands whose products are not f32-exact
        (bf16), `_unrolled_instruction`: the program whose GPU speed and bits RESULTS.md
        records (the loop was measured on CPUs only, and was slower there for bf16 aligned
        by integer shifts; bf16 operands whose products are normal f32 values run this loop
        from there); under the 'fast' compile effort (`grouping.loops`) always this loop."""
        if not loops(options) and (options.platform != "cpu" or not self._by_values(a, b, bool(options.float_alignment))):
            # bf16 (its products are not f32-exact): the loop was slower on the CPU than the
            # unrolled groups (0.68x for builtin calls), so only f32-exact operands take it,
            # and every call of little work (the 'fast' compile effort)
            return self._unrolled_instruction(ctx, a, pos, b, c, select, options)
        return self._group_loop(ctx, a, pos, b, c, select, options)

    def _group_loop(self, ctx: Context, a, pos, b, c, select, options):
        """`instruction`'s loop over the groups (its docstring)."""
        group, two, drop = self.resolved(ctx)
        m, kc = a.sig.shape[-2:]
        if group % 2 or kc % group:  # groups that split a 2:4 block: the products as they are
            return self.accumulate(as_column(a), select(b, pos), c, ctx, options)
        float_alignment = bool(options.float_alignment)
        n = b.sig.shape[-1]
        ng = kc // group
        possible = specials_possible(ctx, a, b)
        out = (*jnp.broadcast_shapes(a.sig.shape[:-2], b.sig.shape[:-2], c.shape[:-2]), m, n)
        bounds = [(i * group, (i + 1) * group) for i in range(ng)]
        # under 'fast' the flags' branch makes A's column itself: its operand is then the A that the
        # loop reads, and XLA decodes A once instead of twice (a smaller program); at 'full' the
        # column made outside ran f16 builtin calls 5 % faster on a CPU
        a_col = None if loops(options) else as_column(a)
        xs = dict(flags=self._group_flags(ctx, (lambda: as_column(a)) if a_col is None else (lambda: a_col),
                                          lambda: select(b, pos), bounds, out, float_alignment,
                                          possible, like=(*jax.tree_util.tree_leaves((a, b)), pos, c)))
        dots = self.dots_apply(ctx, options, a.sig.shape, b.sig.shape)
        if dots:  # every group's sums as matrix products, and whether its window test passed
            s, e, ok = fused_dots.sums(self, ctx, a, pos, b, c)
            xs.update(s=jnp.broadcast_to(s, (ng, *out)), e=jnp.broadcast_to(e, (ng, *out)).astype(jnp.int32),
                      ok=ok & ~possible)

        def body(i, acc):
            x = jax.tree_util.tree_map(lambda t: t[i], xs)
            # the group's operands: slices of the decoded matrices (no stacked copies)
            ga = jax.tree_util.tree_map(lambda t: lax.dynamic_slice_in_dim(t, i * group, group, -1), a)
            gp = lax.dynamic_slice_in_dim(pos, i * group, group, -1)
            gb = jax.tree_util.tree_map(lambda t: lax.dynamic_slice_in_dim(t, i * 2 * group, 2 * group, -2), b)

            def per_product():
                S, Es = self._group_sum(as_column(ga), select(gb, gp), ctx, two, float_alignment)
                return jnp.broadcast_to(S, out).astype(jnp.int64), jnp.broadcast_to(Es, out).astype(jnp.int32)

            S, Es = lax.cond(x["ok"], lambda: (x["s"], x["e"]), per_product) if dots else per_product()
            return self._combine_group(S, Es, acc, drop, x["flags"])

        return lax.fori_loop(0, ng, body, jnp.broadcast_to(c, out).astype(jnp.int32))

    def _unrolled_instruction(self, ctx: Context, a, pos, b, c, select, options):
        """The instruction as `accumulate` traces it (groups unrolled; the 'full' compile
        effort), the special-value work only when some operand is NaN/Inf; for finite 8-bit
        operands with ``options.group_dots`` the group sums as matrix products (falling back
        per product where a group fails the window test). The same bits as `instruction`.

        The arithmetic is traced once per branch of `specials_shortcut`. One copy with the
        special-value flags computed in a `lax.cond` beforehand (as the group loop does)
        compiles a third faster but ran bf16 cdna3 builtin calls 3.4x slower on a CPU (4096
        waves: 0.21 s against 0.063 s): XLA fuses the finite branch's groups better without
        the flags."""
        a_col = as_column(a)  # once, outside the branches (XLA fuses the branches better)

        def per_product(specials):
            return self.accumulate(a_col, select(b, pos), c, ctx, options, product_specials=specials)

        finite = None
        if self.dots_apply(ctx, options, a.sig.shape, b.sig.shape):
            def finite():
                bits, ok = fused_dots.accumulate(self, ctx, a, pos, b, c)
                return lax.cond(ok, lambda: bits, lambda: per_product(False))
        elif ctx.normal_values and self._values_when_normal(ctx, options):
            # bf16 on a CPU whose operands the host found normal (`normal_operands`): the group
            # loop on the products' exact f32 values, as f16 runs (1.2x faster than the
            # unrolled integer shifts; behind a lax.cond that chose it per call, XLA:CPU ran it
            # no faster than them, so the choice is made before tracing)
            return self._group_loop(ctx, with_normal_values(ctx.a, a), pos, with_normal_values(ctx.b, b), c,
                                    select, options)

        return specials_shortcut(ctx, a, b, per_product, finite)

    def _values_when_normal(self, ctx: Context, options) -> bool:
        """Static: whether `_unrolled_instruction` may align bf16 x bf16 products by their f32
        values for operands that `normal_operands` passed: truncating products, F <= 28 (the
        `_by_values` rule), on CPUs only (the GPU programs keep the bits the GPU crosscheck
        vouched for)."""
        return (options.platform == "cpu" and bool(options.float_alignment) and not loops(options)
                and ctx.a is not None and ctx.b is not None and ctx.a.name == "bf16" and ctx.b.name == "bf16"
                and self.product_rounding == "truncate" and self.frac_bits <= 28)

    def normal_operands(self, ctx: Context, options, a_codes, b_codes) -> bool:
        """`Model.normal_operands` for bf16 x bf16 (`_values_when_normal`): every A and B code is
        zero or a normal number (no subnormal, NaN or Inf), and every nonzero product's exponent
        lies in [max(-126, frac_bits - 127), 125]: each product is then a normal f32 value, the
        alignment's scale 2**(frac_bits - E_T) a normal power of two, and no product reaches
        2**128. The bounds come from the least and largest nonzero magnitudes of A and of B
        (`magnitude_range`, on the host)."""
        if not self._values_when_normal(ctx, options):
            return False
        fmt = ctx.a  # == ctx.b (bf16)
        (big_a, small_a), (big_b, small_b) = magnitude_range(a_codes), magnitude_range(b_codes)
        special = ((1 << fmt.ebits) - 1) << fmt.mbits  # the least NaN/Inf magnitude
        if max(big_a, big_b) >= special:
            return False
        if max(small_a, small_b) == 1 << fmt.bits:  # an all-zero operand: every product is zero
            return True
        if min(small_a, small_b) < (1 << fmt.mbits):  # a subnormal
            return False
        (la, ha), (lb, hb) = ((x >> fmt.mbits) - fmt.bias for x in (small_a, big_a)), \
            ((x >> fmt.mbits) - fmt.bias for x in (small_b, big_b))
        return la + lb >= max(-126, self.frac_bits - 127) and ha + hb <= 125

    def _group_flags(self, ctx: Context, a_col, b_sel, bounds, out, float_alignment: bool, possible, like=()):
        """Every group's special-value flags (`_flags` reduced over the products of each group
        ``bounds[i] = (lo, hi)``), a tuple of (G, *out) boolean arrays, computed only when
        ``possible`` (a `lax.cond` whose other branch is all clear); ``a_col()`` gives A as a
        column (`as_column`) and ``b_sel()`` the selected B, so that the clear branch makes
        neither. ``like``: the operands' arrays, whose varying axes (inside a user's shard_map)
        both branches take."""
        def flags():
            fl = self._flags(a_col(), b_sel(), ctx, float_alignment)
            if all(hi - lo == bounds[0][1] - bounds[0][0] for lo, hi in bounds):  # equal groups: one reduction
                g = bounds[0][1] - bounds[0][0]
                per_group = (*out[:-1], len(bounds), out[-1])
                return tuple(jnp.moveaxis(jnp.broadcast_to(
                    f.reshape(*f.shape[:-2], len(bounds), g, f.shape[-1]).any(axis=-2), per_group), -2, 0) for f in fl)
            return tuple(jnp.stack([jnp.broadcast_to(f[..., lo:hi, :].any(axis=-2), out) for lo, hi in bounds])
                         for f in fl)

        # inside a user's shard_map the flags vary over the axes the operands vary over: so must
        # the clear branch (lax.cond wants equal types)
        clear = tuple(vary_like(jnp.zeros((len(bounds), *out), bool), *like) for _ in range(self._n_flags(ctx)))
        return lax.cond(possible, lambda: tuple(vary_like(f, *like) for f in flags()), lambda: clear)

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

        def step(ga, gb, acc):
            S, Es = self._group_sum(ga, gb, ctx, two, float_alignment)
            flags = tuple(f.any(axis=-2) for f in self._flags(ga, gb, ctx, float_alignment)) if product_specials else None
            return self._combine_group(S, Es, acc, drop, flags)

        return over_groups(a, b, c_bits, group, step, unroll_for(options))

    def _n_flags(self, ctx: Context) -> int:
        """How many special-value flags `_flags` gives (5: bf16 products that overflow under
        ``renormalize=False`` are flags of their own)."""
        return 5 if ctx.a.max_exp + ctx.b.max_exp + 2 > 128 and not self.renormalize else 3

    def _by_values(self, a, b, float_alignment: bool) -> bool:
        """Whether the group sums work on the operands' exact f32 values (`_group_sum`)."""
        return (float_alignment and self.product_rounding == "truncate" and a.val is not None and b.val is not None
                and self.frac_bits <= 28)

    def _flags(self, a, b, ctx: Context, float_alignment: bool = True):
        """Special values of the products, decided before anything else (IEEE propagation of
        the float64 sum): NaN, +Inf, -Inf, and for bf16 products that reach 2**128 (MMA-Sim 2.x:
        Inf products; c785138: two more flags, positive and negative overflow).

        Args:
            a, b: decoded operands (..., K, 1 or N), (..., K, N); ctx: the formats.
        Returns:
            A tuple of `_n_flags` boolean arrays of the products' shape (reduce over K per group).
        """
        fa, fb = ctx.a, ctx.b
        mab = fa.mbits + fb.mbits
        may_overflow = fa.max_exp + fb.max_exp + 2 > 128  # only bf16 products can reach 2**128
        if self._by_values(a, b, float_alignment) and not may_overflow:
            # exact f32 values (f16, fp8): the f32 product is IEEE's special product (NaN factor or
            # Inf times zero: NaN; otherwise +-Inf), and finite products cannot overflow (bf16
            # products can: their flags come from the fields, with values or without)
            V = a.val * b.val
            return jnp.isnan(V), V == jnp.inf, V == -jnp.inf
        nan_p, pinf_p, ninf_p = product_specials(a, b)
        extra = ()
        if may_overflow:
            P = a.sig * b.sig
            neg = (a.sign ^ b.sign) == 1
            finite_p = ~(a.nan | a.inf | b.nan | b.inf)
            lead_p = 31 - lax.clz(P) + a.exp + b.exp - mab  # exponent of the leading bit
            big = finite_p & (P != 0) & (lead_p >= 128)
            if self.renormalize:  # MMA-Sim 2.x: an overflowing product is an Inf product
                pinf_p = pinf_p | (big & ~neg)
                ninf_p = ninf_p | (big & neg)
            else:  # c785138: overflow is looked at only when the float64 sum is finite
                extra = (big & ~neg, big & neg)
        shape = jnp.broadcast_shapes(a.sig.shape, b.sig.shape)
        return tuple(jnp.broadcast_to(f, shape) for f in (nan_p, pinf_p, ninf_p) + extra)

    def _combine_group(self, S, Es, acc, drop: bool, flags=None):
        """The next accumulator: the group sum S * 2**(Es - frac_bits) combined with ``acc``
        (f32 bits) and rounded, then the special values (``flags``: the group's `_flags`
        reduced over its products, or None when no product is NaN/Inf)."""
        cf = decode(F32, acc)
        bits = self.combine(S, Es, cf, drop)
        if flags is None:
            return self.finish(bits, cf)
        nan_p, pinf_p, ninf_p, *big = flags
        if big:  # c785138: overflowing products decide a finite sum; C's and the products' specials win
            bpos, bneg = big
            bits = jnp.where(bpos, 0x7F800000, bits)
            bits = jnp.where(bneg, jnp.int32(-0x800000), bits)
            bits = jnp.where(bpos & bneg, F32.qnan, bits)
        return self.finish(bits, cf, nan_p, pinf_p, ninf_p)

    def _group_sum(self, a, b, ctx: Context, two: bool, float_alignment: bool):
        """(S, E): the group's aligned sum S in units of 2**(E - frac_bits). Products that are
        NaN/Inf or overflow give meaningless values; `_flags` marks them."""
        fa, fb = ctx.a, ctx.b
        mab = fa.mbits + fb.mbits
        F = self.frac_bits
        g = jnp.broadcast_shapes(a.sig.shape, b.sig.shape)[-2]
        half = -(-g // 2) if two else g
        wide = F + 2 + math.ceil(math.log2(max(half, 2))) + 1 > 31
        dt = jnp.int64 if wide else jnp.int32
        P = neg = V = None
        if self._by_values(a, b, float_alignment):
            # Truncating alignment of an exact f32 product is one multiply by 2**(F - E_T) and a
            # conversion toward zero: exact when products fit f32 (fp8, f16) and |q| < 2**(F+2).
            # The values are then all it needs: a zero product is a zero value, and an operand's
            # exponent is that of its f32 value (`value_exponent`), so only the values are decoded and
            # travel through the selection of B rows.
            V = a.val * b.val
            a_exp, b_exp = value_exponent(a.val, fa), value_exponent(b.val, fb)
            if self.zero_exponent is None:
                E = jnp.where(V == 0, NO_EXP, a_exp + b_exp)
            else:
                z = self.zero_exponent
                E = jnp.where(a.val == 0, z, a_exp) + jnp.where(b.val == 0, z, b_exp)
        else:
            P = a.sig * b.sig  # < 2**(mab+2): exact in int32
            if self.zero_exponent is None:
                E = jnp.where(P == 0, NO_EXP, a.exp + b.exp)
            else:
                z = self.zero_exponent
                E = jnp.where(a.sig == 0, z, a.exp) + jnp.where(b.sig == 0, z, b.exp)
            neg = (a.sign ^ b.sign) == 1

        def fused_sum(P, E, neg, V, axis):
            ET = E.max(axis=axis)
            ETb = jnp.expand_dims(ET, axis)
            if V is not None:
                scale = pow2_f32(jnp.clip(F - ETb, -126, 127))
                return (V * scale).astype(jnp.int32).astype(dt).sum(axis=axis, dtype=dt), ET
            return align(P, ETb - E, F - mab, neg, self.product_rounding, dt).sum(axis=axis, dtype=dt), ET

        if two and g > 1 and g % 2 == 0:
            # even and odd positions as an axis of their own (no strided slices)
            split = lambda t: None if t is None else t.reshape(*t.shape[:-2], g // 2, 2, t.shape[-1])  # noqa: E731
            parts = [None if t is None else split(jnp.broadcast_to(t, E.shape)) for t in (P, E, neg, V)]
            S2, ET2 = fused_sum(*parts, -3)
            S0, S1, E0, E1 = S2[..., 0, :], S2[..., 1, :], ET2[..., 0, :], ET2[..., 1, :]
        elif two and g > 1:  # a partial last group (a group of one has no odd half)
            sl = lambda t, i: None if t is None else t[..., i::2, :]  # noqa: E731
            S0, E0 = fused_sum(sl(P, 0), sl(E, 0), sl(neg, 0), sl(V, 0), -2)
            S1, E1 = fused_sum(sl(P, 1), sl(E, 1), sl(neg, 1), sl(V, 1), -2)
        if two and g > 1:
            Es = jnp.maximum(E0, E1)
            lim = 63 if wide else 31
            S = (S0 >> jnp.minimum(Es - E0, lim).astype(dt)) + (S1 >> jnp.minimum(Es - E1, lim).astype(dt))
        else:
            S, Es = fused_sum(P, E, neg, V, -2)
        return S, Es

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


def magnitude_range(codes) -> tuple:
    """(largest, least nonzero) magnitude code of concrete 16-bit float codes (a numpy or host
    JAX array of one element each, any shape; bf16's magnitude codes order like its values);
    the least is 2**16 for an all-zero array. Four vectorised numpy passes over 16-bit words
    (about 1 ms for 6 M elements on a CPU, where an XLA:CPU reduction took 19 ms)."""
    mag = np.asarray(codes).view(np.uint16) & np.uint16(0x7FFF)
    big = int(mag.max(initial=0))
    mag -= np.uint16(1)  # zero wraps to 0xFFFF: the minimum is the least nonzero magnitude - 1
    return big, int(mag.min(initial=0xFFFF)) + 1


def with_normal_values(fmt, f):
    """``f`` (decoded operands of ``fmt``, bf16) with ``val``: the exact f32 value of each
    zero or normal number, built from its fields by integer bits (no float operation, so no
    flushing); meaningless for subnormal, NaN and Inf numbers, which `normal_operands` keeps
    out."""
    mant = (f.sig & ((1 << fmt.mbits) - 1)) << (F32.mbits - fmt.mbits)
    bits = jnp.where(f.sig == 0, 0, ((f.exp + F32.bias) << F32.mbits) | mant)
    return f._replace(val=with_sign(lax.bitcast_convert_type(bits, jnp.float32), f.sign))


def _shift(x, n):
    """floor(x * 2**n) for int64 x and integer n of either sign."""
    return jnp.where(n >= 0, x << jnp.clip(n, 0, 63), x >> jnp.clip(-n, 0, 63))


@dataclass(frozen=True)
class CDNA3(IEEEAsFMAChain, FusedGroups):
    """MMA-Sim's bit-accurate CDNA3 (gfx942) MFMA algorithm, applied to the compressed
    products (NUMERICS.md 1.3-1.4). The named preset ``"cdna3"`` is ``CDNA3()``, MMA-Sim 2.x
    (PyPI) as it stands; the preset ``"cdna3_c785138"`` is the earlier GitHub version that
    NUMERICS.md section 1.3 transcribes: ``CDNA3(zero_exponent=-126, renormalize=False)``.

    Per input format, as MMA-Sim's CDNA3 MFMA (BUILTINS_DENSE.md 6): f16/bf16 groups of 8,
    fp8/bf8 groups of 16 in two stages, xf32 (f32 operands cut to 10 mantissa bits) groups of
    4, and f32 a plain f32 FMA chain in K order (MMA-Sim's "fma": a fused group cannot hold a
    48-bit f32 product; the fused-group fields do not apply there)."""

    name = "cdna3"
    chain_lacks = "has none of the fused-group fields"  # its f32/f64 check: `IEEEAsFMAChain.check`

