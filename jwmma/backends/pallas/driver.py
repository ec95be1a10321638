"""The whole-GEMM Pallas driver: one program per (tm x tn) output tile, K steps in order.

Contract (the seam of `jwmma.gemm._matrix_path`): tile-padded element codes in, D codes out,
a_codes/pos (Mp, Kp/2) int32, b_codes (Kp, Np) int32, c (Mp, Np) int32 accumulator bits (or
i32 values). The program owning rows [i*tm, (i+1)*tm) and columns [j*tn, (j+1)*tn) keeps
its accumulator tile in registers through a `fori_loop` over K in hardware order and calls
the model's ``step(view, acc)`` once per *unit*: ``unit_kc`` consecutive compressed columns
(and the 2*unit_kc dense B rows they select from), each unit's D being the next unit's C. A
unit is one builtin step, or less where the model rounds more often than once a step (a
fused group, a gfx12 dot4 step): the same bits, a smaller kernel (faster to compile, fewer
live registers). ``view`` loads the unit's A columns, positions and B rows (small loads from
the program's blocks: Triton cannot slice register tensors).

The output depends only on its row of A and its column of B, so any tile gives the same bits.

Dense builtins (RDNA4 WMMA, ``Kernel.dense``): A is (Mp, Kp) and B (Kp, Np), read as
`jwmma.engine.step.dense_as_sparse` states the dense step for the XLA models: compressed
column c is dense A column c at the static position c % 2 of its block, and the candidate B
rows of block q are dense rows 2q, 2q+1 (no expanded B, no position operand). The kernels
reach B only through `StepView.b_rows` / `StepView.pick`, so every family takes the products
of a dense step in the XLA model's order (k = c) with nothing of its own.
"""
from __future__ import annotations

import contextlib
import copy
import functools
from dataclasses import dataclass
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from . import kernel_lib as kl
from . import quiet_triton_deprecation

__all__ = ["Tiling", "Kernel", "Summary", "summarize", "StepView", "run", "pad_to_tiles", "narrow", "LOWERINGS"]

#: what lowers a kernel on a GPU: Triton (deprecated in JAX 0.11) or Mosaic GPU (`mosaic`)
LOWERINGS = ("triton", "mosaic")


