"""Inside a user's `shard_map`, JAX types every value with the manual mesh axes it varies over,
and a loop's carry must keep its type. A GEMM's accumulator starts as zeros (or a C that does
not vary) while the products vary with a sharded A or B, so the carries are made to vary
like the operands before the loops start. Outside `shard_map` this changes nothing.
"""
from __future__ import annotations

import jax

__all__ = ["varying_axes", "vary_like", "vary_together"]


def varying_axes(x) -> frozenset:
    """The manual mesh axes ``x`` varies over (empty outside `shard_map`, and for None)."""
    if x is None:
        return frozenset()
    try:
        aval = jax.typeof(x)
    except TypeError:  # not a JAX value (a numpy array): it varies over nothing
        return frozenset()
    mat = getattr(aval, "mat", None)  # JAX 0.10 and later: aval.mat.varying; before: aval.vma
    axes = getattr(mat, "varying", None) if mat is not None else getattr(aval, "vma", None)
    return frozenset(axes or ())


def vary_like(x, *refs):
    """``x`` cast to vary over every axis that one of ``refs`` varies over (no copy, no
    arithmetic: `jax.lax.pcast` only changes the type)."""
    if x is None:
        return None
    missing = frozenset().union(*(varying_axes(r) for r in refs)) - varying_axes(x)
    return jax.lax.pcast(x, tuple(sorted(missing)), to="varying") if missing else x


def vary_together(*xs):
    """Every one of ``xs`` (None stays None) cast to vary over the union of their axes."""
    return tuple(vary_like(x, *xs) for x in xs)
