"""The fragment codec on the host, in numpy (API.md section 3; BUILTINS.md sections 1 and 5):
what `fragments._pack_words` / `_unpack_words` (A, B, C) and `index_registers.index_words` /
`positions` (the index words) compute, for operands already in host memory (numpy arrays,
and JAX arrays on one CPU device).

Why a second form: packing and unpacking only move bits, and numpy moves them without
compiling anything. As XLA programs, each builtin, operand and batch shape compiled a program
of its own on first use (about 0.04 CPU s each; 557 of the 2571 programs the test suite
compiled, and about 2 s of a cold `jwmma demo`). Traced operands (a user's jit, vmap or grad)
and arrays on other devices keep the compiled form, so a GPU array never makes a round trip
through the host; so do a shape's calls after its first few (`on_host`: numpy is the slower
once the program exists).

The two forms compute the same bits: the layouts are the table's (`layouts.inverse` and the
flat gathers of `registers.permute`), the word packing is BUILTINS.md 1's little-endian
fields, and the tests check both forms against a scalar packing written from the spec and
against each other on every row.
"""
from __future__ import annotations

import functools

import jax
import numpy as np

from ..isa import layouts
from ..isa.records import Operand
from ..isa.table import BuiltinSpec
from ..isa.types import element_type
from . import effort
from .registers import element_fields, flat_positions
from .validation import host_readable

__all__ = ["on_host", "placed_like", "pack_words", "unpack_words", "pack_index_words", "unpack_index_words"]


#: the most elements (matrix values or register words) packed or unpacked here. Numpy runs
#: about 10x slower than the compiled program but compiles nothing (2-core CPU: an fp8 A of
#: 65536 elements 1.4 ms a call against 0.2 ms plus 0.1 s of compiling once; of 2**21
#: elements 39 ms against 2.4 ms): up to 2**20 elements a call costs at most a few compiles' time
HOST_MAX_ELEMENTS = 1 << 20


def on_host(x, key=None) -> bool:
    """Whether ``x`` is packed or unpacked here: a numpy array, or a concrete JAX array on one
    CPU device (numpy reads it in place), of at most `HOST_MAX_ELEMENTS` elements; and, with
    ``key`` (what names the compiled program: row, operand, shape, dtype), only for the first
    `effort.TIER_UP_CALLS` calls of that key. Later calls of a shape take the compiled program,
    so that a codec call repeated in a loop runs at the compiled speed (tiering, as
    `effort.settle` tiers the builtins' programs up)."""
    if not ((isinstance(x, np.ndarray) or host_readable(x)) and x.size <= HOST_MAX_ELEMENTS):
        return False
    return key is None or effort.count_call(("host codec", *key)) <= effort.TIER_UP_CALLS


def placed_like(x, out: np.ndarray):
    """``out`` as a JAX array where ``x`` lives: on a committed array's device, else on the
    default device (as an eager JAX operation on ``x`` would put its result)."""
    if isinstance(x, jax.Array) and x.committed:
        return jax.device_put(out, next(iter(x.sharding.device_set)))
    return jax.device_put(out)  # (jnp.asarray compiles a small program for every new shape)


# ------------------------------------------------------------------------------ layouts
@functools.lru_cache(maxsize=None)
def _to_lanes(spec: BuiltinSpec, which: str) -> np.ndarray:
    """Flat matrix index of every (lane, slot) of operand ``which`` (lanes * slots,)."""
    layout, shape = _layout(spec, which)
    return flat_positions(layout, shape[1])


@functools.lru_cache(maxsize=None)
def _to_matrix(spec: BuiltinSpec, which: str) -> np.ndarray:
    """Flat (lane * slots + slot) index of every matrix element, row major (a replicated
    layout's first copy, as `registers.lanes_to_matrix`)."""
    layout, shape = _layout(spec, which)
    return layouts.inverse(layout, shape).reshape(-1).astype(np.int64)


