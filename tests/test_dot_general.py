"""`jwmma.Unit`, `jwmma.dot_general`, `jwmma.einsum` (API.md section 11) against references
written here: the effective operands built by hand in the operands' own layouts (the 2:4
pruning of the right-hand operand along K in the contract's order, casts to fp8 by
ml_dtypes) contracted by ``np.einsum`` in float64 (exact for these sizes: one builtin step of
the ``exact`` model is the exact sum rounded once), and ``jwmma.gemm`` on operands canonicalised
by hand (np.transpose / reshape written here). Bits are compared as uint32 views.

Every layout case has the same canonical GEMM (G = 2 batches, N = 6, K = 24, M = 4), so they
share one compiled program."""
from __future__ import annotations

import logging
import string

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jwmma

FP8 = "smfmac_f32_16x16x128_fp8_fp8"
F16_DENSE = "wmma_f32_16x16x16_f16_w32_gfx12"
EXACT = jwmma.Unit(FP8, model="exact", scaling="none")  # one K step (K <= 128): exact sum, one rounding
ROW = jwmma.Unit(FP8, model="exact", scaling="row")  # tests/test_nn_plugs.py's unit (shared programs)


def bits(x):
    x = np.asarray(x)
    return x.view({4: np.uint32, 2: np.uint16, 1: np.uint8}[x.dtype.itemsize])


def floats(rng, shape):
    return (rng.standard_normal(shape) * np.exp(0.5 * rng.standard_normal(shape))).astype(np.float32)


# ------------------------------------------------------------------ references, written here
def prune_last(a):
    """2:4 along the last axis (length divisible by 4): the two largest |values| of every 4 kept,
    ties to the lower position."""
    g = a.reshape(a.shape[:-1] + (-1, 4))
    order = np.argsort(-np.abs(g), axis=-1, kind="stable")
    keep = np.zeros(g.shape, bool)
    np.put_along_axis(keep, order[..., :2], True, axis=-1)
    return np.where(keep, g, 0).reshape(a.shape)


def effective_rhs(rhs, rc, rb, fmt=ml_dtypes.float8_e4m3fn, prune=True):
    """rhs pruned 2:4 along K = its contracting dims flattened in the order ``rc`` lists them
    (the last fastest), per batch and free position, cast to ``fmt``, in rhs's own layout (float64)."""
    rfree = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    perm = list(rb) + list(rc) + rfree
    t = np.transpose(rhs, perm)
    nb, nc = len(rb), len(rc)
    k = int(np.prod(t.shape[nb:nb + nc]))
    moved = np.moveaxis(t.reshape(t.shape[:nb] + (k,) + t.shape[nb + nc:]), nb, -1)  # K last
    if prune:
        moved = prune_last(moved)
    t = np.moveaxis(moved, -1, nb).reshape(t.shape)
    return np.transpose(t, np.argsort(perm)).astype(fmt).astype(np.float64)


def einsum_spec(lhs_ndim, rhs_ndim, dn):
    """The np.einsum string of lax.dot_general's contract for ``dn``."""
    (lc, rc), (lb, rb) = dn
    letters = iter(string.ascii_letters)
    ls, rs = [None] * lhs_ndim, [None] * rhs_ndim
    for i, j in list(zip(lc, rc)) + list(zip(lb, rb)):
        ls[i] = rs[j] = next(letters)
    for v in (ls, rs):
        for i, c in enumerate(v):
            if c is None:
                v[i] = next(letters)
    out = [ls[i] for i in lb] + [c for i, c in enumerate(ls) if i not in lc and i not in lb] + \
        [c for i, c in enumerate(rs) if i not in rc and i not in rb]
    return f"{''.join(ls)},{''.join(rs)}->{''.join(out)}"


