"""The block-scaled MFMA's Pallas kernel (`jwmma.backends.pallas.scaled`, issue 36) gives the
XLA path's bits, in Pallas interpret mode on this CPU, and rounds each group once.

References: `add_exact` against plain-Python rounding of the exact sum (`oracles.formats`),
on random and constructed operands (ties, sticky bits far below C, cancellation, subnormal and
overflowing results); the GEMM against ``backend='xla'`` (the model's arithmetic, itself
checked against the oracles in test_mfma_scaled*.py) on codes with NaN/Inf elements, NaN
(0xFF) scales, scales that overflow and that make subnormal results, cancelling rows, zero
rows over -0 and special C. Bits compare as uint32, NaN by NaN-ness (the model's NaN is one
word on both paths)."""
from __future__ import annotations

from fractions import Fraction

import jax
import numpy as np
import pytest

import jwmma
from jwmma.backends import pallas
from jwmma.engine.options import Options, PallasOptions, resolve
from jwmma.isa.table import lookup
from jwmma.engine.step import context
from jwmma.models.parse import parse_model
from jwmma.numerics.rounding import x64_scope
from oracles.formats import FMTS, decode, encode_fraction, value

F32 = FMTS["f32"]
PAL = Options(backend="pallas", pallas=PallasOptions(interpret=True))
SCALED16, SCALED32 = "mfma_scale_f32_16x16x128_f8f6f4", "mfma_scale_f32_32x32x64_f8f6f4"
BITS = {0: 8, 1: 8, 2: 6, 3: 6, 4: 4}  # fmt code -> element bits
ONE = {0: 0x38, 1: 0x3C, 2: 0x08, 3: 0x0C, 4: 0x2}  # fmt code -> the code of 1.0


def _rounded_sum(s: int, unit: int, acc_bits: int) -> int:
    """f32 bits of RN(s * 2**unit + acc): the exact sum as a Fraction, rounded once."""
    v = decode(acc_bits, F32)
    if v.kind == "inf":
        return acc_bits
    x = Fraction(s) * Fraction(2) ** unit + value(acc_bits, F32)
    return encode_fraction(F32, x)


def _add_cases(rng):
    """(S, unit, acc bits): random over every class, and constructed ties and sticky cases."""
    n = 3000
    s = rng.integers(-(2**31) + 1, 2**31, n)
    s[rng.random(n) < 0.1] = 0
    s = np.where(rng.random(n) < 0.2, rng.integers(-300, 300, n), s)
    unit = rng.integers(-330, 140, n)
    acc = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    kinds = rng.integers(0, 6, n)
    acc = np.where(kinds == 0, acc & 0x807FFFFF, acc)  # subnormals and zeros
    acc = np.where(kinds == 1, (acc & 0x80000000) | 0x7F800000, acc)  # Inf
    acc = np.where(kinds == 2, acc & 0x80000000, acc)  # +-0
    acc = np.where(acc & 0x7F800000 == 0x7F800000, acc & 0xFF800000, acc)  # no NaN (the kernel's C is finite or Inf)
    near = kinds == 3  # S * 2**unit near acc: cancellation and ties
    e = ((acc.astype(np.int64) >> 23) & 0xFF) - 150
    unit = np.where(near, e - rng.integers(0, 10, n), unit)
    rows = [tuple(int(x) for x in t) for t in zip(s, unit, acc)]
    one = 0x3F800000
    rows += [(1, -24, one), (3, -24, one), (-1, -25, one), (1, -25, one), (-1, -24, one),  # ties, both ways
             (1, -80, one), (-1, -80, one), (1, -300, 0x7F7FFFFF), (-1, -300, 0x00800000),  # sticky far below
             (2**31 - 1, 97, 0x7F7FFFFF), (-(2**31) + 1, 97, 0xFF7FFFFF),  # overflow to Inf
             (1, -149, 0x80000001), (3, -151, 0), (1, -150, 0), (-1, -150, 0x80000000),  # subnormal results
             (0, 0, 0x80000000), (5, -2, 0xBFA00000), (-5, -2, 0x3FA00000),  # exact zeros: +0
             (2**30, -53, one), (2**30 + 1, -53, one)]
    return rows


