"""Checks of user input with messages that name the argument, the expected and the actual."""
from __future__ import annotations

import contextvars
import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["is_concrete", "host_readable", "as_array", "batch_shape", "check_last_dims", "check_range", "check_static_int", "check_static_bool",
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


def host_readable(x) -> bool:
    """Whether ``x`` is a concrete JAX array on one CPU device: numpy reads it in place, where
    an eager JAX operation would compile a program for every new shape."""
    try:
        return (is_concrete(x) and len(x.sharding.device_set) == 1
                and next(iter(x.sharding.device_set)).platform == "cpu")
    except AttributeError:  # not a jax.Array
        return False


@jax.jit
def _extremes(x):
    """(min, max) of ``x`` in one program (two eager reductions compiled two per new shape)."""
    return jnp.min(x), jnp.max(x)


def check_range(x, lo: int, hi: int, what: str):
    """Raise if concrete integer values fall outside [lo, hi]; traced values are not checked."""
    if not is_concrete(x) or x.size == 0:
        return
    if isinstance(x, jax.Array) and not host_readable(x):  # scalars come back, not the whole array
        low, high = _extremes(x)
        if lo <= int(low) and int(high) <= hi:
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


def batch_shape(*arrays_and_tails) -> tuple:
    """The broadcast leading (wave) dims of several arrays, each item (array, n_tail);
    ValueError naming every shape when they do not broadcast."""
    shapes = [a.shape[: a.ndim - t] for a, t in arrays_and_tails]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(
            "batch (wave) dimensions do not broadcast: "
            + ", ".join(str(tuple(s)) for s in shapes)
        ) from None


def broadcast_batch(*arrays_and_tails):
    """Broadcast the leading (wave) dims of several arrays; each item is (array, n_tail)."""
    batch = batch_shape(*arrays_and_tails)
    return [jnp.broadcast_to(a, batch + a.shape[a.ndim - t:]) for a, t in arrays_and_tails], batch


# ------------------------------------------------------------------ checks of traced values
# How a failed check surfaces (API.md "checks inside jit"): concrete values raise now; traced
# ones when the computation runs: outside `jwmma.checked` a host callback raises the
# ValueError (JAX wraps it in a JaxRuntimeError whose text carries the message); inside
# `jwmma.checked` a `jax.experimental.checkify` check, which the wrapper raises as ValueError.
#
# Every message is built from a summary of the failing entries, never from the whole array:
# ``describe(count, first, *values)`` gets their number, the index tuple of the first and
# each operand's value there. Traced, the summary is made inside the program by reductions
# over the whole array (`_summary`). A reduction of a sharded array is an all-reduce that
# XLA inserts, so the scalars are replicated: in a job of several processes every process
# holds the same flag and the same message values, whichever process's shard is bad. The
# host callback then runs on every device (``partitioned=True``: each calls it with its own
# copy of the replicated scalars), so every process raises the same ValueError at once.
# (JAX logs each device's failed callback; the call raises once per process.) Before, the
# callback got the whole arrays, which a partitioned program gathers to one device: only
# that device's process raised, the others saw a successful call, and once the failing
# process stopped they waited in their next collective for the heartbeat timeout. Agreeing inside the program was chosen
# over the coordination service's key-value store: the store would need a flag on every
# process anyway (to know there is a message to wait for, which is this all-reduce), plus
# a key per failure, a JAX-internal client and a timeout; the reduction uses the collectives
# the user's program already runs, costs a few scalars, and cannot wait for anything.
# A checkify check carries the same scalars in its error value (replicated too).
#
# Inside `shard_map` a reduction is the device's own: there the summaries are agreed
# explicitly over the mesh axes the checked array varies over (`_agree_over`), and every
# device reports the first failing device's block (block-local indices, as the mapped
# function sees its block). Where nothing is shared the processes cannot agree: `pmap`, and
# shard_map with ``check_vma=False`` (no varying-axis types to read the axes from), leave a
# check per device, so only the processes whose blocks fail raise; a computation on
# process-local devices (``devices='local'``) fails only on the processes whose data is bad.
_CHECKIFY = contextvars.ContextVar("jwmma_checkify", default=False)
#: whether this JAX's debug callbacks can run on every device (``partitioned=``)
_PARTITIONED = "partitioned" in inspect.signature(jax.debug.callback).parameters


def _x64(on: bool):
    if hasattr(jax, "enable_x64") and callable(jax.enable_x64):
        return jax.enable_x64(on)
    from jax.experimental import disable_x64, enable_x64  # older JAX

    return enable_x64() if on else disable_x64()


class _Message(str):
    """A checkify format string whose ``format`` builds jwmma's message from the payload."""

    def __new__(cls, label, build):
        self = super().__new__(cls, label)
        self.build = build
        return self

    def format(self, *args, **kwargs):  # noqa: A003 - checkify calls fmt_string.format(*operands)
        return self.build(*args)

    def __hash__(self):
        return hash(str(self))


def _summary(bad, operands):
    """(count, first index (one int32 scalar per dim), each operand's value at the first
    index's leading dims) of a boolean array, by reductions only (no gather): on a sharded
    array every result is replicated. No True entry: count 0, first all zeros."""
    bad = bad.astype(bool)
    count = jnp.sum(bad, dtype=jnp.int32)
    # the first True in row-major order, one dim after the other (int32 minima: no argmax,
    # whose index type follows the x64 flag, and no flat index that could pass 2**31)
    at, first = bad, []
    for d in range(bad.ndim):
        iota = jax.lax.broadcasted_iota(jnp.int32, bad.shape, d)
        i = jnp.min(jnp.where(at, iota, jnp.int32(bad.shape[d])))
        i = jnp.where(count > 0, i, jnp.int32(0))
        first.append(i)
        at = at & (iota == i)
    first = tuple(first)
    values = []
    for op in operands:
        op = op.astype(jnp.int32) if op.dtype == bool else op
        full = jnp.broadcast_to(op.reshape(op.shape + (1,) * (bad.ndim - op.ndim)), bad.shape)
        values.append(jnp.sum(jnp.where(at, full, jnp.zeros((), op.dtype)), dtype=op.dtype))  # one term: exact
    return count, first, values


_summary_jit = jax.jit(_summary)


def _concrete_summary(bad, operands):
    """`_summary` of concrete values as Python/numpy scalars, or None when nothing fails. A
    `jax.Array` (also a global array of several processes, which cannot be read back whole)
    is summarised on its devices: only scalars come back."""
    if any(isinstance(x, jax.Array) for x in (bad, *operands)):
        count, first, values = _summary_jit(jnp.asarray(bad), [jnp.asarray(o) for o in operands])
        if int(count) == 0:
            return None
        return int(count), tuple(int(i) for i in first), [np.asarray(v)[()] for v in values]
    b = np.asarray(bad)
    if not b.any():
        return None
    first = tuple(int(i) for i in np.unravel_index(int(np.argmax(b.reshape(-1))), b.shape))
    return int(b.sum()), first, [np.asarray(o)[first[: np.ndim(o)]] for o in operands]


def fail_if(bad, describe, *operands) -> None:
    """Raise ValueError(describe(count, first, *values)) where any of ``bad`` is True.

    Args:
        bad: a boolean array; concrete: checked now; traced: when the computation runs (a
            host callback, or a checkify check inside `jwmma.checked`), on every process of
            a multi-process job alike (section comment above).
        describe: builds the message from the number of True entries of ``bad``, the index
            tuple of the first and each operand's value at the first index's leading dims.
        operands: integer or bool arrays of ``bad``'s leading dims (e.g. ``bad``'s shape,
            or without its last axis).
    """
    for o in operands:
        if np.ndim(o) > np.ndim(bad):
            raise ValueError("fail_if: an operand has more dims than bad")  # jwmma's own misuse
    if is_concrete(bad) and all(is_concrete(o) for o in operands):
        got = _concrete_summary(bad, operands)
        if got is not None:
            raise ValueError(describe(got[0], got[1], *got[2]))
        return
    bad = jnp.asarray(bad)
    operands = tuple(jnp.asarray(o) for o in operands)
    if bad.size == 0:
        return
    handled = _checked_by_vmap(bad, operands, describe)
    count, first, values = _summary(bad, operands)
    axes = _manual_axes(bad, *operands)
    if axes:  # inside shard_map: agree over the devices whose blocks differ
        count, first, values = _agree_over(axes, count, first, values)
    nd = len(first)

    def message(count, *rest):
        first, values = rest[:nd], rest[nd:]
        return describe(int(count), tuple(int(i) for i in first), *(np.asarray(v)[()] for v in values))

    if _CHECKIFY.get():
        from jax.experimental import checkify

        # checkify's error state is made outside jwmma's x64 scope: 32-bit payloads only
        # (values beyond int32 show clipped in the message; the check itself is exact)
        values = [jnp.clip(v, -2**31, 2**31 - 1).astype(jnp.int32) if v.dtype.itemsize == 8 else v for v in values]
        with _x64(_CHECKIFY.get() == "x64"):  # the setting the user's error state was made in
            checkify.check((count == 0) | handled, _Message(f"jwmma check {id(describe)}", message), count, *first,
                           *values)
        return

    def cb(done, count, *rest):
        if not np.asarray(done) and int(count):
            raise ValueError(message(count, *rest))

    # one call in a one-process job; every device (so every process) in a multi-process one
    many = {"partitioned": True} if jax.process_count() > 1 and _PARTITIONED else {}
    jax.debug.callback(cb, handled, count, *first, *values, **many)


def _manual_axes(*xs) -> tuple:
    """The `shard_map` mesh axes over which any of ``xs`` varies (its type's varying manual
    axes, ``vma`` before JAX 0.10), sorted; () outside shard_map, where JAX does not track
    them (``check_vma=False``) and in JAX versions without them."""
    typeof = getattr(jax, "typeof", None)
    if typeof is None:  # pragma: no cover - JAX before varying-axis types
        return ()
    names = set()
    for x in xs:
        t = typeof(x)
        if hasattr(t, "vma"):  # JAX 0.6 .. 0.9
            names |= set(t.vma)
        elif hasattr(getattr(t, "manual_axis_type", None), "varying"):  # JAX 0.10 on
            names |= set(t.manual_axis_type.varying)
    return tuple(sorted(names))


def _agree_over(axes, count, first, values):
    """Inside `shard_map` each device summarises its own block: every device takes the
    summary of the first failing device along ``axes`` (the lowest linear index; its
    block-local index, as the mapped function sees its block), by a pmin and psums, so the
    devices of every process raise the same message. Nothing fails: count stays 0."""
    from jax import lax

    me = lax.axis_index(axes)
    chosen = lax.pmin(jnp.where(count > 0, me, jnp.iinfo(jnp.int32).max).astype(jnp.int32), axes)

    def pick(v):
        return lax.psum(jnp.where(me == chosen, v, jnp.zeros((), v.dtype)), axes)

    return pick(count), tuple(pick(i) for i in first), [pick(v) for v in values]


def _checked_by_vmap(bad, operands, describe):
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
        fail_if(whole[0], describe, *whole[1:])
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
        def describe(count, where, value):
            return (f"{what} must hold values in [{lo}, {hi}]; {what}[{', '.join(map(str, where))}] = "
                    f"{value} ({count} value(s) out of range)")

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
