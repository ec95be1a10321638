"""Lane-parallel kernel emulation: write one wave's code, run it over a grid of blocks and waves.

A kernel author ports the compute policy of a HIP kernel (the ``ComputePolicy`` of the seed
pages: ``load_a``, ``load_b``, ``mma``, ``store_c``) to JAX *per lane*, runs it here on a
whole tiled GEMM and compares the result with `jwmma.gemm`, before having hardware. Wrong
loaders, wrong index packing or a wrong store show up as a readable diff.

The kernel that `run` emulates (one builtin per K step, as the seed pages' generic kernel)::

    for every block (bm, bn) of the grid, every wave (wm, wn) of the block:      # vmap
        sub_m = bm*block_m + wm*tile_m ;  sub_n = bn*block_n + wn*tile_n
        d = C[store_c offsets]                                # zeros when C is None
        for every K step s:                                   # lax.scan
            sA = block's compressed A tile, rows bm*block_m.., compressed cols s*k_step/2..
            sB = block's B tile, rows s*k_step.., cols bn*block_n..
            sM = block's sparsity metadata tile (hipSPARSELt bytes, see below)
            a   = [load_a(sA, wm, lane, k_step/2)   for lane]   # vmap over lanes
            b   = [load_b(sB, wn, lane, block_n)    for lane]
            idx = [index(sM, wm, lane, k_step/8)    for lane]
            d   = mma(d, a, b, idx)                               # the wave's builtin call
        D[offsets] = values  where  offsets, values = store_c(d[lane], sub_m, sub_n, N, lane)

with ``block_m = waves[0]*tile_m``, ``block_n = waves[1]*tile_n`` and one ``tile_m x tile_n``
builtin tile per wave. The tiles given to the loaders are flat, row-major 1-D arrays, like the
HIP pointers into LDS: ``sA`` is ``block_m x k_step/2`` (row stride ``tk_comp = k_step/2``),
``sB`` is ``k_step x block_n`` (row stride ``cta_n = block_n``), ``sM`` is
``block_m x k_step/8`` bytes. Element storage: 8-bit data are ``uint8`` bytes (fp8/bf8 bit
patterns, two's-complement integers), 4-bit data one ``uint8`` per element (the nibble; pack
the nibbles yourself), 16-bit data the register dtype of the builtin (float16, bfloat16, or
int16 for RDNA4 bf16). Metadata byte ``b`` of a row holds, in bits ``[2s+1:2s]``, the 2:4
position (0..3) of compressed element ``4b+s`` (hipSPARSELt order, BUILTINS.md 5).

Writing a policy
----------------
A policy is any object (a class with plain functions, as below, or a `Policy`) with:

* ``builtin``: the builtin's name; tile sizes follow from it (``thread_tile_m/n``, ``k_step``
  = dense K per call; if the policy defines them they must agree);
* ``load_a(sA, warp_m, lane, tk_comp)`` -> the lane's A register vector;
  ``load_b(sB, warp_n, lane, cta_n)`` -> the lane's B vector;
  ``index(sM, warp_m, lane, tm)`` -> the lane's int32 index word (`const_index` for a fixed one);
  ``store_c(d, sub_m, sub_n, N, lane)`` -> ``(offsets, values)``: flat row-major offsets into
  D (leading dimension ``N``) of the lane's accumulator elements, and the values (``d``);
* optionally ``mma(d, a, b, idx, model)`` (whole-wave registers; default: the builtin, HIP
  argument order, ``cbsz=abid=0``, signed integers, no clamp).

``lane``, ``warp_m`` and ``warp_n`` are 0-d int32 JAX arrays: write the code for one lane
with ``jnp`` indexing, exactly as the HIP code is written, and `run` vmaps it over lanes and
waves (so no Python ``if`` on them: use ``jnp.where``). Use `pack_bytes` to build int32 words
from bytes and `i32` for 32-bit constants such as ``0x88888888``. Out-of-range reads do not
fail (JAX clamps them; negative indices wrap): they show up in the diff. Example, for
``smfmac_f32_16x16x64_f16`` (layouts from BUILTINS.md 4.2)::

    import jax.numpy as jnp
    from jwmma import kernel

    class SmfmacF16Policy:                        # one 16x16 tile per wave, K step 64
        builtin = "smfmac_f32_16x16x64_f16"

        def load_a(sA, warp_m, lane, tk_comp):    # lane group g: compressed cols 8g..8g+7
            g, r = lane // 16, lane % 16
            return sA[(warp_m * 16 + r) * tk_comp + 8 * g + jnp.arange(8)]

        def load_b(sB, warp_n, lane, cta_n):      # two K halves: k = 32*(f//8) + 8g + f%8
            g, r = lane // 16, lane % 16
            f = jnp.arange(16)
            return sB[(32 * (f // 8) + 8 * g + f % 8) * cta_n + warp_n * 16 + r]

        def index(sM, warp_m, lane, tm):          # 8 elements x 2 bits: metadata bytes 2g, 2g+1
            g, r = lane // 16, lane % 16
            row = (warp_m * 16 + r) * tm
            return kernel.pack_bytes(sM[row + 2 * g], sM[row + 2 * g + 1], 0, 0)

        def store_c(d, sub_m, sub_n, N, lane):    # element t -> row 4g + t, column r
            g, r = lane // 16, lane % 16
            return (sub_m + 4 * g + jnp.arange(4)) * N + sub_n + r, d

    d = kernel.check(SmfmacF16Policy, a, b, waves=(2, 2))   # AssertionError with a diff if wrong

Entry points: `run` (D of the emulated kernel), `check` (run and compare bit for bit with
`jwmma.gemm`; raises AssertionError with the diff), `compare` (the diff text or None),
`metadata` (positions -> metadata bytes). Worked examples: ``examples/cdna4_fp8_policy.py``
and ``examples/rdna4_f16_policy.py``.

Cost: the loaders run for all waves and K steps at once (memory ~ waves x steps x lanes x
registers), so this is meant for small multi-tile problems, not for large GEMMs (use
`jwmma.gemm`). The builtin calls are compiled separately from the loaders and cached by
(builtin, mma, model, shapes): editing a loader recompiles only the cheap part.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from . import builtins as _builtins
from .gemm import _element_codes, _pad_to, _prepare_a
from .gemm import gemm as _gemm_fn
from .isa import BuiltinSpec, lookup
from .validation import as_array

__all__ = ["Policy", "run", "check", "compare", "pack_bytes", "i32", "const_index", "metadata"]

_ACC_DTYPES = {"f32": np.dtype(np.float32), "i32": np.dtype(np.int32), "f16": np.dtype(np.float16),
               "bf16": np.dtype(ml_dtypes.bfloat16)}


# --------------------------------------------------------------------------------- helpers
def i32(x) -> np.int32:
    """A 32-bit constant as int32 with the same bits: ``i32(0x88888888)`` is
    ``static_cast<int>(0x88888888u)``."""
    return np.array(int(x) & 0xFFFFFFFF, np.uint32).view(np.int32)[()]


def pack_bytes(b0, b1, b2, b3):
    """Four bytes -> one int32 word, little-endian (b0 in bits 7:0), as
    ``uint32_t(b0) | uint32_t(b1) << 8 | ...`` in HIP. Works elementwise on arrays."""
    w = [jnp.asarray(b).astype(jnp.uint32) & 0xFF for b in (b0, b1, b2, b3)]
    word = w[0] | (w[1] << 8) | (w[2] << 16) | (w[3] << 24)
    return lax.bitcast_convert_type(word, jnp.int32)


def const_index(value) -> Callable:
    """An ``index`` function returning the same word for every lane (e.g. 0x88888888)."""
    word = i32(value)

    def index(sM, warp_m, lane, tm):
        return jnp.full(jnp.shape(lane), word, jnp.int32)

    index.__name__ = f"const_index_{int(value) & 0xFFFFFFFF:#010x}"
    return index


def metadata(pos) -> jnp.ndarray:
    """2:4 positions (..., Kc) (ints 0..3) -> hipSPARSELt metadata bytes (..., Kc/4) uint8:
    byte b, bits [2s+1:2s] = position of compressed element 4b+s."""
    pos = jnp.asarray(pos)
    if pos.shape[-1] % 4:
        raise ValueError(f"positions need a last axis (Kc) divisible by 4, got shape {tuple(pos.shape)}")
    p = pos.astype(jnp.uint32).reshape(*pos.shape[:-1], pos.shape[-1] // 4, 4)
    byte = p[..., 0] | (p[..., 1] << 2) | (p[..., 2] << 4) | (p[..., 3] << 6)
    return byte.astype(jnp.uint8)


# ---------------------------------------------------------------------------------- policy
@dataclasses.dataclass(frozen=True)
class Policy:
    """One wave's code for one builtin (see the module docstring). Any object with these
    attributes (e.g. a class with plain functions) is accepted wherever a Policy is."""

    builtin: str
    load_a: Callable
    load_b: Callable
    index: Callable
    store_c: Callable
    mma: Callable | None = None
    name: str = ""

    @property
    def spec(self) -> BuiltinSpec:
        return lookup(self.builtin)

    @property
    def thread_tile_m(self) -> int:
        return self.spec.m

    @property
    def thread_tile_n(self) -> int:
        return self.spec.n

    @property
    def k_step(self) -> int:
        """Dense K consumed by one mma."""
        return self.spec.k

    @property
    def lanes(self) -> int:
        return self.spec.lanes

    def call_mma(self, d, a, b, idx, model=None):
        if self.mma is not None:
            return self.mma(d, a, b, idx, model)
        spec = self.spec
        fn = _builtins.FUNCTIONS[spec.name]
        if spec.arch == "gfx950":
            return fn(a, b, d, idx, 0, 0, model=model)
        if spec.signed_choice:
            return fn(True, a, True, b, d, idx, False, model=model)
        return fn(a, b, d, idx, model=model)


def as_policy(obj) -> Policy:
    """A `Policy` from any object with the policy attributes; checks declared tile sizes."""
    if isinstance(obj, Policy):
        pol = obj
    else:
        missing = [k for k in ("builtin", "load_a", "load_b", "index", "store_c") if not hasattr(obj, k)]
        if missing:
            raise TypeError(
                f"{getattr(obj, '__name__', type(obj).__name__)} is not a kernel policy: missing "
                f"{', '.join(missing)} (needs builtin, load_a, load_b, index, store_c; mma optional)"
            )
        pol = Policy(obj.builtin, obj.load_a, obj.load_b, obj.index, obj.store_c,
                     getattr(obj, "mma", None), getattr(obj, "__name__", type(obj).__name__))
    spec = pol.spec
    for attr, want in (("thread_tile_m", spec.m), ("thread_tile_n", spec.n), ("k_step", spec.k)):
        got = getattr(obj, attr, want)
        if got != want:
            raise ValueError(f"{pol.name or 'policy'}: {attr} = {got}, but {spec.name} is "
                             f"{spec.m}x{spec.n}x{spec.k} (one builtin tile per wave, dense K step {spec.k})")
    return pol


def _name(pol: Policy) -> str:
    return pol.name or "policy"


# ------------------------------------------------------------------------ operand images
@dataclasses.dataclass(frozen=True)
class _Geometry:
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
        bm, bn = self.blocks
        return (f"D {self.m}x{self.n}, K={self.k} (padded {self.mp}x{self.np_}, K={self.kp}); grid "
                f"{bm}x{bn} blocks of {self.waves[0]}x{self.waves[1]} waves x {lanes} lanes, wave tile "
                f"{self.tile_m}x{self.tile_n}, {self.steps} K step(s) of {self.k_step}")


def _memory(codes, op, bits):
    """Element codes (int32) -> the storage a kernel reads (module docstring)."""
    if bits == 16:
        return lax.bitcast_convert_type(codes.astype(jnp.uint16), op.dtype)
    return (codes & ((1 << bits) - 1)).astype(jnp.uint8)


def _prepare(pol: Policy, a, b, c, waves, prune):
    spec = pol.spec
    if (not isinstance(waves, (tuple, list)) or len(waves) != 2
            or not all(isinstance(w, (int, np.integer)) and w >= 1 for w in waves)):
        raise ValueError(f"waves must be a pair (waves_m, waves_n) of positive ints, got {waves!r}")
    waves = (int(waves[0]), int(waves[1]))
    values, pos, k = _prepare_a(spec, a, prune)
    if values.ndim != 2:
        raise ValueError(f"kernel.run takes a 2-D A (M, K) or (values, positions) of (M, K/2); got "
                         f"shape {tuple(values.shape)} (batch dims are not supported here)")
    a_codes = _element_codes(spec.a_type, values, "a", spec.name)
    b = as_array(b, "b")
    if b.ndim != 2 or b.shape[0] != k:
        raise ValueError(f"b must be (K, N) with K={k} (from a), got shape {tuple(b.shape)}")
    b_codes = _element_codes(spec.b_type, b, "b", spec.name)
    m, n = values.shape[0], b.shape[1]
    acc = _ACC_DTYPES[spec.c_type]
    if c is None:
        c = jnp.zeros((m, n), acc)
    else:
        c = as_array(c, "c")
        if np.dtype(c.dtype) != acc or tuple(c.shape) != (m, n):
            raise ValueError(f"c must be ({m}, {n}) {acc.name} for {spec.name}, got "
                             f"{tuple(c.shape)} {c.dtype}")
    geo_block = (waves[0] * spec.m, waves[1] * spec.n)
    mp = -(-m // geo_block[0]) * geo_block[0]
    np_ = -(-n // geo_block[1]) * geo_block[1]
    kp = -(-k // spec.k) * spec.k
    kcp = kp // 2
    # padding as jwmma.gemm pads: zero values, A padding groups at positions (2, 3)
    a_codes = _pad_to(jnp.asarray(a_codes), {0: mp, 1: kcp})
    pad_pos = jnp.tile(jnp.asarray([2, 3], jnp.int32), kcp // 2)
    pos = jnp.where(jnp.arange(kcp) < pos.shape[-1], _pad_to(jnp.asarray(pos), {0: mp, 1: kcp}), pad_pos)
    b_codes = _pad_to(jnp.asarray(b_codes), {0: kp, 1: np_})
    c = _pad_to(jnp.asarray(c), {0: mp, 1: np_})
    geo = _Geometry(m, n, k, mp, np_, kp, waves, spec.m, spec.n, spec.k)
    images = (_memory(a_codes, spec.a, spec.a.elem_bits), metadata(pos),
              _memory(b_codes, spec.b, spec.b.elem_bits), c)
    return geo, images


# ---------------------------------------------------------------------------------- kernel
def _check_out(pol, what, x, shape, dtypes):
    x = jnp.asarray(x)
    if tuple(x.shape) != tuple(shape) or np.dtype(x.dtype) not in [np.dtype(d) for d in dtypes]:
        want = " or ".join(np.dtype(d).name for d in dtypes)
        raise TypeError(
            f"{_name(pol)}.{what} gives {tuple(x.shape)[1:]} {x.dtype} per lane; {pol.spec.name} "
            f"wants {tuple(shape)[1:]} {want} per lane"
        )
    return x


def _grid(geo: _Geometry):
    """(bm, bn, wm, wn) of every wave, flattened in that order: 4 int32 arrays (waves,)."""
    return [jnp.asarray(g) for g in np.indices((*geo.blocks, *geo.waves)).reshape(4, -1).astype(np.int32)]


def _stores(pol, geo, d, sub_m, sub_n, acc_dtype):
    """store_c over the lanes of one wave -> offsets (lanes, n_c) int32, values (lanes, n_c)."""
    spec = pol.spec
    lanes = jnp.arange(spec.lanes, dtype=jnp.int32)
    offs, vals = jax.vmap(lambda dl, lane: pol.store_c(dl, sub_m, sub_n, geo.np_, lane))(d, lanes)
    offs = jnp.asarray(offs)
    if offs.shape != (spec.lanes, spec.c.n) or not jnp.issubdtype(offs.dtype, jnp.integer):
        raise TypeError(f"{_name(pol)}.store_c must return ({spec.c.n},) integer offsets per lane, got "
                        f"{offs.shape[1:]} {offs.dtype}")
    vals = _check_out(pol, "store_c values", vals, (spec.lanes, spec.c.n), [acc_dtype])
    return offs.astype(jnp.int32), vals


def _subtile(geo, bm, bn, wm, wn):
    return bm * geo.block_m + wm * geo.tile_m, bn * geo.block_n + wn * geo.tile_n


# The kernel runs in three jitted stages so that the expensive one (the builtin calls, whose
# arithmetic models take seconds to compile) is keyed on (builtin, mma, model, shapes) only:
# editing a loader or store_c recompiles only the cheap stages.
@functools.partial(jax.jit, static_argnames=("pol", "geo"))
def _load(a_img, m_img, b_img, c, *, pol: Policy, geo: _Geometry):
    """Stage 1: every wave's registers for every K step, and its initial accumulator."""
    spec = pol.spec
    bm_n, bn_n = geo.blocks
    s_n = geo.steps
    kcs, tm = geo.k_step // 2, geo.k_step // 8
    lanes = jnp.arange(spec.lanes, dtype=jnp.int32)
    # block tiles per K step, flattened row-major as in LDS
    a_t = a_img.reshape(bm_n, geo.block_m, s_n, kcs).transpose(0, 2, 1, 3).reshape(bm_n, s_n, -1)
    m_t = m_img.reshape(bm_n, geo.block_m, s_n, tm).transpose(0, 2, 1, 3).reshape(bm_n, s_n, -1)
    b_t = b_img.reshape(s_n, geo.k_step, bn_n, geo.block_n).transpose(2, 0, 1, 3).reshape(bn_n, s_n, -1)
    c_flat = c.reshape(-1)

    def wave(bm, bn, wm, wn):
        sub_m, sub_n = _subtile(geo, bm, bn, wm, wn)
        offs0, _ = _stores(pol, geo, jnp.zeros((spec.lanes, spec.c.n), c.dtype), sub_m, sub_n, c.dtype)
        d0 = jnp.take(c_flat, offs0, mode="fill", fill_value=0)

        def step(sA, sM, sB):
            a = jax.vmap(lambda lane: pol.load_a(sA, wm, lane, kcs))(lanes)
            b = jax.vmap(lambda lane: pol.load_b(sB, wn, lane, geo.block_n))(lanes)
            idx = jax.vmap(lambda lane: jnp.asarray(pol.index(sM, wm, lane, tm)))(lanes)
            a = _check_out(pol, "load_a", a, (spec.lanes, spec.a.n), (spec.a.dtype, *spec.a.also))
            b = _check_out(pol, "load_b", b, (spec.lanes, spec.b.n), (spec.b.dtype, *spec.b.also))
            idx = _check_out(pol, "index", idx, (spec.lanes,), (np.int32, np.uint32))
            return a, b, idx.astype(jnp.int32)

        return jax.vmap(step)(a_t[bm], m_t[bm], b_t[bn]), d0     # registers: (steps, lanes, n)

    (a, b, idx), d0 = jax.vmap(wave)(*_grid(geo))                  # (waves, steps, lanes, n)
    return jnp.swapaxes(a, 0, 1), jnp.swapaxes(b, 0, 1), jnp.swapaxes(idx, 0, 1), d0


