"""The Pallas backend (`jwmma.backends.pallas`, issue #12) gives the XLA path's bits, in Pallas
interpret mode on this CPU.

Reference: `jwmma.tiled.paths.matrix_path` with ``backend='xla'`` (the code behind
``jwmma.gemm(..., path='matrix')``), fed the same tile-padded codes as the Pallas kernel. Data
(`jwmma.backends.pallas.testdata`): random operands with an adversarial corner (NaN/Inf, any
bit pattern, subnormals, all-zero groups, huge exponent spreads, duplicate positions with exact
cancellation, extreme C), plus rows built here: all-zero A rows with subnormal C (subnormal
results) and +0 C with x, -x in every block (cancellation to zero); integer C at the edge of
overflow. Bits compare as uint32 (NaN payloads too). The default set covers every family
(~1 min on two shared cores); ``-m slow`` every builtin group, variant and model parameter.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jwmma
from jwmma import models
from jwmma.backends import pallas
from jwmma.backends.pallas.testdata import gemm_codes
from jwmma.engine import effort
from jwmma.engine.options import Options, PallasOptions, resolve
from jwmma.engine.step import context
from jwmma.isa.table import lookup
from jwmma.numerics.formats import F32, FLOAT_FORMATS
from jwmma.numerics.rounding import x64_scope
from jwmma.tiled import paths

from pallas_support import M, N, abstract_gpu, cases, run

# both at the 'fast' compile effort, which changes no bit (tests/test_effort.py) and is what an
# eager call of these sizes settles to: the paths are called directly here, which skips `settle`,
# and at 'full' the XLA references compiled 2-3x longer
XLA = resolve(Options(backend="xla", platform="cpu", compile_effort="fast"))
PAL = resolve(Options(backend="pallas", platform="cpu", pallas=PallasOptions(tm=32, tn=64, interpret=True), compile_effort="fast"))

CORE = [
    ("smfmac_f32_16x16x128_fp8_fp8", None, {}),  # cdna3 fp8, 3-D kernel, float64 combine (defaults)
    ("swmmac_f32_16x16x32_f16_w32", None, {}),  # gfx12 f16 -> f32, rounding by conversion
    ("swmmac_f16_16x16x32_f16_w32", None, {}),  # gfx12 per-step narrowing to f16
    ("smfmac_f32_16x16x128_fp8_fp8", "exact", {}),
    ("smfmac_f32_16x16x128_fp8_fp8", "fma_chain_k", {}),
    ("swmmac_i32_16x16x32_iu8_w32", None, dict(clamp=True)),
    ("smfmac_f32_16x16x128_fp8_fp8", "fma_chain", {}),  # rocjitsu: register order, NaN words
]  # the default run keeps every 2nd case (conftest.DEFAULT_EVERY): 0, 2, 4, 6
SLOW = [
    ("smfmac_f32_16x16x128_fp8_fp8", None, dict(gather=True)),  # B rows by a gather load at the positions
    ("smfmac_f32_16x16x64_f16", None, dict(gather=True)),
    ("smfmac_f32_16x16x128_fp8_fp8", None, dict(float_combine=False)),
    ("swmmac_f32_16x16x32_f16_w32", None, dict(float_round=False)),
    ("smfmac_f32_16x16x128_fp8_fp8", None, dict(vec3=False, float_combine=False)),
    ("smfmac_f32_16x16x128_fp8_fp8", None, dict(vec3=False, reload=True, float_combine=True)),
    ("smfmac_f32_16x16x128_bf8_fp8", None, {}),
    ("smfmac_f32_32x32x64_fp8_bf8", None, {}),
    ("smfmac_f32_16x16x64_f16", None, {}),
    ("smfmac_f32_16x16x64_f16", None, dict(float_combine=False)),
    ("smfmac_f32_32x32x32_bf16", None, {}),
    ("smfmac_f32_16x16x64_bf16", "cdna3_c785138", {}),
    ("smfmac_f32_16x16x128_fp8_fp8", models.CDNA3(group=8, product_rounding="nearest"), {}),
    ("swmmac_bf16_16x16x32_bf16_w32", None, {}),
    ("swmmac_f32_16x16x32_bf16_w32", None, {}),
    ("swmmac_f32_16x16x32_fp8_bf8_w32", None, {}),
    ("swmmac_f32_16x16x32_bf8_bf8_w32", None, {}),
    ("swmmac_f16_16x16x32_f16_w32", models.Gfx12Dot4(fp16_ovfl=True), {}),
    ("swmmac_f32_16x16x32_f16_w32", "exact", {}),
    ("swmmac_bf16_16x16x32_bf16_w32", "exact", {}),
    ("smfmac_f32_16x16x128_bf8_bf8", "exact", {}),
    ("smfmac_f32_16x16x64_bf16", "fma_chain_k", {}),
    ("swmmac_f16_16x16x32_f16_w32", "fma_chain_k", {}),
    ("swmmac_bf16_16x16x32_bf16_w32", "fma_chain", {}),  # truncation
    ("swmmac_f16_16x16x32_f16_w32", "fma_chain", {}),
    ("smfmac_f32_32x32x64_fp8_bf8", "fma_chain", {}),  # the Kc = 32 register order
    ("smfmac_f32_16x16x128_bf8_bf8", "fma_chain", {}),
    ("smfmac_f32_16x16x64_bf16", "fma_chain", {}),  # compressed order (no declared order), f32 units of 16
    ("smfmac_f32_16x16x64_fp8_fp8", "fma_chain", {}),  # gfx942 FNUZ: the NaN is the -0 code
    ("swmmac_bf16_16x16x32_bf16_w32", models.FMAChain(nan="propagate"), {}),  # RNE narrowing of a NaN word
    ("smfmac_f32_16x16x128_bf8_fp8", models.FMAChain(order="register"), {}),  # canonical NaN
    ("smfmac_f32_16x16x128_fp8_fp8", "fma_chain", dict(chain_run=4)),  # the chain as a loop over runs of 4
    ("smfmac_f32_16x16x128_fp8_bf8", "fma_chain", dict(chain_run=16)),  # segments of 16 based at 0, 4, 32, 36
    ("swmmac_bf16_16x16x32_bf16_w32", "fma_chain", dict(chain_run=2)),  # bf16: the tile-wide slow path beside it
    ("smfmac_f32_16x16x64_bf16", "fma_chain", dict(chain_run=8)),  # compressed order, f32 units of 16
    ("smfmac_i32_16x16x128_i8", None, {}),
    ("swmmac_i32_16x16x64_iu4_w32", None, dict(clamp=True)),
    ("swmmac_i32_16x16x32_iu4_w32", "exact", dict(clamp=True)),
]

# dense RDNA4 WMMA (issue #20): every row x every model with a kernel (Nvidia models have
# none); the default set takes one row per kernel family and accumulator kind
_WF = ("wmma_f32_16x16x16_f16_w32_gfx12", "wmma_f32_16x16x16_bf16_w32_gfx12")
_W16 = ("wmma_f16_16x16x16_f16_w32_gfx12", "wmma_bf16_16x16x16_bf16_w32_gfx12")
_W8 = tuple(f"wmma_f32_16x16x16_{x}_{y}_w32_gfx12" for x in ("fp8", "bf8") for y in ("fp8", "bf8"))
_WI = ("wmma_i32_16x16x16_iu8_w32_gfx12", "wmma_i32_16x16x16_iu4_w32_gfx12", "wmma_i32_16x16x32_iu4_w32_gfx12")
# dense CDNA MFMA (BUILTINS_DENSE.md) with a kernel: the 16-bit, fp8/bf8 (gfx942: FNUZ) and i8 rows
_MF = ("mfma_f32_32x32x8f16", "mfma_f32_16x16x16f16", "mfma_f32_32x32x8bf16_1k", "mfma_f32_16x16x16bf16_1k",
       "mfma_f32_16x16x32_f16", "mfma_f32_32x32x16_f16", "mfma_f32_16x16x32_bf16", "mfma_f32_32x32x16_bf16")
_M8 = tuple(f"mfma_f32_{mk}_{x}_{y}" for mk in ("32x32x16", "16x16x32") for x in ("fp8", "bf8") for y in ("fp8", "bf8"))
_MI = ("mfma_i32_32x32x16_i8", "mfma_i32_16x16x32_i8", "mfma_i32_16x16x64_i8", "mfma_i32_32x32x32_i8",
       "mfma_i32_32x32x8i8", "mfma_i32_16x16x16i8")
# gfx908/gfx90a-only non-1k bf16 MFMA: the defaults (cdna1, CDNA2(group=2)) have no kernel
_M12 = ("mfma_f32_32x32x4bf16", "mfma_f32_16x16x8bf16")
# dense RDNA3 WMMA (wave32 and wave64, A/B replicated): the default gfx11_dot2 has no kernel
_W3F = tuple(f"wmma_f32_16x16x16_{t}_w{w}" for w in (32, 64) for t in ("f16", "bf16"))
_W3I = tuple(f"wmma_i32_16x16x16_{t}_w{w}" for w in (32, 64) for t in ("iu8", "iu4"))
# RDNA3 16-bit outputs (opsel, _tied; GEMMs hold C in the low halves): gfx11_dot2 has no kernel either
_W3H = tuple(f"wmma_{t}_16x16x16_{t}{tie}_w{w}" for w in (32, 64) for t in ("f16", "bf16") for tie in ("", "_tied"))
_FLOAT_MODELS = (None, "exact", "fma_chain_k", "fma_chain", "cdna3", "cdna3_c785138")
DENSE_ALL = ([(b, m, {}) for b in _WF + _W8 for m in _FLOAT_MODELS]
             + [(b, m, {}) for b in _MF + _M8 for m in _FLOAT_MODELS + ("gfx12_dot4",)]
             + [(b, m, {}) for b in _W16 for m in (None, "exact", "fma_chain_k", "fma_chain")]
             + [(b, m, dict(clamp=cl)) for b in _WI for m in (None, "exact") for cl in (False, True)]
             + [(b, m, {}) for b in _MI for m in (None, "exact", "staged_clamp")]
             + [(b, m, {}) for b in _W3F + _M12 for m in _FLOAT_MODELS[1:] + ("gfx12_dot4",)]
             + [(b, m, dict(clamp=cl)) for b in _W3I for m in (None, "staged_clamp") for cl in (False, True)]
             + [(b, m, {}) for b in _W3H for m in ("exact", "fma_chain_k", "fma_chain", "gfx12_dot4")])
DENSE_CORE = [
    ("wmma_f32_16x16x16_f16_w32_gfx12", None, {}),  # gfx12_dot4, f32 by conversion
    ("wmma_bf16_16x16x16_bf16_w32_gfx12", None, {}),  # gfx12_dot4, per-step bf16 truncation
    ("wmma_f32_16x16x16_fp8_bf8_w32_gfx12", None, {}),  # gfx12_dot4, one grid per step
    ("wmma_f32_16x16x16_fp8_fp8_w32_gfx12", "cdna3", {}),  # fused groups, 3-D kernel
    ("wmma_f16_16x16x16_f16_w32_gfx12", "fma_chain_k", {}),
    ("wmma_i32_16x16x32_iu4_w32_gfx12", None, dict(clamp=True)),  # staged: c < 16, then the rest
    ("wmma_i32_16x16x16_iu8_w32_gfx12", "exact", dict(clamp=True)),
    ("mfma_f32_16x16x32_bf8_fp8", None, {}),  # gfx942 FNUZ, fused groups of 16, dense A, 64 lanes
    ("mfma_f32_32x32x16_bf16", None, {}),  # gfx950 doubled K
    ("mfma_i32_16x16x32_i8", None, {}),  # the `long` operands
    ("wmma_f32_16x16x16_bf16_w64", "exact", {}),  # RDNA3: wave64, A/B replicated; the Exact kernel on bf16
    ("wmma_i32_16x16x16_iu4_w32", None, dict(clamp=True)),  # RDNA3: one final saturation
]
DENSE_SLOW = [c for c in DENSE_ALL if c not in DENSE_CORE] + [
    ("wmma_f32_16x16x16_f16_w32_gfx12", None, dict(float_round=False)),
    ("wmma_f32_16x16x16_fp8_fp8_w32_gfx12", "cdna3", dict(vec3=False, reload=True, float_combine=False)),
    ("wmma_f32_16x16x16_bf16_w32_gfx12", "cdna3", dict(vec3=False, float_combine=True)),
    ("wmma_f16_16x16x16_f16_w32_gfx12", models.Gfx12Dot4(fp16_ovfl=True), {}),
    ("wmma_bf16_16x16x16_bf16_w32_gfx12", models.Gfx12Dot4(bf16_narrowing="nearest"), {}),
]


def _check(builtin, model, kw):
    spec = lookup(builtin)
    kw = dict(kw)
    clamp = kw.pop("clamp", False)
    opts = PAL.replace(pallas=PAL.pallas.replace(**kw))
    m_obj = models.resolve(model, context(spec, clamp), spec.default_model)
    assert pallas.kernel_for(spec, m_obj, opts)
    for a, p, b, c in cases(spec, clamp):
        ref = run(paths.matrix_path, XLA, spec, m_obj, clamp, a, p, b, c)
        got = run(pallas.matrix_path, opts, spec, m_obj, clamp, a, p, b, c)
        # called at the top level, the kernel's program compiled at the options' effort ('fast')
        assert effort.compiler_options("cpu", "fast") in pallas.matrix_path._jits
        bad = np.argwhere(ref.astype(np.uint32) != got.astype(np.uint32))
        assert bad.size == 0, (
            f"{builtin} {m_obj.describe()} {kw}: {len(bad)} of {ref.size} outputs differ, first at {tuple(bad[0])}: "
            f"xla {int(ref[tuple(bad[0])]) & 0xFFFFFFFF:#010x} pallas {int(got[tuple(bad[0])]) & 0xFFFFFFFF:#010x}")


def _id(case):
    b, m, o = case
    label = m if m is None or isinstance(m, str) else m.describe().replace(" ", "")
    return f"{b}-{label}-{'-'.join(f'{k}={v}' for k, v in o.items()) or 'default'}"


@pytest.mark.parametrize("case", CORE, ids=_id)
def test_bits_core(case):
    _check(*case)


@pytest.mark.slow
@pytest.mark.parametrize("case", SLOW, ids=_id)
def test_bits_slow(case):
    _check(*case)


@pytest.mark.parametrize("case", DENSE_CORE, ids=_id)
def test_dense_bits_core(case):
    _check(*case)


@pytest.mark.slow
@pytest.mark.parametrize("case", DENSE_SLOW, ids=_id)
def test_dense_bits_slow(case):
    _check(*case)


def test_dense_grid_covers_every_row_and_kernel_model():
    """DENSE_ALL holds every dense row with every preset that has a kernel there, and the
    default and slow sets together hold DENSE_ALL."""
    from jwmma.isa.table import BUILTINS
    from jwmma.models.presets import names

    want = set()
    for name, spec in BUILTINS.items():
        if not spec.dense or spec.scaled:  # the block-scaled rows' kernel: test_pallas_scaled.py
            continue
        for preset in names(integer=spec.integer):
            try:
                m_obj = models.resolve(preset, context(spec), spec.default_model)
                if pallas.family(m_obj) is not None and pallas.kernel_for(spec, m_obj, PAL):
                    want.add((name, m_obj))
            except ValueError:  # the model does not apply to the row, or has no kernel there
                continue
    assert len({b for b, _ in want}) == (11 + len(_MF) + len(_M8) + len(_MI) + len(_W3F) + len(_W3I) + len(_M12)
                                         + len(_W3H))
    have = {(b, models.resolve(m, context(lookup(b)), lookup(b).default_model)) for b, m, _ in DENSE_ALL}
    assert want <= have, sorted(str(x) for x in want - have)
    assert all(c in DENSE_CORE or c in DENSE_SLOW for c in DENSE_ALL)


def _draw(rng, shape, lo=-12, hi=12):
    """x = N(0, 1) * 2**U{lo..hi-1} elementwise (float64), the draw of issue #20."""
    return rng.standard_normal(shape) * 2.0 ** rng.integers(lo, hi, shape)


