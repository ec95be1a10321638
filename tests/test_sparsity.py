"""prune_2_4 / compress_2_4 / decompress_2_4 (API.md section 4, BUILTINS.md section 5)
against per-group Python loops."""
import jax
import ml_dtypes
import numpy as np
import pytest

import jwmma

DTYPES = [np.float32, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, np.int8]
SHAPE = (4, 32)  # one shape for most tests: jwmma runs eagerly and compiles per shape


def _is_zero(v):
    return float(v) == 0.0  # -0 is a zero; NaN is not


def ref_compress_group(g):
    """hipSPARSELt compression of one group of 4: (slot values, slot positions)."""
    nz = [p for p in range(4) if not _is_zero(g[p])]
    assert len(nz) <= 2
    zero = g.dtype.type(0)
    if len(nz) == 2:
        return [g[nz[0]], g[nz[1]]], nz
    if len(nz) == 1:
        p = nz[0]
        if p < 3:
            return [g[p], zero], [p, 3]
        return [zero, g[3]], [2, 3]
    return [zero, zero], [2, 3]


def _random_24(rng, shape, dtype, empty_rate=0.15, one_rate=0.25):
    """Random 2:4 matrices with groups of 0, 1 and 2 non-zeros (non-zeros never 0)."""
    *lead, k = shape
    out = np.zeros(shape, np.float64)
    flat = out.reshape(-1, k // 4, 4)
    for r in range(flat.shape[0]):
        for q in range(k // 4):
            u = rng.random()
            count = 0 if u < empty_rate else (1 if u < empty_rate + one_rate else 2)
            for p in rng.choice(4, count, replace=False):
                v = 0
                while v == 0:
                    v = int(rng.integers(-100, 101))
                flat[r, q, p] = v
    return out.astype(dtype)


def _eq(x, y):
    x, y = np.asarray(x).astype(np.float64), np.asarray(y).astype(np.float64)
    return np.array_equal(x, y, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_compress_matches_hipsparselt_reference(dtype, rng):
    a = _random_24(rng, SHAPE, dtype)
    vals, pos = jwmma.compress_2_4(a)
    vals, pos = np.asarray(vals), np.asarray(pos)
    assert vals.shape == pos.shape == (4, 16)
    assert vals.dtype == np.dtype(dtype)
    assert np.issubdtype(pos.dtype, np.integer)
    for idx in np.ndindex(4):
        for q in range(8):
            wv, wp = ref_compress_group(a[idx][4 * q: 4 * q + 4])
            assert list(pos[idx][2 * q: 2 * q + 2]) == wp, (idx, q)
            assert _eq(vals[idx][2 * q: 2 * q + 2], wv), (idx, q)
            assert pos[idx][2 * q] < pos[idx][2 * q + 1]  # positions increase
    back = np.asarray(jwmma.decompress_2_4(vals, pos))
    assert back.dtype == np.dtype(dtype)
    assert _eq(back, a)


def test_padding_rules_written_out():
    a = np.array([[0, 0, 0, 0,   5, 0, 0, 0,   0, 6, 0, 0,   0, 0, 7, 0,
                   0, 0, 0, 8,   1, 2, 0, 0,   0, 3, 0, 4,   0, 0, 9, 9]] * 4, np.float32)
    vals, pos = jwmma.compress_2_4(a)
    assert np.asarray(pos).tolist() == [[2, 3, 0, 3, 1, 3, 2, 3, 2, 3, 0, 1, 1, 3, 2, 3]] * 4
    assert np.asarray(vals).tolist() == [[0, 0, 5, 0, 6, 0, 7, 0, 0, 8, 1, 2, 3, 4, 9, 9]] * 4


def test_negative_zero_and_nan():
    a = np.zeros(SHAPE, np.float32)
    a[0, :8] = [-0.0, np.nan, 0.0, 2.0, -0.0, -0.0, -0.0, -1.0]
    vals, pos = jwmma.compress_2_4(a)
    assert np.asarray(pos)[0, :4].tolist() == [1, 3, 2, 3]
    v = np.asarray(vals)
    assert np.isnan(v[0, 0]) and v[0, 1] == 2.0 and v[0, 2] == 0 and v[0, 3] == -1.0


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_decompress_compress_round_trip(dtype, rng):
    """Any increasing positions with non-zero values come back unchanged."""
    pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    pick = rng.integers(0, 6, (4, 8))
    pos = np.array([[x for t in row for x in pairs[t]] for row in pick])
    vals = rng.integers(1, 50, (4, 16)) * rng.choice([-1, 1], (4, 16))
    assert vals.shape[:-1] + (32,) == SHAPE
    vals = vals.astype(dtype)
    dense = np.asarray(jwmma.decompress_2_4(vals, pos))
    assert dense.shape == (4, 32)
    for r in range(4):
        for c in range(16):
            q = c // 2
            assert float(dense[r, 4 * q + pos[r, c]]) == float(vals[r, c])
        assert np.count_nonzero(dense[r].astype(np.float64)) == 16
    v2, p2 = jwmma.compress_2_4(dense)
    np.testing.assert_array_equal(np.asarray(p2), pos)
    assert _eq(v2, vals)


def ref_prune(row):
    out = np.zeros_like(row)
    for q in range(len(row) // 4):
        g = [abs(float(x)) for x in row[4 * q: 4 * q + 4]]
        keep = sorted(range(4), key=lambda p: -g[p])[:2]
        for p in keep:
            out[4 * q + p] = row[4 * q + p]
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.int8])
def test_prune_keeps_the_two_largest_magnitudes(dtype, rng):
    # distinct magnitudes in every group, random signs
    mags = np.stack([rng.permutation(np.arange(1, 5) * 10 + q) for q in range(4 * 8)]).reshape(SHAPE)
    a = (mags * rng.choice([-1, 1], mags.shape)).astype(dtype)
    got = np.asarray(jwmma.prune_2_4(a))
    assert got.shape == a.shape and got.dtype == a.dtype
    for r in range(4):
        np.testing.assert_array_equal(got[r].astype(np.float64), ref_prune(a[r]).astype(np.float64))
    # prune is idempotent and its output compresses with increasing positions
    np.testing.assert_array_equal(np.asarray(jwmma.prune_2_4(got)).astype(np.float64), got.astype(np.float64))
    vals, pos = jwmma.compress_2_4(got)
    pos = np.asarray(pos)
    assert (pos[..., 0::2] < pos[..., 1::2]).all()
    assert _eq(jwmma.decompress_2_4(vals, pos), got)


def test_prune_with_ties_is_2_4_and_keeps_largest(rng):
    a = rng.integers(-3, 4, SHAPE).astype(np.float32)
    got = np.asarray(jwmma.prune_2_4(a))
    g_in, g_out = a.reshape(4, 8, 4), got.reshape(4, 8, 4)
    assert ((g_out != 0).sum(-1) <= 2).all()
    for r in range(4):
        for q in range(8):
            kept = [p for p in range(4) if g_out[r, q, p] != 0 or (g_in[r, q, p] == 0)]
            assert all(g_out[r, q, p] in (0, g_in[r, q, p]) for p in range(4))
            dropped = [abs(g_in[r, q, p]) for p in range(4) if g_out[r, q, p] == 0 and g_in[r, q, p] != 0]
            held = [abs(g_in[r, q, p]) for p in range(4) if g_out[r, q, p] != 0]
            if dropped and held:
                assert min(held) >= max(dropped)
            assert len(held) == min(2, np.count_nonzero(g_in[r, q])), kept


def test_compress_rejects_non_2_4_naming_first_row_and_group():
    a = np.zeros((4, 16), np.float32)
    a[1, 8:11] = [1, 2, 3]  # row 1, group 2: three non-zeros
    a[3, 0:4] = 1  # a later offender
    with pytest.raises(ValueError, match=r"row 1\b.*group 2\b"):
        jwmma.compress_2_4(a)
    b = np.zeros((2, 3, 8), np.int8)
    b[1, 2, 4:8] = [1, 1, 1, 0]
    with pytest.raises(ValueError, match=r"row \(1, 2\).*group 1\b"):
        jwmma.compress_2_4(b)


def test_compress_under_jit():
    a = np.array([[1, 0, 2, 0, 0, 0, 0, 3]], np.float32)
    vals, pos = jax.jit(jwmma.compress_2_4)(a)
    assert np.asarray(pos).tolist() == [[0, 2, 2, 3]]
    assert np.asarray(vals).tolist() == [[1, 2, 0, 3]]
    dense = jax.jit(jwmma.decompress_2_4)(vals, pos)
    np.testing.assert_array_equal(np.asarray(dense), a)


def test_positions_out_of_range_rejected():
    vals = np.ones((2, 4), np.float32)
    for bad in (4, -1):
        pos = np.array([[0, 1, 2, bad], [0, 1, 2, 3]])
        with pytest.raises(ValueError, match="pos"):
            jwmma.decompress_2_4(vals, pos)
    with pytest.raises(ValueError, match="pos"):
        jwmma.pack_index("smfmac_f32_16x16x64_f16", np.full((16, 32), 4))
    with pytest.raises(ValueError):
        jwmma.compress_2_4(np.ones((2, 6), np.float32))  # K not a multiple of 4
