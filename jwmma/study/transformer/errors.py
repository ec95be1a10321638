"""Per-contraction errors of a unit, split into what quantisation costs and what the accumulator
adds.

Per contraction (each block's qkv, scores, pv, out, up, down, then logits), on the float32
network's own operands of that contraction (`jwmma.study.transformer.recording`: so each error
is the contraction's own, the same operands for every unit), normwise relative errors against
the float64 product of those operands, ref = ||lhs64 . rhs64||_F:

* ``quant`` = ||exact - ref|| / ||ref||: the unit's builtin under ``model="exact"`` on the same
  pruned, quantised operands, i.e. what quantisation (and pruning) costs; for the MX units,
  whose instruction applies the block scales and so has no ``exact`` model, the float64 product
  of the MX-quantised operands (`jwmma.study.transformer.units.exact_twin`);
* ``accum`` = ||model - exact|| / ||ref||: what the accumulator adds;
* ``total`` = ||model - ref|| / ||ref||;
* for pruned weights ``prune`` = ||lhs64 . prune(rhs)64 - ref|| / ||ref||;

and per kind the four blocks together (`by_kind`: root sum of squares).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from ...engine.sparsity import prune_2_4
from ...numerics.rounding import x64_scope
from ...quant import Unit, dot_general
from ...quant.dot_general import effective_product
from .model import CONTRACTIONS, HI
from .units import UnitConfig, exact_twin

__all__ = ["contraction_errors", "by_kind"]


def _f64(lhs, rhs, dn):
    """The float64 product of the operands (the reference)."""
    with x64_scope():
        return np.asarray(jax.lax.dot_general(jnp.asarray(lhs, jnp.float64), jnp.asarray(rhs, jnp.float64), dn,
                                              precision=HI))


def _pruned_rhs(rhs, dn):
    """``rhs`` 2:4-pruned along its contracting dims as a unit prunes its A (float32, K in the
    order of ``dn``, groups of four)."""
    rc = tuple(dn[0][1])
    rb = tuple(dn[1][1])
    free = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    perm = list(rb) + free + list(rc)
    moved = np.transpose(np.asarray(rhs, np.float32), perm)
    k = math.prod(rhs.shape[d] for d in rc)
    flat = moved.reshape(-1, k)
    pad = -k % 4
    pruned = np.asarray(prune_2_4(jnp.asarray(np.pad(flat, ((0, 0), (0, pad))))))[:, :k]
    return np.transpose(pruned.reshape(moved.shape), np.argsort(perm))


def _norm(x):
    return float(np.linalg.norm(np.asarray(x, np.float64).ravel()))


def _unit_product(lhs, rhs, dn, unit):
    return np.asarray(dot_general(lhs, rhs, dn, unit=unit))


def _is_exact(unit: Unit) -> bool:
    return unit.scaling != "mx" and unit == exact_twin(unit)


def _exact_product(lhs, rhs, dn, unit):
    """The exact twin's product: ``unit`` under ``model="exact"`` (sums exact up to one float32
    rounding per K step), or for a block-scaled unit `jwmma.quant.effective_product`."""
    if unit.scaling == "mx":
        return effective_product(lhs, rhs, dn, unit=unit)
    return _unit_product(lhs, rhs, dn, exact_twin(unit))


def contraction_errors(calls, ucfg: UnitConfig, *, refs=None, exact_cache=None) -> list:
    """``ucfg``'s errors on every recorded contraction (module doc).

    Args:
        calls: `jwmma.study.transformer.recording.record`'s ``(layer, name, lhs, rhs,
            dimension_numbers)`` list (float32 operands).
        ucfg: the row whose units run the contractions (`UnitConfig.unit_for`).
        refs: optional list to fill/reuse with the float64 products (one per call).
        exact_cache: optional dict {(exact unit, call index): product} shared between units.
    Returns:
        One dict per call: ``layer``, ``name``, ``k`` (the contraction's length), ``ref_norm``,
        ``quant``, ``accum``, ``total`` (floats) and ``prune`` for pruned weights.
    """
    rows = []
    for idx, (layer, name, lhs, rhs, dn) in enumerate(calls):
        unit = ucfg.unit_for(name)
        exact_unit = exact_twin(unit)
        if refs is not None and len(refs) > idx:
            ref = refs[idx]
        else:
            ref = _f64(lhs, rhs, dn)
            if refs is not None:
                refs.append(ref)
        key = (exact_unit, idx)
        if exact_cache is not None and key in exact_cache:
            ex = exact_cache[key]
        else:
            ex = _exact_product(lhs, rhs, dn, unit)
            if exact_cache is not None:
                exact_cache[key] = ex
        mo = ex if _is_exact(unit) else _unit_product(lhs, rhs, dn, unit)
        rn = _norm(ref)
        row = dict(layer=layer, name=name, k=int(math.prod(lhs.shape[d] for d in dn[0][0])), ref_norm=rn,
                   quant=_norm(ex - ref) / rn, accum=_norm(mo - ex) / rn, total=_norm(mo - ref) / rn)
        if unit.prune:
            row["prune"] = _norm(_f64(lhs, _pruned_rhs(rhs, dn), dn) - ref) / rn
        rows.append(row)
    return rows


def by_kind(layer_rows) -> dict:
    """The errors of each kind of contraction over the blocks together.

    Args:
        layer_rows: `contraction_errors`' rows.
    Returns:
        {name: {quant, accum, total[, prune], k}}: root sum of squares of the errors over root
        sum of squares of the references, in `jwmma.study.transformer.model.CONTRACTIONS`'
        order, then ``logits``.
    """
    out: dict = {}
    for name in CONTRACTIONS + ("logits",):
        rows = [r for r in layer_rows if r["name"] == name]
        if not rows:
            continue
        den = math.sqrt(sum(r["ref_norm"] ** 2 for r in rows))
        out[name] = {m: math.sqrt(sum((r[m] * r["ref_norm"]) ** 2 for r in rows)) / den
                     for m in ("quant", "accum", "total", "prune") if all(m in r for r in rows)}
        out[name]["k"] = rows[0]["k"]
    return out