def _sprinkle(rng, x, rate):
    """NaN, +-Inf and -0 at random places (a fraction ``rate``) of a float64 array."""
    x = x.copy()
    where = rng.random(x.shape) < rate
    x[where] = rng.choice(np.array([np.nan, np.inf, -np.inf, -0.0]), where.sum())
    return x


#: per element type: (smallest exponent of the wide draw, the exponents of the "tiny" block)
_WIDE = {"f16": (-24, (-14, -10)), "bf16": (-70, (-75, -65)), "fp8": (-9, (-9, -6)), "bf8": (-16, (-16, -12))}


def _dense_operands(builtin, seed):
    """(a, b, c, gemm keywords) of an odd-shaped batched GEMM of a dense builtin: wide
    exponents; A rows 30-36 and B columns 38-44 tiny, so that their products (and C there) are
    down at the accumulator's subnormals where the formats reach them; NaN/Inf/-0 in A rows
    0-5, B columns 0-5 and C; integers at their limits with C next to INT32_MIN/MAX (clamp)."""
    import ml_dtypes

    rng = np.random.default_rng(seed)
    spec = lookup(builtin)
    (bt, m, k, n) = (2, 37, 53, 45)
    if spec.integer:
        a = rng.integers(0, 16 if "iu4" in builtin else 256, (bt, m, k)).astype(np.uint8)
        b = rng.integers(-8 if "iu4" in builtin else -128, 8 if "iu4" in builtin else 128, (bt, k, n))
        c = np.where(rng.random((bt, m, n)) < 0.5, 2**31 - 1, -(2**31)) - rng.integers(-2**12, 2**12, (bt, m, n))
        kw = dict(a_neg=False, b_neg=True, clamp=True)
        return a, b.astype(np.int8), np.clip(c, -(2**31), 2**31 - 1).astype(np.int32), kw
    dt = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "fp8": ml_dtypes.float8_e4m3fn,
          "bf8": ml_dtypes.float8_e5m2, "f32": np.float32}
    (lo_a, tiny_a), (lo_b, tiny_b) = _WIDE[spec.a_type], _WIDE[spec.b_type]
    a = _draw(rng, (bt, m, k), lo_a, 8)
    b = _draw(rng, (bt, k, n), lo_b, 8)
    c = _draw(rng, (bt, m, n), -12, 8)
    a[:, 30:] = _draw(rng, (bt, m - 30, k), *tiny_a)
    b[:, :, 38:] = _draw(rng, (bt, k, n - 38), *tiny_b)
    c[:, 30:, 38:] = _draw(rng, (bt, m - 30, n - 38), tiny_a[0] + tiny_b[0] - 4, tiny_a[0] + tiny_b[0] + 2)
    a[:, :, 5] = 0.0  # exact zeros next to the specials
    a[:, :6] = _sprinkle(rng, a[:, :6], 1 / 8)
    b[:, :, :6] = _sprinkle(rng, b[:, :, :6], 1 / 8)
    c = _sprinkle(rng, c, 1 / 64)
    return a.astype(dt[spec.a_type]), b.astype(dt[spec.b_type]), c.astype(dt[spec.c_type]), {}


