"""`fma_chain`: an f32 fused multiply-add chain over the compressed products (NUMERICS.md
8.3). acc <- RN_f32(a_k * b_k + acc), one rounding per product, IEEE specials,
subnormals kept; a 16-bit accumulator is widened exactly and the final f32 narrowed once.

Three parameters, each rocjitsu's choice or the earlier jwmma one (`FMAChain()` is the
earlier model, preset ``fma_chain_k``; the ``fma_chain`` preset follows rocjitsu):

* ``order``: 'compressed' (the products in compressed-K order) or 'register' (the chain order
  the builtin's table row declares, `Context.chain_order`: rocjitsu's
  ``exec_smfmac_f32_{16x16x128,32x32x64}_fp8`` walk the 8 CDNA4 fp8/bf8 builtins in register
  order, e.g. compressed columns 0-3, 8-11, 16-19, 24-27, 4-7, ... for 16x16x128; builtins
  without a declared order, and `jwmma.dot`, keep compressed-K order).
* ``narrowing``: how the final f32 becomes a bf16 accumulator: 'nearest' (RNE) or 'truncate'
  (its top 16 bits: rocjitsu, as the measured gfx1201 packed WMMA). f16 accumulators are
  rounded to nearest under both (the evidence covers bf16 only).
* ``nan``: 'canonical' (every NaN result is the format's quiet NaN, 0x7FC00000) or
  'propagate' (rocjitsu ``matrix_fma``: when a step's result is NaN it is the step's A operand
  if NaN, else B, else the accumulator, quieted (| 0x00400000), else 0xFFC00000 for an
  invalid operation; so the NaN operand of the last step that had one wins). An A/B NaN's f32
  image is sign | 0x7FC00000: decoded operands carry no payload, which is exact for the
  default quiet NaNs; C keeps its payload. A NaN narrows to f16 / bf16 keeping sign and the top
  payload bits, quiet (truncation: the top 16 bits).

Each FMA is emulated exactly: the product is exact in float64, the sum with the accumulator
is split error-free (TwoSum), rounded to odd in float64 and then to f32 bits, which equals
one correct rounding of the exact a*b + acc. `FMAChain.accumulate` is the per-product
reference every faster path must agree with. For fp8, bf8 and f16 factors it runs the chain
in f32 arithmetic instead, one multiply and one add per product, which is provably the same
bits (`stand_in_bits`: exact normal products, no subnormal sum, a normal stand-in for a
subnormal accumulator), and forms the 'propagate' NaN word after the chain rather than per
product: 2-5x the float64 emulation's rate on a CPU (benchmarks/RESULTS.md).

f64 operands and accumulator (the f64 MFMA, MMA-Sim's ``MMA_FMA`` on doubles) run the same chain
in f64: acc <- RN_f64(a_k * b_k + acc), each step one `jwmma.numerics.fma64.fma_f64` on integer
bits (no float arithmetic: XLA has no f64 FMA that rounds once, and its CPU backend flushes f64
subnormals). ``narrowing`` does not apply; ``nan='propagate'`` keeps rocjitsu's choice with f64
bits (A's or B's NaN as sign | 0x7FF8000000000000, the accumulator's quieted, else
0xFFF8000000000000).
"""
from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
from jax import lax

from ..numerics.fma64 import QNAN_F64, fma_f64
from ..numerics.formats import BF16, F16, F32, F64, decode, exactly_normal_in_f32
from ..numerics.rounding import add_rn, round_f64, value_f64
from ..varying import vary_like
from .fields import Choice
from .base import Context, Model
from .grouping import over_groups, unroll_for

__all__ = ["FMAChain", "IEEEAsFMAChain", "ORDERS", "NARROWINGS", "NAN_POLICIES"]

ORDERS = ("compressed", "register")
NARROWINGS = ("nearest", "truncate")
NAN_POLICIES = ("canonical", "propagate")
_QUIET = 0x00400000
_SIGN = -0x80000000  # the f32 sign bit as int32
_CANONICAL = 0x7FC00000
_INVALID = -0x400000  # 0xFFC00000 as int32
_QUIET64 = 1 << 51
_INVALID64 = -(1 << 51)  # 0xFFF8000000000000 as int64


