"""`gfx11_dot2`: rocjitsu's hardware-characterised RDNA3 (gfx1100) DOT2 chain (NUMERICS.md 2.3).

rocjitsu (`gfx11_dot2.h`, `exec_gfx11_wmma_dot2`) computes an RDNA3 f16/bf16 -> f32 WMMA output
as 8 V_DOT2_F32 steps over the K pairs (0, 1), (2, 3), ..., (14, 15), each step's f32 result the
next step's accumulator C. One step, all in integers:

* specials first, by priority: a NaN factor -> 0xFFC00A3D; Inf times zero in a product ->
  0xFFC00000; products +Inf and -Inf -> 0xFFC00000; a NaN C -> C with its quiet bit set; else
  any Inf (products or C) -> +-Inf, both signs -> 0xFFC00000.
* factors: ``ae = max(expfield, 1) - bias``; f16 subnormals keep their fraction, bf16
  subnormal factors are zero (sign kept); a product is ``sig_a * sig_b`` exactly, its lowest
  bit at ``ae_a + ae_b - mbits_a - mbits_b``.
* C: a subnormal C is zero (its sign kept); the step's sign frame is C's sign.
* grid ``G = max(pg, max(lead(C), lead(p0), lead(p1)) - 26)`` with
  ``pg = max(ae_a + ae_b over nonzero products) - 24``.
* each term's magnitude is truncated onto G; a term whose sign differs from C's adds
  ``-m - 1`` (ones' complement), zero products and fully truncated terms included.
* the total (its sign flipped when C is negative) is rounded to 24 significant bits (RNE);
  an exponent below -126 after rounding gives +0, above 127 +-Inf; a zero total (or all three
  terms zero) gives +0.

16-bit accumulators (wmma_f16_16x16x16_f16_*, wmma_bf16_16x16x16_bf16_*; rocjitsu's
``gfx11_dot2_bits<Bf16, Packed=true>``): C is widened exactly to f32 bits (an f16 subnormal C is a
normal f32 and keeps its value; a bf16 subnormal C widens to an f32 subnormal, which the step reads
as zero), and the result is narrowed after *every* step, so 8 roundings per output:

* f16: ``lead(C)`` enters the grid as ``max(-14, lead(C))`` (an f16 C aligns on a -14 floor, a
  zero C included); the total is rounded straight to f16 (RNE from the integer total, gradual
  underflow, a zero result +0, overflow +-Inf: MODE.FP16_OVFL is off);
* bf16: the f32 bits above (RNE, no subnormal results) truncated to their top 16 bits;
* special results narrowed as rocjitsu's ``dot_packed16::special``: the factor NaN 0xFFC00A3D ->
  0xFE3D (f16) / 0xFFFD (bf16); any other f32 special s -> f16 ``sign | 0x7C00 | (s >> 13) & 0x3FF``
  (invalid 0xFE00, a NaN C keeps its payload with the quiet bit set), bf16 ``s >> 16``.

Measured on gfx1100 by rocjitsu's W7900 captures (tests/data/gfx1100_wmma_captures.json);
gfx1151 (RDNA3.5) silicon is reported to differ (ROCm/rocm-systems issue 12056), so the model
is [ASSUMED] there.
"""
from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
from jax import lax

from ..numerics.formats import BF16, F16, F32, pack_fields, unpack_fields
from ..numerics.rounding import round_to_format
from .base import Context, Model
from .grouping import over_groups, unroll_for
from .specials import code_flags, factor_codes, factor_flags, next_code

__all__ = ["Gfx11Dot2"]

EMPTY = -(1 << 20)  # lead of a zero term: never the maximum
FACTOR_NAN = 0xFFC00A3D - (1 << 32)
INVALID = 0xFFC00000 - (1 << 32)
POS_INF, NEG_INF = 0x7F800000, 0xFF800000 - (1 << 32)


def _bitlen(x):
    return 32 - lax.clz(x.astype(jnp.int32))


def _floor_shift(m, sh):
    """m * 2**sh truncated, for magnitudes 0 <= m < 2**27 and shifts of either sign (the
    result stays below 2**27 because no term leads more than 26 bits above the grid)."""
    left = jnp.clip(sh, 0, 30)
    right = jnp.clip(-sh, 0, 31)
    return jnp.where(sh >= 0, m << left, jnp.where(-sh >= 31, 0, m >> right))


