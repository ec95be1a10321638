"""Issue #11: every CPU fast path gives the per-product path's bits.

* direct builtin calls run their waves in blocks (`jwmma.engine.builtins.run_waves`): any
  block size (``Options.block_elems``), a ragged last block included, gives the same bits;
* `exact` on fp8 x fp8 forms the products' sum as one float64 matrix product
  (`Exact.dots_apply`, proven exact by `one_band`) when ``Options.group_dots``; off: the
  per-product path. Random and adversarial data: NaN/Inf, subnormals, cancellation, huge
  exponent spreads, all-zero groups, -0 in C (the case that falls back), 16-bit C.
"""
import jax
import ml_dtypes
import numpy as np
import pytest

import jwmma
from jwmma.engine.step import context
from jwmma.models.exact_sums import one_band

FP8 = "smfmac_f32_16x16x128_fp8_fp8"
ON, OFF = jwmma.Options(group_dots=True), jwmma.Options(group_dots=False)


def _bits(x):
    return np.asarray(x).view(np.uint32 if np.asarray(x).dtype.itemsize == 4 else np.uint16)


def _same(x, y):
    return np.array_equal(_bits(x), _bits(y))


def _regs(name, waves, rng, kind="normal"):
    spec = jwmma.BUILTINS[name]
    if spec.a_format is None:  # integer builtins
        a = rng.integers(-8, 8, (waves, spec.m, spec.k)).astype(np.int8)  # int64 would be narrowed, with a warning
        b = rng.integers(-8, 8, (waves, spec.k, spec.n)).astype(np.int8)
        c = rng.integers(-1000, 1000, (waves, spec.m, spec.n)).astype(np.int32)
    else:
        a = _values(spec.a_format.dtype, (waves, spec.m, spec.k), rng, kind)
        b = _values(spec.b_format.dtype, (waves, spec.k, spec.n), rng, kind)
        c = (rng.standard_normal((waves, spec.m, spec.n)) * 4).astype(np.float32)
        if spec.c_format.bits == 16:
            c = c.astype(spec.c_format.dtype)
    values, pos = jwmma.compress_2_4(jwmma.prune_2_4(a))
    return (jwmma.pack_a(name, values), jwmma.pack_b(name, b), jwmma.pack_c(name, c),
            jwmma.pack_index(name, pos))


def _values(dtype, shape, rng, kind):
    if kind == "normal":
        return rng.standard_normal(shape).astype(dtype)
    bits = 16 if np.dtype(dtype).itemsize == 2 else 8  # every bit pattern, NaN/Inf included
    raw = rng.integers(0, 1 << bits, shape).astype(np.uint16 if bits == 16 else np.uint8)
    return raw.view(dtype)


# ------------------------------------------------------------------------ wave blocks
@pytest.mark.parametrize("name,model", [
    (FP8, "cdna3"),
    pytest.param(FP8, "exact", marks=pytest.mark.slow),
    pytest.param("swmmac_f32_16x16x32_f16_w32", "gfx12_dot4", marks=pytest.mark.slow),
    pytest.param("smfmac_f32_16x16x64_bf16", "cdna3", marks=pytest.mark.slow),
    pytest.param("swmmac_f16_16x16x32_f16_w32", "gfx12_dot4", marks=pytest.mark.slow),
    pytest.param("smfmac_i32_16x16x128_i8", None, marks=pytest.mark.slow),
])
def test_wave_blocks_any_size_same_bits(name, model):
    rng = np.random.default_rng(1)
    regs = _regs(name, 7, rng, "bits" if model == "exact" else "normal")
    fn = getattr(jwmma, name)
    spec = fn.spec
    one_wave = spec.m * spec.kc * spec.n
    kw = {} if model is None else {"model": model}
    whole = fn(*regs, options=jwmma.Options(block_elems=2**30), **kw)
    for per_block in (1, 3):  # 7 waves: blocks of 1; blocks of 3 with a ragged last block
        blocked = fn(*regs, options=jwmma.Options(block_elems=per_block * one_wave), **kw)
        assert _same(blocked, whole), per_block
    # leading batch dims of any rank, and broadcasting, are kept
    a, b, c, idx = (np.asarray(r) for r in regs)
    d = fn(a[:6].reshape(2, 3, *a.shape[1:]), b[:1], c[:6].reshape(2, 3, *c.shape[1:]), idx[:6].reshape(2, 3, -1),
           options=jwmma.Options(block_elems=2 * one_wave), **kw)
    ref = fn(a[:6], np.broadcast_to(b[:1], (6,) + b.shape[1:]), c[:6], idx[:6], **kw)
    assert d.shape == (2, 3) + c.shape[1:]
    assert _same(np.asarray(d).reshape(ref.shape), ref)


def test_wave_block_sizes():
    from jwmma import models
    from jwmma.engine.builtins import wave_block
    from jwmma.engine.options import resolve

    spec = jwmma.BUILTINS[FP8]
    opts = resolve(jwmma.Options(platform="cpu"))
    for name in ("cdna3", "exact", "fma_chain"):
        m = models.resolve(name, context(spec), spec.default_model)
        bw = wave_block(spec, m, context(spec), opts, 4096)
        assert 1 <= bw <= 64, (name, bw)  # cache-sized blocks, whatever the batch
    assert wave_block(spec, models.resolve("cdna3", context(spec), "cdna3"), context(spec), opts, 3) == 3


