"""The whole-GEMM Pallas driver lowered by Mosaic GPU instead of Triton (``PallasOptions(
lowering='mosaic')``): the same `driver.Kernel` steps, the same bits, another memory plan.

JAX 0.11 deprecates the Pallas Triton backend that `driver` lowers to; Mosaic GPU (sm_90 and
later) is Pallas' GPU backend after it, written as `plgpu.kernel` (its ``pallas_call`` form is
deprecated too). Its rules shape this driver (each found by lowering kernels for CUDA on a
machine without a GPU, `jax.export` with ``platforms=('cuda',)``):

* what a program reads is copied to shared memory block by block, so K cannot be one block
  (A's (tm, K) block was 512 KiB at K = 8192): a program (one (tm, tn) output tile, grid
  axes "m" and "n") runs the K blocks through `plgpu.emit_pipeline` (the next block's copies
  overlap this block's units), each of ``bkc`` compressed columns (whole units), with the
  accumulator carried in registers from C's tile to D's;
* register arrays have warpgroup layouts: a tile is (tm, tn) with tm a multiple of 64, and
  a column of A is read as a row of A's transpose (A, positions and A's operand words go to
  the kernel K-major, (K, M)): one contiguous (tm,) load, broadcast along N, where a (tm, 1)
  strided column load fails; B rows likewise, broadcast along M. So `MosaicView` gives every
  column and row as a whole (tm, tn) tile (the Triton driver's (tm, 1) and (1, tn) shapes
  have no layout here), and the model steps, which only broadcast them, run unchanged;
* values where branches or loop carries meet must share layout and signedness
  (`kernel_lib.on_tile`, `kernel_lib.cond`); reductions run over one axis at a time
  (`kernel_lib.tile_any`); copies move multiples of 128 bytes (each K block's per-unit
  summary words are padded to 32); C's and D's tile pass through swizzled shared memory
  (unswizzled, a (tm, tn) int32 tile conflicts on banks).

The 3-D fused-group form (``vec3``) has no layout here: fused groups, and the block-scaled
kernel built on their group sums, run their 2-D form (`fused.group_sum`; the fused groups with
the integer combine: Mosaic GPU does not lower a float64 floor).

On CPUs (tests) the kernel runs in Mosaic GPU's interpreter (copies, barriers and the
pipeline simulated), the layout casts left out (they only say where values live). Whether
Mosaic GPU's compiler takes what its Python lowering accepts, and how fast it runs, is a
question for a GPU (benchmarks/RESULTS.md).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from . import kernel_lib as kl
from . import mosaic_signedness
from .driver import StepView, Summary, narrow, pad_to_tiles, summarize

__all__ = ["MosaicView", "run", "MAX_BLOCK_COLUMNS", "STAGE_BYTES", "ROW_TILE"]

#: compressed columns of A per K block at most (shared memory: tm x bkc A codes, positions and
#: words, 2 bkc x tn B codes and words per stage)
MAX_BLOCK_COLUMNS = 64
#: shared memory for one pipeline stage's operand blocks at most (two stages, C/D's tile and the
#: summaries fit in an H100's 227 KiB: B's words of a 64-column block are 64 KiB at tn = 128)
STAGE_BYTES = 96 * 1024
#: rows of a warpgroup's register tile: tm must be a multiple
ROW_TILE = 64
_SUMMARY_WORDS = 32  # 128 bytes: the smallest copy


def _layouts(interpret: bool):
    """(cast, tile layout, row layout, column layout): `plgpu.layout_cast` and the warpgroup
    layouts, or identities in interpret mode (which has no layouts)."""
    if interpret:
        return (lambda x, layout: x), None, None, None
    from jax.experimental.pallas import mosaic_gpu as plgpu

    wg = plgpu.Layout.WGMMA
    return plgpu.layout_cast, wg, wg.reduce(1), wg.reduce(0)


class MosaicView(StepView):
    """`driver.StepView` for the Mosaic driver: one unit ``u`` of the current K block (local
    index), every column and row loaded as a (tm, tn) tile (``shape``; module doc), where the
    Triton view gives (tm, 1) and (1, tn). It has no second copies (``second`` is the same
    unit: the same bits)."""

    def __init__(self, refs: dict, u, unit_kc: int, dense: bool, shape: tuple, interpret: bool):
        super().__init__(refs, u, unit_kc, dense)
        self.shape, self.interpret = shape, interpret

    def summaries(self):
        """(Summary of the unit's A tile, Summary of its B tile): two scalar loads."""
        return Summary(self.refs["sa"][0, self.u]), Summary(self.refs["sb"][0, self.u])

    def _col(self, name, c):
        cast, _, row_layout, _ = _layouts(self.interpret)
        v = cast(self.refs[name][self.a0 + c, :], row_layout).astype(jnp.int32)  # A's column: a row of A^T
        return lax.broadcast_in_dim(v, self.shape, (0,))

    def _row(self, name, k):
        cast, _, _, col_layout = _layouts(self.interpret)
        v = cast(self.refs[name][self.b0 + k, :], col_layout).astype(jnp.int32)
        return lax.broadcast_in_dim(v, self.shape, (1,))


def _kernel(*refs, names, step, unit_kc, block_units, k_blocks, specs, dense, wide, shape, interpret, stages):
    """One program: C's tile in, the K blocks through `plgpu.emit_pipeline` (their copies
    overlapping the units of the block before), the accumulator carried in registers, D's
    tile out through shared memory."""
    from jax.experimental.pallas import mosaic_gpu as plgpu

    ins = dict(zip(names, refs[:len(names)]))
    c_gmem, o_gmem, tile_smem, barrier = refs[len(names):]
    cast, tile_layout, _, _ = _layouts(interpret)
    tm, tn = shape
    i, j = lax.axis_index("m"), lax.axis_index("n")
    window = (pl.ds(i * tm, tm), pl.ds(j * tn, tn))
    plgpu.copy_gmem_to_smem(c_gmem.at[window], tile_smem, barrier)
    plgpu.barrier_wait(barrier)

    def block(_, *args):
        *smem, acc = args
        named = dict(zip(names, smem), c=tile_smem)  # "c": the tile's shape (`fused.product_flags`)
        return kl.fori(block_units, lambda u, x: step(MosaicView(named, u, unit_kc, dense, shape, interpret), x),
                       acc, wide=wide)

    def pipeline():
        in_specs = [spec(i, j) for spec in specs]
        return plgpu.emit_pipeline(block, grid=(k_blocks,), in_specs=in_specs,
                                   max_concurrent_steps=min(stages, k_blocks),
                                   init_carry=kl.on_tile(tile_smem[...]))(*[ins[n] for n in names])

    if interpret:
        acc = pipeline()
    else:
        with kl.tile_layout(cast, tile_layout):
            acc = pipeline()
    tile_smem[...] = acc
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(tile_smem, o_gmem.at[window])
    plgpu.wait_smem_to_gmem(0)


def _block_units(units: int, unit_kc: int, column_bytes: int) -> int:
    """Units per K block: the most that divide ``units`` within `MAX_BLOCK_COLUMNS` compressed
    columns and `STAGE_BYTES` of shared memory (``column_bytes`` a column: its A tile column
    and B rows, every operand), at least one."""
    most = max(1, min(MAX_BLOCK_COLUMNS, STAGE_BYTES // column_bytes))
    best = 1
    for d in range(1, units + 1):
        if units % d == 0 and d * unit_kc <= most:
            best = d
    return best


def _summary_blocks(words, k_blocks: int, block_units: int):
    """Per-unit summary words (tiles, units) -> (tiles, k_blocks * padded): each K block's
    words padded to a multiple of 32 (a 128-byte copy)."""
    tiles = words.shape[0]
    pad = -block_units % _SUMMARY_WORDS
    w = words.reshape(tiles, k_blocks, block_units)
    w = jnp.pad(w, ((0, 0), (0, 0), (0, pad)))
    return w.reshape(tiles, k_blocks * (block_units + pad)), block_units + pad


def run(kern, a_codes, pos, b_codes, c, *, tiling):
    """D (Mp, Np) int32 of the GEMM whose units ``kern.step`` computes: `driver.run`'s
    contract and bits, lowered by Mosaic GPU (module doc). ``tiling.tm`` must be a multiple
    of `ROW_TILE` and ``tiling.tn`` of 8; num_warps, num_stages and reload do not apply (one
    warpgroup per program; no second copies: the same bits). Must be traced with 64-bit types
    enabled (the caller's x64 scope), as `driver.run`."""

    if kern.dense:
        pos = None
    if a_codes.ndim > 2:
        return jax.vmap(functools.partial(run, kern, tiling=tiling))(a_codes, pos, b_codes, c)
    tm, tn = tiling.tm, tiling.tn
    if tm % ROW_TILE or tn % 8:
        raise ValueError(f"the Mosaic GPU kernels need tm a multiple of {ROW_TILE} and tn of 8 (a warpgroup's "
                         f"register tile), got tm={tm}, tn={tn}")
    unit_kc = kern.unit_kc
    m, n = a_codes.shape[0], b_codes.shape[1]
    a_codes, pos, b_codes, c = pad_to_tiles(kern, a_codes, pos, b_codes, c, tm, tn)
    (mp, kch), np_ = a_codes.shape, b_codes.shape[1]
    rows_per_col = 1 if kern.dense else 2
    units = kch // unit_kc
    mt, nt = mp // tm, np_ // tn
    interpret = bool(tiling.interpret)
    from jax.experimental.pallas import mosaic_gpu as plgpu

    a_bits, b_bits, signed = kern.code_bits
    a_t = lambda x: x.T  # noqa: E731 - K-major: column c of A is row c of A^T (module doc)
    a_side = {"a": a_t(narrow(a_codes, a_bits, signed))}
    if not kern.dense:
        a_side["p"] = a_t(pos.astype(jnp.int8))
    if kern.a_word is not None:
        a_side["aw"] = a_t(kern.a_word(a_codes.astype(jnp.int32)))
    b_side = {"b": narrow(b_codes, b_bits, signed)}
    if kern.b_word is not None:
        b_side["bw"] = kern.b_word(b_codes.astype(jnp.int32))
    narrowest = min(x.dtype.itemsize for x in b_side.values())
    if tn * narrowest < 16:  # a copy moves rows of 16 bytes at least
        raise ValueError(f"tn={tn}: a B row of {tn} {narrowest}-byte codes is under the 16 bytes a Mosaic GPU copy "
                         f"moves; use tn >= {16 // narrowest}")
    column_bytes = (sum(tm * x.dtype.itemsize for x in a_side.values())
                    + sum(rows_per_col * tn * x.dtype.itemsize for x in b_side.values()))
    ub = _block_units(units, unit_kc, column_bytes)
    kt, bkc = units // ub, ub * unit_kc
    if bkc * column_bytes > 2 * STAGE_BYTES:  # one unit (the block-scaled kernel's: a whole step) too large
        raise ValueError(f"a {tm} x {tn} tile's K block needs {bkc * column_bytes} bytes of shared memory, over the "
                         f"{2 * STAGE_BYTES} this driver uses: pass a smaller tn (or tm)")
    stages = 2 if bkc * column_bytes <= STAGE_BYTES else 1  # double-buffered where two fit
    a_spec = lambda i, j: plgpu.BlockSpec((bkc, tm), lambda k: (k, i))  # noqa: E731
    b_spec = lambda i, j: plgpu.BlockSpec((bkc * rows_per_col, tn), lambda k: (k, j))  # noqa: E731
    ops = {name: (x, a_spec) for name, x in a_side.items()}
    ops.update({name: (x, b_spec) for name, x in b_side.items()})
    if kern.formats is not None:
        fa, fb = kern.formats
        sa, wa = _summary_blocks(summarize(fa, a_codes.reshape(mt, tm, units, unit_kc), (1, 3)), kt, ub)
        sb, wb = _summary_blocks(summarize(fb, b_codes.reshape(units, rows_per_col * unit_kc, nt, tn), (1, 3)).T,
                                 kt, ub)
        ops["sa"] = (sa, lambda i, j: plgpu.BlockSpec((1, wa), lambda k: (i, k)))
        ops["sb"] = (sb, lambda i, j: plgpu.BlockSpec((1, wb), lambda k: (j, k)))
    names = tuple(ops)
    kernel = functools.partial(_kernel, names=names, step=kern.step, unit_kc=unit_kc, block_units=ub, k_blocks=kt,
                               specs=tuple(sp for _, sp in ops.values()), dense=kern.dense, wide=kern.wide_loops,
                               shape=(tm, tn), interpret=interpret, stages=stages)
    row_bytes = min(128, 4 * tn)  # the widest swizzle a row of the int32 tile fills (bank conflicts)
    swizzle = (plgpu.TilingTransform((8, row_bytes // 4)), plgpu.SwizzleTransform(row_bytes))
    # lane semantics (JAX 0.10's default): JAX 0.11's warpgroup semantics lower a bool tile's `not`
    # through int64 and fail
    extra = {"compiler_params": plgpu.CompilerParams(lowering_semantics=plgpu.LoweringSemantics.Lane),
             "kernel_name": mosaic_signedness.KERNEL_NAME}
    if not interpret:  # the interpreter computes on dtypes: it needs no correction
        mosaic_signedness.install()
    else:  # Mosaic GPU's own interpreter (public from JAX 0.11 on)
        params = getattr(plgpu, "InterpretGPUParams", None)
        if params is None:
            from jax._src.pallas.mosaic_gpu.interpret.params import InterpretGPUParams as params
        extra["interpret"] = params()
    out = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((mp, np_), jnp.int32),
        grid=(mt, nt),
        grid_names=("m", "n"),
        scratch_types=[plgpu.SMEM((tm, tn), jnp.int32, transforms=swizzle), plgpu.Barrier()],
        **extra,
    )(*[x for x, _ in ops.values()], c.astype(jnp.int32))
    return out[:m, :n]
