"""A contraction's dimension numbers, checked, and the operands laid out as the unit's GEMM
takes them (API.md section 11: "the canonicalised operands").

``jwmma.dot_general`` has ``jax.lax.dot_general``'s contract: any number of contracting and
batch dimensions, in any positions; the result's dimensions are the batch dims, then lhs's
free dims, then rhs's, each in operand order. Its first step gives the canonical operands
(layout only, no value changes): ``lhs_c`` = lhs transposed to (batch, free, contracting) and
reshaped to (G, N, K); ``rhs_c`` = rhs transposed to (batch, contracting, free) and reshaped to
(G, K, M). K runs over the contracting pairs in the order ``dimension_numbers`` lists them
(the last pair fastest); N over lhs's free dims and M over rhs's, in operand order
(row-major); G over the batch pairs in their order (one GEMM batch dim, absent without batch
dims: the compiled programs depend on these four sizes only, not on how the dims are laid out).
"""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

__all__ = ["check_dimension_numbers", "canonical_operands"]


def _dims(value, what: str, ndim: int, shape) -> tuple:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (value,)
    if not isinstance(value, (tuple, list, np.ndarray)):
        raise TypeError(f"dimension_numbers: {what} must be a sequence of ints (dimension indices), got "
                        f"{type(value).__name__} {value!r}")
    out = []
    for d in (np.asarray(value).tolist() if isinstance(value, np.ndarray) else value):
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"dimension_numbers: {what} must hold ints, got {d!r} ({type(d).__name__}) in {value!r}")
        d = int(d)
        if not 0 <= d < ndim:
            neg = f"; for {d} write {d + ndim}" if -ndim <= d < 0 else ""
            raise ValueError(f"dimension_numbers: {what} names dimension {d}, out of range for an operand of rank "
                             f"{ndim} (shape {tuple(shape)}): dimensions are 0..{ndim - 1}, non-negative as "
                             f"jax.lax.dot_general takes them{neg}")
        out.append(d)
    return tuple(out)


def check_dimension_numbers(dimension_numbers, lhs_shape, rhs_shape) -> tuple:
    """Check ``dimension_numbers`` as ``jax.lax.dot_general`` would, with messages that name the
    part, the expected and the actual value.

    Args:
        dimension_numbers: ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``,
            each a sequence of non-negative dimension indices.
        lhs_shape, rhs_shape: the operands' shapes.
    Returns:
        ``(lc, rc, lb, rb)``, tuples of ints. TypeError for a wrong structure or type,
        ValueError for dims out of range, repeated, both batch and contracting, or of
        different sizes on the two sides.
    """
    dn = dimension_numbers
    try:
        (lc, rc), (lb, rb) = dn
    except (TypeError, ValueError):
        raise TypeError(f"dimension_numbers must be ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)), "
                        f"e.g. (((1,), (0,)), ((), ())) for a matrix product, got {dn!r}") from None
    ln, rn = len(lhs_shape), len(rhs_shape)
    lc, lb = _dims(lc, "lhs_contracting", ln, lhs_shape), _dims(lb, "lhs_batch", ln, lhs_shape)
    rc, rb = _dims(rc, "rhs_contracting", rn, rhs_shape), _dims(rb, "rhs_batch", rn, rhs_shape)
    for kind, a, b in (("contracting", lc, rc), ("batch", lb, rb)):
        if len(a) != len(b):
            raise ValueError(f"dimension_numbers: lhs_{kind} {a} and rhs_{kind} {b} must pair up (as many dims on "
                             f"each side), got {len(a)} and {len(b)}")
    for side, c, b, shape in (("lhs", lc, lb, lhs_shape), ("rhs", rc, rb, rhs_shape)):
        seen = c + b
        repeated = sorted({d for d in seen if seen.count(d) > 1})
        if repeated:
            both = [d for d in repeated if d in c and d in b]
            why = f"both contracting and batch: {both}" if both else f"repeated: {repeated}"
            raise ValueError(f"dimension_numbers: each {side} dimension may appear once among {side}_contracting "
                             f"{c} and {side}_batch {b}; {why} (shape {tuple(shape)})")
    for kind, a, b in (("contracting", lc, rc), ("batch", lb, rb)):
        for i, j in zip(a, b):
            if lhs_shape[i] != rhs_shape[j]:
                raise ValueError(f"dimension_numbers: {kind} dims must have equal sizes; lhs dim {i} has size "
                                 f"{lhs_shape[i]} (shape {tuple(lhs_shape)}), rhs dim {j} has size {rhs_shape[j]} "
                                 f"(shape {tuple(rhs_shape)})")
    return lc, rc, lb, rb


def _layout(x, perm, shape):
    """Transpose and reshape; numpy arrays stay numpy (their float64 values reach the unit's
    exact rounding, whatever ``jax_enable_x64`` says), JAX values stay JAX."""
    xp = np if isinstance(x, np.ndarray) else jnp
    if tuple(perm) != tuple(range(x.ndim)):
        x = xp.transpose(x, perm)
    return xp.reshape(x, shape)


def canonical_operands(lhs, rhs, dims):
    """The operands as the unit's GEMM takes them, and the result's shape (module doc).

    Args:
        lhs, rhs: arrays; dims: ``(lc, rc, lb, rb)`` from `check_dimension_numbers`.
    Returns:
        ``(lhs_c, rhs_c, out_shape)``: lhs_c ``(*batch, N, K)`` and rhs_c ``(*batch, K, M)``
        (one batch dim of the batch dims' product, none without them: the programs depend on
        its size only; K in the order of ``lc``), out_shape ``(*batch, *lhs free, *rhs free)``
        as `jax.lax.dot_general`'s.
    """
    lc, rc, lb, rb = dims
    lfree = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
    rfree = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    bshape = tuple(lhs.shape[d] for d in lb)
    batch = (math.prod(bshape),) if lb else ()
    lshape, rshape = tuple(lhs.shape[d] for d in lfree), tuple(rhs.shape[d] for d in rfree)
    n, m, k = math.prod(lshape), math.prod(rshape), math.prod(lhs.shape[d] for d in lc)
    lhs_c = _layout(lhs, tuple(lb) + tuple(lfree) + tuple(lc), batch + (n, k))
    rhs_c = _layout(rhs, tuple(rb) + tuple(rc) + tuple(rfree), batch + (k, m))
    return lhs_c, rhs_c, bshape + lshape + rshape
