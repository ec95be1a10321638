"""GEMM operands: validated, compressed, converted to element codes and padded, once.

Shared by `jwmma.gemm`, `jwmma.kernel` and the sharded runs. A is taken dense (2:4-sparse,
pruned on request) or as (values, positions); every operand becomes int32 element codes
(`jwmma.engine.fragments.value_codes`; int64 for the f64 rows, `code_dtype`); padding to whole
tiles adds zero values, and A's padding groups select positions (2, 3), as hipSPARSELt pads
(BUILTINS.md section 5). For a
dense builtin (RDNA4 WMMA) A is an ordinary (*batch, M, K) matrix: no 2:4 rule, no positions
(``pos`` holds zeros that the dense step never reads).
"""
from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
from jax import lax
import numpy as np

from ..engine.fragments import check_value_input, format_code, scale_codes, storage_bits, to_codes
from ..engine.sparsity import check_2_4, compress_groups, prune_2_4, prune_bits, signed_zero
from ..engine.validation import as_array, check_bool_kw, check_static_bool, check_values, fail_if, is_concrete
from ..isa.table import SCALE_FORMATS, BuiltinSpec, lookup
from ..isa.types import element_type

__all__ = ["Codes", "Form", "Inputs", "scaled_spec", "scaled_words", "check_modifiers", "signedness", "int_range", "accumulator_dtype", "word_dtype", "code_dtype",
           "inputs", "convert", "codes", "pad_to", "pad_a", "pad_codes", "pad_to_tiles"]


@dataclass(frozen=True)
class Codes:
    """A GEMM's operands as element codes (int32; int64 for f64, `code_dtype`): ``a`` and
    ``pos`` (*batch, M, K/2), ``b`` (*batch, K, N), ``c`` (*batch, M, N) or None (zeros), and
    the logical ``m``, ``n``, ``k`` (dense K) and broadcast ``batch`` shape; ``dense``: A and
    pos are (*batch, M, K)."""

    a: object
    pos: object
    b: object
    c: object
    m: int
    n: int
    k: int
    batch: tuple
    dense: bool = False


@dataclass(frozen=True)
class Form:
    """How `convert` turns checked operands into codes (static, hashable): the element types,
    and A's form: 'pair' (values, positions), 'compress' (a dense 2:4 A, pruned already when
    gemm prunes, compressed block by block after its K is padded to ``k4``), 'dense' (a dense
    builtin's A); ``prune_as``: a float 'compress' A that gemm prunes, the name of its dtype
    (pruned block by block with the compression: one program with the GEMM's, not one of its
    own per shape), else ''."""

    a_type: str
    b_type: str
    c_type: str
    a_form: str
    k4: int = 0
    prune_as: str = ""


@dataclass(frozen=True)
class Inputs:
    """A GEMM's operands checked (every check of `codes`) but not converted: ``a`` as the user
    gave it (dense (*batch, M, K), padded to a multiple of 4 along K when gemm prunes, and
    pruned already if integer: `convert` prunes floats, ``form.prune_as``; or the values of a
    pair), ``pos`` (a pair's positions, else None), ``b``, ``c``
    (or None), float operands as their bit patterns (`storage_bits`), the logical ``m``,
    ``n``, ``k``, the broadcast ``batch`` and the static `Form`. `convert` gives the codes of any block of rows or batch elements, so
    gemm converts inside its bounded loop (peak memory independent of the batch size)."""

    a: object
    pos: object
    b: object
    c: object
    m: int
    n: int
    k: int
    batch: tuple
    form: Form


def scaled_spec(spec: BuiltinSpec, a, b, scale_a, scale_b, fmt_a, fmt_b) -> BuiltinSpec:
    """The row a GEMM runs: a block-scaled builtin's for the formats of A and B (``fmt_a`` /
    ``fmt_b`` codes, else their dtypes'); ValueError where another builtin is given scales or
    formats."""
    if not spec.scaled:
        given = [n for n, v in (("scale_a", scale_a), ("scale_b", scale_b), ("fmt_a", fmt_a), ("fmt_b", fmt_b))
                 if v is not None]
        if given:
            raise ValueError(f"{', '.join(given)} apply to the block-scaled builtins (mfma_scale_*); {spec.name} "
                             f"takes none")
        return spec
    codes = []
    for what, x, fmt in (("a", a, fmt_a), ("b", b, fmt_b)):
        x = as_array(x, what)
        if fmt is None:
            codes.append(format_code(x.dtype, what))
            continue
        codes.append(fmt)
        if np.dtype(x.dtype) not in (np.dtype(np.uint8), np.dtype(np.uint16),
                                     element_type(SCALE_FORMATS.get(fmt, "fp8")).format.dtype):
            raise TypeError(f"{what} with fmt_{what}={fmt} must hold that format's values, uint8 codes, or uint16 "
                            f"words (code | E8M0 scale << 8), got {x.dtype}")
    return lookup(spec.name, spec.target, tuple(codes))


