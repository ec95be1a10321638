"""`jwmma.matmul` (API.md section 9) against references built here from the spec: 2:4 pruning
and the row/tensor quantisation recipe in numpy, rounding by the oracles' integer encoder,
one-step exact products as Fractions, the straight-through gradient as float64 products.
Shapes stay small and few (every new shape compiles a GEMM)."""
from __future__ import annotations

from fractions import Fraction

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jwmma
from oracles import formats as of

FP8 = "smfmac_f32_16x16x128_fp8_fp8"  # K step 128: K <= 128 is one builtin call
MIXED = "smfmac_f32_16x16x128_fp8_bf8"  # A (w) fp8, B (x) bf8
GFX942 = "smfmac_f32_16x16x64_fp8_fp8"  # gfx942: FNUZ fp8


def bits(x):
    x = np.asarray(x)
    return x.view({4: np.uint32, 2: np.uint16, 1: np.uint8}[x.dtype.itemsize])


# ------------------------------------------------------------------ the reference, from the spec
def np_prune(wt):
    """2:4 along the last axis of float64 (N, K): the two largest |values| of every 4 kept, ties
    to the lower position; K padded with zeros to a multiple of 4 and cut back."""
    k = wt.shape[-1]
    pad = -k % 4
    g = np.pad(wt, [(0, 0), (0, pad)]).reshape(wt.shape[0], -1, 4)
    order = np.argsort(-np.abs(g), axis=-1, kind="stable")
    keep = np.zeros(g.shape, bool)
    np.put_along_axis(keep, order[..., :2], True, axis=-1)
    return np.where(keep, g, 0.0).reshape(wt.shape[0], -1)[:, :k]


def encode_all(v, f: of.Fmt):
    """float64 values rounded once (RNE) to ``f``: codes as an array of ``f``'s dtype; FNUZ has
    no -0 (a negative value rounding to zero is +0)."""
    codes = []
    for x in np.asarray(v, np.float64).ravel().tolist():
        if np.isnan(x):
            c = of.qnan(f)
        elif np.isinf(x):
            c = of.inf_bits(f, x < 0) if f.has_inf else of.qnan(f)
        else:
            c = of.encode_fraction(f, Fraction(x))
            if f.nan == "fnuz" and c == 0x80:
                c = 0
        codes.append(c)
    return of.from_codes(np.array(codes).reshape(np.shape(v)), f)


def np_quantise(v, f: of.Fmt, scaling, axis):
    """(values in f's dtype, float32 inverse factors): amax -> largest finite, as jwmma study."""
    v = np.asarray(v, np.float64)
    if scaling == "none":
        return encode_all(v, f), np.ones((1,) * v.ndim, np.float32)
    hi = float(ml_dtypes.finfo(f.dtype).max)
    amax = np.max(np.abs(v), axis=axis if scaling == "row" else None, keepdims=True)
    ok = amax > 0
    s = np.where(ok, hi / np.where(ok, amax, 1.0), 1.0)
    inv = np.where(ok, amax / hi, 1.0).astype(np.float32)
    return encode_all(np.clip(v * s, -hi, hi), f), inv


def reference(x, w, a_fmt, b_fmt, scaling, prune=True):
    """y = x @ w through one exact builtin step: (y float32, w_eff (K, N), x_eff (T, K))."""
    x2 = np.asarray(x, np.float64).reshape(-1, w.shape[0])
    wt = np.asarray(w, np.float64).T
    if prune:
        wt = np_prune(wt)
    qw, rw = np_quantise(wt, a_fmt, scaling, axis=1)  # (N, K), (N, 1)
    qx, rx = np_quantise(x2, b_fmt, scaling, axis=1)  # (T, K), (T, 1)
    fw = [[Fraction(float(v)) for v in row] for row in qw.astype(np.float64)]
    fx = [[Fraction(float(v)) for v in row] for row in qx.astype(np.float64)]
    d = np.array([[of.to_float(of.encode_fraction(of.F32, sum((p * q for p, q in zip(a, b)), Fraction(0))), of.F32)
                   for a in fw] for b in fx], np.float32)  # (T, N), one rounding
    y = (d * rw.T.astype(np.float32)) * rx.astype(np.float32)  # float32 products, IEEE
    w_eff = (qw.astype(np.float32) * rw).T
    x_eff = qx.astype(np.float32) * rx
    return y.reshape(np.shape(x)[:-1] + (w.shape[1],)), w_eff, x_eff


