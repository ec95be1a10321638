"""Pallas kernel step of `exact` for float builtins (`jwmma.models.Exact`): exact products,
their sum with C exact, one RNE rounding per builtin step, IEEE specials.

Fast path: the step's products are summed in float64, which is exact when the unit's tile
has a small enough exponent span: all products are multiples of 2**(lo_a + lo_b - mab) below
kc * 2**(hi_a + hi_b + 2), so 53 bits hold every partial sum. For fp8 x fp8 this holds
statically (42 bits: "E4M3 products are multiples of 2**-18 below 2**18"); otherwise a
tile-wide test on the nonzero exponents decides. fp8/bf8/f16 products are formed in f32
(exact) and widened; bf16 products in float64. Starting the sum at -0.0 gives the IEEE sum
rule for an exact zero (+0 unless every product and C are -0), and NaN/Inf propagate as the
model says (any NaN or Inf * 0 or +Inf with -Inf: NaN, else +-Inf). The sum s and C are then
added error-free (TwoSum), rounded to odd in float64 and once to the destination with
integer rounding (gradual underflow): exactly RN(sum + C).

Slow path (span too wide: f16/bf16 data with exponents far apart): the XLA model's band
and limb algorithm (`jwmma.models.exact_sums.exact_sum_bits`), rebuilt with static loops and
selects instead of stacks and take_along_axis.
"""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
from jax import lax

from ...numerics.formats import BF16, F32
from ...models.base import Context
from ...models.exact import Exact
from ...models.exact_sums import band_plan, limbs_plus_c
from ...numerics.rounding import fields_to_f64, pow2_f64

from . import kernel_lib as kl
from .driver import Kernel
from .f64 import f64_of_fields, round_f64, round_to_odd, two_sum

__all__ = ["make_step"]

ZERO_EXP = -126
CHUNK = 8  # products per loop iteration inside a step (unrolled)


def _f32_value(fmt, code):
    """IEEE f32 value of a code (formats exact in f32)."""
    d = kl.decode(fmt, code)
    v = jnp.where(d.inf, jnp.where(d.sign == 1, -np.inf, np.inf).astype(jnp.float32), d.val)
    return jnp.where(d.nan, jnp.float32(np.nan), v)


