"""Pallas kernel step of the integer builtins (`jwmma.models.IntegerDot`, NUMERICS.md 4).

Products of 8- and 4-bit integers are < 2**16 and a step sums at most 64 of them, so the step
sum is exact in int32. Without clamp, C + sum wraps mod 2**32 (int32 addition); with clamp it
saturates once (``staging="final"``) or after each of the two stages
(``staging="staged"``: compressed positions ck < Kc/2, then the rest, as `IntegerDot`; for
Kc = 32 that is ck // 16, not (ck // 8) % 2), with an int32 overflow test instead of int64
arithmetic. One unit = one builtin step; its sum is a loop over runs of `RUN` columns.
"""
from __future__ import annotations

import jax.numpy as jnp

from ...isa.types import element_type
from ...numerics.formats import decode_int
from ...models.base import Context
from ...models.integer import IntegerDot

from . import kernel_lib as kl
from .driver import Kernel

__all__ = ["add_sat32", "make_step"]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
#: compressed columns per loop iteration of a step's sum (whole 2:4 blocks): a step of 64
#: columns unrolled was 10328 lines of Triton IR with 258 loads, and compiled in up to 30 s on
#: an H200 (the crosscheck's slowest key)
RUN = 8


def add_sat32(c, s):
    """Saturating int32 c + s (`_sat32(c + s)` without int64)."""
    r = c + s
    ovf = ((c >= 0) == (s >= 0)) & ((r >= 0) != (c >= 0))
    return jnp.where(ovf, jnp.where(c >= 0, INT32_MAX, INT32_MIN), r)


def make_step(spec, model: IntegerDot, ctx: Context, *, a_signed=True, b_signed=True):
    """`driver.Kernel` of `IntegerDot` on ``spec`` (wrap, final or staged saturation; int32 only)."""
    fa = element_type(spec.a_type).int_format(a_signed)
    fb = element_type(spec.b_type).int_format(b_signed)
    kc = spec.kc
    staged = ctx.clamp and model.staging == "staged"

    def run_sum(view, n):
        """The sum of the products of compressed columns 0..n-1 of ``view`` (n even)."""
        total = None
        for q in range(n // 2):
            rows = [decode_int(fb, row) for row in view.b_rows(q)]
            for c in (2 * q, 2 * q + 1):
                p = decode_int(fa, view.a_col(c)) * view.pick(c, rows)
                total = p if total is None else total + p
        return total

    def stage_sum(view, lo, hi, like):
        """The sum over compressed columns lo..hi-1: unrolled up to `RUN` columns, else a loop
        over runs of `RUN` (int32 sums of products < 2**16: exact, any order)."""
        if hi - lo <= RUN:
            return run_sum(view.shifted(lo), hi - lo)
        runs, rest = divmod(hi - lo, RUN)
        total = kl.fori(runs, lambda t, s: s + run_sum(view.shifted(lo + t * RUN), RUN), jnp.zeros_like(like))
        return total if not rest else total + run_sum(view.shifted(lo + runs * RUN), rest)

    def step(view, acc):
        if not staged:  # one sum of the step
            s = stage_sum(view, 0, kc, acc)
            return acc + s if not ctx.clamp else add_sat32(acc, s)
        half = kc - kc // 2  # `IntegerDot`: the second stage is the second half of K
        out = add_sat32(acc, stage_sum(view, 0, half, acc))
        return out if half == kc else add_sat32(out, stage_sum(view, half, kc, acc))

    bits = 16 if spec.a_type == 'iu8' else 8  # values (not codes): -128..255 for iu8
    return Kernel(step, kc, None, (bits, bits, True))
