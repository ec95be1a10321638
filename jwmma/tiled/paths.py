"""The two execution paths of a whole GEMM, on tile-padded element codes.

Every output tile is accumulated over the K steps in order, each step one builtin call whose
result is the next step's C (what a hardware kernel does; the order matters for every model,
`exact` included: it rounds once per step). Both paths give the same bits:

* `matrix_path`: every step runs the instruction arithmetic on whole matrices at once (all
  tiles together: an output depends only on its row of A, its column of B and the step
  boundaries, so the tiles need not be cut out);
* `register_path`: every step packs the A, B, C fragments of every tile into registers,
  runs the builtin on all tiles as a batch of waves and unpacks D, as a real kernel does.

Both walk the K steps with `lax.scan`, in chunks of whole GEMMs of the batch and blocks of
rows sized by the model's working set (`jwmma.tiled.blocks`); peak memory is
O(rows x N x Kc_step), never O(M x N x K). `gemm_path` (what `jwmma.gemm` runs on one device)
takes the operands as the user gave them and converts each block's inside that loop, so
nothing but D grows with the batch.
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
from ..engine.effort import effort_jit
from ..engine.step import context, decode_operand, step
from ..isa.types import element_type
from ..models.integer import dense_a, int_dot
from ..isa.table import BuiltinSpec
from ..varying import vary_like, vary_together
from . import operands
from .blocks import batch_chunk, row_block, run_blocks, run_extent

__all__ = ["matrix_path", "kernel_gemm", "register_path", "gemm_path", "by_row_blocks", "row_block", "batch_chunk", "matrix_tile", "tiles",
           "untile"]


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
def by_row_blocks(kernel, spec: BuiltinSpec, model, ctx, options):
    """Run ``kernel(a, p, b, c)`` on tile-padded codes in blocks (`jwmma.tiled.blocks`):
    chunks of whole GEMMs of the batch, and blocks of rows of a GEMM too large for one, one
    after the other. An output row depends only on its own A row, so this bounds memory
    without changing any bit. Returns ``run(a, p, b, c)`` -> (*batch, Mp, Np) D codes of
    `operands.code_dtype` (int32; int64 for f64)."""
    codes = operands.code_dtype(spec)

    def run(a_codes, pos, b_codes, c):
        mp, np_ = c.shape[-2:]
        batch = tuple(np.broadcast_shapes(*(x.shape[:-2] for x in (a_codes, pos, b_codes, c))))

        def prepare(a, p, b, c, rows, lead):
            return tuple(jnp.broadcast_to(x, lead + x.shape[-2:]) for x in (a, p, b, c))

        return run_blocks(kernel, prepare, lambda d, rows: d.astype(codes), (a_codes, pos, b_codes, c),
                          spec=spec, model=model, ctx=ctx, options=options, batch=batch, m=mp, n=np_, mp=mp,
                          np_=np_, out_dtype=codes)

    return run


# ---------------------------------------------------------------------------- the paths
_STATIC = ("spec", "model", "options", "a_signed", "b_signed", "clamp")


@effort_jit(static_argnames=_STATIC + ("wide_loops",))
def matrix_path(a_codes, pos, b_codes, c, *, spec, model, options, a_signed, b_signed, clamp, wide_loops=False):
    """D codes of the tiled GEMM, instruction arithmetic on whole matrices.

    Args:
        a_codes, pos: (*batch, Mp, Kp/2) int32; b_codes: (*batch, Kp, Np); c: (*batch, Mp, Np)
        accumulator codes (A, B, C: int64 for f64, traced inside `x64_scope`); spec, model,
        options, a_signed, b_signed, clamp: static.
    Returns:
        (*batch, Mp, Np) int32 D codes (int64 for f64).

    ``options.backend == 'pallas'``: the model family's fused Pallas kernel computes the same
    bits (`jwmma.backends.pallas`); ``wide_loops``: the call is lowered where it is traced,
    inside `x64_scope` (an eager GEMM), so the kernel may count its K loop in int64.
    """
    a_codes, pos, b_codes, c = vary_together(a_codes, pos, b_codes, c)  # inside a user's shard_map
    if pallas.kernel_for(spec, model, options):
        return pallas.matrix_path(a_codes, pos, b_codes, c, spec=spec, model=model, options=options,
                                  a_signed=a_signed, b_signed=b_signed, clamp=clamp, wide_loops=wide_loops)

    rows = functools.partial(_matrix_rows, spec=spec, model=model, options=options, a_signed=a_signed,
                             b_signed=b_signed, clamp=clamp)
    return by_row_blocks(rows, spec, model, context(spec, clamp), options)(a_codes, pos, b_codes, c)


def _scan_steps(body, init, xs, steps):
    """``lax.scan(body, init, xs)[0]`` over the K steps, or, with a traced ``steps``, only the
    first ``steps`` of them (a GEMM padded to a bucket's depth: the steps past its own K are
    skipped, never run on zeros, which would change -0 accumulators)."""
    if steps is None:
        return lax.scan(lambda acc, x: (body(acc, x), None), init, xs)[0]
    n = jax.tree_util.tree_leaves(xs)[0].shape[0]

    def guarded(acc, ix):
        i, x = ix
        return lax.cond(i < steps, lambda: body(acc, x), lambda: acc), None

    return lax.scan(guarded, init, (jnp.arange(n, dtype=jnp.int32), xs))[0]


def _matrix_rows(a_codes, pos, b_codes, c, *, spec, model, options, a_signed, b_signed, clamp, steps=None,
                 normal_values=False):
    if model.gemm_sum(context(spec, clamp)):  # order-free (wrapping integers): one product for all K steps
        return _gemm_sum(a_codes, pos, b_codes, c, spec=spec, a_signed=a_signed, b_signed=b_signed)
    tm, tn = matrix_tile(spec, c.shape[-2], c.shape[-1], options)
    a_s, p_s = _steps_a(a_codes, pos, spec.kc)
    b_s = _steps_b(b_codes, spec.k)

    def body(acc, x):
        # tiles of tm x tn outputs as a batch: each tile's selected B rows stay local
        a, p, b = x
        a_t = tiles(a, tm, spec.kc)  # (..., TM, 1, tm, kc)
        p_t = tiles(p, tm, spec.kc)
        b_t = tiles(b, spec.k, tn)  # (..., 1, TN, k, tn)
        return step(spec, model, a_t, p_t, b_t, acc, options=options, a_signed=a_signed, b_signed=b_signed,
                    clamp=clamp, normal_values=normal_values)

    return untile(_scan_steps(body, tiles(c, tm, tn), (a_s, p_s, b_s), steps))


def _gemm_sum(a_codes, pos, b_codes, c, *, spec, a_signed, b_signed):
    """D = C + A @ B mod 2**32 over every K step at once (`jwmma.models.Model.gemm_sum`): the
    stored A values at their dense positions, one integer matrix product with int32
    accumulation, int8 operands where the types fit (integer tensor cores on GPUs)."""
    a = decode_operand(spec.a_type, a_codes, a_signed)
    b = decode_operand(spec.b_type, b_codes, b_signed)
    if spec.dense:
        ad = a
    else:
        ad = dense_a(a, pos)
    fits = all(element_type(t).int_format(sg).bits <= 8 and (element_type(t).int_format(sg).signed
                                                               or element_type(t).int_format(sg).bits < 8)
               for t, sg in ((spec.a_type, a_signed), (spec.b_type, b_signed)))
    return (c + int_dot(ad, b[..., : ad.shape[-1], :], int8=fits)).astype(jnp.int32)


@effort_jit(static_argnames=_STATIC + ("s",))
def register_path(a_codes, pos, b_codes, c, *, spec, model, options, a_signed, b_signed, clamp, s):
    """D codes of the tiled GEMM through per-step register fragments and the builtin (the
    arguments of `matrix_path`, and ``s``: the index set's bit offset)."""
    a_codes, pos, b_codes, c = vary_together(a_codes, pos, b_codes, c)  # inside a user's shard_map
    kernel = functools.partial(_register_rows, spec=spec, model=model, options=options, a_signed=a_signed,
                               b_signed=b_signed, clamp=clamp, s=s)
    return by_row_blocks(kernel, spec, model, context(spec, clamp), options)(a_codes, pos, b_codes, c)


def _stack_blocks(x, blocks: int):
    """(..., TM, TN, r, c) tiles -> (..., G, blocks*r, c): consecutive tiles (row-major) as the
    blocks of one multi-block call (BUILTINS_DENSE.md 10: blocks stacked along the rows), zero
    tiles filling the last call."""
    *lead, tm, tn, r, c = x.shape
    t, g = tm * tn, -(-(tm * tn) // blocks)
    x = x.reshape(*lead, t, r, c)
    if g * blocks != t:
        x = jnp.pad(x, [(0, 0)] * len(lead) + [(0, g * blocks - t), (0, 0), (0, 0)])
    return x.reshape(*lead, g, blocks * r, c)


def _unstack_blocks(x, blocks: int, tm: int, tn: int):
    """Inverse of `_stack_blocks` (the filling tiles dropped)."""
    *lead, g, br, c = x.shape
    x = x.reshape(*lead, g * blocks, br // blocks, c)[..., :tm * tn, :, :]
    return x.reshape(*lead, tm, tn, br // blocks, c)


def _register_rows(a_codes, pos, b_codes, c, *, spec, model, options, a_signed, b_signed, clamp, s, steps=None):
    a_s, p_s = _steps_a(a_codes, pos, spec.kc)
    b_s = _steps_b(b_codes, spec.k)
    c_t = tiles(c, spec.m, spec.n)  # (..., TM, TN, m, n)
    tm, tn = c_t.shape[-4:-2]
    nb = spec.blocks
    # a multi-block row's call holds `blocks` output tiles: its fragments are every tile's, stacked
    group = (lambda x: _stack_blocks(x, nb)) if nb > 1 else (lambda x: x)
    full = (lambda x: jnp.broadcast_to(x, (*x.shape[:-4], tm, tn, *x.shape[-2:]))) if nb > 1 else (lambda x: x)
    c_lanes = fragments.matrix_to_lanes(spec.c_layout, group(c_t))  # (..., TM, TN | G, lanes, nc) codes

    def body(c_lanes, x):
        a, p, b = x
        # fragments of every tile, as a kernel's loaders would build them
        a_t = full(tiles(a, spec.m, spec.kc)[..., :, 0:1, :, :])  # (..., TM, 1, m, kc)
        p_t = full(tiles(p, spec.m, spec.kc)[..., :, 0:1, :, :])
        b_t = full(tiles(b, spec.k, spec.n)[..., 0:1, :, :, :])  # (..., 1, TN, k, n)
        # registers as integer words, as the builtin functions pass them (`register_words`)
        regs = lambda op, codes: fragments.register_words(fragments.codes_to_regs(op, codes))  # noqa: E731
        a_regs = regs(spec.a, fragments.matrix_to_lanes(spec.a_layout, group(a_t)))
        b_regs = regs(spec.b, fragments.matrix_to_lanes(spec.b_layout, group(b_t)))
        idx = fragments.index_words(spec, group(p_t), s)
        scales = fragments.scale_registers(spec, a_t, b_t) if spec.scaled else (None, None)
        # an opsel row (RDNA3 16-bit outputs) holds C in the low halves, opsel = 0
        d = run_registers(spec, model, a_regs, b_regs, regs(spec.c, fragments.c_words(spec, c_lanes)), idx, *scales,
                          s=s, options=options, a_signed=a_signed, b_signed=b_signed, clamp=clamp)
        return fragments.c_slots(spec, fragments.regs_to_codes(spec.c, d))

    c_lanes = _scan_steps(body, c_lanes, (a_s, p_s, b_s), steps)
    d = fragments.lanes_to_matrix(spec.c_layout, spec.c_shape, c_lanes)
    return untile(_unstack_blocks(d, nb, tm, tn) if nb > 1 else d)


@effort_jit(static_argnames=_STATIC + ("form", "dims"))
def kernel_gemm(a, pos, b, c, *, spec, model, options, a_signed, b_signed, clamp, form, dims):
    """D values of an eager GEMM on one device whose instructions run on the model family's
    Pallas kernel (`matrix_path` with ``options.backend == 'pallas'``): the operands'
    conversion, padding, the kernel and D's conversion as one program. Op by op, each step was
    a program of its own, compiled again for every new shape (eleven per GEMM; on a GPU, most
    of a first call's time).

    Args:
        a, pos, b, c: `operands.Inputs` fields (pos, c may be None); spec, model, options,
            a_signed, b_signed, clamp: as `matrix_path`; form: `operands.Form`; dims: (M, N,
            K, batch). Called inside `x64_scope`, where the kernel lowers (``wide_loops``).
    Returns:
        (*batch, M, N) D in the accumulator's value dtype (not f64: those rows have no kernel).
    """
    m, n = dims[:2]
    ops = operands.Codes(*operands.convert(form, a, pos, b, c), *dims, spec.dense)
    d = matrix_path(*operands.pad_to_tiles(spec, ops), spec=spec, model=model, options=options,
                    a_signed=a_signed, b_signed=b_signed, clamp=clamp, wide_loops=True)
    return fragments.codes_to_values(spec.c_type, d[..., :m, :n].astype(operands.code_dtype(spec)))


@effort_jit(static_argnames=_STATIC + ("path", "s", "form", "dims", "normal_values"))
def gemm_path(a, pos, b, c, *, spec, model, options, a_signed, b_signed, clamp, path, s, form, dims, extent=None,
              normal_values=False):
    """D values of a whole GEMM from its checked operands as given (`operands.inputs`): the
    operands of each block are converted to codes and padded inside the bounded loop
    (`jwmma.tiled.blocks`), so no int32 copy of the batch is ever made (the same bits as
    `operands.codes` + `pad_codes` + `matrix_path` / `register_path`; XLA backend).

    Args:
        a, pos, b, c: `operands.Inputs` fields (pos, c may be None); spec, model, options,
            a_signed, b_signed, clamp: as `matrix_path`; path: 'matrix' or 'registers';
            s: the index set's bit offset; form: `operands.Form`; dims: (M, N, K, batch).
        extent: None, or an int32 (3,) array (m, n, k) <= (M, N, K) (may be traced): the
            operands are a bucket's (`jwmma.tiled.buckets`), zero-padded from a GEMM of that
            extent, and only its blocks and K steps run (`blocks.run_extent`); dims must then
            be tile multiples and the outputs past the extent are left zero.
        normal_values: the operands passed `Model.normal_operands` on the host
            (`Context.normal_values`; the matrix path's steps).
    Returns:
        (*batch, M, N) D in the accumulator's dtype.
    """
    m, n, k, batch = dims
    mp, np_, kp = (-(-m // spec.m) * spec.m, -(-n // spec.n) * spec.n, -(-k // spec.k) * spec.k)
    a, pos, b, c = vary_together(a, pos, b, c)  # a user's shard_map: the loop carries vary like them
    a_cols = kp if form.a_form == "dense" else kp // 2
    words = operands.word_dtype(spec)

    def prepare(a, p, b, c, rows, lead, cols=np_):
        a, p, b, c = operands.convert(form, a, p, b, c)
        a, p = operands.pad_a(a, p, rows, a_cols)
        b = operands.pad_to(b, {-2: kp, -1: cols})
        zeros = jnp.zeros((rows, cols), jnp.int64 if words == np.int64 else jnp.int32)  # f64: int64 bit patterns
        c = vary_like(zeros, a) if c is None else operands.pad_to(c, {-2: rows, -1: cols})
        return tuple(jnp.broadcast_to(x, lead + x.shape[-2:]) for x in (a, p, b, c))

    def finish(d, rows, cols=n):  # D stays bits inside the loop: float copies may not keep them (`_padded_bits`)
        return d[..., :rows, :cols].astype(words)

    kw = dict(spec=spec, model=model, options=options, a_signed=a_signed, b_signed=b_signed, clamp=clamp)
    if extent is not None:  # a bucket's operands: only the extent's K steps
        kw["steps"] = (extent[2] + spec.k - 1) // spec.k
    kernel = functools.partial(_matrix_rows, **kw, normal_values=normal_values) if path == "matrix" else \
        functools.partial(_register_rows, **kw, s=s)
    common = dict(spec=spec, model=model, ctx=context(spec, clamp), options=options, batch=batch, out_dtype=words)
    if extent is not None:
        if (m, n) != (mp, np_) or k != kp:
            raise ValueError(f"a bucket's dims must be whole tiles, got {dims} for {spec.name}")  # jwmma's own misuse
        d = run_extent(kernel, prepare, finish, (a, pos, b, c), extent, m=m, n=n, **common)
    else:
        d = run_blocks(kernel, prepare, finish, (a, pos, b, c), m=m, n=n, mp=mp, np_=np_, **common)
    return fragments.codes_to_values(spec.c_type, d)
