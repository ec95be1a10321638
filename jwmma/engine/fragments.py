"""Fragments: matrices <-> per-lane register vectors, one codec for every operand (API.md
section 3, BUILTINS.md section 1).

Registers are arrays of shape (*batch, lanes, n) of the builtin's HIP storage: float16,
bfloat16 or int16 bit patterns for 16-bit elements, float32/int32 for 32-bit accumulators, and
int32 words packing 8- or 4-bit elements little-endian. Matrices hold logical element values.
Between the two sit element *codes*, int32 bit patterns (integer values for i32):
`registers` converts registers to codes and moves codes between lanes and matrix positions
(its names are re-exported here); this module converts matrix values (`value_codes`,
`codes_to_values`) and checks what users pass.
"""
from __future__ import annotations

import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from ..isa import layouts
from ..isa.table import SCALE_FORMATS, BuiltinSpec, Operand, lookup
from ..isa.types import element_type
from ..keywords import strict_keywords
from .registers import (codes_to_regs, lanes_to_matrix, matrix_to_lanes, or_reduce, permute,  # re-exported
                        register_words, regs_to_codes)
from .validation import as_array, check_bool_kw, check_last_dims, check_static_int, check_values, is_concrete

__all__ = [
    "pack_a", "unpack_a", "pack_b", "unpack_b", "pack_c", "unpack_c", "pack_index", "unpack_index",
    "register_words", "regs_to_codes", "codes_to_regs", "value_codes", "check_value_input", "to_codes", "storage_bits", "codes_to_values",
    "lanes_to_matrix", "matrix_to_lanes", "permute", "index_words", "positions", "check_regs", "check_index", "or_reduce",
    "format_code", "scale_matrices", "scale_registers", "check_scale_register", "scale_codes", "pack_scale", "unpack_scale",
]


# ------------------------------------------------------------------ matrix values <-> codes
def value_codes(type_name: str, x, what: str, builtin: str | None = None, *, check: bool = False,
                lohi: tuple | None = None) -> jnp.ndarray:
    """Logical matrix values -> int32 codes of the element type ``type_name``.

    Args:
        type_name: a `jwmma.isa.types` name; x: values (floats of exactly the type's dtype;
            integers of any integer dtype within the type's range); what: the argument's
            name for messages; builtin: the builtin to name in messages (whole-GEMM inputs);
            check: also check traced integer values (concrete ones always are); lohi: the
            accepted range (default: the type's).
    Returns:
        int32 codes (floats: bit patterns; integers: the values). TypeError/ValueError with
        a conversion hint on a wrong dtype or range.
    """
    return to_codes(type_name, check_value_input(type_name, x, what, builtin, check=check, lohi=lohi))


def check_value_input(type_name: str, x, what: str, builtin: str | None = None, *, check: bool = False,
                      lohi: tuple | None = None):
    """The checks of `value_codes` (dtype; integer range), without converting: ``x`` as an
    array. For callers that convert later, block by block (`jwmma.gemm`)."""
    t = element_type(type_name)
    x = as_array(x, what)
    if t.is_float:
        want = t.format.dtype
        if np.dtype(x.dtype) != want:
            mod = "np" if want.name in ("float16", "float32") else "ml_dtypes"
            # a float64 source rounds twice through float32 in some ml_dtypes/XLA versions:
            # `cast` rounds once on every machine (docs/ARCHITECTURE.md, "Same bits on every device")
            if builtin is None:
                msg = (f"{what} must hold {want.name} values for a {type_name} operand, got {x.dtype}; "
                       f"convert explicitly, e.g. jwmma.numerics.cast(x, {mod}.{want.name}) (rounds to nearest "
                       f"even once, whatever the numpy/ml_dtypes version)")
            else:
                msg = (f"{what} must be {want.name} for {builtin} ({type_name} operand), got {x.dtype}; "
                       f"convert it first, e.g. jwmma.numerics.cast({what}, {mod}.{want.name}) (rounds to nearest "
                       f"even once, whatever the numpy/ml_dtypes version; {what}.astype of a float64 array rounds "
                       f"twice, through float32, in ml_dtypes < 0.7)")
            raise TypeError(msg)
        return x
    if not jnp.issubdtype(x.dtype, jnp.integer):
        where = f"a {type_name} operand" if builtin is None else f"{builtin} ({type_name} operand)"
        raise TypeError(f"{what} must hold integers for {where}, got {x.dtype}")
    lo, hi = t.range if lohi is None else lohi
    check_values(x, lo, hi, what, check)
    return x