DENSE_GEMM = [
    ("wmma_f32_16x16x16_bf16_w32_gfx12", None),
    ("wmma_f16_16x16x16_f16_w32_gfx12", None),
    ("wmma_i32_16x16x16_iu8_w32_gfx12", None),
    pytest.param("wmma_bf16_16x16x16_bf16_w32_gfx12", None, marks=pytest.mark.slow),
    pytest.param("wmma_f32_16x16x16_fp8_bf8_w32_gfx12", None, marks=pytest.mark.slow),
    pytest.param("wmma_f32_16x16x16_bf16_w32_gfx12", "cdna3", marks=pytest.mark.slow),
    pytest.param("wmma_f32_16x16x16_f16_w32_gfx12", "exact", marks=pytest.mark.slow),
    pytest.param("wmma_bf16_16x16x16_bf16_w32_gfx12", "fma_chain_k", marks=pytest.mark.slow),
    pytest.param("wmma_i32_16x16x32_iu4_w32_gfx12", None, marks=pytest.mark.slow),
]


@pytest.mark.parametrize("builtin,model", DENSE_GEMM)
def test_dense_gemm_odd_shapes_batch(builtin, model):
    """`jwmma.gemm` of a dense builtin, batch 2 x 37 x 53 x 45 (M, K, N no tile multiples):
    backend='pallas' (interpret mode) gives backend='xla''s bits, NaN payloads included."""
    a, b, c, kw = _dense_operands(builtin, seed=hash(builtin) % 1000)
    kw = dict(kw, builtin=builtin, model=model)
    ref = np.asarray(jwmma.gemm(a, b, c, backend="xla", **kw))
    got = np.asarray(jwmma.gemm(a, b, c, options=Options(backend="pallas", pallas=PallasOptions(interpret=True)),
                                **kw))
    assert ref.shape == got.shape == (2, 37, 45)
    bits = lambda x: x.view(np.uint32 if x.dtype.itemsize == 4 else np.uint16)  # noqa: E731
    np.testing.assert_array_equal(bits(ref), bits(got))
    spec = lookup(builtin)
    if not spec.integer:  # the data reaches what the docstring says
        f = ref.astype(np.float32)
        assert np.isnan(f).any() and np.isinf(f).any() and np.isfinite(f).mean() > 0.5
        fc = FLOAT_FORMATS.get(spec.c_type, F32)
        sub = (np.abs(f) < 2.0 ** (fc.min_exp)) & (f != 0)
        assert sub.any() or (spec.c_type == "f32" and spec.a_type != "bf16")
    else:
        assert (ref == 2**31 - 1).any() and (ref == -(2**31)).any()