def _one_scale_per_block(spec: BuiltinSpec, what: str, x, check: bool):
    """uint16 words given as they are, each carrying its block's scale: the hardware holds one
    E8M0 scale per row of A (column of B) and 32-K block, and the Pallas kernel reads a block's
    scale from its first element. Concrete words whose scales differ within a block raise, as
    traced ones do with ``check=True``; unchecked traced words take their block's first scale
    (so that every backend reads them alike)."""
    axis = x.ndim - 1 if what == "a" else x.ndim - 2
    first_of_block = (np.arange(x.shape[axis]) // spec.scale_block) * spec.scale_block
    xp = np if isinstance(x, np.ndarray) else jnp
    scales = x >> 8
    first = xp.take(scales, first_of_block, axis=axis)
    line = "row" if what == "a" else "column"

    def describe(count, where, value, block_scale):
        return (f"{what} holds uint16 words (code | scale << 8) whose scales differ within a {spec.scale_block}-K "
                f"block: {what}[{', '.join(map(str, where))}] carries scale {value}, its block's first element "
                f"{block_scale} ({count} word(s)); the hardware holds one E8M0 scale per {line} and block of "
                f"{spec.scale_block} K: give every word of a block its block's scale, or pass element codes and "
                f"scale_{what}=")

    if is_concrete(x) or check:
        fail_if(scales != first, describe, scales, first)
    if is_concrete(x):
        return x
    return (x & 0xFF) | (first << 8)


def scaled_words(spec: BuiltinSpec, a, b, scale_a, scale_b, check: bool = False):
    """A block-scaled GEMM's A (*batch, M, K) and B (*batch, K, N) as uint16 words
    ``element code | E8M0 scale << 8`` (`jwmma.engine.step.split_scaled`): every element
    carries its row's (column's) scale of its 32-K block, so padding, slicing and the K steps
    keep them together (a zero pad is the value 0). Scales: A's (*batch, M, ceil(K/32)), B's
    (*batch, ceil(K/32), N), None for 127 (factor 1); checked here, shapes and codes. An
    operand given as uint16 words already (the study's form) is taken as it is, each block's
    words carrying one scale (`_one_scale_per_block`; ``check``: also for traced words)."""
    a, b = as_array(a, "a"), as_array(b, "b")
    out = []
    for what, x, scale, fmt in (("a", a, scale_a, spec.a_format), ("b", b, scale_b, spec.b_format)):
        if x.ndim < 2:
            raise ValueError(f"{what} must be (*batch, {'M, K' if what == 'a' else 'K, N'}), got shape {tuple(x.shape)}")
        if np.dtype(x.dtype) == np.dtype(np.uint16):  # words already: their scales are in the high bytes
            if scale is not None:
                raise ValueError(f"{what} holds uint16 words (code | scale << 8), which carry their scales: "
                                 f"scale_{what} must be None")
            check_values(x & 0xFF, 0, (1 << fmt.bits) - 1, f"{what}'s element codes (low bytes)", False)
            out.append(_one_scale_per_block(spec, what, x, check))
            continue
        if np.dtype(x.dtype) == np.dtype(np.uint8):
            check_values(x, 0, (1 << fmt.bits) - 1, what, False)
            bits = x
        else:
            bits = storage_bits(x)
        k = x.shape[-1] if what == "a" else x.shape[-2]
        blocks = -(-k // spec.scale_block)
        want = (x.shape[-2], blocks) if what == "a" else (blocks, x.shape[-1])
        axis = -1 if what == "a" else -2
        if scale is None:
            sc = np.full(want, 127, np.uint16)
        else:
            sc = as_array(scale, f"scale_{what}")
            form = f"(*batch, M, ceil(K/32)) = (*batch, {want[0]}, {want[1]})" if what == "a" else \
                f"(*batch, ceil(K/32), N) = (*batch, {want[0]}, {want[1]})"
            if sc.ndim < 2 or tuple(sc.shape[-2:]) != want:
                raise ValueError(f"scale_{what} must be {form}, got {tuple(sc.shape)}")
            sc = scale_codes(sc, f"scale_{what}")
        xp = np if isinstance(bits, np.ndarray) and isinstance(sc, np.ndarray) else jnp
        sc = xp.repeat(xp.asarray(sc).astype(np.uint16), spec.scale_block, axis=axis)
        sc = sc[..., :k] if what == "a" else sc[..., :k, :]
        out.append(xp.asarray(bits).astype(np.uint16) | (sc << 8))
    return out[0], out[1]


def _padded_bits(a, k4: int):
    """``a`` (..., K) with floats as their bit patterns (`storage_bits`), zero-padded to K = k4
    along the last axis. Padding, pruning and compressing move bits, never float values:
    XLA:CPU may route a float copy through float32 (JAX 0.11 flushes bf16 subnormals in a
    pad, JAX 0.10 quiets NaN payloads; docs/ARCHITECTURE.md, "Same bits on every device")."""
    bits = storage_bits(a)
    if bits.shape[-1] == k4:
        return bits
    pads = [(0, 0)] * (bits.ndim - 1) + [(0, k4 - bits.shape[-1])]
    return np.pad(bits, pads) if isinstance(bits, np.ndarray) else jnp.pad(bits, pads)


def _dtype_signedness(dtype, bits: int):
    """True/False where the dtype says the signedness of a ``bits``-wide element (int8/uint8,
    int4/uint4; every unsigned dtype), None where it does not (wider signed ints, floats)."""
    d = np.dtype(dtype)
    if d.name.startswith("uint") or d.kind == "u":
        return False
    if d.name == f"int{bits}":
        return True
    return None


def signedness(spec: BuiltinSpec, which: str, x, neg):
    """The signedness of operand ``which`` ('a' or 'b') of an iu8/iu4 GEMM: from the dtype
    where it says (uint8/uint4 unsigned, int8/int4 signed), else ``neg`` (default signed);
    ValueError when ``neg`` contradicts the dtype."""
    bits = element_type(getattr(spec, f"{which}_type")).bits
    said = _dtype_signedness(x.dtype, bits)
    if said is not None and neg is not None and bool(neg) != said:
        raise ValueError(f"{which}_neg={neg} contradicts {which}'s dtype {np.dtype(x.dtype).name} "
                         f"({'signed' if said else 'unsigned'}); leave {which}_neg out or convert {which}")
    if said is not None:
        return said
    return check_static_bool(True if neg is None else neg, f"{which}_neg")


def int_range(spec: BuiltinSpec, which: str, signed: bool) -> tuple[int, int]:
    """The values operand ``which`` of an integer builtin may hold with that signedness."""
    f = element_type(getattr(spec, f"{which}_type")).int_format(signed)
    return f.lo, f.hi


def check_modifiers(spec: BuiltinSpec, a_neg, b_neg, clamp) -> tuple[bool, bool, bool]:
    """(a_signed, b_signed, clamp) of a GEMM: the builtin's defaults (signed, no clamp) for
    None; given for a builtin that takes none of them, ValueError."""
    if not spec.signed_choice:
        given = [n for n, v in (("a_neg", a_neg), ("b_neg", b_neg), ("clamp", clamp)) if v is not None]
        if given:
            raise ValueError(
                f"{', '.join(given)} only apply to the RDNA4 iu8/iu4 builtins; {spec.name} takes none "
                f"(its integers are {'signed and its i32 result wraps' if spec.integer else 'floats'})"
            )
    return (check_static_bool(True if a_neg is None else a_neg, "a_neg"),
            check_static_bool(True if b_neg is None else b_neg, "b_neg"),
            check_static_bool(False if clamp is None else clamp, "clamp"))


def word_dtype(spec: BuiltinSpec) -> np.dtype:
    """The dtype that holds D's codes until the last operation: unsigned ints of the
    accumulator's width for 16-bit floats, int64 for f64 (inside `x64_scope`), int32 otherwise
    (`codes_to_values` reads them all)."""
    size = np.dtype(accumulator_dtype(spec)).itemsize
    return np.dtype({2: np.uint16, 8: np.int64}.get(size, np.int32))


def code_dtype(spec: BuiltinSpec) -> np.dtype:
    """The dtype of the element codes that `codes`, `pad_codes` and the kernels on padded codes
    (`jwmma.tiled.paths.matrix_path`, `register_path`, the sharded runs) move: int64 bit
    patterns for f64 (they exist inside `x64_scope` only), int32 otherwise."""
    return np.dtype(np.int64 if element_type(spec.c_type).bits == 64 else np.int32)


def accumulator_dtype(spec: BuiltinSpec) -> np.dtype:
    """The numpy dtype of the logical C/D values of ``spec`` (float32, float16, bfloat16, int32, float64)."""
    return element_type(spec.c_type).value_dtype()


def _checked_c(spec: BuiltinSpec, c, m: int, n: int):
    acc = accumulator_dtype(spec)
    c = as_array(c, "c")
    if np.dtype(c.dtype) != acc:
        mod = "ml_dtypes" if acc.name == "bfloat16" else "np"
        raise TypeError(f"c must be {acc.name} for {spec.name} (its accumulator), got {c.dtype}; "
                        f"convert it first, e.g. c.astype({mod}.{acc.name})")
    if c.ndim < 2 or tuple(c.shape[-2:]) != (m, n):
        raise ValueError(f"c must be (*batch, M, N) = (*batch, {m}, {n}), got {tuple(c.shape)}")
    return check_value_input(spec.c_type, c, "c", spec.name)


def dense_a(a, prune: bool, spec: BuiltinSpec):
    """A of a dense builtin: (values, zero positions, K); a (values, positions) pair or
    prune=True are refused (there is no sparsity)."""
    a = _checked_dense_a(a, prune, spec)
    return a, jnp.zeros(a.shape, jnp.int32), a.shape[-1]


def _checked_dense_a(a, prune: bool, spec: BuiltinSpec):
    if isinstance(a, tuple):
        raise TypeError(f"{spec.name} is dense: a must be one (*batch, M, K) array, not a (values, positions) "
                        f"pair")
    if prune:
        raise ValueError(f"prune=True applies to the sparse builtins; {spec.name} is dense (A is used as given)")
    a = as_array(a, "a")
    if a.ndim < 2:
        raise ValueError(f"a must be (*batch, M, K), got shape {tuple(a.shape)}")
    return a


def _checked_a(spec: BuiltinSpec, a, prune: bool, check: bool, lohi):
    """(a, pos or None, dense K, Form's a_form, Form's prune_as) with every check of A done: a
    pair's shapes and positions, a dense A's 2:4 structure (concrete: now; traced: when it
    runs), the values' dtype and integer range. Floats come back as their bit patterns
    (`storage_bits`): padding, pruning and the 2:4 check run on bits; a float A to prune comes
    back unpruned, for `convert` to prune."""
    if spec.scaled:  # uint16 words of elements and scales, checked by `scaled_words`
        return _checked_dense_a(a, prune, spec), None, a.shape[-1], "dense", ""
    if spec.dense:
        a = _checked_dense_a(a, prune, spec)
        a = check_value_input(spec.a_type, a, "a", spec.name, check=check, lohi=lohi)
        return storage_bits(a), None, a.shape[-1], "dense", ""
    if isinstance(a, tuple):
        values, pos, k = _checked_pair(a, check)
        values = check_value_input(spec.a_type, values, "a", spec.name, check=check, lohi=lohi)
        return storage_bits(values), pos, k, "pair", ""
    a = as_array(a, "a")
    if a.ndim < 2:
        raise ValueError(f"a must be (*batch, M, K), got shape {tuple(a.shape)}")
    k = a.shape[-1]
    k4 = -(-k // 4) * 4
    if element_type(spec.a_type).is_float:
        a = check_value_input(spec.a_type, a, "a", spec.name)  # the dtype, before it becomes bits
        if prune:  # pruned by `convert`, inside the GEMM's program
            return _padded_bits(a, k4), None, k, "compress", np.dtype(a.dtype).name
        check_2_4(_padded_bits(a, k4), what="a", float_bits=signed_zero(a.dtype))  # fnuz: 0x80 is NaN
        return storage_bits(a), None, k, "compress", ""
    if prune:  # once, whole (the range check of integers covers the kept values only, as before)
        a = prune_2_4(pad_to(jnp.asarray(a), {-1: k4}))
    else:
        check_2_4(a if k % 4 == 0 else pad_to(jnp.asarray(a), {-1: k4}), what="a")
    return check_value_input(spec.a_type, a, "a", spec.name, check=check, lohi=lohi), None, k, "compress", ""


def _checked_pair(a: tuple, check: bool):
    """The checks of a (values, positions) pair of A: shapes, position range and dtype:
    (values, positions, K)."""
    if len(a) != 2:
        raise ValueError(f"a given as a tuple must be (values, positions), got {len(a)} items")
    values, pos = as_array(a[0], "a values"), as_array(a[1], "a positions")
    if values.shape != pos.shape:
        raise ValueError(
            f"a values and positions must have the same shape (*batch, M, K/2), got "
            f"{tuple(values.shape)} and {tuple(pos.shape)}"
        )
    if not jnp.issubdtype(pos.dtype, jnp.integer):
        raise TypeError(f"a positions must be integers 0..3, got {pos.dtype}")
    check_values(pos, 0, 3, "a positions", check)
    if values.ndim < 2:
        raise ValueError(f"a values must be (*batch, M, K/2), got shape {tuple(values.shape)}")
    if values.shape[-1] % 2:
        raise ValueError(
            f"a values must hold two stored values per group of four (an even K/2), got shape {tuple(values.shape)}"
        )
    return values, pos, values.shape[-1] * 2


def inputs(spec: BuiltinSpec, a, b, c, *, prune: bool, check: bool = False, signed=(None, None)) -> Inputs:
    """Validate a GEMM's operands without converting them (the arguments of `codes`).

    Returns:
        `Inputs`: the operands as given (A's K not padded), shapes and the `Form` for
        `convert`; errors as `codes` raises them.
    """
    check = check_bool_kw(check, "check")
    ra = None if signed[0] is None else int_range(spec, "a", signed[0])
    rb = None if signed[1] is None else int_range(spec, "b", signed[1])
    a, pos, k, a_form, prune_as = _checked_a(spec, a, prune, check, ra)
    b = as_array(b, "b")
    if b.ndim < 2:
        raise ValueError(f"b must be (*batch, K, N), got shape {tuple(b.shape)}")
    if b.shape[-2] != k:
        raise ValueError(
            f"a and b disagree on K: a is (*batch, M, K) with K={k}, b is (*batch, K, N) "
            f"with shape {tuple(b.shape)}"
        )
    if not spec.scaled:  # (scaled B: words, checked by `scaled_words`)
        b = storage_bits(check_value_input(spec.b_type, b, "b", spec.name, check=check, lohi=rb))
    m, n = a.shape[-2], b.shape[-1]
    c = None if c is None else storage_bits(_checked_c(spec, c, m, n))
    shapes = [a.shape[:-2], b.shape[:-2]] + ([] if c is None else [c.shape[:-2]])
    try:
        batch = np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(
            f"batch dims of a {tuple(a.shape[:-2])}, b {tuple(b.shape[:-2])} and c "
            f"{tuple(c.shape[:-2]) if c is not None else ()} do not broadcast"
        ) from None
    form = Form(spec.a_type, spec.b_type, spec.c_type, a_form, -(-k // 4) * 4, prune_as)
    return Inputs(a, pos, b, c, int(m), int(n), int(k), tuple(batch), form)


def convert(form: Form, a, pos, b, c):
    """Checked operands (whole, or any block of rows / batch elements) -> int32 codes
    (a_codes, pos, b_codes, c_codes or None): A compressed as `compress_2_4` compresses it,
    positions p & 3, values as `value_codes` converts them (floats may come as their bits,
    `storage_bits`)."""
    if form.a_form == "pair":
        values, pos = a, jnp.asarray(pos).astype(jnp.int32) & 3
    elif form.a_form == "dense":
        values, pos = a, jnp.zeros(a.shape, jnp.int32)
    else:  # floats are bits already (`inputs`), so the pad moves integers
        a = pad_to(jnp.asarray(storage_bits(a)), {-1: form.k4})
        if form.prune_as:  # rows of groups of 4 prune on their own: any block of rows as the whole
            # the barrier keeps the pruning one fusion: fused into each consumer of the pruned A
            # (values and positions), XLA computed it twice (a bucket's first call +0.4 CPU s)
            a = lax.optimization_barrier(prune_bits(a, form.prune_as))
        a_type = element_type(form.a_type)
        values, pos = compress_groups(a, float_bits=a_type.is_float and signed_zero(a_type.format.dtype))
    return (to_codes(form.a_type, values), pos, to_codes(form.b_type, b),
            None if c is None else to_codes(form.c_type, c))


def codes(spec: BuiltinSpec, a, b, c, *, prune: bool, check: bool = False, signed=(None, None)) -> Codes:
    """Validate a GEMM's operands and convert them to element codes.

    Args:
        spec: the builtin; a: a dense 2:4-sparse (*batch, M, K) array (K is padded to a
            multiple of 4), or a ``(values, positions)`` pair of (*batch, M, K/2) arrays;
            b: (*batch, K, N) of the B type; c: (*batch, M, N) of the accumulator type, or
            None; prune: prune a dense ``a`` to 2:4 first (`jwmma.prune_2_4`); check: also
            check traced positions and integer values (concrete ones always are); unchecked
            traced positions keep their low 2 bits (p mod 4), as the index register would
            (check also covers traced integer values); signed: (a_signed, b_signed) of an
            integer builtin: the value ranges checked.
    Returns:
        `Codes` (c None stays None); errors name the argument and give a conversion hint.
    """
    ins = inputs(spec, a, b, c, prune=prune, check=check, signed=signed)
    a_codes, pos, b_codes, c_codes = convert(ins.form, ins.a, ins.pos, ins.b, ins.c)
    return Codes(a_codes, pos, b_codes, c_codes, ins.m, ins.n, ins.k, ins.batch, spec.dense)


def pad_to(x, axis_sizes: dict, value=0):
    """``x`` zero-padded (or ``value``-padded) at the end of the given axes to the sizes."""
    pads = [(0, 0)] * x.ndim
    for ax, size in axis_sizes.items():
        pads[ax] = (0, size - x.shape[ax])
    if all(p == (0, 0) for p in pads):
        return x
    return jnp.pad(x, pads, constant_values=value)


def pad_a(a_codes, pos, rows: int, cols: int):
    """A codes and positions (..., M, Kc) padded to (..., rows, cols): zero values, and
    padding groups at positions (2, 3) (hipSPARSELt's default metadata)."""
    a_codes = pad_to(a_codes, {-2: rows, -1: cols})
    if pos.shape[-2:] == (rows, cols):
        return a_codes, pos
    fill = jnp.tile(jnp.asarray([2, 3], pos.dtype), -(-cols // 2))[:cols]  # odd: a dense K = 1 row's
    inside = (jnp.arange(rows)[:, None] < pos.shape[-2]) & (jnp.arange(cols)[None, :] < pos.shape[-1])
    return a_codes, jnp.where(inside, pad_to(pos, {-2: rows, -1: cols}), fill)


def pad_to_tiles(spec: BuiltinSpec, ops: Codes):
    """`pad_codes` to whole tiles of ``spec``: M, N and the dense K rounded up to the
    instruction's M, N and K."""
    return pad_codes(ops, -(-ops.m // spec.m) * spec.m, -(-ops.n // spec.n) * spec.n, -(-ops.k // spec.k) * spec.k)


def pad_codes(ops: Codes, rows: int, cols: int, depth: int):
    """The operands of ``ops`` zero-padded to M = rows, N = cols, dense K = depth (C None
    becomes zeros of B's code dtype, `code_dtype`) and broadcast to the batch shape: (a, pos,
    b, c) int32 arrays (int64 A, B, C codes for f64, inside `x64_scope`)."""
    a, pos = pad_a(jnp.asarray(ops.a), jnp.asarray(ops.pos), rows, depth if ops.dense else depth // 2)
    b = pad_to(jnp.asarray(ops.b), {-2: depth, -1: cols})
    c = jnp.zeros((rows, cols), b.dtype) if ops.c is None else pad_to(jnp.asarray(ops.c), {-2: rows, -1: cols})
    return tuple(jnp.broadcast_to(x, ops.batch + x.shape[-2:]) for x in (a, pos, b, c))
