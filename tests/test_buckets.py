"""Shape buckets (`jwmma.tiled.buckets`, issue 35): eager GEMMs and unit contractions of many
shapes share one program per bucket, and give the bits of their own-shape programs
(``Options(shape_buckets=False)``), the -0 of an FMA chain that extra K steps of zeros would
turn into +0 included; and a GEMM of a new shape compiles no program of its own besides its
GEMM's. Programs are counted through JAX's compile events."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from jax import monitoring

import jwmma

OWN_SHAPE = jwmma.Options(shape_buckets=False)
BUCKETS = jwmma.Options(shape_buckets=True)
_COMPILES = {"n": 0}


def _count(event, duration, **kw):
    if event == "/jax/core/compile/backend_compile_duration":
        _COMPILES["n"] += 1


monitoring.register_event_duration_secs_listener(_count)


def _bits(x):
    x = np.asarray(x)
    return x.view({2: np.uint16, 4: np.uint32}[x.dtype.itemsize])


def test_gemm_in_its_bucket_keeps_the_bits_and_minus_zero(rng):
    """fma_chain_k (each product an f32 FMA into the accumulator, so -0 + -0 stays -0) on a
    dense RDNA4 row: a zero A row against a negative B column over C = -0 gives -0 (K whole
    steps: a step padded with zeros adds +0 products, in the hardware's kernel too); batch 2,
    M, N no tile multiples; the bucketed D equals the own-shape D bit for bit."""
    m, k, n = 37, 64, 45
    a = rng.standard_normal((2, m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = rng.standard_normal((2, m, n)).astype(np.float32)
    a[:, 3, :], b[:, 5], c[:, 3, 5] = 0, -np.abs(b[:, 5]) - 1, -0.0
    kw = dict(builtin="wmma_f32_16x16x16_f16_w32_gfx12", model="fma_chain_k", backend="xla")
    got = jwmma.gemm(a, b, c, options=BUCKETS, **kw)
    want = jwmma.gemm(a, b, c, options=OWN_SHAPE, **kw)
    assert got.shape == want.shape == (2, m, n) and got.dtype == want.dtype
    np.testing.assert_array_equal(_bits(got), _bits(want))
    assert (_bits(want)[:, 3, 5] == 0x80000000).all()  # the -0 the bucket's K steps must not touch


def test_ten_shapes_of_one_unit_compile_one_program(rng):
    """The goal of issue 35: ten eager contractions of one unit (M, N in 50-128, K in 128-512)
    compile at most two programs; the last gives the own-shape bits."""
    unit = jwmma.Unit("smfmac_f32_16x16x128_fp8_fp8", scaling="row", options=BUCKETS)
    dims = (((1,), (0,)), ((), ()))
    shapes = [(64, 256, 64), (80, 256, 64), (96, 300, 72), (100, 320, 90), (128, 256, 100), (60, 200, 50),
              (120, 384, 128), (90, 128, 110), (128, 512, 128), (72, 270, 66)]
    data = [(rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32))
            for m, k, n in shapes]
    before = _COMPILES["n"]
    out = [jwmma.dot_general(x, w, dims, unit=unit) for x, w in data]
    assert _COMPILES["n"] - before <= 2
    assert [o.shape for o in out] == [(m, n) for m, _, n in shapes]
    own = unit.replace(options=OWN_SHAPE)
    for i in (9,):
        np.testing.assert_array_equal(_bits(out[i]), _bits(jwmma.dot_general(*data[i], dims, unit=own)))


def test_ten_shapes_of_a_pruning_gemm_compile_one_program(rng):
    """``gemm(prune=True)`` over ten shapes in one bucket: the pruning runs inside the bucket's
    program (no program of its own per shape, nor one per eager reshape around it), so one
    program, two where 'auto' tiers up within ten calls; the bits of the own-shape GEMM."""
    from jwmma.engine import effort

    shapes = [(40, 256, 48), (64, 128, 64), (33, 200, 17), (50, 512, 20), (64, 64, 64), (17, 100, 90),
              (48, 384, 32), (20, 160, 40), (64, 448, 60), (36, 96, 28)]
    data = [(jwmma.numerics.cast(rng.standard_normal((m, k)), ml_dtypes.float8_e4m3fn),
             jwmma.numerics.cast(rng.standard_normal((k, n)), ml_dtypes.float8_e4m3fn)) for m, k, n in shapes]
    kw = dict(builtin="smfmac_f32_16x16x128_fp8_fp8", prune=True, backend="xla")
    before = _COMPILES["n"]
    out = [jwmma.gemm(a, b, options=BUCKETS, **kw) for a, b in data]
    assert _COMPILES["n"] - before <= 1 + (effort.TIER_UP_CALLS < len(shapes))
    assert [o.shape for o in out] == [(m, n) for m, _, n in shapes]
    np.testing.assert_array_equal(_bits(out[2]), _bits(jwmma.gemm(*data[2], options=OWN_SHAPE, **kw)))


def test_a_new_shape_of_jax_operands_compiles_the_gemm_program_alone(rng):
    """Operands held as JAX arrays on the CPU (a compressed pair, B, C): a GEMM of a new shape
    compiles its own program and nothing else (no eager bit cast or range check of its own per
    shape); a dense 2:4 A adds at most the one program of its 2:4 summary (none when an
    earlier call compiled the summary's bucket: `jwmma.engine.sparsity._bucket_rows`).
    Operands committed to their device (kept as JAX arrays) give the same bits."""
    import jax

    def count(fn):
        before = _COMPILES["n"]
        out = jax.block_until_ready(fn())
        return _COMPILES["n"] - before, out

    kw = dict(builtin="smfmac_f32_16x16x64_f16", backend="xla", options=OWN_SHAPE)
    m, k, n = 40, 160, 24
    a24 = jwmma.prune_2_4(rng.standard_normal((m, k)).astype(np.float16))
    values, pos = jwmma.compress_2_4(a24)
    b = jax.numpy.asarray(rng.standard_normal((k, n)).astype(np.float16))
    c = jax.numpy.asarray(rng.standard_normal((m, n)).astype(np.float32))
    programs, d = count(lambda: jwmma.gemm((values, pos), b, c, **kw))
    assert programs == 1
    programs, d24 = count(lambda: jwmma.gemm(a24, b, c, **kw))
    assert programs in (1, 2)
    a_new, b_new = jax.device_put(np.asarray(a24)[:, :96]), jax.device_put(np.asarray(b)[:96])  # no slice program
    programs, _ = count(lambda: jwmma.gemm(a_new, b_new, c, **kw))  # a new shape: its GEMM alone
    assert programs == 1
    np.testing.assert_array_equal(_bits(d24), _bits(d))
    committed = [jax.device_put(x, jax.devices()[0]) for x in (values, pos, b, c)]
    np.testing.assert_array_equal(_bits(jwmma.gemm(tuple(committed[:2]), *committed[2:], **kw)), _bits(d))


def test_shape_buckets_option_is_checked():
    with pytest.raises(TypeError, match="shape_buckets must be True or False, got 'yes'"):
        jwmma.Options(shape_buckets="yes")
    assert jwmma.Options().shape_buckets is False


def test_the_bucket_of_a_shape():
    from jwmma.tiled import buckets
    from jwmma.isa.table import lookup

    spec = lookup("smfmac_f32_16x16x128_fp8_fp8")
    assert buckets.capacity(spec, 37, 45, 300) == (512, 512, 4096)
    assert buckets.capacity(spec, 513, 2049, 4097) == (2048, 8192, 16384)
    a = np.ones((3, 5), ml_dtypes.bfloat16)
    p = buckets.pad_bits(a, {-2: 4, -1: 8})
    assert p.shape == (4, 8) and p.dtype == a.dtype and not _bits(p)[3:, :].any() and not _bits(p)[:, 5:].any()
    pos = buckets.pad_positions(np.zeros((2, 2), np.int8), 3, 4)
    assert pos.tolist() == [[0, 0, 2, 3], [0, 0, 2, 3], [2, 3, 2, 3]]


def _prune_ref(a):
    """2:4 pruning by the largest magnitudes, ties to the lower position (API.md section 4), on
    int8 values: Python ints, group by group."""
    out = np.zeros_like(a)
    flat, res = a.reshape(-1, 4), out.reshape(-1, 4)
    for g, row in enumerate(flat):
        keep = sorted(range(4), key=lambda i: (-abs(int(row[i])), i))[:2]
        for i in keep:
            res[g, i] = row[i]
    return out


def _compress_ref(a24):
    """(values, positions) of the module doc's consecutive compression, group by group."""
    vals, pos = [], []
    for row in a24.reshape(-1, 4):
        nz = [i for i in range(4) if row[i] != 0]
        p = nz if len(nz) == 2 else [nz[0], 3] if nz and nz[0] < 3 else [2, 3]
        vals += [row[i] for i in p]
        pos += p
    half = (*a24.shape[:-1], a24.shape[-1] // 2)
    return np.array(vals, a24.dtype).reshape(half), np.array(pos, np.int32).reshape(half)


def test_the_2_4_helpers_share_a_program_across_shapes(rng):
    """`prune_2_4`, `compress_2_4` and `decompress_2_4` on operands of ten shapes (1 to 76800
    groups of four, batched or not; numpy, and the helpers' own results: JAX arrays on the CPU)
    compile one program each per bucket of groups (two buckets here), and give the references'
    values; a bad group in a later shape's last row is named as the unbucketed helper names it
    (its padding groups are zeros)."""
    shapes = [(8, 64), (3, 5, 32), (16, 128), (1, 4), (30, 120), (7, 36), (2, 2, 256), (50, 8), (12, 300), (300, 1024)]
    before = _COMPILES["n"]
    for shape in shapes:
        a = rng.integers(-128, 128, shape, dtype=np.int8)
        a24 = jwmma.prune_2_4(a)
        np.testing.assert_array_equal(np.asarray(a24), _prune_ref(a))
        values, pos = jwmma.compress_2_4(a24)  # a JAX array on the CPU: read through numpy
        want_v, want_p = _compress_ref(np.asarray(a24))
        np.testing.assert_array_equal(np.asarray(values), want_v)
        np.testing.assert_array_equal(np.asarray(pos), want_p)
        assert values.dtype == np.int8 and pos.dtype == np.int32
        dense = jwmma.decompress_2_4(np.asarray(values), pos) if len(shape) == 2 else jwmma.decompress_2_4(values, pos)
        np.testing.assert_array_equal(np.asarray(dense), np.asarray(a24))
    assert _COMPILES["n"] - before <= 6, f"{_COMPILES['n'] - before} programs for ten shapes (two buckets)"
    bad = np.array(jwmma.prune_2_4(rng.integers(-128, 128, (5, 36), dtype=np.int8)))
    bad[4, 32:36] = (1, 1, 1, 0)  # three non-zeros in the last row's last group
    with pytest.raises(ValueError, match=r"row 4 group 8 \(elements 32..35\) has 3 non-zeros \(1 such group"):
        jwmma.compress_2_4(bad)
