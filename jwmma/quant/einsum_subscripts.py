"""A two-operand einsum as one ``dot_general`` (API.md section 11: ``jwmma.einsum``): its
subscripts parsed (opt_einsum's parser, the one ``jnp.einsum`` uses), checked for what is no
single matrix product, and turned into dimension numbers and the transpose of the result.

Labels in both operands and the output are batch dims, in both but not the output contracting
dims, in one operand and the output free dims. K runs over the contracting labels in the order
they appear in the instruction's A operand. The subscripts are parsed here, not through
jnp.einsum's ``_dot_general`` hook, which swaps operands and sorts K.
"""
from __future__ import annotations

__all__ = ["einsum_dimension_numbers"]


def _parse(subscripts: str, lhs, rhs):
    """(lhs labels, rhs labels, output labels) of a two-operand einsum, ellipses spelled out
    (opt_einsum's parser, the one ``jnp.einsum`` uses)."""
    from opt_einsum.parser import parse_einsum_input

    try:
        inputs, output, _ = parse_einsum_input((subscripts, lhs, rhs))
    except Exception as e:
        raise ValueError(f"einsum subscripts {subscripts!r} for shapes {tuple(lhs.shape)} x {tuple(rhs.shape)}: "
                         f"{e}") from None
    ls, rs = inputs.split(",")
    return ls, rs, output


def einsum_dimension_numbers(subscripts: str, lhs, rhs, a: str = "rhs"):
    """The `dot_general` of a two-operand einsum (what `einsum` runs).

    Args:
        subscripts: the einsum string; lhs, rhs: the operands (anything with ``.shape``);
            a: which operand is the instruction's A (its order of the contracting labels is K's).
    Returns:
        ``(dimension_numbers, perm)``: the dot_general's dimension numbers and the transpose
        of its result into the output's order. ValueError (naming the labels) for what is no
        single matrix product: a label summed in one operand, a diagonal, sizes that differ.
    """
    ls, rs, out = _parse(subscripts, lhs, rhs)
    for name, labels in (("lhs", ls), ("rhs", rs)):
        twice = sorted({c for c in labels if labels.count(c) > 1})
        if twice:
            raise ValueError(f"einsum {subscripts!r}: label(s) {twice} repeat in {name} (a diagonal), which is no "
                             f"matrix product; take the diagonal first (jnp.einsum on that operand alone)")
    for name, labels, other in (("lhs", ls, rs), ("rhs", rs, ls)):
        summed = [c for c in labels if c not in other and c not in out]
        if summed:
            raise ValueError(f"einsum {subscripts!r}: label(s) {summed} of {name} appear in neither the other operand "
                             f"nor the output (a sum, no matrix product): sum them out first, e.g. "
                             f"{name}.sum(axis=...), then contract")
    for c in sorted(set(ls) & set(rs)):
        if lhs.shape[ls.index(c)] != rhs.shape[rs.index(c)]:
            raise ValueError(f"einsum {subscripts!r}: label {c!r} has size {lhs.shape[ls.index(c)]} in lhs (shape "
                             f"{tuple(lhs.shape)}) and {rhs.shape[rs.index(c)]} in rhs (shape {tuple(rhs.shape)}); "
                             f"sizes must be equal (no broadcasting of size 1)")
    a_labels = rs if a == "rhs" else ls
    batch = [c for c in out if c in ls and c in rs]
    contracted = [c for c in a_labels if c in ls and c in rs and c not in out]
    dn = ((tuple(ls.index(c) for c in contracted), tuple(rs.index(c) for c in contracted)),
          (tuple(ls.index(c) for c in batch), tuple(rs.index(c) for c in batch)))
    names = batch + [c for c in ls if c not in batch and c not in contracted] + \
        [c for c in rs if c not in batch and c not in contracted]
    return dn, tuple(names.index(c) for c in out)
