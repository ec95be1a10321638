"""A `jwmma.Unit` plugged into Flax and Equinox (API.md section 11): layers that take a
``dot_general`` / ``einsum_op`` give the bits of `jwmma.dot_general` / `jwmma.einsum` on the same
operands (tests/test_dot_general.py checks those against references), and differ from the float32
layer; the qwix provider routes every contraction of an unmodified Linen or NNX transformer
(attention einsums, Dense/Linear layers, a tied-embedding ``attend`` = ``jnp.dot``, ``@``) through
the unit: as many as the native forward pass has ``dot_general`` equations.

All GEMMs here have one of two canonical shapes (N = 8 tokens, K = 16, M = 16; or 2 heads of
8 x 8 x 8), so the whole file compiles few programs."""
from __future__ import annotations

import functools
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jwmma

UNIT = jwmma.Unit("smfmac_f32_16x16x128_fp8_fp8", model="exact", scaling="row")
DG = functools.partial(jwmma.dot_general, unit=UNIT)
LAST_FIRST = (((2,), (0,)), ((), ()))


def bits(x):
    return np.asarray(x).view(np.uint32)


def tokens_x():
    return jax.random.normal(jax.random.PRNGKey(1), (2, 4, 16))


def count_dot_generals(jaxpr) -> int:
    """dot_general equations of a jaxpr, nested jaxprs (pjit, custom_vjp, scan...) included."""
    n = 0
    for eqn in jaxpr.eqns:
        n += eqn.primitive.name == "dot_general"
        for value in eqn.params.values():
            for sub in value if isinstance(value, (list, tuple)) else (value,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    n += count_dot_generals(inner)
    return n


# ------------------------------------------------------------------ Flax Linen
def test_linen_dense_and_dense_general():
    linen = pytest.importorskip("flax.linen")
    x = tokens_x()
    dense = linen.Dense(16, dot_general=DG)
    p = dense.init(jax.random.PRNGKey(0), x)["params"]
    want = np.asarray(jwmma.dot_general(x, p["kernel"], LAST_FIRST, unit=UNIT) + p["bias"])
    y = dense.apply({"params": p}, x)
    np.testing.assert_array_equal(bits(y), bits(want))
    assert not np.array_equal(np.asarray(linen.Dense(16).apply({"params": p}, x)), want)  # the unit quantises

    heads = linen.DenseGeneral((2, 8), axis=-1, dot_general=DG)  # kernel (16, 2, 8)
    p = heads.init(jax.random.PRNGKey(0), x)["params"]
    want = jwmma.dot_general(x, p["kernel"], LAST_FIRST, unit=UNIT) + p["bias"]
    np.testing.assert_array_equal(bits(heads.apply({"params": p}, x)), bits(want))

    xh = x.reshape(2, 4, 2, 8)
    merge = linen.DenseGeneral(16, axis=(-2, -1), dot_general=DG)  # kernel (2, 8, 16): K = 2 x 8
    p = merge.init(jax.random.PRNGKey(0), xh)["params"]
    want = jwmma.dot_general(xh, p["kernel"], (((2, 3), (0, 1)), ((), ())), unit=UNIT) + p["bias"]
    np.testing.assert_array_equal(bits(merge.apply({"params": p}, xh)), bits(want))
    assert not np.array_equal(np.asarray(linen.DenseGeneral(16, axis=(-2, -1)).apply({"params": p}, xh)),
                              np.asarray(want))


# ------------------------------------------------------------------ Flax NNX
def test_nnx_linear_and_einsum():
    nnx = pytest.importorskip("flax.nnx")
    x = tokens_x()
    lin = nnx.Linear(16, 16, dot_general=DG, rngs=nnx.Rngs(0))
    want = np.asarray(jwmma.dot_general(x, lin.kernel[...], LAST_FIRST, unit=UNIT) + lin.bias[...])
    np.testing.assert_array_equal(bits(lin(x)), bits(want))
    native = nnx.Linear(16, 16, rngs=nnx.Rngs(0))
    assert not np.array_equal(np.asarray(native(x)), want)

    ein = nnx.Einsum("bsk,kn->bsn", (16, 16), (16,), einsum_op=functools.partial(jwmma.einsum, unit=UNIT),
                     rngs=nnx.Rngs(0))
    want = np.asarray(jwmma.einsum("bsk,kn->bsn", x, ein.kernel[...], unit=UNIT) + ein.bias[...])
    np.testing.assert_array_equal(bits(ein(x)), bits(want))
    assert not np.array_equal(np.asarray(nnx.Einsum("bsk,kn->bsn", (16, 16), (16,), rngs=nnx.Rngs(0))(x)), want)

    jf = pytest.importorskip("jwmma.nn.flax")
    jf.emulate(native, UNIT)  # the switch of existing layers takes a unit too
    assert native.dot_general == jf.DotGeneral(UNIT)
    np.testing.assert_array_equal(bits(native(x)), bits(lin(x)))
    with pytest.raises(TypeError, match="either unit= or matmul's keywords"):
        jf.emulate(native, UNIT, scaling="none")


# ------------------------------------------------------------------ Equinox
def test_equinox_emulate_with_a_unit():
    eqx = pytest.importorskip("equinox")
    je = pytest.importorskip("jwmma.nn.equinox")
    lin = eqx.nn.Linear(16, 16, key=jax.random.PRNGKey(0))
    model = je.emulate([lin], UNIT)
    assert isinstance(model[0], je.Linear) and model[0].unit == UNIT
    x = tokens_x().reshape(8, 16)
    want = jwmma.dot_general(x, lin.weight, (((1,), (1,)), ((), ())), unit=UNIT) + lin.bias
    np.testing.assert_array_equal(bits(model[0](x)), bits(want))
    assert not np.array_equal(np.asarray(jax.vmap(lin)(x)), np.asarray(want))
    with pytest.raises(TypeError, match="either unit= or matmul's keywords"):
        je.emulate([lin], UNIT, model="cdna3")


# ------------------------------------------------------------------ qwix: unmodified models
def linen_lm():
    linen = pytest.importorskip("flax.linen")

    class Block(linen.Module):
        @linen.compact
        def __call__(self, x):
            x = x + linen.MultiHeadDotProductAttention(num_heads=2, qkv_features=16, name="attention")(
                linen.LayerNorm()(x))  # q, k, v, out: DenseGeneral; scores and mix: jnp.einsum
            h = linen.gelu(linen.Dense(16, name="up")(linen.LayerNorm()(x)))
            h = linen.Einsum((16, 16), "bsd,de->bse", name="down")(h)  # Linen's Einsum: no hook of its own
            return x + h

    class LM(linen.Module):
        @linen.compact
        def __call__(self, tok):
            embed = linen.Embed(16, 16)
            return embed.attend(Block(name="block")(embed(tok)))  # tied logits: jnp.dot

    return LM()


def test_qwix_routes_every_contraction_of_a_linen_transformer():
    qwix = pytest.importorskip("qwix")
    jq = pytest.importorskip("jwmma.nn.qwix")
    model = linen_lm()
    tok = jnp.arange(8).reshape(1, 8) % 16
    params = model.init(jax.random.PRNGKey(0), tok)
    native = np.asarray(model.apply(params, tok))
    n_native = count_dot_generals(jax.make_jaxpr(model.apply)(params, tok).jaxpr)
    assert n_native == 9  # 4 projections, 2 attention einsums, up, down, logits

    provider = jq.provider([jq.Rule(".*", UNIT)])
    qmodel = qwix.quantize_model(model, provider)
    provider.reset_counts()
    y = np.asarray(qmodel.apply(params, tok))
    assert sum(n for (_, route), n in provider.counts.items() if route == "unit") == n_native
    assert provider.counts == {("dot_general", "unit"): 5, ("einsum", "unit"): 3, ("dot", "unit"): 1}
    assert np.all(np.isfinite(y)) and not np.allclose(y, native, atol=1e-3)  # pruned, fp8: far from native
    np.testing.assert_array_equal(np.asarray(model.apply(params, tok)), native)  # the native model is untouched

    # the first matching rule decides; unit None keeps those modules native, explicitly
    provider = jq.provider([jq.Rule("block/attention.*", None), jq.Rule(".*", UNIT)])
    qmodel = qwix.quantize_model(model, provider)
    provider.reset_counts()
    qmodel.apply(params, tok)
    assert provider.counts == {("dot_general", "native"): 4, ("einsum", "native"): 2, ("dot_general", "unit"): 1,
                               ("einsum", "unit"): 1, ("dot", "unit"): 1}


def test_qwix_routes_every_contraction_of_an_nnx_transformer():
    qwix = pytest.importorskip("qwix")
    nnx = pytest.importorskip("flax.nnx")
    jq = pytest.importorskip("jwmma.nn.qwix")

    class LM(nnx.Module):
        def __init__(self, rngs):
            self.embed = nnx.Embed(16, 16, rngs=rngs)
            self.attention = nnx.MultiHeadAttention(num_heads=2, in_features=16, decode=False, rngs=rngs)
            self.up = nnx.Linear(16, 16, rngs=rngs)
            self.down = nnx.Einsum("bsd,de->bse", (16, 16), rngs=rngs)
            self.mix = nnx.Param(jax.random.normal(jax.random.PRNGKey(3), (16, 16)))

        def __call__(self, tok):
            x = self.embed(tok)
            x = x + self.attention(x)
            x = x + self.down(nnx.gelu(self.up(x))) @ self.mix[...]  # the @ operator: jnp.matmul
            return self.embed.attend(x)

    tok = jnp.arange(8).reshape(1, 8) % 16
    model = LM(nnx.Rngs(0))
    native = np.asarray(model(tok))
    graph, state = nnx.split(model)
    n_native = count_dot_generals(jax.make_jaxpr(lambda s, t: nnx.merge(graph, s)(t))(state, tok).jaxpr)
    assert n_native == 10

    provider = jq.provider(UNIT)  # one unit: Rule(".*", unit)
    qmodel = qwix.quantize_model(model, provider, tok)
    provider.reset_counts()
    y = np.asarray(qmodel(tok))
    assert provider.counts == {("dot_general", "unit"): 5, ("einsum", "unit"): 3, ("dot", "unit"): 1,
                               ("matmul", "unit"): 1}
    assert sum(provider.counts.values()) == n_native
    assert not np.allclose(y, native, atol=1e-3)
    np.testing.assert_array_equal(np.asarray(model(tok)), native)


def test_provider_rejects_bad_rules():
    pytest.importorskip("qwix")
    jq = pytest.importorskip("jwmma.nn.qwix")
    with pytest.raises(TypeError, match="Rule values"):
        jq.provider(["smfmac_f32_16x16x128_fp8_fp8"])
    with pytest.raises(ValueError, match="no regular expression"):
        jq.Rule("(", UNIT)
    with pytest.raises(TypeError, match="jwmma.Unit or None"):
        jq.Rule(".*", {"builtin": "x"})
    with pytest.raises(ValueError, match="op_names"):
        jq.Rule(".*", UNIT, op_names=("conv",))


def test_core_imports_without_qwix():
    """qwix is optional: `import jwmma` and dot_general work without it, and jwmma.nn.qwix says
    what to install."""
    code = """
import sys
sys.modules["qwix"] = None
import numpy as np, jwmma
try:
    import jwmma.nn.qwix
except ImportError as e:
    assert "pip install 'jwmma[qwix]'" in str(e), e
else:
    raise AssertionError("no ImportError")
print("ok", "qwix" in sys.modules and sys.modules["qwix"] is not None)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "ok False" in out.stdout


@pytest.mark.slow  # the whole model compiles as one program
def test_qwix_under_jit_gives_the_eager_bits():
    qwix = pytest.importorskip("qwix")
    jq = pytest.importorskip("jwmma.nn.qwix")
    model = linen_lm()
    tok = jnp.arange(8).reshape(1, 8) % 16
    params = model.init(jax.random.PRNGKey(0), tok)
    provider = jq.provider(UNIT)
    qmodel = qwix.quantize_model(model, provider)
    eager = qmodel.apply(params, tok)
    provider.reset_counts()
    jitted = jax.jit(qmodel.apply)(params, tok)
    assert sum(provider.counts.values()) == 9
    np.testing.assert_array_equal(bits(jitted), bits(eager))


@pytest.mark.slow  # new GEMM shapes (jnp.einsum orders the pairwise products itself)
def test_qwix_einsums_beyond_one_product():
    """Einsums that are no single product (three operands, a summed label, the interleaved form)
    run jnp.einsum with the unit's dot_general for each pairwise product; one operand is no
    contraction and stays native."""
    qwix = pytest.importorskip("qwix")
    linen = pytest.importorskip("flax.linen")
    jq = pytest.importorskip("jwmma.nn.qwix")

    class M(linen.Module):
        @linen.compact
        def __call__(self, x):
            w = self.param("w", linen.initializers.normal(), (16, 16))
            return (jnp.einsum("ij,jk,kl->il", x, w, w).sum() + jnp.einsum("ij,jk->i", x, w).sum()
                    + jnp.einsum(x, [0, 1], w, [1, 2], [0, 2]).sum() + jnp.einsum("ii->i", w).sum())

    x = tokens_x().reshape(8, 16)
    params = M().init(jax.random.PRNGKey(0), x)
    n_native = count_dot_generals(jax.make_jaxpr(M().apply)(params, x).jaxpr)
    provider = jq.provider(UNIT)
    qmodel = qwix.quantize_model(M(), provider)
    provider.reset_counts()
    y = qmodel.apply(params, x)
    assert provider.counts == {("einsum", "unit"): 3} and n_native == 4  # the 3-operand einsum: 2 products
    assert np.isfinite(y) and y != M().apply(params, x)


@pytest.mark.slow  # ~1 min on 2 cores: the 7 emulated GEMMs of the transformer compile twice (unit, exact twin)
def test_bench_dot_general_small(tmp_path):
    """benchmarks/bench_dot_general.py --small runs on a CPU and writes its rows and the split of
    the unit's change of the logits."""
    import json
    import pathlib

    pytest.importorskip("flax")
    script = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "bench_dot_general.py"
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(script), "--small", "--repeat", "1", "--json", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(out.read_text())
    assert [r["pass_"].split()[0] for r in got["rows"]] == ["native", "unit"] and got["ratio"]["median_s"] > 0
    assert "| ratio unit / native |" in proc.stdout
    e = got["logit_errors"]  # the default unit (sparse fp8, cdna3) prunes: every share is measured
    assert all(e[k] >= 0 for k in ("accumulator", "quantisation", "pruning", "total"))
    assert e["accumulator"] < 1e-4 < e["quantisation"] and e["twin"]["model"] == "exact"
    assert "  accumulator " in proc.stdout and "  quantisation " in proc.stdout