@functools.partial(jax.jit, static_argnames=("mma", "model"))
def _mma_steps(a, b, idx, d0, *, mma: Policy, model):
    """Stage 2: every wave issues its mma once per K step, in order (lax.scan over steps)."""
    def step(d, x):
        a_s, b_s, i_s = x
        return jax.vmap(lambda d_w, a_w, b_w, i_w: mma.call_mma(d_w, a_w, b_w, i_w, model))(d, a_s, b_s, i_s), None

    return lax.scan(step, d0, (a, b, idx))[0]


@functools.partial(jax.jit, static_argnames=("pol", "geo"))
def _store(d, *, pol: Policy, geo: _Geometry):
    """Stage 3: store_c of every wave, scattered into D; also how often each element was written."""
    def wave(d_w, bm, bn, wm, wn):
        return _stores(pol, geo, d_w, *_subtile(geo, bm, bn, wm, wn), d.dtype)

    offs, vals = jax.vmap(wave)(d, *_grid(geo))                    # (waves, lanes, n_c)
    size = geo.mp * geo.np_
    flat_o, flat_v = offs.reshape(-1), vals.reshape(-1)
    out = jnp.zeros(size, d.dtype).at[flat_o].set(flat_v, mode="drop")
    writes = jnp.zeros(size, jnp.int32).at[flat_o].add(1, mode="drop")
    return out.reshape(geo.mp, geo.np_), writes.reshape(geo.mp, geo.np_), offs


