"""Pallas kernel step of the block-scaled MFMA model (`jwmma.models.BlockScaled`, NUMERICS.md
section 9), bit for bit with `BlockScaled.scaled_instruction` where it applies (`applies`):
``scale_at='product'`` with fused groups (the default, ``cdna4_mx``) whose size divides the
32-K scale block.

A group then lies inside one scale block, so all of its products carry the same scale
exponent t = (sa - 127) + (sb - 127) (its row's A scale, its column's B scale): the group's
largest exponent is the unscaled one plus t, the alignment shifts and the truncated sum S are
the unscaled ones, and the group's value is S * 2**(E_T + t - F). The kernel therefore takes
the fused-group kernel's sum of a group as it is (`fused.group_sum3`: float alignment, 3-D
tensors; `fused.group_sum`, 2-D, for Mosaic GPU) and adds t to its exponent. One unit is a
whole instruction (K step), because the model decides special values per instruction, from
its inputs: C's NaN/Inf and the products' (`fused.product_flags`, the rare branch) override
the finite sum at the end of the step, and a finite sum that overflowed stays Inf within it
(as float64 Inf does in the model).

Each group's sum is added to the running f32 accumulator with one rounding of the exact sum
(`add_exact`, the model's `add_rn`): integers aligned 60 bits below the larger term's leading
bit, the smaller term's lost bits kept as a sticky bit, then `kernel_lib.round_to_format`.

The operands reach the kernel as the GEMM's uint16 words ``element | scale << 8``
(`jwmma.tiled.operands.scaled_words`); the kernel reads each group's scales from its first A
column and first B row, so every element of a 32-K block must carry the same scale (the gemm
makes them so; `jwmma.tiled.operands.scaled_words` checks words given as they are).
"""
from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from ...models.base import Context
from ...models.fused import FusedGroups
from ...models.scaled import BlockScaled
from ...numerics.formats import E8M0_BIAS, E8M0_NAN, F32
from . import fused
from . import kernel_lib as kl
from .driver import Kernel
from .f64 import f64_of_fields, round_to_odd, two_sum
from ...numerics.rounding import pow2_f64

__all__ = ["applies", "add_exact", "add_float", "make_step"]

#: the leading bit of an exact sum sits this far above the unit it is aligned to (< 63 - 2)
_WINDOW = 60
_NONE = -(1 << 20)  # leading exponent of a zero term: below every real one


def applies(spec, model, ctx: Context) -> str | None:
    """None when the kernel computes ``model`` on ``spec`` bit for bit; else why not (the model's
    other choices run on the XLA path)."""
    if not isinstance(model, BlockScaled):
        return f"{model.describe()} is not a BlockScaled model"
    if model.scale_at != "product" or model.block_sum != "fused":
        return "the kernel computes scale_at='product' with block_sum='fused' only"
    g, F = model.group, model.frac(ctx)
    if g < 2 or g & (g - 1) or ctx.scale_block % g or spec.kc % g:
        return f"group={g} must be a power of two >= 2 dividing the {ctx.scale_block}-K scale block"
    if F > 28 or F + 2 + (g.bit_length() - 1) > 31:  # float alignment, int32 group sums
        return f"frac_bits={F} with group={g} needs sums wider than the kernel's 31 bits"
    if not (kl.exactly_f32(ctx.a) and kl.exactly_f32(ctx.b)):
        return f"{ctx.a.name} x {ctx.b.name} values are not all normal float32"
    return None


def add_exact(S, unit, acc):
    """int32 f32 bits of RN_f32(S * 2**unit + acc), one rounding of the exact sum (nearest
    even, gradual underflow, overflow to Inf); an Inf ``acc`` (a finite sum that overflowed)
    stays.

    Args:
        S: (tm, tn) int32 sums; unit: (tm, tn) int32 exponent of their unit; acc: (tm, tn)
            int32 f32 bits, finite or Inf.
    Returns:
        (tm, tn) int32 f32 bits.
    """
    i64 = jnp.int64
    cf = kl.decode(F32, acc, with_val=False)
    cs = jnp.where(cf.sign == 1, -cf.sig, cf.sig).astype(i64)
    s = S.astype(i64)
    us, uc = unit.astype(i64), (cf.exp - F32.mbits).astype(i64)
    lead_s = jnp.where(s == 0, _NONE, kl.bitlen64(jnp.abs(s)).astype(i64) - 1 + us)
    lead_c = jnp.where(cs == 0, _NONE, kl.bitlen64(jnp.abs(cs)).astype(i64) - 1 + uc)
    base = jnp.maximum(lead_s, lead_c) - _WINDOW

    def aligned(x, ux):
        # x * 2**(ux - base): exact for the larger term (its leading bit is at most _WINDOW
        # above base); the smaller one may lose low bits (floor), which the sticky bit keeps
        sh = ux - base
        right = jnp.clip(-sh, 0, 62)
        down = x >> right
        return jnp.where(sh >= 0, x << jnp.clip(sh, 0, 62), down), (sh < 0) & ((x - (down << right)) != 0)

    (xs, ls), (xc, lc) = aligned(s, us), aligned(cs, uc)
    r = xs + xc
    sticky = ls | lc  # the exact sum is r + f, 0 < f < 1 units, when set
    neg = r < 0
    mag = jnp.where(neg, -r - sticky.astype(i64), r)  # |r + f| = (|r| - 1) + (1 - f) when r < 0
    bits = kl.round_to_format(neg.astype(jnp.int32), mag, base, F32, sticky)
    return jnp.where(cf.inf, acc, bits)


