"""Pallas kernel step of `gfx12_dot4` (`jwmma.models.Gfx12Dot4`, NUMERICS.md 2.2 and 5).

One kernel unit is one dot step of ``model.step`` compressed products (4: two 2:4 blocks;
the two stored values of a block are a pair), bit for bit with `Gfx12Dot4._step`:

* the B word selected per product carries the *signed* significand (bits 31:12) and the
  exponent code (bits 11:0, zeros far below everything: `kernel_lib.exp_code`), so a
  product is three selects, two extractions and one multiply; A's significand comes
  pre-shifted by F - mab, so aligning a product onto its subgroup grid is one floor shift
  right by (max exponent - exponent);
* subgroup sums are floored onto G, C is floored onto G with the "gone" rule, and the total
  (int32 for the measured parameters) is rounded to f32 (`float_round`: an int -> f32
  conversion and two exact scalings, with a tile-wide fallback to integer rounding when a
  result is subnormal) or straight to f16, or to f32 then truncated to bf16 (per-step
  narrowing of the 16-bit accumulators);
* specials by rocjitsu's priorities; the per-product special flags are formed only in the
  `lax.cond` branch taken when the unit's A or B tile holds a NaN/Inf.
"""
from __future__ import annotations

import math

import jax.numpy as jnp
from jax import lax

from ...numerics.formats import BF16, F16, F32
from ...models.base import Context
from ...models.gfx12 import SPECIALS, Gfx12Dot4

from . import kernel_lib as kl
from .driver import Kernel
from .rounding32 import f32_normal_ok, round_f32_by_float, round_to_format32, with_f32_subnormals

__all__ = ["i32_pattern", "make_step"]


def i32_pattern(u: int) -> int:
    """A 32-bit pattern as the int32 value with the same bits."""
    return u - (1 << 32) if u >= (1 << 31) else u

EMPTY = -(1 << 20)