def floats(rng, shape, spread=1.0):
    return (rng.standard_normal(shape) * np.exp(spread * rng.standard_normal(shape))).astype(np.float32)


# ------------------------------------------------------------------ bits against the reference
@pytest.mark.parametrize("builtin, a_fmt, b_fmt, scaling", [
    (FP8, of.FP8, of.FP8, "row"),
    pytest.param(MIXED, of.FP8, of.BF8, "tensor", marks=pytest.mark.slow),  # its quantisation runs by default
])
def test_one_step_bits_match_reference(rng, builtin, a_fmt, b_fmt, scaling):
    """K = 102 (one builtin step, padded to whole 2:4 groups), exact model: y is the exact product
    of the quantised operands rounded once, rescaled by two float32 products; x has batch dims
    and a zero row, w a zero column."""
    x = floats(rng, (2, 3, 102))
    x[1, 2] = 0.0
    w = floats(rng, (102, 20))
    w[:, 5] = 0.0
    y = jwmma.matmul(x, w, builtin=builtin, model="exact", scaling=scaling)
    want, _, _ = reference(x, w, a_fmt, b_fmt, scaling)
    assert y.shape == (2, 3, 20) and y.dtype == np.float32
    np.testing.assert_array_equal(bits(y), bits(want))


@pytest.mark.parametrize("builtin, fmts, scaling, target", [
    (FP8, (of.FP8, of.FP8), "row", None),
    (MIXED, (of.FP8, of.BF8), "tensor", None),
    ("smfmac_f32_16x16x64_f16", (of.F16, of.F16), "none", None),
    (GFX942, (of.FP8_FNUZ, of.FP8_FNUZ), "none", None),
    (GFX942, (of.FP8_FNUZ, of.FP8_FNUZ), "row", None),
    ("smfmac_f32_16x16x64_bf16", (of.BF16, of.BF16), "none", None),
])
def test_quantised_operands_match_recipe(rng, builtin, fmts, scaling, target):
    """The builtin's A and B as matmul builds them (no GEMM run): the pruning and quantisation
    recipe, on adversarial values: zero and tiny slices, f32 subnormals, negatives that round to
    zero (FNUZ: +0), values beyond the range (scaling 'none': Inf or NaN)."""
    from jwmma.numerics.rounding import x64_scope
    from jwmma.quant import config, quantise_operands

    x = floats(rng, (9, 40), spread=2.0)
    w = floats(rng, (40, 7), spread=2.0)
    x[0] = 0.0
    x[1] *= 1e-30
    x[2, :8] = np.array([1e-39, -1e-39, 3e-45, -1e-8, 1e5, -7e4, 6e4, 1e38], np.float32)
    w[:, 0] = 0.0
    w[:8, 1] = np.array([-1e-30, 2e-41, 1e-6, -3e-3, 5e4, 7e4, -9e5, 1.0], np.float32)
    cfg = config(builtin=builtin, scaling=scaling, target=target)
    with x64_scope():
        qw, qx = jax.jit(quantise_operands, static_argnums=2)(jnp.asarray(x), jnp.asarray(w), cfg)
        qw = (np.asarray(qw.values), np.asarray(qw.inv))
        qx = (np.asarray(qx.values), np.asarray(qx.inv))
    want_w = np_quantise(np_prune(w.astype(np.float64).T), fmts[0], scaling, axis=1)
    want_x = np_quantise(x.astype(np.float64), fmts[1], scaling, axis=1)
    np.testing.assert_array_equal(bits(qw[0]), bits(want_w[0]))
    np.testing.assert_array_equal(bits(qw[1]), bits(want_w[1]))
    np.testing.assert_array_equal(bits(qx[0].T), bits(want_x[0]))
    np.testing.assert_array_equal(bits(qx[1].T), bits(want_x[1]))