def add_float(S, unit, acc):
    """`add_exact` in float64 (variant ``float_combine``): S * 2**unit and the accumulator are
    exact float64 values, TwoSum splits their sum exactly, round-to-odd keeps the sticky bit in
    the last place and one float64 -> float32 conversion rounds once (the XLA model's `add_rn`
    with a hardware conversion). A conversion may flush a subnormal float32 result (XLA's CPU
    backend does), so a tile holding one takes `add_exact` (a tile-wide `lax.cond`).

    Args and Returns: as `add_exact`.
    """
    cf = kl.decode(F32, acc, with_val=False)
    c = f64_of_fields(cf, F32.mbits)
    v = S.astype(jnp.float64) * pow2_f64(unit.astype(jnp.int32))  # exact: |S| < 2**31, |unit| < 600
    s, e = two_sum(v, c)
    t = round_to_odd(s, e)
    tiny = (t != 0) & (jnp.abs(t) < 2.0**-126)
    fast = lambda: jnp.where(cf.inf, acc, lax.bitcast_convert_type(t.astype(jnp.float32), jnp.int32))  # noqa: E731
    return lax.cond(kl.tile_any(tiny), lambda: add_exact(S, unit, acc), fast)


def make_step(spec, model: BlockScaled, ctx: Context, *, float_combine: bool = False, vec3: bool = True,
              loop: bool = True) -> Kernel:
    """`driver.Kernel` of ``model`` on the block-scaled ``spec`` (`applies` must hold): one unit
    per instruction; ``float_combine``: `add_float` instead of `add_exact`; ``vec3``: the group
    sums on 3-D tensors (`fused.group_sum3`), else in the 2-D form (`fused.group_sum`, the Mosaic
    GPU kernels'); the same bits every way."""
    why = applies(spec, model, ctx)
    if why:
        raise ValueError(f"no Pallas kernel for {model.describe()} on {spec.name}: {why}")
    g, F = model.group, model.frac(ctx)
    # the group sums of the fused kernel: one stage, zeros taking no part in the maximum
    plan = fused.Plan(spec, FusedGroups(group=g, frac_bits=F, two_stage=False, zero_exponent=None), ctx)
    groups = [list(range(s, s + g)) for s in range(0, spec.kc, g)]
    nan_scale = model.nan_scale == "nan"
    add = add_float if float_combine else add_exact

    def group(v, cols, fin, bad):
        """One group added to the finite sum ``fin``; ``bad``: a NaN scale seen."""
        S, et = fused.group_sum3(plan, v, cols) if vec3 else fused.group_sum(plan, (v, v), cols)
        sa = (v.a_col(cols[0]) >> 8) & 0xFF  # (tm, 1): the group's scale block
        sb = (v.b_row(cols[0]) >> 8) & 0xFF  # (1, tn)
        fin = add(S, et + (sa - E8M0_BIAS) + (sb - E8M0_BIAS) - F, fin)
        if nan_scale:
            bad = bad | (sa == E8M0_NAN) | (sb == E8M0_NAN)
        return fin, bad

    def step(view, acc):
        cf0 = kl.decode(F32, acc, with_val=False)
        fin = jnp.where(cf0.nan | cf0.inf, 0, acc)  # C's specials are decided at the end
        bad = jnp.zeros(fin.shape, jnp.bool_)
        if loop:  # one traced group, its columns g further on each iteration
            fin, bad = kl.fori(len(groups), lambda i, x: group(view.shifted(i * g), groups[0], *x), (fin, bad))
        else:
            for cols in groups:
                fin, bad = group(view, cols, fin, bad)
        sa_sum, sb_sum = view.summaries()
        every = list(range(spec.kc))
        out = lax.cond(sa_sum.special | sb_sum.special,
                       lambda: fused.finish(fin, cf0, fused.product_flags(plan, view, every)[:3]),
                       lambda: fused.finish(fin, cf0))
        return jnp.where(bad, fused.QNAN_F32, out) if nan_scale else out

    fa, fb = ctx.a, ctx.b
    return Kernel(step, spec.kc, (fa, fb), (16, 16, False), a_word=lambda x: plan.word(fa, x),
                  b_word=lambda x: plan.word(fb, x), dense=True)
