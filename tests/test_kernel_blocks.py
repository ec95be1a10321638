"""jwmma.kernel on the multi-block MFMA (docs/spec/BUILTINS_DENSE.md 10) and the f64 MFMA (11).

A multi-block row's wave tile is its blocks side by side along N (block b: wave-tile columns
b*N..b*N+N-1, every block the same M rows), the order in which `jwmma.gemm`'s register path
packs consecutive output tiles into one call. The policies are written here per lane, by hand
from the calculator's register-to-matrix formulas (the default cases, as a kernel author writes
them), or as tables of the dumps' own entries (``tests/data/*_calculator.json``: every row and
chip, `slow`); the oracle is `jwmma.gemm`, which never sees the loaders. Deliberately wrong
policies must fail with the diff.
"""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jwmma
from jwmma import kernel
from tests import calculator_dumps


# ------------------------------------------------------------- hand-written policies (calculator formulas)
class Mfma16x16x1F32:
    """``mfma_f32_16x16x1f32`` (4 blocks of 16x16x1): wave tile 16 x 64. Calculator: A i = lane % 16,
    block lane // 16 (every block reads the wave's 16 rows); B j = lane % 16, block lane // 16, so
    the lane's wave-tile column is 16*block + j = lane; D i = 4*(lane // 16) + GPR % 4, j = lane % 16,
    block GPR // 4."""

    builtin = "mfma_f32_16x16x1f32"
    target = "gfx90a"  # MI250X
    thread_tile_m, thread_tile_n, k_step = 16, 64, 1

    def load_a(sA, warp_m, lane, tk_comp):
        return sA[(warp_m * 16 + lane % 16) * tk_comp + jnp.arange(1)]

    def load_b(sB, warp_n, lane, cta_n):
        return sB[jnp.arange(1) * cta_n + warp_n * 64 + lane]

    index = kernel.const_index(0)

    def store_c(d, sub_m, sub_n, N, lane):
        t = jnp.arange(16)
        return (sub_m + 4 * (lane // 16) + t % 4) * N + sub_n + 16 * (t // 4) + lane % 16, d


class Mfma4x4x4Bf16:
    """``mfma_f32_4x4x4bf16_1k`` (16 blocks of 4x4x4): wave tile 4 x 64. A i = lane % 4, k = element
    (2*GPR + half); B j = lane % 4, block lane // 4, k = element: column 4*block + j = lane; D i = GPR,
    j = lane % 4, block lane // 4: column lane. Memory holds bf16 bits as int16 (the register type)."""

    builtin = "mfma_f32_4x4x4bf16_1k"
    target = "gfx90a"

    def load_a(sA, warp_m, lane, tk_comp):
        return sA[(warp_m * 4 + lane % 4) * tk_comp + jnp.arange(4)]

    def load_b(sB, warp_n, lane, cta_n):
        return sB[jnp.arange(4) * cta_n + warp_n * 64 + lane]

    index = kernel.const_index(0)

    def store_c(d, sub_m, sub_n, N, lane):
        return (sub_m + jnp.arange(4)) * N + sub_n + lane, d


class Mfma4x4x4F64:
    """``mfma_f64_4x4x4f64`` (4 blocks of 4x4x4, one double a lane): wave tile 4 x 16. A i = lane % 4,
    k = lane // 16 (block (lane // 4) % 4 ignored: the blocks share the rows); B j = lane % 4,
    k = lane // 16, block (lane // 4) % 4: column lane % 16; D i = lane // 16, column lane % 16."""

    builtin = "mfma_f64_4x4x4f64"
    target = "gfx90a"

    def load_a(sA, warp_m, lane, tk_comp):   # memory and registers: float64
        return sA[(warp_m * 4 + lane % 4) * tk_comp + lane // 16 + jnp.arange(1)]

    def load_b(sB, warp_n, lane, cta_n):
        return sB[(lane // 16 + jnp.arange(1)) * cta_n + warp_n * 16 + lane % 16]

    index = kernel.const_index(0)

    def store_c(d, sub_m, sub_n, N, lane):
        return (sub_m + lane // 16 + jnp.arange(1)) * N + sub_n + lane % 16, d


# deliberately wrong: the classic slips
class _BlockOfRegister(Mfma16x16x1F32):
    """D's block taken as GPR % 4 (and the row from GPR // 4): the 4 blocks' registers swapped."""

    def store_c(d, sub_m, sub_n, N, lane):
        t = jnp.arange(16)
        return (sub_m + 4 * (lane // 16) + t // 4) * N + sub_n + 16 * (t % 4) + lane % 16, d


class _KFromBlock(Mfma4x4x4F64):
    """B's k taken from the block bits ((lane // 4) % 4) instead of lane // 16."""

    def load_b(sB, warp_n, lane, cta_n):
        return sB[((lane // 4) % 4 + jnp.arange(1)) * cta_n + warp_n * 16 + lane % 16]


# ------------------------------------------------------------------------------------ helpers
def _bits(x):
    x = np.asarray(x)
    return x.view({8: np.int64, 4: np.int32}[x.dtype.itemsize])


def _same(d, ref):
    assert np.asarray(d).dtype == np.asarray(ref).dtype
    assert np.array_equal(_bits(d), _bits(ref))


def _f32_problem(rng, m, n, k):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = rng.standard_normal((m, n)).astype(np.float32)
    a[0, 0], c[1, 1] = np.float32(1e-39), np.float32(-0.0)   # a subnormal, a -0 accumulator
    return a, b, c


def _f64_problem(rng, m, n, k):
    a, b, c = rng.standard_normal((m, k)), rng.standard_normal((k, n)), rng.standard_normal((m, n))
    a[0, 0], a[1, :] = 5e-324, 1e-310          # subnormals: their bits must survive the kernel's memory
    c[2, 3], b[1, 2] = -0.0, 2.0 ** 1000
    return a, b, c


def _first_mismatch(msg):
    m = re.search(r"\(row (\d+), col (\d+)\) \[block \((\d+), (\d+)\) wave \((\d+), (\d+)\) lane (\d+) "
                  r"d\[(\d+)\]\]", msg)
    assert m, msg
    return [int(x) for x in m.groups()]


# ------------------------------------------------------------------------ the cases
# Default: the 4-block f32 row (its compiled steps serve the wrong policy too); the bf16 and f64
# rows cost 2-3 s each of compilation (the builtin's model and the reference gemm): `slow`.
def test_multiblock_f32_policy_matches_gemm(rng):
    """4 blocks a call on gfx90a: 2x1 blocks of 1x2 waves (M 20 -> 32, N 70 -> 128), 3 K steps."""
    a, b, c = _f32_problem(rng, 20, 70, 3)
    d = kernel.check(Mfma16x16x1F32, a, b, c, waves=(1, 2))
    _same(d, jwmma.gemm(a, b, c, builtin="mfma_f32_16x16x1f32", target="gfx90a"))
    assert d.shape == (20, 70)
    # the wrong block of a register: the diff names it (same compiled builtin steps)
    with pytest.raises(AssertionError) as info:
        kernel.check(_BlockOfRegister, a, b, c, waves=(1, 2))
    msg = str(info.value)
    assert "wave tile 16x64 (4 builtin blocks of 16x16), 3 K step(s) of 1" in msg
    assert "every wave tile differs: suspect the per-lane layout" in msg
    r, col, bm, bn, wm, wn, lane, t = _first_mismatch(msg)
    # the store that wrote it: row 4*(lane//16) + t//4 and column 16*(t%4) + lane%16 of its wave tile
    assert (r % 16, col % 64) == (4 * (lane // 16) + t // 4, 16 * (t % 4) + lane % 16)
    assert (bm, bn * 2 + wn) == (r // 16, col // 64)


@pytest.mark.slow
def test_multiblock_bf16_policy_matches_gemm(rng):
    """16 blocks a call (4x4x4bf16_1k, gfx90a's flushing cdna2 model): wave tile 4x64, 2 K steps."""
    a = rng.standard_normal((6, 7)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((7, 70)).astype(ml_dtypes.bfloat16)
    c = rng.standard_normal((6, 70)).astype(np.float32)
    a[0, 1] = ml_dtypes.bfloat16(1e-39)          # a bf16 subnormal (cdna2 flushes it)
    d = kernel.check(Mfma4x4x4Bf16, a, b, c, waves=(2, 1))
    _same(d, jwmma.gemm(a, b, c, builtin="mfma_f32_4x4x4bf16_1k", target="gfx90a"))


@pytest.mark.slow
def test_f64_policy_matches_gemm(rng):
    """The 4-block f64 MFMA: float64 memory and registers; D as jwmma.gemm gives it (numpy float64 with
    jax_enable_x64 off), subnormals, -0 and huge values bit for bit."""
    a, b, c = _f64_problem(rng, 10, 40, 9)
    d = kernel.check(Mfma4x4x4F64, a, b, c, waves=(2, 1))
    ref = jwmma.gemm(a, b, c, builtin="mfma_f64_4x4x4f64", target="gfx90a")
    assert type(d) is type(ref) and d.shape == (10, 40)
    _same(d, ref)
    with pytest.raises(AssertionError) as info:
        kernel.check(_KFromBlock, a, b, c, waves=(2, 1))
    msg = str(info.value)
    assert msg.startswith("_KFromBlock (mfma_f64_4x4x4f64): kernel D differs from jwmma.gemm")
    assert "wave tile 4x16 (4 builtin blocks of 4x4), 3 K step(s) of 4" in msg
    r, col, *_, lane, t = _first_mismatch(msg)
    assert t == 0 and (r % 4, col % 16) == (lane // 16, lane % 16)
    bad = np.asarray(kernel.run(_KFromBlock, a, b, c, waves=(2, 1)))
    assert int(np.count_nonzero(_bits(bad) != _bits(ref))) == int(re.search(r"(\d+) of", msg).group(1))


def test_tile_sizes_are_the_wave_tile(rng):
    class OneBlock(Mfma16x16x1F32):
        thread_tile_n = 16

    with pytest.raises(ValueError, match=r"thread_tile_n = 16, .*4 blocks side by side, 16x64.*thread_tile_n = 64"):
        kernel.run(OneBlock, np.zeros((16, 1), np.float32), np.zeros((1, 64), np.float32))
    pol = kernel.as_policy(Mfma4x4x4F64)
    assert (pol.blocks, pol.thread_tile_m, pol.thread_tile_n, pol.k_step) == (4, 4, 16, 4)
    assert pol.registers("c") == (1, (np.dtype(np.float64),))


class _Block0Only(Mfma16x16x1F32):
    """Only block 0's A lanes (0-15) load A; the others hold NaN."""

    def load_a(sA, warp_m, lane, tk_comp):
        row = sA[(warp_m * 16 + lane % 16) * tk_comp + jnp.arange(1)]
        return jnp.where(lane < 16, row, jnp.float32(jnp.nan))


class _Broadcast(_Block0Only):
    """Block 0's A broadcast to the 4 blocks by the kernel's own mma (cbsz = 2, abid = 0)."""

    def mma(d, a, b, idx, model):
        return jwmma.mfma_f32_16x16x1f32(a, b, d, 2, 0, 0, model=model, target="gfx90a")


@pytest.mark.slow
def test_own_mma_may_broadcast_block_0s_a(rng):
    """The blocks of a wave tile share A's rows, so cbsz/abid may broadcast them; the default mma
    (cbsz = abid = 0) reads every block's own A lanes."""
    a, b, c = _f32_problem(rng, 20, 70, 3)
    kernel.check(_Broadcast, a, b, c, waves=(1, 2))
    with pytest.raises(AssertionError, match="involve NaN"):
        kernel.check(_Block0Only, a, b, c, waves=(1, 2))


# ------------------------------------------------------------------------ every row from the dumps
def _table_policy(name, target):
    """A policy of ``name`` on ``target`` from the dump's (lane, element, block, row, col) entries:
    lookup tables indexed by the lane, blocks side by side along N."""
    v = next(v for v in calculator_dumps.instructions(target).values() if v["builtin"] == name)
    spec = jwmma.BUILTINS[name]
    ops = v["operands"]

    def table(key):
        e = np.array(ops[key]["entries"])
        if e.shape[1] == 4:             # a single-block row (16x16x4f64): (lane, element, row, col)
            e = np.insert(e, 2, 0, axis=1)
        n = e[:, 1].max() + 1
        t = np.zeros((64, n, 3), np.int32)
        t[e[:, 0], e[:, 1]] = e[:, 2:]
        return jnp.asarray(t)           # (lane, element) -> (block, row, col)

    ta, tb, tc = table("A"), table("B"), table("C")
    m, n, blocks = spec.m, spec.n, spec.blocks
    bytes_a = spec.a.elem_bits == 8     # i8: one int of 4 bytes

    def word(x):
        return kernel.pack_bytes(x[0], x[1], x[2], x[3])[None] if bytes_a else x

    class Table:
        builtin = name

        def load_a(sA, warp_m, lane, tk_comp):
            blk, i, k = ta[lane, :, 0], ta[lane, :, 1], ta[lane, :, 2]
            return word(sA[(warp_m * m + i) * tk_comp + k])

        def load_b(sB, warp_n, lane, cta_n):
            blk, k, j = tb[lane, :, 0], tb[lane, :, 1], tb[lane, :, 2]
            return word(sB[k * cta_n + warp_n * blocks * n + blk * n + j])

        index = kernel.const_index(0)

        def store_c(d, sub_m, sub_n, N, lane):
            blk, i, j = tc[lane, :, 0], tc[lane, :, 1], tc[lane, :, 2]
            return (sub_m + i) * N + sub_n + blk * n + j, d

    Table.target = target
    Table.__name__ = f"Table_{name}"
    return Table


def _rows():
    out = []
    for name, spec in jwmma.BUILTINS.items():
        if name.startswith("mfma_") and (spec.blocks > 1 or spec.c.elem_bits == 64):
            out += [(name, t) for t in spec.targets]
    return out


def _operands(rng, spec, m, n, k):
    if spec.c.elem_bits == 64:
        return _f64_problem(rng, m, n, k)
    if spec.integer:
        return (rng.integers(-128, 128, (m, k)).astype(np.int8), rng.integers(-128, 128, (k, n)).astype(np.int8),
                rng.integers(-2**31, 2**31, (m, n)).astype(np.int32))
    dt = {"f16": np.float16, "f32": np.float32}.get(spec.a_type, ml_dtypes.bfloat16)
    return (rng.standard_normal((m, k)).astype(dt), rng.standard_normal((k, n)).astype(dt),
            rng.standard_normal((m, n)).astype(np.float32))


@pytest.mark.slow
def test_every_row_is_in_the_grid():
    rows = {n for n, _ in _rows()}
    assert len(rows) == 17 and {"mfma_f64_16x16x4f64", "mfma_f64_4x4x4f64", "mfma_f32_32x32x1f32"} <= rows


@pytest.mark.slow
@pytest.mark.parametrize("name,target", _rows())
def test_table_policy_matches_gemm(rng, name, target):
    spec = jwmma.BUILTINS[name]
    tile_n = spec.blocks * spec.n
    a, b, c = _operands(rng, spec, spec.m + 3, 2 * tile_n - 5, 2 * spec.k + 1)
    pol = _table_policy(name, target)
    d = kernel.check(pol, a, b, c, waves=(1, 2))
    _same(d, jwmma.gemm(a, b, c, builtin=name, target=target, path="registers"))


@pytest.mark.slow
def test_f64_with_x64_on_and_a_custom_mma(rng):
    """With jax_enable_x64 on D is a float64 JAX array; a policy's own mma gets and returns float64
    registers and passes the builtin its uint32 word pairs (low word first)."""
    name = "mfma_f64_16x16x4f64"

    def mma(d, a, b, idx, model):
        words = lambda x: jax.lax.bitcast_convert_type(x, jnp.uint32).reshape(64, -1)  # noqa: E731
        out = getattr(jwmma, name)(words(a), words(b), words(d), 0, 0, 0, model=model)
        return jax.lax.bitcast_convert_type(out.reshape(64, -1, 2), jnp.float64)

    pol = _table_policy(name, "gfx942")
    pol.mma = staticmethod(mma)
    a, b, c = _f64_problem(rng, 20, 36, 9)
    with jax.enable_x64(True):   # a context: the global setting is never changed
        d = kernel.check(pol, a, b, c, waves=(1, 2))
        assert isinstance(d, jax.Array) and d.dtype == jnp.float64
        _same(d, jwmma.gemm(a, b, c, builtin=name))