def stand_in_bits(fa, fb) -> int | None:
    """Static: where one f32 multiply and add per product give the FMA's bits, the f32 bit
    pattern (exponent field only) of the stand-in for a subnormal accumulator; else None.

    The f32 arithmetic is exact enough when every product of ``fa`` x ``fb`` is an exact,
    normal f32 whose last bit is at least 2**-102 (fp8, bf8 and f16 factors): the multiply is
    exact, the add is the FMA's one rounding, and no sum is subnormal (a sum below 2**-126 of
    a nonzero product and a normal accumulator needs the accumulator within 2**-126 of the
    product, so at least 2**-103: both, and the sum, are multiples of 2**-126, and the sum is
    0), so a CPU's flushing changes nothing. A subnormal accumulator s is the exception: it
    must survive sums with zero products. The chain starts instead from the stand-in t (s's sign, 2**-25 of the
    smallest product, a normal f32), which every nonzero product absorbs exactly, as it absorbs
    s; so both chains agree from the first nonzero product on, and a result equal to t (every
    product zero; no other sum can be t, every nonzero one being a multiple of the smallest
    product) is s. The Pallas chain kernel (`jwmma.backends.pallas.fma_chain`) does the same."""
    if not (exactly_normal_in_f32(fa) and exactly_normal_in_f32(fb) and fa.max_exp + fb.max_exp + 2 <= 127
            and fa.min_exp + fb.min_exp - fa.mbits - fb.mbits >= -102):
        return None
    exp = fa.min_exp - fa.mbits + fb.min_exp - fb.mbits - 25
    return (exp + 127) << F32.mbits if exp >= -126 else None


def _at_first(f):
    """The decoded fields of a group of one product (`over_groups`) without its K axis."""
    return jax.tree_util.tree_map(lambda t: None if t is None else t[..., 0, :], f)


def _nan_image(f):
    """int32 f32 bits of a NaN factor as the 'propagate' chain carries it: sign | 0x7FC00000."""
    return jnp.where(f.sign == 1, jnp.int32(_SIGN), 0) | _CANONICAL


def _fma(p, acc):
    """float64 of RN_f32(p + acc) for an exact product p (one emulated f32 FMA)."""
    return add_rn(p, acc, F32)


def _widen_nan(code, fmt):
    """int32 f32 bits of a 16-bit NaN code, widened as IEEE does (sign, payload shifted)."""
    code = code & 0xFFFF
    if fmt == BF16:
        return (code << 16).astype(jnp.int32)
    sign = jnp.where((code >> 15) == 1, jnp.int32(-0x80000000), 0)
    return (sign | 0x7F800000 | ((code & 0x3FF) << 13)).astype(jnp.int32)


