"""`PairwiseTree`: products rounded to f32, summed in a pairwise tree of f32 additions, the
tree's sum added to the accumulator, optionally with the MI200 denormal flushing (NUMERICS.md
9.4). MMA-Sim 2.1.1's CDNA2 (MI200, gfx90a) f16/bf16 arithmetic, ``MMA_FTZ_MUL_ADD(P)``
(``mmasim/arithmetic/ftz_mul_add.py``), is ``PairwiseTree(group=4, flush_denormals=True)``
(``group=2`` for its non-1k bf16 forms); the preset ``"cdna2"`` is `CDNA2()`, which also runs
f32 operands as MMA-Sim does on every CDNA chip: an f32 FMA chain in K order. That MI200's f16
and bf16 MFMA flush input and output denormals is AMD's and PyTorch's documentation (PyTorch's
numerical-accuracy note on MI200, MIOpen's MI200 MFMA page); the places of the flushing are
MMA-Sim's.

Per output, with ``flush_denormals``:

* A and B elements below their format's smallest normal (f16 2**-14, bf16 2**-126) are +0
  (sign dropped, -0 included); C below 2**-126 likewise;
* each product a_k * b_k is rounded to f32 (RNE, gradual underflow, overflow to Inf) and then,
  below 2**-126, replaced by a zero of its sign;
* per group of ``group`` consecutive k from C: the products summed pairwise (level by level:
  (p0 + p1), (p2 + p3), then their sum), every addition one f32 RNE rounding followed by the
  same signed flush; the accumulator <- flush(RN_f32(acc + group sum)).

IEEE special values throughout (NaN operands, Inf * 0, Inf - Inf: NaN; canonical NaN out).
Without ``flush_denormals`` nothing is flushed (plain IEEE f32 arithmetic). Each f32 operation is
emulated exactly in float64 (products of 16-bit formats are exact there; `add_rn` rounds a sum
once).
"""
from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp

from ..numerics.formats import BF16, F16, F32, decode
from ..numerics.rounding import add_rn, pow2_f64, round_f64, value_f64
from .base import Context, Model
from .fields import Bool, Int, declare
from .fma_chain import IEEEAsFMAChain
from .grouping import over_groups, unroll_for

__all__ = ["PairwiseTree", "CDNA2"]


def _flush(x, min_exp: int, keep_sign: bool):
    """x (float64) with |x| < 2**min_exp replaced by a zero: of x's sign (``keep_sign``) or +0."""
    zero = jnp.copysign(jnp.zeros_like(x), x) if keep_sign else jnp.zeros_like(x)
    return jnp.where(jnp.abs(x) < pow2_f64(min_exp), zero, x)


def _rn_f32(x):
    """float64 of RN_f32(x) (RNE, gradual underflow, overflow to Inf), signs of zeros kept."""
    return value_f64(decode(F32, round_f64(x, F32)), F32.mbits)


@dataclass(frozen=True)
class PairwiseTree(Model):
    """f32-rounded products summed pairwise per group, the group sum added to the accumulator
    (module doc). group: products per tree (a power of two; a shorter last group is summed the
    same way); flush_denormals: the MI200 flushing of inputs, products and every sum."""

    group: int = declare(Int(lo=1, hi=64), default=4)
    flush_denormals: bool = declare(Bool(), default=True)

    name = "pairwise"

    def __post_init__(self):
        super().__post_init__()
        if self.group & (self.group - 1):
            raise ValueError(f"{type(self).__name__}.group must be a power of two, got {self.group}")

    def check(self, ctx: Context):
        why = super().check(ctx)
        if why is None and (ctx.a.mbits + ctx.b.mbits > 2 * 10 or ctx.c != F32):
            return (f"{self.describe()} models 16-bit (or narrower) operands with an f32 accumulator; "
                    f"{ctx.a.name} x {ctx.b.name} -> {ctx.c.name} is not one")
        return why

    def accumulate(self, a, b, c_bits, ctx: Context, options=None):
        """`Model.accumulate` (module doc)."""
        fa, fb = ctx.a, ctx.b
        flush = self.flush_denormals
        va, vb = value_f64(a, fa.mbits), value_f64(b, fb.mbits)
        acc = value_f64(decode(F32, c_bits), F32.mbits)
        if flush:
            va, vb = _flush(va, fa.min_exp, False), _flush(vb, fb.min_exp, False)
            acc = _flush(acc, F32.min_exp, False)

        def f32(x):
            return _flush(x, F32.min_exp, True) if flush else x

        p = f32(_rn_f32(va * vb))  # (..., K, N): exact in float64, then one f32 rounding

        def step(gp, _, acc):
            terms = [gp[..., i, :] for i in range(gp.shape[-2])]
            while len(terms) > 1:
                pairs = [f32(add_rn(terms[i], terms[i + 1], F32)) for i in range(0, len(terms) - 1, 2)]
                terms = pairs + ([terms[-1]] if len(terms) % 2 else [])
            return f32(add_rn(acc, terms[0], F32))

        # a CPU loops at every effort: the unrolled groups ran 8x slower there ('full', 4096 waves
        # of mfma_f32_32x32x8f16 under cdna2: 1.87 s, looped 0.23 s) and compiled longer
        acc = over_groups(p, p, acc, self.group, step, unroll_for(options, cpu_loops=True))
        return round_f64(acc, F32).astype(jnp.int32)


@dataclass(frozen=True)
class CDNA2(IEEEAsFMAChain, PairwiseTree):
    """MMA-Sim 2.1.1's CDNA2 (MI200, gfx90a) MFMA arithmetic: `PairwiseTree` (groups of 4 with
    the MI200 flushing) for f16/bf16 operands, an f32 FMA chain in K order (``MMA_FMA``,
    `FMAChain()`) for f32 operands. The preset ``"cdna2"`` is ``CDNA2()``."""

    name = "cdna2"
    chain_lacks = "has none of the tree's fields"

    def check(self, ctx: Context):
        why = super().check(ctx)  # f32/f64: the FMA chain's rules (`IEEEAsFMAChain.check`)
        if why is None and not self.on_chain(ctx) and not {ctx.a, ctx.b} <= {F16, BF16}:
            return (f"{self.describe()} models MI200's f32, f16 and bf16 MFMA; {ctx.a.name} x {ctx.b.name} is none of "
                    f"them (use PairwiseTree(...) for other formats)")
        return why



