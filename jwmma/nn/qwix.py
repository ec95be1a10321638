"""A qwix provider that runs every contraction of an unmodified Flax model through jwmma units
(API.md section 11).

``qwix.quantize_model(model, jwmma.nn.qwix.provider([jwmma.nn.qwix.Rule(".*", unit)]), x)``
(NNX; Linen models take no inputs) returns the model with its ``__call__`` intercepted the way
qwix's own providers do it (``qwix/_src/interception.py``: while the call runs, the named
functions are patched; a handler runs with the interception off, so nothing recurses). Inside,
four entry points are routed, each to the unit of the first `Rule` whose pattern matches the
module path (``re.fullmatch`` on ``"block_0/attention/query"``, qwix's ``module_path``):

* ``jax.lax.dot_general`` (Linen ``Dense``/``DenseGeneral``, NNX ``Linear``/``LinearGeneral``,
  any direct call) -> `jwmma.dot_general`;
* ``jax.numpy.einsum`` (attention, ``Einsum`` layers) -> `jwmma.einsum` for a two-operand
  contraction (the second operand is the unit's A with ``a="rhs"``); an einsum of more
  operands, or with a sum or a diagonal, runs ``jnp.einsum`` with `jwmma.dot_general` as its
  ``_dot_general`` (every pairwise contraction through the unit, A the operand that jnp puts
  second);
* ``jax.numpy.dot`` and ``jax.numpy.matmul`` (a tied-embedding logits ``embed.attend``, ``@`` on
  arrays) -> `jwmma.dot_general` with their numpy semantics (1-D operands, broadcast batch
  dims). They are intercepted themselves because they are jitted functions: once traced for a
  shape (by ``model.init``, say) their cached trace never calls ``lax.dot_general`` again, so an
  interceptor of ``lax.dot_general`` alone would miss them.

A module that no rule matches, or a rule with ``unit=None``, runs natively: the rules are the
explicit choice. `Provider.counts` counts the contractions each way (per traced call), so a test
can check that every contraction of a model was routed.

Limits: other jitted JAX functions that call ``lax.dot_general`` inside (``jnp.tensordot``,
``jnp.inner``, ``jnp.vdot``...) are not intercepted themselves; if one is traced for the same
shapes outside the provider first, its cached trace runs natively inside (and one traced first
inside keeps the unit in its cache). Contract through ``jnp.einsum``/``jnp.dot``/``@`` or call
`jwmma.dot_general` for those.

qwix is an optional extra (``pip install 'jwmma[qwix]'``), imported when this module is.
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import logging
import re

import jax
import jax.numpy as jnp
import numpy as np

from . import require
from ..quant import Unit, dot_general, einsum
from ..quant.dot_general import einsum_dimension_numbers

qwix = require("qwix")

__all__ = ["Rule", "Provider", "provider", "OPS", "LOGGER"]

#: the operation names a `Rule` may restrict itself to (``op_names``)
OPS = ("dot_general", "einsum", "dot", "matmul")
#: one INFO record per (module path, operation, unit) routed
LOGGER = logging.getLogger("jwmma.nn.qwix")
#: the private name of ``jnp.matmul`` that the ``@`` operator calls (intercepted where it exists)
_OPERATOR_MATMUL = "jax._src.numpy.tensor_contractions.matmul"


@dataclasses.dataclass(frozen=True)
class Rule:
    """Which unit runs the contractions of the modules a pattern matches.

    Args:
        pattern: a regular expression matched (``re.fullmatch``) against the module path,
            names joined by ``/`` (qwix's ``module_path``): ``".*"`` every module,
            ``".*attention.*"``, ``"block_0/mlp/.*"``.
        unit: the `jwmma.Unit`, or None (these modules' contractions run natively).
        op_names: the operations the rule applies to (a subset of `OPS`); empty: all.
    Returns:
        A frozen value; the provider takes the first rule that matches.
    """

    pattern: str
    unit: Unit | None
    op_names: tuple = ()

    def __post_init__(self):
        if not isinstance(self.pattern, str):
            raise TypeError(f"Rule(pattern=...) must be a regular expression (str), got {type(self.pattern).__name__}")
        try:
            re.compile(self.pattern)
        except re.error as e:
            raise ValueError(f"Rule(pattern={self.pattern!r}) is no regular expression: {e}") from None
        if self.unit is not None and not isinstance(self.unit, Unit):
            raise TypeError(f"Rule(unit=...) must be a jwmma.Unit or None (native), got {type(self.unit).__name__}")
        ops = (self.op_names,) if isinstance(self.op_names, str) else tuple(self.op_names)
        bad = [o for o in ops if o not in OPS]
        if bad:
            raise ValueError(f"Rule(op_names=...) takes names of {OPS}, got {bad}")
        object.__setattr__(self, "op_names", ops)


@dataclasses.dataclass(frozen=True)
class _UnitDot:
    """`jwmma.dot_general` with a unit, hashable by value (``jnp.einsum`` takes its
    ``_dot_general`` as a static argument: an equal value reuses the trace)."""

    unit: Unit

    def __call__(self, lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, **kw):
        return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type, unit=self.unit, **kw)


def _module_path() -> str:
    try:
        from qwix._src.utils import flax_util

        return "/".join(map(str, flax_util.get_current_module_path()))
    except Exception:  # a contraction outside any module, or another qwix version
        return "?"


class Provider(qwix.QuantizationProvider):
    """The qwix provider of `provider` (a ``qwix.QuantizationProvider``).

    Args:
        rules: `Rule` values in order of precedence.
    Returns:
        The provider; ``counts`` is a ``collections.Counter`` of ``(operation, "unit" |
        "native")`` over the contractions seen (each trace of a jitted model counts once);
        ``reset_counts()`` clears it.
    """

    def __init__(self, rules):
        self.jwmma_rules = tuple(rules)
        super().__init__([qwix.QuantizationRule(module_path=r.pattern, op_names=r.op_names) for r in self.jwmma_rules])
        self.counts = collections.Counter()
        self._seen = set()

    def reset_counts(self) -> None:
        """Forget the counted contractions."""
        self.counts.clear()

    def _unit(self, op: str) -> Unit | None:
        rule, _ = self._get_current_rule_and_op_id(op, only_rule=True)
        unit = None
        if rule is not None:
            unit = self.jwmma_rules[next(i for i, r in enumerate(self._rules) if r is rule)].unit
        self.counts[(op, "native" if unit is None else "unit")] += 1
        key = (_module_path(), op, unit)
        if key not in self._seen:
            self._seen.add(key)
            LOGGER.info("jwmma.nn.qwix: %s in module %r runs %s", op, key[0],
                        "natively (no rule)" if unit is None else f"through {unit.builtin}")
        return unit

    # ------------------------------------------------------------------ the handlers
    def dot_general(self, lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, *,
                    out_sharding=None):
        """``jax.lax.dot_general`` under the provider."""
        unit = self._unit("dot_general")
        if unit is None:
            return jax.lax.dot_general(lhs, rhs, dimension_numbers, precision=precision,
                                       preferred_element_type=preferred_element_type, out_sharding=out_sharding)
        return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type, unit=unit,
                           out_sharding=out_sharding)

    def einsum(self, subscripts, *operands, out=None, optimize="auto", precision=None, preferred_element_type=None,
               _dot_general=jax.lax.dot_general, out_sharding=None):  # noqa: N803 (jnp.einsum's name)
        """``jax.numpy.einsum`` under the provider."""
        native = dict(out=out, optimize=optimize, precision=precision, preferred_element_type=preferred_element_type,
                      out_sharding=out_sharding)
        arrays = operands if isinstance(subscripts, str) else (subscripts,) + operands[1::2]  # or interleaved
        if len([x for x in arrays if not isinstance(x, (list, tuple))]) < 2:  # one operand: no contraction
            return jnp.einsum(subscripts, *operands, _dot_general=_dot_general, **native)
        unit = self._unit("einsum")
        if unit is None:
            return jnp.einsum(subscripts, *operands, _dot_general=_dot_general, **native)
        if isinstance(subscripts, str) and len(operands) == 2:
            try:
                einsum_dimension_numbers(subscripts, operands[0], operands[1], a=unit.a)
            except ValueError:
                pass  # a sum or a diagonal too: jnp.einsum's own steps, each product through the unit
            else:
                return einsum(subscripts, *operands, unit=unit, precision=precision,
                              preferred_element_type=preferred_element_type, out_sharding=out_sharding)
        return jnp.einsum(subscripts, *operands, _dot_general=_UnitDot(unit), **native)

    def dot(self, a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
        """``jax.numpy.dot`` under the provider (numpy's dot: a's last dim with b's second to
        last, or b's only)."""
        a, b = jnp.asarray(a), jnp.asarray(b)
        if a.ndim == 0 or b.ndim == 0:  # a product by a scalar: no contraction
            return jnp.dot(a, b, precision=precision, preferred_element_type=preferred_element_type,
                           out_sharding=out_sharding)
        unit = self._unit("dot")
        if unit is None:
            return jnp.dot(a, b, precision=precision, preferred_element_type=preferred_element_type,
                           out_sharding=out_sharding)
        contract_b = 0 if b.ndim == 1 else b.ndim - 2
        return dot_general(a, b, (((a.ndim - 1,), (contract_b,)), ((), ())), precision, preferred_element_type,
                           unit=unit, out_sharding=out_sharding)

    def matmul(self, a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
        """``jax.numpy.matmul`` (and ``@``) under the provider (numpy's matmul: 1-D operands
        promoted, leading dims broadcast as batch dims)."""
        a, b = jnp.asarray(a), jnp.asarray(b)
        unit = None if a.ndim == 0 or b.ndim == 0 else self._unit("matmul")
        if unit is None:  # scalars: jnp's own error
            return jnp.matmul(a, b, precision=precision, preferred_element_type=preferred_element_type,
                              out_sharding=out_sharding)
        run = functools.partial(dot_general, precision=precision, preferred_element_type=preferred_element_type,
                                unit=unit, out_sharding=out_sharding)
        a_vec, b_vec = a.ndim == 1, b.ndim == 1
        a2 = a[None, :] if a_vec else a
        b2 = b[:, None] if b_vec else b
        if b2.ndim == 2:  # a's leading dims are free dims of the one GEMM
            y = run(a2, b2, (((a2.ndim - 1,), (0,)), ((), ())))
        elif a2.ndim == 2:  # b's leading dims: a broadcast against a batch of b
            y = jnp.moveaxis(run(a2, b2, (((1,), (b2.ndim - 2,)), ((), ()))), 0, -2)
        else:
            batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
            a2 = jnp.broadcast_to(a2, batch + a2.shape[-2:])
            b2 = jnp.broadcast_to(b2, batch + b2.shape[-2:])
            nb = len(batch)
            y = run(a2, b2, (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb)))))
        if a_vec:
            y = jnp.squeeze(y, -2)
        if b_vec:
            y = jnp.squeeze(y, -1)
        return y

    def get_intercept_map(self):
        """qwix's map of intercepted names (its own entries plus the four contractions)."""
        names = {"jax.lax.dot_general": self.dot_general, "jax.numpy.einsum": self.einsum,
                 "jax.numpy.dot": self.dot, "jax.numpy.matmul": self.matmul}
        try:  # the `@` operator looks this name up at call time
            from jax._src.numpy import tensor_contractions

            if getattr(tensor_contractions, "matmul", None) is jnp.matmul:
                names[_OPERATOR_MATMUL] = self.matmul
        except ImportError:
            pass
        return super().get_intercept_map() | names


def provider(rules) -> Provider:
    """The qwix provider routing a model's contractions through jwmma units.

    Args:
        rules: a sequence of `Rule` (first match wins), or one `jwmma.Unit` (every module).
    Returns:
        A `Provider` for ``qwix.quantize_model(model, provider, ...)``.
    """
    if isinstance(rules, Unit):
        rules = [Rule(".*", rules)]
    rules = list(rules)
    bad = [r for r in rules if not isinstance(r, Rule)]
    if bad or not rules:
        got = type(bad[0]).__name__ if bad else "no rules"
        raise TypeError(f"provider(rules) takes jwmma.nn.qwix.Rule values (or one jwmma.Unit), got {got}; e.g. "
                        f"provider([Rule('.*', jwmma.Unit())])")
    return Provider(rules)
