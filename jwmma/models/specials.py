"""IEEE classification of products: which are NaN (a NaN factor, or Inf times zero) and
which are +-Inf. Shared by the models that follow IEEE propagation (exact, cdna3)."""
from __future__ import annotations


def product_specials(a, b):
    """(nan, +inf, -inf) boolean arrays of the products a_k * b_k (broadcast shapes)."""
    a_zero = (a.sig == 0) & ~a.nan & ~a.inf
    b_zero = (b.sig == 0) & ~b.nan & ~b.inf
    nan = a.nan | b.nan | (a.inf & b_zero) | (a_zero & b.inf)
    inf = (a.inf | b.inf) & ~nan
    neg = (a.sign ^ b.sign) == 1
    return nan, inf & ~neg, inf & neg