def _layout(spec: BuiltinSpec, which: str):
    shape = {"a": spec.a_shape, "b": spec.b_shape, "c": spec.c_shape}[which]
    return getattr(spec, f"{which}_layout"), shape


# ------------------------------------------------------------------------------ codes <-> words
def _codes_to_words(op: Operand, codes: np.ndarray) -> np.ndarray:
    """(..., elems) uint32 codes (masked to the element width) -> (..., n) uint32 words:
    elements little-endian from bit 0 (uint32 shifts keep a word's low 32 bits; a 6-bit field
    that crosses a word continues in the next one), 32-bit elements as they are."""
    if op.elem_bits == 32:
        return codes
    words = np.zeros(codes.shape[:-1] + (op.n,), np.uint32)
    w0, off = element_fields(op)
    for e in range(op.elems):  # at most 32 elements a lane: a short static loop
        words[..., w0[e]] |= codes[..., e] << np.uint32(off[e])
        if off[e] + op.elem_bits > 32:
            words[..., w0[e] + 1] |= codes[..., e] >> np.uint32(32 - off[e])
    return words


def _words_to_codes(op: Operand, words: np.ndarray) -> np.ndarray:
    """Inverse of `_codes_to_words`: (..., n) uint32 words -> (..., elems) uint32 codes."""
    if op.elem_bits == 32:
        return words
    w0, off = element_fields(op)
    nxt = np.minimum(w0 + 1, op.n - 1)
    lo = words[..., w0] >> off.astype(np.uint32)
    spill = off + op.elem_bits > 32
    hi = np.where(spill, words[..., nxt] << np.where(spill, 32 - off, 0).astype(np.uint32), np.uint32(0))
    return (lo | hi) & np.uint32((1 << op.elem_bits) - 1)


# ------------------------------------------------------------------------------ values <-> codes
def _value_codes(type_name: str, x: np.ndarray) -> np.ndarray:
    """Checked values -> uint32 codes: a float's bit pattern, an integer's two's complement
    bits (the caller masks them to the element width)."""
    t = element_type(type_name)
    d = np.dtype(x.dtype)
    if t.is_float and d == t.format.dtype:
        return x.view(np.dtype(f"u{d.itemsize}")).astype(np.uint32)
    return x.astype(np.int32).view(np.uint32)  # (range-checked: int32 holds every value)


def _code_values(type_name: str, codes: np.ndarray, signed: bool) -> np.ndarray:
    """uint32 codes -> values of the type's value dtype (`element_codes.codes_to_values`)."""
    t = element_type(type_name)
    want = t.value_dtype(signed)
    if t.is_float:
        return codes.astype(np.dtype(f"u{want.itemsize}")).view(want)
    fmt = t.int_format(signed)
    if fmt.bits == 32:
        return codes.view(np.int32)
    v = (codes & np.uint32((1 << fmt.bits) - 1)).astype(np.int32)
    if fmt.signed:
        v = np.where(v >= (1 << (fmt.bits - 1)), v - (1 << fmt.bits), v)
    return v.astype(want)