def test_scaling_none_is_gemm_transposed(rng):
    """scaling='none': the bits of jwmma.gemm(w^T, x^T).T, for operands already in the input
    format (cdna3, K = 300: three K steps) and for float32 operands cast and pruned first."""
    x8 = floats(rng, (4, 6, 300)).astype(ml_dtypes.float8_e4m3fn)
    w8 = np.asarray(jwmma.prune_2_4(floats(rng, (24, 300)).astype(ml_dtypes.float8_e4m3fn))).T
    y = jwmma.matmul(x8, w8, scaling="none", prune=False)
    d = jwmma.gemm(w8.T, x8.reshape(-1, 300).T, builtin=FP8)
    np.testing.assert_array_equal(bits(y).reshape(-1, 24), bits(d).T)

    x = floats(rng, (24, 300))
    w = floats(rng, (300, 24))
    y = jwmma.matmul(x, w, scaling="none")
    wq = np.asarray(jwmma.prune_2_4(w.T)).astype(ml_dtypes.float8_e4m3fn)
    d = jwmma.gemm(wq, x.T.astype(ml_dtypes.float8_e4m3fn), builtin=FP8)
    np.testing.assert_array_equal(bits(y), bits(d).T)


def test_multi_step_close_to_float64(rng):
    """K = 300 (three K steps) with row scaling (cdna3): within fp8's quantisation error of the
    float64 product of the pruned operands, and float64 inputs give the float32 inputs' bits.
    (The shapes of `test_scaling_none_is_gemm_transposed`: one compiled GEMM for both.)"""
    x = floats(rng, (24, 300), spread=0.3)
    w = floats(rng, (300, 24), spread=0.3)
    y = np.asarray(jwmma.matmul(x, w))
    ref = x.astype(np.float64) @ np_prune(w.astype(np.float64).T).T
    scale = np.abs(x.astype(np.float64)) @ np.abs(np_prune(w.astype(np.float64).T).T)
    err = np.abs(y - ref) / scale
    assert err.max() < 2 * 2.0**-4 and 1e-4 < err.mean() < 2.0**-5
    y64 = jwmma.matmul(x.astype(np.float64), w.astype(np.float64))
    np.testing.assert_array_equal(bits(y64), bits(y))


# ------------------------------------------------------------------ gradients, jit, vmap
def test_grad_is_straight_through(rng):
    """d/dx = g @ w_eff^T and d/dw = x_eff^T @ g (dense: nonzero where w was pruned), float32
    products of the effective operands; the forward value under value_and_grad is unchanged."""
    x = floats(rng, (2, 3, 102))
    w = floats(rng, (102, 20))
    g = floats(rng, (2, 3, 20))
    _, w_eff, x_eff = reference(x, w, of.FP8, of.FP8, "row")

    def loss(x, w):
        return jnp.sum(jwmma.matmul(x, w, model="exact") * g)

    val, (dx, dw) = jax.value_and_grad(loss, argnums=(0, 1))(x, w)
    g2 = g.reshape(-1, 20).astype(np.float64)
    want_dx = (g2 @ w_eff.astype(np.float64).T).reshape(x.shape)
    want_dw = x_eff.astype(np.float64).T @ g2
    tol = lambda a, b: 1e-6 * (np.abs(a) @ np.abs(b)) + 1e-30  # noqa: E731
    assert np.all(np.abs(dx.reshape(-1, 102) - want_dx.reshape(-1, 102)) <= tol(np.abs(g2), np.abs(w_eff.T)))
    assert np.all(np.abs(dw - want_dw) <= tol(np.abs(x_eff.T), np.abs(g2)))
    assert dx.dtype == np.float32 and dw.dtype == np.float32
    pruned = np_prune(w.astype(np.float64).T).T == 0
    assert np.count_nonzero(np.asarray(dw)[pruned]) > 0.9 * pruned.sum()  # dense: the mask may move
    y, _, _ = reference(x, w, of.FP8, of.FP8, "row")
    assert float(val) == pytest.approx(float(np.sum(y.astype(np.float64) * g)), rel=1e-5)


