"""Fragments: matrices <-> per-lane register vectors, one codec for every operand (API.md
section 3, BUILTINS.md section 1).

Registers are arrays of shape (*batch, lanes, n) of the builtin's HIP storage: float16,
bfloat16 or int16 bit patterns for 16-bit elements, float32/int32 for 32-bit accumulators,
int32 words packing 8- or 4-bit elements little-endian, and uint32 word pairs holding doubles.
Matrices hold logical element values. Between the two sit element *codes*, int32 bit patterns
(integer values for i32; int64 for doubles, inside `x64_scope` only). This module
packs and unpacks A, B and C and checks the registers users pass; the rest of the codec has a
module per job, and its names are re-exported here: `registers` (registers <-> codes, codes
between lanes and matrix positions), `element_codes` (matrix values <-> codes),
`index_registers` (the sparse builtins' index words) and `block_scales` (the E8M0 scale
registers of the block-scaled MFMA). Concrete operands in host memory (numpy arrays, JAX arrays
on one CPU device) are packed and unpacked in numpy (`host_codec`), traced ones and those on
other devices by one compiled program per builtin, operand and shape (`_pack_words`).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from ..isa.table import BuiltinSpec, Operand, lookup
from ..isa.types import element_type
from ..keywords import strict_keywords
from ..numerics.rounding import x64_scope
from . import host_codec
# every name of the codec stays importable from this module (__all__): the builtins, the GEMM paths and users
# import them from here
from .block_scales import (check_scale_register, format_code, pack_scale, scale_codes, scale_matrices,
                           scale_registers, unpack_scale)
from .element_codes import check_value_input, codes_to_values, storage_bits, to_codes, value_codes
from .index_registers import check_index, index_words, pack_index, positions, unpack_index
from .registers import (codes_to_regs, lanes_to_matrix, matrix_to_lanes, or_reduce, permute, register_words,
                        regs_to_codes)
from .validation import as_array, check_bool_kw, check_last_dims, check_static_bool, is_concrete

__all__ = [
    "pack_a", "unpack_a", "pack_b", "unpack_b", "pack_c", "unpack_c", "pack_index", "unpack_index",
    "register_words", "regs_to_codes", "codes_to_regs", "value_codes", "check_value_input", "to_codes", "storage_bits", "codes_to_values",
    "lanes_to_matrix", "matrix_to_lanes", "permute", "index_words", "positions", "check_regs", "check_index", "or_reduce",
    "format_code", "scale_matrices", "scale_registers", "check_scale_register", "scale_codes", "pack_scale", "unpack_scale",
    "c_slots", "c_words", "check_opsel",
]


# ------------------------------------------------------------------------------ public API
_MATRIX = {"a": ("a_comp", "(*batch, M, Kc)"), "b": ("b", "(*batch, K, N)"), "c": ("c", "(*batch, M, N)")}


def _parts(spec: BuiltinSpec, which: str):
    """(operand, layout, matrix shape, element type) of operand 'a', 'b' or 'c'."""
    shape = {"a": spec.a_shape, "b": spec.b_shape, "c": spec.c_shape}[which]
    return getattr(spec, which), getattr(spec, f"{which}_layout"), shape, getattr(spec, f"{which}_type")


def _fmt(spec: BuiltinSpec, which: str, fmt, x=None) -> BuiltinSpec:
    """A scaled row as decoded for operand ``which``'s format: ``fmt`` (a code), else the
    format of ``x``'s dtype, else the row's own (fp8). Other rows: ``fmt`` must be None."""
    if not spec.scaled:
        if fmt is not None:
            raise ValueError(f"fmt applies to the block-scaled builtins (mfma_scale_*); {spec.name} takes none")
        return spec
    if fmt is None:
        fmt = format_code(x.dtype, _MATRIX[which][0]) if x is not None else spec.fmt_codes[0 if which == "a" else 1]
    other = spec.fmt_codes[1 if which == "a" else 0]
    return lookup(spec.name, spec.target, (fmt, other) if which == "a" else (other, fmt))


def _pack(name: str, which: str, x, check: bool = False, target: str | None = None, fmt=None,
          opsel=None) -> jnp.ndarray:
    check = check_bool_kw(check, "check")
    spec = lookup(name, target)
    half = _opsel_kw(spec, which, opsel)
    what, form = _MATRIX[which]
    x = as_array(x, what)
    placed = x  # where a host-packed result goes (`host_codec.placed_like`)
    host = host_codec.on_host(x)
    if host:  # read once; packed in numpy unless this shape's program is in use (`host_codec`)
        x = np.asarray(x)
    spec = _fmt(spec, which, fmt, x if which != "c" else None)
    op, layout, shape, t = _parts(spec, which)
    if spec.blocks > 1:  # (*batch, blocks, R, C): the blocks stacked along the rows
        per = (shape[0] // spec.blocks, shape[1])
        check_last_dims(x, (spec.blocks, *per), what, "(*batch, blocks, " + form[9:])
        x = x.reshape(*x.shape[:-3], *shape)
    else:
        check_last_dims(x, shape, what, form)
    if op.elem_bits == 64:  # f64: int64 codes exist inside x64_scope only; the uint32 words leave it
        x = check_value_input(t, x, what, check=check)
        with x64_scope():
            return codes_to_regs(op, matrix_to_lanes(layout, to_codes(t, x)))
    x = check_value_input(t, x, what, check=check)
    if host and host_codec.on_host(x, ("pack", spec, which, half, x.shape, x.dtype)):
        return host_codec.placed_like(placed, host_codec.pack_words(x, spec, which, half))
    if _on_host(t):
        x = to_codes(t, x)
    return _pack_words(x, spec=spec, which=which, half=half)


def _on_host(type_name: str) -> bool:
    """Whether a type's values and codes convert on the host only (6-bit floats: JAX has no
    6-bit integer to bit-cast them to)."""
    t = element_type(type_name)
    return t.is_float and t.bits == 6


@functools.partial(jax.jit, static_argnames=("spec", "which", "half"))
def _pack_words(x, *, spec: BuiltinSpec, which: str, half):
    """Checked values (the codes of a `_on_host` type) -> registers, as one program: run op
    by op, the dozens of small operations of a pack compiled one by one on every new shape
    (0.75-0.96 CPU s for a first pack and unpack of A, B and C against 0.2 s so)."""
    op, layout, _, t = _parts(spec, which)
    codes = x if _on_host(t) else to_codes(t, x)
    if op.elem_bits < 32:
        codes = codes & ((1 << op.elem_bits) - 1)
    lanes = matrix_to_lanes(layout, codes)
    if which == "c":  # an opsel row: the values in half `half` of every VGPR, zeros in the other
        lanes = c_words(spec, lanes, half)
    return codes_to_regs(op, lanes)


def _unpack(name: str, which: str, regs, signed: bool, target: str | None = None, fmt=None,
            opsel=None) -> jnp.ndarray:
    spec = _fmt(lookup(name, target), which, fmt)
    half = _opsel_kw(spec, which, opsel)
    op, layout, shape, t = _parts(spec, which)
    regs = check_regs(spec, op, regs, which)
    signed = check_bool_kw(signed, "signed")
    key = ("unpack", spec, which, half, signed, regs.shape, regs.dtype)
    if op.elem_bits != 64 and host_codec.on_host(regs, key):  # unpacked in numpy: no program to compile
        out = host_codec.unpack_words(regs, spec, which, half, signed)
        if spec.blocks > 1:
            out = out.reshape(*out.shape[:-2], spec.blocks, shape[0] // spec.blocks, shape[1])
        return out if _on_host(t) else host_codec.placed_like(regs, out)
    if op.elem_bits == 64:
        out = _unpack_f64(spec, op, layout, shape, regs, t)
    else:
        out = _unpack_words(regs, spec=spec, which=which, half=half, signed=signed)
        if _on_host(t):
            out = codes_to_values(t, out, signed)
    if spec.blocks > 1:  # (*batch, blocks, R, C)
        out = out.reshape(*out.shape[:-2], spec.blocks, shape[0] // spec.blocks, shape[1])
    return out


@functools.partial(jax.jit, static_argnames=("spec", "which", "half", "signed"))
def _unpack_words(regs, *, spec: BuiltinSpec, which: str, half, signed: bool):
    """Checked registers -> matrix values (the codes of a `_on_host` type), as one program
    (as `_pack_words`)."""
    op, layout, shape, t = _parts(spec, which)
    codes = regs_to_codes(op, regs)
    if which == "c":
        codes = c_slots(spec, codes, half)
    codes = lanes_to_matrix(layout, shape, codes)
    return codes if _on_host(t) else codes_to_values(t, codes, signed)


def _unpack_f64(spec: BuiltinSpec, op: Operand, layout, shape, regs, t: str):
    """f64 registers -> float64 values: a JAX array when jax_enable_x64 is on; with it off JAX has
    no float64 arrays (one made inside x64_scope turns float32 at the next operation), so the
    values come back as a numpy float64 array, bit for bit, and traced registers are refused."""
    x64 = bool(jax.config.jax_enable_x64)
    if not x64 and not is_concrete(regs):
        raise TypeError(f"{spec.name}: f64 values cannot be unpacked inside jit with jax_enable_x64 off (JAX has no "
                        f"float64 arrays then); enable it (jax.config.update('jax_enable_x64', True)), or keep the "
                        f"uint32 register words and unpack outside jit")
    with x64_scope():
        bits = lanes_to_matrix(layout, shape, regs_to_codes(op, jnp.asarray(regs)))
        if x64:
            return codes_to_values(t, bits)
        return np.asarray(bits).view(np.float64)


@strict_keywords
def pack_a(name: str, a_comp, *, check: bool = False, target: str | None = None, fmt: int | None = None) -> jnp.ndarray:
    """Compressed A -> registers.

    Args:
        name: the builtin; a_comp: (*batch, M, Kc) logical values of its A type (dense
            builtins: the whole (*batch, M, K) A).
        check: also check traced integer values when the computation runs (concrete values
            are always checked); with check=False a traced value keeps its low element bits
            (v mod 2**bits, two's complement), as the register holds them.
        target: the chip of a builtin that runs on several (CDNA3 SMFMAC: 'gfx942', the
            default, FNUZ fp8/bf8; 'gfx950', OCP fp8/bf8); ValueError for another.
        fmt: a block-scaled MFMA's format code for A (0 fp8, 1 bf8, 2 fp6, 3 bf6, 4 fp4;
            None: the values' dtype says); other builtins take None.
    Returns:
        (*batch, lanes, n_a) registers of the builtin's A dtype.
    """
    return _pack(name, "a", a_comp, check, target, fmt)


@strict_keywords
def unpack_a(name: str, regs, *, signed: bool = True, target: str | None = None,
             fmt: int | None = None) -> jnp.ndarray:
    """Registers -> compressed A.

    Args:
        name: the builtin; regs: (*batch, lanes, n_a); signed: the reading of iu8/iu4 data
            (the builtin's a_neg).
        target: the chip of a builtin that runs on several (CDNA3 SMFMAC: 'gfx942', the
            default, FNUZ fp8/bf8; 'gfx950', OCP fp8/bf8); ValueError for another.
    Returns:
        (*batch, M, Kc) logical values.
    """
    return _unpack(name, "a", regs, signed, target, fmt)


@strict_keywords
def pack_b(name: str, b, *, check: bool = False, target: str | None = None, fmt: int | None = None) -> jnp.ndarray:
    """Dense B -> registers.

    Args:
        name: the builtin; b: (*batch, K, N) logical values of its B type.
        check: also check traced integer values when the computation runs (concrete values
            are always checked); with check=False a traced value keeps its low element bits
            (v mod 2**bits, two's complement), as the register holds them.
        target: the chip of a builtin that runs on several (CDNA3 SMFMAC: 'gfx942', the
            default, FNUZ fp8/bf8; 'gfx950', OCP fp8/bf8); ValueError for another.
    Returns:
        (*batch, lanes, n_b) registers.
    """
    return _pack(name, "b", b, check, target, fmt)


@strict_keywords
def unpack_b(name: str, regs, *, signed: bool = True, target: str | None = None,
             fmt: int | None = None) -> jnp.ndarray:
    """Registers -> dense B.

    Args:
        name: the builtin; regs: (*batch, lanes, n_b); signed: the reading of iu8/iu4 data
            (the builtin's b_neg).
        target: the chip of a builtin that runs on several (CDNA3 SMFMAC: 'gfx942', the
            default, FNUZ fp8/bf8; 'gfx950', OCP fp8/bf8); ValueError for another.
    Returns:
        (*batch, K, N) logical values.
    """
    return _unpack(name, "b", regs, signed, target, fmt)


@strict_keywords
def pack_c(name: str, c, *, check: bool = False, target: str | None = None, opsel: bool | None = None) -> jnp.ndarray:
    """Accumulator -> registers.

    Args:
        name: the builtin; c: (*batch, M, N) float32, float16, bfloat16, int32 or float64
            values, as the builtin's C type says (float64: a numpy array, or a JAX array with
            jax_enable_x64 on).
        check: also check traced integer values when the computation runs (concrete values
            are always checked); with check=False a traced value keeps its low element bits
            (v mod 2**bits, two's complement), as the register holds them.
        target: the chip of a builtin that runs on several (CDNA3 SMFMAC: 'gfx942', the
            default, FNUZ fp8/bf8; 'gfx950', OCP fp8/bf8); ValueError for another.
        opsel: the RDNA3 f16/bf16-output builtins' half of each VGPR (False/0: bits 15:0, the
            default; True/1: bits 31:16), as the builtin's opsel; the other half is zero. Other
            builtins take None.
    Returns:
        (*batch, lanes, n_c) registers (RDNA4 bf16 as int16 bit patterns).
    """
    return _pack(name, "c", c, check, target, opsel=opsel)


@strict_keywords
def unpack_c(name: str, regs, *, target: str | None = None, opsel: bool | None = None) -> jnp.ndarray:
    """Registers -> accumulator (C or D).

    Args:
        name: the builtin; regs: (*batch, lanes, n_c).
        target: the chip of a builtin that runs on several (CDNA3 SMFMAC: 'gfx942', the
            default, FNUZ fp8/bf8; 'gfx950', OCP fp8/bf8); ValueError for another.
        opsel: the RDNA3 f16/bf16-output builtins' half to read (False/0: bits 15:0, the
            default; True/1: bits 31:16); other builtins take None.
    Returns:
        (*batch, M, N) values of the C type (bf16 as bfloat16; f64 as float64: a JAX array
        with jax_enable_x64 on, a numpy array with it off, where JAX has no float64 arrays;
        TypeError inside jit with it off).
    """
    return _unpack(name, "c", regs, True, target, opsel=opsel)


# ------------------------------------------------------------------------------ opsel halves
def check_opsel(spec: BuiltinSpec, opsel, what: str = "opsel") -> int:
    """``opsel`` of a builtin call or a pack/unpack as 0 or 1 (a compile-time bool, or the int
    0/1, as LLVM's ``bool opsel``); ValueError for rows without one, TypeError otherwise."""
    if not spec.opsel:
        raise ValueError(f"{what} applies to the RDNA3 f16/bf16-output WMMA (wmma_f16_16x16x16_f16_*, "
                         f"wmma_bf16_16x16x16_bf16_* and their _tied forms); {spec.name} takes none")
    return int(check_static_bool(opsel, what))


def _opsel_kw(spec: BuiltinSpec, which: str, opsel) -> int:
    """The half a pack_c/unpack_c reads or writes: 0 unless an opsel row is given one."""
    if opsel is None:
        return 0
    if which != "c":  # pragma: no cover - only pack_c/unpack_c pass one
        raise ValueError("opsel applies to C and D only")
    return check_opsel(spec, opsel)


def c_slots(spec: BuiltinSpec, codes, half: int = 0):
    """(*batch, lanes, n_c) C/D register codes -> the (*batch, lanes, slots) codes of
    ``spec.c_layout``: on an opsel row the 16-bit half ``half`` of each VGPR, else all of them."""
    return codes[..., half::2] if spec.opsel else codes


def c_words(spec: BuiltinSpec, slots, half: int = 0, other=None):
    """Inverse of `c_slots`: (*batch, lanes, slots) codes -> (*batch, lanes, n_c) register codes,
    on an opsel row with ``other`` (codes of the same shape; None: zeros) in the other half."""
    if not spec.opsel:
        return slots
    other = jnp.zeros_like(slots) if other is None else jnp.broadcast_to(other, slots.shape).astype(slots.dtype)
    pair = (slots, other) if half == 0 else (other, slots)
    return jnp.stack(pair, -1).reshape(*slots.shape[:-1], 2 * slots.shape[-1])


# ------------------------------------------------------------------------------ validation
def check_regs(spec: BuiltinSpec, op: Operand, regs, what: str):
    """``regs`` as an array, if it has an accepted dtype and shape (*batch, lanes, op.n);
    TypeError/ValueError naming ``what`` otherwise."""
    regs = as_array(regs, what)
    if not op.storage.accepts(regs.dtype):
        allowed = ", ".join(np.dtype(d).name for d in (op.dtype, *op.also))
        raise TypeError(f"{spec.name}: {what} must have dtype {allowed}; got {regs.dtype}")
    if regs.ndim < 2 or tuple(regs.shape[-2:]) != (spec.lanes, op.n):
        raise ValueError(
            f"{spec.name}: {what} must have shape (*batch, {spec.lanes}, {op.n}) "
            f"(lanes, HIP vector elements), got {tuple(regs.shape)}"
        )
    return regs
