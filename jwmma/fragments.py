"""Fragments: matrices <-> per-lane register vectors (API.md section 3).

Registers are arrays of shape (*batch, lanes, n) with the builtin's HIP element type: float16,
bfloat16 or int16 bit patterns for 16-bit data, int32 words packing 8-bit or 4-bit elements
little-endian (BUILTINS.md section 1). Matrices hold logical element values. All moves are
gathers with the static index arrays of the instruction table.
"""
from __future__ import annotations

import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from . import layouts
from .formats import int_format
from .isa import BuiltinSpec, Operand, lookup
from .validation import as_array, check_last_dims, check_range

_FLOAT_DTYPES = {
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "fp8": np.dtype(ml_dtypes.float8_e4m3fn),
    "bf8": np.dtype(ml_dtypes.float8_e5m2),
    "f32": np.dtype(np.float32),
}
_INT_RANGES = {"iu8": (-128, 255), "i8": (-128, 127), "iu4": (-8, 15), "i32": (-(2**31), 2**31 - 1)}


# ------------------------------------------------------------------ registers <-> element codes
def reg_dtype_ok(op: Operand, dtype) -> bool:
    dtype = np.dtype(dtype)
    return dtype == op.dtype or dtype in op.also


def regs_to_codes(op: Operand, regs) -> jnp.ndarray:
    """(*batch, lanes, n) registers -> (*batch, lanes, elems) int32 element bit patterns."""
    if not op.packed:
        return lax.bitcast_convert_type(regs, jnp.uint16).astype(jnp.int32)
    words = lax.bitcast_convert_type(regs, jnp.uint32) if regs.dtype != jnp.uint32 else regs
    per = 32 // op.elem_bits
    shifts = jnp.arange(per, dtype=jnp.uint32) * op.elem_bits
    codes = ((words[..., None] >> shifts) & ((1 << op.elem_bits) - 1)).astype(jnp.int32)
    return codes.reshape(*words.shape[:-1], words.shape[-1] * per)[..., : op.elems]


def codes_to_regs(op: Operand, codes, dtype=None) -> jnp.ndarray:
    """Inverse of `regs_to_codes`; ``dtype`` picks one of the operand's accepted dtypes."""
    dtype = np.dtype(dtype or op.dtype)
    if not op.packed:
        return lax.bitcast_convert_type(codes.astype(jnp.uint16), dtype)
    per = 32 // op.elem_bits
    codes = codes.astype(jnp.int32) & ((1 << op.elem_bits) - 1)
    pad = op.n * per - op.elems
    if pad:
        codes = jnp.concatenate([codes, jnp.zeros((*codes.shape[:-1], pad), jnp.int32)], -1)
    codes = codes.reshape(*codes.shape[:-1], op.n, per)
    shifts = jnp.arange(per, dtype=jnp.int32) * op.elem_bits
    words = _or_reduce(codes << shifts)
    return words if dtype == np.int32 else lax.bitcast_convert_type(words, dtype)


def _or_reduce(x):
    out = x[..., 0]
    for i in range(1, x.shape[-1]):
        out = out | x[..., i]
    return out


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


def permute(flat, perm: np.ndarray):
    """out[..., i] = flat[..., perm[i]] for a static permutation: a reshape/transpose when
    the permutation moves index bits (cheap and fusible), a gather otherwise."""
    axes = _bit_permutation(np.asarray(perm))
    if axes is None:
        return flat[..., perm]
    lead = flat.shape[:-1]
    n = len(axes)
    x = flat.reshape(*lead, *([2] * n))
    x = jnp.transpose(x, tuple(range(len(lead))) + tuple(len(lead) + a for a in axes))
    return x.reshape(*lead, perm.size)


def lanes_to_matrix(layout: np.ndarray, shape, lane_vals) -> jnp.ndarray:
    """(*batch, lanes, n) -> (*batch, R, C) with the static inverse of ``layout``."""
    inv = layouts.inverse(layout, shape)
    flat = lane_vals.reshape(*lane_vals.shape[:-2], -1)
    return permute(flat, inv.reshape(-1)).reshape(*lane_vals.shape[:-2], *shape)


def matrix_to_lanes(layout: np.ndarray, mat) -> jnp.ndarray:
    """(*batch, R, C) -> (*batch, lanes, n): element [L, e] = mat[layout[L, e]]."""
    cols = mat.shape[-1]
    flat_idx = (layout[..., 0].astype(np.int64) * cols + layout[..., 1]).reshape(-1)
    flat = mat.reshape(*mat.shape[:-2], -1)
    return permute(flat, flat_idx).reshape(*mat.shape[:-2], *layout.shape[:2])