def test_jit_and_vmap_over_tokens(rng):
    """jit and vmap over rows of x give the eager bits."""
    x = floats(rng, (6, 102))
    w = floats(rng, (102, 20))
    eager = jwmma.matmul(x, w, model="exact")
    jitted = jax.jit(lambda x, w: jwmma.matmul(x, w, model="exact"))(x, w)
    np.testing.assert_array_equal(bits(jitted), bits(eager))
    vx = jax.vmap(lambda r: jwmma.matmul(r, w, model="exact"))(x)
    np.testing.assert_array_equal(bits(vx), bits(eager))


@pytest.mark.slow  # ~40 s: the batched-weight GEMM and the bf16 program compile anew
def test_vmap_over_weights_and_grad_dtypes(rng):
    """vmap over a stack of weights gives each one's bits; bf16 inputs get bf16 cotangents."""
    x = floats(rng, (5, 102))
    w = floats(rng, (102, 20))
    eager = jwmma.matmul(x, w, model="exact")
    ws = np.stack([w, -w])
    vw = jax.vmap(lambda w: jwmma.matmul(x, w, model="exact"))(ws)
    np.testing.assert_array_equal(bits(vw[0]), bits(eager))
    np.testing.assert_array_equal(bits(vw[1]), bits(-eager))
    xb, wb = jnp.asarray(x, jnp.bfloat16), jnp.asarray(w, jnp.bfloat16)
    dx, dw = jax.jit(jax.grad(lambda a, b: jwmma.matmul(a, b, model="exact").sum(), argnums=(0, 1)))(xb, wb)
    assert dx.dtype == jnp.bfloat16 and dw.dtype == jnp.bfloat16 and dx.shape == x.shape


def test_empty_operands():
    """K = 0 gives zeros (no product); zero tokens give an empty result; both differentiate."""
    y = jwmma.matmul(np.zeros((3, 0), np.float32), np.zeros((0, 5), np.float32))
    assert y.shape == (3, 5) and not np.any(y)
    y = jwmma.matmul(np.zeros((0, 8), np.float32), np.ones((8, 5), np.float32))
    assert y.shape == (0, 5)
    dx = jax.grad(lambda x: jwmma.matmul(x, np.zeros((0, 5), np.float32)).sum())(np.zeros((3, 0), np.float32))
    assert dx.shape == (3, 0)


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("x, w, kw, exc, match", [
    (np.ones((4, 8), np.float32), np.ones(8, np.float32), {}, ValueError, r"w must be \(K, N\)"),
    (np.ones((4, 9), np.float32), np.ones((8, 3), np.float32), {}, ValueError, r"x must be \(\.\.\., K\) with K = 8"),
    (np.ones((4, 8), np.int32), np.ones((8, 3), np.float32), {}, ValueError, "x must be a floating-point array"),
    (np.ones((4, 8), np.float32), np.ones((8, 3), np.int8), {}, ValueError, "w must be a floating-point array"),
    (np.ones((4, 8), np.float32), np.ones((8, 3), np.float32), {"scaling": "col"}, ValueError, "scaling must be one of"),
    (np.ones((4, 8), np.float32), np.ones((8, 3), np.float32), {"builtin": "smfmac_i32_16x16x128_i8"}, ValueError,
     "floating-point builtins"),
    (np.ones((4, 8), np.float32), np.ones((8, 3), np.float32), {"builtin": "smfmac_f32_16x16x64_bf16"}, ValueError,
     "overflow the f32 accumulator"),
    (np.ones((4, 8), np.float32), np.ones((8, 3), np.float32), {"prune": False}, ValueError, r"w\^T"),
    (np.ones((4, 8), np.float32), np.ones((8, 3), np.float32), {"model": "no_such_model"}, ValueError, "no_such_model"),
    (np.ones((4, 8), np.float32), np.ones((8, 3), np.float32), {"prune": "yes"}, TypeError, "prune"),
    (np.ones((4, 8), np.float32), np.ones((8, 3), np.float32), {"builtin": "nope"}, (ValueError, KeyError), "nope"),
])
def test_bad_input(x, w, kw, exc, match):
    with pytest.raises(exc, match=match):
        jwmma.matmul(x, w, **kw)