def exact_reference(lhs, rhs, dn):
    """float32 of the exact float64 contraction of the effective operands (scaling 'none', rhs as
    A pruned, lhs as B; both fp8)."""
    (lc, rc), (lb, rb) = dn
    l_eff = lhs.astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    r_eff = effective_rhs(rhs, rc, rb)
    return np.einsum(einsum_spec(lhs.ndim, rhs.ndim, dn), l_eff, r_eff).astype(np.float32), l_eff, r_eff


# ------------------------------------------------------------------ layouts
def split(total, parts, draw):
    """``total`` as a product of ``parts`` sizes (1s allowed), drawn."""
    sizes = [1] * parts
    rest = total
    for p in (2, 2, 2, 3, 3):
        if rest % p == 0 and draw(st.booleans()):
            sizes[draw(st.integers(0, parts - 1))] *= p
            rest //= p
    sizes[draw(st.integers(0, parts - 1))] *= rest
    return sizes


@st.composite
def layouts(draw):
    """(lhs shape, rhs shape, dimension_numbers) of a contraction whose canonical GEMM is always
    G=2, N=6, K=24, M=4, with 1-3 batch and contracting dims and 1-2 free dims per side, all
    placed anywhere."""
    nb, nc = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    nl, nr = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    bsz, csz = split(2, nb, draw), split(24, nc, draw)
    lsz, rsz = split(6, nl, draw), split(4, nr, draw)
    lpos = draw(st.permutations(range(nb + nc + nl)))
    rpos = draw(st.permutations(range(nb + nc + nr)))
    lshape, rshape = [0] * len(lpos), [0] * len(rpos)
    lb, lc = lpos[:nb], lpos[nb:nb + nc]
    rb, rc = rpos[:nb], rpos[nb:nb + nc]
    for i, s in zip(lb, bsz):
        lshape[i] = s
    for i, s in zip(rb, bsz):
        rshape[i] = s
    for i, s in zip(lc, csz):
        lshape[i] = s
    for i, s in zip(rc, csz):
        rshape[i] = s
    for i, s in zip(lpos[nb + nc:], lsz):
        lshape[i] = s
    for i, s in zip(rpos[nb + nc:], rsz):
        rshape[i] = s
    return tuple(lshape), tuple(rshape), ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(layouts())
def test_random_layouts_match_the_exact_contraction(case):
    """Any batch/contracting/free dims in any positions: the result has lax.dot_general's shape
    and dim order, and its bits are the exact contraction of the effective operands (built here
    in the operands' own layouts) rounded once."""
    lshape, rshape, dn = case
    rng = np.random.default_rng(abs(hash((lshape, rshape, dn))) % 2**32)
    lhs, rhs = floats(rng, lshape), floats(rng, rshape)
    y = jwmma.dot_general(lhs, rhs, dn, unit=EXACT)
    want, _, _ = exact_reference(lhs, rhs, dn)
    assert y.shape == jax.lax.dot_general(lhs, rhs, dn).shape == want.shape and y.dtype == np.float32
    np.testing.assert_array_equal(bits(y), bits(want))


LAYOUT = ((3, 6, 2, 8), (8, 3, 4, 2), (((0, 3), (1, 0)), ((2,), (3,))))  # G=2, N=6, K=24 (3 x 8), M=4


