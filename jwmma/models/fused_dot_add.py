"""`FusedDotAdd`: the truncated fused dot-product-add of NVIDIA tensor cores (NUMERICS.md
"NVIDIA tensor cores").

MMA-Sim 2.1.1 `mmasim.arithmetic.fdpa.MMA_T_FDPA(F, rho, L_max, e_zero)` made parametric and
bit-exact in integer arithmetic. Per output, the K products are taken in consecutive groups of
``group`` (the last one may be shorter); per group, with value = sig * 2**(exp - mbits) for
every operand (MMA-Sim exponents: subnormals share min_exp):

* ``c_alignment='with_products'`` (MMA-Sim's T-FDPA): C is one more term. E_max is the largest
  exponent among the products (E_k = e_a + e_b) and C; a zero product, and a zero C, has the
  exponent ``zero_exponent`` (so it can set E_max). Every term is truncated toward zero to a
  multiple of 2**(E_max - frac_bits), the truncated terms are added exactly and the sum is
  rounded once to the accumulator format.
* ``c_alignment='after'``: the products alone are aligned and truncated as above (E_max over
  the products); C is then added to that sum with one rounding (a correctly rounded two-term
  addition). This is the fit to the B200 fp8 capture (`nvidia_b200_measured`).

The rounding (``output_rounding``) is to nearest-even or toward zero, to
``output_frac_bits`` fraction bits (None: the accumulator's own, 23 for f32, 10 for f16; 13
gives Hopper's E8M13) within the accumulator's exponent range (gradual underflow, overflow
to Inf in both modes, as MMA-Sim). The result is the next group's C. A zero result is +0.

Special values follow MMA-Sim's float arithmetic: any NaN operand, Inf*0, or Infs of both
signs (products and C) give NaN (0x7FFFFFFF / 0x7FFF: NVIDIA's and MMA-Sim's canonical NaN);
otherwise an Inf operand gives that Inf. Finite products never overflow by themselves (the
sum is exact; only the rounded result can overflow).

Vectorised JAX on int64 (run inside an x64 scope, as every jwmma model).
"""
from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
from jax import lax

from ..numerics.formats import F16, F32, decode
from .fields import Choice, Int
from .base import Context, Model
from .grouping import over_groups, unroll_for
from .specials import product_specials

__all__ = ["FusedDotAdd", "round_bits", "add_rounded", "C_ALIGNMENTS", "OUTPUT_ROUNDINGS"]

C_ALIGNMENTS = ("with_products", "after")
OUTPUT_ROUNDINGS = ("nearest", "toward_zero")
NO_EXP = -(2**20)  # exponent of a zero term that must not set the group maximum
#: NVIDIA's canonical NaN (what MMA-Sim writes for every NaN result)
NAN_BITS = {"f32": 0x7FFFFFFF, "f16": 0x7FFF}


def _bitlen(x):
    return 64 - lax.clz(x.astype(jnp.int64))


def _trunc_shift(mag, right):
    """mag * 2**-right truncated toward zero, for int64 mag >= 0 and int right of any sign."""
    mag = mag.astype(jnp.int64)
    return jnp.where(right >= 0, mag >> jnp.clip(right, 0, 63), mag << jnp.clip(-right, 0, 62))


