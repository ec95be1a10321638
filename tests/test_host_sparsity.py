"""The 2:4 check and compression of small host operands (numpy, no program compiled) against
the compiled programs that larger operands take, and both against a per-group reference
written from API.md section 4 (hipSPARSELt's "consecutive" compression, -0 a zero, NaN not),
on random bit patterns with groups of 0 to 4 non-zeros, both zeros and NaN codes, for float
formats of 8 to 64 bits and integers."""
from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import pytest
from jax import monitoring

import jwmma
from jwmma.engine import host_sparsity, sparsity
from jwmma.numerics.rounding import x64_scope

FLOAT_DTYPES = [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2fnuz,
                ml_dtypes.bfloat16, np.float16, np.float32, np.float64]
DTYPES = FLOAT_DTYPES + [np.int8, np.uint8, np.int32, np.int64, np.uint64]
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


_COMPILES: list = []
monitoring.register_event_duration_secs_listener(
    lambda event, secs, **kw: _COMPILES.append(event) if event == "/jax/core/compile/backend_compile_duration" else None)


FLOATS = {np.dtype(d) for d in FLOAT_DTYPES}


def _is_float(dtype):
    return np.dtype(dtype) in FLOATS


def _signed_zero(dtype):
    """Whether the sign bit alone is a zero (-0): floats but the fnuz formats (0x80 is NaN)."""
    return _is_float(dtype) and "fnuz" not in np.dtype(dtype).name


def _groups_bits(rng, dtype, n_groups, max_nonzeros=2):
    """(n_groups * 4,) bit patterns (floats: unsigned ints of their width; integers: values)
    whose groups hold 0..max_nonzeros non-zeros; the zeros are +0 or -0 (where the format has
    one), the non-zeros any pattern that is not a zero (NaN and Inf codes included)."""
    dt = np.dtype(dtype)
    width = dt.itemsize * 8
    store = np.dtype(UINT[dt.itemsize]) if _is_float(dtype) else dt
    sign = 1 << (width - 1)
    out = []
    for _ in range(n_groups):
        count = int(rng.integers(0, max_nonzeros + 1))
        where = set(rng.choice(4, count, replace=False).tolist())
        for p in range(4):
            if p in where:
                v = sign if not _signed_zero(dtype) and rng.random() < 0.25 else 0  # fnuz NaN, int min
                while (v & (sign - 1)) == 0 if _signed_zero(dtype) else v == 0:
                    v = int(rng.integers(0, 1 << width, dtype=np.uint64)) if width == 64 else int(rng.integers(0, 1 << width))
            else:
                v = sign if _signed_zero(dtype) and rng.random() < 0.3 else 0
            out.append(v)
    if not _is_float(dtype) and dt.kind == "i":  # two's complement patterns as the signed values
        out = [v - (1 << width) if v >= sign else v for v in out]
    return np.array(out, dtype=store)