@dataclass(frozen=True)
class FMAChain(Model):
    """acc <- RN_f32(a_k * b_k + acc) over the products (module doc). The defaults are the
    earlier jwmma chain (preset ``fma_chain_k``); ``fma_chain`` is
    ``FMAChain(order='register', narrowing='truncate', nan='propagate')`` (rocjitsu).

    order: 'compressed' | 'register'; narrowing: 'nearest' | 'truncate' (bf16 accumulators);
    nan: 'canonical' | 'propagate'.
    """

    order: str = "compressed"
    narrowing: str = "nearest"
    nan: str = "canonical"

    name = "fma_chain"
    float64 = True

    FIELDS = {"order": Choice(values=ORDERS), "narrowing": Choice(values=NARROWINGS),
              "nan": Choice(values=NAN_POLICIES)}

    def describe(self):
        fields = [f"{k}={getattr(self, k)!r}" for k, d in (("order", "compressed"), ("narrowing", "nearest"),
                                                           ("nan", "canonical")) if getattr(self, k) != d]
        return f"FMAChain({', '.join(fields)})"

    def chain_order(self, ctx: Context, k: int):
        """The chain's step -> compressed position permutation, or None for compressed-K order.

        Args:
            ctx: the formats and the builtin's declared order (`Context.chain_order`); k: the
                number of products.
        Returns:
            A tuple of k positions, or None.
        """
        order = getattr(ctx, "chain_order", None)
        if self.order != "register" or order is None:
            return None
        if len(order) != k:
            raise ValueError(f"the builtin's chain order has {len(order)} steps, but the instruction has K={k} products")
        return tuple(order)

    def accumulate(self, a, b, c_bits, ctx: Context, options=None):
        """`Model.accumulate`: one emulated f32 FMA per product, in the chain's order."""
        fa, fb, fc = ctx.a, ctx.b, ctx.c
        k = jnp.broadcast_shapes(a.sig.shape, b.sig.shape)[-2]
        order = self.chain_order(ctx, k)
        if order is not None:
            idx = jnp.asarray(order, jnp.int32)
            a = jax.tree_util.tree_map(lambda t: None if t is None else jnp.take(t, idx, axis=-2), a)
            b = jax.tree_util.tree_map(lambda t: None if t is None else jnp.take(t, idx, axis=-2), b)
        if fc == F64:
            return self._accumulate_f64(a, b, c_bits, options)
        stand_in = stand_in_bits(fa, fb)
        if stand_in is not None and a.val is not None and b.val is not None:
            return self._accumulate_f32(a, b, c_bits, ctx, stand_in, options)
        cf = decode(fc, c_bits)
        acc = value_f64(cf, fc.mbits)  # exact (a 16-bit C widens exactly)

        if self.nan == "canonical":
            def step(ga, gb, acc):
                p = value_f64(ga, fa.mbits)[..., 0, :] * value_f64(gb, fb.mbits)[..., 0, :]
                return _fma(p, acc)

            acc = over_groups(a, b, acc, 1, step, unroll_for(options))
            return self._narrow(acc, None, fc)

        # 'propagate': carry the f32 bits of the NaN the chain holds (when it holds one)
        c32 = c_bits.astype(jnp.int32) if fc == F32 else _widen_nan(c_bits, fc)
        nanb = jnp.where(cf.nan, c32 | _QUIET, _CANONICAL).astype(jnp.int32)

        def step_nan(ga, gb, carry):
            acc, nanb = carry
            ga0, gb0 = _at_first(ga), _at_first(gb)
            new = _fma(value_f64(ga0, fa.mbits) * value_f64(gb0, fb.mbits), acc)
            pick = jnp.where(ga0.nan, _nan_image(ga0), jnp.where(gb0.nan, _nan_image(gb0),
                                                                   jnp.where(jnp.isnan(acc), nanb, _INVALID)))
            return new, jnp.where(jnp.isnan(new), pick, nanb).astype(jnp.int32)

        acc, nanb = over_groups(a, b, (acc, nanb), 1, step_nan, unroll_for(options))
        return self._narrow(acc, nanb, fc)

    def _accumulate_f32(self, a, b, c_bits, ctx: Context, stand_in: int, options):
        """The chain as one f32 multiply and add per product (`stand_in_bits` says when that is
        the FMA's bits, and how a subnormal accumulator is carried); the same NaN words and
        narrowing as the float64 chain."""
        fc = ctx.c
        cf = decode(fc, c_bits)
        bits = (c_bits.astype(jnp.int32) if fc == F32
                else round_f64(value_f64(cf, fc.mbits), F32).astype(jnp.int32))  # widened exactly
        subnormal = ((bits & 0x7F800000) == 0) & ((bits & 0x7FFFFF) != 0)
        t = (bits & _SIGN) | stand_in
        acc = lax.bitcast_convert_type(jnp.where(subnormal, t, bits), jnp.float32)
        first = lambda f: f.val[..., 0, :]  # noqa: E731

        acc = over_groups(a, b, acc, 1, lambda ga, gb, acc: first(ga) * first(gb) + acc, unroll_for(options))
        nanb = None
        if self.nan == "propagate":
            # the NaN word the float64 chain carries, without a per-product select: whenever the
            # result is NaN it is the image of the last product's NaN factor (A's before B's
            # within a product), else C's NaN quieted, else the invalid NaN
            c32 = bits if fc == F32 else _widen_nan(c_bits, fc)
            word = jnp.broadcast_to(jnp.where(cf.nan, c32 | _QUIET, _INVALID).astype(jnp.int32), acc.shape)

            def last_nan(ga, gb, w):
                ga0, gb0 = _at_first(ga), _at_first(gb)
                return jnp.where(ga0.nan, _nan_image(ga0), jnp.where(gb0.nan, _nan_image(gb0), w)).astype(jnp.int32)

            like = (*jax.tree_util.tree_leaves((a, b)), acc)  # varying axes inside a user's shard_map
            nanb = lax.cond(jnp.any(a.nan) | jnp.any(b.nan),
                            lambda: vary_like(over_groups(a, b, word, 1, last_nan, unroll_for(options)), *like),
                            lambda: vary_like(word, *like))
        out = lax.bitcast_convert_type(acc, jnp.int32)
        out = jnp.where(subnormal & (out == t), bits, out)
        return self._narrow(value_f64(decode(F32, out), F32.mbits), nanb, fc)

    def _accumulate_f64(self, a, b, c_bits, options):
        """The chain on f64 operands: int64 accumulator bits, one `fma_f64` per product."""
        propagate = self.nan == "propagate"

        def step(ga, gb, acc):
            ga0, gb0 = _at_first(ga), _at_first(gb)
            new = fma_f64(ga0, gb0, decode(F64, acc))
            if not propagate:
                return new
            image = lambda f: jnp.where(f.sign == 1, jnp.int64(-(1 << 63) | QNAN_F64), jnp.int64(QNAN_F64))
            acc_nan = decode(F64, acc).nan
            pick = jnp.where(ga0.nan, image(ga0), jnp.where(gb0.nan, image(gb0),
                                                             jnp.where(acc_nan, acc | _QUIET64, _INVALID64)))
            return jnp.where(decode(F64, new).nan, pick, new)

        return over_groups(a, b, c_bits.astype(jnp.int64), 1, step, unroll_for(options))

    def _narrow(self, acc, nanb, fc):
        """The final f32 (as float64 ``acc``; ``nanb``: its NaN bits, or None for canonical)
        as bits of the accumulator ``fc``."""
        bits32 = round_f64(acc, F32)
        isnan = jnp.isnan(acc)
        if nanb is not None:
            bits32 = jnp.where(isnan, nanb, bits32)
        if fc == F32:
            return bits32.astype(jnp.int32)
        if fc == BF16 and self.narrowing == "truncate":
            return (bits32 >> 16) & 0xFFFF
        out = round_f64(acc, fc)
        if nanb is not None:  # a NaN keeps its sign and top payload bits, quieted
            if fc == F16:
                narrowed = ((bits32 >> 16) & 0x8000) | 0x7E00 | ((bits32 >> 13) & 0x3FF)
            else:
                narrowed = ((bits32 >> 16) & 0xFFFF) | 0x40
            out = jnp.where(isnan, narrowed, out)
        return out