@pytest.mark.parametrize("variant", ["add_exact", "add_float"])
def test_add_rounds_the_exact_sum_once(rng, variant):
    """Both forms of the group's addition (integers; float64 TwoSum + round-to-odd + one
    conversion, the integers for a tile with a subnormal result): all cases at once, and the
    cases whose results are normal on their own (the float form's fast branch)."""
    from jwmma.backends.pallas import scaled
    import jax.numpy as jnp

    # jitted as inside a kernel: eagerly each of its operations compiled a program of its own
    add = jax.jit(getattr(scaled, variant))
    rows = _add_cases(rng)
    want = np.array([_rounded_sum(*r) for r in rows], np.uint32)
    normal = ~(((want & 0x7F800000) == 0) & ((want & 0x7FFFFF) != 0))
    for keep in (np.ones(len(rows), bool), normal):
        s, u, c = (np.array(x)[keep] for x in zip(*rows))
        with x64_scope():
            got = np.asarray(add(jnp.asarray(s, jnp.int32), jnp.asarray(u, jnp.int32),
                                 jnp.asarray(c.astype(np.uint32).view(np.int32)))).view(np.uint32)
        bad = [(r, hex(g), hex(w)) for r, g, w in zip(np.array(rows, dtype=object)[keep].tolist(), got.tolist(),
                                                      want[keep].tolist()) if g != w]
        assert not bad, bad[:5]
    assert (~normal).any() and normal.sum() > 2000