def _reference(bits, float_bits, width):
    """Per group, in Python ints: (slot values, slot positions) and the non-zero count;
    ``float_bits``: the sign bit alone is a zero."""
    mask = (1 << (width - 1)) - 1
    vals, pos, counts = [], [], []
    for q in range(len(bits) // 4):
        g = [int(x) for x in bits[4 * q: 4 * q + 4]]
        nz = [p for p in range(4) if ((g[p] & mask) if float_bits else g[p]) != 0]
        counts.append(len(nz))
        if len(nz) >= 2:
            v, p = [g[nz[0]], g[nz[1]]], nz[:2]
        elif len(nz) == 1:
            v, p = ([g[nz[0]], 0], [nz[0], 3]) if nz[0] < 3 else ([0, g[3]], [2, 3])
        else:
            v, p = [0, 0], [2, 3]
        vals += v
        pos += p
    return vals, pos, counts


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_host_and_compiled_forms_equal_the_reference(dtype, rng):
    """Valid 2:4 groups: the numpy compression, the compiled one and the reference agree bit
    for bit; groups of up to 4 non-zeros: both summaries (failing groups, first, its count)
    agree with the reference's counts."""
    width = np.dtype(dtype).itemsize * 8
    float_bits = _signed_zero(dtype)
    with x64_scope():
        bits = _groups_bits(rng, dtype, 96)
        want_v, want_p, _ = _reference(bits, float_bits, width)
        hv, hp, hc = host_sparsity.compress(bits.reshape(3, 128), float_bits)
        cv, cp, cc, _ = sparsity._compress_array(bits.reshape(3, 128), np.dtype(dtype).name)  # bits in, values out
        assert [int(v) for v in hv.reshape(-1)] == want_v
        assert hp.reshape(-1).tolist() == want_p and hp.dtype == np.int32
        assert np.array_equal(np.asarray(cv).view(hv.dtype), hv) and np.array_equal(np.asarray(cp), hp)
        assert np.array_equal(np.asarray(cc), hc)

        bad = _groups_bits(rng, dtype, 64, max_nonzeros=4)
        counts = _reference(bad, float_bits, width)[2]
        failing = [q for q, c in enumerate(counts) if c > 2]
        want = (len(failing), failing[0] if failing else 0, counts[failing[0]] if failing else counts[0])
        assert host_sparsity.summary(bad.reshape(4, 64), float_bits) == want
        assert tuple(int(v) for v in sparsity._summary_2_4(bad.reshape(4, 64), float_bits)) == want


def test_small_and_large_operands_take_their_forms_with_the_same_bits(rng):
    """Through the public functions: a small numpy operand is checked and compressed with no
    program compiled, a large one (over `HOST_MAX_GROUPS` groups) in its bucket's program, and
    a small slice gives the large operand's bits; the error names the same group either way."""
    rows = host_sparsity.HOST_MAX_GROUPS // 32 + 1  # 128 columns: 32 groups a row
    bits = np.resize(_groups_bits(rng, np.float16, 5 * 32), (rows, 128))  # 5 random rows, repeated
    big = bits.view(np.float16)
    small = big[:5]
    jax.block_until_ready(jwmma.compress_2_4(np.zeros((1, 4), np.float16)))  # JAX's own first-use programs
    before = len(_COMPILES)
    sv, sp = jwmma.compress_2_4(small)
    sparsity.check_2_4(small)
    assert len(_COMPILES) == before, "a small host operand compiled a program"
    bv, bp = jwmma.compress_2_4(big)
    assert len(_COMPILES) > before  # the bucket's program
    assert np.array_equal(np.asarray(bv)[:5].view(np.uint16), np.asarray(sv).view(np.uint16))
    assert np.array_equal(np.asarray(bp)[:5], np.asarray(sp)) and sv.dtype == np.float16
    for a in (small.copy(), big.copy()):
        a[3, 8:12] = np.float16(1)  # row 3, group 2: four non-zeros
        for fn in (jwmma.compress_2_4, sparsity.check_2_4):
            with pytest.raises(ValueError, match=r"row 3 group 2 \(elements 8\.\.11\) has 4 non-zeros \(1 such"):
                fn(a)


@pytest.mark.parametrize("dtype", [ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2fnuz])
@pytest.mark.parametrize("size", ["small", "bucket"])
def test_fnuz_nan_is_a_non_zero(dtype, size):
    """In the fnuz formats the pattern 0x80 is their one NaN, not a -0 (they have no -0): it
    counts as a non-zero, is kept and stored, and a group holding it and two more values is
    not 2:4, on the host and in a bucket's program alike; a sparse GEMM of such an A
    propagates the NaN (it was once read as a zero and dropped)."""
    rows = 4 if size == "small" else host_sparsity.HOST_MAX_GROUPS // 2 + 1
    a = np.zeros((rows, 8), dtype)
    a[:, 0], a[:, 1], a[:, 6] = np.nan, 1.5, -2.0
    assert a.view(np.uint8)[0, 0] == 0x80
    values, pos = jwmma.compress_2_4(a)
    assert np.asarray(values)[:, :2].view(np.uint8).tolist() == [[0x80, a.view(np.uint8)[0, 1]]] * rows
    assert np.asarray(pos).tolist() == [[0, 1, 2, 3]] * rows
    assert np.asarray(values).view(np.uint8)[:, 2:].tolist() == [[a.view(np.uint8)[0, 6], 0]] * rows
    a[2, 2] = 1.0
    for fn in (jwmma.compress_2_4, sparsity.check_2_4):
        with pytest.raises(ValueError, match=r"row 2 group 0 \(elements 0\.\.3\) has 3 non-zeros \(1 such"):
            fn(a)


def test_fnuz_nan_reaches_the_sparse_gemm(rng):
    """gfx942's fp8 SMFMAC takes fnuz A: a NaN in a 2:4 A makes its row of D NaN, whether A
    comes dense (checked and compressed inside jwmma.gemm), as a compressed pair, or under jit."""
    name = "smfmac_f32_16x16x64_fp8_fp8"
    if name not in jwmma.BUILTINS or "fnuz" not in jwmma.BUILTINS[name].a_type:
        pytest.skip(f"{name} takes no fnuz A here")
    a = np.zeros((16, 64), ml_dtypes.float8_e4m3fnuz)
    a[:, 1::4] = 1.0
    a[5, 0] = np.nan
    b = np.ones((64, 16), ml_dtypes.float8_e4m3fnuz)
    for d in (jwmma.gemm(a, b, builtin=name), jwmma.gemm(jwmma.compress_2_4(a), b, builtin=name),
              jax.jit(lambda a, b: jwmma.gemm(a, b, builtin=name))(a, b)):
        d = np.asarray(d)
        assert np.isnan(d[5]).all() and not np.isnan(np.delete(d, 5, 0)).any()


def _prune_reference(values, dtype):
    """`prune_2_4(rule="largest")` from API.md section 4, per group in Python numbers: keep the
    two largest magnitudes (floats compared exactly as float64, NaN as an infinite magnitude,
    tying with Inf), ties to the lower position; the others +0. Returns the kept mask."""
    keep = []
    for q in range(len(values) // 4):
        mags = []
        for v in values[4 * q: 4 * q + 4]:
            m = abs(float(v)) if _is_float(dtype) else abs(int(v))
            mags.append(float("inf") if m != m else m)
        order = sorted(range(4), key=lambda p: (-mags[p], p))
        keep += [p in order[:2] for p in range(4)]
    return np.array(keep)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_prune_host_and_compiled_forms_equal_the_reference(dtype, rng):
    """`prune_2_4` of a small host operand (numpy, nothing compiled) and of a large one (its
    bucket's program) keep the groups' two largest magnitudes as the reference does, on random
    bit patterns with repeated values (ties), both zeros, NaN and Inf codes; kept values keep
    their bits, the others are +0."""
    dt = np.dtype(dtype)
    store = np.dtype(UINT[dt.itemsize]) if _is_float(dtype) else dt
    width = dt.itemsize * 8
    pool = _groups_bits(rng, dtype, 64, max_nonzeros=4)
    bits = rng.choice(pool, 4 * 96)  # draws from a small pool: many ties within groups
    values = bits.view(dt) if _is_float(dtype) else bits
    want = np.where(_prune_reference(values, dtype), bits, np.zeros((), store))
    jax.block_until_ready(jwmma.prune_2_4(np.zeros((1, 4), dt)))  # JAX's own first-use programs
    before = len(_COMPILES)
    small = np.asarray(jwmma.prune_2_4(values.reshape(3, 128)))
    assert len(_COMPILES) == before, "a small host operand compiled a program"
    rows = host_sparsity.HOST_MAX_GROUPS // 32 + 1  # 128 columns: 32 groups a row
    big = np.asarray(jwmma.prune_2_4(np.resize(values, (rows, 128))))
    assert len(_COMPILES) > before  # the bucket's program
    got = [small.view(store).reshape(-1), big[:3].view(store).reshape(-1)]
    for g in got:
        assert [int(v) for v in g] == [int(v) for v in want], f"{dt.name}: width {width}"
    assert small.dtype == dt and big.dtype == dt