class IEEEAsFMAChain:
    """Mixin of the CDNA models (`CDNA3`, `CDNA1`, `CDNA2`): f32 and f64 operands run as MMA-Sim's
    f32 and f64 MFMA on every CDNA generation (``MMA_FMA``: acc <- RN(a*b + acc) in K order from C,
    `FMAChain()`), every other format as the model it is mixed into. Put it first among the bases."""

    float64 = True
    #: what the FMA chain lacks of the model's fields, for the message of a changed model on f32/f64
    chain_lacks = "has none of its fields"

    @staticmethod
    def on_chain(ctx: Context) -> bool:
        """Whether ``ctx``'s operands run as the FMA chain (f32 x f32 or f64 x f64)."""
        return not ctx.integer and ctx.a in (F32, F64) and ctx.b == ctx.a

    def check(self, ctx: Context):
        """The chain's rules on f32/f64 operands (only the preset itself, whose fields it ignores),
        the mixed-in model's elsewhere."""
        if self.on_chain(ctx):
            why = Model.check(self, ctx)
            if why is None and self != type(self)():
                arch = type(self).__name__
                return (f"{self.describe()}: on {ctx.a.name} operands {arch} is MMA-Sim's FMA chain, which "
                        f"{self.chain_lacks}; use {arch}() (preset {self.name}) or FMAChain()")
            return why
        return super().check(ctx)

    def instruction(self, ctx, a, pos, b, c, select, options):
        """The model's `instruction`; f32 and f64 operands: the FMA chain."""
        if ctx.a in (F32, F64):
            return _CHAIN.instruction(ctx, a, pos, b, c, select, options)
        return super().instruction(ctx, a, pos, b, c, select, options)

    def accumulate(self, a, b, c_bits, ctx, options=None, **kw):
        """The model's `accumulate` (``kw``: its own keywords); f32 and f64 operands: the FMA chain."""
        if ctx.a in (F32, F64):
            return _CHAIN.accumulate(a, b, c_bits, ctx, options)
        return super().accumulate(a, b, c_bits, ctx, options, **kw)


_CHAIN = FMAChain()

