"""`BlockScaled`: the arithmetic of CDNA4's block-scaled MFMA (``mfma_scale_f32_*_f8f6f4``),
every undocumented choice a field (docs/spec/BUILTINS_DENSE.md 5, NUMERICS.md section 9).

No bit-level characterisation of the gfx950 matrix unit is published, so every field is an
assumption [ASSUMED]. Per output D[i][j], with A and B in OCP FP8/BF8/FP6/BF6/FP4 and one E8M0
scale per row (column) and block of 32 consecutive K, ``f = 2**(sa - 127) * 2**(sb - 127)``:

* ``scale_at='product'`` (default; the ISA guide's "d_exp = (a0_exp+b0_exp) + ... + c_exp +
  scale_a + scale_b"): every product is scaled exactly, ``p_k = a_k * b_k * f``, and
  ``block_sum`` sums the K scaled products from C:

  - ``'fused'`` (default): consecutive groups of ``group`` products; in each, every product
    is truncated toward zero to a multiple of 2**(E_T - F), E_T the group's largest
    exponent (operand exponents as MMA-Sim counts them, plus the scales) and F =
    ``frac_bits`` (``subbyte_frac_bits`` when both operands are FP6/BF6/FP4 and it is set);
    the exact sum of the truncated products is added to the running accumulator with one
    f32 rounding (RNE, gradual underflow): the CDNA3 fused group with one stage.
  - ``'fma_chain'``: acc <- RN_f32(acc + p_k) for k in order.

* ``scale_at='block'`` (rocjitsu's ``exec_f32_scaled_mixed``): each 32-product block is summed
  unscaled from +0 (``'fma_chain'``: an f32 FMA chain in k order, rocjitsu's; ``'fused'``:
  fused groups of ``min(group, 32)``), rounded to f32, scaled (``v = RN_f32(s * f)``, exact
  unless it leaves the f32 range) and added: acc <- RN_f32(acc + v), blocks in order from C.

* ``nan_scale``: what E8M0 0xFF does. ``'nan'`` (default; OCP MX: 0xFF is NaN): an output
  whose row or column has a 0xFF scale in any block is NaN. ``'exponent'``: 0xFF is read as
  the exponent 128.

Special values are decided first, per output, from the inputs as an exact sum would give them
(a NaN operand, Inf x 0, or Infs of both signs among the products and C: NaN; else an Inf
product or C: that Inf); the finite arithmetic then ignores them. (rocjitsu propagates them
through its f32 steps instead; that differs only where a finite partial sum overflows and
meets an opposite Inf.) Every NaN result is 0x7FC00000.

All exact values are float64: a product of two 8-bit (or narrower) operands has at most 8
significant bits and, scaled, an exponent within +-300, and a fused group's truncated sum has
at most F + 2 + log2(group) bits; `jwmma.numerics.rounding.add_rn` rounds each sum once.
"""
from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from ..numerics.formats import E8M0_BIAS, E8M0_NAN, F32, decode
from ..numerics.rounding import add_rn, pow2_f64, round_f64, value_f64
from .base import Context
from .fields import Choice, Int, declare
from .fused import align
from .fused_fields import F32FusedModel, frac_bits_field
from .grouping import over_groups, unroll_for
from .specials import product_specials

__all__ = ["BlockScaled", "SCALE_AT", "BLOCK_SUMS", "NAN_SCALES"]

SCALE_AT = ("product", "block")
BLOCK_SUMS = ("fused", "fma_chain")
NAN_SCALES = ("nan", "exponent")
_NO_EXP = -(1 << 20)  # the exponent of a zero product: below every real one


def _cols(x):
    """Decoded A (..., M, K) -> (..., M, K, 1); B (..., K, N) -> (..., 1, K, N): the products
    of output (i, j) along axis -2."""
    return jax.tree_util.tree_map(lambda t: None if t is None else t[..., :, :, None], x)


def _rows(x):
    return jax.tree_util.tree_map(lambda t: None if t is None else t[..., None, :, :], x)


