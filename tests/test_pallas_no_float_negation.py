"""No Pallas kernel negates a float with ``lax.neg``. Pallas' Triton lowering computes -x as
0 - x, which gives +0 for x = +0, so a kernel that negated a zero's magnitude returned +0 on a
GPU where the XLA model (and Python's arithmetic) give -0: an H100 did so for `exact` and
`fma_chain` calls whose products and C were all -0 (benchmarks/RESULTS.md). Interpret mode
runs the kernels through XLA, whose negation keeps the sign, so the bits cannot show it on a
CPU; the kernels' jaxprs can. Every kernel family is traced (GEMMs and direct calls) and
each kernel body is searched, nested loops and conditionals included."""
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


def _float_negations(jaxpr, inside: bool) -> list[str]:
    """Float ``neg`` equations of ``jaxpr`` that lie inside a pallas_call (``inside``: this
    jaxpr is a kernel body or nested in one)."""
    found = []
    for eqn in jaxpr.eqns:
        if inside and eqn.primitive.name == "neg" and jnp.issubdtype(eqn.outvars[0].aval.dtype, jnp.floating):
            found.append(str(eqn))
        below = inside or eqn.primitive.name == "pallas_call"
        for v in eqn.params.values():
            for sub in _sub_jaxprs(v):
                found += _float_negations(sub, below)
    return found


def _kernel_count(jaxpr) -> int:
    n = 0
    for eqn in jaxpr.eqns:
        n += eqn.primitive.name == "pallas_call"
        for v in eqn.params.values():
            n += sum(_kernel_count(sub) for sub in _sub_jaxprs(v))
    return n


def _gemm_jaxpr(name, model):
    spec = jwmma.BUILTINS[name]
    m, n, k = 2 * spec.m, 2 * spec.n, 2 * spec.k
    kw = {}
    if spec.scaled:
        kw = dict(scale_a=np.full((m, k // 32), 127, np.uint8), scale_b=np.full((k // 32, n), 127, np.uint8))
    a = np.ones((m, k), spec.a_format.dtype if not spec.scaled else np.float32).astype(
        spec.a_format.dtype if not spec.scaled else jnp.float8_e4m3fn)
    b = np.ones((k, n), a.dtype if spec.scaled else spec.b_format.dtype)
    c = np.zeros((m, n), np.float32 if spec.c_type == "f32" else spec.c_format.dtype)
    fn = lambda a, b, c: jwmma.gemm(a, b, c, builtin=name, model=model, prune=not spec.dense,  # noqa: E731
                                    options=PALLAS, **kw)
    return jax.make_jaxpr(fn)(a, b, c).jaxpr


@pytest.mark.parametrize("name,model", CASES)
def test_kernels_set_sign_bits(name, model):
    jaxpr = _gemm_jaxpr(name, model)
    assert _kernel_count(jaxpr) >= 1, "the case must run a kernel"
    assert _float_negations(jaxpr, False) == []