def test_dense_wmma_pallas_issue20_repro():
    """Issue #20 defect 3: this GEMM raised 'inconsistent operands: a (64, 256), b (256, 48),
    c (64, 48)' on backend='pallas' (and so on 'auto' on a GPU); now XLA's bits."""
    import ml_dtypes

    rng = np.random.default_rng(1011)
    a = _draw(rng, (64, 256)).astype(ml_dtypes.bfloat16)
    b = _draw(rng, (256, 48)).astype(ml_dtypes.bfloat16)
    c = _draw(rng, (64, 48)).astype(np.float32)
    kw = dict(builtin="wmma_f32_16x16x16_bf16_w32_gfx12")
    ref = np.asarray(jwmma.gemm(a, b, c, backend="xla", **kw))
    got = np.asarray(jwmma.gemm(a, b, c, options=jwmma.Options(backend="pallas",
                                                              pallas=jwmma.PallasOptions(interpret=True)), **kw))
    np.testing.assert_array_equal(ref.view(np.uint32), got.view(np.uint32))
    assert np.isfinite(ref).all() and (ref != 0).all()


def test_dense_cases_are_adversarial():
    """The dense codes hold NaN/Inf, subnormals, zero columns and exact cancellations, and
    the reference reaches NaN, Inf, subnormal and zero results."""
    spec = lookup("wmma_f32_16x16x16_bf16_w32_gfx12")
    drawn = cases(spec, False)
    a, p, b, c = (np.concatenate(x) for x in zip(*drawn))
    assert a.shape == (3 * M, 2 * spec.k) and b.shape == (6 * spec.k, N) and not p.any()
    assert ((a & 0x7F80) == 0x7F80).any() and ((b & 0x7F80) == 0x7F80).any()
    assert (a == 0x8000).any() and ((a & 0x7F80) == 0).any()
    ref = np.concatenate([run(paths.matrix_path, XLA, spec, models.Gfx12Dot4(), False, *x)
                          for x in drawn]).view(np.float32)
    assert np.isnan(ref).any() and np.isinf(ref).any() and (ref == 0).any()
    assert ((np.abs(ref) < 2.0**-126) & (ref != 0)).any()


