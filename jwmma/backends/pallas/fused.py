"""Pallas kernel step of the fused-group models (`jwmma.models.FusedGroups`, `CDNA3`).

NUMERICS.md section 1.3-1.4, bit for bit with `FusedGroups.accumulate` (per-product path and
`fused_dots`, which agree). Per K step and output tile, the step's compressed products are
taken in consecutive groups (restarting at the step boundary, as `over_groups` does); per
group, per two-stage half:

* pass 1: the half's largest product exponent E_T = max_k (ea_k + eb_k), zero factors
  carrying an exponent code so low that their products never set a maximum that matters
  (`kernel_lib.exp_code`): no select for the zero test;
* pass 2: the truncated aligned sum. fp8/bf8/f16 operands (exact in f32, products exact in
  f32): trunc(va * vb * 2**(F - E_T)), one multiply and a truncating conversion
  (`kernel_lib.trunc_i32`: one PTX conversion on a GPU), exact
  because |q| < 2**(F+2) <= 2**30 and the scale is a power of two; otherwise (bf16, other
  roundings, F > 28) integer shifts as `jwmma.models.fused.align`.

Then the halves merge with floor shifts, and `combine` adds the sum to C with int64 and
rounds to f32 (`kernel_lib.round_to_format`; variant ``float_combine``: float64 and one
conversion, with a tile-wide fallback for subnormal results). The operands reach the kernel
as words computed by XLA once per element (`Plan.word`: float alignment: the f32 bits of
the value with the exponent code in the 10 free low mantissa bits; integer alignment:
sig | code << 12 | sign << 22), so selecting the B row named by the 2:4 position is three
selects per product and pass, and nothing is decoded per product. Variants: the 2-D form
(one (tm, tn) tensor per product, unrolled) and ``vec3`` (3-D (tm, blocks, tn) tensors with
axis reductions: 10x faster on an H200, see FINDINGS.md).

Special values: per-(tile, unit) summaries computed before the kernel (`driver.summarize`:
any NaN/Inf operand, largest exponents for bf16 overflow) send a group through `lax.cond` to
`_with_flags`, which forms the per-product special flags in a loop (not unrolled); the numbers
are the same in both branches (NaN/Inf factors read as zeros: their products only override).
"""
from __future__ import annotations

import math

import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from ...numerics.formats import F32
from ...models.base import Context
from ...models.fused import FusedGroups
from ...numerics.rounding import pow2_f64

from . import kernel_lib as kl
from .driver import Kernel

__all__ = ["Plan", "group_sum", "group_sum3", "product_flags", "combine", "combine_float", "finish", "make_step"]

QNAN_F32 = 0x7FC00000
VALUE_BITS = ~(kl.EXP_MASK | (3 << 10))  # a float-aligned word's value bits (`Plan.word`)
POS_INF = 0x7F800000
NEG_INF = -0x800000  # 0xFF800000 as int32


def _groups(kc: int, group: int):
    """Static column ranges of the groups of one step (`over_groups`: last one partial)."""
    return [list(range(g, min(g + group, kc))) for g in range(0, kc, group)]


def _halves(cols, two: bool):
    """Columns of each fused sum of a group: even and odd positions (two-stage) or all."""
    if two and len(cols) > 1:
        return [cols[0::2], cols[1::2]]
    return [cols]