# ------------------------------------------------------------------------------ pack / unpack
def pack_words(x, spec: BuiltinSpec, which: str, half: int) -> np.ndarray:
    """`fragments._pack_words` on the host.

    Args:
        x: checked values of operand ``which`` ('a', 'b' or 'c'), (*batch, R, C), numpy or a
            host-readable JAX array; spec: the row (its format variant for a scaled row);
            half: an opsel row's C half (0 or 1; else 0).
    Returns:
        (*batch, lanes, n) numpy registers of the operand's register dtype.
    """
    op = getattr(spec, which)
    t = getattr(spec, f"{which}_type")
    x = np.asarray(x)
    codes = _value_codes(t, x) & np.uint32((1 << op.elem_bits) - 1)
    flat = codes.reshape(*x.shape[:-2], x.shape[-2] * x.shape[-1])
    idx = _to_lanes(spec, which)
    lanes = flat[..., idx].reshape(*x.shape[:-2], spec.lanes, idx.size // spec.lanes)
    if which == "c" and spec.opsel:  # the values in half `half` of every VGPR, zeros in the other
        pair = (lanes, np.zeros_like(lanes)) if half == 0 else (np.zeros_like(lanes), lanes)
        lanes = np.stack(pair, -1).reshape(*lanes.shape[:-1], 2 * lanes.shape[-1])
    if op.elem_bits == 16:
        return lanes.astype(np.uint16).view(op.dtype)
    return _codes_to_words(op, lanes).view(op.dtype)


def unpack_words(regs, spec: BuiltinSpec, which: str, half: int, signed: bool) -> np.ndarray:
    """`fragments._unpack_words` on the host, and the values of a 6-bit type (which the
    compiled form leaves to `element_codes.codes_to_values`).

    Args:
        regs: checked (*batch, lanes, n) registers, numpy or a host-readable JAX array;
            spec, which, half: as `pack_words`; signed: the reading of iu8/iu4 data.
    Returns:
        (*batch, R, C) numpy values of the operand's value dtype.
    """
    op = getattr(spec, which)
    t = getattr(spec, f"{which}_type")
    _, shape = _layout(spec, which)
    regs = np.asarray(regs)
    if op.elem_bits == 16:  # 16-bit registers, one element each
        codes = regs.view(np.uint16).astype(np.uint32)
    else:
        codes = _words_to_codes(op, regs.view(np.uint32))
    if which == "c" and spec.opsel:
        codes = codes[..., half::2]
    flat = codes.reshape(*codes.shape[:-2], codes.shape[-2] * codes.shape[-1])
    mat = flat[..., _to_matrix(spec, which)].reshape(*codes.shape[:-2], *shape)
    return _code_values(t, mat, signed)


# ------------------------------------------------------------------------------ index registers
def pack_index_words(pos, spec: BuiltinSpec, s: int) -> np.ndarray:
    """`index_registers.index_words` on the host: checked positions (*batch, M, Kc) ints 0..3
    -> (*batch, lanes) int32 index words, the position of a lane's A element e in bits
    s+2e+1:s+2e (BUILTINS.md 1 and 5); a dense row's words are zeros."""
    pos = np.asarray(pos)
    batch = pos.shape[:-2]
    if spec.dense:
        return np.zeros(batch + (spec.lanes,), np.int32)
    elems = spec.a.elems
    flat = (pos.astype(np.int32) & 3).astype(np.uint32).reshape(*batch, pos.shape[-2] * pos.shape[-1])
    lane_pos = flat[..., _to_lanes(spec, "a")].reshape(*batch, spec.lanes, elems)
    shifts = s + 2 * np.arange(elems)
    assert shifts.max() < 32, "an index field past bit 31"  # (a table error: every set fits its word)
    return np.bitwise_or.reduce(lane_pos << shifts.astype(np.uint32), axis=-1).view(np.int32)


def unpack_index_words(idx, spec: BuiltinSpec, s: int) -> np.ndarray:
    """`index_registers.positions` on the host: (*batch, lanes) int32/uint32 index words ->
    (*batch, M, Kc) int32 positions of the set at bit ``s``; a dense row's are zeros."""
    idx = np.asarray(idx)
    batch = idx.shape[:-1]
    if spec.dense:
        return np.zeros(batch + (spec.m, spec.kc), np.int32)
    inv = _to_matrix(spec, "a")  # lane * elems + e of every (row, compressed column)
    elems = spec.a.elems
    picked = idx.view(np.uint32)[..., inv // elems]
    shift = (s + 2 * (inv % elems)).astype(np.uint32)
    return ((picked >> shift) & np.uint32(3)).astype(np.int32).reshape(*batch, spec.m, spec.kc)
