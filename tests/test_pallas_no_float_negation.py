"""No Pallas kernel negates a float with ``lax.neg``. Pallas' Triton lowering computes -x as
0 - x, which gives +0 for x = +0, so a kernel that negated a zero's magnitude returned +0 on a
GPU where the XLA model (and Python's arithmetic) give -0: an H100 did so for `exact` and
`fma_chain` calls whose products and C were all -0 (benchmarks/RESULTS.md). Interpret mode
runs the kernels through XLA, whose negation keeps the sign, so the bits cannot show it on a
CPU; the kernels' jaxprs can. Every kernel family's GEMM is traced (direct calls run the same
kernels through the same `matrix_path`) and each kernel body is searched, nested loops and
conditionals included."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jwmma

PALLAS = jwmma.Options(backend="pallas", pallas=jwmma.PallasOptions(interpret=True))

#: (builtin, model): every kernel family and operand kind
CASES = [
    ("smfmac_f32_16x16x128_fp8_fp8", None),  # fused groups, 3-D 8-bit kernel
    ("smfmac_f32_16x16x64_bf16", None),  # fused groups, 2-D integer kernel
    ("smfmac_f32_16x16x64_f16", None),
    ("swmmac_f32_16x16x32_f16_w32", None),  # gfx12_dot4
    ("swmmac_f16_16x16x32_f16_w32", None),
    ("wmma_f32_16x16x16_f16_w32_gfx12", "exact"),
    ("smfmac_f32_16x16x64_bf16", "exact"),
    ("smfmac_f32_16x16x128_fp8_fp8", "exact"),
    ("smfmac_f32_16x16x64_bf16", "fma_chain"),
    ("swmmac_f32_16x16x32_fp8_fp8_w32", "fma_chain"),
    ("mfma_scale_f32_16x16x128_f8f6f4", None),  # block-scaled
]


def _sub_jaxprs(value):
    if hasattr(value, "eqns"):  # a Jaxpr (duck-typed: its class moved between JAX versions)
        yield value
    elif hasattr(getattr(value, "jaxpr", None), "eqns"):  # a ClosedJaxpr
        yield value.jaxpr
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _sub_jaxprs(v)


def _equations(jaxpr, inside: bool = False):
    """(equation, whether it lies inside a pallas_call) for every equation of ``jaxpr`` and of
    the jaxprs nested in its equations' parameters."""
    for eqn in jaxpr.eqns:
        yield eqn, inside
        below = inside or eqn.primitive.name == "pallas_call"
        for v in eqn.params.values():
            for sub in _sub_jaxprs(v):
                yield from _equations(sub, below)


def _gemm_jaxpr(name, model):
    spec = jwmma.BUILTINS[name]
    m, n, k = 2 * spec.m, 2 * spec.n, 2 * spec.k
    kw = {}
    if spec.scaled:
        kw = dict(scale_a=np.full((m, k // 32), 127, np.uint8), scale_b=np.full((k // 32, n), 127, np.uint8))
    a = np.ones((m, k), jnp.float8_e4m3fn if spec.scaled else spec.a_format.dtype)  # scaled: fp8 x fp8
    b = np.ones((k, n), a.dtype if spec.scaled else spec.b_format.dtype)
    c = np.zeros((m, n), np.float32 if spec.c_type == "f32" else spec.c_format.dtype)
    fn = lambda a, b, c: jwmma.gemm(a, b, c, builtin=name, model=model, prune=not spec.dense,  # noqa: E731
                                    options=PALLAS, **kw)
    return jax.make_jaxpr(fn)(a, b, c).jaxpr


@pytest.mark.parametrize("name,model", CASES)
def test_kernels_set_sign_bits(name, model):
    eqns = list(_equations(_gemm_jaxpr(name, model)))
    assert any(e.primitive.name == "pallas_call" for e, _ in eqns), "the case must run a kernel"
    negations = [str(e) for e, inside in eqns
                 if inside and e.primitive.name == "neg" and jnp.issubdtype(e.outvars[0].aval.dtype, jnp.floating)]
    assert negations == []
