"""Registers <-> element codes, and element codes between lanes and matrix positions
(BUILTINS.md section 1; API.md section 3): the bit-level half of the fragment codec.

Registers are arrays of shape (*batch, lanes, n) of the builtin's HIP storage (float16,
bfloat16 or int16 bit patterns, float32/int32, int32 words packing 8-/4-bit elements
little-endian, or uint32 word pairs holding doubles); codes are int32 bit patterns, one per
element (int64 for doubles, which exist only inside `x64_scope`). Layout moves are static
reshapes/transposes when a layout only moves index bits (every row's does), gathers otherwise.
`fragments` builds the user-facing pack/unpack on these.
"""
from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
from jax import lax

from ..isa import layouts
from ..isa.table import Operand

__all__ = ["register_words", "regs_to_codes", "codes_to_regs", "or_reduce", "permute", "lanes_to_matrix", "matrix_to_lanes"]

# ------------------------------------------------------------------ registers <-> element codes
def register_words(regs):
    """Registers as integer words of their width: float16/bfloat16 as uint16, float32 as
    int32 (one free bit cast), integer registers as they are. Every register move (padding
    waves into blocks, slicing them) then moves bits: XLA's CPU backend may route float copies
    through float32 and change them (JAX 0.11 flushes bf16 subnormals in a pad, JAX 0.10
    quiets NaN payloads)."""
    d = np.dtype(regs.dtype)
    if d.kind != "f" and not jnp.issubdtype(d, jnp.floating):
        return regs
    return lax.bitcast_convert_type(regs, jnp.uint16 if d.itemsize == 2 else jnp.int32)


def regs_to_codes(op: Operand, regs) -> jnp.ndarray:
    """(*batch, lanes, n) registers -> (*batch, lanes, elems) int32 element codes.

    Args:
        op: the operand; regs: registers of one of its accepted dtypes.
    Returns:
        16-bit elements as their unsigned bit patterns, 32-bit ones as int32 bits, packed
        8/4-bit ones unpacked (unsigned), 64-bit ones (`double`: two words, low first) as
        int64 bits (inside `x64_scope`).
    """
    if op.elem_bits == 64:
        words = lax.bitcast_convert_type(regs, jnp.uint32) if regs.dtype != jnp.uint32 else regs
        words = words.reshape(*words.shape[:-1], op.elems, 2).astype(jnp.uint64)
        return lax.bitcast_convert_type(words[..., 0] | (words[..., 1] << jnp.uint64(32)), jnp.int64)
    if op.elem_bits == 32:
        return lax.bitcast_convert_type(regs, jnp.int32) if regs.dtype != jnp.int32 else regs
    if not op.packed:
        return lax.bitcast_convert_type(regs, jnp.uint16).astype(jnp.int32)
    words = lax.bitcast_convert_type(regs, jnp.uint32) if regs.dtype != jnp.uint32 else regs
    if 32 % op.elem_bits:  # 6-bit elements: one little-endian bit string, fields may straddle words
        return _string_to_codes(op, words)
    per = 32 // op.elem_bits
    shifts = jnp.arange(per, dtype=jnp.uint32) * op.elem_bits
    codes = ((words[..., None] >> shifts) & ((1 << op.elem_bits) - 1)).astype(jnp.int32)
    return codes.reshape(*words.shape[:-1], words.shape[-1] * per)[..., : op.elems]


def element_fields(op: Operand):
    """(word, bit offset) of every element of a bit-string operand (element e at bits
    w*e .. w*e + w - 1 of the words taken little-endian, BUILTINS_DENSE.md 5.2)."""
    start = np.arange(op.elems) * op.elem_bits
    return start // 32, start % 32


def _string_to_codes(op: Operand, words):
    w0, off = element_fields(op)
    nxt = np.minimum(w0 + 1, op.n - 1)
    lo = words[..., w0] >> off.astype(np.uint32)
    spill = off + op.elem_bits > 32  # the field continues in the next word
    hi = jnp.where(spill, words[..., nxt] << np.where(spill, 32 - off, 0).astype(np.uint32), 0)
    return ((lo | hi) & ((1 << op.elem_bits) - 1)).astype(jnp.int32)


def _codes_to_string(op: Operand, codes):
    """Inverse of `_string_to_codes`: (..., elems) codes -> (..., n) uint32 words."""
    w0, off = element_fields(op)
    codes = (codes.astype(jnp.int32) & ((1 << op.elem_bits) - 1)).astype(jnp.uint32)
    words = []
    for j in range(op.n):
        parts = [codes[..., e] << int(off[e]) for e in range(op.elems) if w0[e] == j]
        parts += [codes[..., e] >> int(32 - off[e]) for e in range(op.elems)
                  if w0[e] == j - 1 and off[e] + op.elem_bits > 32]
        words.append(functools.reduce(jnp.bitwise_or, parts) if parts else jnp.zeros(codes.shape[:-1], jnp.uint32))
    return jnp.stack(words, -1)


