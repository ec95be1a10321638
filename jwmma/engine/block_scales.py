"""The E8M0 block scales of the block-scaled MFMA (``mfma_scale_*``): scale values <-> scale
registers, and the scale of every matrix element (API.md section 11, ``pack_scale``/
``unpack_scale``; BUILTINS_DENSE.md 5.1 and 5.3).

A scale register is one int32 word per lane whose byte ``opsel`` holds an E8M0 code: lane
M*kb + i holds row i's (B: column i's) scale of K block kb (32 consecutive K). None stands for
no scaling (127 in every byte: factor 1). `format_code` names the element format of values
(the instruction's fmt_a/fmt_b).
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from ..isa import layouts
from ..isa.table import SCALE_FORMATS, BuiltinSpec, lookup
from ..isa.types import element_type
from ..keywords import strict_keywords
from .element_codes import storage_bits
from .host_codec import on_host, placed_like
from .registers import permute
from .validation import as_array, check_last_dims, check_static_int, check_values

__all__ = ["format_code", "scale_matrices", "scale_registers", "check_scale_register", "scale_codes", "pack_scale",
           "unpack_scale"]


def format_code(dtype, what: str) -> int:
    """The block-scaled MFMA's format code (`jwmma.isa.table.SCALE_FORMATS`) of values of
    ``dtype``: float8_e4m3fn 0, float8_e5m2 1, float6_e2m3fn 2, float6_e3m2fn 3,
    float4_e2m1fn 4; TypeError naming ``what`` otherwise."""
    want = {np.dtype(element_type(t).format.dtype): c for c, t in SCALE_FORMATS.items()}
    d = np.dtype(dtype)
    if d not in want:
        names = ", ".join(f"{k.name} ({c})" for k, c in want.items())
        raise TypeError(f"{what} of a block-scaled MFMA must hold one of {names} (ml_dtypes), got {d}; convert "
                        f"it first, e.g. jwmma.numerics.cast(x, ml_dtypes.float4_e2m1fn)")
    return want[d]


# ------------------------------------------------------------------------------ block scales
_UNSCALED = 0x7F7F7F7F  # E8M0 127 in every byte: factor 1


def _scale_shape(spec: BuiltinSpec, which: str):
    blocks = spec.k // spec.scale_block
    return (spec.m, blocks) if which == "a" else (blocks, spec.n)


def scale_matrices(spec: BuiltinSpec, scale_a, scale_b, opsel: tuple):
    """Scale registers (*batch, lanes) -> the E8M0 code of every A element (*batch, M, K)
    and B element (*batch, K, N): the byte ``opsel`` of the lane that holds its row's
    (column's) scale for its K block (BUILTINS_DENSE.md 5.3; static gathers)."""
    lanes = layouts.scale_lanes(spec.m, spec.k, spec.scale_block)  # (M, K/32)
    sa = _scale_bytes(scale_a, opsel[0])[..., lanes]
    sb = jnp.swapaxes(_scale_bytes(scale_b, opsel[1])[..., layouts.scale_lanes(spec.n, spec.k, spec.scale_block)],
                      -1, -2)
    return jnp.repeat(sa, spec.scale_block, axis=-1), jnp.repeat(sb, spec.scale_block, axis=-2)


def scale_registers(spec: BuiltinSpec, a_codes, b_codes):
    """The scale registers (byte 0) of one step of a block-scaled builtin from its scaled
    codes (``element | scale << 8``): A (..., M, K), B (..., K, N) -> two (..., lanes) int32,
    lane M*kb + i holding row i's (column's) scale of block kb, as a kernel loads them."""
    blk = spec.scale_block
    sa = (a_codes[..., :, ::blk] >> 8) & 0xFF  # (..., M, K/32): one element per block
    sb = jnp.swapaxes((b_codes[..., ::blk, :] >> 8) & 0xFF, -1, -2)  # (..., N, K/32)
    out = []
    for s in (sa, sb):
        lanes = layouts.scale_lanes(s.shape[-2], spec.k, blk).reshape(-1)
        flat = s.reshape(*s.shape[:-2], -1)
        out.append(permute(flat, np.argsort(lanes)).astype(jnp.int32))  # lane L takes entry lanes^-1(L)
    return out[0], out[1]


def _scale_bytes(regs, opsel: int):
    words = lax.bitcast_convert_type(jnp.asarray(regs).astype(jnp.int32), jnp.uint32)
    return ((words >> (8 * opsel)) & 0xFF).astype(jnp.int32)


def check_scale_register(spec: BuiltinSpec, regs, what: str):
    """A scale operand as (*batch, lanes) int32: None is no scaling (127 in every byte,
    factor 1: the unscaled instruction); int32/uint32 words; TypeError/ValueError naming
    ``what`` otherwise."""
    if regs is None:  # numpy: no eager JAX operation (each would compile a program of its own)
        return np.full((spec.lanes,), _UNSCALED, np.int32)
    regs = as_array(regs, what)
    if regs.dtype not in (np.dtype(np.int32), np.dtype(np.uint32)):
        raise TypeError(f"{what} for {spec.name} must be int32 (one word per lane, its bytes E8M0 scales), got "
                        f"{regs.dtype}; build it with jwmma.pack_scale")
    if regs.ndim < 1 or regs.shape[-1] != spec.lanes:
        raise ValueError(f"{what} for {spec.name} must have shape (*batch, {spec.lanes}), got {tuple(regs.shape)}")
    if regs.dtype == np.uint32:
        return regs.view(np.int32) if isinstance(regs, np.ndarray) else lax.bitcast_convert_type(regs, jnp.int32)
    return regs


def scale_codes(x, what: str):
    """E8M0 scale values -> int32 codes 0..255: uint8 codes, or ml_dtypes.float8_e8m0fnu (its
    bits); other integer dtypes must hold 0..255; TypeError/ValueError naming ``what``."""
    x = as_array(x, what)
    d = np.dtype(x.dtype)
    if d.name == "float8_e8m0fnu":
        return storage_bits(x).astype(jnp.int32) if not isinstance(x, np.ndarray) else \
            x.view(np.uint8).astype(np.int32)
    if not jnp.issubdtype(d, jnp.integer):
        raise TypeError(f"{what} must hold E8M0 scale codes (uint8 0..255, or ml_dtypes.float8_e8m0fnu), got {d}")
    check_values(x, 0, 255, what, False)
    return jnp.asarray(x).astype(jnp.int32) if not isinstance(x, np.ndarray) else x.astype(np.int32)


def _scale_call(name: str, which: str, opsel):
    """The checks `pack_scale` and `unpack_scale` share: (the block-scaled builtin's row, opsel)."""
    spec = lookup(name)
    if not spec.scaled:
        raise ValueError(f"{spec.name} takes no scales (block-scaled builtins: mfma_scale_*)")
    if which not in ("a", "b"):
        raise ValueError(f"which must be 'a' or 'b', got {which!r}")
    return spec, check_static_int(opsel, "opsel", 0, 3)


@strict_keywords
def pack_scale(name: str, scales, which: str = "a", *, opsel: int = 0) -> jnp.ndarray:
    """E8M0 block scales -> a block-scaled MFMA's scale register.

    Args:
        name: a block-scaled builtin (mfma_scale_*); scales: A's (*batch, M, K/32) (row i,
            K block kb) or B's (*batch, K/32, N) E8M0 codes (uint8, or
            ml_dtypes.float8_e8m0fnu); which: 'a' or 'b'; opsel: the byte (0..3) to fill.
    Returns:
        (*batch, 64) int32: lane M*kb + i (N*kb + j) holds the scale in byte ``opsel``, the
        other bytes are zero (BUILTINS_DENSE.md 5.3).
    """
    spec, opsel = _scale_call(name, which, opsel)
    shape = _scale_shape(spec, which)
    form = "(*batch, M, K/32)" if which == "a" else "(*batch, K/32, N)"
    x = as_array(scales, "scales")
    check_last_dims(x, shape, "scales", form)
    # host operands in numpy (`host_codec`: each eager JAX operation below compiled a program
    # per new shape); traced ones and device arrays as JAX operations
    host = on_host(x)
    codes = scale_codes(np.asarray(x), "scales") if host else jnp.asarray(scale_codes(x, "scales"))
    if which == "b":
        codes = codes.swapaxes(-1, -2)  # (*batch, N, K/32): like A's rows
    lanes = layouts.scale_lanes(codes.shape[-2], spec.k, spec.scale_block).reshape(-1)
    words = codes.reshape(*codes.shape[:-2], -1).astype(np.uint32) << np.uint32(8 * opsel)
    if host:
        flat = np.zeros((*codes.shape[:-2], spec.lanes), np.uint32)
        flat[..., lanes] = words
        return placed_like(x, flat.view(np.int32))
    flat = jnp.zeros((*codes.shape[:-2], spec.lanes), jnp.uint32).at[..., lanes].set(words)
    return lax.bitcast_convert_type(flat, jnp.int32)


@strict_keywords
def unpack_scale(name: str, regs, which: str = "a", *, opsel: int = 0) -> jnp.ndarray:
    """Inverse of `pack_scale`: (*batch, 64) scale registers -> A's (*batch, M, K/32) or B's
    (*batch, K/32, N) E8M0 codes (uint8) read from byte ``opsel``."""
    spec, opsel = _scale_call(name, which, opsel)
    given = regs
    regs = check_scale_register(spec, regs, "regs")
    lanes = layouts.scale_lanes(spec.m, spec.k, spec.scale_block)
    if on_host(regs):  # numpy, as `pack_scale`
        words = np.asarray(regs).view(np.uint32)
        out = ((words >> np.uint32(8 * opsel)) & np.uint32(0xFF))[..., lanes]
        return placed_like(given, (out if which == "a" else np.swapaxes(out, -1, -2)).astype(np.uint8))
    out = _scale_bytes(regs, opsel)[..., lanes]
    return (out if which == "a" else jnp.swapaxes(out, -1, -2)).astype(jnp.uint8)