@pytest.mark.parametrize("k, model", [(24, "exact"), pytest.param(144, None, marks=pytest.mark.slow)])
def test_scaling_none_is_gemm_on_canonical_operands(rng, k, model):
    """scaling='none': the bits of jwmma.gemm on the operands canonicalised here (batch
    leading, contracting pairs flattened into K in dimension_numbers' order, rhs^T as A pruned in
    float32 then cast), transposed; slow case: the default model, K = 144 (two K steps)."""
    lhs, rhs = floats(rng, (3, 6, 2, k // 3)), floats(rng, (k // 3, 3, 4, 2))
    dn = (((0, 3), (1, 0)), ((2,), (3,)))
    y = jwmma.dot_general(lhs, rhs, dn, unit=jwmma.Unit(FP8, scaling="none", model=model))
    lhs_c = np.transpose(lhs, (2, 1, 0, 3)).reshape(2, 6, k)
    rhs_c = np.transpose(rhs, (3, 1, 0, 2)).reshape(2, k, 4)
    a = prune_last(np.swapaxes(rhs_c, 1, 2)).astype(ml_dtypes.float8_e4m3fn)
    d = jwmma.gemm(a, np.swapaxes(lhs_c, 1, 2).astype(ml_dtypes.float8_e4m3fn), builtin=FP8, model=model)
    np.testing.assert_array_equal(bits(y), bits(np.swapaxes(np.asarray(d), 1, 2)))


def test_lhs_as_a(rng):
    """Unit(a='lhs'): lhs is the instruction's A (pruned along K), rhs its B: the exact
    contraction with the roles swapped."""
    lshape, rshape, dn = LAYOUT
    lhs, rhs = floats(rng, lshape), floats(rng, rshape)
    y = jwmma.dot_general(lhs, rhs, dn, unit=EXACT.replace(a="lhs"))
    (lc, rc), (lb, rb) = dn
    l_eff = effective_rhs(lhs, lc, lb)  # the same pruning, on lhs's K
    r_eff = rhs.astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    want = np.einsum(einsum_spec(4, 4, dn), l_eff, r_eff).astype(np.float32)
    np.testing.assert_array_equal(bits(y), bits(want))


def row_quantised(v, axis):
    """The 'row' recipe by hand: amax along ``axis`` -> fp8's largest value (448), factor and
    product in float64, clipped, cast once; the inverse factor as float32."""
    v = v.astype(np.float64)
    amax = np.max(np.abs(v), axis=axis, keepdims=True)
    q = np.clip(v * (448.0 / amax), -448.0, 448.0).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    return q, (amax / 448.0).astype(np.float32)


def test_row_scaling_per_batch_and_row(rng):
    """'row' factors are per (batch, row of A) and per (batch, column of B): w (the A) per output
    channel, x per token, each batch its own; exact sums rounded once, then fl32(fl32(d * r_w) * r_x)."""
    x, w = floats(rng, (2, 8, 8)), floats(rng, (2, 8, 8))  # the attention GEMMs of tests/test_nn_plugs.py
    w[1] *= 1e3  # the batches' factors differ
    y = jwmma.dot_general(x, w, (((2,), (1,)), ((0,), (0,))), unit=ROW)
    qw, rw = row_quantised(prune_last(np.swapaxes(w, 1, 2)), axis=2)  # (2, 8, 8), (2, 8, 1)
    qx, rx = row_quantised(x, axis=2)  # (2, 8, 8), (2, 8, 1)
    d = np.einsum("bnk,bmk->bnm", qx, qw).astype(np.float32)
    want = (d * np.swapaxes(rw, 1, 2)) * rx  # float32 products, A's factor first
    np.testing.assert_array_equal(bits(y), bits(want))


def test_result_dtypes(rng):
    """The result dtype follows lax (promoted inputs or preferred_element_type); the float32
    result is rounded once into it (RNE: ml_dtypes' and numpy's casts of float32)."""
    lshape, rshape, dn = LAYOUT
    lhs, rhs = floats(rng, lshape), floats(rng, rshape)
    y32 = np.asarray(jwmma.dot_general(lhs, rhs, dn, unit=EXACT))
    y = jwmma.dot_general(lhs, rhs, dn, preferred_element_type=jnp.bfloat16, unit=EXACT)
    assert y.dtype == jnp.bfloat16
    np.testing.assert_array_equal(bits(y), bits(y32.astype(ml_dtypes.bfloat16)))
    y = jwmma.dot_general(lhs, rhs, dn, preferred_element_type=np.float16, unit=EXACT)
    np.testing.assert_array_equal(bits(y), bits(y32.astype(np.float16)))
    lb, rb = lhs.astype(ml_dtypes.bfloat16), rhs.astype(ml_dtypes.bfloat16)

    def dtype(a, b, **kw):  # traced only (no new GEMM compiled)
        return jax.eval_shape(lambda a, b: jwmma.dot_general(a, b, dn, unit=EXACT, **kw), a, b).dtype

    assert dtype(lb, rb) == jax.lax.dot_general(lb, rb, dn).dtype == jnp.bfloat16
    assert dtype(lb, rhs) == jax.lax.dot_general(lb, rhs, dn).dtype == np.float32  # promoted, as lax
    if not jax.config.jax_enable_x64:
        assert dtype(lhs, rhs, preferred_element_type=np.float64) == np.float32


# ------------------------------------------------------------------ einsum
def test_einsum_is_dot_general(rng):
    """Two-operand einsums (explicit, implicit, ellipses, output permuted) give dot_general's
    bits in the output's order; the second operand is the instruction's A. (The shapes of
    tests/test_nn_plugs.py's layers and attention.)"""
    x, w = floats(rng, (2, 4, 16)), floats(rng, (16, 16))
    want = np.asarray(jwmma.dot_general(x, w, (((2,), (0,)), ((), ())), unit=ROW))
    np.testing.assert_array_equal(bits(jwmma.einsum("bsk,kn->bsn", x, w, unit=ROW)), bits(want))
    np.testing.assert_array_equal(bits(jwmma.einsum("...k,kn->n...", x, w, unit=ROW)),
                                  bits(np.moveaxis(want, -1, 0)))
    np.testing.assert_array_equal(bits(jwmma.einsum("bsk,kn", x, w, unit=ROW)),  # implicit: bns
                                  bits(np.swapaxes(want, 1, 2)))
    # attention scores: batch (b, h), contract d; q (b, q, h, d), k (b, k, h, d) -> (b, h, q, k)
    q, k = floats(rng, (1, 8, 2, 8)), floats(rng, (1, 8, 2, 8))
    s = jwmma.einsum("...qhd,...khd->...hqk", q, k, unit=ROW)
    assert s.shape == (1, 2, 8, 8)
    want = jwmma.dot_general(q, k, (((3,), (3,)), ((0, 2), (0, 2))), unit=ROW)
    np.testing.assert_array_equal(bits(s), bits(want))
    # the weighted values: batch (b, h), contract k; a (b, h, q, k), v (b, k, h, d) -> (b, q, h, d)
    v = floats(rng, (1, 8, 2, 8))
    o = jwmma.einsum("...hqk,...khd->...qhd", s, v, unit=ROW)
    want = jwmma.dot_general(s, v, (((3,), (1,)), ((0, 1), (0, 2))), unit=ROW)  # (b, h, q, d)
    np.testing.assert_array_equal(bits(o), bits(np.transpose(np.asarray(want), (0, 2, 1, 3))))


# ------------------------------------------------------------------ gradients
def test_grad_default_is_float32_straight_through(rng):
    """backward=None: dlhs and drhs are float32 products of the effective operands (drhs dense:
    the pruned positions get gradients too), in the operands' layouts and dtypes."""
    lshape, rshape, dn = LAYOUT
    lhs, rhs = floats(rng, lshape), floats(rng, rshape)
    _, l_eff, r_eff = exact_reference(lhs, rhs, dn)
    ct = floats(rng, jax.lax.dot_general(lhs, rhs, dn).shape)
    spec = einsum_spec(4, 4, dn)
    dl, dr = jax.grad(lambda a, b: jnp.sum(jwmma.dot_general(a, b, dn, unit=EXACT) * ct), argnums=(0, 1))(lhs, rhs)
    hi = jax.lax.Precision.HIGHEST
    want_dl = jax.grad(lambda a: jnp.sum(jnp.einsum(spec, a, r_eff.astype(np.float32), precision=hi) * ct))(
        l_eff.astype(np.float32))
    want_dr = jax.grad(lambda b: jnp.sum(jnp.einsum(spec, l_eff.astype(np.float32), b, precision=hi) * ct))(
        r_eff.astype(np.float32))
    np.testing.assert_allclose(dl, want_dl, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dr, want_dr, rtol=1e-5, atol=1e-6)
    assert dl.shape == lhs.shape and dr.shape == rhs.shape and dl.dtype == dr.dtype == np.float32
    assert np.count_nonzero(np.asarray(dr)[r_eff == 0]) > 0.9 * np.count_nonzero(r_eff == 0)


def test_grad_through_a_backward_unit(rng):
    """backward=Unit(dense f16, exact, scaling none): dlhs = g . rhs_eff over M and drhs =
    lhs_eff . g over N run through that unit: each one K step, so the bits are the exact float64
    contractions of its f16 operands (g cast to f16 here) rounded once."""
    lshape, rshape, dn = LAYOUT
    lhs, rhs = floats(rng, lshape), floats(rng, rshape)
    _, l_eff, r_eff = exact_reference(lhs, rhs, dn)
    ct = floats(rng, jax.lax.dot_general(lhs, rhs, dn).shape)
    unit = EXACT.replace(backward=jwmma.Unit(F16_DENSE, model="exact", scaling="none"))
    dl, dr = jax.grad(lambda a, b: jnp.sum(jwmma.dot_general(a, b, dn, unit=unit) * ct), argnums=(0, 1))(lhs, rhs)
    g16 = ct.astype(np.float16).astype(np.float64)
    (lc, rc), (lb, rb) = dn  # lhs (c0=3, n=6, b=2, c1=8), rhs (c1=8, c0=3, m=4, b=2), y (b, n, m)
    want_dl = np.einsum("bnm,jimb->inbj", g16, r_eff).astype(np.float32)
    want_dr = np.einsum("inbj,bnm->jimb", l_eff, g16).astype(np.float32)
    np.testing.assert_array_equal(bits(dl), bits(want_dl))
    np.testing.assert_array_equal(bits(dr), bits(want_dr))


# ------------------------------------------------------------------ jit: nothing recompiles
def test_fixed_unit_never_recompiles(rng):
    """After the first call, further calls with new values (eager, jitted, with a unit built
    anew but equal) trace nothing and compile nothing."""
    lshape, rshape, dn = LAYOUT
    traces = []

    @jax.jit
    def f(a, b):
        traces.append(1)
        return jwmma.dot_general(a, b, dn, unit=EXACT)

    f(floats(rng, lshape), floats(rng, rshape)).block_until_ready()
    jwmma.dot_general(floats(rng, lshape), floats(rng, rshape), dn, unit=EXACT).block_until_ready()
    compiles = []

    def listen(event, duration, **kw):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(event)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        for _ in range(3):
            a, b = floats(rng, lshape), floats(rng, rshape)
            f(a, b).block_until_ready()
            jwmma.dot_general(a, b, dn, unit=jwmma.Unit(FP8, model="exact", scaling="none")).block_until_ready()
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert len(traces) == 1 and f._cache_size() == 1
    assert not compiles, compiles


# ------------------------------------------------------------------ empty operands
def test_empty_contractions():
    """K = 0 gives zeros (no product); an empty free dim gives an empty result; both
    differentiate and keep the result dtype."""
    y = jwmma.dot_general(np.zeros((3, 0), np.float32), np.zeros((0, 5), np.float32), (((1,), (0,)), ((), ())),
                          preferred_element_type=np.float16, unit=EXACT)
    assert y.shape == (3, 5) and y.dtype == np.float16 and not np.any(np.asarray(y))
    y = jwmma.dot_general(np.zeros((2, 0, 8), np.float32), np.ones((2, 8, 5), np.float32), (((2,), (1,)), ((0,), (0,))),
                          unit=EXACT)
    assert y.shape == (2, 0, 5)
    g = jax.grad(lambda a: jwmma.einsum("ik,kn->in", a, np.zeros((0, 5), np.float32), unit=EXACT).sum())(
        np.zeros((3, 0), np.float32))
    assert g.shape == (3, 0)


# ------------------------------------------------------------------ bad input, explicit fallback
X, W = np.ones((4, 8), np.float32), np.ones((8, 3), np.float32)
MM = (((1,), (0,)), ((), ()))


@pytest.mark.parametrize("call, exc, match", [
    (lambda: jwmma.dot_general(X, W, ((1,), (0,)), unit=EXACT), TypeError,
     r"dimension_numbers must be \(\(lhs_contracting, rhs_contracting\), \(lhs_batch, rhs_batch\)\)"),
    (lambda: jwmma.dot_general(X, W, ((("1",), (0,)), ((), ())), unit=EXACT), TypeError, "lhs_contracting must hold ints"),
    (lambda: jwmma.dot_general(X, W, (((2,), (0,)), ((), ())), unit=EXACT), ValueError,
     r"lhs_contracting names dimension 2, out of range for an operand of rank 2 \(shape \(4, 8\)\)"),
    (lambda: jwmma.dot_general(X, W, (((-1,), (0,)), ((), ())), unit=EXACT), ValueError, "for -1 write 1"),
    (lambda: jwmma.dot_general(X, W, (((1, 1), (0, 0)), ((), ())), unit=EXACT), ValueError, r"repeated: \[1\]"),
    (lambda: jwmma.dot_general(X[None], W[None], (((2,), (1,)), ((2,), (0,))), unit=EXACT), ValueError,
     "both contracting and batch"),
    (lambda: jwmma.dot_general(X, W, (((1,), (0, 1)), ((), ())), unit=EXACT), ValueError, "must pair up"),
    (lambda: jwmma.dot_general(X, W, (((0,), (0,)), ((), ())), unit=EXACT), ValueError,
     r"lhs dim 0 has size 4 .* rhs dim 0 has size 8"),
    (lambda: jwmma.dot_general(X.astype(np.int8), W, MM, unit=EXACT), ValueError,
     r"lhs has dtype int8, which the unit \(smfmac_f32_16x16x128_fp8_fp8: A fp8 x B fp8.*fallback='native'"),
    (lambda: jwmma.dot_general(X, W, MM, precision=jax.lax.Precision.HIGH, unit=EXACT), ValueError,
     r"precision=.*HIGH.* cannot be honoured: the unit computes in its own formats.*precision=None"),
    (lambda: jwmma.dot_general(X, W, MM, precision="tensorfloat32", unit=EXACT), ValueError, "cannot be honoured"),
    (lambda: jwmma.dot_general(X, W, MM, preferred_element_type=np.int32, unit=EXACT), ValueError,
     "preferred_element_type=int32"),
    (lambda: jwmma.dot_general(X, W, MM, out_sharding="x", unit=EXACT), ValueError, "out_sharding"),
    (lambda: jwmma.dot_general(X, W, MM), TypeError, r"needs unit=jwmma.Unit"),
    (lambda: jwmma.dot_general(X, W, MM, unit={"builtin": FP8}), TypeError, r"jwmma.Unit\(\*\*that_dict\)"),
    (lambda: jwmma.dot_general(X, W, MM, unit=EXACT, unti=1), TypeError, "did you mean 'unit'"),
    (lambda: jwmma.Unit(FP8, scalng="row"), TypeError, r"'scalng' \(did you mean 'scaling'\?\)"),
    (lambda: jwmma.Unit(FP8, scaling="mx"), ValueError, "MX block scales are applied by the block-scaled builtins"),
    (lambda: jwmma.Unit(FP8, a="w"), ValueError, r"one of \('rhs', 'lhs'\), got 'w'"),
    (lambda: jwmma.Unit(FP8, fallback=True), ValueError, r"fallback=\.\.\.\) must be one of"),
    (lambda: jwmma.Unit(FP8, backward=FP8), TypeError, "backward"),
    (lambda: jwmma.Unit("smfmac_i32_16x16x128_i8"), ValueError, "integer inputs"),
    (lambda: jwmma.Unit(FP8, prune="yes"), TypeError, "prune"),
    (lambda: jwmma.einsum("ij,jk,kl->il", X, W, W.T, unit=EXACT), ValueError, "contracts two operands"),
    (lambda: jwmma.einsum("ij,jk->i", X, W, unit=EXACT), ValueError, r"\['k'\] of rhs appear in neither"),
    (lambda: jwmma.einsum("ii,ik->k", X[:, :4], W[:4], unit=EXACT), ValueError, "a diagonal"),
])
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_explicit_native_fallback(caplog):
    """Unit(fallback='native'): integer operands run as jax.lax.dot_general, logged once per kind;
    float operands still go through the unit."""
    unit = EXACT.replace(fallback="native")
    xi, wi = np.arange(32, dtype=np.int8).reshape(4, 8), np.ones((8, 3), np.int8)
    with caplog.at_level(logging.WARNING, logger="jwmma.quant"):
        y1 = jwmma.dot_general(xi, wi, MM, unit=unit)
        y2 = jwmma.dot_general(xi, wi, MM, unit=unit)
    np.testing.assert_array_equal(y1, jax.lax.dot_general(xi, wi, MM))
    np.testing.assert_array_equal(y2, y1)
    assert len([r for r in caplog.records if "runs natively" in r.getMessage()]) == 1
    lshape, rshape, dn = LAYOUT
    lhs, rhs = np.ones(lshape, np.float32), np.ones(rshape, np.float32)
    np.testing.assert_array_equal(bits(jwmma.dot_general(lhs, rhs, dn, unit=unit)),
                                  bits(jwmma.dot_general(lhs, rhs, dn, unit=EXACT)))


def test_unit_is_a_hashable_value():
    """Equal fields, equal units (prune's default resolved per builtin); replace checks again."""
    assert jwmma.Unit(FP8) == jwmma.Unit(FP8, prune=True) and hash(jwmma.Unit(FP8)) == hash(jwmma.Unit(FP8, prune=True))
    assert jwmma.Unit(F16_DENSE).prune is False
    assert jwmma.Unit(FP8).replace(builtin=F16_DENSE).prune is False  # the default follows the builtin
    assert jwmma.Unit(FP8, prune=False).replace(builtin=F16_DENSE).prune is False
    assert {jwmma.Unit(FP8, devices=[0]): 1}[jwmma.Unit(FP8, devices=(0,))] == 1
    with pytest.raises(ValueError, match="scaling must be one of"):
        EXACT.replace(scaling="col")


def test_units_on_f32_and_xf32_rows(rng):
    """The f32 MFMA's operands are float32 (a unit passes them on as they are, subnormals kept);
    xf32's are float32 rounded to 10 fraction bits (RNE, computed here on the bits): a unit
    gives jwmma.gemm's bits on those operands."""
    a = rng.standard_normal((32, 8)).astype(np.float32)
    b = rng.standard_normal((8, 32)).astype(np.float32)
    a[0, 0], a[1, 1], b[2, 3] = 1e-40, np.float32(1 + 2**-12), np.float32(1 + 3 * 2**-12)

    def xf32(x):
        u = x.view(np.uint32).astype(np.uint64)
        low, top = u & 0x1FFF, u >> 13
        up = (low > 0x1000) | ((low == 0x1000) & (top & 1 == 1))
        return ((top + up) << 13).astype(np.uint32).view(np.float32)

    dims = (((1,), (0,)), ((), ()))
    for name, cut in (("mfma_f32_32x32x2f32", lambda x: x), ("mfma_f32_32x32x4_xf32", xf32)):
        unit = jwmma.Unit(name, a="lhs", scaling="none")
        got = np.asarray(jwmma.dot_general(a, b, dims, unit=unit)).view(np.uint32)
        want = np.asarray(jwmma.gemm(cut(a), cut(b), builtin=name)).view(np.uint32)
        assert np.array_equal(got, want), name
