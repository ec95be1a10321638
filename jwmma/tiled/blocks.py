"""The bounded loop of a whole GEMM: chunks of whole GEMMs of the batch, and blocks of rows of
one GEMM, one after the other, each block's operands prepared inside the loop.

API.md section 5, "bounded memory": peak memory must stay under a few times
the operand bytes plus a fixed working set at any batch size. So nothing of the size of the
batch is made besides D: each block's operands are sliced from the inputs as given (the
user's fp8/f16/... arrays, or codes), converted (`prepare`: compression, element codes,
padding to whole tiles), run through the kernel and written into D in place
(`lax.dynamic_update_slice` in a `lax.fori_loop`). Every output depends only on its row of
A and its column of B, so a block may start anywhere: the last chunk or row block starts
early enough to stay inside the operands (it recomputes a few outputs with the same bits)
instead of padding a copy of them.
"""
from __future__ import annotations

import numpy as np
from jax import lax
import jax.numpy as jnp

from ..isa.table import BuiltinSpec
from ..varying import vary_like

__all__ = ["run_blocks", "row_block", "batch_chunk"]


def row_block(spec: BuiltinSpec, model, ctx, options, mp: int, np_: int, batch_size: int) -> int:
    """Rows per block: a divisor of Mp, a multiple of the tile height, that keeps one step's
    products under the model's working set (`jwmma.models.Model.working_set`)."""
    per_row = spec.kc * np_ * max(1, batch_size)
    budget = model.working_set(ctx, options, (mp, spec.kc), (spec.k, np_))
    rows = max(spec.m, (budget // per_row) // spec.m * spec.m)
    while mp % rows:
        rows -= spec.m
    return rows


def batch_chunk(spec: BuiltinSpec, model, ctx, options, mp: int, np_: int, total: int) -> int:
    """GEMMs of a flattened batch run at once: all of them when one step of the whole batch
    fits the model's working set, else as many whole GEMMs as fit (at least 1; a GEMM whose
    rows do not fit runs alone, in row blocks). A divisor of the batch when one is near (no
    recomputed GEMMs)."""
    budget = model.working_set(ctx, options, (mp, spec.kc), (spec.k, np_))
    per_gemm = spec.kc * np_ * mp
    chunk = max(1, min(total, budget // max(1, per_gemm)))
    if chunk >= total:
        return total
    return next((d for d in range(chunk, max(1, chunk // 2) - 1, -1) if total % d == 0), chunk)


def _flat(x, batch: tuple, total: int):
    """(x with a leading (total,) axis, or as given when shared by every GEMM of the batch)."""
    if x is None:
        return None, True
    lead = x.shape[:-2]
    if all(d == 1 for d in lead):
        return x.reshape(x.shape[-2:]), True
    x = jnp.broadcast_to(x, batch + x.shape[-2:])  # a partly broadcast operand (rare)
    return x.reshape((total,) + x.shape[-2:]), False


def _slice(x, shared: bool, start, size: int, axis: int):
    if x is None or shared:
        return x
    return lax.dynamic_slice_in_dim(x, start, size, axis)


def run_blocks(kernel, prepare, finish, operands, *, spec: BuiltinSpec, model, ctx, options, batch: tuple,
               m: int, n: int, mp: int, np_: int, out_dtype):
    """D of a GEMM computed block by block (module doc); call it while tracing (inside jit).

    Args:
        kernel: ``kernel(a, p, b, c)`` on tile-padded codes of one block (leading dims
            equal) -> D codes (..., rows, Np).
        prepare: ``prepare(a, p, b, c, rows, lead)`` -> the tile-padded codes of a block from
            slices of ``operands`` (``rows``: the block's padded row count; ``lead``: its
            leading shape, every operand broadcast to it).
        finish: ``finish(d, rows)`` -> the block's D values (..., rows, n) from its codes.
        operands: (a, p, b, c) with batch dims broadcasting to ``batch``; a, p, c are sliced
            by rows (axis -2); p or c may be None.
        m, n: D's rows and columns; mp, np_: padded to whole tiles; out_dtype: D's dtype.
    Returns:
        (*batch, m, n) D of ``out_dtype``.
    """
    total = int(np.prod(batch, dtype=np.int64))
    flat = [_flat(x, batch, total) for x in operands]
    ops, shared = [f[0] for f in flat], [f[1] for f in flat]
    if not batch:
        return _rows(kernel, prepare, finish, ops, (), spec, model, ctx, options, m, n, mp, np_, out_dtype)
    chunk = batch_chunk(spec, model, ctx, options, mp, np_, total)
    if chunk >= total:
        d = _rows(kernel, prepare, finish, ops, (total,), spec, model, ctx, options, m, n, mp, np_, out_dtype)
        return d.reshape(batch + (m, n))

    def body(i, out):
        start = jnp.minimum(i * chunk, total - chunk)
        part = [_slice(x, s, start, chunk, 0) for x, s in zip(ops, shared)]
        d = _rows(kernel, prepare, finish, part, (chunk,), spec, model, ctx, options, m, n, mp, np_,
                  out_dtype)
        return lax.dynamic_update_slice_in_dim(out, d, start, 0)

    out = lax.fori_loop(0, -(-total // chunk), body, vary_like(jnp.zeros((total, m, n), out_dtype), *ops))
    return out.reshape(batch + (m, n))


def _rows(kernel, prepare, finish, ops, lead, spec, model, ctx, options, m, n, mp, np_, out_dtype):
    """One chunk (``lead`` GEMMs, or one GEMM when ``lead`` is ()) in blocks of rows."""
    rows = row_block(spec, model, ctx, options, mp, np_, int(np.prod(lead, dtype=np.int64)))
    if rows >= mp:  # one block: the whole (padded) M
        return finish(kernel(*prepare(*ops, mp, lead)), m)
    # rows < Mp, a multiple of the tile height, so rows <= M: every block lies inside A
    a, p, b, c = ops

    def body(j, out):
        start = jnp.minimum(j * rows, m - rows)

        def cut(x):
            return None if x is None else lax.dynamic_slice_in_dim(x, start, rows, x.ndim - 2)

        d = finish(kernel(*prepare(cut(a), cut(p), b, cut(c), rows, lead)), rows)
        return lax.dynamic_update_slice_in_dim(out, d, start, len(lead))

    return lax.fori_loop(0, mp // rows, body, vary_like(jnp.zeros(lead + (m, n), out_dtype), *ops))


#: rows and columns of one block of `run_extent` (at most; powers of two, so that they divide a
#: bucket's M and N): small, so that a GEMM much smaller than its bucket computes little more
#: than itself (64 x 64 outputs for a one-tile GEMM)
EXTENT_ROWS, EXTENT_COLS = 64, 64


def run_extent(kernel, prepare, finish, operands, extent, *, spec: BuiltinSpec, model, ctx, options, batch: tuple,
               m: int, n: int, out_dtype):
    """D of a GEMM whose operands were zero-padded to a bucket's (M, N, K) (`jwmma.tiled.buckets`)
    from a GEMM of ``extent`` (m, n, k): blocks of rows and columns, every GEMM of the batch at
    once, and only the blocks that hold outputs of the extent run (a loop of traced length), so
    one program serves every extent of the bucket at the cost of its own size. The outputs past
    the extent stay zero.

    Args:
        kernel, prepare, finish: as `run_blocks`; ``prepare`` and ``finish`` also take the
            block's column count as their last argument.
        operands: (a, p, b, c) of the bucket's shape, batch dims broadcasting to ``batch``.
        extent: int32 (3,) array (m, n, k), may be traced.
        m, n: the bucket's rows and columns (tile multiples); out_dtype: D's dtype.
    Returns:
        (*batch, m, n) D of ``out_dtype``.
    """
    total = int(np.prod(batch, dtype=np.int64))
    # operands shared by the batch stay 2-D: the cuts below count axes from the end
    a, p, b, c = (_flat(x, batch, total)[0] for x in operands)
    lead = (total,) if batch else ()
    cols = min(n, EXTENT_COLS)
    while n % cols or cols % spec.n:  # a divisor of N and a multiple of the tile width
        cols -= 1
    rows = min(row_block(spec, model, ctx, options, m, cols, total), EXTENT_ROWS)
    while m % rows or rows % spec.m:
        rows -= 1
    extent = jnp.asarray(extent, jnp.int32)
    row_blocks = (extent[0] + rows - 1) // rows
    col_blocks = (extent[1] + cols - 1) // cols

    def body(t, out):
        t = t.astype(jnp.int32)  # one index type for the slices (the loop runs in x64_scope)
        r0, c0 = (t // col_blocks) * rows, (t % col_blocks) * cols

        def cut(x, start, size, axis):
            return None if x is None else lax.dynamic_slice_in_dim(x, start, size, x.ndim + axis)

        cb = cut(cut(c, r0, rows, -2), c0, cols, -1)
        d = finish(kernel(*prepare(cut(a, r0, rows, -2), cut(p, r0, rows, -2), cut(b, c0, cols, -1), cb, rows,
                                   lead, cols)), rows, cols)
        start = (jnp.int32(0),) * len(lead) + (r0, c0)
        return lax.dynamic_update_slice(out, d.astype(out_dtype), start)

    out = lax.fori_loop(0, row_blocks * col_blocks, body, vary_like(jnp.zeros(lead + (m, n), out_dtype), *operands))
    return out.reshape(batch + (m, n))
