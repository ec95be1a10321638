"""No warning from jwmma's code, on whatever JAX is installed (pyproject.toml makes every
warning of the suite an error; this file adds the paths the default CPU run does not take).

The Pallas kernels are traced inside `x64_scope` but lowered where the caller's program is
lowered, outside it. A kernel whose loop counter was int64 there made JAX 0.11 warn "Explicitly
requested dtype int64 ... will be truncated to dtype int32" once per contraction of a Flax model
on a GPU. Two checks here take that road without a GPU: the Pallas path in interpret mode (the
CPU's Pallas), and the GPU lowering itself (Triton), which JAX performs on any machine once it
is told the GPU's compute capability.
"""
from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest

import jwmma

DN = (((1,), (0,)), ((), ()))


def unit(**options):
    return jwmma.Unit("smfmac_f32_16x16x128_fp8_fp8", model="cdna3", scaling="row",
                      options=jwmma.Options(**options))


def forward_and_grad(u):
    """A contraction (dot_general) and its gradient (einsum), as a Flax layer would run them:
    one jitted function of (x (16, 256) f32, w (256, 32) f32) -> (y, dx, dw)."""
    def f(x, w):
        y = jwmma.dot_general(x, w, DN, unit=u)
        dx, dw = jax.grad(lambda x, w: jwmma.einsum("ij,jk->ik", x, w, unit=u).sum(), argnums=(0, 1))(x, w)
        return y, dx, dw

    return jax.jit(f)


def operands():
    x = jax.random.normal(jax.random.PRNGKey(0), (16, 256))
    w = jax.random.normal(jax.random.PRNGKey(1), (256, 32))
    return x, w


def test_pallas_path_in_a_users_jit_raises_no_warning():
    """The Pallas backend (interpret mode on a CPU) inside a user's jit, forward and backward."""
    x, w = operands()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y, dx, dw = forward_and_grad(unit(backend="pallas"))(x, w)
    assert y.shape == (16, 32) and dx.shape == x.shape and dw.shape == w.shape
    assert np.all(np.isfinite(np.asarray(y)))


@pytest.fixture
def gpu_lowering(monkeypatch):
    """Let JAX lower Pallas kernels for an H200 (compute capability 9.0) on a machine without a
    GPU. JAX 0.10 falls back to 9.0 by itself; JAX 0.11 asks the installed GPU for it and for
    nothing else, so that one question is answered here."""
    try:
        from jax._src.pallas.triton import pallas_call_registration as registration
    except ImportError as e:
        pytest.skip(f"this JAX has no Pallas Triton lowering ({e})")

    class H200:
        compute_capability = "9.0"

    if hasattr(registration, "gpu_info_lib"):
        monkeypatch.setattr(registration.gpu_info_lib, "get_gpu_info", lambda: H200())


@pytest.mark.parametrize("backend", ["pallas", "xla"])
def test_gpu_lowering_raises_no_warning(gpu_lowering, backend):
    """The programs a GPU would compile (the H200's defaults: Pallas, or XLA with tile_n 128 and
    no group dots), lowered for CUDA: tracing and lowering without a warning, JAX 0.11's
    deprecation of the Pallas Triton backend included (jwmma silences it: users are not told
    about jwmma's choice of backend)."""
    x, w = (jax.ShapeDtypeStruct(v.shape, v.dtype) for v in operands())
    u = unit(backend=backend, platform="gpu", group_dots=False, tile_n=128)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lowered = forward_and_grad(u).trace(x, w).lower(lowering_platforms=("cuda",))
    text = lowered.as_text()
    assert ("triton" in text) == (backend == "pallas")


def test_the_suite_makes_warnings_errors():
    """The suite's own setting (pyproject.toml): a warning raised in a test fails it."""
    with pytest.raises(UserWarning):
        warnings.warn("a warning", UserWarning)