# ------------------------------------------------------------------------ exact as a dot
def test_one_band_certificate():
    """fp8 x fp8 steps are one band (the float64 dot is exact); bf8 and 16-bit are not, and
    keep the per-product path."""
    assert one_band(context(jwmma.BUILTINS[FP8]), 64)
    assert one_band(context(jwmma.BUILTINS["smfmac_f32_32x32x64_fp8_fp8"]), 32)
    assert not one_band(context(jwmma.BUILTINS["smfmac_f32_16x16x128_bf8_fp8"]), 64)
    assert not one_band(context(jwmma.BUILTINS["smfmac_f32_16x16x128_bf8_bf8"]), 64)
    assert not one_band(context(jwmma.BUILTINS["smfmac_f32_16x16x64_f16"]), 32)


def _adversarial_fp8(m, k, n, rng):
    e4 = ml_dtypes.float8_e4m3fn
    a = rng.standard_normal((m, k)).astype(e4)
    b = rng.standard_normal((k, n)).astype(e4)
    # huge exponent spreads: largest and smallest subnormal products in one group
    a[0, :8] = np.array([448, 2**-9, -448, 2**-9, 2**-6, -2**-9, 240, 2**-8], np.float32).astype(e4)
    b[:16, 0] = np.array([448, -448, 2**-9, 2**-9] * 4, np.float32).astype(e4)
    # exact cancellation to zero and all-zero groups, rows of subnormals
    a[1] = np.float32(0.0)
    a[2, :] = a[3, :] = np.float32(2**-7)
    b[:, 2] = np.float32(0.0)
    a[4] = np.where(np.arange(k) % 2, 2**-9, -2**-9).astype(np.float32).astype(e4)
    return a, b


@pytest.mark.parametrize("path", ["matrix", pytest.param("registers", marks=pytest.mark.slow)])
def test_exact_fp8_dot_equals_per_product(path):
    rng = np.random.default_rng(5)
    m, k, n = 64, 256, 64  # 64 x 64 outputs: the folded product is large enough to be taken
    a, b = _adversarial_fp8(m, k, n, rng)
    av = jwmma.compress_2_4(jwmma.prune_2_4(a))
    c = (rng.standard_normal((m, n)) * 10.0 ** rng.integers(-44, 37, (m, n))).astype(np.float32)
    c[0, :4] = [0.0, np.ldexp(1.0, -149), -np.ldexp(1.0, -149), 3.4e38]
    c[1, :] = -(a[1, 0].astype(np.float32) * 0)  # +0 products against C: cancellation rows
    kw = dict(builtin=FP8, model="exact", path=path)
    fast, slow = jwmma.gemm(av, b, c, options=ON, **kw), jwmma.gemm(av, b, c, options=OFF, **kw)
    assert _same(fast, slow)
    # C with NaN/Inf and -0 (the -0 case runs per product), operands with NaN
    c2 = c.copy()
    c2[5, :3] = [np.nan, np.inf, -np.inf]
    c2[6, :] = -0.0
    assert _same(jwmma.gemm(av, b, c2, options=ON, **kw), jwmma.gemm(av, b, c2, options=OFF, **kw))
    a3 = a.copy()
    a3[7, 0] = np.float32(np.nan)
    av3 = jwmma.compress_2_4(jwmma.prune_2_4(a3))
    assert _same(jwmma.gemm(av3, b, c, options=ON, **kw), jwmma.gemm(av3, b, c, options=OFF, **kw))


def test_exact_fp8_dot_is_taken_and_16bit_c():
    """The dot path appears in the program only when asked for; f16 C (RDNA4 fp8 builtins
    accumulate in f32 only, so 16-bit C is checked through `jwmma.dot`'s formats)."""
    rng = np.random.default_rng(9)
    a, b = _adversarial_fp8(64, 128, 64, rng)
    av = jwmma.compress_2_4(jwmma.prune_2_4(a))

    def has_dot(opts):
        jaxpr = jax.make_jaxpr(lambda v, p, b: jwmma.gemm((v, p), b, builtin=FP8, model="exact", options=opts))(*av, b)
        return "dot_general" in str(jaxpr)

    assert has_dot(ON) and not has_dot(OFF)


@pytest.mark.parametrize("seed", [1, pytest.param(0, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)])
def test_exact_fp8_dot_random_bit_patterns(seed):
    """Every fp8 bit pattern (NaN-free operands: the dot branch; with NaN: the specials branch)."""
    rng = np.random.default_rng(seed)
    e4 = ml_dtypes.float8_e4m3fn
    raw = rng.integers(0, 256, (2, 64, 128)).astype(np.uint8)
    if seed:  # seed 0 keeps the NaNs
        raw[(raw & 0x7F) == 0x7F] = 0x01
    a, b = raw[0].view(e4), raw[1].view(e4).T.copy()
    av = jwmma.compress_2_4(jwmma.prune_2_4(a))
    c = (rng.standard_normal((64, 64)) * 10.0 ** rng.integers(-40, 30, (64, 64))).astype(np.float32)
    kw = dict(builtin=FP8, model="exact")
    assert _same(jwmma.gemm(av, b, c, options=ON, **kw), jwmma.gemm(av, b, c, options=OFF, **kw))
