"""`jwmma.gemm` and `jwmma.kernel` for the sibling builtins (issue #13).

Dense WMMA: gemm takes an ordinary dense A (no 2:4 rule, no positions) and under `exact` equals
a float64 / Python-integer reference (operands chosen so that every f32 partial sum is exact:
the per-step rounding then rounds nothing); the register path equals the matrix path under the
defaults; a hand-written per-lane kernel (loaders from BUILTINS_MORE.md 2.2) equals gemm.
CDNA3 SMFMAC: gemm on both targets takes that target's fp8 dtypes, and both paths agree.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import jwmma
from jwmma import kernel


def dyadic(rng, shape, dtype, scale=8):
    """Small dyadic values (multiples of 1/4 in [-scale, scale]): products and sums of a few
    hundred of them are exact in f32 and f64."""
    return (rng.integers(-4 * scale, 4 * scale + 1, shape) / 4).astype(dtype)


@pytest.mark.parametrize("name, dt, acc", [
    ("wmma_f32_16x16x16_f16_w32_gfx12", np.float16, np.float32),
    pytest.param("wmma_f32_16x16x16_bf16_w32_gfx12", ml_dtypes.bfloat16, np.float32, marks=pytest.mark.slow),
    pytest.param("wmma_f32_16x16x16_fp8_bf8_w32_gfx12", ml_dtypes.float8_e4m3fn, np.float32, marks=pytest.mark.slow),
])
def test_dense_gemm_exact_equals_float64(name, dt, acc, rng):
    spec = jwmma.BUILTINS[name]
    m, n, k = 40, 24, 56  # padding in every dimension, 4 K steps
    a = dyadic(rng, (m, k), dt, 4)
    b = dyadic(rng, (k, n), dt if spec.b_type == spec.a_type else ml_dtypes.float8_e5m2, 4)
    c = dyadic(rng, (m, n), acc)
    want = (a.astype(np.float64) @ b.astype(np.float64) + c.astype(np.float64)).astype(acc)
    for path in ("matrix", "registers"):
        got = np.asarray(jwmma.gemm(a, b, c, builtin=name, model="exact", path=path))
        assert got.dtype == acc and np.array_equal(got, want), path


def test_dense_integer_gemm_equals_python_ints(rng):
    name = "wmma_i32_16x16x16_iu8_w32_gfx12"
    m, n, k = 20, 18, 40
    a = rng.integers(0, 256, (m, k)).astype(np.int32)  # unsigned A (a_neg=False), signed B
    b = rng.integers(-128, 128, (k, n)).astype(np.int32)
    c = rng.integers(-(2**31), 2**31, (m, n)).astype(np.int32)
    want = ((a.astype(np.int64) @ b.astype(np.int64) + c + 2**31) % 2**32 - 2**31).astype(np.int32)
    for path in ("matrix", "registers"):
        got = np.asarray(jwmma.gemm(a, b, c, builtin=name, path=path, a_neg=False))
        assert np.array_equal(got, want), path


@pytest.mark.parametrize("name, kw", [
    ("wmma_f16_16x16x16_f16_w32_gfx12", {}),
    ("wmma_i32_16x16x32_iu4_w32_gfx12", {"clamp": True, "b_neg": False}),
    pytest.param("smfmac_f32_16x16x64_fp8_bf8", {}, marks=pytest.mark.slow),
    pytest.param("smfmac_f32_16x16x64_fp8_bf8", {"target": "gfx950"}, marks=pytest.mark.slow),
    pytest.param("wmma_bf16_16x16x16_bf16_w32_gfx12", {}, marks=pytest.mark.slow),
    pytest.param("smfmac_f32_32x32x16_bf16", {"abid": 3}, marks=pytest.mark.slow),
])
def test_register_path_equals_matrix_path(name, kw, rng):
    spec = jwmma.isa.table.lookup(name, kw.get("target"))
    m, n, k = spec.m + 3, spec.n + 5, 2 * spec.k + 8
    if spec.integer:
        a = rng.integers(-8, 8, (m, k)).astype(np.int32)
        b = rng.integers(0, 16, (k, n)).astype(np.int32)
        c = rng.choice(np.array([2**31 - 1, -(2**31), 0, 2**31 - 300], np.int64), (m, n)).astype(np.int32)
    else:
        a = (rng.standard_normal((m, k)) * 4).astype(spec.a_format.dtype)
        b = (rng.standard_normal((k, n)) * 4).astype(spec.b_format.dtype)
        c = rng.standard_normal((m, n)).astype(spec.c_format.dtype)
    prune = not spec.dense
    d_m = np.asarray(jwmma.gemm(a, b, c, builtin=name, prune=prune, **kw))
    d_r = np.asarray(jwmma.gemm(a, b, c, builtin=name, prune=prune, path="registers", **kw))
    assert np.array_equal(d_m.view(np.uint8), d_r.view(np.uint8))


def test_dense_gemm_refuses_sparse_inputs(rng):
    name = "wmma_f32_16x16x16_f16_w32_gfx12"
    a = np.ones((16, 16), np.float16)
    b = np.ones((16, 16), np.float16)
    with pytest.raises(ValueError, match="dense"):
        jwmma.gemm(a, b, builtin=name, prune=True)
    with pytest.raises(TypeError, match="dense"):
        jwmma.gemm((a[:, :8], np.zeros((16, 8), np.int32)), b, builtin=name)
    with pytest.raises(ValueError, match="cbsz"):
        jwmma.gemm(a, b, builtin=name, cbsz=1)


def test_gemm_targets_take_their_own_fp8(rng):
    name = "smfmac_f32_16x16x64_fp8_fp8"
    a = np.asarray(jwmma.prune_2_4(np.full((16, 64), 0.5, ml_dtypes.float8_e4m3fnuz)))
    b = np.full((64, 16), 0.5, ml_dtypes.float8_e4m3fnuz)
    assert (np.asarray(jwmma.gemm(a, b, builtin=name, model="exact")) == 32 * 0.25).all()
    with pytest.raises(TypeError, match="float8_e4m3fn\\b"):
        jwmma.gemm(a, b, builtin=name, target="gfx950")
    with pytest.raises(ValueError, match="target"):
        jwmma.gemm(a, b, builtin=name, target="gfx90a")


class WmmaF16Policy:
    """Per-lane loaders of wmma_f32_16x16x16_f16_w32_gfx12 from BUILTINS_MORE.md 2.2: lane L
    holds row / column L % 16; element e is k = 8*(e//4) + 4*(L//16) + e%4 of A and of B."""

    builtin = "wmma_f32_16x16x16_f16_w32_gfx12"

    @staticmethod
    def load_a(sA, warp_m, lane, tk):
        import jax.numpy as jnp
        e = jnp.arange(8)
        k = 8 * (e // 4) + 4 * (lane // 16) + e % 4
        return sA[(warp_m * 16 + lane % 16) * tk + k]

    @staticmethod
    def load_b(sB, warp_n, lane, cta_n):
        import jax.numpy as jnp
        f = jnp.arange(8)
        k = 8 * (f // 4) + 4 * (lane // 16) + f % 4
        return sB[k * cta_n + warp_n * 16 + lane % 16]

    index = staticmethod(kernel.const_index(0))  # dense: the builtin takes no index

    @staticmethod
    def store_c(d, sub_m, sub_n, N, lane):
        import jax.numpy as jnp
        i = 8 * (lane // 16) + jnp.arange(8)
        return (sub_m + i) * N + sub_n + lane % 16, d


def test_kernel_of_a_dense_wmma(rng):
    a = rng.standard_normal((40, 48)).astype(np.float16)
    b = rng.standard_normal((48, 24)).astype(np.float16)
    d = kernel.check(WmmaF16Policy, a, b, waves=(2, 1))
    assert d.shape == (40, 24)