def test_cases_are_adversarial():
    """The data holds what the module doc promises (a test that could not fail proves nothing)."""
    spec = lookup("smfmac_f32_16x16x128_fp8_fp8")
    a, p, b, c = gemm_codes(spec, M, N, 2 * spec.k, seed=1)
    assert ((a & 0x7F) == 0x7F).any() and ((b & 0x7F) == 0x7F).any()  # NaN codes
    assert (((a >> 3) & 0xF) == 0).any()  # zeros / subnormals
    blocks = p.reshape(M, -1, 2)
    assert (blocks[..., 0] == blocks[..., 1]).any()  # duplicate positions
    ref = run(paths.matrix_path, XLA, spec, models.CDNA3(), False, a, p, b, c).view(np.float32)
    assert np.isnan(ref).any() and np.isfinite(ref).mean() > 0.5


def test_gemm_with_backend_pallas_pads_and_ignores_x64():
    """`jwmma.gemm(..., backend='pallas')` on value arrays whose shapes are not tile multiples,
    with and without the user's jax_enable_x64; an eager call of a new shape is one program
    (conversion, padding, kernel and D's conversion: `paths.kernel_gemm`), pruning included."""
    from jax import monitoring

    programs = []
    monitoring.register_event_duration_secs_listener(
        lambda event, d, **kw: programs.append(event) if event == "/jax/core/compile/backend_compile_duration" else None)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((40, 70)).astype(np.float32)
    dense = a.astype(np.float16)
    a[:, 1::4] = a[:, 3::4] = 0  # 2:4 sparse
    a = a.astype(np.float16)
    b = rng.standard_normal((70, 50)).astype(np.float16)
    c = rng.standard_normal((40, 50)).astype(np.float32)
    kw = dict(builtin="swmmac_f32_16x16x32_f16_w32")
    ref = np.asarray(jwmma.gemm(a, b, c, backend="xla", **kw))
    opts = Options(backend="pallas", pallas=PallasOptions(tm=16, tn=32))
    before = len(programs)
    got = np.asarray(jwmma.gemm(a, b, c, options=opts, **kw))
    assert len(programs) - before == 1
    np.testing.assert_array_equal(ref.view(np.uint32), got.view(np.uint32))
    before = len(programs)
    pruned = np.asarray(jwmma.gemm(dense, b, c, options=opts, prune=True, **kw))
    assert len(programs) - before == 1
    np.testing.assert_array_equal(pruned.view(np.uint32),
                                  np.asarray(jwmma.gemm(dense, b, c, backend="xla", prune=True, **kw)).view(np.uint32))
    with jax.enable_x64(True):
        got64 = np.asarray(jwmma.gemm(a, b, c, options=opts, **kw))
    np.testing.assert_array_equal(ref.view(np.uint32), got64.view(np.uint32))