def _execute(policy, a, b, c, waves, model, prune):
    pol = as_policy(policy)
    geo, (a_img, m_img, b_img, c_img) = _prepare(pol, a, b, c, waves, prune)
    a_r, b_r, idx, d0 = _load(a_img, m_img, b_img, c_img, pol=pol, geo=geo)
    mma_key = Policy(pol.builtin, None, None, None, None, pol.mma)   # loaders not in the key
    d = _mma_steps(a_r, b_r, idx, d0, mma=mma_key, model=model)
    d, writes, offs = _store(d, pol=pol, geo=geo)
    return pol, geo, d, writes, offs


def run(policy, a, b, c=None, *, waves=(1, 1), model=None, prune=False):
    """Emulate the tiled kernel of ``policy`` (module docstring) and return D (M, N).

    a: dense 2:4-sparse (M, K) array of the builtin's A element type, or a ``(values,
    positions)`` pair of (M, K/2) arrays, as `jwmma.gemm` takes it; b: (K, N); c: (M, N) of
    the accumulator dtype or None. waves: (waves_m, waves_n) per block; the grid of blocks
    follows from the (zero-padded) shapes. model: the arithmetic model passed to ``mma``.
    """
    _, geo, d, _, _ = _execute(policy, a, b, c, waves, model, prune)
    return d[: geo.m, : geo.n]


