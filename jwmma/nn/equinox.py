"""Equinox layers whose matmul is `jwmma.matmul` (API.md section 9) or a `jwmma.Unit`'s
`jwmma.dot_general` (API.md section 11).

`Linear` has the fields of ``equinox.nn.Linear`` (``weight`` (out, in), ``bias`` (out,),
``in_features``, ``out_features``, ``use_bias``) plus the static matmul configuration, and is
called like it: one example x (in,) -> (out,) (``jax.vmap`` it over a batch, as Equinox
does; jwmma's matmul batches under vmap), or any (..., in) directly. `emulate` is a tree
transform that replaces every ``equinox.nn.Linear`` of a model (an ``eqx.nn.MLP``, a
transformer...) by `Linear` with the same arrays; `restore` turns them back.

weight^T (in, out) is matmul's w (K, N): pruned 2:4 along the input features, the builtin's A.
The layer computes ``jwmma.dot_general(x, weight, contracting x's last dim with weight's
second, unit=unit)``: the bits of ``jwmma.matmul(x, weight.T)``, the dtype of x and the weight
promoted (float32 for a float32 layer), as ``equinox.nn.Linear``'s own product. An f64 unit
(the f64 MFMA) gives float64, with ``jax_enable_x64`` on (a TypeError naming the fix otherwise).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from . import require, unit_of
from ..quant import Unit, dot_general

eqx = require("equinox")

__all__ = ["Linear", "emulate", "restore"]


class Linear(eqx.Module):
    """``equinox.nn.Linear`` through jwmma's matmul.

    Args:
        in_features, out_features, use_bias, dtype, key: as ``equinox.nn.Linear`` (the
            weights are drawn by it); or ``weight`` and ``bias`` given (no key needed).
        unit: a `jwmma.Unit`; or
        builtin, model, scaling, prune, target, backend, options, devices, mesh, mesh_axes:
            `jwmma.matmul`'s keywords.
    Call: x (in,) or (..., in) -> (out,) / (..., out) (plus the bias), float32 for float32
    x and weight; ``'scalar'`` features as in Equinox.
    """

    weight: jax.Array
    bias: jax.Array | None
    in_features: int | str = eqx.field(static=True)
    out_features: int | str = eqx.field(static=True)
    use_bias: bool = eqx.field(static=True)
    unit: Unit = eqx.field(static=True)

    def __init__(self, in_features, out_features, use_bias: bool = True, dtype=None, *, key=None, weight=None,
                 bias=None, unit: Unit | None = None, builtin: str = "smfmac_f32_16x16x128_fp8_fp8", model=None,
                 scaling: str | None = None,
                 prune: bool | None = None, target=None, backend=None, options=None, devices=None, mesh=None,
                 mesh_axes=None):
        if weight is None:
            if key is None:
                raise ValueError("jwmma.nn.equinox.Linear needs key= (to draw the weights) or weight=")
            lin = eqx.nn.Linear(in_features, out_features, use_bias, dtype, key=key)
            weight, bias = lin.weight, lin.bias
        n_in = 1 if in_features == "scalar" else in_features
        n_out = 1 if out_features == "scalar" else out_features
        if tuple(weight.shape) != (n_out, n_in):
            raise ValueError(f"weight must be (out_features, in_features) = ({n_out}, {n_in}), got {weight.shape}")
        if use_bias and (bias is None or tuple(bias.shape) != (n_out,)):
            raise ValueError(f"bias must be ({n_out},) when use_bias=True, got "
                             f"{None if bias is None else bias.shape}")
        self.weight = weight
        self.bias = bias if use_bias else None
        self.in_features, self.out_features, self.use_bias = in_features, out_features, use_bias
        self.unit = unit_of(unit, dict(builtin=builtin, model=model, scaling=scaling, prune=prune, target=target,
                                     backend=backend, options=options, devices=devices, mesh=mesh,
                                     mesh_axes=mesh_axes), "jwmma.nn.equinox.Linear")

    @property
    def config(self) -> Unit:
        """The unit (the former name of this field)."""
        return self.unit

    @classmethod
    def from_linear(cls, linear, unit: Unit | None = None, **matmul_keywords) -> "Linear":
        """The `Linear` holding the arrays of an ``equinox.nn.Linear`` (shared, not copied),
        through ``unit`` or matmul's keywords."""
        return cls(linear.in_features, linear.out_features, linear.use_bias, weight=linear.weight,
                   bias=linear.bias, unit=unit, **matmul_keywords)

    def to_linear(self):
        """The ``equinox.nn.Linear`` with this layer's arrays."""
        lin = eqx.nn.Linear(self.in_features, self.out_features, self.use_bias, self.weight.dtype,
                            key=jax.random.PRNGKey(0))
        return eqx.tree_at(lambda m: (m.weight, m.bias) if self.use_bias else m.weight, lin,
                           (self.weight, self.bias) if self.use_bias else self.weight)

    def __call__(self, x, *, key=None):
        if self.in_features == "scalar":
            x = jnp.expand_dims(x, -1)
        y = dot_general(x, self.weight, (((x.ndim - 1,), (1,)), ((), ())), unit=self.unit)
        if self.use_bias:
            y = y + self.bias
        return jnp.squeeze(y, -1) if self.out_features == "scalar" else y


def _is_linear(x) -> bool:
    return isinstance(x, eqx.nn.Linear)


def emulate(tree, /, unit: Unit | None = None, **matmul_keywords):
    """Replace every ``equinox.nn.Linear`` in ``tree`` (a model or any pytree of modules) by a
    `Linear` with the same arrays, through ``unit`` (a `jwmma.Unit`) or ``matmul_keywords``
    (`jwmma.matmul`'s). Returns the new tree (Equinox modules are immutable); layers already
    switched are left as they are."""
    unit = unit_of(unit, matmul_keywords, "jwmma.nn.equinox.emulate")
    return jax.tree_util.tree_map(lambda m: Linear.from_linear(m, unit) if _is_linear(m) else m,
                                  tree, is_leaf=_is_linear)


def restore(tree, /):
    """The inverse of `emulate`: every `Linear` back to an ``equinox.nn.Linear``."""
    return jax.tree_util.tree_map(lambda m: m.to_linear() if isinstance(m, Linear) else m, tree,
                                  is_leaf=lambda m: isinstance(m, Linear))
