"""Checks of user input with messages that name the argument, the expected and the actual."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["is_concrete", "as_array", "check_last_dims", "check_range", "check_static_int", "check_static_bool",
           "broadcast_batch", "first_violation"]


try:
    _Tracer = jax.core.Tracer
except AttributeError:  # pragma: no cover - JAX versions that hide it
    from jax._src.core import Tracer as _Tracer


def is_concrete(x) -> bool:
    """True when the values of ``x`` are known now (not a tracer inside jit/vmap)."""
    return not isinstance(x, _Tracer)


def as_array(x, what: str):
    """numpy / JAX arrays pass through; lists and scalars become numpy arrays."""
    if isinstance(x, (np.ndarray, jax.Array)) or not is_concrete(x):
        return x
    try:
        return np.asarray(x)
    except Exception as e:  # pragma: no cover - odd objects
        raise TypeError(f"{what} must be an array, got {type(x).__name__}") from e


def check_last_dims(x, want: tuple, what: str, form: str):
    """Raise ValueError unless the trailing dims of ``x`` are ``want`` (``form`` names them)."""
    nd = len(want)
    if x.ndim < nd or tuple(x.shape[-nd:]) != tuple(want):
        raise ValueError(
            f"{what} must have shape {form} with trailing dims {tuple(want)}, got {tuple(x.shape)}"
        )


@jax.jit
def _violation_summary(bad, values):
    """(number of True in ``bad``, flat index of the first, ``values`` there): three
    replicated scalars, so every process of a multi-process job gets the same answer."""
    flat = bad.reshape(-1)
    first = jnp.argmax(flat)
    return jnp.sum(flat, dtype=jnp.int32), first, values.reshape(-1)[first]


def first_violation(bad, values):
    """(count, first index tuple, value there) of the True entries of ``bad`` (same shape as
    ``values``), or None when there are none. For a `jax.Array` only scalars come back,
    never the array: this also works for a global array spanning several processes (which
    cannot be read back whole) and gives the same answer on every process."""
    if isinstance(bad, jax.Array):
        count, first, value = _violation_summary(bad, jnp.asarray(values))
        if int(count) == 0:
            return None
        return int(count), tuple(int(i) for i in np.unravel_index(int(first), bad.shape)), value.item()
    bad = np.asarray(bad)
    if not bad.any():
        return None
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    return int(bad.sum()), where, np.asarray(values)[where]


def check_range(x, lo: int, hi: int, what: str):
    """Raise if concrete integer values fall outside [lo, hi]; traced values are not checked."""
    if not is_concrete(x) or x.size == 0:
        return
    if isinstance(x, jax.Array):  # scalars come back, not the whole array (global arrays too)
        if lo <= int(jnp.min(x)) and int(jnp.max(x)) <= hi:
            return
        count, where, value = first_violation((x < lo) | (x > hi), x)
        raise ValueError(
            f"{what} must hold values in [{lo}, {hi}]; {what}[{', '.join(map(str, where))}] = "
            f"{value} ({count} value(s) out of range)"
        )
    v = np.asarray(x)
    bad = (v < lo) | (v > hi)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"{what} must hold values in [{lo}, {hi}]; {what}[{', '.join(map(str, where))}] = "
            f"{v[where]} ({int(bad.sum())} value(s) out of range)"
        )


def check_static_int(value, name: str, lo: int, hi: int):
    """``value`` as an int if it is a Python/numpy int in [lo, hi] (a compile-time constant)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be a Python int (a compile-time constant), got {value!r}")
    if not lo <= int(value) <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {value}")
    return int(value)


def check_static_bool(value, name: str):
    """``value`` as a bool if it is a bool (or the int 0/1): a compile-time constant."""
    if not isinstance(value, (bool, np.bool_)):
        if isinstance(value, (int, np.integer)) and int(value) in (0, 1):
            return bool(value)
        raise TypeError(f"{name} must be a Python bool (a compile-time constant), got {value!r}")
    return bool(value)


def broadcast_batch(*arrays_and_tails):
    """Broadcast the leading (wave) dims of several arrays; each item is (array, n_tail)."""
    shapes = [a.shape[: a.ndim - t] for a, t in arrays_and_tails]
    try:
        batch = np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(
            "batch (wave) dimensions do not broadcast: "
            + ", ".join(str(tuple(s)) for s in shapes)
        ) from None
    return [jnp.broadcast_to(a, batch + a.shape[a.ndim - t:]) for a, t in arrays_and_tails], batch