@dataclass(frozen=True)
class Gfx11Dot2(Model):
    """rocjitsu's gfx1100 DOT2 step, chained over K pairs (module doc). No fields: every
    constant is rocjitsu's measured one."""

    name = "gfx11_dot2"

    FIELDS = {}

    def check(self, ctx: Context):
        why = super().check(ctx)
        if why:
            return why
        if ctx.a not in (F16, BF16) or ctx.b != ctx.a:
            return f"{self.describe()} multiplies f16 x f16 or bf16 x bf16"
        if ctx.c not in (F32, ctx.a):
            return (f"{self.describe()} accumulates into f32 or into the inputs' own format (f16 -> f16, "
                    f"bf16 -> bf16), not {ctx.a.name} -> {ctx.c.name if ctx.c else 'i32'}")
        return None

    def describe(self):
        return "Gfx11Dot2()"

    def accumulate(self, a, b, c_bits, ctx: Context, options=None):
        """`Model.accumulate`: consecutive DOT2 steps of 2 products from C.

        The factors' special values (NaN and Inf products, Inf times zero) of every step are
        found before the steps, in a `lax.cond` whose other branch is all clear: NaN/Inf
        operands are rare, and this per-product work was done in every step. On a 2-core CPU,
        4096 waves of `wmma_f32_16x16x16_f16_w32`, four alternating pairs of processes:
        3.4-4.3e8 -> 5.2-5.7e8 products/s, and the first call of that size (XLA at 'full'
        effort) 0.9-1.0 -> 1.2-1.4 s. Each step reads its pair's code from the carried words
        (`jwmma.models.specials.factor_codes`); C's own specials stay in the step, since a step
        can overflow into the next one's Inf C.

        Off the CPU (``options.platform``) each step finds its own pair's specials, as before:
        on an H200 (65536 waves, three alternating pairs of processes) the codes ran the same
        call at 0.86x (7.0-7.5e10 against 7.9-8.7e10 products/s), and one `lax.cond` over the
        call choosing steps without the pair specials when no factor is NaN/Inf ran it at 0.75x
        on an H100 (5.5-5.6e10 against 7.3-7.7e10; first calls 6.3-8.2 s against 3.7-4.2 s):
        not profiled; XLA:GPU copies a conditional's predicate to the host and waits for it, and
        the decoded factors cross the branch boundary in memory instead of fusing into the steps."""
        if options is not None and options.platform not in (None, "cpu"):
            return over_groups(a, b, c_bits, 2, lambda ga, gb, acc: self._step(ga, gb, acc, None, ctx),
                               unroll_for(options, cpu_loops=True))
        out = jnp.broadcast_shapes(a.sig.shape[:-2] + a.sig.shape[-1:], b.sig.shape[:-2] + b.sig.shape[-1:],
                                   c_bits.shape)
        flush = (ctx.a, ctx.b) if ctx.a == BF16 else None  # bf16 subnormal factors are zero
        words = factor_codes(a, b, 2, out, like=(a.sig, b.sig, c_bits), subnormals_zero=flush)

        def step(ga, gb, acc):
            code, w = next_code(acc[1:])
            return (self._step(unpack_fields(ctx.a, ga), unpack_fields(ctx.b, gb), acc[0], code, ctx), *w)

        # a CPU loops at every effort: unrolled at 'full', the eight pairs of a K = 16 builtin
        # compiled in 4.5 CPU s and ran 4.8x slower (4096 waves 0.33 s, looped 0.069 s). The
        # operands enter the loop as one word per element (`pack_fields`), unpacked in the step:
        # each field would be an array, and a small kernel, of its own
        return over_groups(pack_fields(a), pack_fields(b), (c_bits.astype(jnp.int32), *words), 2, step,
                           unroll_for(options, cpu_loops=True))[0]

    def _step(self, a, b, c_bits, code, ctx: Context):
        """One DOT2 step (module doc); ``code``: this pair's factor specials (`factor_codes`),
        or None: found here from the pair's factors."""
        fmt = ctx.a
        flush = fmt == BF16  # bf16 subnormal factors are zero
        sig_a = jnp.where(flush & (a.exp <= fmt.min_exp) & (a.sig < (1 << fmt.mbits)), 0, a.sig)
        sig_b = jnp.where(flush & (b.exp <= fmt.min_exp) & (b.sig < (1 << fmt.mbits)), 0, b.sig)
        pneg = (a.sign ^ b.sign) == 1
        P = (sig_a * sig_b).astype(jnp.int32)
        ae = a.exp + b.exp
        plsb = ae - 2 * fmt.mbits
        plead = jnp.where(P != 0, plsb + _bitlen(P) - 1, EMPTY)
        pg = jnp.where(P != 0, ae, EMPTY).max(axis=-2) - 24

        packed = ctx.c != F32  # a 16-bit accumulator: widened here, narrowed at the end
        c = _widen(ctx.c, c_bits.astype(jnp.int32)) if packed else c_bits.astype(jnp.int32)
        ce = (c >> 23) & 0xFF
        cneg = c < 0
        csig = jnp.where((ce != 0) & (ce != 0xFF), (c & 0x7FFFFF) | 0x800000, 0)
        clsb = ce - 150
        clead = jnp.where(csig != 0, clsb + 23, EMPTY)
        if ctx.c == F16:  # an f16 C aligns on a -14 floor, even when it is subnormal or zero
            clead = jnp.maximum(clead, -14)

        G = jnp.maximum(pg, jnp.maximum(clead, plead.max(axis=-2)) - 26)
        # terms on G, truncated; opposing C's sign: -m - 1
        cm = _floor_shift(csig, clsb - G)
        pm = _floor_shift(P, plsb - G[..., None, :])
        opp = pneg != cneg[..., None, :]
        # an int32 sum: jnp.sum widens int32 to int64 under the caller's x64 scope, which took the
        # whole rounding below into 64-bit integers (two or more instructions each on a GPU); the
        # three terms are below 2**27 each (see _floor_shift), so the total fits
        total = cm + jnp.where(opp, -pm - 1, pm).sum(axis=-2, dtype=jnp.int32)
        all_zero = (csig == 0) & (P == 0).all(axis=-2)

        # rounding: 24 significant bits (RNE), no subnormal results
        neg = (total < 0) != cneg
        mag = jnp.abs(total)
        top = _bitlen(mag) - 1
        sh = top - 23
        r = jnp.clip(sh, 0, 31)
        q = mag >> r
        rem = mag & ((1 << r) - 1)
        half = jnp.where(r > 0, 1 << jnp.maximum(r - 1, 0), 0)
        up = (r > 0) & ((rem > half) | ((rem == half) & ((q & 1) == 1)))
        sg = jnp.where(sh <= 0, mag << jnp.clip(-sh, 0, 31), q + up.astype(jnp.int32))
        carry = sg >= (1 << 24)
        sg = jnp.where(carry, sg >> 1, sg)
        e = top + G + carry.astype(jnp.int32)
        sign = jnp.where(neg, jnp.int32(-(1 << 31)), 0)
        bits = sign | ((e + 127) << 23) | (sg & 0x7FFFFF)
        bits = jnp.where(e > 127, sign | POS_INF, bits)
        bits = jnp.where((e < -126) | (mag == 0) | all_zero, 0, bits)

        if ctx.c == F16:  # straight from the integer total: RNE, gradual underflow, +0 for zero
            f16 = round_to_format(neg.astype(jnp.int32), mag, G, F16)
            bits = jnp.where(((f16 & 0x7FFF) == 0) | all_zero, 0, f16)
        elif ctx.c == BF16:  # the f32 result truncated to its top 16 bits
            bits = (bits >> 16) & 0xFFFF

        # specials, lowest priority first (f32 bits; narrowed as rocjitsu's dot_packed16::special)
        if code is None:
            pi, ni, invalid, factor_nan = _pair_flags(a, b, ctx)
        else:
            pi, ni, invalid, factor_nan = code_flags(code)
        c_nan = (ce == 0xFF) & ((c & 0x7FFFFF) != 0)
        c_inf = (ce == 0xFF) & ((c & 0x7FFFFF) == 0)
        pos = pi | (c_inf & ~cneg)
        ng = ni | (c_inf & cneg)
        special = jnp.where(pos & ng, INVALID, jnp.where(ng, NEG_INF, POS_INF))
        special = jnp.where(c_nan, c | 0x400000, special)
        special = jnp.where(invalid, INVALID, special)
        special = jnp.where(factor_nan, FACTOR_NAN, special)
        if packed:
            special = _narrow_special(ctx.c, special)
        is_special = pos | ng | c_nan | invalid | factor_nan
        return jnp.where(is_special, special, bits).astype(jnp.int32)


