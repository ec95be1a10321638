"""jwmma.nn: the Flax (NNX, Linen) and Equinox layers compute jwmma.matmul(x, w) + bias with the
framework's own parameters, switch existing models over and back, and train (gradients flow
through the straight-through estimator). The core imports without Flax and Equinox.

The layers' arithmetic is `jwmma.matmul`'s (tests/test_matmul.py checks it against the spec);
here every output is compared bit for bit with a direct `jwmma.matmul` call. One shape per
layer (K = 64), model "exact": few compilations."""
from __future__ import annotations

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jwmma

KW = dict(model="exact")


def bits(x):
    return np.asarray(x).view(np.uint32)


def direct(x, kernel, bias):
    return np.asarray(jwmma.matmul(x, kernel, **KW) + bias)


def test_core_imports_without_flax_and_equinox():
    """With flax and equinox unimportable: `import jwmma` and matmul work, jwmma.nn imports, and
    its submodules raise an ImportError that says what to install."""
    code = """
import sys
for name in ("flax", "equinox"):
    sys.modules[name] = None  # import of it raises ImportError
import numpy as np, jwmma, jwmma.nn
assert "flax" not in dir(jwmma) or True
try:
    jwmma.nn.flax
except ImportError as e:
    assert "pip install 'jwmma[nn]'" in str(e), e
else:
    raise AssertionError("no ImportError")
try:
    import jwmma.nn.equinox
except ImportError as e:
    assert "equinox" in str(e) and "pip install" in str(e), e
else:
    raise AssertionError("no ImportError")
print("ok", jwmma.matmul(np.ones((1, 4), np.float32), np.ones((4, 1), np.float32), model="exact").shape)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "ok (1, 1)" in out.stdout


# ------------------------------------------------------------------ Flax NNX
def test_nnx_linear_emulate_restore():
    nnx = pytest.importorskip("flax.nnx")
    jf = pytest.importorskip("jwmma.nn.flax")

    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.l1 = nnx.Linear(64, 64, rngs=rngs)
            self.l2 = nnx.Linear(64, 16, rngs=rngs)

        def __call__(self, x):
            return self.l2(nnx.relu(self.l1(x)))

    x = jax.random.normal(jax.random.PRNGKey(1), (8, 64))
    m = MLP(nnx.Rngs(0))
    native = np.asarray(m(x))
    jf.emulate(m, **KW)
    h = np.maximum(direct(x, m.l1.kernel[...], m.l1.bias[...]), 0)
    want = direct(h, m.l2.kernel[...], m.l2.bias[...])
    np.testing.assert_array_equal(bits(m(x)), bits(want))
    assert not np.array_equal(np.asarray(m(x)), native)

    jf.restore(m)
    assert m.l1.dot_general is jax.lax.dot_general
    with jf.emulated(m, **KW):
        assert isinstance(m.l2.dot_general, jf.DotGeneral)
    assert m.l2.dot_general is jax.lax.dot_general

    lin = jf.Linear(64, 64, rngs=nnx.Rngs(2), **KW)  # built directly: nnx.Linear's parameters
    assert lin.kernel[...].shape == (64, 64)
    np.testing.assert_array_equal(bits(lin(x)), bits(direct(x, lin.kernel[...], lin.bias[...])))
    with pytest.raises(ValueError, match="scaling must be one of"):
        jf.Linear(64, 64, rngs=nnx.Rngs(2), scaling="rows")


def test_linen_dense_intercepted():
    linen = pytest.importorskip("flax.linen")
    jf = pytest.importorskip("jwmma.nn.flax")

    class MLP(linen.Module):
        @linen.compact
        def __call__(self, x):
            h = linen.relu(linen.Dense(64, name="hidden")(x))
            return linen.Dense(16, name="out")(h)

    x = jax.random.normal(jax.random.PRNGKey(1), (8, 64))
    model = MLP()
    params = model.init(jax.random.PRNGKey(0), x)
    with jf.intercept_dense(**KW):
        y = model.apply(params, x)
    p = params["params"]
    h = np.maximum(direct(x, p["hidden"]["kernel"], p["hidden"]["bias"]), 0)
    np.testing.assert_array_equal(bits(y), bits(direct(h, p["out"]["kernel"], p["out"]["bias"])))
    assert not np.array_equal(np.asarray(model.apply(params, x)), np.asarray(y))  # only inside the block


# ------------------------------------------------------------------ Equinox
def test_equinox_emulate_vmap_restore():
    eqx = pytest.importorskip("equinox")
    je = pytest.importorskip("jwmma.nn.equinox")

    mlp = eqx.nn.MLP(64, 16, 64, 1, key=jax.random.PRNGKey(0))
    x = jax.random.normal(jax.random.PRNGKey(1), (8, 64))
    em = je.emulate(mlp, **KW)
    assert all(isinstance(layer, je.Linear) for layer in em.layers)
    l1, l2 = mlp.layers
    h = np.maximum(direct(x, l1.weight.T, l1.bias), 0)
    want = direct(h, l2.weight.T, l2.bias)
    np.testing.assert_array_equal(bits(jax.vmap(em)(x)), bits(want))  # per example, vmapped
    np.testing.assert_array_equal(bits(em.layers[0](x)), bits(direct(x, l1.weight.T, l1.bias)))  # a batch

    back = je.restore(em)
    assert all(type(layer) is eqx.nn.Linear for layer in back.layers)
    np.testing.assert_array_equal(np.asarray(back.layers[0].weight), np.asarray(l1.weight))
    with pytest.raises(ValueError, match="key="):
        je.Linear(4, 4)


@pytest.mark.slow  # ~30 s: each framework's training step compiles its own program
def test_training_steps_descend():
    """A few plain gradient steps through each framework's switched model lower the loss (the
    straight-through gradient flows through nnx.grad and eqx.filter_grad; dw is dense)."""
    nnx = pytest.importorskip("flax.nnx")
    eqx = pytest.importorskip("equinox")
    jf = pytest.importorskip("jwmma.nn.flax")
    je = pytest.importorskip("jwmma.nn.equinox")
    x = jax.random.normal(jax.random.PRNGKey(1), (8, 64))

    m = jf.emulate(nnx.Linear(64, 16, rngs=nnx.Rngs(0)), **KW)

    @nnx.jit
    def step(m, x):
        loss, g = nnx.value_and_grad(lambda m: jnp.mean(m(x) ** 2))(m)
        nnx.update(m, jax.tree_util.tree_map(lambda p, d: p - 0.1 * d, nnx.state(m, nnx.Param), g))
        return loss

    losses = [float(step(m, x)) for _ in range(3)]
    assert losses[2] < losses[0]

    em = je.emulate(eqx.nn.MLP(64, 16, 64, 1, key=jax.random.PRNGKey(0)), **KW)
    loss = lambda m: jnp.mean(jax.vmap(m)(x) ** 2)  # noqa: E731
    grads = eqx.filter_jit(eqx.filter_grad(loss))(em)
    assert np.count_nonzero(grads.layers[0].weight) > 0.9 * grads.layers[0].weight.size  # dense dw
    new = eqx.apply_updates(em, jax.tree_util.tree_map(lambda d: -0.1 * d, grads))
    assert float(loss(new)) < float(loss(em))