def test_options_resolve_and_validate():
    cpu = resolve(Options(platform="cpu"))
    assert cpu.backend == "xla" and cpu.pallas.auto and cpu.pallas.interpret
    gpu = resolve(Options(platform="gpu"))
    assert gpu.backend == "pallas" and gpu.pallas.auto and gpu.pallas.interpret is False
    assert resolve(Options(backend="pallas", platform="gpu")).pallas.auto is False
    assert hash(PAL) == hash(dataclasses.replace(PAL)) and PAL != XLA
    spec = lookup("smfmac_f32_16x16x64_f16")
    assert pallas.kernel_for(spec, models.CDNA3(), gpu)
    assert not pallas.kernel_for(lookup("smfmac_i32_16x16x128_i8"), models.IntegerDot(), gpu)  # auto: untimed
    assert pallas.kernel_for(lookup("smfmac_i32_16x16x128_i8"), models.IntegerDot(),
                             resolve(Options(backend="pallas", platform="gpu")))
    assert not pallas.kernel_for(spec, models.CDNA3(), cpu)
    t = pallas.tiling(lookup("smfmac_f32_16x16x128_fp8_fp8"), models.CDNA3(), gpu.pallas)
    assert (t.tm, t.tn, t.num_warps, t.vec3, t.float_combine, t.interpret) == (8, 64, 2, True, True, False)
    mx = pallas.tiling(lookup("mfma_scale_f32_16x16x128_f8f6f4"), models.BlockScaled(), gpu.pallas)
    assert (mx.tm, mx.tn, mx.num_warps, mx.group_loop) == (8, 32, 2, True)  # no spill (RESULTS.md)
    ex16 = pallas.tiling(lookup("smfmac_f32_16x16x64_bf16"), models.Exact(), gpu.pallas)
    ex8 = pallas.tiling(lookup("smfmac_f32_16x16x128_fp8_fp8"), models.Exact(), gpu.pallas)
    assert (ex16.tm, ex16.tn, ex16.num_warps, ex8.tm, ex8.tn) == (16, 32, 4, 32, 64)  # 16-bit exact: no spill

    def tile(name, model):
        t = pallas.tiling(lookup(name), model, gpu.pallas)
        return t.tm, t.tn, t.num_warps

    # the sparse gfx12 16-bit kernels ran faster at 8 x 32 x 2 on an H100, the 16-bit fused groups
    # at 4 x 64 x 2 (sparse f16 and bf16, the dense f16 MFMA); the dense f16 WMMA and the dense
    # bf16 MFMA keep their tiles (a 'dense' key): RESULTS.md
    assert tile("swmmac_f32_16x16x32_f16_w32", models.Gfx12Dot4()) == (8, 32, 2)
    assert tile("wmma_f32_16x16x16_f16_w32_gfx12", models.Gfx12Dot4()) == (16, 64, 4)
    assert tile("smfmac_f32_16x16x64_bf16", models.CDNA3()) == (4, 64, 2)
    assert tile("smfmac_f32_16x16x64_f16", models.CDNA3()) == (4, 64, 2)
    assert tile("mfma_f32_16x16x16f16", models.CDNA3()) == (4, 64, 2)
    assert tile("mfma_f32_16x16x16bf16_1k", models.CDNA3()) == (8, 32, 2)
    # direct calls keep the 16-bit fused tiles they were timed at (a 'call' key)
    for name, want in (("smfmac_f32_16x16x64_f16", (8, 128, 4)), ("mfma_f32_16x16x16f16", (8, 128, 4)),
                       ("smfmac_f32_16x16x64_bf16", (8, 32, 2))):
        t = pallas.tiling(lookup(name), models.CDNA3(), gpu.pallas, call=True)
        assert (t.tm, t.tn, t.num_warps) == want, name
    for bad, err in ((dict(tm=24), ValueError), (dict(num_stages=0), ValueError), (dict(interpret="yes"), TypeError),
                     (dict(chain_run=3), ValueError), (dict(group_loop=1), TypeError)):
        with pytest.raises(err, match=next(iter(bad))):
            PallasOptions(**bad)
    fp8 = lookup("smfmac_f32_16x16x128_fp8_fp8")  # rocjitsu's fp8 chain: runs of 4 columns
    chain = models.resolve("fma_chain", context(fp8), fp8.default_model)
    with pytest.raises(ValueError, match="at least 2"):
        pallas.make_kernel(fp8, chain, tiling=pallas.tiling(fp8, chain, PallasOptions(chain_run=1)))
    for run in (2, 4, 8, 16, 32):  # runs of 4 at a stride of 8: one pattern repeated at every size
        pallas.make_kernel(fp8, chain, tiling=pallas.tiling(fp8, chain, PallasOptions(chain_run=run)))
    with pytest.raises(TypeError, match="pallas"):
        Options(pallas={"tm": 16})


def test_model_without_kernel_raises_or_falls_back():
    spec = lookup("smfmac_f32_16x16x128_fp8_fp8")
    other = _foreign_model()
    with pytest.raises(ValueError, match="no kernel for model"):
        pallas.kernel_for(spec, other, resolve(Options(backend="pallas", platform="gpu")))
    assert not pallas.kernel_for(spec, other, resolve(Options(platform="gpu")))


def test_rocjitsu_chain_has_a_kernel():
    """Every `FMAChain` runs on the Pallas backend, rocjitsu's chain ('fma_chain': register order
    on the CDNA4 fp8/bf8 rows, bf16 truncation, NaN words) included, and 'auto' on a GPU picks
    it (its kernel gave the CPU's bits on an H200 with the crosscheck's adversarial data)."""
    gpu, explicit = resolve(Options(platform="gpu")), resolve(Options(backend="pallas", platform="gpu"))
    rocjitsu = models.PRESETS["fma_chain"][0]
    assert (rocjitsu.order, rocjitsu.narrowing, rocjitsu.nan) == ("register", "truncate", "propagate")
    for name in ("smfmac_f32_16x16x128_fp8_fp8", "smfmac_f32_32x32x64_bf8_fp8", "swmmac_bf16_16x16x32_bf16_w32",
                 "wmma_f16_16x16x16_f16_w32_gfx12", "smfmac_f32_16x16x64_bf16"):
        spec = lookup(name)
        assert pallas.kernel_for(spec, rocjitsu, explicit) and pallas.kernel_for(spec, rocjitsu, gpu)
    from jwmma.backends.pallas.fma_chain import chain_runs

    order = lookup("smfmac_f32_16x16x128_fp8_fp8").chain_order
    assert chain_runs(order) == (2, tuple(order[0::2])) and chain_runs(order)[1][:4] == (0, 2, 8, 10)
    with pytest.raises(ValueError, match="runs of 2"):
        chain_runs((1, 0, 2, 3))
    from jwmma.backends.pallas.fma_chain import chain_segments

    assert chain_segments(order, 16) == ((0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27), (0, 4, 32, 36))
    assert chain_segments((0, 1, 2, 3, 6, 7, 4, 5), 2) == ((0, 1), (0, 2, 6, 4))
    for bad, n in (((0, 1, 2, 3, 6, 7, 4, 5), 4), ((0, 1, 2, 3), 3), ((2, 3, 0, 1), 1), ((1, 2, 3, 4), 2)):
        with pytest.raises(ValueError, match="pattern|segments"):
            chain_segments(bad, n)


def _chain_nan_case(builtin, seed=9):
    """(a, pos, b, c) codes, M = 32, N = 64, two K steps of plain values, with NaN words that
    only the chain's rules decide (see `test_rocjitsu_chain_nan_words`)."""
    spec = lookup(builtin)
    a, p, b, c = (x.copy() for x in gemm_codes(spec, 32, 64, 2 * spec.k, seed=seed, corner=False))
    fa, fb = spec.a_format, spec.b_format
    nan_a = (fa.qnan | (1 << (fa.bits - 1)), fa.qnan & ~(1 << (fa.bits - 1)))  # -NaN, +NaN codes
    return spec, a, p, b, c, nan_a, fb


