"""One sparse instruction step in matrix form, shared by the builtins and the GEMM drivers.

Generic semantics (BUILTINS.md section 1): stored A element (i, c) multiplies the B row
k = 4*(c//2) + pos(i, c). The engine decodes A and B, and hands the model the matrices with a
``select`` function that *gathers* the selected B rows (never is A densified with zeros, so
NaN/Inf in pruned B rows cannot leak). How the model forms D from them, fast paths included,
is the model's business (`jwmma.models.Model.instruction`).

A dense instruction (RDNA4 WMMA, BUILTINS_MORE.md 2.2: D = C + sum_k A[i][k] B[k][j]) is the
same step on an A of K stored values per row: stored value c is B row c. `dense_as_sparse`
states it in the sparse form every model takes (pairs (0, 1) of a B with two never-selected
rows after every pair), so the models see the K products in documented K order, the order the
hardware steps through them, and need no dense case of their own.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from ..isa.table import BuiltinSpec
from ..isa.types import element_type
from ..models.base import Context
from ..numerics.formats import decode, decode_int, pack_fields, unpack_fields
from .validation import is_concrete

__all__ = ["context", "normal_values_of", "decode_operand", "split_scaled", "select_rows", "selector", "dense_selector", "dense_as_sparse", "step"]


def context(spec: BuiltinSpec, clamp: bool = False, normal_values: bool = False) -> Context:
    """The model `Context` of a builtin (its operand formats) with the clamp modifier and what
    the host found of the operands (`normal_values_of`). One object per argument set: every
    eager call asks for it, and a validated frozen `Context` costs tens of microseconds."""
    return _context(spec, bool(clamp), bool(normal_values))


@functools.lru_cache(maxsize=4096)
def _context(spec: BuiltinSpec, clamp: bool, normal_values: bool) -> Context:
    return Context(spec.a_format, spec.b_format, spec.c_format, clamp, spec.arch, spec.chain_order,
                   spec.scale_block, normal_values)


def normal_values_of(spec: BuiltinSpec, model, options, a, b, clamp: bool = False) -> bool:
    """`Model.normal_operands` on concrete operands ``a``, ``b`` (a call's registers or a GEMM's
    checked operands: one element each), before tracing; traced operands (a user's jit or
    vmap): False, nothing is read. The value for `step`'s ``normal_values``."""
    return is_concrete(a) and is_concrete(b) and bool(model.normal_operands(context(spec, clamp), options, a, b))


def decode_operand(type_name: str, codes, signed: bool = True):
    """int32 codes of element type ``type_name`` -> decoded `Fields` (floats) or sign/zero-
    extended int32 values (integers, read with ``signed``). xf32 codes are float32 bits the
    unit reads the top 19 of (`jwmma.isa.types.ElementType.read_shift`)."""
    t = element_type(type_name)
    if t.is_float:
        return decode(t.format, codes >> t.read_shift if t.read_shift else codes)
    return decode_int(t.int_format(signed), codes)


def split_scaled(codes):
    """A block-scaled operand's codes -> (element codes, E8M0 scale codes): its code is
    ``element | scale << 8`` (docs/ARCHITECTURE.md, "Block-scaled operands")."""
    return codes & 0xFF, (codes >> 8) & 0xFF