# ------------------------------------------------------------------ matrix values <-> codes
def _value_codes(spec_type: str, x, what: str, builtin: str | None = None) -> jnp.ndarray:
    """Logical matrix values -> int32 bit patterns of the element type ``spec_type``.
    ``builtin``: name the builtin in the messages (whole-GEMM inputs)."""
    x = as_array(x, what)
    if spec_type in _FLOAT_DTYPES:
        want = _FLOAT_DTYPES[spec_type]
        if np.dtype(x.dtype) != want:
            mod = "np" if want.name in ("float16", "float32") else "ml_dtypes"
            if builtin is None:
                msg = (f"{what} must hold {want.name} values for a {spec_type} operand, got {x.dtype}; "
                       f"convert explicitly, e.g. x.astype({mod}.{want.name}) (rounds to nearest even)")
            else:
                msg = (f"{what} must be {want.name} for {builtin} ({spec_type} operand), got {x.dtype}; "
                       f"convert it first, e.g. {what}.astype({mod}.{want.name}) or "
                       f"jnp.asarray({what}, jnp.{want.name}) (round to nearest even)")
            raise TypeError(msg)
        width = {4: jnp.int32, 2: jnp.uint16, 1: jnp.uint8}[want.itemsize]
        return lax.bitcast_convert_type(jnp.asarray(x), width).astype(jnp.int32)
    if not jnp.issubdtype(x.dtype, jnp.integer):
        where = f"a {spec_type} operand" if builtin is None else f"{builtin} ({spec_type} operand)"
        raise TypeError(f"{what} must hold integers for {where}, got {x.dtype}")
    lo, hi = _INT_RANGES[spec_type]
    check_range(x, lo, hi, what)
    return jnp.asarray(x).astype(jnp.int32)


def _codes_to_values(spec_type: str, codes, signed: bool) -> jnp.ndarray:
    if spec_type in _FLOAT_DTYPES:
        want = _FLOAT_DTYPES[spec_type]
        if want.itemsize == 4:
            return lax.bitcast_convert_type(codes.astype(jnp.int32), jnp.float32)
        width = jnp.uint16 if want.itemsize == 2 else jnp.uint8
        return lax.bitcast_convert_type(codes.astype(width), want)
    if spec_type == "i32":
        return codes.astype(jnp.int32)
    fmt = int_format(spec_type, signed)
    v = codes & ((1 << fmt.bits) - 1)
    if fmt.signed:
        v = jnp.where(v >= (1 << (fmt.bits - 1)), v - (1 << fmt.bits), v)
        return v.astype(jnp.int8)
    return v.astype(jnp.uint8)


def _codes_of(spec_type, values, bits, what):
    codes = _value_codes(spec_type, values, what)
    return codes & ((1 << bits) - 1) if bits < 32 else codes


# ------------------------------------------------------------------------------ public API
def pack_a(name: str, a_comp) -> jnp.ndarray:
    """Compressed A (*batch, M, Kc) -> registers (*batch, lanes, n_a) of the builtin's type."""
    spec = lookup(name)
    a_comp = as_array(a_comp, "a_comp")
    check_last_dims(a_comp, (spec.m, spec.kc), "a_comp", "(*batch, M, Kc)")
    codes = _codes_of(spec.a_type, a_comp, spec.a.elem_bits, "a_comp")
    return codes_to_regs(spec.a, matrix_to_lanes(spec.a_layout, codes))


def unpack_a(name: str, regs, *, signed: bool = True) -> jnp.ndarray:
    """Registers (*batch, lanes, n_a) -> compressed A (*batch, M, Kc) logical values.
    ``signed`` picks the reading of iu8/iu4 data (the builtin's a_neg)."""
    spec = lookup(name)
    regs = _check_regs(spec, spec.a, regs, "a")
    lane_codes = regs_to_codes(spec.a, regs)
    return _codes_to_values(spec.a_type, lanes_to_matrix(spec.a_layout, (spec.m, spec.kc), lane_codes), signed)


def pack_b(name: str, b) -> jnp.ndarray:
    """Dense B (*batch, K, N) -> registers (*batch, lanes, n_b)."""
    spec = lookup(name)
    b = as_array(b, "b")
    check_last_dims(b, (spec.k, spec.n), "b", "(*batch, K, N)")
    codes = _codes_of(spec.b_type, b, spec.b.elem_bits, "b")
    return codes_to_regs(spec.b, matrix_to_lanes(spec.b_layout, codes))


def unpack_b(name: str, regs, *, signed: bool = True) -> jnp.ndarray:
    spec = lookup(name)
    regs = _check_regs(spec, spec.b, regs, "b")
    lane_codes = regs_to_codes(spec.b, regs)
    return _codes_to_values(spec.b_type, lanes_to_matrix(spec.b_layout, (spec.k, spec.n), lane_codes), signed)