class Plan:
    """Static choices for one (builtin, model)."""

    def __init__(self, spec, model: FusedGroups, ctx: Context):
        self.spec, self.model, self.ctx = spec, model, ctx
        self.group, self.two, self.drop = model.resolved(ctx)
        self.fa, self.fb = ctx.a, ctx.b
        self.mab = self.fa.mbits + self.fb.mbits
        F = model.frac_bits
        self.float_align = (
            model.product_rounding == "truncate" and F <= 28
            and kl.exactly_f32(self.fa) and kl.exactly_f32(self.fb)
        )
        longest = max(len(h) for cols in _groups(spec.kc, self.group) for h in _halves(cols, self.two))
        # as FusedGroups._group_sum: int64 sums when a swept F could overflow int32
        half = -(-self.group // 2) if self.two else self.group
        self.wide = F + 2 + math.ceil(math.log2(max(half, 2))) + 1 > 31
        self.longest = longest
        self.may_overflow = self.fa.max_exp + self.fb.max_exp + 2 > 128  # bf16 products

    # ------------------------------------------------------------------ operand words
    def word(self, fmt, code):
        """One int32 per element carrying what a product needs (computed before the kernel,
        once per element): float alignment: the f32 bits of the value with the exponent code
        in the 10 free low mantissa bits (0-9); integer alignment: sig | code << 12 | sign
        << 22. NaN/Inf read as zeros (their products only ever override, see `_with_flags`)
        and carry a NaN and an Inf bit (`class_bits`: bits 10 and 11, free below every
        float-aligned format's mantissa, or 23 and 24), from which the rare branch reads the
        products' specials without decoding codes (`word_class`)."""
        d = kl.decode(fmt, code)
        ecode = kl.exp_code(d, self.model.zero_exponent)
        nan_bit, inf_bit = self.class_bits
        flags = (d.nan.astype(jnp.int32) << nan_bit) | (d.inf.astype(jnp.int32) << inf_bit)
        if self.float_align:
            return lax.bitcast_convert_type(d.val, jnp.int32) | ecode | flags
        return d.sig | (ecode << 12) | (d.sign << 22) | flags

    @property
    def class_bits(self):
        """(NaN bit, Inf bit) of the operand words (`word`)."""
        return (10, 11) if self.float_align else (23, 24)

    def word_class(self, w):
        """(nan, inf, zero, sign, sig, exp) of operand words: booleans, then int32 sign bits;
        sig and exp (integer alignment only: what the bf16 overflow flags need; exp is the
        finite nonzero factor's) are None under float alignment."""
        nan_bit, inf_bit = self.class_bits
        nan, inf = ((w >> nan_bit) & 1) == 1, ((w >> inf_bit) & 1) == 1
        if self.float_align:
            zero = ((w & VALUE_BITS & 0x7FFFFFFF) == 0) & ~nan & ~inf
            return nan, inf, zero, lax.shift_right_logical(w, jnp.int32(31)), None, None
        sig = w & 0xFFF
        return nan, inf, (sig == 0) & ~nan & ~inf, (w >> 22) & 1, sig, ((w >> 12) & kl.EXP_MASK) - kl.EXP_OFFSET

    def a_dec(self, code):
        """Decoded A (the rare specials branch) and its exponent code."""
        d = kl.decode(self.fa, code)
        return d, kl.exp_code(d, self.model.zero_exponent) - 2 * kl.EXP_OFFSET

    def word_exp(self, w):
        return (w & kl.EXP_MASK) if self.float_align else ((w >> 12) & kl.EXP_MASK)


def _a_cols(plan: Plan, view, cols):
    """(word, exponent - 1024) of every A column (tm, 1)."""
    out = {}
    for c in cols:
        w = view.aw_col(c)
        out[c] = (w, plan.word_exp(w) - 2 * kl.EXP_OFFSET)
    return out


def group_sum(plan: Plan, views, cols):
    """(S, E) of one group: S in units of 2**(E - F), as `FusedGroups._group_sum`.

    Both passes walk the group block by block, each block's four candidate B rows serving
    its two stored values at once. ``views``: (pass-1 view, pass-2 view); two distinct
    views (the driver's ``reload``) load A and B again in pass 2 instead of keeping every
    decoded column and row of the group live across passes (register pressure)."""
    F = plan.model.frac_bits
    dt = jnp.int64 if plan.wide else jnp.int32
    if views[1] is views[0]:  # one load of each column and row the two passes share
        views = (views[0].caching(),) * 2
    halves = _halves(cols, plan.two)
    half_of = {c: h for h, hc in enumerate(halves) for c in hc}
    blocks = sorted({c // 2 for c in cols})

    def words(view, q):
        return view.b_rows(q, "bw")

    a1 = _a_cols(plan, views[0], cols)
    et = [None] * len(halves)
    for q in blocks:  # pass 1: the largest exponent of each half
        rows = words(views[0], q)
        for c in (2 * q, 2 * q + 1):
            if c in half_of:
                h = half_of[c]
                e = a1[c][1] + plan.word_exp(views[0].pick(c, rows))
                et[h] = e if et[h] is None else jnp.maximum(et[h], e)
    a2 = a1 if views[1] is views[0] else _a_cols(plan, views[1], cols)
    s = [None] * len(halves)
    if plan.float_align:
        scale = [kl.pow2_f32(jnp.clip(F - e, -126, 127)) for e in et]
    for q in blocks:  # pass 2: the aligned, truncated sums
        rows = words(views[1], q)
        for c in (2 * q, 2 * q + 1):
            if c not in half_of:
                continue
            h = half_of[c]
            w = views[1].pick(c, rows)
            wa = a2[c][0]
            if plan.float_align:
                va = lax.bitcast_convert_type(wa & VALUE_BITS, jnp.float32)
                vb = lax.bitcast_convert_type(w & VALUE_BITS, jnp.float32)
                x = kl.trunc_i32((va * vb) * scale[h]).astype(dt)
            else:
                x = _align_int(plan, wa, a2[c][1], w, et[h], dt)
            s[h] = x if s[h] is None else s[h] + x
    if len(halves) == 1:
        return s[0], et[0]
    es = jnp.maximum(et[0], et[1])
    lim = 63 if plan.wide else 31
    return (s[0] >> jnp.minimum(es - et[0], lim).astype(dt)) + (s[1] >> jnp.minimum(es - et[1], lim).astype(dt)), es


def group_sum3(plan: Plan, view, cols, gather: bool = False):
    """`group_sum` on 3-D (tm, blocks, tn) tensors (variant ``vec3``): each stored slot of
    the group's blocks is one strided (tm, blocks) load of A words and positions, the four
    candidate B rows one strided (blocks, tn) load each; the selection is a select chain on
    broadcasts and the group maximum and sum are reductions over the middle axis. Float
    alignment, whole blocks only (every default group)."""
    F = plan.model.frac_bits
    nb = len(cols) // 2
    a0, b0 = view.a0 + cols[0], view.row0(cols[0])
    rows = lambda r, stride: view.refs["bw"][pl.ds(b0 + r, nb, stride=stride), :].astype(jnp.int32)[None]  # noqa: E731
    cand = None if view.dense or gather else [rows(r, 4) for r in range(4)]
    et, words, s = [], [], []
    for slot in (0, 1):
        wa = view.refs["aw"][:, pl.ds(a0 + slot, nb, stride=2)].astype(jnp.int32)
        if view.dense:  # slot s of block j multiplies dense row 2j + s: (1, nb, tn), no select
            w = rows(slot, 2)
        elif gather:  # block j's row of this slot: dense row 4j + position (one gather load)
            p = view.refs["p"][:, pl.ds(a0 + slot, nb, stride=2)].astype(jnp.int32)
            idx = b0 + 4 * jnp.arange(nb, dtype=jnp.int32)[None, :] + p  # (tm, nb)
            tn = view.refs["bw"].shape[1]
            w = view.refs["bw"][idx[:, :, None], jnp.arange(tn, dtype=jnp.int32)[None, None, :]].astype(jnp.int32)
        else:
            p = view.refs["p"][:, pl.ds(a0 + slot, nb, stride=2)].astype(jnp.int32)[:, :, None]
            w = kl.select4(p, cand)  # (tm, nb, tn)
        e = ((wa & kl.EXP_MASK) - 2 * kl.EXP_OFFSET)[:, :, None] + (w & kl.EXP_MASK)
        et.append(jnp.max(e, axis=1))
        if plan.two:  # this slot's half is summed now: one slot's (tm, nb, tn) words live at a time
            s.append(_aligned_sum3(F, wa, w, et[-1]))
        else:  # one maximum for both slots: the sums wait for it
            words.append((wa, w))
    if not plan.two:
        et = [jnp.maximum(et[0], et[1])] * 2
        s = [_aligned_sum3(F, wa, w, et[h]) for h, (wa, w) in enumerate(words)]
    if not plan.two:
        return s[0] + s[1], et[0]
    es = jnp.maximum(et[0], et[1])
    return (s[0] >> jnp.minimum(es - et[0], 31)) + (s[1] >> jnp.minimum(es - et[1], 31)), es


def _aligned_sum3(F: int, wa, w, et):
    """Sum over the middle axis of the products of A words (tm, nb) and B words (tm or 1, nb,
    tn), each truncated at 2**(et - F) (`group_sum3`'s pass 2)."""
    scale = kl.pow2_f32(jnp.clip(F - et, -126, 127))[:, None, :]
    va = lax.bitcast_convert_type(wa & VALUE_BITS, jnp.float32)[:, :, None]
    vb = lax.bitcast_convert_type(w & VALUE_BITS, jnp.float32)
    return jnp.sum(kl.trunc_i32((va * vb) * scale), axis=1, dtype=jnp.int32)


def _align_int(plan: Plan, wa, ea, w, et, dt):
    """One product aligned onto 2**(et - F) with integer shifts (`jwmma.models.fused.align`)."""
    lead = plan.model.frac_bits - plan.mab
    up, extra = max(lead, 0), max(-lead, 0)
    width = 63 if plan.wide else 31
    p = ((wa & 0xFFF) * (w & 0xFFF)).astype(dt)
    e = ea + plan.word_exp(w)
    neg = (((wa ^ w) >> 22) & 1) == 1
    right = jnp.minimum(et - e + extra, width).astype(dt)
    rounding = plan.model.product_rounding
    if rounding == "truncate":
        mag = (p << up) >> right
        return jnp.where(neg, -mag, mag)
    v = jnp.where(neg, -p, p) << up
    q = v >> right
    if rounding == "nearest":
        rem = v - (q << right)
        one = jnp.asarray(1, dt)
        half = jnp.where(right > 0, one << jnp.maximum(right - 1, 0), 0)
        rnd = (rem > half) | ((rem == half) & (right > 0) & ((q & 1) == 1))
        q = q + rnd.astype(dt)
    return q


def combine(model: FusedGroups, S, Es, cf: kl.Dec, drop: bool):
    """f32 bits of S * 2**(Es - F) + C (finite part), as `FusedGroups.combine`."""
    F, F2 = model.frac_bits, model.sum_bits
    i64 = jnp.int64
    csig = jnp.where(cf.nan | cf.inf, 0, cf.sig).astype(i64)
    ec = cf.exp.astype(i64)
    S = S.astype(i64)
    Mx = jnp.maximum(Es.astype(i64), ec)
    d = Mx - Es.astype(i64)
    ks = F2 + 1 - F if model.renormalize else F2 - F
    s_hi = kl.shift64(S, ks - d)
    cs = jnp.where(cf.sign == 1, -csig, csig)
    c_lo = kl.shift64(cs, (F - F32.mbits) - (Mx - ec))
    if drop:
        c_lo = jnp.where(ec < Mx - (F + 1), 0, c_lo)
    R = s_hi + (c_lo << ks)
    unit = Mx - F - ks
    if model.renormalize:
        lead = kl.bitlen64(jnp.abs(R)).astype(i64) - 1 + unit
        t = jnp.clip(jnp.maximum(lead, F32.min_exp) - F2 - unit, 0, 63)
        R = (R >> t) << t
    return kl.round_to_format((R < 0).astype(jnp.int32), jnp.abs(R), unit, F32)


def combine_float(model: FusedGroups, S, Es, cf: kl.Dec, drop: bool):
    """`combine` in float64 (S, C and their floors are exact in float64: |R| < 2**40) and
    one f64 -> f32 conversion for the final RNE, exact for normal f32 results. A tile holding a
    result in f32's subnormal range (a tile-wide test) rounds those on float64 integers
    instead, RNE at 2**-149 (XLA's CPU backend flushes subnormals in the conversion): a small
    branch, where the one before it ran `combine`, whose 64-bit integer code took a quarter of
    Triton's compile of the sparse fp8 kernel and over a third of the bf16 one
    (benchmarks/RESULTS.md)."""
    F, F2 = model.frac_bits, model.sum_bits
    f64 = jnp.float64
    ec = cf.exp
    csig = jnp.where(cf.nan | cf.inf, 0, cf.sig)
    Mx = jnp.maximum(Es, ec)
    d = Mx - Es
    ks = F2 + 1 - F if model.renormalize else F2 - F
    p2 = lambda n: pow2_f64(jnp.clip(n, -1000, 1000))
    s_hi = jnp.floor(S.astype(f64) * p2(ks - d))
    c_lo = jnp.floor(jnp.where(cf.sign == 1, -csig, csig).astype(f64) * p2((F - F32.mbits) - (Mx - ec)))
    if drop:
        c_lo = jnp.where(ec < Mx - (F + 1), 0.0, c_lo)
    R = s_hi + c_lo * (2.0 ** ks)
    unit = Mx - F - ks
    lead = ((lax.bitcast_convert_type(R, jnp.int64) >> 52) & 0x7FF).astype(jnp.int32) - 1023 + unit
    if model.renormalize:
        t = jnp.clip(jnp.maximum(lead, F32.min_exp) - F2 - unit, 0, 63)
        R = jnp.floor(R * p2(-t)) * p2(t)
    ok = jnp.min(jnp.where(R == 0, 0, lead)) >= F32.min_exp
    v = R * p2(unit)  # the exact result (a float64 subnormal only far below f32's range)
    bits = lax.bitcast_convert_type(v.astype(jnp.float32), jnp.int32)
    return kl.cond(ok, lambda: bits, lambda: _with_subnormals(v, R, bits))


def _with_subnormals(v, R, bits):
    """``bits`` with the results below 2**-126 rounded on float64 integers, ties to even:
    x = |v| * 2**149 < 2**23 is exact, and so are x + 1/2 and its floor (x has at most 40
    significant bits); a tie is rounded back down when its floor is odd. (Adding and taking
    away 2**52 would round in one step, but XLA folds (x + c) - c to x.) The integer is the
    subnormal's f32 bits (2**23: the least normal's); the sign comes from R, which no backend
    flushes."""
    x = jnp.minimum(jnp.abs(v) * 2.0 ** 149, 2.0 ** 24)
    y = jnp.floor(x + 0.5)
    q = y.astype(jnp.int32)
    q = q - (((y - x) == 0.5) & ((q & 1) == 1)).astype(jnp.int32)
    sub = (jnp.abs(v) < 2.0 ** F32.min_exp) & (R != 0)
    return jnp.where(sub, q | jnp.where(R < 0, jnp.int32(-(1 << 31)), 0), bits)


def finish(bits, cf: kl.Dec, flags=None):
    """C's (and the products') special values override ``bits`` (`FusedGroups.finish`)."""
    pinf = cf.inf & (cf.sign == 0)
    ninf = cf.inf & (cf.sign == 1)
    znan = cf.nan
    if flags is not None:
        nan_p, pinf_p, ninf_p = flags
        pinf, ninf, znan = pinf | pinf_p, ninf | ninf_p, znan | nan_p
    znan = znan | (pinf & ninf)
    bits = jnp.where(pinf, POS_INF, bits)
    bits = jnp.where(ninf, NEG_INF, bits)
    return jnp.where(znan, QNAN_F32, bits)


def product_flags(plan: Plan, view, cols, wide: bool = False):
    """Per output: (nan, +inf, -inf) over the group's products, and the bf16 overflow
    flags (big positive, big negative), read from the operand words' class bits
    (`Plan.word_class`: no decoding of codes here). A loop over the products, not unrolled:
    the branch is rare and a small kernel compiles faster."""

    def body(i, flags):
        nan, pinf, ninf, bpos, bneg = flags
        c = cols[0] + i
        a_nan, a_inf, a_zero, a_sign, a_sig, a_exp = plan.word_class(view.aw_col(c))
        b_nan, b_inf, b_zero, b_sign, b_sig, b_exp = plan.word_class(view.pick(c, view.b_rows(c // 2, "bw")))
        n = a_nan | b_nan | (a_inf & b_zero) | (a_zero & b_inf)
        neg = (a_sign ^ b_sign) == 1
        inf = (a_inf | b_inf) & ~n
        nan, pinf, ninf = nan | n, pinf | (inf & ~neg), ninf | (inf & neg)
        if plan.may_overflow:  # bf16 (integer alignment): a finite product may reach 2**128
            P = a_sig * b_sig
            finite = ~(a_nan | a_inf | b_nan | b_inf)
            lead = kl.bitlen32(P) - 1 + a_exp + b_exp - plan.mab
            big = finite & (P != 0) & (lead >= 128)
            bpos, bneg = bpos | (big & ~neg), bneg | (big & neg)
        return nan, pinf, ninf, bpos, bneg

    shape = (view.refs["c"].shape[0], view.refs["c"].shape[1])
    false = jnp.zeros(shape, jnp.bool_)
    return kl.fori(len(cols), body, (false,) * 5, wide=wide)


def make_step(spec, model: FusedGroups, ctx: Context, *, reload: bool = False, float_combine: bool = False,
              vec3: bool = False, wide_loops: bool = False, gather: bool = False):
    """`driver.Kernel` for ``model`` on builtin ``spec``. reload: load A and B again for the
    second pass (``view.second``); float_combine: `combine_float` (same bits); wide_loops:
    count every loop in int64 (`driver.Tiling.wide_loops`: the bf16 kernel ran 1.9x faster
    so on an H200, benchmarks/RESULTS.md)."""
    plan = Plan(spec, model, ctx)
    # one group per unit when groups tile the step (every default); else the whole step
    kc = plan.group if spec.kc % plan.group == 0 else spec.kc
    groups = _groups(kc, plan.group)
    comb = combine_float if float_combine else combine
    # the 3-D variant: float alignment, int32 sums, groups of whole blocks, halves = slots
    use3 = vec3 and plan.float_align and not plan.wide and plan.group % 2 == 0 and \
        (plan.group // 2) & (plan.group // 2 - 1) == 0 and kc == plan.group

    def step(view, acc):
        views = (view, view.second() if reload else view)
        sa, sb = view.summaries()
        special = sa.special | sb.special
        if plan.may_overflow:  # a bf16 product may reach 2**128
            special = special | (sa.emax + sb.emax + 2 > 127)
        for cols in groups:
            # the numbers treat NaN/Inf factors as zeros; their products only ever override
            S, Es = group_sum3(plan, view, cols, gather) if use3 else group_sum(plan, views, cols)
            cf = kl.decode(F32, acc, with_val=False)
            bits = comb(model, S, Es, cf, plan.drop)
            acc = kl.cond(special, lambda: _with_flags(plan, view, cols, bits, cf, wide_loops), lambda: finish(bits, cf))
        return acc

    fa, fb = ctx.a, ctx.b
    return Kernel(step, kc, (fa, fb), (fa.bits, fb.bits, False), reload,
                  a_word=lambda x: plan.word(fa, x), b_word=lambda x: plan.word(fb, x), wide_loops=wide_loops)


def _with_flags(plan: Plan, view, cols, bits, cf, wide: bool = False):
    """`finish` with the products' special values (the rare branch)."""
    nan, pinf, ninf, bpos, bneg = product_flags(plan, view, cols, wide)
    if plan.may_overflow:
        if plan.model.renormalize:
            pinf, ninf = pinf | bpos, ninf | bneg
        else:
            bits = jnp.where(bpos, POS_INF, bits)
            bits = jnp.where(bneg, NEG_INF, bits)
            bits = jnp.where(bpos & bneg, QNAN_F32, bits)
    return finish(bits, cf, (nan, pinf, ninf))
