"""Checks of user input with messages that name the argument, the expected and the actual."""
from __future__ import annotations

import contextvars
import functools

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["is_concrete", "as_array", "check_last_dims", "check_range", "check_static_int", "check_static_bool",
           "broadcast_batch", "first_violation", "fail_if", "check_bool_kw", "check_values", "checked"]


try:
    _Tracer = jax.core.Tracer
except AttributeError:  # pragma: no cover - JAX versions that hide it
    from jax._src.core import Tracer as _Tracer


def is_concrete(x) -> bool:
    """True when the values of ``x`` are known now (not a tracer inside jit/vmap)."""
    return not isinstance(x, _Tracer)


def as_array(x, what: str):
    """numpy / JAX arrays pass through; lists and scalars become numpy arrays. A numpy array
    in non-native byte order (e.g. ``np.dtype('>f4')`` read from a file) becomes the same
    values in native order: JAX cannot take it, and its dtype would otherwise fail every
    dtype check while naming the right type."""
    if isinstance(x, jax.Array) or not is_concrete(x):
        return x
    if not isinstance(x, np.ndarray):
        try:
            x = np.asarray(x)
        except Exception as e:  # pragma: no cover - odd objects
            raise TypeError(f"{what} must be an array, got {type(x).__name__}") from e
    return native_order(x)


def native_order(x: np.ndarray) -> np.ndarray:
    """``x`` with a native-byte-order dtype, values kept (``x`` itself when it already is)."""
    if x.dtype.isnative:
        return x
    return x.astype(x.dtype.newbyteorder("="))


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
    if lo <= int(v.min()) and int(v.max()) <= hi:
        return  # no boolean temporaries of x's size in the common case
    bad = (v < lo) | (v > hi)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"{what} must hold values in [{lo}, {hi}]; {what}[{', '.join(map(str, where))}] = "
            f"{v[where]} ({int(bad.sum())} value(s) out of range)"
        )


def check_static_int(value, name: str, lo: int, hi: int):
    """``value`` as an int if it is a Python/numpy int in [lo, hi] (a compile-time constant)."""
    if not is_concrete(value):
        raise TypeError(f"{name} must be a compile-time constant (a Python int), got a traced value; "
                        f"make it a static argument of your jit")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be a Python int (a compile-time constant), got {value!r}")
    if not lo <= int(value) <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {value}")
    return int(value)


def check_static_bool(value, name: str):
    """``value`` as a bool if it is a bool (or the int 0/1): a compile-time constant."""
    if not is_concrete(value):
        raise TypeError(f"{name} must be a compile-time constant (a Python bool), got a traced value; "
                        f"make it a static argument of your jit")
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


# ------------------------------------------------------------------ checks of traced values
# How a failed check on traced values surfaces (API.md "checks inside jit"): outside
# `jwmma.checked` a host callback raises the ValueError when the computation runs (JAX wraps
# it in a JaxRuntimeError whose text carries the message); inside `jwmma.checked` the check
# is a `jax.experimental.checkify` check and the wrapper raises a ValueError with the message.
_CHECKIFY = contextvars.ContextVar("jwmma_checkify", default=False)


def _x64(on: bool):
    if hasattr(jax, "enable_x64") and callable(jax.enable_x64):
        return jax.enable_x64(on)
    from jax.experimental import disable_x64, enable_x64  # older JAX

    return enable_x64() if on else disable_x64()


class _Message(str):
    """A checkify format string whose ``format`` builds jwmma's message from the operands."""

    def __new__(cls, label, describe):
        self = super().__new__(cls, label)
        self.describe = describe
        return self

    def format(self, *args, **kwargs):  # noqa: A003 - checkify calls fmt_string.format(*operands)
        return self.describe(*(np.asarray(a) for a in args))

    def __hash__(self):
        return hash(str(self))