def _pair_flags(a, b, ctx: Context):
    """A pair's factor specials over axis -2, as `code_flags` gives them from a code: an Inf
    product of each sign, Inf times zero (or Inf products of both signs), a NaN factor."""
    flush = (ctx.a, ctx.b) if ctx.a == BF16 else None  # bf16 subnormal factors are zero
    pi, ni, invalid, nan = (f.any(axis=-2) for f in factor_flags(a, b, subnormals_zero=flush))
    return pi, ni, invalid | (pi & ni), nan


def _widen(fmt, c):
    """16-bit C codes (int32) -> f32 bits, exactly (rocjitsu's dot_packed16::widen): bf16 is the top
    half of its f32; f16 subnormals become normal f32 values, NaN payloads are kept unquieted."""
    if fmt == BF16:
        return c << 16
    sign = (c & 0x8000) << 16
    e = (c >> 10) & 31
    frac = c & 1023
    top = _bitlen(frac) - 1  # a subnormal's leading bit: value frac * 2**-24 = 2**(top - 24) * ...
    sub = sign | ((top + 103) << 23) | (((frac << (10 - jnp.clip(top, 0, 10))) & 1023) << 13)
    bits = jnp.where(e == 31, sign | 0x7F800000 | (frac << 13), sign | ((e + 112) << 23) | (frac << 13))
    bits = jnp.where(e == 0, jnp.where(frac == 0, sign, sub), bits)
    return bits.astype(jnp.int32)


def _narrow_special(fmt, s):
    """An f32 special result (Inf or NaN bits, int32) as rocjitsu's packed WMMA writes it."""
    if fmt == BF16:
        return jnp.where(s == FACTOR_NAN, 0xFFFD, (s >> 16) & 0xFFFF)
    return jnp.where(s == FACTOR_NAN, 0xFE3D, ((s >> 16) & 0x8000) | 0x7C00 | ((s >> 13) & 1023))