def round_bits(neg, mag, scale, fmt, frac_bits: int, mode: str):
    """Bits of (-1)**neg * mag * 2**scale rounded to ``frac_bits`` fraction bits within the
    exponent range of ``fmt`` ('nearest': ties to even; 'toward_zero'), as an int32 pattern of
    ``fmt``. Gradual underflow; a result beyond the largest finite exponent is +-Inf in both
    modes (MMA-Sim); zero is +0.

    neg: bool; mag: int64 >= 0 (< 2**62); scale: int (broadcasts)."""
    mag = mag.astype(jnp.int64)
    scale = jnp.asarray(scale).astype(jnp.int64)
    lead = _bitlen(mag) - 1 + scale
    te = jnp.maximum(lead, fmt.min_exp)
    shift = te - frac_bits - scale  # low bits of mag below the kept places
    right = jnp.clip(shift, 0, 63)
    q = jnp.where(shift > 0, mag >> right, mag << jnp.clip(-shift, 0, 62))
    if mode == "nearest":
        rem = mag & ((jnp.int64(1) << right) - 1)
        half = jnp.where(right > 0, jnp.int64(1) << jnp.maximum(right - 1, 0), 0)
        up = (shift > 0) & ((rem > half) | ((rem == half) & ((q & 1) == 1)))
        up = up & (shift <= 63)
        q = q + up.astype(jnp.int64)
    q = jnp.where(shift > 63, 0, q)
    # q has frac_bits + 1 bits (frac_bits + 2 after a rounding carry); the hidden bit carries
    # into the exponent field, and a subnormal (te == min_exp, q < 2**frac) gets field 0
    code = ((te + fmt.bias - 1) << fmt.mbits) + (q << (fmt.mbits - frac_bits))
    inf = ((1 << fmt.ebits) - 1) << fmt.mbits
    code = jnp.where(code >= inf, inf, code)
    # every zero, also one that a tiny value rounds to, is +0 (MMA-Sim adds +0.0 at the end)
    code = jnp.where(q == 0, 0, code | (neg.astype(jnp.int64) << (fmt.bits - 1)))
    return code.astype(jnp.int32)


def add_rounded(s, us, t, ut):
    """The exact sum s*2**us + t*2**ut (int64 s, t; int us, ut) as (neg, mag, scale) ready for
    one correct rounding to at most 24 significant bits: the operand far below the other is
    jammed into a sticky unit (round to odd), which leaves every such rounding unchanged.

    Requires |s| < 2**56 and |t| < 2**56."""
    s = s.astype(jnp.int64)
    t = t.astype(jnp.int64)
    us = jnp.asarray(us, jnp.int64)
    ut = jnp.asarray(ut, jnp.int64)
    low = -(2**40)
    ls = jnp.where(s == 0, low, _bitlen(jnp.abs(s)) - 1 + us)
    lt = jnp.where(t == 0, low, _bitlen(jnp.abs(t)) - 1 + ut)
    top = jnp.maximum(ls, lt)
    # grid: exact when both fit 58 bits, otherwise 59 bits below the top (the larger operand,
    # < 2**56 units, is then still exact and even on it; the smaller one is jammed)
    u = jnp.maximum(jnp.minimum(jnp.where(s == 0, ut, us), jnp.where(t == 0, us, ut)), top - 58) - 1

    def on_grid(x, ux):
        k = ux - u  # >= 0: exact left shift; < 0: jam
        mag = jnp.abs(x)
        r = jnp.clip(-k, 0, 63)
        lost = (mag & ((jnp.int64(1) << r) - 1)) != 0
        v = jnp.where(k >= 0, mag << jnp.clip(k, 0, 62), (mag >> r) | lost.astype(jnp.int64))
        return jnp.where(x < 0, -v, v)

    r = on_grid(s, us) + on_grid(t, ut)
    return r < 0, jnp.abs(r), u


