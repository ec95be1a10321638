"""`gfx12_dot4`: rocjitsu's hardware-characterised RDNA4 (gfx1201) dot step (NUMERICS.md 2.2, 5).

Per output the compressed products are taken in consecutive *steps* of ``step`` products (the
dense WMMA uses 4); each step is one fused dot-product that rounds once, and its result is the
next step's accumulator C. One step, all in integers:

* specials first, by priority: a NaN factor -> fixed payload 0xFFC00A3D; an invalid product
  (Inf * 0, or +Inf and -Inf among the products) -> 0xFFC00000 (8-bit factors: 0xFFC00A3D);
  a NaN C -> C with its quiet bit set; else any Inf (products or C) -> +-Inf, both signs ->
  the invalid payload.
* factor k: ``ae = max(expfield, 1) - bias`` (zero/subnormal: 1 - bias); product
  ``P_k = sig_a * sig_b`` with value ``P_k * 2**(ae_a + ae_b - mbits_a - mbits_b)`` and grid
  ``ae_a + ae_b - frac_bits`` (frac_bits = 24; a zero product has no grid).
* C: value ``csig * 2**clsb``, leading exponent ``clead``.
  ``G = max(max_k grid_k, max(c_floor, clead) - c_window)`` (c_floor -126, f16 output -14;
  c_window 26).
* the products of a *subgroup* (pairs (0,1), (2,3) for 16-bit inputs; the whole step, one
  grid, for 8-bit inputs) are floored onto the subgroup's grid ``gp = max grid_k`` and summed;
  each subgroup sum is floored onto G; C is floored onto G, except that a negative C of which
  no bit survives contributes 0 when ``G > c_floor`` (-1 unit otherwise).
* the integer total times 2**G is rounded (RNE, gradual underflow) straight to f32 bits; a
  zero result (underflow included) is +0.

16-bit accumulators (swmmac_f16_16x16x32_f16, swmmac_bf16_16x16x32_bf16): C is widened
exactly and the result is narrowed after *every* step: f16 by RNE directly from the integer
total (overflow -> +-Inf, or +-65504 with ``fp16_ovfl``), bf16 by RNE to f32 followed by
truncation to the top 16 bits. Special results are narrowed as rocjitsu's
``dot_packed16::special`` does: factor NaN -> 0xFE3D (f16) / 0xFFFD (bf16); invalid
0xFFC00000 -> 0xFE00 / 0xFFC0; NaN C -> C | 0x0200 / C | 0x0040 (quiet bit, payload kept);
Inf -> 0x7C00/0xFC00 resp. 0x7F80/0xFF80 (all confirmed by rocjitsu's packed gfx1201 WMMA
captures). The bf16 truncation acts on the f32 bits, so an f32 result that is a tiny negative
subnormal becomes bf16 -0 (0x8000), as in rocjitsu.

Everything is vectorised over outputs and batch; static Python loops run only over the steps of
one instruction (`over_groups` scans longer dots) and over the subgroups (pairs) of one step.
Products and the step total are int32 (int64 when a swept parameter needs it); only the final
rounding uses int64.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
from jax import lax

from ..numerics.formats import BF16, F16, F32, FloatFormat, decode, pow2_f32, value_exponent
from ..numerics.rounding import round_to_format
from .fields import Bool, Choice, Int
from .base import Context, Model, as_column
from .grouping import loops, over_groups, unroll_for

__all__ = ["Gfx12Dot4", "SPECIALS", "NARROWINGS"]

EMPTY = -(1 << 20)  # grid of a zero product: never the maximum, far below any real grid

FACTOR_NAN_F32 = 0xFFC00A3D
INVALID_F32 = 0xFFC00000

#: special result bit patterns per accumulator format: (factor NaN, invalid, +Inf, -Inf)
SPECIALS = {
    "f32": (FACTOR_NAN_F32, INVALID_F32, 0x7F800000, 0xFF800000),
    "f16": (0xFE3D, 0xFE00, 0x7C00, 0xFC00),
    "bf16": (0xFFFD, 0xFFC0, 0x7F80, 0xFF80),
}
NARROWINGS = ("truncate", "nearest")


def _i32(u: int) -> int:
    """A 32-bit pattern as the int32 value with the same bits."""
    return u - (1 << 32) if u >= (1 << 31) else u


def _shift(v, sh, width: int):
    """floor(v * 2**sh) for signed ints v of a ``width``-bit type and ints sh of either sign."""
    left = jnp.clip(sh, 0, width - 1).astype(v.dtype)
    right = jnp.clip(-sh, 0, width - 1).astype(v.dtype)
    return jnp.where(sh >= 0, v << left, v >> right)



def _bitlen(x):
    return 32 - lax.clz(x.astype(jnp.int32))


@dataclass(frozen=True)
class Gfx12Dot4(Model):
    """rocjitsu's gfx1201 dot step, parametrised.

    step: products per rounding step (4: the measured dense WMMA step; DOT2 is 2).
    pairs: True = products align in pairs (0,1), (2,3), ... on their own grid first (measured
        for f16/bf16); False = all products of a step on one grid (rocjitsu's V_DOT4 fp8 rule);
        None = pairs for 16-bit inputs, one grid for 8-bit inputs.
    frac_bits: product grid = ae_a + ae_b - frac_bits (24 measured).
    c_window: G >= max(c_floor, lead(C)) - c_window (26 measured).
    c_floor: C-alignment exponent floor; None = -14 for f16 outputs, -126 otherwise.
    fp16_ovfl: MODE.FP16_OVFL: finite f16-output overflow saturates to +-65504.
    bf16_narrowing: 'truncate' (measured: RNE to f32, keep the top 16 bits) or 'nearest'
        (one RNE from the exact step total straight to bf16; for studies).
    """

    step: int = 4
    pairs: bool | None = None
    frac_bits: int = 24
    c_window: int = 26
    c_floor: int | None = None
    fp16_ovfl: bool = False
    bf16_narrowing: str = "truncate"

    name = "gfx12_dot4"

    FIELDS = {"step": Int(lo=1, hi=64), "pairs": Bool(optional=True), "frac_bits": Int(lo=8, hi=40),
              "c_window": Int(lo=0, hi=40), "c_floor": Int(lo=-300, hi=127, optional=True), "fp16_ovfl": Bool(),
              "bf16_narrowing": Choice(values=NARROWINGS)}

    # ------------------------------------------------------------------ static choices
    def check(self, ctx: Context):
        why = super().check(ctx)
        if why:
            return why
        if ctx.c not in (F32, F16, BF16):
            return f"{self.describe()} accumulates into f32, f16 or bf16, not {ctx.c.name}"
        for what, f in (("a", ctx.a), ("b", ctx.b)):
            if not isinstance(f, FloatFormat):
                return f"{self.describe()} needs floating-point {what} operands"
        return None

    def describe(self):
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__dataclass_fields__)
        return f"{type(self).__name__}({fields})"

    @staticmethod
    def byte_factors(ctx: Context) -> bool:
        """8-bit factors: invalid products take the factor-NaN payload (rocjitsu V_DOT4 fp8)."""
        return max(ctx.a.bits, ctx.b.bits) <= 8

    def resolved(self, ctx: Context):
        """(pairs, c_floor) for ``ctx``."""
        pairs = (not self.byte_factors(ctx)) if self.pairs is None else self.pairs
        floor = self.c_floor if self.c_floor is not None else (-14 if ctx.c == F16 else -126)
        return pairs, floor

    # ------------------------------------------------------------------ arithmetic
    def instruction(self, ctx: Context, a, pos, b, c, select, options):
        """`Model.accumulate` on whole matrices, as one loop over the steps: each selects its
        B rows and runs `_step` (the decoded operands enter the loop whole, so their decoding
        is computed once, not once per product). The same bits, one traced step. Off the CPU
        (``options.platform``), `Model.instruction`: the program whose GPU speed and bits
        RESULTS.md records (the loop was measured on CPUs only)."""
        if options.platform != "cpu" and not loops(options):
            return super().instruction(ctx, a, pos, b, c, select, options)
        pairs, floor = self.resolved(ctx)
        m, kc = a.sig.shape[-2:]
        st = self.step
        if st % 2 or kc % st:  # steps that split a 2:4 block: the products as they are
            return self.accumulate(as_column(a), select(b, pos), c, ctx, options)
        out = (*jnp.broadcast_shapes(a.sig.shape[:-2], b.sig.shape[:-2], c.shape[:-2]), m, b.sig.shape[-1])

        def body(i, acc):
            ga = jax.tree_util.tree_map(lambda t: lax.dynamic_slice_in_dim(t, i * st, st, -1), a)
            gp = lax.dynamic_slice_in_dim(pos, i * st, st, -1)
            gb = jax.tree_util.tree_map(lambda t: lax.dynamic_slice_in_dim(t, i * 2 * st, 2 * st, -2), b)
            return self._step(as_column(ga), select(gb, gp), acc, ctx, pairs, floor)

        return lax.fori_loop(0, kc // st, body, jnp.broadcast_to(c, out).astype(jnp.int32))

    def accumulate(self, a, b, c_bits, ctx: Context, options=None):
        """`Model.accumulate`: consecutive steps of ``step`` products."""
        pairs, floor = self.resolved(ctx)
        return over_groups(a, b, c_bits, self.step, lambda ga, gb, acc: self._step(ga, gb, acc, ctx, pairs, floor),
                           unroll_for(options))

    def _step(self, a, b, c_bits, ctx: Context, pairs: bool, c_floor: int):
        fa, fb, fc = ctx.a, ctx.b, ctx.c
        mab = fa.mbits + fb.mbits
        F = self.frac_bits
        g = max(a.sig.shape[-2], b.sig.shape[-2])
        sub = 2 if pairs else g
        n_sub = -(-g // sub)
        # static integer width: products < 2**(F+2) on their subgroup grid, C < 2**(c_window+1)
        sub_bits = max(F, mab) + 2 + math.ceil(math.log2(max(sub, 1))) + 1
        tot_bits = max(sub_bits, self.c_window + 2) + math.ceil(math.log2(n_sub + 1)) + 1
        wide = tot_bits > 31
        dt = jnp.int64 if wide else jnp.int32
        width = 64 if wide else 32
        # exact f32 values (f16, fp8): a product is one f32 multiply, and its value floored onto a
        # grid is a multiply by a power of two and a floor (exact: |x| < 2**(F+2) <= 2**31, never
        # subnormal), so only the operands' values are decoded and gathered
        values = a.val is not None and b.val is not None and F <= 29

        # ---- products: exact significand products, their grids and lsb exponents
        if values:
            V = a.val * b.val
            ae = value_exponent(a.val, fa) + value_exponent(b.val, fb)
            grid = jnp.where(V != 0, ae - F, EMPTY)
        else:
            P = (a.sig * b.sig).astype(dt)  # < 2**22
            ae = a.exp + b.exp  # alignment exponents (for P != 0 the MMA-Sim exp is ae)
            grid = jnp.where(P != 0, ae - F, EMPTY)
            lsb = ae - mab
            neg = (a.sign ^ b.sign) == 1
            v = jnp.where(neg, -P, P)

        # ---- C, widened exactly: value csig * 2**clsb
        cf = decode(fc, c_bits)
        finite_c = ~(cf.nan | cf.inf)
        csig = jnp.where(finite_c, cf.sig, 0)
        clsb = cf.exp - fc.mbits
        clead = jnp.where(csig != 0, clsb + _bitlen(csig) - 1, EMPTY)

        G = jnp.maximum(grid.max(axis=-2), jnp.maximum(c_floor, clead) - self.c_window)

        # ---- C floored onto G; a negative C with no surviving bit gives 0 when G > c_floor
        csh = clsb - G
        cmag = csig.astype(dt)
        cneg = (cf.sign == 1) & (csig != 0)
        total = _shift(jnp.where(cneg, -cmag, cmag), csh, width)
        gone = (csh < 0) & ((cmag >> jnp.clip(-csh, 0, width - 1).astype(dt)) == 0)
        total = jnp.where(cneg & gone & (G > c_floor), 0, total)

        # ---- subgroups: floored onto their own grid, summed, the sum floored onto G
        for i in range(n_sub):
            sl = slice(i * sub, min((i + 1) * sub, g))
            gp = grid[..., sl, :].max(axis=-2)
            if values:  # floor(V * 2**-gp); a subgroup of zero products sums zeros
                scale = pow2_f32(jnp.clip(-gp, -126, 127))[..., None, :]
                s = jnp.floor(V[..., sl, :] * scale).astype(jnp.int32).astype(dt).sum(axis=-2, dtype=dt)
            else:
                s = _shift(v[..., sl, :], lsb[..., sl, :] - gp[..., None, :], width).sum(axis=-2)
            total = total + _shift(s, gp - G, width)

        # ---- rounding into the accumulator format; zero (underflow included) is +0
        sign = (total < 0).astype(jnp.int32)
        mag = jnp.abs(total).astype(jnp.int64)
        if fc == F16 or (fc == BF16 and self.bf16_narrowing == "nearest"):
            bits = round_to_format(sign, mag, G, fc)
            mask = (1 << (fc.bits - 1)) - 1
            if fc == F16 and self.fp16_ovfl:
                bits = jnp.where((bits & mask) == 0x7C00, (bits & 0x8000) | 0x7BFF, bits)
            bits = jnp.where((bits & mask) == 0, 0, bits)
        else:
            bits = round_to_format(sign, mag, G, F32)
            bits = jnp.where((bits & 0x7FFFFFFF) == 0, 0, bits)
            if fc == BF16:  # truncation: the top 16 bits of the f32 result
                bits = (bits >> 16) & 0xFFFF

        # ---- specials (lowest priority first)
        factor_nan, invalid_nan, pos_inf, neg_inf = SPECIALS[fc.name]
        if self.byte_factors(ctx):
            invalid_nan = factor_nan
        if fc == F32:
            factor_nan, invalid_nan, pos_inf, neg_inf = map(_i32, (factor_nan, invalid_nan, pos_inf, neg_inf))
        if values:
            # the f32 product is IEEE's: NaN for a NaN factor or Inf times zero, +-Inf for an Inf
            # factor otherwise (an Inf times zero is invalid, which outranks its sign)
            factor_nan_k = jnp.isnan(a.val) | jnp.isnan(b.val)
            any_nan = factor_nan_k.any(axis=-2)
            invalid = (jnp.isnan(V) & ~factor_nan_k).any(axis=-2)
            p_pos = (V == jnp.inf).any(axis=-2)
            p_neg = (V == -jnp.inf).any(axis=-2)
        else:
            a_zero = (a.sig == 0) & ~a.nan & ~a.inf
            b_zero = (b.sig == 0) & ~b.nan & ~b.inf
            any_nan = (a.nan | b.nan).any(axis=-2)
            inf_k = a.inf | b.inf
            invalid = ((a.inf & b_zero) | (b.inf & a_zero)).any(axis=-2)
            p_pos = (inf_k & ~neg).any(axis=-2)
            p_neg = (inf_k & neg).any(axis=-2)
        invalid = invalid | (p_pos & p_neg)
        pos = p_pos | (cf.inf & (cf.sign == 0))
        ng = p_neg | (cf.inf & (cf.sign == 1))
        bits = jnp.where(pos | ng, jnp.where(pos & ng, invalid_nan, jnp.where(ng, neg_inf, pos_inf)), bits)
        quiet = 1 << (fc.mbits - 1)
        cb = c_bits.astype(jnp.int32)
        if fc.bits < 32:
            cb = cb & ((1 << fc.bits) - 1)
        bits = jnp.where(cf.nan, cb | quiet, bits)
        bits = jnp.where(invalid, invalid_nan, bits)
        bits = jnp.where(any_nan, factor_nan, bits)
        return bits.astype(jnp.int32)
