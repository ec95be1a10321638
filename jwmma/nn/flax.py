"""Flax layers whose matmul is `jwmma.matmul` (API.md section 9) and any contraction a
`jwmma.Unit` (API.md section 11).

Flax's own recommendation is the NNX API (``flax.nnx``, the default since Flax 0.11): `Linear`
is an ``nnx.Linear`` whose ``dot_general`` is jwmma's, so its parameters (``kernel`` (in, out),
``bias``), initialisers, dtypes and checkpoints are those of ``nnx.Linear``. `emulate` switches
every ``nnx.Linear`` of an existing model over in place (the parameters stay where they are),
`emulated` does it for a ``with`` block, `restore` undoes it. For Linen models,
`intercept_dense` is a context in which every ``flax.linen.Dense`` call runs through jwmma
(``flax.linen.intercept_methods``).

The kernel (in, out) is matmul's w (K, N): pruned 2:4 along the input features, the builtin's
A. The layer's ``dot_general`` is `jwmma.dot_general` with the unit (`DotGeneral`): lax's
contract, so the result dtype follows the inputs (or ``preferred_element_type``; float64 for an
f64 unit, which needs ``jax_enable_x64`` on), and a ``precision`` other than None/DEFAULT/HIGHEST
is refused (the unit decides the arithmetic).

Any Flax layer that takes a ``dot_general`` (Linen ``Dense``/``DenseGeneral``, NNX
``Linear``/``LinearGeneral``) takes ``functools.partial(jwmma.dot_general, unit=unit)`` or
``DotGeneral(unit)``; NNX ``Einsum`` takes ``einsum_op=functools.partial(jwmma.einsum,
unit=unit)``. Linen's ``Einsum`` has no such hook: `jwmma.nn.qwix` reaches it.
"""
from __future__ import annotations

import contextlib
import dataclasses

from . import require, unit_of
from ..quant import Unit, dot_general

_flax = require("flax")
from flax import linen, nnx  # noqa: E402

__all__ = ["Linear", "DotGeneral", "emulate", "emulated", "restore", "intercept_dense"]


@dataclasses.dataclass(frozen=True)
class DotGeneral:
    """A layer's ``dot_general``: `jwmma.dot_general` with ``unit`` (a `jwmma.Unit`). Hashable
    and compared by value, so it is static metadata of an NNX module (part of the jit key,
    never a traced value) and two layers with equal units share their compiled programs."""

    unit: Unit

    @property
    def config(self) -> Unit:
        """The unit (the former name of this field)."""
        return self.unit

    def __call__(self, lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, out_sharding=None):
        return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type, unit=self.unit,
                           out_sharding=out_sharding)


def _dot(unit, kw, where) -> DotGeneral:
    return DotGeneral(unit_of(unit, kw, where))


class Linear(nnx.Linear):
    """``nnx.Linear(in_features, out_features, ...)`` through jwmma's matmul.

    Args:
        in_features, out_features, rngs and every other keyword of ``nnx.Linear``.
        unit: a `jwmma.Unit`; or
        builtin, model, scaling, prune, target, backend, options, devices, mesh, mesh_axes:
            `jwmma.matmul`'s keywords (default: CDNA4 fp8, its default model, row scaling,
            2:4 pruning).
    Call: x (..., in_features) -> (..., out_features) (plus the bias), the dtype of x and the
    kernel promoted (float32 for a float32 layer).
    """

    def __init__(self, in_features: int, out_features: int, *, unit: Unit | None = None,
                 builtin: str = "smfmac_f32_16x16x128_fp8_fp8", model=None, scaling: str | None = None, prune: bool | None = None,
                 target=None, backend=None, options=None, devices=None, mesh=None, mesh_axes=None, **kwargs):
        dot = _dot(unit, dict(builtin=builtin, model=model, scaling=scaling, prune=prune, target=target,
                              backend=backend, options=options, devices=devices, mesh=mesh, mesh_axes=mesh_axes),
                   "jwmma.nn.flax.Linear")
        if "dot_general" in kwargs:
            raise ValueError("jwmma.nn.flax.Linear sets dot_general itself; use nnx.Linear for another one")
        super().__init__(in_features, out_features, dot_general=dot, **kwargs)


def _linears(model):
    found = nnx.iter_modules(model) if hasattr(nnx, "iter_modules") else model.iter_modules()  # Flax < 0.12
    return [m for _, m in found if isinstance(m, nnx.Linear)]


def emulate(module, /, unit: Unit | None = None, **matmul_keywords):
    """Switch every ``nnx.Linear`` of ``module`` (itself included) to jwmma's matmul, in place.

    Args:
        module: an ``nnx.Module`` (positional: ``model=`` is matmul's keyword).
        unit: a `jwmma.Unit`; or
        **matmul_keywords: `jwmma.matmul`'s keywords (builtin, model, scaling, ...).
    Returns:
        ``module`` (the same object; the parameters are untouched, only each layer's
        ``dot_general`` changes to `DotGeneral`). The original dot_generals are kept for
        `restore`.
    """
    dot = _dot(unit, matmul_keywords, "jwmma.nn.flax.emulate")
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
def emulated(module, /, unit: Unit | None = None, **matmul_keywords):
    """``with emulated(module, unit):`` (or matmul's keywords) every ``nnx.Linear`` of the
    module runs through jwmma inside the block and is restored after it."""
    emulate(module, unit, **matmul_keywords)
    try:
        yield module
    finally:
        restore(module)


@contextlib.contextmanager
def intercept_dense(unit: Unit | None = None, **matmul_keywords):
    """A context in which every ``flax.linen.Dense`` call computes x @ kernel through the unit
    (``unit=`` or `jwmma.matmul`'s keywords; then adds its bias), for Linen models: ``with
    intercept_dense(unit): y = model.apply(params, x)``. Initialisation runs unchanged.
    (``linen.Dense(dot_general=functools.partial(jwmma.dot_general, unit=unit))`` does the same
    for a layer you build; `jwmma.nn.qwix` reaches every contraction of a model.)"""
    dot = _dot(unit, matmul_keywords, "jwmma.nn.flax.intercept_dense")

    def interceptor(next_fun, args, kwargs, context):
        mod = context.module
        if not isinstance(mod, linen.Dense) or context.method_name != "__call__" or mod.is_initializing():
            return next_fun(*args, **kwargs)
        kernel = linen.meta.unbox(mod.get_variable("params", "kernel"))
        x = args[0]
        y = dot(x, kernel, (((x.ndim - 1,), (0,)), ((), ())))
        if mod.use_bias:
            y = y + linen.meta.unbox(mod.get_variable("params", "bias"))
        return y

    with linen.intercept_methods(interceptor):
        yield