def test_rocjitsu_chain_nan_words():
    """NaN results of `fma_chain` (NUMERICS.md 8.3), Pallas = XLA = what the rules give by hand:
    the NaN factor of the last step that has one wins (sign | 0x7FC00000), in rocjitsu's register
    order on the 16x16x128 fp8 row (step 4 reads compressed column 8, step 16 column 4), else
    C's NaN quieted with its payload, else 0xFFC00000 (Inf * 0); a bf16 C NaN truncates, an f16
    one keeps its top payload bits."""
    rocjitsu = models.PRESETS["fma_chain"][0]
    spec, a, p, b, c, (neg, pos_), fb = _chain_nan_case("smfmac_f32_16x16x128_bf8_bf8")
    a[0, 8], a[0, 4] = neg, pos_  # register order: column 8 (-) at step 4, column 4 (+) at step 16
    a[1, 4], a[1, 8] = neg, pos_
    c[2] = np.int64(0xFFA01234).astype(np.int32)  # a signalling NaN with a payload, no NaN factor
    a[3, 0] = 0  # 0 * Inf at step 0 of output (3, 7) ...
    b[p[3, 0], 7] = ((1 << fb.ebits) - 1) << fb.mbits
    a[4, 0], a[4, 2] = 0, pos_  # ... and then a NaN factor at step 2 (column 2)
    b[p[4, 0], 7] = ((1 << fb.ebits) - 1) << fb.mbits
    c[5] = np.int64(0x7F800001).astype(np.int32)
    a[5, 40] = neg  # C's NaN, then a NaN factor: the factor wins
    args = (spec, rocjitsu, False, a, p, b, c)
    ref = run(paths.matrix_path, XLA, *args).view(np.uint32)
    got = run(pallas.matrix_path, PAL, *args).view(np.uint32)
    np.testing.assert_array_equal(ref, got)
    assert (ref[0] == 0x7FC00000).all() and (ref[1] == 0xFFC00000).all()
    assert (ref[2] == 0xFFE01234).all() and ref[3, 7] == 0xFFC00000 and (ref[4] == 0x7FC00000).all()
    assert (ref[5] == 0xFFC00000).all()
    compressed = models.FMAChain(narrowing="truncate", nan="propagate")  # the order decides rows 0, 1
    ref_k = run(paths.matrix_path, XLA, spec, compressed, False, a, p, b, c).view(np.uint32)
    assert (ref_k[0] == 0xFFC00000).all() and (ref_k[1] == 0x7FC00000).all()


def test_rocjitsu_chain_order_rounds():
    """Register order on both paths: wide-exponent fp8 factors make the f32 chain round, so the
    order shows in the bits; a subnormal C sends the tile of columns 64-127 through the
    float64 emulation (Triton; Mosaic GPU starts from a stand-in instead, test_pallas_mosaic.py)
    beside the fast path of columns 0-63. Pallas = XLA, and the compressed
    order gives other bits."""
    spec = lookup("smfmac_f32_16x16x128_fp8_fp8")
    rng = np.random.default_rng(21)
    a, p, b, c = (x.copy() for x in gemm_codes(spec, 32, 128, 2 * spec.k, seed=21, corner=False))
    c[0, 64] = 1  # the smallest subnormal

    def wide(shape):  # normal E4M3FN codes of any exponent (no NaN: not e = 15 with m = 7)
        e, m, sg = rng.integers(1, 16, shape), rng.integers(0, 8, shape), rng.integers(0, 2, shape)
        return ((sg << 7) | (e << 3) | np.where(e == 15, np.minimum(m, 6), m)).astype(np.int32)

    a, b = wide(a.shape), wide(b.shape)
    rocjitsu = models.PRESETS["fma_chain"][0]
    ref = run(paths.matrix_path, XLA, spec, rocjitsu, False, a, p, b, c).view(np.uint32)
    np.testing.assert_array_equal(ref, run(pallas.matrix_path, PAL, spec, rocjitsu, False, a, p, b, c).view(np.uint32))
    ref_k = run(paths.matrix_path, XLA, spec, models.FMAChain(narrowing="truncate", nan="propagate"), False,
                 a, p, b, c).view(np.uint32)
    assert (ref != ref_k)[:, :64].mean() > 0.05 and (ref != ref_k)[:, 64:].mean() > 0.05


@pytest.mark.parametrize("builtin,c_nan,want", [
    ("swmmac_bf16_16x16x32_bf16_w32", 0x7F81, 0x7FC1),  # quieted, truncated
    pytest.param("swmmac_f16_16x16x32_f16_w32", 0xFC01, 0xFE01, marks=pytest.mark.slow),  # quieted, payload kept
])
def test_rocjitsu_chain_16bit_nan_c(builtin, c_nan, want):
    """A 16-bit C NaN with a payload through `fma_chain` (no NaN factor): Pallas = XLA = the rule."""
    spec, a, p, b, c, _, _ = _chain_nan_case(builtin)
    c[0] = c_nan
    args = (spec, models.PRESETS["fma_chain"][0], False, a, p, b, c)
    ref = run(paths.matrix_path, XLA, *args)
    np.testing.assert_array_equal(ref, run(pallas.matrix_path, PAL, *args))
    assert (ref[0] == want).all(), hex(int(ref[0, 0]))


def _foreign_model():
    """A model of no kernel family (its own class, not derived from one that has a kernel)."""

    @dataclasses.dataclass(frozen=True)
    class Foreign(models.Model):
        name = "foreign"

        def accumulate(self, a, b, c, ctx, options=None):  # pragma: no cover - never run
            raise NotImplementedError

    return Foreign()


