"""Running a kernel policy over a grid of blocks and waves, and checking it against
`jwmma.gemm` (the loop it emulates: the module doc of `jwmma.kernel`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..engine.effort import effort_jit, settle, shapes_key
from ..engine.fragments import codes_to_values
from ..engine.options import resolve as resolve_options
from ..keywords import forwarding_keywords, strict_keywords
from ..numerics.rounding import x64_scope
from ..tiled import float64_out, gemm, operands
from .diff import compare
from .policy import Policy, as_policy, metadata, name_of

__all__ = ["Geometry", "run", "check"]


# ------------------------------------------------------------------------ operand images
@dataclasses.dataclass(frozen=True)
class Geometry:
    """The grid of one kernel run: logical (m, n, k), padded (mp, np_, kp), waves per block,
    the wave tile (tile_m x tile_n) and the dense K step; ``call_blocks``: the independent
    blocks of one builtin call, side by side along the wave tile's columns."""

    m: int          # logical output rows / cols / dense K
    n: int
    k: int
    mp: int         # padded
    np_: int
    kp: int
    waves: tuple
    tile_m: int
    tile_n: int
    k_step: int
    call_blocks: int = 1

    @property
    def block_m(self):
        return self.waves[0] * self.tile_m

    @property
    def block_n(self):
        return self.waves[1] * self.tile_n

    @property
    def blocks(self):
        return (self.mp // self.block_m, self.np_ // self.block_n)

    @property
    def steps(self):
        return self.kp // self.k_step

    def describe(self, lanes):
        """One line for diffs: the problem, the grid, the tile and the K steps."""
        bm, bn = self.blocks
        per_call = (f" ({self.call_blocks} builtin blocks of {self.tile_m}x{self.tile_n // self.call_blocks})"
                    if self.call_blocks > 1 else "")
        return (f"D {self.m}x{self.n}, K={self.k} (padded {self.mp}x{self.np_}, K={self.kp}); grid "
                f"{bm}x{bn} blocks of {self.waves[0]}x{self.waves[1]} waves x {lanes} lanes, wave tile "
                f"{self.tile_m}x{self.tile_n}{per_call}, {self.steps} K step(s) of {self.k_step}")


def _memory(codes, op, bits):
    """Element codes (int32; int64 bits of doubles) -> the storage a kernel reads (module docstring):
    doubles and f32 elements as float64/float32, 16-bit elements as the register dtype, 8- and
    4-bit elements as uint8 bytes."""
    if bits == 64:  # float64, moved on its bits
        return lax.bitcast_convert_type(codes.astype(jnp.int64), jnp.float64)
    if bits == 32:  # f32 elements (the f32 MFMA's A and B): float32, moved on its bits
        return lax.bitcast_convert_type(codes.astype(jnp.int32), op.dtype)
    if bits == 16:
        return lax.bitcast_convert_type(codes.astype(jnp.uint16), op.dtype)
    return (codes & ((1 << bits) - 1)).astype(jnp.uint8)


def _prepare(pol: Policy, a, b, c, waves, prune):
    """(Geometry, images): the operands validated (as `jwmma.gemm` does), padded to whole
    blocks as gemm pads, and laid out as the kernel's memory (module doc of `jwmma.kernel`)."""
    spec = pol.spec
    if (not isinstance(waves, (tuple, list)) or len(waves) != 2
            or not all(isinstance(w, (int, np.integer)) and w >= 1 for w in waves)):
        raise ValueError(f"waves must be a pair (waves_m, waves_n) of positive ints, got {waves!r}")
    waves = (int(waves[0]), int(waves[1]))
    ins = operands.inputs(spec, a, b, c, prune=prune)   # every check of gemm; converted in `_images`
    if ins.batch:
        raise ValueError(f"kernel.run takes a 2-D A (M, K) or (values, positions) of (M, K/2), B (K, N) and C "
                         f"(M, N); got batch dims {ins.batch} (batch dims are not supported here)")
    block_m, block_n = waves[0] * pol.thread_tile_m, waves[1] * pol.thread_tile_n
    mp, np_ = -(-ins.m // block_m) * block_m, -(-ins.n // block_n) * block_n
    kp = -(-ins.k // spec.k) * spec.k
    geo = Geometry(ins.m, ins.n, ins.k, mp, np_, kp, waves, pol.thread_tile_m, pol.thread_tile_n, spec.k,
                   spec.blocks)
    return geo, _images(ins.a, ins.pos, ins.b, ins.c, spec=spec, form=ins.form, geo=geo)


@functools.partial(jax.jit, static_argnames=("spec", "form", "geo"))
def _images(a, pos, b, c, *, spec, form, geo):
    """Checked operands (`operands.inputs`) -> codes, padded, as the kernel's memory: one
    program (op by op, each new shape would compile every small operation)."""
    a_codes, pos, b_codes, c_codes = operands.convert(form, a, pos, b, c)
    ops = operands.Codes(a_codes, pos, b_codes, c_codes, geo.m, geo.n, geo.k, (), spec.dense)
    a_codes, pos, b_codes, c_codes = operands.pad_codes(ops, geo.mp, geo.np_, geo.kp)
    # a dense row has no metadata: zero bytes, kc/4 a row and step (none when its K step is under 4)
    meta = jnp.zeros((geo.mp, geo.steps * (spec.kc // 4)), jnp.uint8) if spec.dense else metadata(pos)
    return (_memory(a_codes, spec.a, spec.a.elem_bits), meta,
            _memory(b_codes, spec.b, spec.b.elem_bits), codes_to_values(spec.c_type, c_codes))


# ---------------------------------------------------------------------------------- kernel
def _check_out(pol, what, x, shape, dtypes):
    x = jnp.asarray(x)
    if tuple(x.shape) != tuple(shape) or np.dtype(x.dtype) not in [np.dtype(d) for d in dtypes]:
        want = " or ".join(np.dtype(d).name for d in dtypes)
        raise TypeError(
            f"{name_of(pol)}.{what} gives {tuple(x.shape)[1:]} {x.dtype} per lane; {pol.spec.name} "
            f"wants {tuple(shape)[1:]} {want} per lane"
        )
    return x


def _grid(geo: Geometry):
    """(bm, bn, wm, wn) of every wave, flattened in that order: 4 int32 arrays (waves,)."""
    return [jnp.asarray(g) for g in np.indices((*geo.blocks, *geo.waves)).reshape(4, -1).astype(np.int32)]


def _stores(pol, geo, d, sub_m, sub_n, acc_dtype):
    """store_c over the lanes of one wave -> offsets (lanes, n_c) int32, values (lanes, n_c)."""
    spec = pol.spec
    lanes = jnp.arange(spec.lanes, dtype=jnp.int32)
    n_c = pol.registers("c")[0]
    offs, vals = jax.vmap(lambda dl, lane: pol.store_c(dl, sub_m, sub_n, geo.np_, lane))(d, lanes)
    offs = jnp.asarray(offs)
    if offs.shape != (spec.lanes, n_c) or not jnp.issubdtype(offs.dtype, jnp.integer):
        raise TypeError(f"{name_of(pol)}.store_c must return ({n_c},) integer offsets per lane, got "
                        f"{offs.shape[1:]} {offs.dtype}")
    vals = _check_out(pol, "store_c values", vals, (spec.lanes, n_c), [acc_dtype])
    return offs.astype(jnp.int32), vals


def _subtile(geo, bm, bn, wm, wn):
    return bm * geo.block_m + wm * geo.tile_m, bn * geo.block_n + wn * geo.tile_n


# The kernel runs in three jitted stages so that the expensive one (the builtin calls, whose
# arithmetic models take seconds to compile) is keyed on (builtin, mma, model, shapes) only:
# editing a loader or store_c recompiles only the cheap stages. Each compiles at the run's
# settled ``options.compile_effort`` (`jwmma.engine.effort`), as a GEMM's program does.
@effort_jit(static_argnames=("pol", "geo", "options"))
def _load(a_img, m_img, b_img, c, *, pol: Policy, geo: Geometry, options):
    """Stage 1: every wave's registers for every K step, and its initial accumulator."""
    spec = pol.spec
    bm_n, bn_n = geo.blocks
    s_n = geo.steps
    kcs = spec.kc  # stored A values per row and step (dense builtins: the whole K step)
    tm = kcs // 4
    lanes = jnp.arange(spec.lanes, dtype=jnp.int32)
    # block tiles per K step, flattened row-major as in LDS
    a_t = a_img.reshape(bm_n, geo.block_m, s_n, kcs).transpose(0, 2, 1, 3).reshape(bm_n, s_n, -1)
    m_t = m_img.reshape(bm_n, geo.block_m, s_n, tm).transpose(0, 2, 1, 3).reshape(bm_n, s_n, -1)
    b_t = b_img.reshape(s_n, geo.k_step, bn_n, geo.block_n).transpose(2, 0, 1, 3).reshape(bn_n, s_n, -1)
    c_flat = c.reshape(-1)

    def wave(bm, bn, wm, wn):
        sub_m, sub_n = _subtile(geo, bm, bn, wm, wn)
        offs0, _ = _stores(pol, geo, jnp.zeros((spec.lanes, pol.registers("c")[0]), c.dtype), sub_m, sub_n, c.dtype)
        d0 = jnp.take(c_flat, offs0, mode="fill", fill_value=0)

        def step(sA, sM, sB):
            a = jax.vmap(lambda lane: pol.load_a(sA, wm, lane, kcs))(lanes)
            b = jax.vmap(lambda lane: pol.load_b(sB, wn, lane, geo.block_n))(lanes)
            idx = jax.vmap(lambda lane: jnp.asarray(pol.index(sM, wm, lane, tm)))(lanes)
            (n_a, dt_a), (n_b, dt_b) = pol.registers("a"), pol.registers("b")
            a = _check_out(pol, "load_a", a, (spec.lanes, n_a), dt_a)
            b = _check_out(pol, "load_b", b, (spec.lanes, n_b), dt_b)
            idx = _check_out(pol, "index", idx, (spec.lanes,), (np.int32, np.uint32))
            return a, b, idx.astype(jnp.int32)

        return jax.vmap(step)(a_t[bm], m_t[bm], b_t[bn]), d0     # registers: (steps, lanes, n)

    (a, b, idx), d0 = jax.vmap(wave)(*_grid(geo))                  # (waves, steps, lanes, n)
    return jnp.swapaxes(a, 0, 1), jnp.swapaxes(b, 0, 1), jnp.swapaxes(idx, 0, 1), d0


@effort_jit(static_argnames=("mma", "model", "options"))
def _mma_steps(a, b, idx, d0, *, mma: Policy, model, options):
    """Stage 2: every wave issues its mma once per K step, in order (lax.scan over steps)."""
    def step(d, x):
        a_s, b_s, i_s = x
        return jax.vmap(lambda d_w, a_w, b_w, i_w: mma.call_mma(d_w, a_w, b_w, i_w, model, options))(
            d, a_s, b_s, i_s), None

    return lax.scan(step, d0, (a, b, idx))[0]


@effort_jit(static_argnames=("pol", "geo", "options"))
def _store(d, *, pol: Policy, geo: Geometry, options):
    """Stage 3: store_c of every wave, scattered into D; also how often each element was written."""
    def wave(d_w, bm, bn, wm, wn):
        return _stores(pol, geo, d_w, *_subtile(geo, bm, bn, wm, wn), d.dtype)

    offs, vals = jax.vmap(wave)(d, *_grid(geo))                    # (waves, lanes, n_c)
    size = geo.mp * geo.np_
    flat_o, flat_v = offs.reshape(-1), vals.reshape(-1)
    out = jnp.zeros(size, d.dtype).at[flat_o].set(flat_v, mode="drop")
    writes = jnp.zeros(size, jnp.int32).at[flat_o].add(1, mode="drop")
    return out.reshape(geo.mp, geo.np_), writes.reshape(geo.mp, geo.np_), offs


def _execute(policy, a, b, c, waves, model, prune, options, target=None):
    pol = as_policy(policy, target)
    if not pol.f64:
        return _execute_in_scope(pol, a, b, c, waves, model, prune, options)
    x64 = bool(jax.config.jax_enable_x64)
    with x64_scope():  # doubles exist inside x64_scope only (the user's jax_enable_x64 is left alone)
        pol, geo, d, writes, offs = _execute_in_scope(pol, a, b, c, waves, model, prune, options)
        return pol, geo, float64_out(pol.spec, d, x64), writes, offs


def _execute_in_scope(pol, a, b, c, waves, model, prune, options):
    geo, (a_img, m_img, b_img, c_img) = _prepare(pol, a, b, c, waves, prune)
    spec = pol.spec
    products = geo.steps * int(np.prod(geo.blocks)) * int(np.prod(geo.waves)) * spec.blocks * spec.m * spec.kc * spec.n
    options = settle(options, products, model, (pol, model, options, geo, shapes_key(a_img, m_img, b_img, c_img)))
    a_r, b_r, idx, d0 = _load(a_img, m_img, b_img, c_img, pol=pol, geo=geo, options=options)
    mma_key = Policy(pol.builtin, None, None, None, None, pol.mma, target=pol.target)   # loaders not in the key
    d = _mma_steps(a_r, b_r, idx, d0, mma=mma_key, model=model, options=options)
    d, writes, offs = _store(d, pol=pol, geo=geo, options=options)
    return pol, geo, d, writes, offs


@strict_keywords
def run(policy, a, b, c=None, *, waves=(1, 1), model=None, prune=False, options=None, backend=None,
        target=None):
    """Emulate the tiled kernel of ``policy`` (module doc of `jwmma.kernel`).

    Args:
        policy: a `Policy` or any object with its attributes.
        a: dense 2:4-sparse (M, K) array of the builtin's A element type, or a ``(values,
            positions)`` pair of (M, K/2) arrays, as `jwmma.gemm` takes it; b: (K, N); c:
            (M, N) of the accumulator dtype or None.
        waves: (waves_m, waves_n) per block; the grid of blocks follows from the
            (zero-padded) shapes.
        model: the arithmetic model passed to ``mma``; prune: prune a dense ``a`` first.
        options, backend: execution options (`jwmma.Options`) of the default mma.
        target: the chip the kernel runs on, for a builtin that runs on several (CDNA3 SMFMAC:
            'gfx942', the default, FNUZ fp8/bf8, or 'gfx950', OCP: A and B then hold that
            chip's formats, as for `jwmma.gemm`); None: the policy's ``target``, else the
            row's default. ValueError for a target the builtin's row does not list.
    Returns:
        D (M, N) of the accumulator dtype.
    """
    empty = _empty(policy, a, b, c, prune, target)
    if empty is not None:
        return empty
    _, geo, d, _, _ = _execute(policy, a, b, c, waves, model, prune, resolve_options(options, backend), target)
    return d[: geo.m, : geo.n]


def _empty(policy, a, b, c, prune, target=None):
    """D for M = 0 or N = 0 (no wave runs: an empty D of the accumulator dtype), else None."""
    pol = as_policy(policy, target)
    x64 = bool(jax.config.jax_enable_x64)
    with x64_scope() if pol.f64 else contextlib.nullcontext():  # f64 operands: int64 codes
        ops = operands.inputs(pol.spec, a, b, c, prune=prune)
        if ops.m and ops.n:
            return None
        d = jnp.zeros((ops.m, ops.n), operands.accumulator_dtype(pol.spec))
        return float64_out(pol.spec, d, x64)


@forwarding_keywords(gemm, passed=("builtin", "model", "prune", "options", "target"))
def check(policy, a, b, c=None, *, waves=(1, 1), model=None, prune=False, options=None, backend=None,
          target=None, **gemm_kwargs):
    """Run ``policy`` (as `run`) and compare D bit for bit with ``jwmma.gemm(a, b, c,
    builtin=policy.builtin, model=model, **gemm_kwargs)``, the independent oracle.

    Args:
        policy, a, b, c, waves, model, prune, options, backend, target: as `run` (the
            reference gemm runs on the same target).
        gemm_kwargs: more keywords of the reference `jwmma.gemm` call (e.g. path=).
    Returns:
        D (M, N) when all agree and store_c writes every element of D exactly once; raises
        AssertionError with a readable diff otherwise (differing tiles, rows and columns,
        lanes, max ulp difference, first mismatches).
    """
    opts = resolve_options(options, backend)
    empty = _empty(policy, a, b, c, prune, target)
    if empty is not None:
        return empty
    pol, geo, d, writes, offs = _execute(policy, a, b, c, waves, model, prune, opts, target)
    ref = gemm(a, b, c, builtin=pol.spec.name, model=model, prune=prune, options=opts, target=pol.spec.target,
               **gemm_kwargs)
    ref_p = np.zeros((geo.mp, geo.np_), np.asarray(ref).dtype)
    ref_p[: geo.m, : geo.n] = np.asarray(ref)
    d_np = np.asarray(d).copy()
    d_np[geo.m:, :] = ref_p[geo.m:, :]    # padding rows/cols: only coverage is checked there
    d_np[:, geo.n:] = ref_p[:, geo.n:]
    msg = compare(d_np, ref_p, policy=pol, geometry=geo, writes=writes, offsets=offs)
    if msg is not None:
        raise AssertionError(msg)
    return d[: geo.m, : geo.n]