@dataclass(frozen=True)
class Tiling:
    """Execution choices of the Pallas backend (hashable: a static argument).

    tm, tn: output tile (powers of two; Triton needs power-of-two tensors).
    num_warps, num_stages: Triton launch parameters.
    interpret: run the kernel in Pallas interpret mode (CPU tests).
    reload, float_combine, float_round, vec3: kernel variants, see the model modules."""

    tm: int = 32
    tn: int = 64
    num_warps: int = 4
    num_stages: int = 1
    interpret: bool = False
    #: kernel variants (same bits; which is faster is a GPU question)
    reload: bool = False  # fused groups: load the operands again for the second pass
    float_combine: bool = False  # fused groups: combine with C in float64
    float_round: bool = False  # gfx12: f32 results by an int -> f32 conversion
    vec3: bool = False  # fused groups: 3-D (tm, blocks, tn) tensors and axis reductions
    gather: bool = False  # fused groups, sparse 3-D form: B rows by a gather load at the 2:4 positions
    chain_run: int | None = None  # fma_chain: products per loop iteration (None: `fma_chain.DEFAULT_RUN`)
    group_loop: bool = True  # block-scaled: the groups of a unit as a loop
    #: the kernel is lowered inside x64_scope, so its loops may count in int64 (`kernel_lib.fori`;
    #: the families that run faster so say so in `Kernel.wide_loops`)
    wide_loops: bool = False
    #: what lowers the kernel on a GPU: 'triton' (this module) or 'mosaic' (`mosaic`: Mosaic GPU)
    lowering: str = "triton"

    def __post_init__(self):
        for name in ("tm", "tn", "num_warps"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1 or v & (v - 1):
                raise ValueError(f"Tiling.{name} must be a power of two, got {v!r}")
        if not isinstance(self.num_stages, int) or self.num_stages < 1:
            raise ValueError(f"Tiling.num_stages must be a positive int, got {self.num_stages!r}")
        if self.lowering not in LOWERINGS:
            raise ValueError(f"Tiling.lowering must be one of {LOWERINGS}, got {self.lowering!r}")


class Kernel(NamedTuple):
    """What a model family gives the driver: ``step(view, acc) -> acc`` for one unit of
    ``unit_kc`` compressed columns, the operand formats to summarise per tile (or None) and
    (A bits, B bits, signed) of the element codes."""

    step: Callable
    unit_kc: int
    formats: tuple | None
    code_bits: tuple
    reload: bool = False  # pass A, positions and B twice (``view.second()``)
    a_word: Callable | None = None  # codes -> int32 operand words, run by XLA before the kernel
    b_word: Callable | None = None
    dense: bool = False  # a dense builtin: A (M, K), B (K, N), no positions (module doc)
    wide_loops: bool = False  # count the unit loop in int64 (`Tiling.wide_loops`, where the family wants it)


class Summary:
    """Static-shape facts about one operand tile of a unit, decoded from one int32 word
    (`summarize`): any NaN/Inf, any subnormal, and the largest / smallest exponent of its
    nonzero finite elements (-512 / 511 when there is none)."""

    def __init__(self, word):
        self.special = (word & 1) == 1
        self.tiny = (word & 2) == 2
        self.emax = ((word >> 2) & 1023) - 512
        self.emin = ((word >> 12) & 1023) - 512


def summarize(fmt, codes, tile_axes):
    """Per-tile summary words of float codes (XLA, outside the kernel): ``codes`` reshaped
    so that ``tile_axes`` are the elements of one tile; returns the reduced int32 words."""
    d = kl.decode(fmt, codes.astype(jnp.int32), with_val=False)
    nz = d.sig != 0
    special = jnp.any(d.nan | d.inf, axis=tile_axes)
    tiny = jnp.any(nz & (d.sig < (1 << fmt.mbits)), axis=tile_axes)
    emax = jnp.max(jnp.where(nz, d.exp, -512), axis=tile_axes)
    emin = jnp.min(jnp.where(nz, d.exp, 511), axis=tile_axes)
    return (special.astype(jnp.int32) | (tiny.astype(jnp.int32) << 1) | ((emax + 512) << 2)
            | ((emin + 512) << 12))


class StepView:
    """Loads of one unit inside a program (all loaded shapes are powers of two).

    ``refs``: name -> ref: "a", "p", "b" (codes, positions), "aw", "bw" (operand words the
    model's `Kernel.a_word` / `b_word` computed before the kernel), "sa", "sb" (summaries);
    names ending in "2" are the second copies (``reload``). ``dense``: the dense reading of
    the module doc (B rows per compressed column: 1, not 2; no "p")."""

    def __init__(self, refs: dict, u, unit_kc: int, dense: bool = False):
        self.refs, self.u, self.dense = refs, u, dense
        self.rows_per_col = 1 if dense else 2
        self.a0 = u * unit_kc
        self.b0 = u * (self.rows_per_col * unit_kc)
        self._loaded = None  # `caching`: (ref, static index) -> its column or row

    def summaries(self):
        """(Summary of the unit's A tile, Summary of its B tile): scalars, no reduction."""
        sa = jnp.max(self.refs["sa"][:, pl.ds(self.u, 1)])
        sb = jnp.max(self.refs["sb"][pl.ds(self.u, 1), :])
        return Summary(sa), Summary(sb)

    def second(self):
        """The same unit through the second copies of the operands (distinct loads, so the
        compiler cannot merge them with the first ones and keep their values live)."""
        v = self.shifted(0)
        v.refs = dict(self.refs)
        for name in ("a", "p", "b", "aw", "bw"):
            if name + "2" in self.refs:
                v.refs[name] = self.refs[name + "2"]
        return v

    def shifted(self, dc):
        """The view ``dc`` compressed columns further on (dc may be traced: loops inside a
        unit keep kernels small)."""
        v = copy.copy(self)  # the same kind of view (`mosaic.MosaicView` too), refs shared
        v.a0, v.b0 = self.a0 + dc, self.b0 + self.rows_per_col * dc
        v._loaded = None if self._loaded is None else {}
        return v

    def caching(self):
        """The same unit, each column and row of a static index loaded once however often it
        is read (for a kernel that reads them in both passes of a group). Triton's compile
        time grows with its loads times the program (its coalescing pass walks each load's
        slice of it); a (tm, 1) or (1, tn) value costs few registers to keep, but values
        kept across a whole step can spill (the gfx12 kernel's did: not used there)."""
        v = self.shifted(0)
        v._loaded = {}
        return v

    def row0(self, c):
        """Offset in the B block of the first candidate row of compressed column c's block
        (c even): 2c (sparse: rows 4q..4q+3 of block q = c/2) or c (dense: rows 2q, 2q+1)."""
        return self.b0 + self.rows_per_col * c

    def b_rows(self, q, name: str = "b"):
        """The candidate rows of compressed block q (columns 2q, 2q+1; q may be traced):
        (1, tn) int32 rows of ``name`` ("b" codes or "bw" words), four (dense rows 4q..4q+3)
        for a sparse builtin, two (dense rows 2q, 2q+1) for a dense one. Whatever a kernel
        derives from them elementwise, `pick` selects."""
        n = 2 if self.dense else 4
        return [self._row(name, n * q + r) for r in range(n)]

    def pick(self, c, rows):
        """The candidate (a list made from `b_rows` of c's block, elementwise) compressed
        column c multiplies: sparse: by A's 2:4 position, (tm, tn); dense: rows[c % 2],
        (1, tn), static for a Python int c (no select at all)."""
        if not self.dense:
            return kl.select4(self.p_col(c), rows)
        if isinstance(c, int):
            return rows[c % 2]
        return jnp.where((c & 1) == 0, rows[0], rows[1])  # not c % 2: Triton cannot lower an i64 rem

    def _col(self, name, c):
        return self._once((name, "col", c), lambda: self.refs[name][:, pl.ds(self.a0 + c, 1)].astype(jnp.int32))

    def _row(self, name, k):
        return self._once((name, "row", k), lambda: self.refs[name][pl.ds(self.b0 + k, 1), :].astype(jnp.int32))

    def _once(self, key, load):
        """``load()``, or for a `caching` view and a static index the value it loaded before."""
        if self._loaded is None or not isinstance(key[2], int):
            return load()
        if key not in self._loaded:
            self._loaded[key] = load()
        return self._loaded[key]

    def a_col(self, c):
        """(tm, 1) int32 A codes of compressed column c of the unit."""
        return self._col("a", c)

    def p_col(self, c):
        """(tm, 1) positions of column c (sparse builtins only: see `pick`)."""
        if self.dense:
            raise ValueError("a dense builtin has no positions: select B rows with StepView.pick")
        return self._col("p", c)

    def aw_col(self, c):
        """(tm, 1) A operand words (`Kernel.a_word`) of column c."""
        return self._col("aw", c)

    def b_row(self, k):
        """(1, tn) int32 B codes of row k of the unit's B block (dense K)."""
        return self._row("b", k)

    def bw_row(self, k):
        return self._row("bw", k)


def _kernel(*refs, names, step, unit_kc, units, dense, wide):
    named = dict(zip(names, refs))

    def body(u, acc):
        return step(StepView(named, u, unit_kc, dense), acc)

    named["o"][...] = kl.fori(units, body, named["c"][...], wide=wide)


def _round_up(x: int, m: int) -> int:
    """The least multiple of ``m`` that is at least ``x``."""
    return -(-x // m) * m


def narrow(codes, bits: int, signed: bool):
    """Codes in the narrowest integer type that holds them (fewer bytes per load)."""
    if bits <= 8:
        return codes.astype(jnp.int8 if signed else jnp.uint8)
    if bits <= 16:
        return codes.astype(jnp.int16 if signed else jnp.uint16)
    return codes.astype(jnp.int32)


def pad_to_tiles(kern: "Kernel", a_codes, pos, b_codes, c, tm: int, tn: int):
    """The operands of one GEMM of ``kern`` (2-D; `run`'s contract), checked and padded to
    whole (tm, tn) output tiles: padding rows of A select positions (2, 3) with zero values,
    padding columns of B and C are zero. Returns (a_codes, pos, b_codes, c); ValueError for
    inconsistent shapes."""
    unit_kc = kern.unit_kc
    m, kch = a_codes.shape
    kd, n = b_codes.shape
    rows_per_col = 1 if kern.dense else 2
    if kch * rows_per_col != kd or kch % unit_kc or c.shape != (m, n):
        want = "a (M, K), b (K, N)" if kern.dense else "a (M, K/2) compressed, b (K, N)"
        raise ValueError(f"inconsistent operands: a {a_codes.shape}, b {b_codes.shape}, c {c.shape} (expected "
                         f"{want}, c (M, N), K/2 or K a multiple of the unit's {unit_kc} columns)")
    if not kern.dense and (pos is None or pos.shape != a_codes.shape):
        raise ValueError(f"positions {None if pos is None else pos.shape} must match a {a_codes.shape}")
    mp, np_ = _round_up(m, tm), _round_up(n, tn)
    if mp != m:
        a_codes = jnp.pad(a_codes, ((0, mp - m), (0, 0)))
        if not kern.dense:
            pad_pos = jnp.broadcast_to(jnp.tile(jnp.asarray([2, 3], jnp.int32), kch // 2), (mp - m, kch))
            pos = jnp.concatenate([pos, pad_pos], axis=0)
        c = jnp.pad(c, ((0, mp - m), (0, 0)))
    if np_ != n:
        b_codes = jnp.pad(b_codes, ((0, 0), (0, np_ - n)))
        c = jnp.pad(c, ((0, 0), (0, np_ - n)))
    return a_codes, pos, b_codes, c


def run(kern: "Kernel", a_codes, pos, b_codes, c, *, tiling: Tiling):
    """D (Mp, Np) int32 of the GEMM whose units ``kern.step`` computes (see module doc).

    Passes the element codes in the narrowest integer type, the operand words of
    ``kern.a_word`` / ``kern.b_word`` (computed here, before the kernel: per element of A and
    B, not per product), per-(tile, unit) `Summary` words when ``kern.formats`` is given, and
    second copies when ``kern.reload``. Pads M and N up to whole tiles (padding rows select
    positions (2, 3) with zero values; padding columns of B are zero) and cuts the result
    back. Batch dims are vmapped (Pallas adds them to the grid). Must be traced with 64-bit
    types enabled (the caller's x64 scope).

    ``kern.dense``: a_codes (Mp, Kp) and b_codes (Kp, Np); ``pos`` (the zeros that
    `jwmma.tiled.operands` gives a dense A, or None) is not read."""
    if tiling.lowering == "mosaic":
        from . import mosaic

        return mosaic.run(kern, a_codes, pos, b_codes, c, tiling=tiling)
    if kern.dense:
        pos = None
    if a_codes.ndim > 2:
        return jax.vmap(functools.partial(run, kern, tiling=tiling))(a_codes, pos, b_codes, c)
    unit_kc = kern.unit_kc
    m, n = a_codes.shape[0], b_codes.shape[1]
    tm, tn = tiling.tm, tiling.tn
    a_codes, pos, b_codes, c = pad_to_tiles(kern, a_codes, pos, b_codes, c, tm, tn)
    (mp, kch), (kd, np_) = a_codes.shape, b_codes.shape
    rows_per_col = 1 if kern.dense else 2
    units = kch // unit_kc
    mt, nt = mp // tm, np_ // tn
    a_bits, b_bits, signed = kern.code_bits
    a_spec = pl.BlockSpec((tm, kch), lambda i, j: (i, 0))
    b_spec = pl.BlockSpec((kd, tn), lambda i, j: (0, j))
    ops = {"a": (narrow(a_codes, a_bits, signed), a_spec)}
    if not kern.dense:
        ops["p"] = (pos.astype(jnp.int8), a_spec)
    ops["b"] = (narrow(b_codes, b_bits, signed), b_spec)
    if kern.a_word is not None:
        ops["aw"] = (kern.a_word(a_codes.astype(jnp.int32)), a_spec)
    if kern.b_word is not None:
        ops["bw"] = (kern.b_word(b_codes.astype(jnp.int32)), b_spec)
    if kern.reload:
        ops.update({k + "2": v for k, v in list(ops.items())})
    if kern.formats is not None:
        fa, fb = kern.formats
        ops["sa"] = (summarize(fa, a_codes.reshape(mt, tm, units, unit_kc), (1, 3)),
                     pl.BlockSpec((1, units), lambda i, j: (i, 0)))
        ops["sb"] = (summarize(fb, b_codes.reshape(units, rows_per_col * unit_kc, nt, tn), (1, 3)),
                     pl.BlockSpec((units, 1), lambda i, j: (0, j)))
    ops["c"] = (c.astype(jnp.int32), pl.BlockSpec((tm, tn), lambda i, j: (i, j)))
    names = tuple(ops) + ("o",)
    kernel = functools.partial(_kernel, names=names, step=kern.step, unit_kc=unit_kc, units=units, dense=kern.dense,
                               wide=kern.wide_loops)
    if not tiling.interpret:
        quiet_triton_deprecation()
    from jax.experimental.pallas import triton as pl_triton  # here: the Mosaic driver does without it

    native = contextlib.nullcontext() if tiling.interpret else kl.triton_native()
    with native:  # the body is traced in here
        out = pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct((mp, np_), jnp.int32),
            grid=(mt, nt),
            in_specs=[spec for _, spec in ops.values()],
            out_specs=pl.BlockSpec((tm, tn), lambda i, j: (i, j)),
            interpret=tiling.interpret,
            compiler_params=pl_triton.CompilerParams(num_warps=tiling.num_warps, num_stages=tiling.num_stages),
        )(*[x for x, _ in ops.values()])
    return out[:m, :n]
