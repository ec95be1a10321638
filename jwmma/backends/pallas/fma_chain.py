"""Pallas kernel step of `fma_chain` (`jwmma.models.FMAChain`): acc <- RN_f32(a_k b_k + acc)
over the compressed products in compressed-K order, a 16-bit accumulator widened exactly
and rounded to its format at the end of every builtin step.

Fast path: when every product of the unit's tile is an exact, normal f32 (always for fp8,
bf8 and f16 factors; for bf16 a tile-wide exponent test) and at least 2**-102 in its last
bit, one f32 multiply (exact) and one f32 add (the FMA's single RNE) per product give the
model's bits: then no result is subnormal (an exact sum of a multiple of 2**-102 and an
accumulator >= 2**-126 that is below 2**-126 is zero), so flushing (XLA CPU) cannot change
anything, IEEE signed zeros and special values (Inf * 0, Inf - Inf) come from the hardware,
and NaNs are made the canonical quiet NaN at the end of the unit. A multiply-add contracted
to an FMA by the compiler gives the same bits (the product is exact).

Slow path (tile-wide `lax.cond`): a subnormal accumulator at the start of the unit (its value
must survive additions of zero products, which a flushing add would lose) or bf16 products
outside the window: the model's float64 emulation (TwoSum, round to odd, integer rounding).
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from ...numerics.formats import BF16, F32
from ...models.base import Context
from ...models.fma_chain import FMAChain

from . import kernel_lib as kl
from .driver import Kernel
from .f64 import f64_of_fields, round_f64, round_to_odd, two_sum
from .rounding32 import round_to_format32

__all__ = ["f32_bits_to_format", "make_step"]

QNAN = {"f32": 0x7FC00000, "f16": 0x7E00, "bf16": 0x7FC0}


def _ieee_f32(fmt, code):
    """The f32 value of a code, NaN and Inf included (bf16: the top half of its f32 bits;
    its subnormals are f32 subnormals, which the fast path's tile test excludes)."""
    if fmt == BF16:
        return lax.bitcast_convert_type(code << 16, jnp.float32)
    d = kl.decode(fmt, code)
    v = jnp.where(d.inf, jnp.where(d.sign == 1, -np.inf, np.inf).astype(jnp.float32), d.val)
    return jnp.where(d.nan, jnp.float32(np.nan), v)


def f32_bits_to_format(bits, fc):
    """Bits of the f32 value ``bits`` rounded to ``fc`` (RNE; NaN -> canonical quiet NaN)."""
    if fc == F32:
        return bits
    d = kl.decode(F32, bits, with_val=False)
    out = round_to_format32(d.sign, d.sig, d.exp - F32.mbits, fc)
    inf_bits = (((1 << fc.ebits) - 1) << fc.mbits) | (d.sign << (fc.bits - 1))
    out = jnp.where(d.inf, inf_bits, out)
    return jnp.where(d.nan, QNAN[fc.name], out)


def make_step(spec, model: FMAChain, ctx: Context):
    """`driver.Kernel` of `FMAChain` on ``spec``: one f32 multiply and add per product where
    that is provably the FMA's bits, float64 emulation otherwise."""
    fa, fb, fc = ctx.a, ctx.b, ctx.c
    # an f32 chain has no step boundary: any unit gives the same bits (16 keeps kernels
    # small); a 16-bit accumulator is rounded at the end of every builtin step
    kc = min(spec.kc, 16) if fc == F32 else spec.kc
    # operands that are f32 values (all of them normal, except bf16 subnormals)
    both_f32 = all(kl.exactly_f32(f) or f == BF16 for f in (fa, fb))
    # static: products always exact normal f32 with last bit >= 2**-102 (fp8, bf8, f16)
    always = (kl.exactly_f32(fa) and kl.exactly_f32(fb) and fa.max_exp + fb.max_exp + 2 <= 127
              and fa.min_exp + fb.min_exp - fa.mbits - fb.mbits >= -102)

    def widen(acc):
        """f32 bits of the accumulator (a 16-bit C widens exactly)."""
        if fc == F32:
            return acc
        d = kl.decode(fc, acc, with_val=False)
        # f16 / bf16 -> f32 bits (exact: every value of both is an f32)
        sh = F32.mbits - fc.mbits
        normal = (acc >> fc.mbits) & ((1 << fc.ebits) - 1)
        if fc.ebits == F32.ebits:  # bf16: the top half of the f32 pattern
            return acc << 16
        lead = kl.bitlen32(d.sig) - 1
        e = jnp.where(normal != 0, d.exp, d.exp - (fc.mbits - lead))  # subnormal: normalise
        mant = jnp.where(normal != 0, d.sig, d.sig << (fc.mbits - lead)) & ((1 << fc.mbits) - 1)
        bits = ((e + 127) << F32.mbits) | (mant << sh)
        bits = jnp.where(d.sig == 0, 0, bits)
        bits = jnp.where(d.inf, 0x7F800000, bits)
        bits = jnp.where(d.nan, 0x7F800000 | ((acc & ((1 << fc.mbits) - 1)) << sh), bits)
        return bits | (d.sign << 31)

    def fast(view, bits):
        acc = lax.bitcast_convert_type(bits, jnp.float32)
        f32 = lambda w: lax.bitcast_convert_type(w, jnp.float32)  # noqa: E731
        for q in range(kc // 2):
            rows = [f32(row) for row in view.b_rows(q, "bw")]
            for c in (2 * q, 2 * q + 1):
                acc = f32(view.aw_col(c)) * view.pick(c, rows) + acc
        out = lax.bitcast_convert_type(acc, jnp.int32)
        return jnp.where(acc != acc, QNAN["f32"], out)

    def slow(view, bits):
        # rare: a loop over the products (not unrolled) keeps the kernel small
        def body(c, acc):
            q = c // 2
            rows = [f64_of_fields(kl.decode(fb, row, with_val=False), fb.mbits) for row in view.b_rows(q)]
            pa = f64_of_fields(kl.decode(fa, view.a_col(c), with_val=False), fa.mbits)
            p = pa * view.pick(c, rows)
            s, e = two_sum(p, acc)
            finite = (jnp.abs(p) < np.inf) & (jnp.abs(acc) < np.inf)
            t = jnp.where(finite, round_to_odd(s, e), p + acc)
            return f64_of_fields(kl.decode(F32, round_f64(t, F32), with_val=False), F32.mbits)

        acc = f64_of_fields(kl.decode(F32, bits, with_val=False), F32.mbits)
        return round_f64(lax.fori_loop(0, kc, body, acc), F32)

    def step(view, acc):
        bits = widen(acc)
        sub = kl.tile_any(((bits & 0x7F800000) == 0) & ((bits & 0x7FFFFF) != 0))  # subnormal acc
        if always:
            ok = ~sub
        else:
            sa, sb = view.summaries()
            # no subnormal operand (bf16), products exact normal with last bit >= 2**-102
            ok = (~sub & ~sa.tiny & ~sb.tiny & (sa.emin + sb.emin - fa.mbits - fb.mbits >= -102)
                  & (sa.emax + sb.emax + 2 <= 127))
        if both_f32:
            out = lax.cond(ok, lambda: fast(view, bits), lambda: slow(view, bits))
        else:
            out = slow(view, bits)
        return f32_bits_to_format(out, fc)

    word = lambda f: (lambda x: lax.bitcast_convert_type(_ieee_f32(f, x), jnp.int32)) if both_f32 else None  # noqa: E731
    return Kernel(step, kc, (fa, fb), (fa.bits, fb.bits, False), a_word=word(fa), b_word=word(fb))