def to_codes(type_name: str, x) -> jnp.ndarray:
    """Values already checked by `check_value_input` -> int32 codes (floats: bit patterns;
    integers: the values; traced unchecked integers keep their low 32 bits). Floats may also
    come as their bit patterns (unsigned ints of the format's width, `storage_bits`)."""
    t = element_type(type_name)
    if t.is_float and np.dtype(x.dtype) == t.format.dtype:
        x = storage_bits(x)
    return jnp.asarray(x).astype(jnp.int32)


def storage_bits(x):
    """A float array as the bit patterns of its elements (unsigned ints of its width; a free
    view for numpy arrays, one bit cast for JAX arrays); any other array as it is. XLA's CPU
    backend widens fp8 operands to f16 before a bit cast that reads them, so whole-GEMM inputs
    enter the compiled loop as bits."""
    d = np.dtype(x.dtype)
    if not jnp.issubdtype(d, jnp.floating):
        return x
    width = np.dtype(f"u{d.itemsize}")
    if isinstance(x, np.ndarray):
        return x.view(width)
    bits = ml_dtypes.finfo(d).bits
    if bits == 4:  # JAX holds float4 as 4-bit elements: its bit cast goes to uint4
        return lax.bitcast_convert_type(x, jnp.uint4).astype(jnp.uint8)
    if bits == 6:  # JAX has no 6-bit integer to cast a float6 array to: read it on the host
        if not is_concrete(x):
            raise TypeError(f"a traced {d.name} array cannot be read as bits inside jit (JAX has no 6-bit "
                            f"integer type); pass its codes as uint8 with the format named (fmt_a=/fmt_b=), or a "
                            f"numpy array")
        return jnp.asarray(np.asarray(x).view(width))
    return lax.bitcast_convert_type(x, width)


def codes_to_values(type_name: str, codes, signed: bool = True) -> jnp.ndarray:
    """Inverse of `value_codes`.

    Args:
        type_name: the element type; codes: int32 codes; signed: the reading of iu8/iu4.
    Returns:
        Values of the type's value dtype (`jwmma.isa.types.ElementType.value_dtype`).
    """
    t = element_type(type_name)
    want = t.value_dtype(signed)
    if t.is_float:
        if want.itemsize == 4:
            return lax.bitcast_convert_type(codes.astype(jnp.int32), jnp.float32)
        bits = ml_dtypes.finfo(want).bits
        if bits == 4:  # JAX's float4 is 4 bits wide: cast from uint4
            return lax.bitcast_convert_type(codes.astype(jnp.uint4), want)
        if bits == 6:  # no 6-bit integer in JAX to cast from: the values are built on the host
            if not is_concrete(codes):
                raise TypeError(f"{want.name} values cannot be made inside jit (JAX has no 6-bit integer type); "
                                f"unpack them outside jit, or read the codes")
            return np.asarray(codes).astype(np.uint8).view(want)
        width = jnp.uint16 if want.itemsize == 2 else jnp.uint8
        return lax.bitcast_convert_type(codes.astype(width), want)
    fmt = t.int_format(signed)
    if fmt.bits == 32:
        return codes.astype(jnp.int32)
    v = codes & ((1 << fmt.bits) - 1)
    if fmt.signed:
        v = jnp.where(v >= (1 << (fmt.bits - 1)), v - (1 << fmt.bits), v)
    return v.astype(want)


# ------------------------------------------------------------------------------ public API
_MATRIX = {"a": ("a_comp", "(*batch, M, Kc)"), "b": ("b", "(*batch, K, N)"), "c": ("c", "(*batch, M, N)")}


def _parts(spec: BuiltinSpec, which: str):
    """(operand, layout, matrix shape, element type) of operand 'a', 'b' or 'c'."""
    shape = {"a": (spec.m, spec.kc), "b": (spec.k, spec.n), "c": (spec.m, spec.n)}[which]
    return getattr(spec, which), getattr(spec, f"{which}_layout"), shape, getattr(spec, f"{which}_type")


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


def _pack(name: str, which: str, x, check: bool = False, target: str | None = None, fmt=None) -> jnp.ndarray:
    check = check_bool_kw(check, "check")
    spec = lookup(name, target)
    what, form = _MATRIX[which]
    x = as_array(x, what)
    spec = _fmt(spec, which, fmt, x if which != "c" else None)
    op, layout, shape, t = _parts(spec, which)
    check_last_dims(x, shape, what, form)
    codes = value_codes(t, x, what, check=check)
    if op.elem_bits < 32:
        codes = codes & ((1 << op.elem_bits) - 1)
    return codes_to_regs(op, matrix_to_lanes(layout, codes))