class _Plan:
    def __init__(self, spec, model: Gfx12Dot4, ctx: Context, float_round: bool):
        self.model, self.ctx = model, ctx
        self.fa, self.fb, self.fc = ctx.a, ctx.b, ctx.c
        self.pairs, self.c_floor = model.resolved(ctx)
        self.mab = self.fa.mbits + self.fb.mbits
        self.L = model.frac_bits - self.mab  # static left shift of every product
        self.unit = model.step if spec.kc % model.step == 0 else spec.kc
        self.groups = [list(range(g, min(g + model.step, self.unit))) for g in range(0, self.unit, model.step)]
        self.float_round = float_round
        self.byte = model.byte_factors(ctx)

    def widths(self, g: int):
        """(dtype, width) of one step of g products, as `Gfx12Dot4._step` decides them."""
        F = self.model.frac_bits
        sub = 2 if self.pairs else g
        n_sub = -(-g // sub)
        sub_bits = max(F, self.mab) + 2 + math.ceil(math.log2(max(sub, 1))) + 1
        tot_bits = max(sub_bits, self.model.c_window + 2) + math.ceil(math.log2(n_sub + 1)) + 1
        return (jnp.int64, 64) if tot_bits > 31 else (jnp.int32, 32)

    @staticmethod
    def word(fmt, code):
        """Operand word (computed before the kernel, once per element): the signed
        significand in bits 31:12, the exponent code in 11:0 (NaN/Inf read as zeros)."""
        d = kl.decode(fmt, code, with_val=False)
        s = jnp.where(d.sign == 1, -d.sig, d.sig)
        return (s << 12) | kl.exp_code(d, None)

    def b_class(self, code):
        d = kl.decode(self.fb, code, with_val=False)
        zero = (d.sig == 0) & ~d.nan & ~d.inf
        return (d.nan.astype(jnp.int32) | (d.inf.astype(jnp.int32) << 1) | (zero.astype(jnp.int32) << 2)
                | (d.sign << 3))


def _step_total(plan: _Plan, view, cols, a_dec, brows, cf, c_bits):
    """(total, G, dtype) of one dot step over compressed columns ``cols`` of the unit."""
    model = plan.model
    F = model.frac_bits
    g = len(cols)
    dt, width = plan.widths(g)
    sub = 2 if plan.pairs else g
    # products: signed P * 2**L (L >= 0) or P (L < 0), their exponent sums
    prods = []
    for c in cols:
        wa = a_dec[c]
        sa, ea = wa >> 12, (wa & 0xFFF) - 2 * kl.EXP_OFFSET
        w = view.pick(c, brows[c // 2])
        sa_l = sa.astype(dt) << max(plan.L, 0)
        prods.append((sa_l * (w >> 12).astype(dt), ea + (w & 0xFFF)))
    subs = [prods[i:i + sub] for i in range(0, g, sub)]
    gps = []
    for sg in subs:
        gp = sg[0][1]
        for _, e in sg[1:]:
            gp = jnp.maximum(gp, e)
        gps.append(gp)
    # C, widened exactly: csig * 2**clsb
    fc = plan.fc
    csig = jnp.where(cf.nan | cf.inf, 0, cf.sig)
    clsb = cf.exp - fc.mbits
    clead = jnp.where(csig != 0, clsb + kl.bitlen32(csig) - 1, EMPTY)
    G = jnp.maximum(plan.c_floor, clead) - model.c_window
    for gp in gps:
        G = jnp.maximum(G, gp - F)
    # C floored onto G; a negative C with no surviving bit gives 0 when G > c_floor
    csh = clsb - G
    cmag = csig.astype(dt)
    cneg = (cf.sign == 1) & (csig != 0)
    cv = jnp.where(cneg, -cmag, cmag)
    left = jnp.clip(csh, 0, width - 1).astype(dt)
    right = jnp.clip(-csh, 0, width - 1).astype(dt)
    total = jnp.where(csh >= 0, cv << left, cv >> right)
    gone = (csh < 0) & ((cmag >> right) == 0)
    total = jnp.where(cneg & gone & (G > plan.c_floor), 0, total)
    extra = max(-plan.L, 0)
    for sg, gp in zip(subs, gps):
        s = None
        for p, e in sg:
            q = p >> jnp.minimum(gp - e + extra, width - 1).astype(dt)
            s = q if s is None else s + q
        total = total + (s >> jnp.minimum(G - (gp - F), width - 1).astype(dt))
    return total, G, dt


def _round(plan: _Plan, total, G, dt):
    """Accumulator bits of total * 2**G (rounding and narrowing of `Gfx12Dot4._step`)."""
    fc, model = plan.fc, plan.model
    sign = (total < 0).astype(jnp.int32)
    mag = jnp.abs(total)

    def rnd(fmt):
        if dt == jnp.int64:
            return kl.round_to_format(sign, mag, G, fmt)
        return round_to_format32(sign, mag, G, fmt)

    if fc == F16 or (fc == BF16 and model.bf16_narrowing == "nearest"):
        bits = rnd(fc)
        mask = (1 << (fc.bits - 1)) - 1
        if fc == F16 and model.fp16_ovfl:
            bits = jnp.where((bits & mask) == 0x7C00, (bits & 0x8000) | 0x7BFF, bits)
        return jnp.where((bits & mask) == 0, 0, bits)
    if plan.float_round and dt == jnp.int32:
        fast = round_f32_by_float(total, G)
        bits = kl.cond(f32_normal_ok(total, G), lambda: fast, lambda: with_f32_subnormals(total, G, fast))
    else:
        bits = rnd(F32)
    bits = jnp.where((bits & 0x7FFFFFFF) == 0, 0, bits)
    if fc == BF16:
        bits = (bits >> 16) & 0xFFFF
    return bits


def _specials(plan: _Plan, bits, cf, c_bits, flags):
    """Special results by priority (lowest first), as `Gfx12Dot4._step`."""
    fc = plan.fc
    factor_nan, invalid_nan, pos_inf, neg_inf = SPECIALS[fc.name]
    if plan.byte:
        invalid_nan = factor_nan
    if fc == F32:
        factor_nan, invalid_nan, pos_inf, neg_inf = map(i32_pattern, (factor_nan, invalid_nan, pos_inf, neg_inf))
    pos = cf.inf & (cf.sign == 0)
    ng = cf.inf & (cf.sign == 1)
    if flags is not None:
        any_nan, invalid, p_pos, p_neg = flags
        invalid = invalid | (p_pos & p_neg)
        pos, ng = pos | p_pos, ng | p_neg
    bits = jnp.where(pos | ng, jnp.where(pos & ng, invalid_nan, jnp.where(ng, neg_inf, pos_inf)), bits)
    quiet = 1 << (fc.mbits - 1)
    cb = c_bits if fc.bits == 32 else (c_bits & ((1 << fc.bits) - 1))
    bits = jnp.where(cf.nan, cb | quiet, bits)
    if flags is not None:
        bits = jnp.where(invalid, invalid_nan, bits)
        bits = jnp.where(any_nan, factor_nan, bits)
    return bits


def _flags(plan: _Plan, view, cols, a_dec):
    """Per output (any factor NaN, any invalid product, any +Inf, any -Inf product)."""
    bcls = {q: [plan.b_class(row) for row in view.b_rows(q)] for q in sorted({c // 2 for c in cols})}
    any_nan = invalid = p_pos = p_neg = None

    def acc(x, y):
        return y if x is None else (x | y)

    for c in cols:
        d = kl.decode(plan.fa, view.a_col(c), with_val=False)
        w = view.pick(c, bcls[c // 2])
        b_nan, b_inf, b_zero = (w & 1) == 1, (w & 2) == 2, (w & 4) == 4
        a_zero = (d.sig == 0) & ~d.nan & ~d.inf
        neg = (d.sign ^ ((w >> 3) & 1)) == 1
        inf_k = d.inf | b_inf
        any_nan = acc(any_nan, d.nan | b_nan)
        invalid = acc(invalid, (d.inf & b_zero) | (b_inf & a_zero))
        p_pos = acc(p_pos, inf_k & ~neg)
        p_neg = acc(p_neg, inf_k & neg)
    return any_nan, invalid, p_pos, p_neg


def make_step(spec, model: Gfx12Dot4, ctx: Context, float_round: bool = False):
    """`driver.Kernel` for the driver. ``float_round``: f32 results by conversion (same bits;
    a tile-wide test per step picks integer rounding when a result is subnormal)."""
    plan = _Plan(spec, model, ctx, float_round)
    unit = plan.unit

    def step(view, acc):
        a_dec = {c: view.aw_col(c) for c in range(unit)}
        brows = {q: view.b_rows(q, "bw") for q in range(unit // 2)}
        sa, sb = view.summaries()
        special = sa.special | sb.special
        for cols in plan.groups:
            # the numbers treat NaN/Inf factors as zeros; their products only ever override
            cf = kl.decode(plan.fc, acc, with_val=False)
            total, G, dt = _step_total(plan, view, cols, a_dec, brows, cf, acc)
            bits = _round(plan, total, G, dt)
            c_bits = acc
            acc = kl.cond(special, lambda: _specials(plan, bits, cf, c_bits, _flags(plan, view, cols, a_dec)),
                           lambda: _specials(plan, bits, cf, c_bits, None))
        return acc

    return Kernel(step, unit, (plan.fa, plan.fb), (plan.fa.bits, plan.fb.bits, False),
                  a_word=lambda x: plan.word(plan.fa, x), b_word=lambda x: plan.word(plan.fb, x))