def _operands(rng, fa, fb, m=37, k=300, n=45):
    """uint8 codes, E8M0 scales and C of a block-scaled GEMM with the module doc's corners."""
    def codes(fmt, shape):
        x = rng.integers(0, 1 << BITS[fmt], shape).astype(np.uint8)
        if fmt == 0:
            x[(x & 0x7F) == 0x7F] = 0x7E  # NaN only where placed below
        if fmt == 1:
            x[(x & 0x7C) == 0x7C] &= 0xFB
        return x

    a, b = codes(fa, (m, k)), codes(fb, (k, n))
    if fa < 2:
        a[10, 7], a[11, 9] = (0xFF, 0x7F) if fa == 0 else (0x7C, 0xFC)  # NaN, NaN or +-Inf
    if fb < 2:
        b[3, 12], b[50, 13] = (0xFF, 0x7F) if fb == 0 else (0x7C, 0xFC)
    a[12, :] = a[12, 0]  # x and -x along K: cancellation
    b[1::2, 14] = b[0, 14] ^ (1 << (BITS[fb] - 1))
    b[::2, 14] = b[0, 14]
    a[8, :] = 0
    kb = -(-k // 32)
    sa, sb = rng.integers(120, 135, (m, kb)), rng.integers(120, 135, (kb, n))
    sa[:2], sb[:, :2] = rng.integers(0, 256, (2, kb)), rng.integers(0, 256, (kb, 2))  # any scale, 0xFF among them
    sa[2, 3] = 255
    sa[5, :], sb[:, 5] = 250, 250  # overflow
    sa[6, :], sb[:, 6] = rng.integers(40, 60, kb), rng.integers(40, 60, kb)  # subnormal results
    sa[9, :], sb[:, 9] = 30, 100
    c = (rng.standard_normal((m, n)) * 4).astype(np.float32)
    c.view(np.uint32)[0, :6] = [0x7F800000, 0xFF800000, 0x7FC00000, 0x80000000, 0x00000001, 0x807FFFFF]
    c[7, :], c[8, :], c[6, :], c[9, :], c[:, 6], c[:, 9] = 3.0e38, -0.0, 0.0, 0.0, 0.0, 0.0
    c.view(np.uint32)[6, ::3] = 0x80000003
    a[13, :], a[13, 0], b[0, 15], c[13, 15] = 0, ONE[fa], ONE[fb], 0.0  # 1 * 1 * 2**-140: a subnormal D
    sa[13, 0], sb[0, 15] = 127 - 70, 127 - 70
    return a, b, c, sa.astype(np.uint8), sb.astype(np.uint8)


CASES = [
    (SCALED16, 0, 0, (17, 160, 19)),  # MXFP8 x MXFP8 (NaN elements, no Inf), the smallest shape holding the corners
    pytest.param(SCALED16, 0, 0, (37, 300, 45), marks=pytest.mark.slow),
    pytest.param(SCALED16, 4, 1, (37, 300, 45), marks=pytest.mark.slow),  # FP4 x BF8 (Inf elements)
    pytest.param(SCALED32, 2, 3, (37, 300, 45), marks=pytest.mark.slow),  # FP6 x BF6, the 32x32 row: two groups a step
    pytest.param(SCALED16, 1, 4, (37, 300, 45), marks=pytest.mark.slow),
    pytest.param(SCALED16, 0, 0, (37, 300, 45, dict(float_combine=True)), marks=pytest.mark.slow),  # add_float
    pytest.param(SCALED16, 0, 0, (37, 300, 45, dict(group_loop=False)), marks=pytest.mark.slow),  # groups unrolled
]


@pytest.mark.parametrize("builtin,fa,fb,shape", CASES)
def test_scaled_gemm_pallas_equals_xla(rng, builtin, fa, fb, shape):
    """M x K x N with no tile multiples and K not a multiple of 32: the kernel's bits are the
    XLA path's, and the data reaches NaN, Inf, subnormal and zero results."""
    m, k, n = shape[:3]
    a, b, c, sa, sb = _operands(rng, fa, fb, m, k, n)
    kw = dict(builtin=builtin, scale_a=sa, scale_b=sb, fmt_a=fa, fmt_b=fb)
    ref = np.asarray(jwmma.gemm(a, b, c, backend="xla", **kw))
    pal = PAL if len(shape) == 3 else Options(backend="pallas", pallas=PallasOptions(interpret=True, **shape[3]))
    got = np.asarray(jwmma.gemm(a, b, c, options=pal, **kw))
    same = (ref.view(np.uint32) == got.view(np.uint32)) | (np.isnan(ref) & np.isnan(got))
    assert same.all(), np.argwhere(~same)[:5]
    sub = (np.abs(ref) < 2.0**-126) & (ref != 0)
    assert np.isnan(ref).any() and np.isinf(ref).any() and sub.any() and (ref == 0).any()
    assert np.isfinite(ref).mean() > 0.5  # most outputs are ordinary numbers


def test_scaled_kernel_applies_to_the_default_model_only():
    """backend='auto' on a GPU takes the kernel for cdna4_mx and keeps the XLA path for the
    other block-scaled arithmetic; backend='pallas' names why it has no kernel."""
    spec = lookup(SCALED16)
    gpu = resolve(Options(backend="auto", platform="gpu"))
    forced = resolve(Options(backend="pallas", platform="gpu"))
    if not pallas.triton_available():
        pytest.skip("this JAX has no Pallas Triton backend")
    model = lambda text: jwmma.models.resolve(parse_model(text), context(spec, False), spec.default_model)  # noqa: E731
    assert pallas.kernel_for(spec, model("cdna4_mx"), gpu)
    for other in ("mx_rocjitsu", "BlockScaled(group=64)", "BlockScaled(frac_bits=30)"):
        m = model(other)
        assert not pallas.kernel_for(spec, m, gpu)
        with pytest.raises(ValueError, match="no kernel for .*BlockScaled"):
            pallas.kernel_for(spec, m, forced)


def test_scaled_words_carry_one_scale_per_block(rng):
    """uint16 words (code | scale << 8) whose scales differ inside a 32-K block: ValueError
    naming the word and its block's scale (the hardware, and the kernel, hold one per block)."""
    a = (rng.integers(0, 100, (16, 64)).astype(np.uint16) | (127 << 8)).astype(np.uint16)
    b = (rng.integers(0, 100, (64, 16)).astype(np.uint16) | (120 << 8)).astype(np.uint16)
    kw = dict(builtin=SCALED16, fmt_a=0, fmt_b=0)
    assert np.isfinite(np.asarray(jwmma.gemm(a, b, **kw))).all()
    a[3, 40] = (a[3, 40] & 0xFF) | (126 << 8)
    with pytest.raises(ValueError, match=r"a\[3, 40\] carries scale 126, its block's first element 127"):
        jwmma.gemm(a, b, **kw)
    b[33, 5] = (b[33, 5] & 0xFF) | (9 << 8)
    a[3, 40] = (a[3, 40] & 0xFF) | (127 << 8)
    with pytest.raises(ValueError, match=r"b\[33, 5\] carries scale 9, its block's first element 120 .*per column"):
        jwmma.gemm(a, b, **kw)
