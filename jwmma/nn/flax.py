"""Flax layers whose matmul is `jwmma.matmul` (API.md section 9).

Flax's own recommendation is the NNX API (``flax.nnx``, the default since Flax 0.11): `Linear`
is an ``nnx.Linear`` whose ``dot_general`` is jwmma's, so its parameters (``kernel`` (in, out),
``bias``), initialisers, dtypes and checkpoints are those of ``nnx.Linear``. `emulate` switches
every ``nnx.Linear`` of an existing model over in place (the parameters stay where they are),
`emulated` does it for a ``with`` block, `restore` undoes it. For Linen models,
`intercept_dense` is a context in which every ``flax.linen.Dense`` call runs through jwmma
(``flax.linen.intercept_methods``).

The kernel (in, out) is matmul's w (K, N): pruned 2:4 along the input features, the builtin's
A. ``precision`` and ``preferred_element_type`` of the layer are ignored (the builtin decides
the arithmetic; the result is float32, then the layer's bias is added).
"""
from __future__ import annotations

import contextlib
import dataclasses

from . import require
from ..quant import MatmulConfig, apply, config

_flax = require("flax")
from flax import linen, nnx  # noqa: E402

__all__ = ["Linear", "DotGeneral", "emulate", "emulated", "restore", "intercept_dense"]


@dataclasses.dataclass(frozen=True)
class DotGeneral:
    """A ``dot_general`` for ``nnx.Linear``: the contraction of x's last axis with the kernel's
    first, through `jwmma.matmul` with ``config`` (a `jwmma.quant.MatmulConfig`). Hashable, so
    it is static metadata of the module (part of the jit key, never a traced value)."""

    config: MatmulConfig

    def __call__(self, lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, **unused):
        (lc, rc), (lb, rb) = dimension_numbers
        if tuple(lb) or tuple(rb) or tuple(lc) != (lhs.ndim - 1,) or tuple(rc) != (0,) or rhs.ndim != 2:
            raise ValueError(f"jwmma's dot_general computes x (..., K) @ w (K, N) only, got dimension_numbers "
                             f"{dimension_numbers} for shapes {lhs.shape} x {rhs.shape}")
        return apply(self.config, lhs, rhs)


def _dot(kw) -> DotGeneral:
    return DotGeneral(config(**kw))


class Linear(nnx.Linear):
    """``nnx.Linear(in_features, out_features, ...)`` through jwmma's matmul.

    Args:
        in_features, out_features, rngs and every other keyword of ``nnx.Linear``.
        builtin, model, scaling, prune, target, backend, options, devices, mesh, mesh_axes:
            `jwmma.matmul`'s keywords (default: CDNA4 fp8, its default model, row scaling,
            2:4 pruning).
    Call: x (..., in_features) -> (..., out_features) float32 (plus the bias).
    """

    def __init__(self, in_features: int, out_features: int, *, builtin: str = "smfmac_f32_16x16x128_fp8_fp8",
                 model=None, scaling: str = "row", prune: bool = True, target=None, backend=None, options=None,
                 devices=None, mesh=None, mesh_axes=None, **kwargs):
        dot = _dot(dict(builtin=builtin, model=model, scaling=scaling, prune=prune, target=target, backend=backend,
                        options=options, devices=devices, mesh=mesh, mesh_axes=mesh_axes))
        if "dot_general" in kwargs:
            raise ValueError("jwmma.nn.flax.Linear sets dot_general itself; use nnx.Linear for another one")
        super().__init__(in_features, out_features, dot_general=dot, **kwargs)


def _linears(model):
    found = nnx.iter_modules(model) if hasattr(nnx, "iter_modules") else model.iter_modules()  # Flax < 0.12
    return [m for _, m in found if isinstance(m, nnx.Linear)]


def emulate(module, /, **matmul_keywords):
    """Switch every ``nnx.Linear`` of ``module`` (itself included) to jwmma's matmul, in place.

    Args:
        module: an ``nnx.Module`` (positional: ``model=`` is matmul's keyword).
        **matmul_keywords: `jwmma.matmul`'s keywords (builtin, model, scaling, ...).
    Returns:
        ``module`` (the same object; the parameters are untouched, only each layer's
        ``dot_general`` changes). The original dot_generals are kept for `restore`.
    """
    dot = _dot(matmul_keywords)
    for lin in _linears(module):
        if not isinstance(lin.dot_general, DotGeneral):
            lin._jwmma_original_dot = lin.dot_general
        lin.dot_general = dot
    return module


def restore(module, /):
    """Undo `emulate`: every switched ``nnx.Linear`` gets its original ``dot_general`` back
    (layers built as `Linear` keep jwmma's). Returns ``module``."""
    for lin in _linears(module):
        original = getattr(lin, "_jwmma_original_dot", None)
        if original is not None:
            lin.dot_general = original
            del lin._jwmma_original_dot
    return module


@contextlib.contextmanager
def emulated(module, /, **matmul_keywords):
    """``with emulated(module, builtin=...):`` every ``nnx.Linear`` of the module runs through
    jwmma inside the block and is restored after it."""
    emulate(module, **matmul_keywords)
    try:
        yield module
    finally:
        restore(module)


@contextlib.contextmanager
def intercept_dense(**matmul_keywords):
    """A context in which every ``flax.linen.Dense`` call computes x @ kernel with
    `jwmma.matmul` (then adds its bias), for Linen models: ``with intercept_dense(builtin=...):
    y = model.apply(params, x)``. Initialisation runs unchanged."""
    cfg = config(**matmul_keywords)

    def interceptor(next_fun, args, kwargs, context):
        mod = context.module
        if not isinstance(mod, linen.Dense) or context.method_name != "__call__" or mod.is_initializing():
            return next_fun(*args, **kwargs)
        kernel = linen.meta.unbox(mod.get_variable("params", "kernel"))
        y = apply(cfg, args[0], kernel)
        if mod.use_bias:
            y = y + linen.meta.unbox(mod.get_variable("params", "bias"))
        return y

    with linen.intercept_methods(interceptor):
        yield
