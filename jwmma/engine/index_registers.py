"""The index registers of the sparse builtins: positions <-> words (API.md section 3,
``pack_index``/``unpack_index``; BUILTINS.md sections 1 and 5).

A stored A element's position (0..3) inside its group of four dense K sits in 2 bits of its
lane's index word: bits [s + 2e + 1 : s + 2e] for stored element e of the lane, s the offset
of the index set a call reads (`jwmma.engine.index`). Dense builtins have no index register:
their words are zeros and their positions ignored.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..isa import layouts
from ..isa.table import BuiltinSpec, lookup
from ..keywords import strict_keywords
from . import host_codec
from .registers import matrix_to_lanes, or_reduce
from .validation import as_array, check_bool_kw, check_last_dims, check_static_int, check_values

__all__ = ["pack_index", "unpack_index", "index_words", "positions", "check_index"]


def index_words(spec: BuiltinSpec, pos, s: int) -> jnp.ndarray:
    """Positions (*batch, M, Kc) ints 0..3 -> index registers (*batch, lanes) int32 with the
    position of A element e of a lane in bits s+2e+1:s+2e, all other bits zero (no checks)."""
    if spec.dense:  # no index register: zero words
        return jnp.zeros((*jnp.shape(pos)[:-2], spec.lanes), jnp.int32)
    lane_pos = matrix_to_lanes(spec.a_layout, jnp.asarray(pos).astype(jnp.uint32))
    shifts = (s + 2 * jnp.arange(spec.a.elems, dtype=jnp.uint32)).astype(jnp.uint32)
    return lax.bitcast_convert_type(or_reduce(lane_pos << shifts), jnp.int32)


@strict_keywords
def pack_index(name: str, pos, index_set: int = 0, *, check: bool = False) -> jnp.ndarray:
    """Positions -> index registers.

    Args:
        name: the builtin; pos: (*batch, M, Kc) integers 0..3 (`jwmma.compress_2_4`);
        index_set: which index set to fill (`BuiltinSpec.index_sets`), a Python int.
        check: also check traced positions when the computation runs (concrete positions are
            always checked); with check=False a traced position keeps its low 2 bits (p mod
            4: all-5 positions give 0x55555555), as the index register holds them.
    Returns:
        (*batch, lanes) int32: bits s+2e+1:s+2e of idx[lane] hold the position of the lane's
        A element e; bits outside the chosen index set are zero.
    """
    check = check_bool_kw(check, "check")
    spec = lookup(name)
    s = spec.index_offset(_index_set(spec, index_set))
    pos = as_array(pos, "pos")
    check_last_dims(pos, (spec.m, spec.kc), "pos", "(*batch, M, Kc)")
    if not jnp.issubdtype(pos.dtype, jnp.integer):
        raise TypeError(f"pos must hold integers 0..3, got {pos.dtype}")
    check_values(pos, 0, 3, "pos", check)
    if host_codec.on_host(pos, ("pack_index", spec, s, pos.shape, pos.dtype)):  # numpy: nothing to compile
        return host_codec.placed_like(pos, host_codec.pack_index_words(pos, spec, s))
    return _pack_words(pos, spec=spec, s=s)


@functools.partial(jax.jit, static_argnames=("spec", "s"))
def _pack_words(pos, *, spec: BuiltinSpec, s: int):
    """Checked positions -> index registers, as one program (op by op, a first call compiled
    each of its small operations: `jwmma.engine.fragments._pack_words`)."""
    return index_words(spec, jnp.asarray(pos).astype(jnp.int32) & 3, s)


@functools.partial(jax.jit, static_argnames=("spec", "s"))
def _unpack_words(idx, *, spec: BuiltinSpec, s: int):
    """`positions` as one program (as `_pack_words`)."""
    return positions(spec, idx, s)


def _index_set(spec: BuiltinSpec, index_set):
    """``index_set`` as a Python int in range (a compile-time constant)."""
    return check_static_int(index_set, "index_set", 0, spec.n_sets - 1)


@strict_keywords
def unpack_index(name: str, idx, index_set: int = 0) -> jnp.ndarray:
    """Index registers -> positions.

    Args:
        name: the builtin; idx: (*batch, lanes) int32; index_set: which set to read.
    Returns:
        (*batch, M, Kc) int32 positions 0..3.
    """
    spec = lookup(name)
    s = spec.index_offset(_index_set(spec, index_set))
    idx = check_index(spec, idx, "idx")
    if host_codec.on_host(idx, ("unpack_index", spec, s, idx.shape, idx.dtype)):  # numpy: nothing to compile
        return host_codec.placed_like(idx, host_codec.unpack_index_words(idx, spec, s))
    return _unpack_words(idx, spec=spec, s=s)


def positions(spec: BuiltinSpec, idx, s: int) -> jnp.ndarray:
    """(*batch, lanes) index registers -> (*batch, M, Kc) positions of set offset ``s``
    (static gathers; used inside the builtins). Dense builtins: zeros (`step` ignores them)."""
    if spec.dense:
        return jnp.zeros((*idx.shape[:-1], spec.m, spec.kc), jnp.int32)
    inv = layouts.inverse(spec.a_layout, (spec.m, spec.kc))
    lane_of, e_of = inv // spec.a.elems, inv % spec.a.elems
    words = lax.bitcast_convert_type(idx.astype(jnp.int32), jnp.uint32)
    picked = words[..., lane_of.reshape(-1)].reshape(*idx.shape[:-1], spec.m, spec.kc)
    shift = jnp.asarray((s + 2 * e_of).astype(np.uint32))
    return ((picked >> shift) & 3).astype(jnp.int32)


def check_index(spec: BuiltinSpec, idx, what: str):
    """``idx`` as an array, if it is int32/uint32 of shape (*batch, lanes)."""
    idx = as_array(idx, what)
    if idx.dtype not in (np.dtype(np.int32), np.dtype(np.uint32)):
        raise TypeError(f"{what} for {spec.name} must be int32 (one word per lane), got {idx.dtype}")
    if idx.ndim < 1 or idx.shape[-1] != spec.lanes:
        raise ValueError(
            f"{what} for {spec.name} must have shape (*batch, {spec.lanes}), got {tuple(idx.shape)}"
        )
    return idx