def select_rows(b, pos):
    """The B rows every stored A element multiplies.

    Args:
        b: (..., Kd, N) array; pos: (..., M, Kc) positions 0..3.
    Returns:
        (..., M, Kc, N): out[..., i, c, :] = b[..., 4*(c//2) + pos[..., i, c], :].
    """
    m, kc = pos.shape[-2:]
    k = 4 * (jnp.arange(kc, dtype=jnp.int32) // 2) + pos.astype(jnp.int32)  # (..., M, Kc)
    batch = jnp.broadcast_shapes(b.shape[:-2], k.shape[:-2])
    xb = jnp.broadcast_to(b, batch + b.shape[-2:])
    kb = jnp.broadcast_to(k, batch + k.shape[-2:]).reshape(*batch, m * kc, 1)
    out = jnp.take_along_axis(xb, kb, axis=-2, mode="promise_in_bounds")
    return out.reshape(*batch, m, kc, b.shape[-1])


def selector(fmt):
    """The ``select(b, pos)`` function given to models for B of format ``fmt`` (None: integer
    values). Decoded floats travel through the gather as one int32 word per element
    (`pack_fields`) rather than five arrays; the exact f32 value, where the format has it,
    travels on its own (cheaper than rebuilding it)."""
    if fmt is None:
        return select_rows
    if fmt.mbits > 11:  # f32 significands do not fit the packed word: gather the fields one by one
        return lambda b, pos: jax.tree_util.tree_map(lambda t: select_rows(t, pos), b)

    def select(b, pos):
        b_sel = unpack_fields(fmt, select_rows(pack_fields(b), pos))
        if b.val is not None:
            b_sel = b_sel._replace(val=select_rows(b.val, pos))
        return b_sel

    return select


def dense_selector(fmt):
    """The ``select(b, pos)`` of a dense builtin, whose B is `dense_as_sparse`'s: every row of A
    multiplies the same B rows, so they are selected once, for A's first row, as (..., 1, Kc, N),
    which broadcasts against A (`selector`'s gather per row of A held every B field M times: a
    third of an RDNA3 WMMA call's GPU time over 65536 waves).

    Still a gather, not a slice: XLA then forms B's selected fields once, as the gather's
    output. From a slice, XLA:CPU fused B's register words, index-bit transposes and decoding
    into a single-group instruction's one fusion and recomputed them for every row of A: the
    32 x 32 cdna3 calls ran 2x slower than with the per-row gather (RESULTS.md).

    Args:
        fmt: B's format (None: integer values), as `selector`'s.
    Returns:
        ``select(b, pos)``: b (..., Kd, N) decoded B, pos (..., M, Kc) `dense_as_sparse`'s
        positions -> (..., 1, Kc, N), broadcastable to (..., M, Kc, N).
    """
    select = selector(fmt)

    def select_dense(b, pos):
        return select(b, pos[..., :1, :])

    return select_dense


def dense_as_sparse(a_codes, b_codes):
    """A dense step (A (..., M, K), B (..., K, N)) as a sparse one: positions (0, 1) in every
    group of four and B rows 2q, 2q+1 at dense rows 4q, 4q+1 (rows 4q+2, 4q+3: zeros that no
    position selects), so that stored value c multiplies B row c.

    An odd K (the multi-block f32 MFMA, K = 1) gets one more B row of zeros first, which no
    position selects either.

    Returns:
        (pos (..., M, K) int32, b (..., 2K, N) codes; 2K + 2 rows for an odd K).
    """
    *lead, k, n = b_codes.shape
    if k % 2:
        b_codes = jnp.concatenate([b_codes, jnp.zeros_like(b_codes[..., :1, :])], axis=-2)
        k += 1
    pairs = b_codes.reshape(*lead, k // 2, 2, n)
    spread = jnp.concatenate([pairs, jnp.zeros_like(pairs)], axis=-2).reshape(*lead, 2 * k, n)
    pos = jnp.broadcast_to(jnp.arange(a_codes.shape[-1], dtype=jnp.int32) % 2, a_codes.shape)
    return pos, spread


def step(spec: BuiltinSpec, model, a_codes, pos, b_codes, c, *, options, a_signed=True, b_signed=True, clamp=False,
         normal_values: bool = False):
    """D of one instruction on whole matrices.

    Args:
        spec: the builtin; model: a resolved `Model`; a_codes: (..., M, Kc) int32 element
        codes; pos: (..., M, Kc) ints 0..3 (ignored by dense builtins, whose A is
        (..., M, K); block-scaled builtins' codes are ``element | scale << 8``,
        `split_scaled`); b_codes: (..., Kd, N); c: (..., M, N) accumulator
        bit patterns (floats) or int32 values; options: resolved `jwmma.Options`;
        a_signed, b_signed, clamp: the integer modifiers; normal_values: the operands passed
        `Model.normal_operands` on the host (`Context.normal_values`).
    Returns:
        (..., M, N) int32: result bit patterns (floats) or values (integers). Must run inside
        `x64_scope()`.
    """
    ctx = context(spec, clamp, normal_values)
    if spec.scaled:  # elements and their block scales, A (..., M, K) and B (..., K, N) as they are
        (a_el, sa), (b_el, sb) = split_scaled(a_codes), split_scaled(b_codes)
        return model.scaled_instruction(ctx, decode_operand(spec.a_type, a_el), sa, decode_operand(spec.b_type, b_el),
                                        sb, c, options)
    if spec.dense:
        pos, b_codes = dense_as_sparse(a_codes, b_codes)
    a = decode_operand(spec.a_type, a_codes, a_signed)
    b = decode_operand(spec.b_type, b_codes, b_signed)
    select = dense_selector(spec.b_format) if spec.dense else selector(spec.b_format)
    return model.instruction(ctx, a, pos, b, c, select, options)