def _unpack(name: str, which: str, regs, signed: bool, target: str | None = None, fmt=None) -> jnp.ndarray:
    spec = _fmt(lookup(name, target), which, fmt)
    op, layout, shape, t = _parts(spec, which)
    regs = check_regs(spec, op, regs, which)
    return codes_to_values(t, lanes_to_matrix(layout, shape, regs_to_codes(op, regs)), signed)


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
def pack_c(name: str, c, *, check: bool = False, target: str | None = None) -> jnp.ndarray:
    """Accumulator -> registers.

    Args:
        name: the builtin; c: (*batch, M, N) float32, float16, bfloat16 or int32 values, as
            the builtin's C type says.
        check: also check traced integer values when the computation runs (concrete values
            are always checked); with check=False a traced value keeps its low element bits
            (v mod 2**bits, two's complement), as the register holds them.
        target: the chip of a builtin that runs on several (CDNA3 SMFMAC: 'gfx942', the
            default, FNUZ fp8/bf8; 'gfx950', OCP fp8/bf8); ValueError for another.
    Returns:
        (*batch, lanes, n_c) registers (RDNA4 bf16 as int16 bit patterns).
    """
    return _pack(name, "c", c, check, target)


@strict_keywords
def unpack_c(name: str, regs, *, target: str | None = None) -> jnp.ndarray:
    """Registers -> accumulator (C or D).

    Args:
        name: the builtin; regs: (*batch, lanes, n_c).
        target: the chip of a builtin that runs on several (CDNA3 SMFMAC: 'gfx942', the
            default, FNUZ fp8/bf8; 'gfx950', OCP fp8/bf8); ValueError for another.
    Returns:
        (*batch, M, N) values of the C type (bf16 as bfloat16).
    """
    return _unpack(name, "c", regs, True, target)


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
    return index_words(spec, jnp.asarray(pos).astype(jnp.int32) & 3, s)


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
    return positions(spec, idx, s)


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
    spec = lookup(name)
    if not spec.scaled:
        raise ValueError(f"{spec.name} takes no scales (block-scaled builtins: mfma_scale_*)")
    if which not in ("a", "b"):
        raise ValueError(f"which must be 'a' or 'b', got {which!r}")
    opsel = check_static_int(opsel, "opsel", 0, 3)
    shape = _scale_shape(spec, which)
    form = "(*batch, M, K/32)" if which == "a" else "(*batch, K/32, N)"
    x = as_array(scales, "scales")
    check_last_dims(x, shape, "scales", form)
    codes = jnp.asarray(scale_codes(x, "scales"))
    if which == "b":
        codes = jnp.swapaxes(codes, -1, -2)  # (*batch, N, K/32): like A's rows
    lanes = layouts.scale_lanes(codes.shape[-2], spec.k, spec.scale_block)
    flat = jnp.zeros((*codes.shape[:-2], spec.lanes), jnp.uint32)
    flat = flat.at[..., lanes.reshape(-1)].set(codes.reshape(*codes.shape[:-2], -1).astype(jnp.uint32) << (8 * opsel))
    return lax.bitcast_convert_type(flat, jnp.int32)


@strict_keywords
def unpack_scale(name: str, regs, which: str = "a", *, opsel: int = 0) -> jnp.ndarray:
    """Inverse of `pack_scale`: (*batch, 64) scale registers -> A's (*batch, M, K/32) or B's
    (*batch, K/32, N) E8M0 codes (uint8) read from byte ``opsel``."""
    spec = lookup(name)
    if not spec.scaled:
        raise ValueError(f"{spec.name} takes no scales (block-scaled builtins: mfma_scale_*)")
    if which not in ("a", "b"):
        raise ValueError(f"which must be 'a' or 'b', got {which!r}")
    opsel = check_static_int(opsel, "opsel", 0, 3)
    regs = check_scale_register(spec, regs, "regs")
    lanes = layouts.scale_lanes(spec.m, spec.k, spec.scale_block)
    out = _scale_bytes(regs, opsel)[..., lanes]
    return (out if which == "a" else jnp.swapaxes(out, -1, -2)).astype(jnp.uint8)


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