def make_step(spec, model: Exact, ctx: Context):
    """`driver.Kernel` of `Exact` on ``spec``: float64 step sums where the exponent span
    allows, the band/limb sum otherwise; one rounding with C per step."""
    fa, fb, fc = ctx.a, ctx.b, ctx.c
    kc = spec.kc
    mab = fa.mbits + fb.mbits
    lg = math.ceil(math.log2(max(kc, 2)))
    in_f32 = kl.exactly_f32(fa) and kl.exactly_f32(fb) and fa.max_exp + fb.max_exp + 2 <= 127
    static_ok = (fa.max_exp + fb.max_exp + 2 + lg) - (fa.min_exp + fb.min_exp - mab) <= 53
    plan = band_plan(ctx, kc)
    chunk_len = math.gcd(CHUNK, kc)  # K = 4 (mfma_f32_32x32x4bf16): one chunk of 4, not kc // 8 = 0 chunks

    def finish(s, view, acc):
        c = f64_of_fields(kl.decode(fc, acc, with_val=False), fc.mbits)
        s2, e = two_sum(s, c)
        finite = (jnp.abs(s) < np.inf) & (jnp.abs(c) < np.inf)
        t = jnp.where(finite, round_to_odd(s2, e), s + c)
        return round_f64(t, fc)

    def fast(view, acc):
        def chunk(i, s):  # chunk_len products per iteration, unrolled
            v = view.shifted(i * chunk_len)
            f32 = lambda w: lax.bitcast_convert_type(w, jnp.float32)  # noqa: E731
            for q in range(chunk_len // 2):
                if in_f32:
                    rows = [f32(row) for row in v.b_rows(q, "bw")]
                else:
                    rows = [f64_of_fields(kl.decode(fb, row, with_val=False), fb.mbits) for row in v.b_rows(q)]
                for c in (2 * q, 2 * q + 1):
                    sel = v.pick(c, rows)
                    if in_f32:
                        p = (f32(v.aw_col(c)) * sel).astype(jnp.float64)
                    else:
                        p = f64_of_fields(kl.decode(fa, v.a_col(c), with_val=False), fa.mbits) * sel
                    s = s + p
            return s

        s = kl.fori(kc // chunk_len, chunk, jnp.full(acc.shape, -0.0, jnp.float64))
        return finish(s, view, acc)

    def slow(view, acc):
        return _limb_sum(plan, ctx, view, acc, kc)

    def step(view, acc):
        if static_ok:
            return fast(view, acc)
        sa, sb = view.summaries()  # exponents of the tile's nonzero finite operands
        ok = (sa.emax + sb.emax + 2 + lg) - (sa.emin + sb.emin - mab) <= 53
        return kl.cond(ok, lambda: fast(view, acc), lambda: slow(view, acc))

    word = lambda f: (lambda x: lax.bitcast_convert_type(_f32_value(f, x), jnp.int32)) if in_f32 else None  # noqa: E731
    return Kernel(step, kc, (fa, fb), (fa.bits, fb.bits, False), a_word=word(fa), b_word=word(fb))


def _limb_sum(g, ctx: Context, view, acc, kc: int):
    """`Exact.accumulate` with product specials, by `exact_sum_bits`'s bands and limbs."""
    fa, fb, fc = ctx.a, ctx.b, ctx.c
    w, nw, nb, t, g0, nl = g["w"], g["nw"], g["nb"], g["t"], g["g0"], g["nl"]
    cf = kl.decode(fc, acc, with_val=False)
    shape = acc.shape
    zero = jnp.zeros(shape, jnp.int64)
    any_nan = cf.nan
    pinf = cf.inf & (cf.sign == 0)
    ninf = cf.inf & (cf.sign == 1)
    all_neg_zero = (cf.sig == 0) & (cf.sign == 1) & ~cf.nan & ~cf.inf
    def body(c, carry):  # rare path: one product per iteration keeps the kernel small
        bands, any_nan, pinf, ninf, all_neg_zero = carry
        q = c // 2
        drows = [kl.decode(fb, row, with_val=False) for row in view.b_rows(q)]
        a = kl.decode(fa, view.a_col(c), with_val=False)
        b = kl.Dec(*[view.pick(c, [getattr(d, f) for d in drows]) for f in ("sign", "sig", "exp", "nan", "inf")], None)
        a_zero = (a.sig == 0) & ~a.nan & ~a.inf
        b_zero = (b.sig == 0) & ~b.nan & ~b.inf
        nan_p = a.nan | b.nan | (a.inf & b_zero) | (a_zero & b.inf)
        inf_p = (a.inf | b.inf) & ~nan_p
        neg = (a.sign ^ b.sign) == 1
        any_nan, pinf, ninf = any_nan | nan_p, pinf | (inf_p & ~neg), ninf | (inf_p & neg)
        finite = ~(a.nan | a.inf | b.nan | b.inf)
        pa = fields_to_f64(a.sign, a.sig, a.exp, fa.mbits)
        pb = fields_to_f64(b.sign, b.sig, b.exp, fb.mbits)
        p = jnp.where(finite, pa * pb, 0.0)
        pexp = jnp.where(finite, a.exp + b.exp, ZERO_EXP)
        all_neg_zero = all_neg_zero & (p == 0) & neg
        band = jnp.clip((pexp - g["emin"]) // w, 0, nb - 1)
        bands = tuple(bands[j] + (p if nb == 1 else jnp.where(band == j, p, 0.0)) for j in range(nb))
        return bands, any_nan, pinf, ninf, all_neg_zero

    full = lambda x: jnp.broadcast_to(x, shape)
    init = (tuple(jnp.zeros(shape, jnp.float64) for _ in range(nb)), full(any_nan), full(pinf), full(ninf),
            full(all_neg_zero))
    bands, any_nan, pinf, ninf, all_neg_zero = kl.fori(kc, body, init)
    limbs = [zero] * nl
    for j in range(nb):
        grid = g["emin"] - g["mab"] + j * w
        limbs[t + j] = limbs[t + j] + (bands[j] * pow2_f64(jnp.int64(-grid))).astype(jnp.int64)
    cfin_sig = jnp.where(cf.nan | cf.inf, 0, cf.sig)
    cfin_exp = jnp.where(cf.nan | cf.inf, ZERO_EXP, cf.exp)
    limbs, neg = limbs_plus_c(limbs, cf.sign, cfin_sig, cfin_exp, fc, g0, w)
    h = jnp.full(shape, -1, jnp.int32)
    for q in range(nl):
        h = jnp.where(limbs[q] != 0, q, h)
    hc = jnp.maximum(h, 0)
    mag = zero
    for d in range(nw):  # limbs h, h-1, ..., h-nw+1 (0 below limb 0)
        idx = hc - d
        pick = zero
        for q in range(nl):
            pick = jnp.where(idx == q, limbs[q], pick)
        mag = (mag << w) | pick
    lo_idx = hc - nw
    sticky = h < -1  # all False
    for q in range(nl):
        sticky = sticky | ((q <= lo_idx) & (limbs[q] != 0))
    scale = g0 + (hc - nw + 1) * w
    is_zero = h < 0
    bits = kl.round_to_format(neg.astype(jnp.int32), jnp.where(is_zero, 0, mag), scale, fc, sticky)
    bits = jnp.where(is_zero, jnp.where(all_neg_zero, 1 << (fc.bits - 1), 0), bits)
    inf_bits = ((1 << fc.ebits) - 1) << fc.mbits
    bits = jnp.where(pinf, inf_bits, bits)
    bits = jnp.where(ninf, inf_bits | (1 << (fc.bits - 1)), bits)
    bits = jnp.where(any_nan | (pinf & ninf), fc.qnan, bits)
    return bits.astype(jnp.int32)

