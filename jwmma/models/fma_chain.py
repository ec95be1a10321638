"""`fma_chain`: an f32 fused multiply-add chain over the compressed products, in compressed-K
order (what rocjitsu and GoC do for sparse ops). acc <- RN_f32(a_k * b_k + acc), one rounding
per product, IEEE specials, subnormals kept; a 16-bit accumulator is widened exactly and the
result rounded once to it at the end.

Each FMA is emulated exactly: the product is exact in float64, the sum with the accumulator
is split error-free (TwoSum), rounded to odd in float64 and then to f32 bits, which equals
one correct rounding of the exact a*b + acc.
"""
from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp

from ..numerics.formats import F32, decode
from ..numerics.rounding import fields_to_f64, round_f64, round_to_odd, two_sum
from .base import Context, Model
from .grouping import over_groups


def _to_f64(f, mbits):
    """Exact float64 value of decoded fields, Inf and NaN included."""
    v = fields_to_f64(f.sign, f.sig, jnp.where(f.nan | f.inf, 0, f.exp), mbits)
    v = jnp.where(f.inf, jnp.where(f.sign == 1, -jnp.inf, jnp.inf), v)
    return jnp.where(f.nan, jnp.nan, v)


__all__ = ["FMAChain"]


@dataclass(frozen=True)
class FMAChain(Model):
    """acc <- RN_f32(a_k * b_k + acc) over the products in order (module doc); no parameters."""

    name = "fma_chain"

    def describe(self):
        return "fma_chain"

    def accumulate(self, a, b, c_bits, ctx: Context, options=None):
        """`Model.accumulate`: one emulated f32 FMA per product."""
        fa, fb, fc = ctx.a, ctx.b, ctx.c
        acc = _to_f64(decode(fc, c_bits), fc.mbits)  # exact (a 16-bit C widens exactly)

        def step(ga, gb, acc):
            p = _to_f64(ga, fa.mbits)[..., 0, :] * _to_f64(gb, fb.mbits)[..., 0, :]
            s, e = two_sum(p, acc)
            t = jnp.where(jnp.isfinite(p) & jnp.isfinite(acc), round_to_odd(s, e), p + acc)
            bits = round_f64(t, F32)
            return _to_f64(decode(F32, bits), F32.mbits)

        acc = over_groups(a, b, acc, 1, step)
        return round_f64(acc, fc)
