"""2:4 structured sparsity helpers (API.md section 4, BUILTINS.md section 5).

Compression is "consecutive": the two stored values of every group of four along the last
axis keep their order, with positions increasing. Groups with fewer than two non-zeros are
padded as hipSPARSELt does: the default metadata is positions (2, 3); a lone non-zero at
position p < 3 is stored as (p, 3) with a zero second value, one at position 3 as (2, 3) with
a zero first value. -0.0 counts as zero.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .validation import as_array, first_violation, is_concrete

__all__ = ["prune_2_4", "compress_2_4", "decompress_2_4"]


def _groups(x, what):
    x = as_array(x, what)
    if x.ndim < 1 or x.shape[-1] % 4:
        raise ValueError(f"{what} must have a last axis (K) divisible by 4, got shape {tuple(x.shape)}")
    return x, x.reshape(*x.shape[:-1], x.shape[-1] // 4, 4)


def _magnitude(g):
    if jnp.issubdtype(g.dtype, jnp.integer):
        return jnp.abs(g.astype(jnp.int32))
    m = jnp.abs(g.astype(jnp.float32))
    return jnp.where(jnp.isnan(m), jnp.inf, m)  # NaN counts as the largest: it stays visible


def prune_2_4(a):
    """Prune to 2:4: keep the 2 largest |values| of every 4 along the last axis (ties: the
    lower position; NaN counts as the largest), zero the others.

    Args:
        a: (..., K) array, K divisible by 4 (floats or integers).
    Returns:
        The pruned array, same shape and dtype.
    """
    a, g = _groups(a, "a")
    mag = _magnitude(g)
    # rank of each element within its group: how many others beat it
    beats = (mag[..., None, :] > mag[..., :, None]) | (
        (mag[..., None, :] == mag[..., :, None]) & (jnp.arange(4)[None, :] < jnp.arange(4)[:, None])
    )
    keep = beats.sum(-1) < 2
    return jnp.where(keep, g, jnp.zeros((), g.dtype)).reshape(a.shape)


def _nonzero(g):
    if jnp.issubdtype(g.dtype, jnp.integer):
        return g != 0
    f = g.astype(jnp.float32)
    return (f != 0) | jnp.isnan(f)


def compress_2_4(a24):
    """Compress a 2:4-sparse array ("consecutive" compression, module doc).

    Args:
        a24: (..., K) array with at most two non-zeros in every group of four along K.
    Returns:
        (values (..., K/2) of a24's dtype, positions (..., K/2) int32, increasing per group).
        Raises ValueError naming the first row and group with more than two non-zeros (for
        traced input, when the computation runs).
    """
    a24, g = _groups(a24, "a24")
    nz = _nonzero(g)
    count = nz.sum(-1)
    _check_2_4(count, "a24")
    idx = jnp.arange(4)
    # first and second non-zero positions (4 = none)
    p_first = jnp.min(jnp.where(nz, idx, 4), -1)
    p_second = jnp.min(jnp.where(nz & (idx > p_first[..., None]), idx, 4), -1)
    pos0 = jnp.where(count >= 2, p_first, jnp.where(count == 1, jnp.where(p_first == 3, 2, p_first), 2))
    pos1 = jnp.where(count >= 2, p_second, 3)
    zero = jnp.zeros((), g.dtype)
    v0 = jnp.where(count >= 1, jnp.take_along_axis(g, pos0[..., None], -1)[..., 0], zero)
    v1 = jnp.where(count >= 1, jnp.take_along_axis(g, pos1[..., None], -1)[..., 0], zero)
    # a lone non-zero below position 3 sits in slot 0; slot 1 (position 3) is a padding zero
    v1 = jnp.where((count == 1) & (p_first < 3), zero, v1)
    v0 = jnp.where((count == 1) & (p_first == 3), zero, v0)
    values = jnp.stack([v0, v1], -1).reshape(*a24.shape[:-1], a24.shape[-1] // 2)
    pos = jnp.stack([pos0, pos1], -1).reshape(values.shape).astype(jnp.int32)
    return values, pos


def _check_2_4(count, what):
    def describe(n_bad, first, value):
        *row, group = first
        return (
            f"{what} is not 2:4 sparse: row {tuple(row) if len(row) != 1 else row[0]} group {group} "
            f"(elements {4 * group}..{4 * group + 3}) has {int(value)} non-zeros "
            f"({n_bad} such group(s)); prune it first (jwmma.prune_2_4)"
        )

    if is_concrete(count):
        # a device-side summary for jax Arrays: scalars come back, never the array, so this
        # also works on a global array spanning several processes (the same error on each)
        got = first_violation(count > 2, count)
        if got is not None:
            raise ValueError(describe(*got))
        return

    def cb(count):
        count = np.asarray(count)
        got = first_violation(count > 2, count)
        if got is not None:
            raise ValueError(describe(*got))

    jax.debug.callback(cb, count)


def decompress_2_4(values, pos):
    """Inverse of `compress_2_4`.

    Args:
        values: (..., K/2) stored values; pos: (..., K/2) their positions 0..3 (two different
            positions per group).
    Returns:
        (..., K) dense array of values' dtype, zeros elsewhere.
    """
    values = as_array(values, "values")
    pos = as_array(pos, "pos")
    if values.shape != pos.shape:
        raise ValueError(f"values and pos must have the same shape, got {tuple(values.shape)} and {tuple(pos.shape)}")
    if values.ndim < 1 or values.shape[-1] % 2:
        raise ValueError(f"values must have an even last axis (K/2), got shape {tuple(values.shape)}")
    if not jnp.issubdtype(pos.dtype, jnp.integer):
        raise TypeError(f"pos must hold integers 0..3, got {pos.dtype}")
    if is_concrete(pos) and pos.size:
        # jnp on jax Arrays (scalars come back: global arrays work), numpy otherwise
        xp = jnp if isinstance(pos, jax.Array) else np
        lo, hi = int(xp.min(pos)), int(xp.max(pos))
        if lo < 0 or hi > 3:
            raise ValueError(f"pos must hold values in [0, 3], got values in [{lo}, {hi}]")
        pr = pos.reshape(*pos.shape[:-1], -1, 2)
        got = first_violation(pr[..., 0] == pr[..., 1], pr[..., 0])
        if got is not None:
            raise ValueError(f"pos selects the same position twice in group {got[1]}")
    v = values.reshape(*values.shape[:-1], -1, 2)
    p = pos.reshape(v.shape)
    idx = jnp.arange(4)
    zero = jnp.zeros((), values.dtype)
    dense = jnp.where(p[..., 0, None] == idx, v[..., 0, None], zero)
    dense = jnp.where(p[..., 1, None] == idx, v[..., 1, None], dense)
    return dense.reshape(*values.shape[:-1], values.shape[-1] * 2)
