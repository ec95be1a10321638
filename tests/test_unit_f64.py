"""`jwmma.Unit` on the f64 MFMA (docs/spec/BUILTINS_DENSE.md 11, API.md 12): `dot_general`,
`einsum`, `matmul` and their gradients in float64, bit for bit.

The reference is `tests/oracles/fma64.py` (plain-Python IEEE fused multiply-adds, never jwmma)
applied as the GEMM the unit runs: the instruction's A is the right-hand operand (``a="rhs"``),
its B the left-hand one, every output one FMA chain over K in order from +0, K padded with +0
products to whole steps; the operands laid out as lax's contract says (batch dims, then lhs
free, then rhs free; K over the contracting dims in their order, row-major). Data: random and
adversarial float64 (subnormals, tiny and huge exponents, NaN/Inf, exact cancellations).

jax_enable_x64 is switched on only inside the `x64` fixture (a context, restored after each
test); without it the unit (and a `jwmma.nn` layer holding it) refuses with a TypeError naming
the fix. One square shape for the default cases (forward and both backward GEMMs share one
compiled program); the grids over rows, targets and data kinds are `slow`.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jwmma
from tests import mmasim_support as mmasim
from tests.oracles import fma64 as oracle
from tests.oracles.f64_data import float64_values

F16 = "mfma_f64_16x16x4f64"
F4 = "mfma_f64_4x4x4f64"


@pytest.fixture
def x64():
    """jax_enable_x64 on for one test (a context: the global setting is never changed)."""
    assert not jax.config.jax_enable_x64
    with jax.enable_x64(True):
        yield
    assert not jax.config.jax_enable_x64


def _same(got, want, what):
    """Bits equal (float64); NaN by NaN-ness."""
    mmasim.assert_same_bits(np.asarray(got, np.float64), np.asarray(want, np.float64), what)


def _reference(lhs_c, rhs_c, step):
    """y (G, N, M) of canonical lhs_c (G, N, K), rhs_c (G, K, M): per batch D = A x B with
    A = rhs_c^T, B = lhs_c^T (the unit's a='rhs'), transposed back."""
    return np.stack([oracle.gemm(r.T, l.T, None, step).T for l, r in zip(lhs_c, rhs_c)])


def _operands(rng, kind, g=2, n=6):
    """lhs (K1, G, N, K2) and rhs (G, K2, M, K1) with K1 * K2 = N = M = n (a square GEMM per
    batch: the backward GEMMs have the forward's shapes), plus their canonical forms. In
    'adversarial' data the products of k = 0 and k = 1 cancel exactly in every output."""
    k1, k2 = 3, n // 3
    lhs_c = float64_values(rng, (g, n, n), kind)
    rhs_c = float64_values(rng, (g, n, n), kind)
    if kind == "adversarial":
        lhs_c[..., 1], rhs_c[:, 1, :] = lhs_c[..., 0], -rhs_c[:, 0, :]
    lhs = lhs_c.reshape(g, n, k1, k2).transpose(2, 0, 1, 3)  # k = k1 * K2 + k2
    rhs = rhs_c.reshape(g, k1, k2, n).transpose(0, 2, 3, 1)
    dn = (((0, 3), (3, 1)), ((1,), (0,)))
    return lhs, rhs, dn, lhs_c, rhs_c


# ------------------------------------------------------------------------------ forward
def test_dot_general_and_einsum_are_the_fma_chain(rng, x64):
    """Batch dims and two contracting dims in scattered positions; float64 in, float64 out, the
    bits of the plain-Python chain; einsum of the same contraction agrees."""
    unit = jwmma.Unit(F16)
    assert unit.scaling == "none" and unit.prune is False
    lhs, rhs, dn, lhs_c, rhs_c = _operands(rng, "adversarial")
    want = _reference(lhs_c, rhs_c, 4)
    y = jwmma.dot_general(jnp.asarray(lhs), jnp.asarray(rhs), dn, unit=unit)
    assert isinstance(y, jax.Array) and y.dtype == np.float64 and y.shape == (2, 6, 6)
    assert np.isnan(want).any() and (np.asarray(want) == 0).any()  # the data reach the specials
    _same(y, want, "dot_general")
    # einsum: K runs over the contracting labels in the order of A (rhs): a, then c, as lc above
    _same(jwmma.einsum("abgc,bamc->bgm", lhs, rhs.transpose(0, 3, 2, 1), unit=unit), want, "einsum")


@pytest.mark.slow
def test_narrower_inputs_enter_exactly_and_the_result_rounds_once(rng, x64):
    """float32 operands (subnormals included) enter at their exact values; preferred_element_type
    float32 rounds the float64 result once (RNE, subnormals kept: numpy's cast of the chain)."""
    unit = jwmma.Unit(F16, a="lhs")
    a = (rng.standard_normal((5, 7)) * 2.0 ** rng.integers(-140, -110, (5, 7))).astype(np.float32)
    b = (rng.standard_normal((7, 3)) * 2.0 ** rng.integers(-20, 0, (7, 3))).astype(np.float32)
    assert (np.abs(a) < np.finfo(np.float32).tiny).any()
    full = oracle.gemm(a.astype(np.float64), b.astype(np.float64), None, 4)
    y64 = jwmma.dot_general(jnp.asarray(a), jnp.asarray(b), (((1,), (0,)), ((), ())), unit=unit)
    assert y64.dtype == np.float64  # the f64 unit's result, whatever the operands
    _same(y64, full, "float32 operands")
    y32 = jwmma.dot_general(jnp.asarray(a), jnp.asarray(b), (((1,), (0,)), ((), ())), None, jnp.float32, unit=unit)
    assert y32.dtype == np.float32
    assert np.array_equal(np.asarray(y32).view(np.uint32), full.astype(np.float32).view(np.uint32))


# ------------------------------------------------------------------------------ gradients
def test_grad_runs_the_backward_unit_in_float64(rng, x64):
    """backward=the f64 unit: dlhs_c = g . rhs over M and drhs_c = lhs . g over N, each the
    unit's GEMM (the chain of the transposed products), float64 throughout."""
    unit = jwmma.Unit(F16)
    lhs, rhs, dn, lhs_c, rhs_c = _operands(rng, "random")
    gy = float64_values(rng, (2, 6, 6), "random")
    y, vjp = jax.vjp(lambda l, r: jwmma.dot_general(l, r, dn, unit=unit.replace(backward=unit)),
                     jnp.asarray(lhs), jnp.asarray(rhs))
    dl, dr = vjp(jnp.asarray(gy))
    assert y.dtype == dl.dtype == dr.dtype == np.float64
    _same(y, _reference(lhs_c, rhs_c, 4), "forward")
    # dlhs_c (G, N, K): the unit's dot_general of g (G, N, M) and rhs_c (G, K, M) over M (A = rhs_c, B = g^T)
    want_l = np.stack([oracle.gemm(r, gb.T, None, 4).T for gb, r in zip(gy, rhs_c)])
    # drhs_c (G, K, M): lhs_c (G, N, K) . g (G, N, M) over N (A = g^T, B = lhs_c)
    want_r = np.stack([oracle.gemm(gb.T, l, None, 4).T for gb, l in zip(gy, lhs_c)])
    _same(np.asarray(dl).transpose(1, 2, 0, 3).reshape(2, 6, 6), want_l, "dlhs")
    _same(np.asarray(dr).transpose(0, 3, 1, 2).reshape(2, 6, 6), want_r, "drhs")


def test_jit_with_a_float32_operand_and_a_float64_constant(rng, x64):
    """Under jit: a traced float32 lhs (subnormals included) enters at its exact value, a
    closed-over float64 rhs (an XLA constant, transposed by the unit) keeps its bits."""
    unit = jwmma.Unit(F16)
    lhs, rhs, dn, lhs_c, rhs_c = _operands(rng, "adversarial")
    lhs32 = (float64_values(rng, lhs.shape, "random") * 2.0 ** -120).astype(np.float32)  # many subnormal
    assert ((lhs32 != 0) & (np.abs(lhs32) < np.finfo(np.float32).tiny)).any()
    lhs32_c = lhs32.transpose(1, 2, 0, 3).reshape(2, 6, 6).astype(np.float64)
    y = jax.jit(lambda l: jwmma.dot_general(l, jnp.asarray(rhs), dn, unit=unit))(jnp.asarray(lhs32))
    assert y.dtype == np.float64
    _same(y, _reference(lhs32_c, rhs_c, 4), "jit")


@pytest.mark.slow
def test_grad_without_a_backward_unit_is_native_float64(rng, x64):
    """backward=None: native float64 dots of g and the operands, exact here (small integers)."""
    unit = jwmma.Unit(F16)
    *_, dn, _, _ = _operands(rng, "random")
    ints = lambda shape: rng.integers(-8, 9, shape).astype(np.float64)  # every sum exact in float64
    l0, r0, g0 = ints((2, 6, 6)), ints((2, 6, 6)), ints((2, 6, 6))
    lhs0, rhs0 = l0.reshape(2, 6, 3, 2).transpose(2, 0, 1, 3), r0.reshape(2, 3, 2, 6).transpose(0, 2, 3, 1)
    dl, dr = jax.grad(lambda l, r: jnp.sum(jwmma.dot_general(l, r, dn, unit=unit) * g0),
                      argnums=(0, 1))(jnp.asarray(lhs0), jnp.asarray(rhs0))
    assert np.array_equal(np.asarray(dl).transpose(1, 2, 0, 3).reshape(2, 6, 6), g0 @ r0.transpose(0, 2, 1))
    assert np.array_equal(np.asarray(dr).transpose(0, 3, 1, 2).reshape(2, 6, 6), l0.transpose(0, 2, 1) @ g0)


# ------------------------------------------------------------------------------ errors
def test_x64_off_refuses_at_use_time(rng):
    """The unit is a value (built whatever the flag says); its use without x64 raises TypeError
    naming both fixes, before anything is computed in float32."""
    assert not jax.config.jax_enable_x64
    unit = jwmma.Unit(F4, target="gfx90a")
    x, w = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    fix = r"jax_enable_x64 on.*jax.config.update\('jax_enable_x64', True\).*jwmma.gemm"
    for call in (lambda: jwmma.dot_general(x, w, (((1,), (0,)), ((), ())), unit=unit),
                 lambda: jwmma.einsum("tk,kn->tn", x, w, unit=unit),
                 lambda: jwmma.quant.effective_product(x, w, (((1,), (0,)), ((), ())), unit=unit),
                 lambda: jwmma.matmul(x, w, builtin=F4, target="gfx90a"),
                 lambda: jax.jit(lambda a, b: jwmma.einsum("tk,kn->tn", a, b, unit=unit))(x, w)):
        with pytest.raises(TypeError, match=fix):
            call()
    try:  # a layer of jwmma.nn with an f64 unit: the same error when it is called
        import jwmma.nn.equinox as eqx_nn
    except ImportError:
        eqx_nn = None
    if eqx_nn is not None:
        lin = eqx_nn.Linear(4, 2, use_bias=False, weight=jnp.ones((2, 4)), unit=unit)
        with pytest.raises(TypeError, match=fix):
            lin(jnp.ones((3, 4)))
    fp8 = jwmma.Unit("mfma_f32_16x16x32_fp8_fp8", scaling="none", backward=unit)  # before its forward pass
    with pytest.raises(TypeError, match="backward unit 'mfma_f64_4x4x4f64' needs jax_enable_x64 on"):
        jwmma.dot_general(x, w, (((1,), (0,)), ((), ())), unit=fp8)


def test_what_an_f64_unit_refuses(x64):
    """Every field and argument a user can get wrong: named, with what it takes and a hint."""
    cases = [
        (lambda: jwmma.Unit(F16, scaling="row"), ValueError, r"scaling='row'.*no narrower format.*scaling='none'"),
        (lambda: jwmma.Unit(F16, scaling="mx"), ValueError, r"no narrower format"),
        (lambda: jwmma.Unit(F16, formats=("fp8", "fp8")), ValueError, r"formats=.*block-scaled"),
        (lambda: jwmma.Unit(F16, backend="pallas"), ValueError, r"backend='pallas'.*no f64 MFMA kernel.*'xla'"),
        (lambda: jwmma.Unit(F16, model="exact"), ValueError, r"not a model for the f64 MFMA"),
        (lambda: jwmma.Unit(F16, target="gfx908"), ValueError, r"isGFX90APlus"),
    ]
    unit = jwmma.Unit(F16)
    x, i = jnp.ones((2, 4), jnp.float64), jnp.ones((4, 3), jnp.int32)
    dn = (((1,), (0,)), ((), ()))
    cases += [
        (lambda: jwmma.dot_general(x, i, dn, unit=unit), ValueError, r"rhs has dtype int32.*converted exactly to "
                                                                      r"float64.*astype\(jnp.float64\)"),
        (lambda: jwmma.dot_general(x, x.T, dn, None, jnp.int32, unit=unit), ValueError,
         r"preferred_element_type=int32.*pass None or one of"),
        (lambda: jwmma.dot_general(x, x.T, dn, jax.lax.Precision.HIGH, unit=unit), ValueError, r"precision="),
    ]
    for make, err, msg in cases:
        with pytest.raises(err, match=msg):
            make()
    # devices=/mesh= spread its GEMMs with the one-device bits (tests/sharding_cases.py): accepted
    assert jwmma.Unit(F16, devices=2, mesh_axes=("m",)).devices == 2
    # a unit changed to or from the f64 row follows the new row's default scaling
    assert jwmma.Unit().replace(builtin=F16, prune=False).scaling == "none"
    assert unit.replace(builtin="mfma_f32_16x16x32_fp8_fp8").scaling == "row"


# ------------------------------------------------------------------------------ grids (slow)
@pytest.mark.slow
@pytest.mark.parametrize("name,target", [(F16, "gfx942"), (F16, "gfx90a"), (F16, "gfx950"), (F4, "gfx942"),
                                         (F4, "gfx90a"), (F4, "gfx950")])
@pytest.mark.parametrize("kind", ["random", "adversarial"])
def test_dot_general_grid(rng, x64, name, target, kind):
    """Both rows on every chip; the bits are also those of jwmma.gemm on the same operands."""
    unit = jwmma.Unit(name, target=target)
    lhs, rhs, dn, lhs_c, rhs_c = _operands(rng, kind, g=3, n=9)
    y = jwmma.dot_general(lhs, rhs, dn, unit=unit)
    _same(y, _reference(lhs_c, rhs_c, 4), (name, target, kind))
    d = jwmma.gemm(jnp.asarray(np.swapaxes(rhs_c, 1, 2)), jnp.asarray(np.swapaxes(lhs_c, 1, 2)), builtin=name,
                   target=target)
    _same(np.swapaxes(np.asarray(d), 1, 2), y, "jwmma.gemm")


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16, jnp.float8_e4m3fnuz])
def test_narrow_dtypes_enter_exactly(rng, x64, dtype):
    """Operands of the narrow formats enter at their exact values; the result's float16 rounding
    is one RNE of the chain (numpy's cast), the prune option keeps the 2 largest of each 4."""
    unit = jwmma.Unit(F16, a="lhs")
    a = rng.standard_normal((6, 9)).astype(dtype)
    b = rng.standard_normal((9, 5)).astype(dtype)
    full = oracle.gemm(np.asarray(a, np.float64), np.asarray(b, np.float64), None, 4)
    y = jwmma.dot_general(a, b, (((1,), (0,)), ((), ())), None, jnp.float16, unit=unit)
    assert np.array_equal(np.asarray(y).view(np.uint16), full.astype(np.float16).view(np.uint16))
    pruned = np.asarray(jwmma.prune_2_4(np.pad(np.asarray(a, np.float64), ((0, 0), (0, 3)))))[:, :9]
    y = jwmma.dot_general(a, b, (((1,), (0,)), ((), ())), unit=unit.replace(prune=True))
    _same(y, oracle.gemm(pruned, np.asarray(b, np.float64), None, 4), "pruned")


@pytest.mark.slow
def test_matmul_vmap_and_nn(rng, x64):
    """jwmma.matmul gives float64 with an f64 unit; vmap over a batch is the batched call; an
    Equinox layer with an f64 unit computes the same contraction (a float64 result)."""
    x, w = float64_values(rng, (4, 5, 6), "adversarial"), float64_values(rng, (6, 3), "adversarial")
    want = np.stack([oracle.gemm(w.T, xb.T, None, 4).T for xb in x])
    y = jwmma.matmul(jnp.asarray(x), jnp.asarray(w), builtin=F16)
    assert y.dtype == np.float64
    _same(y, want, "matmul")
    unit = jwmma.Unit(F16)
    v = jax.vmap(lambda xb: jwmma.einsum("tk,kn->tn", xb, jnp.asarray(w), unit=unit))(jnp.asarray(x))
    _same(v, want, "vmap")
    eqx_nn = pytest.importorskip("jwmma.nn.equinox")
    lin = eqx_nn.Linear(6, 3, use_bias=False, weight=jnp.asarray(w.T), unit=unit)
    _same(lin(jnp.asarray(x)), want, "equinox")