# ------------------------------------------------------------------------------- comparing
def _ordered(bits, width):
    """Sign-magnitude float bit patterns -> integers ordered like the floats (ulp distance)."""
    bits = bits.astype(np.int64) & ((1 << width) - 1)
    sign = bits >> (width - 1)
    mag = bits & ((1 << (width - 1)) - 1)
    return np.where(sign == 1, -mag, mag)


def _ranges(vals) -> str:
    vals = sorted(set(int(v) for v in vals))
    out, i = [], 0
    while i < len(vals):
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1:
            j += 1
        out.append(f"{vals[i]}" if i == j else f"{vals[i]}-{vals[j]}")
        i = j + 1
    return ", ".join(out)


def _fmt(v, bits, width, is_float):
    if not is_float:
        return f"{int(v)}"
    return f"{float(v)!r} (0x{int(bits) & ((1 << width) - 1):0{width // 4}x})"


def compare(d, ref, *, policy=None, geometry=None, writes=None, offsets=None, max_items=8):
    """The diff of a kernel's D against a reference D as text, or None when they are
    bit-identical and (if ``writes`` is given) every element was written exactly once."""
    d, ref = np.asarray(d), np.asarray(ref)
    if d.shape != ref.shape:
        return f"shapes differ: kernel D {d.shape}, reference {ref.shape}"
    dt = d.dtype
    is_float = dt.kind == "f" or dt == np.dtype(ml_dtypes.bfloat16)
    width = dt.itemsize * 8
    if is_float:
        view = {4: np.int32, 2: np.int16}[dt.itemsize]
        db, rb = d.view(view).astype(np.int64), ref.view(view).astype(np.int64)
    else:
        db, rb = d.astype(np.int64), ref.astype(np.int64)
    bad = db != rb
    lines = []
    coverage = []
    geo: _Geometry | None = geometry
    lanes_n = policy.spec.lanes if policy is not None else None
    if writes is not None:
        w = np.asarray(writes)
        never, multi = np.argwhere(w == 0), np.argwhere(w > 1)
        if len(never):
            coverage.append(f"{len(never)} element(s) of D never written, first (row, col): "
                            + ", ".join(f"({r}, {c})" for r, c in never[:max_items]))
        if len(multi):
            coverage.append(f"{len(multi)} element(s) of D written more than once, first: "
                            + ", ".join(f"({r}, {c}) x{w[r, c]}" for r, c in multi[:max_items]))
    if offsets is not None and geo is not None:
        o = np.asarray(offsets)
        oob = (o < 0) | (o >= geo.mp * geo.np_)
        if oob.any():
            wv, ln, rg = np.argwhere(oob)[0]
            coverage.append(f"{int(oob.sum())} offset(s) outside D (0..{geo.mp * geo.np_ - 1}), "
                            f"first: wave {wv} lane {ln} element {rg} -> {o[wv, ln, rg]}")
    if not bad.any() and not coverage:
        return None

    head = "kernel D differs from the reference"
    if policy is not None:
        head = f"{_name(policy)} ({policy.spec.name}): kernel D differs from jwmma.gemm"
    n_bad = int(bad.sum())
    lines.append(f"{head}: {n_bad} of {d.size} element(s) differ bitwise")
    if geo is not None and lanes_n is not None:
        lines.append("  " + geo.describe(lanes_n))
    lines += ["  store_c: " + s for s in coverage]
    if n_bad:
        where = np.argwhere(bad)
        if is_float:
            nan = np.isnan(d.astype(np.float64)) | np.isnan(ref.astype(np.float64))
            both = bad & ~nan
            ulp = np.abs(_ordered(db, width) - _ordered(rb, width))
            absd = np.abs(d.astype(np.float64) - ref.astype(np.float64))
            if both.any():
                i = np.unravel_index(np.argmax(np.where(both, ulp, -1)), d.shape)
                j = np.unravel_index(np.argmax(np.where(both, absd, -1.0)), d.shape)
                lines.append(f"  max ulp difference {int(ulp[i])} at (row {i[0]}, col {i[1]}); "
                             f"max |difference| {absd[j]:.6g} at (row {j[0]}, col {j[1]})")
            if (bad & nan).any():
                lines.append(f"  {int((bad & nan).sum())} mismatch(es) involve NaN")
        else:
            diff = np.abs(db - rb)
            i = np.unravel_index(np.argmax(diff), d.shape)
            lines.append(f"  max |difference| {int(diff[i])} at (row {i[0]}, col {i[1]})")
        n_tiles = n_bad_tiles = None
        if geo is not None:
            tr, tc = where[:, 0] // geo.tile_m, where[:, 1] // geo.tile_n
            tiles, counts = np.unique(np.stack([tr, tc], 1), axis=0, return_counts=True)
            n_tiles = -(-geo.m // geo.tile_m) * -(-geo.n // geo.tile_n)
            n_bad_tiles = len(tiles)
            lines.append(f"  wave tiles with mismatches: {n_bad_tiles} of {n_tiles}")
            for (r, c), cnt in list(zip(tiles.tolist(), counts.tolist()))[:max_items]:
                blk = (r // geo.waves[0], c // geo.waves[1])
                wv = (r % geo.waves[0], c % geo.waves[1])
                lines.append(f"    block {blk} wave {wv}: rows {r * geo.tile_m}-{(r + 1) * geo.tile_m - 1}, "
                             f"cols {c * geo.tile_n}-{(c + 1) * geo.tile_n - 1}: {cnt}/{geo.tile_m * geo.tile_n} differ")
            if n_bad_tiles > max_items:
                lines.append(f"    ... and {n_bad_tiles - max_items} more tile(s)")
            lines.append(f"  rows within a tile that differ: {_ranges(where[:, 0] % geo.tile_m)}; "
                         f"cols within a tile: {_ranges(where[:, 1] % geo.tile_n)}")
        owner = None
        if offsets is not None and geo is not None:
            o = np.asarray(offsets)
            owner = np.full((geo.mp * geo.np_, 3), -1, np.int64)
            wv, ln, rg = np.indices(o.shape).reshape(3, -1)
            ok = (o.reshape(-1) >= 0) & (o.reshape(-1) < geo.mp * geo.np_)
            owner[o.reshape(-1)[ok]] = np.stack([wv, ln, rg], 1)[ok]
            owner = owner.reshape(geo.mp, geo.np_, 3)
            ow = owner[where[:, 0], where[:, 1]]
            ow = ow[ow[:, 0] >= 0]
            if len(ow):
                lines.append(f"  lanes that stored differing elements: {_ranges(ow[:, 1])} "
                             f"(accumulator elements d[{_ranges(ow[:, 2])}])")
        if coverage:
            lines.append("  hint: store_c does not cover D exactly once: fix the store (or the C load "
                         "it defines) first")
        elif n_tiles is not None and n_bad_tiles < n_tiles:
            lines.append("  hint: only some wave tiles differ: suspect the block/wave offsets (warp_m, "
                         "warp_n, sub_m, sub_n, row strides), or data-dependent index packing")
        elif n_tiles is not None:
            lines.append("  hint: every wave tile differs: suspect the per-lane layout of load_a, load_b "
                         "or index (or the model passed to mma)")
        lines.append("  first mismatches (kernel vs reference):")
        for r, c in where[:max_items].tolist():
            src = ""
            if owner is not None and owner[r, c, 0] >= 0:
                wid, ln, rg = owner[r, c].tolist()
                blk = [int(x) for x in np.unravel_index(wid, (*geo.blocks, *geo.waves))]
                src = f" [block ({blk[0]}, {blk[1]}) wave ({blk[2]}, {blk[3]}) lane {ln} d[{rg}]]"
            extra = ""
            if is_float and not (np.isnan(float(d[r, c])) or np.isnan(float(ref[r, c]))):
                extra = f", {int(abs(_ordered(db[r, c], width) - _ordered(rb[r, c], width)))} ulp"
            lines.append(f"    (row {r}, col {c}){src}: {_fmt(d[r, c], db[r, c], width, is_float)} vs "
                         f"{_fmt(ref[r, c], rb[r, c], width, is_float)}{extra}")
    return "\n".join(lines)


def check(policy, a, b, c=None, *, waves=(1, 1), model=None, prune=False, **gemm_kwargs):
    """Run ``policy`` (as `run`) and compare D bit for bit with ``jwmma.gemm(a, b, c,
    builtin=policy.builtin, model=model, **gemm_kwargs)``, the independent oracle.

    Also checks that store_c writes every element of D exactly once. Returns D (M, N) when all
    agree; raises AssertionError with a readable diff otherwise (differing tiles, rows and
    columns, lanes, max ulp difference, first mismatches)."""
    pol, geo, d, writes, offs = _execute(policy, a, b, c, waves, model, prune)
    ref = _gemm_fn(a, b, c, builtin=pol.spec.name, model=model, prune=prune, **gemm_kwargs)
    ref_p = np.zeros((geo.mp, geo.np_), np.asarray(ref).dtype)
    ref_p[: geo.m, : geo.n] = np.asarray(ref)
    d_np = np.asarray(d).copy()
    d_np[geo.m:, :] = ref_p[geo.m:, :]    # padding rows/cols: only coverage is checked there
    d_np[:, geo.n:] = ref_p[:, geo.n:]
    msg = compare(d_np, ref_p, policy=pol, geometry=geo, writes=writes, offsets=offs)
    if msg is not None:
        raise AssertionError(msg)
    return d[: geo.m, : geo.n]
