"""Pallas kernel step of `fma_chain` (`jwmma.models.FMAChain`, NUMERICS.md 8.3): acc <-
RN_f32(a_k b_k + acc) over the products in the chain's order, a 16-bit accumulator widened
exactly and narrowed at the end of every builtin step. Every parameter of the model:

* ``order``: compressed-K order, or the register order the builtin's row declares
  (`Context.chain_order`, rocjitsu's walk of the 8 CDNA4 fp8/bf8 builtins: runs of 4
  consecutive compressed columns): a static walk on the fast path, a loop over whole 2:4
  blocks in chain order (each block's start from a scalar select chain) on the rare ones; a
  declared order makes the unit one builtin step;
* ``narrowing``: a bf16 accumulator takes the top 16 bits of the f32 result ('truncate') or
  its RNE ('nearest'); f16 is RNE;
* ``nan``: 'canonical' (every NaN result the format's quiet NaN) or 'propagate' (rocjitsu's
  ``matrix_fma``: the NaN A, else B, of a step, quieted, else the accumulator's NaN, else
  0xFFC00000 for an invalid operation).

The NaN bits of 'propagate' need no per-product work in the arithmetic. A NaN accumulator
stays NaN, so whenever the model's accumulator is NaN its carried NaN word is: the image
(sign | 0x7FC00000) of the *last* NaN factor in chain order (A before B within a product),
else C's NaN quieted, else the invalid NaN; and nothing else is ever read. The kernel folds
that word over the unit's factors only when the unit's tile holds a NaN/Inf (a tile-wide
`lax.cond` on the per-tile summaries; otherwise it is C's NaN or the invalid NaN) and puts it
on every NaN result. Splitting the chain into units is exact for the same reason: a NaN
result carries the word, which the next unit reads back as C's quieted NaN.

Fast path: when every product of the unit's tile is an exact, normal f32 (always for fp8,
bf8 and f16 factors; for bf16 a tile-wide exponent test) and at least 2**-102 in its last
bit, one f32 multiply (exact) and one f32 add (the FMA's single RNE) per product give the
model's bits: then no result is subnormal (an exact sum of a multiple of 2**-102 and an
accumulator >= 2**-126 that is below 2**-126 is zero), so flushing (XLA CPU) cannot change
anything, and IEEE signed zeros and special values (Inf * 0, Inf - Inf) come from the
hardware. A multiply-add contracted to an FMA by the compiler gives the same bits (the
product is exact). The fast path is a loop over segments of n products of the unit, where the
chain's order is one pattern of n products repeated (`chain_segments`; n = `DEFAULT_RUN`, or
``PallasOptions(chain_run=n)``), else unrolled over the unit: the unrolled 64-product fp8
unit spilled registers and took 40 s to compile (`DEFAULT_RUN`); a chain_run of the unit's
length unrolls it.

A subnormal accumulator at the start of the unit must survive additions of zero products,
which a flushing add would lose. For fp8, bf8 and f16 factors lowered by Mosaic GPU the fast
path starts from a normal stand-in of its sign instead, far below half an ulp of any nonzero
product: the first nonzero product absorbs either one exactly, and a result equal to the
stand-in (all products zero) is the accumulator itself (`make_step`'s ``step``). This keeps
the float64 emulation out of those kernels (nearly half of the fp8 chain kernel's Triton
compile); on Triton the same kernel ran 1.8x slower, so Triton keeps the slow path for them.

Slow path (tile-wide `lax.cond`): a subnormal accumulator (Triton), or for bf16 factors
products outside the window: the model's float64 emulation (TwoSum, round to odd, integer
rounding), in a loop over runs of the chain (not unrolled).
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from ...numerics.formats import BF16, F16, F32
from ...models.base import Context
from ...models.fma_chain import FMAChain, stand_in_bits

from . import kernel_lib as kl
from .driver import Kernel
from .f64 import f64_of_fields, round_f64, round_to_odd, two_sum
from .rounding32 import round_to_format32

__all__ = ["f32_bits_to_format", "chain_runs", "chain_segments", "make_step"]

QNAN = {"f32": 0x7FC00000, "f16": 0x7E00, "bf16": 0x7FC0}
QUIET = 0x00400000
INVALID = -0x400000  # 0xFFC00000 as int32
INT_MIN = -(2**31)


def _nan_image(d: kl.Dec):
    """f32 bits a NaN factor gives the chain (`FMAChain`: sign | 0x7FC00000, no payload)."""
    return jnp.where(d.sign == 1, jnp.int32(INT_MIN), jnp.int32(0)) | jnp.int32(QNAN["f32"])


def _ieee_f32(fmt, code):
    """The f32 value of a code, Inf included, a NaN as its chain image (bf16: the top half of
    its f32 bits; its subnormals are f32 subnormals, which the fast path's tile test excludes).
    The NaN's bits never reach a result: NaN results get the chain's NaN word."""
    d = kl.decode(fmt, code)
    if fmt == BF16:
        v = lax.bitcast_convert_type(code << 16, jnp.float32)
    else:
        v = jnp.where(d.inf, jnp.where(d.sign == 1, -np.inf, np.inf).astype(jnp.float32), d.val)
    return jnp.where(d.nan, lax.bitcast_convert_type(_nan_image(d), jnp.float32), v)


def f32_bits_to_format(bits, fc):
    """Bits of the f32 value ``bits`` rounded to ``fc`` (RNE; NaN -> canonical quiet NaN)."""
    if fc == F32:
        return bits
    d = kl.decode(F32, bits, with_val=False)
    out = round_to_format32(d.sign, d.sig, d.exp - F32.mbits, fc)
    inf_bits = (((1 << fc.ebits) - 1) << fc.mbits) | (d.sign << (fc.bits - 1))
    out = jnp.where(d.inf, inf_bits, out)
    return jnp.where(d.nan, QNAN[fc.name], out)


def chain_runs(order, g: int = 2):
    """(g, bases): the chain ``order`` (step -> compressed column) as runs of g consecutive
    columns, each starting at a multiple of g, and the first column of every run in chain
    order. ValueError for an order of no such runs. Runs of 2 are whole 2:4 blocks (a loop
    over them needs no position arithmetic) and keep the loop bodies of the rare paths small."""
    order = tuple(order)
    if len(order) % g == 0 and all(order[i] % g == 0 and order[i:i + g] == tuple(range(order[i], order[i] + g))
                                   for i in range(0, len(order), g)):
        return g, tuple(order[i] for i in range(0, len(order), g))
    raise ValueError(f"the fma_chain kernel needs a chain order of runs of {g} columns, got {order}")


#: products per iteration of the fast path's loop by default (`PallasOptions.chain_run`). For
#: rocjitsu's 64-product fp8 unit (sm_90, Triton 3.9 offline, benchmarks/kernel_regs.py):
#: unrolled, 376 bytes spilled a thread, about 9100 SASS instructions executed a unit and 40 s
#: of Triton compile; segments of 16: no spill, about 8500, 5.7 s; of 4: 10600, 2.6 s
DEFAULT_RUN = 16


def chain_segments(order, n: int):
    """(pattern, bases): the chain ``order`` cut into segments of n products that are one
    pattern of whole 2:4 blocks shifted: segment i is ``bases[i] + pattern`` (bases even).
    Runs of n consecutive columns are the simplest case (pattern 0..n-1); rocjitsu's fp8
    order, runs of 4 at a stride of 8, is also one pattern repeated for n = 8, 16 or 32.
    ValueError where the order is no such repetition."""
    order = tuple(order)
    if n < 2 or n % 2 or len(order) % n:
        raise ValueError(f"the chain's {len(order)} products cannot be cut into segments of {n}")
    segs = [order[i:i + n] for i in range(0, len(order), n)]
    pattern = tuple(c - segs[0][0] for c in segs[0])
    whole = all(pattern[i] % 2 == 0 and pattern[i + 1] == pattern[i] + 1 for i in range(0, n, 2))
    if not whole or any(s[0] % 2 or tuple(c - s[0] for c in s) != pattern for s in segs):
        raise ValueError(f"the chain order is not one pattern of {n} products repeated: {order}")
    return pattern, tuple(s[0] for s in segs)


def _has_segments(order, n: int) -> bool:
    try:
        chain_segments(order, n)
    except ValueError:
        return False
    return True


def _run_view(view, g, bases, t):
    """The view shifted to the first column of run t (traced) of the chain."""
    if bases == tuple(range(0, g * len(bases), g)):
        return view.shifted(t * g)
    base = jnp.asarray(bases[0], jnp.int32)
    for j, b in enumerate(bases[1:], 1):  # a scalar select chain: no tables in a kernel
        base = jnp.where(t == j, b, base)
    return view.shifted(base)


def _product_view(view, g, bases, t):
    """(view, j): product t (traced) of the chain is column j (traced, 0 or 1) of the view
    shifted to its 2:4 block (runs of g = 2 columns are whole blocks: `chain_runs`)."""
    return _run_view(view, g, bases, t >> 1), t & 1


def make_step(spec, model: FMAChain, ctx: Context, run: int | None = None, stand_in: bool = True):
    """`driver.Kernel` of ``model`` on ``spec``: one f32 multiply and add per product where
    that is provably the FMA's bits, float64 emulation otherwise; NaN words as the module doc
    says. ``run``: the fast path as a loop over runs of ``run`` products of the chain (the
    same products in the same order: the same bits); None, or a run as long as the unit:
    unrolled over the unit. ``stand_in``: a subnormal accumulator of fp8/bf8/f16 factors
    starts the fast path from a normal stand-in (the module doc; Mosaic GPU); False: it sends
    the tile through the float64 path instead, a tile-wide `lax.cond` (Triton: on one H100 the
    fp8 chain kernel ran 3.0e12 MAC/s so and 1.7e12 with the stand-in, whose K loop is a third
    the size; why is not known, benchmarks/RESULTS.md "The H100 on 2026-12-06, later"). The
    same bits either way.

    Raises:
      ValueError: ``run`` under 2 (a run holds whole 2:4 blocks), or the chain's order has no
        runs of ``run`` consecutive columns."""
    fa, fb, fc = ctx.a, ctx.b, ctx.c
    declared = model.chain_order(ctx, spec.kc)
    # an f32 chain in compressed order has no step boundary: any unit gives the same bits (16
    # keeps kernels small); a declared order spans the step, and a 16-bit accumulator is
    # rounded at the end of every builtin step
    kc = min(spec.kc, 16) if fc == F32 and declared is None else spec.kc
    order = tuple(range(kc)) if declared is None else declared
    g, bases = chain_runs(order)
    if run is None:  # the default: segments of DEFAULT_RUN where the order repeats so, else unrolled
        run = DEFAULT_RUN if DEFAULT_RUN < len(order) and _has_segments(order, DEFAULT_RUN) else None
    loop = None  # (pattern, bases): the fast path's loop over segments, or None: unrolled
    if run is not None and run < len(order):
        if run < 2:
            raise ValueError(f"PallasOptions.chain_run must be at least 2 (whole 2:4 blocks), got {run}")
        try:
            loop = chain_segments(order, run)
        except ValueError:
            fits = [r for r in (2, 4, 8, 16, 32) if r < len(order) and _has_segments(order, r)]
            raise ValueError(f"PallasOptions.chain_run={run}: this chain's order (a unit of {len(order)} compressed "
                             f"columns) is not one pattern of {run} products repeated; it is for chain_run in "
                             f"{fits}, or None") from None
    propagate = model.nan == "propagate"
    # operands that are f32 values (all of them normal, except bf16 subnormals)
    both_f32 = all(kl.exactly_f32(f) or f == BF16 for f in (fa, fb))
    # static: the stand-in's f32 bits where products are always exact normal f32 (fp8, bf8,
    # f16; ``always``), used where ``stand_in`` asks; None: no stand-in (bf16 factors, or off)
    bits_of_stand_in = stand_in_bits(fa, fb)
    always = bits_of_stand_in is not None
    stand_in = bits_of_stand_in if stand_in else None

    def widen(acc):
        """f32 bits of the accumulator (a 16-bit C widens exactly; a NaN keeps sign and
        payload, shifted, as `FMAChain` widens it)."""
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

    def products(view, cols, acc):
        """acc + a_c b_c, one f32 multiply and add per product, over compressed columns ``cols``."""
        f32 = lambda w: lax.bitcast_convert_type(w, jnp.float32)  # noqa: E731
        rows = {}
        for c in cols:
            q = c // 2
            if q not in rows:
                rows[q] = [f32(row) for row in view.b_rows(q, "bw")]
            acc = f32(view.aw_col(c)) * view.pick(c, rows[q]) + acc
        return acc

    def fast(view, bits):
        acc = lax.bitcast_convert_type(bits, jnp.float32)
        if loop is None:
            acc = products(view, order, acc)
        else:
            pattern, seg_bases = loop
            n = len(pattern)
            acc = kl.fori(len(seg_bases), lambda t, x: products(_run_view(view, n, seg_bases, t), pattern, x), acc)
        return lax.bitcast_convert_type(acc, jnp.int32)

    def slow(view, bits):
        # rare: a loop over the chain's products (not unrolled) keeps the kernel small
        def body(t, acc):
            v, j = _product_view(view, g, bases, t)
            rows = [f64_of_fields(kl.decode(fb, row, with_val=False), fb.mbits) for row in v.b_rows(0)]
            pa = f64_of_fields(kl.decode(fa, v.a_col(j), with_val=False), fa.mbits)
            p = pa * v.pick(j, rows)
            s, e = two_sum(p, acc)
            finite = (jnp.abs(p) < np.inf) & (jnp.abs(acc) < np.inf)
            t_ = jnp.where(finite, round_to_odd(s, e), p + acc)
            return f64_of_fields(kl.decode(F32, round_f64(t_, F32), with_val=False), F32.mbits)

        acc = f64_of_fields(kl.decode(F32, bits, with_val=False), F32.mbits)
        return round_f64(kl.fori(len(order), body, acc), F32)

    def last_nan(view, word):
        """The NaN word after the unit: the image of its last NaN factor in chain order (A
        before B within a product), else ``word`` (a loop over products: the rare branch)."""
        def body(t, word):
            v, j = _product_view(view, g, bases, t)
            a = kl.decode(fa, v.a_col(j), with_val=False)
            b = [kl.decode(fb, row, with_val=False) for row in v.b_rows(0)]
            b_nan = v.pick(j, [d.nan for d in b])
            b_img = v.pick(j, [_nan_image(d) for d in b])
            return jnp.where(a.nan, _nan_image(a), jnp.where(b_nan, b_img, word))

        return kl.fori(len(order), body, word)

    def narrow(out, is_nan):
        """The f32 result bits ``out`` (NaN results already carry their word) in ``fc``."""
        if fc == F32:
            return out
        if fc == BF16 and model.narrowing == "truncate":
            return (out >> 16) & 0xFFFF
        res = f32_bits_to_format(out, fc)
        if not propagate:
            return res
        if fc == F16:  # a NaN keeps its sign and top payload bits, quieted (`FMAChain._narrow`)
            narrowed = ((out >> 16) & 0x8000) | 0x7E00 | ((out >> 13) & 0x3FF)
        else:
            narrowed = ((out >> 16) & 0xFFFF) | 0x40
        return jnp.where(is_nan, narrowed, res)

    def step(view, acc):
        bits = widen(acc)
        subnormal = ((bits & 0x7F800000) == 0) & ((bits & 0x7FFFFF) != 0)
        sa, sb = view.summaries()
        if stand_in is not None:
            # a subnormal accumulator s: the fast path from the normal stand-in t of s's sign,
            # and s where the result is t (`stand_in_bits` says why that is the chain's bits)
            t = (bits & INT_MIN) | stand_in
            out = fast(view, jnp.where(subnormal, t, bits))
            out = jnp.where(subnormal & (out == t), bits, out)
        elif always:
            out = kl.cond(~kl.tile_any(subnormal), lambda: fast(view, bits), lambda: slow(view, bits))
        elif both_f32:
            # no subnormal operand (bf16), products exact normal with last bit >= 2**-102
            ok = (~kl.tile_any(subnormal) & ~sa.tiny & ~sb.tiny & (sa.emin + sb.emin - fa.mbits - fb.mbits >= -102)
                  & (sa.emax + sb.emax + 2 <= 127))
            out = kl.cond(ok, lambda: fast(view, bits), lambda: slow(view, bits))
        else:
            out = slow(view, bits)
        is_nan = (out & 0x7FFFFFFF) > 0x7F800000
        if propagate:
            word = jnp.where((bits & 0x7FFFFFFF) > 0x7F800000, bits | QUIET, jnp.int32(INVALID))
            word = kl.cond(sa.special | sb.special, lambda: last_nan(view, word), lambda: word)
        else:
            word = jnp.int32(QNAN["f32"])
        return narrow(jnp.where(is_nan, word, out).astype(jnp.int32), is_nan)

    word = lambda f: (lambda x: lax.bitcast_convert_type(_ieee_f32(f, x), jnp.int32)) if both_f32 else None  # noqa: E731
    return Kernel(step, kc, (fa, fb), (fa.bits, fb.bits, False), a_word=word(fa), b_word=word(fb))