@dataclass(frozen=True)
class FusedDotAdd(Model):
    """MMA-Sim's T-FDPA as parameters. Defaults: tcgen05 (Blackwell) 16-bit inputs with an
    f32 accumulator: F = 25, toward zero, zero exponent -133, C aligned with the products.

    group: products per group; None = all K products in one group.
    frac_bits: F, fraction bits kept below the group's largest exponent.
    c_alignment: 'with_products' | 'after' (see the module docstring).
    zero_exponent: exponent of a zero product / zero C (an int), or None to leave zeros out
        of the group maximum.
    output_rounding: 'nearest' (ties to even) | 'toward_zero'.
    output_frac_bits: fraction bits of the rounded result (None: the accumulator's).
    """

    group: int | None = None
    frac_bits: int = 25
    c_alignment: str = "with_products"
    zero_exponent: int | None = -133
    output_rounding: str = "toward_zero"
    output_frac_bits: int | None = None

    name = "fused_dot_add"

    # zero_exponent: products of every format have exponents within +-300; the bound keeps
    # it clear of the no-exponent marker NO_EXP and of int overflow. output_frac_bits: at most
    # f32's 23 (`check` refuses more than the accumulator in use has)
    FIELDS = {"group": Int(lo=1, optional=True), "frac_bits": Int(lo=1, hi=40),
              "c_alignment": Choice(values=C_ALIGNMENTS), "zero_exponent": Int(lo=-1000, hi=1000, optional=True),
              "output_rounding": Choice(values=OUTPUT_ROUNDINGS), "output_frac_bits": Int(lo=1, hi=23, optional=True)}

    def __post_init__(self):
        super().__post_init__()
        if self.group is not None and self.frac_bits + 3 + self.group.bit_length() > 56:
            raise ValueError(f"group={self.group} with frac_bits={self.frac_bits} overflows the 56-bit group sum; use fewer")

    def describe(self):
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__dataclass_fields__)
        return f"{type(self).__name__}({fields})"

    def check(self, ctx: Context):
        why = super().check(ctx)
        if why:
            return why
        if ctx.c not in (F32, F16):
            return f"{self.describe()} rounds to an f32 or f16 accumulator; it does not model {ctx.c.name} outputs"
        if self.output_frac_bits is not None and self.output_frac_bits > ctx.c.mbits:
            return f"output_frac_bits={self.output_frac_bits} exceeds the {ctx.c.name} accumulator's {ctx.c.mbits} fraction bits"
        return None

    def accumulate(self, a, b, c_bits, ctx: Context, options=None):
        """`Model.accumulate`: the groups in K order, each group's result the next one's C."""
        k = jnp.broadcast_shapes(a.sig.shape, b.sig.shape)[-2]
        if k == 0:
            return c_bits
        g = min(self.group or k, k)
        if self.frac_bits + 3 + g.bit_length() > 56:
            raise ValueError(f"a group of {g} products with frac_bits={self.frac_bits} overflows the 56-bit group sum; set group")
        return over_groups(a, b, c_bits, g, lambda ga, gb, acc: self._group(ga, gb, acc, ctx), unroll_for(options))

    # ------------------------------------------------------------------ one group
    def _group(self, a, b, c_bits, ctx: Context):
        fc = ctx.c
        mab = ctx.a.mbits + ctx.b.mbits
        F = self.frac_bits
        frac = fc.mbits if self.output_frac_bits is None else self.output_frac_bits
        zexp = NO_EXP if self.zero_exponent is None else self.zero_exponent

        P = (a.sig * b.sig).astype(jnp.int64)  # exact, < 2**(mab + 2)
        E = jnp.where(P == 0, zexp, a.exp + b.exp)
        pneg = (a.sign ^ b.sign) == 1
        cf = decode(fc, c_bits)
        finite_c = ~(cf.nan | cf.inf)
        csig = jnp.where(finite_c, cf.sig, 0).astype(jnp.int64)
        ec = jnp.where(csig == 0, zexp, cf.exp)
        cneg = cf.sign == 1

        emax = E.max(axis=-2)
        if self.c_alignment == "with_products":
            emax = jnp.maximum(emax, ec)
        # terms in units of 2**(emax - F): product k is P_k * 2**(E_k - mab - (emax - F))
        m = _trunc_shift(P, (emax[..., None, :] - E) + mab - F)
        S = jnp.where(pneg, -m, m).sum(axis=-2)
        if self.c_alignment == "with_products":
            cm = _trunc_shift(csig, emax - ec + fc.mbits - F)
            S = S + jnp.where(cneg, -cm, cm)
            neg, mag, scale = S < 0, jnp.abs(S), emax - F
        else:
            neg, mag, scale = add_rounded(S, emax - F, jnp.where(cneg, -csig, csig), cf.exp - fc.mbits)
        bits = round_bits(neg, mag, scale, fc, frac, self.output_rounding)

        # ---- special values (IEEE propagation, as MMA-Sim's float arithmetic)
        nan_p, pinf_p, ninf_p = product_specials(a, b)
        nan = nan_p.any(axis=-2) | cf.nan
        pinf = pinf_p.any(axis=-2) | (cf.inf & ~cneg)
        ninf = ninf_p.any(axis=-2) | (cf.inf & cneg)
        nan = nan | (pinf & ninf)
        inf = ((1 << fc.ebits) - 1) << fc.mbits
        bits = jnp.where(pinf, inf, bits)
        bits = jnp.where(ninf, inf | (1 << (fc.bits - 1)), bits)
        bits = jnp.where(nan, NAN_BITS[fc.name], bits)
        if fc.bits == 32:
            bits = bits.astype(jnp.int32)
        return bits