def fail_if(bad, describe, *operands, describe_first=None) -> None:
    """Raise ValueError(describe(*operands as numpy)) where any of ``bad`` is True.

    Args:
        bad: a boolean array; concrete: checked now; traced: when the computation runs (a
            host callback, or a checkify check inside `jwmma.checked`).
        describe: builds the message from the numpy values of ``bad`` and ``operands``.
        describe_first: for arrays that cannot be read back whole (a global array of several
            processes): builds the same message from (count, first index, operands[0] there),
            which `first_violation` gets as scalars.
    """
    if is_concrete(bad) and all(is_concrete(o) for o in operands):
        if isinstance(bad, jax.Array) and not bool(jnp.any(bad)):
            return  # one scalar comes back, never the array (global arrays of several processes too)
        try:
            b = np.asarray(bad)
            ops = [np.asarray(o) for o in operands]
        except Exception:  # noqa: BLE001 - not addressable here (a multi-process global array)
            got = first_violation(bad, operands[0] if operands else bad)
            if describe_first is not None:
                raise ValueError(describe_first(*got)) from None
            raise ValueError(f"{got[0]} value(s) fail jwmma's check; first at {got[1]}") from None
        if b.any():
            raise ValueError(describe(b, *ops))
        return
    bad = jnp.asarray(bad)
    operands = tuple(jnp.asarray(o) for o in operands)
    handled = _checked_by_vmap(bad, operands, describe, describe_first)
    if _CHECKIFY.get():
        from jax.experimental import checkify

        # checkify's error state is made outside jwmma's x64 scope: 32-bit payloads only
        # (values beyond int32 show clipped in the message; the check itself is exact)
        ops = [jnp.clip(o, -2**31, 2**31 - 1).astype(jnp.int32) if o.dtype.itemsize == 8 and
               jnp.issubdtype(o.dtype, jnp.integer) else o.astype(jnp.float32) if o.dtype == jnp.float64 else o
               for o in operands]
        ok = ~jnp.any(bad) | handled
        with _x64(_CHECKIFY.get() == "x64"):  # the setting the user's error state was made in
            checkify.check(ok, _Message(f"jwmma check {id(describe)}", describe), bad, *ops)
        return

    def cb(done, b, *ops):
        if not np.asarray(done) and np.asarray(b).any():
            raise ValueError(describe(np.asarray(b), *(np.asarray(o) for o in ops)))

    jax.debug.callback(cb, handled, bad, *operands)


def _checked_by_vmap(bad, operands, describe, describe_first):
    """A boolean scalar: True when ``bad`` is batched by an enclosing `jax.vmap`, whose
    batching rule (below) has then checked the whole batch at once; False otherwise.

    Under vmap, JAX's own batching of a host callback or a checkify check hands the message
    one batch element's slice: its index inside the vmapped axes and the count over the
    batch are lost ("row () group 1"). A `jax.custom_batching.custom_vmap` probe sees the
    batched arrays instead: its rule runs `fail_if` on them with the vmapped axes leading
    (unbatched operands broadcast), so the message names the same row/group/wave as the call
    on the whole batch outside vmap (nested vmaps: outermost axis first). The check emitted
    per element is then switched off by the probe's True."""
    from jax.custom_batching import custom_vmap

    @custom_vmap
    def probe(bad, *ops):
        return jnp.zeros((), bool)

    @probe.def_vmap
    def rule(axis_size, in_batched, bad, *ops):
        whole = [x if batched else jnp.broadcast_to(x, (axis_size,) + x.shape)
                 for x, batched in zip((bad,) + ops, in_batched)]
        fail_if(whole[0], describe, *whole[1:], describe_first=describe_first)
        return jnp.ones((), bool), False

    return probe(bad, *operands)


def check_bool_kw(value, name: str) -> bool:
    """A keyword such as ``check=`` must be a Python bool: TypeError naming it otherwise."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool (True or False), got {value!r}")
    return bool(value)


def check_values(x, lo: int, hi: int, what: str, check: bool = False):
    """Integer values of ``x`` in [lo, hi]: concrete values always checked; traced ones only
    with ``check=True`` (when the computation runs, `fail_if`); otherwise traced values keep
    their low bits, as the registers would."""
    if x.size == 0:
        return
    if is_concrete(x):
        check_range(x, lo, hi, what)
        return
    if check:
        def describe(bad, v):
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            return (f"{what} must hold values in [{lo}, {hi}]; {what}[{', '.join(map(str, where))}] = "
                    f"{v[where]} ({int(bad.sum())} value(s) out of range)")

        fail_if((x < lo) | (x > hi), describe, x)


def checked(fn, **jit_kwargs):
    """``fn`` jit-compiled with jwmma's checks of traced values made `jax.experimental.checkify`
    checks: a failed check (undefined index pairs with ``check=True``, a matrix that is not
    2:4 sparse, out-of-range values with ``check=True``) raises a ValueError carrying jwmma's
    message, as the same call on concrete values would.

    Args:
        fn: a function of arrays; jit_kwargs: passed to `jax.jit` (static_argnums, ...).
    Returns:
        The wrapped function (a fresh jit of its own: traces made outside `checked` are not
        reused).
    """
    from jax.experimental import checkify

    def inner(*args, **kwargs):
        return fn(*args, **kwargs)

    run = checkify.checkify(jax.jit(inner, **jit_kwargs))

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        token = _CHECKIFY.set("x64" if jax.config.jax_enable_x64 else "x32")
        try:
            err, out = run(*args, **kwargs)
        finally:
            _CHECKIFY.reset(token)
        try:
            err.throw()
        except checkify.JaxRuntimeError as e:
            msg = str(e).removesuffix(" (`check` failed)")
            raise ValueError(msg) from None
        return out

    return wrapper
