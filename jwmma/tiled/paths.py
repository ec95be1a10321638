"""The two execution paths of a whole GEMM, on tile-padded element codes.

Every output tile is accumulated over the K steps in order, each step one builtin call whose
result is the next step's C (what a hardware kernel does; the order matters for every model,
`exact` included: it rounds once per step). Both paths give the same bits:

* `matrix_path`: every step runs the instruction arithmetic on whole matrices at once (all
  tiles together: an output depends only on its row of A, its column of B and the step
  boundaries, so the tiles need not be cut out);
* `register_path`: every step packs the A, B, C fragments of every tile into registers,
  runs the builtin on all tiles as a batch of waves and unpacks D, as a real kernel does.

Both walk the K steps with `lax.scan` and cut the rows into blocks (`by_row_blocks`) sized by
the model's working set; peak memory is O(rows x N x Kc_step), never O(M x N x K).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..backends import pallas
from ..engine import fragments
from ..engine.builtins import run_registers
from ..engine.step import context, step
from ..isa.table import BuiltinSpec

__all__ = ["matrix_path", "register_path", "by_row_blocks", "row_block", "batch_chunk", "matrix_tile", "tiles", "untile"]


# ---------------------------------------------------------------------------- shapes
def _steps_a(a_codes, pos, kc):
    """(..., M, Kc_total) -> (steps, ..., M, kc) for scanning."""
    s = a_codes.shape[-1] // kc

    def f(x):
        x = x.reshape(*x.shape[:-1], s, kc)
        return jnp.moveaxis(x, -2, 0)

    return f(a_codes), f(pos)


def _steps_b(b_codes, k):
    s = b_codes.shape[-2] // k
    x = b_codes.reshape(*b_codes.shape[:-2], s, k, b_codes.shape[-1])
    return jnp.moveaxis(x, -3, 0)


def tiles(x, tr, tc):
    """(..., R, C) -> (..., R/tr, C/tc, tr, tc)."""
    *lead, r, c = x.shape
    x = x.reshape(*lead, r // tr, tr, c // tc, tc)
    return jnp.swapaxes(x, -3, -2)


def untile(x):
    """Inverse of `tiles`."""
    *lead, tr_n, tc_n, tr, tc = x.shape
    return jnp.swapaxes(x, -3, -2).reshape(*lead, tr_n * tr, tc_n * tc)


def matrix_tile(spec: BuiltinSpec, mp: int, np_: int, options) -> tuple[int, int]:
    """Output tile of the matrix path (any tile gives the same bits; it only changes how
    memory is walked): ``options.tile_n`` columns by the instruction's height, the whole
    block when tile_n is 0 (CPUs: so that group sums can be matrix products)."""
    tn = options.tile_n
    if tn <= 0:
        return mp, np_
    return spec.m, (tn if np_ % tn == 0 else spec.n)


# ---------------------------------------------------------------------------- row blocks
def row_block(spec: BuiltinSpec, model, ctx, options, mp: int, np_: int, batch_size: int) -> int:
    """Rows per block: a divisor of Mp, a multiple of the tile height, that keeps one step's
    products under the model's working set (`jwmma.models.Model.working_set`)."""
    per_row = spec.kc * np_ * max(1, batch_size)
    budget = model.working_set(ctx, options, (mp, spec.kc), (spec.k, np_))
    rows = max(spec.m, (budget // per_row) // spec.m * spec.m)
    while mp % rows:
        rows -= spec.m
    return rows


def by_row_blocks(kernel, spec: BuiltinSpec, model, ctx, options):
    """Run ``kernel(a, p, b, c)`` on blocks of rows one after the other (lax.map): an output
    row depends only on its own A row, so this bounds memory without changing any bit. A
    batch too large for one block is cut too (`batch_chunk`): chunks of whole GEMMs one after
    the other, so memory stays bounded at any batch size."""

    def rows_of(a_codes, pos, b_codes, c):
        mp, np_ = c.shape[-2:]
        rows = row_block(spec, model, ctx, options, mp, np_, int(np.prod(c.shape[:-2], dtype=np.int64)))
        if rows >= mp:
            return kernel(a_codes, pos, b_codes, c)
        nb = mp // rows

        def split(x):
            x = x.reshape(*x.shape[:-2], nb, rows, x.shape[-1])
            return jnp.moveaxis(x, -3, 0)

        out = lax.map(lambda t: kernel(t[0], t[1], b_codes, t[2]), (split(a_codes), split(pos), split(c)))
        out = jnp.moveaxis(out, 0, -3)
        return out.reshape(*out.shape[:-3], mp, np_)

    def run(a_codes, pos, b_codes, c):
        batch = c.shape[:-2]
        total = int(np.prod(batch, dtype=np.int64))
        chunk = batch_chunk(spec, model, ctx, options, *c.shape[-2:], total)
        if chunk >= total:
            return rows_of(a_codes, pos, b_codes, c)
        # a divisor of the batch when one is near (no padded copy of the operands), else pad
        div = next((d for d in range(chunk, max(1, chunk // 2) - 1, -1) if total % d == 0), None)
        chunk = div or chunk
        n_chunks = -(-total // chunk)

        def split(x):  # (*batch, R, C) -> (chunks, chunk, R, C), zero GEMMs padding the last chunk
            x = jnp.broadcast_to(x, batch + x.shape[-2:]).reshape(total, *x.shape[-2:])
            if n_chunks * chunk > total:
                x = jnp.pad(x, [(0, n_chunks * chunk - total), (0, 0), (0, 0)])
            return x.reshape(n_chunks, chunk, *x.shape[-2:])

        out = lax.map(lambda t: rows_of(*t), tuple(split(x) for x in (a_codes, pos, b_codes, c)))
        return out.reshape(n_chunks * chunk, *out.shape[-2:])[:total].reshape(batch + out.shape[-2:])

    return run


def batch_chunk(spec: BuiltinSpec, model, ctx, options, mp: int, np_: int, total: int) -> int:
    """GEMMs of a flattened batch run at once: all of them when one step of the whole batch
    fits the model's working set, else as many whole GEMMs as fit (at least 1; a GEMM whose
    rows do not fit runs alone, in row blocks)."""
    budget = model.working_set(ctx, options, (mp, spec.kc), (spec.k, np_))
    per_gemm = spec.kc * np_ * mp
    return max(1, min(total, budget // max(1, per_gemm)))


# ---------------------------------------------------------------------------- the paths
_STATIC = ("spec", "model", "options", "a_signed", "b_signed", "clamp")


@functools.partial(jax.jit, static_argnames=_STATIC)
def matrix_path(a_codes, pos, b_codes, c, *, spec, model, options, a_signed, b_signed, clamp):
    """D codes of the tiled GEMM, instruction arithmetic on whole matrices.

    Args:
        a_codes, pos: (*batch, Mp, Kp/2) int32; b_codes: (*batch, Kp, Np); c: (*batch, Mp, Np)
        accumulator codes; spec, model, options, a_signed, b_signed, clamp: static.
    Returns:
        (*batch, Mp, Np) int32 D codes.

    ``options.backend == 'pallas'``: the model family's fused Pallas kernel computes the same
    bits (`jwmma.backends.pallas`).
    """
    if pallas.kernel_for(spec, model, options):
        return pallas.matrix_path(a_codes, pos, b_codes, c, spec=spec, model=model, options=options,
                                  a_signed=a_signed, b_signed=b_signed, clamp=clamp)

    def rows(a_codes, pos, b_codes, c):
        tm, tn = matrix_tile(spec, c.shape[-2], c.shape[-1], options)
        a_s, p_s = _steps_a(a_codes, pos, spec.kc)
        b_s = _steps_b(b_codes, spec.k)

        def body(acc, x):
            # tiles of tm x tn outputs as a batch: each tile's selected B rows stay local
            a, p, b = x
            a_t = tiles(a, tm, spec.kc)  # (..., TM, 1, tm, kc)
            p_t = tiles(p, tm, spec.kc)
            b_t = tiles(b, spec.k, tn)  # (..., 1, TN, k, tn)
            d = step(spec, model, a_t, p_t, b_t, acc, options=options, a_signed=a_signed, b_signed=b_signed,
                     clamp=clamp)
            return d, None

        return untile(lax.scan(body, tiles(c, tm, tn), (a_s, p_s, b_s))[0])

    return by_row_blocks(rows, spec, model, context(spec, clamp), options)(a_codes, pos, b_codes, c)


@functools.partial(jax.jit, static_argnames=_STATIC + ("s",))
def register_path(a_codes, pos, b_codes, c, *, spec, model, options, a_signed, b_signed, clamp, s):
    """D codes of the tiled GEMM through per-step register fragments and the builtin (the
    arguments of `matrix_path`, and ``s``: the index set's bit offset)."""
    kernel = functools.partial(_register_rows, spec=spec, model=model, options=options, a_signed=a_signed,
                               b_signed=b_signed, clamp=clamp, s=s)
    return by_row_blocks(kernel, spec, model, context(spec, clamp), options)(a_codes, pos, b_codes, c)


def _register_rows(a_codes, pos, b_codes, c, *, spec, model, options, a_signed, b_signed, clamp, s):
    a_s, p_s = _steps_a(a_codes, pos, spec.kc)
    b_s = _steps_b(b_codes, spec.k)
    c_lanes = fragments.matrix_to_lanes(spec.c_layout, tiles(c, spec.m, spec.n))  # (..., TM, TN, lanes, nc) codes

    def body(c_lanes, x):
        a, p, b = x
        # fragments of every tile, as a kernel's loaders would build them
        a_t = tiles(a, spec.m, spec.kc)[..., :, 0:1, :, :]  # (..., TM, 1, m, kc)
        p_t = tiles(p, spec.m, spec.kc)[..., :, 0:1, :, :]
        b_t = tiles(b, spec.k, spec.n)[..., 0:1, :, :, :]  # (..., 1, TN, k, n)
        a_regs = fragments.codes_to_regs(spec.a, fragments.matrix_to_lanes(spec.a_layout, a_t))
        b_regs = fragments.codes_to_regs(spec.b, fragments.matrix_to_lanes(spec.b_layout, b_t))
        idx = fragments.index_words(spec, p_t, s)
        d = run_registers(spec, model, a_regs, b_regs, fragments.codes_to_regs(spec.c, c_lanes), idx, s=s,
                          options=options, a_signed=a_signed, b_signed=b_signed, clamp=clamp)
        return fragments.regs_to_codes(spec.c, d), None

    c_lanes = lax.scan(body, c_lanes, (a_s, p_s, b_s))[0]
    return untile(fragments.lanes_to_matrix(spec.c_layout, (spec.m, spec.n), c_lanes))