@pytest.mark.parametrize("builtin,model", [
    ("smfmac_f32_16x16x128_fp8_fp8", None),
    pytest.param("swmmac_f32_16x16x32_f16_w32", None, marks=pytest.mark.slow),
    pytest.param("smfmac_f32_16x16x128_fp8_fp8", "exact", marks=pytest.mark.slow),
    pytest.param("smfmac_f32_16x16x128_fp8_fp8", "fma_chain_k", marks=pytest.mark.slow),
    pytest.param("swmmac_i32_16x16x32_iu8_w32", None, marks=pytest.mark.slow),
    # dense WMMA: the driver's dense reading (no positions, two candidate rows per block)
    ("wmma_f32_16x16x16_f16_w32_gfx12", None),
    pytest.param("wmma_bf16_16x16x16_bf16_w32_gfx12", None, marks=pytest.mark.slow),
    pytest.param("wmma_f32_16x16x16_fp8_fp8_w32_gfx12", "cdna3", marks=pytest.mark.slow),  # 3-D kernel
    pytest.param("wmma_f32_16x16x16_bf16_w32_gfx12", "cdna3", marks=pytest.mark.slow),  # 2-D integer kernel
    pytest.param("wmma_f32_16x16x16_bf16_w32_gfx12", "exact", marks=pytest.mark.slow),
    pytest.param("wmma_f16_16x16x16_f16_w32_gfx12", "fma_chain_k", marks=pytest.mark.slow),
    pytest.param("wmma_i32_16x16x32_iu4_w32_gfx12", None, marks=pytest.mark.slow),
    ("smfmac_f32_16x16x128_fp8_fp8", "fma_chain"),  # register order, NaN words
    pytest.param("swmmac_bf16_16x16x32_bf16_w32", "fma_chain", marks=pytest.mark.slow),
    pytest.param("wmma_f32_16x16x16_bf16_w32_gfx12", "fma_chain", marks=pytest.mark.slow),
])
def test_triton_lowering_without_gpu(builtin, model):
    """The kernel lowers to verified Triton IR on this CPU (jax.export for 'cuda': Pallas falls
    back to compute capability 9.0); catches primitives Triton lacks and non-power-of-two loads.
    Two K steps: A (64, 2 Kc) (dense builtins: Kc = K), B (2 K, 128)."""
    lowering = pytest.importorskip("jax._src.pallas.triton.lowering")
    spec = lookup(builtin)
    m_obj = models.resolve(model, context(spec), spec.default_model)
    opts = resolve(Options(backend="pallas", platform="gpu"))
    found = []
    orig = lowering.lower_jaxpr_to_triton_module

    def checked(*args, **kwargs):
        res = orig(*args, **kwargs)
        assert res.module.operation.verify()
        found.append(res.module.operation.get_asm(large_elements_limit=16))
        return res

    args = (jnp.zeros((64, 2 * spec.kc), jnp.int32), jnp.zeros((64, 2 * spec.kc), jnp.int32),
            jnp.zeros((2 * spec.k, 128), jnp.int32), jnp.zeros((64, 128), jnp.int32))
    fn = jax.jit(lambda *x: pallas.matrix_path(*x, spec=spec, model=m_obj, options=opts))
    lowering.lower_jaxpr_to_triton_module = checked
    try:
        with x64_scope(), abstract_gpu(), pallas.quiet_triton():
            jax.export.export(fn, platforms=("cuda",), disabled_checks=[
                jax.export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")])(*args)
    finally:
        lowering.lower_jaxpr_to_triton_module = orig
    assert len(found) == 1 and "tt.load" in found[0]
    if m_obj.describe() == models.CDNA3().describe() and spec.a_format.bits == 8:
        # the aligned products' truncation is one PTX conversion, not Pallas's clamped fptosi
        assert "cvt.rzi.s32.f32" in found[0]


@pytest.mark.parametrize("builtin,model", [("smfmac_f32_16x16x64_bf16", "exact"), ("smfmac_f32_16x16x64_f16", None)])
def test_a_users_jit_lowers_the_call_kernels_without_64_bit_requests(builtin, model):
    """Under a user's jit a call's kernel lowers when the user's program compiles, outside
    jwmma's x64 scope, and Pallas Triton traces some lowering rules then (the sign helper of
    integer floor division): no int64 may be asked for there, which JAX would truncate to int32
    with a warning. The 16-bit `exact` kernel's placing of C on the limbs once did."""
    pytest.importorskip("jax._src.pallas.triton.lowering")
    spec = lookup(builtin)
    regs = [jnp.zeros((2, spec.lanes, op.n), op.dtype) for op in (spec.a, spec.b, spec.c)]
    idx = jnp.zeros((2, spec.lanes), jnp.int32)
    opts = Options(backend="pallas", platform="gpu")
    fn = jax.jit(lambda a, b, c, i: getattr(jwmma, builtin)(a, b, c, i, model=model, options=opts))
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with abstract_gpu(), pallas.quiet_triton():
            jax.export.export(fn, platforms=("cuda",), disabled_checks=[
                jax.export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")])(*regs, idx)
    assert not [str(w.message) for w in seen if "int64" in str(w.message)]


def test_the_triton_backend_is_still_there():
    """jwmma's kernels lower to Pallas Triton by default, which JAX 0.11 deprecates. The day a
    JAX removes it this test fails loudly (make the Mosaic GPU lowering the default, once a GPU
    has timed it); until then backend='auto' falls back to XLA without it (`kernel_for`), and
    jwmma's own lowering calls filter exactly the deprecation warning."""
    assert pallas.triton_available(), (
        "this JAX has no Pallas Triton backend: jwmma's GPU kernels must default to their Mosaic GPU lowering "
        "(PallasOptions(lowering='mosaic'); backend='auto' runs XLA meanwhile, the same bits)")
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pallas.quiet_triton():
            warnings.warn(pallas.TRITON_DEPRECATION + " and will be removed", DeprecationWarning)
            warnings.warn("another deprecation", DeprecationWarning)
    assert [str(w.message) for w in seen] == ["another deprecation"]