def codes_to_regs(op: Operand, codes, dtype=None) -> jnp.ndarray:
    """Inverse of `regs_to_codes`.

    Args:
        op: the operand; codes: (*batch, lanes, elems) int32 codes.
        dtype: one of the operand's accepted dtypes (default: its register dtype).
    Returns:
        (*batch, lanes, n) registers of ``dtype``.
    """
    dtype = np.dtype(dtype or op.dtype)
    if op.elem_bits == 64:  # int64 bit patterns -> two words each, low word first
        bits = lax.bitcast_convert_type(codes.astype(jnp.int64), jnp.uint64)
        words = jnp.stack([bits & jnp.uint64(0xFFFFFFFF), bits >> jnp.uint64(32)], -1).astype(jnp.uint32)
        words = words.reshape(*words.shape[:-2], op.n)
        return words if dtype == np.uint32 else lax.bitcast_convert_type(words, dtype)
    if op.elem_bits == 32:
        codes = codes.astype(jnp.int32)
        return codes if dtype == np.int32 else lax.bitcast_convert_type(codes, dtype)
    if not op.packed:
        return lax.bitcast_convert_type(codes.astype(jnp.uint16), dtype)
    if 32 % op.elem_bits:
        words = _codes_to_string(op, codes)
        return words if dtype == np.uint32 else lax.bitcast_convert_type(words, dtype)
    per = 32 // op.elem_bits
    codes = codes.astype(jnp.int32) & ((1 << op.elem_bits) - 1)
    pad = op.n * per - op.elems
    if pad:
        codes = jnp.concatenate([codes, jnp.zeros((*codes.shape[:-1], pad), jnp.int32)], -1)
    codes = codes.reshape(*codes.shape[:-1], op.n, per)
    shifts = jnp.arange(per, dtype=jnp.int32) * op.elem_bits
    words = or_reduce(codes << shifts)
    return words if dtype == np.int32 else lax.bitcast_convert_type(words, dtype)


def or_reduce(x):
    """Bitwise OR over the last axis (a static unrolled loop: XLA has no OR reduction)."""
    out = x[..., 0]
    for i in range(1, x.shape[-1]):
        out = out | x[..., i]
    return out


# ------------------------------------------------------------------ lanes <-> matrix positions
def _bit_permutation(perm: np.ndarray):
    """If perm (a permutation of 2**n indices) only moves index bits around — every layout
    of the table does — return the transpose axes that implement it, else None."""
    size = perm.size
    n = size.bit_length() - 1
    if size != 1 << n or n == 0:
        return None
    src = [int(perm[1 << b]) for b in range(n)]
    if perm[0] != 0 or any(v & (v - 1) or v == 0 for v in src):
        return None
    sigma = [v.bit_length() - 1 for v in src]
    idx = np.arange(size)
    built = np.zeros(size, np.int64)
    for b in range(n):
        built |= ((idx >> b) & 1) << sigma[b]
    if not np.array_equal(built, perm):
        return None
    axes = [0] * n
    for b in range(n):
        axes[n - 1 - b] = n - 1 - sigma[b]
    return tuple(axes)


def permute(flat, perm: np.ndarray, gather: bool = False):
    """out[..., i] = flat[..., perm[i]] for a static permutation: a reshape/transpose when
    the permutation moves index bits (cheap and fusible), a gather otherwise or with
    ``gather``. The gather is for arrays that enter or leave a kernel (a custom call XLA cannot
    fuse into): there XLA:GPU formed the many-axis transposes as separate tiled-transpose
    fusions, 2.3 of an fp8 SMFMAC call's 6.0 ms of device time over 65536 waves on an H100
    (RESULTS.md), while a gather fuses into the operand words around it. Where XLA fuses the
    permutation into elementwise consumers (the XLA models' steps), the transpose stays: a
    gather there made an RDNA3 WMMA call 3x slower."""
    axes = None if gather else _bit_permutation(np.asarray(perm))
    if axes is None:
        return flat[..., np.asarray(perm)]
    lead = flat.shape[:-1]
    n = len(axes)
    x = flat.reshape(*lead, *([2] * n))
    x = jnp.transpose(x, tuple(range(len(lead))) + tuple(len(lead) + a for a in axes))
    return x.reshape(*lead, perm.size)


def lanes_to_matrix(layout: np.ndarray, shape, lane_vals, gather: bool = False) -> jnp.ndarray:
    """(*batch, lanes, n) -> (*batch, R, C) with the static inverse of ``layout`` (a replicated
    layout's first copy: RDNA3 WMMA A/B are read from lanes 0-15); ``gather``: as `permute`'s."""
    inv = layouts.inverse(layout, shape)
    flat = lane_vals.reshape(*lane_vals.shape[:-2], lane_vals.shape[-2] * lane_vals.shape[-1])
    if flat.shape[-1] > inv.size and inv.max() < inv.size:  # the first copy fills the first lanes
        flat = flat[..., : inv.size]
    return permute(flat, inv.reshape(-1), gather).reshape(*lane_vals.shape[:-2], *shape)


def flat_positions(layout: np.ndarray, cols: int) -> np.ndarray:
    """Row-major flat matrix index (int64) of every (lane, element) of ``layout``, lane-major:
    the source of each register slot in a matrix of ``cols`` columns."""
    return (layout[..., 0].astype(np.int64) * cols + layout[..., 1]).reshape(-1)


def matrix_to_lanes(layout: np.ndarray, mat, gather: bool = False) -> jnp.ndarray:
    """(*batch, R, C) -> (*batch, lanes, n): element [L, e] = mat[layout[L, e]]; ``gather``: as
    `permute`'s."""
    flat_idx = flat_positions(layout, mat.shape[-1])
    flat = mat.reshape(*mat.shape[:-2], mat.shape[-2] * mat.shape[-1])
    return permute(flat, flat_idx, gather).reshape(*mat.shape[:-2], *layout.shape[:2])