def pack_c(name: str, c) -> jnp.ndarray:
    """Accumulator (*batch, M, N) -> registers (*batch, lanes, n_c) (float32, float16,
    RDNA4 bf16 as int16 bit patterns, or int32)."""
    spec = lookup(name)
    c = as_array(c, "c")
    check_last_dims(c, (spec.m, spec.n), "c", "(*batch, M, N)")
    codes = _codes_of(spec.c_type, c, 32 if spec.c_type in ("f32", "i32") else 16, "c")
    lane = matrix_to_lanes(spec.c_layout, codes)
    if spec.c_type == "f32":
        return lax.bitcast_convert_type(lane, jnp.float32)
    if spec.c_type == "i32":
        return lane
    return codes_to_regs(spec.c, lane)


def unpack_c(name: str, regs) -> jnp.ndarray:
    spec = lookup(name)
    regs = _check_regs(spec, spec.c, regs, "c")
    if spec.c_type == "f32":
        codes = lax.bitcast_convert_type(regs, jnp.int32)
    elif spec.c_type == "i32":
        codes = regs
    else:
        codes = regs_to_codes(spec.c, regs)
    return _codes_to_values(spec.c_type, lanes_to_matrix(spec.c_layout, (spec.m, spec.n), codes), True)


def index_maps(spec: BuiltinSpec):
    """Static (M, Kc) arrays: the lane holding each compressed A element and its element e."""
    inv = layouts.inverse(spec.a_layout, (spec.m, spec.kc))
    return inv // spec.a.elems, inv % spec.a.elems


def pack_index(name: str, pos, index_set: int = 0) -> jnp.ndarray:
    """Positions (*batch, M, Kc), ints 0..3 -> index registers (*batch, lanes) int32.

    Bits s+2e+1:s+2e of idx[lane] hold the position of the lane's A element e; bits outside
    the chosen index set are zero."""
    spec = lookup(name)
    s = spec.index_offset(index_set)
    pos = as_array(pos, "pos")
    check_last_dims(pos, (spec.m, spec.kc), "pos", "(*batch, M, Kc)")
    if not jnp.issubdtype(pos.dtype, jnp.integer):
        raise TypeError(f"pos must hold integers 0..3, got {pos.dtype}")
    check_range(pos, 0, 3, "pos")
    lane_pos = matrix_to_lanes(spec.a_layout, pos.astype(jnp.uint32))
    shifts = (s + 2 * jnp.arange(spec.a.elems, dtype=jnp.uint32)).astype(jnp.uint32)
    words = _or_reduce(lane_pos << shifts)
    return lax.bitcast_convert_type(words, jnp.int32)


def unpack_index(name: str, idx, index_set: int = 0) -> jnp.ndarray:
    """Index registers (*batch, lanes) -> positions (*batch, M, Kc) int32."""
    spec = lookup(name)
    s = spec.index_offset(index_set)
    idx = _check_index(spec, idx, "idx")
    return positions(spec, idx, s)


def positions(spec: BuiltinSpec, idx, s: int) -> jnp.ndarray:
    """Static-gather form used inside the builtins: (*batch, lanes) -> (*batch, M, Kc)."""
    lane_of, e_of = index_maps(spec)
    words = lax.bitcast_convert_type(idx.astype(jnp.int32), jnp.uint32)
    picked = words[..., lane_of.reshape(-1)].reshape(*idx.shape[:-1], spec.m, spec.kc)
    shift = jnp.asarray((s + 2 * e_of).astype(np.uint32))
    return ((picked >> shift) & 3).astype(jnp.int32)


# ------------------------------------------------------------------------------ validation
def _check_regs(spec: BuiltinSpec, op: Operand, regs, what: str):
    regs = as_array(regs, what)
    if not reg_dtype_ok(op, regs.dtype):
        allowed = ", ".join(np.dtype(d).name for d in (op.dtype, *op.also))
        raise TypeError(f"{what} for {spec.name} must have dtype {allowed}; got {regs.dtype}")
    check_last_dims(regs, (spec.lanes, op.n), what, "(*batch, lanes, n)")
    return regs


def _check_index(spec: BuiltinSpec, idx, what: str):
    idx = as_array(idx, what)
    if idx.dtype not in (np.dtype(np.int32), np.dtype(np.uint32)):
        raise TypeError(f"{what} for {spec.name} must be int32 (one word per lane), got {idx.dtype}")
    if idx.ndim < 1 or idx.shape[-1] != spec.lanes:
        raise ValueError(
            f"{what} for {spec.name} must have shape (*batch, {spec.lanes}), got {tuple(idx.shape)}"
        )
    return idx


__all__ = [
    "pack_a", "unpack_a", "pack_b", "unpack_b", "pack_c", "unpack_c", "pack_index", "unpack_index",
]