@dataclass(frozen=True)
class BlockScaled(F32FusedModel):
    """The block-scaled MFMA model (module doc): ``BlockScaled()`` is the preset ``cdna4_mx``;
    ``BlockScaled(scale_at='block', block_sum='fma_chain')`` is ``mx_rocjitsu``."""

    scale_at: str = declare(Choice(values=SCALE_AT), default="product")
    block_sum: str = declare(Choice(values=BLOCK_SUMS), default="fused")
    group: int = declare(Int(lo=1, hi=4096), default=32)
    frac_bits: int = frac_bits_field()
    subbyte_frac_bits: int | None = declare(Int(lo=1, hi=40, optional=True), default=None)
    nan_scale: str = declare(Choice(values=NAN_SCALES), default="nan")

    name = "block_scaled"
    scaled = True
    # compile_weight: the base class's 1. Unoptimised ('fast'), a product costs 68-75 ns on a
    # 2-core Zen 1 EPYC (64-256 waves), as other models' do (fp8 cdna3 37, RDNA3 f16 76 ns). (It
    # weighed 16 when its products cost 320 ns; at 16, a first call of 64 waves compiled at
    # 'full', 2.1 CPU s against 1.5 s.)

    def frac(self, ctx: Context) -> int:
        """F of the fused groups for these formats (``subbyte_frac_bits`` for FP6/BF6/FP4 x
        FP6/BF6/FP4 when set)."""
        subbyte = max(ctx.a.bits, ctx.b.bits) < 8
        return self.subbyte_frac_bits if subbyte and self.subbyte_frac_bits is not None else self.frac_bits

    # ------------------------------------------------------------------ the instruction
    def scaled_instruction(self, ctx: Context, a, sa, b, sb, c, options):
        """`Model.scaled_instruction` (the module doc's arithmetic)."""
        a, b = _cols(a), _rows(b)
        sa, sb = sa[..., :, :, None], sb[..., None, :, :]
        unroll = unroll_for(options)
        if self.nan_scale == "nan":
            bad_scale = ((sa == E8M0_NAN) | (sb == E8M0_NAN)).any(axis=-2)
        else:
            bad_scale = None
        t = (sa - E8M0_BIAS) + (sb - E8M0_BIAS)  # the scale exponent of every product
        nan_p, pinf_p, ninf_p = product_specials(a, b)
        mab = ctx.a.mbits + ctx.b.mbits
        cf = decode(F32, c)
        acc = value_f64(cf, F32.mbits)
        finite_acc = jnp.where(cf.nan | cf.inf, 0.0, acc)
        if self.scale_at == "product":
            if self.block_sum == "fused":
                out = self._fused(a, b, t, finite_acc, ctx, self.group, unroll)
            else:
                out = over_groups((a, t), b, finite_acc, 1, lambda ga, gb, acc: add_rn(
                    _product(ga[0], gb, ga[1], mab).sum(axis=-2), acc, F32), unroll)
        else:
            block = ctx.scale_block
            k = jnp.broadcast_shapes(a.sig.shape, b.sig.shape)[-2]
            if k % block:
                raise ValueError(f"scale_at='block' needs K a multiple of {block}, got K={k}")

            def one_block(ga, gb, acc):
                ga, tb = ga
                zero = jnp.zeros(jnp.broadcast_shapes(ga.sig.shape[:-2] + ga.sig.shape[-1:],
                                                      gb.sig.shape[:-2] + gb.sig.shape[-1:]), jnp.float64)
                if self.block_sum == "fused":
                    s = self._fused(ga, gb, jnp.zeros_like(tb), zero, ctx, min(self.group, block), unroll)
                else:
                    s = over_groups(ga, gb, zero, 1,
                                    lambda x, y, s: add_rn(_product(x, y, None, mab).sum(axis=-2), s, F32), unroll)
                v = value_f64(decode(F32, round_f64(s * pow2_f64(tb[..., 0, :]), F32)), F32.mbits)
                return add_rn(v, acc, F32)

            out = over_groups((a, t), b, finite_acc, block, one_block, unroll)
        bits = round_f64(out, F32)
        return self._specials(bits, cf, nan_p, pinf_p, ninf_p, bad_scale)

    def _fused(self, a, b, t, acc, ctx: Context, group: int, unroll: int):
        """The fused groups of `group` products (scale exponents ``t``) added to ``acc``
        (float64 of an f32), one f32 rounding per group (up to ``unroll`` groups unrolled)."""
        F = self.frac(ctx)
        mab = ctx.a.mbits + ctx.b.mbits

        def step(ga, gb, acc):
            ga, tg = ga
            P = ga.sig * gb.sig  # < 2**(mab+2)
            finite = ~(ga.nan | ga.inf | gb.nan | gb.inf)
            P = jnp.where(finite, P, 0)
            E = jnp.where(P == 0, _NO_EXP, ga.exp + gb.exp + tg)
            ET = E.max(axis=-2, keepdims=True)
            neg = (ga.sign ^ gb.sign) == 1
            q = align(P, jnp.where(P == 0, 0, ET - E), F - mab, neg, "truncate", jnp.int64)
            S = q.sum(axis=-2)
            ET = ET[..., 0, :]
            v = S.astype(jnp.float64) * pow2_f64(jnp.where(ET == _NO_EXP, 0, ET - F))  # exact
            return add_rn(v, acc, F32)

        return over_groups((a, t), b, acc, group, step, unroll)

    @staticmethod
    def _specials(bits, cf, nan_p, pinf_p, ninf_p, bad_scale):
        nan = cf.nan | nan_p.any(axis=-2)
        pinf = (cf.inf & (cf.sign == 0)) | pinf_p.any(axis=-2)
        ninf = (cf.inf & (cf.sign == 1)) | ninf_p.any(axis=-2)
        nan = nan | (pinf & ninf)
        if bad_scale is not None:
            nan = nan | bad_scale
        bits = jnp.where(pinf, 0x7F800000, bits)
        bits = jnp.where(ninf, jnp.int32(-0x800000), bits)
        return jnp.where(nan, F32.qnan, bits).astype(jnp.int32)



def _product(a, b, t, mab: int):
    """Exact float64 products a_k * b_k (* 2**t_k); specials read as (signed) 0 (they are
    decided apart)."""
    finite = ~(a.nan | a.inf | b.nan | b.inf)
    sig = jnp.where(finite, a.sig * b.sig, 0).astype(jnp.float64)
    e = a.exp + b.exp - mab if t is None else a.exp + b.exp - mab + t
    mag = sig * pow2_f64(jnp.where(sig == 0, 0, e))
    return jnp.where((a.sign ^ b.sign) == 1, -mag, mag)
