"""Issue #10, items 1-13: one regression test (or a few) per defect, each reproducing the
issue's example and asserting the RIGHT behaviour. They fail against the last landed commit
until the defect is fixed (FAILING.md lists which); DECISIONS.md says which behaviour was chosen
where the issue left a choice. Public API only; references in edges_oracles.py."""
from __future__ import annotations

import inspect
import json
import os
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jwmma
from jwmma import kernel

import edges_oracles as O
from edges_helpers import assert_clean_cli_error, assert_jit_reports, call_builtin, run_cli

FP8 = "smfmac_f32_16x16x128_fp8_fp8"
F16_C4 = "smfmac_f32_16x16x64_f16"
I8_C4 = "smfmac_i32_16x16x128_i8"
IU8 = "swmmac_i32_16x16x32_iu8_w32"
IU4 = "swmmac_i32_16x16x32_iu4_w32"
F16_ACC = "swmmac_f16_16x16x32_f16_w32"
BF16_ACC = "swmmac_bf16_16x16x32_bf16_w32"
E5M2, E4M3, BF16 = ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fn, ml_dtypes.bfloat16


def bits(x):
    return O.float_bits(np.asarray(x)).copy()


def zero_regs(name, batch=()):
    bt = O.TABLE[name]
    regs = [np.zeros(batch + (bt.wave, bt.regs(w)), bt.reg_dtypes(w)[0]) for w in "abc"]
    return regs + [np.zeros(batch + (bt.wave,), np.int32)]


# =============================================================================== item 1
def test_item1_prune_int64_keeps_dtype_and_compares_in_int64():
    got = jwmma.prune_2_4(np.array([[2**40 + 3, 1, 2, 2**33]], np.int64))
    assert np.asarray(got).dtype == np.int64
    np.testing.assert_array_equal(np.asarray(got), [[2**40 + 3, 0, 0, 2**33]])


def test_item1_prune_uint32_keeps_the_largest():
    got = jwmma.prune_2_4(np.array([[2**31, 1, 2, 0]], np.uint32))
    assert np.asarray(got).dtype == np.uint32
    np.testing.assert_array_equal(np.asarray(got), [[2**31, 0, 2, 0]])


def test_item1_prune_float64_decides_in_float64():
    x = np.array([[1.0, 1 + 1e-12, 1 + 2e-12, 0.5]])
    got = np.asarray(jwmma.prune_2_4(x))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(bits(got), bits(np.array([[0.0, 1 + 1e-12, 1 + 2e-12, 0.0]])))


@pytest.mark.parametrize("dtype,row,kept", [
    (np.int8, [-128, 127, 1, 0], [0, 1]),               # |-128| = 128 does not fit int8
    (np.int16, [-(2**15), 5, 2**15 - 1, 6], [0, 2]),
    (np.int64, [-(2**63), 5, 2**63 - 1, 6], [0, 2]),    # |int64 min| does not fit int64
    (np.uint64, [2**64 - 1, 2**63, 1, 2**64 - 2], [0, 3]),
    (np.int32, [2**31 - 1, -(2**31), 2**31 - 2, 0], [0, 1]),
])
def test_item1_prune_integer_extremes(dtype, row, kept):
    x = np.array([row], dtype)
    want = np.zeros_like(x)
    want[0, kept] = x[0, kept]
    got = np.asarray(jwmma.prune_2_4(x))
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype,row", [
    (BF16, [2.0**-133, 2.0**-130, 2.0**-129, 0]),          # bf16 subnormals
    (np.float32, [2.0**-140, 2.0**-130, 2.0**-129, 0]),    # f32 subnormals
])
def test_item1_prune_ranks_subnormals_by_magnitude(dtype, row):
    """Found by the property suite: the float32 comparison runs on XLA's CPU backend, which
    flushes subnormals, so three subnormals tie at zero and the two lowest positions win."""
    x = np.array([row], dtype)
    want = x.copy()
    want[0, 0] = 0
    np.testing.assert_array_equal(bits(jwmma.prune_2_4(x)), bits(want))


# =============================================================================== item 2
@pytest.mark.parametrize("path", ["matrix", "registers"])
def test_item2_gemm_uint8_is_unsigned(path):
    a = np.zeros((16, 32), np.uint8)
    a[:, 0] = 200
    b = np.ones((32, 16), np.uint8)
    d = np.asarray(jwmma.gemm(a, b, builtin=IU8, path=path))
    np.testing.assert_array_equal(d, a.astype(np.int64) @ b.astype(np.int64))
    assert d[0, 0] == 200


def test_item2_gemm_mixed_signedness_from_dtypes():
    a = np.zeros((16, 32), np.uint8)
    a[:, 0] = 200
    b = np.full((32, 16), -1, np.int8)
    d = np.asarray(jwmma.gemm(a, b, builtin=IU8))
    np.testing.assert_array_equal(d, a.astype(np.int64) @ b.astype(np.int64))   # -200


def test_item2_gemm_uint4_is_unsigned():
    a = np.zeros((16, 32), ml_dtypes.uint4)
    a[:, 1] = 15
    b = np.full((32, 16), -8, ml_dtypes.int4)
    d = np.asarray(jwmma.gemm(a, b, builtin=IU4))
    np.testing.assert_array_equal(d, np.full((16, 16), -120))


@pytest.mark.parametrize("which,dtype,flag", [("a", np.uint8, True), ("a", np.int8, False),
                                              ("b", np.uint8, True), ("b", np.int8, False)])
def test_item2_gemm_refuses_a_contradiction(which, dtype, flag):
    a = np.zeros((16, 32), np.int8)
    b = np.zeros((32, 16), np.int8)
    if which == "a":
        a = a.astype(dtype)
    else:
        b = b.astype(dtype)
    with pytest.raises(ValueError, match=rf"\b{which}_neg\b"):
        jwmma.gemm(a, b, builtin=IU8, **{f"{which}_neg": flag})


def test_item2_wide_dtypes_follow_a_neg_and_are_range_checked():
    a = np.zeros((16, 32), np.int32)
    a[:, 0] = 200
    b = np.ones((32, 16), np.int32)
    d = np.asarray(jwmma.gemm(a, b, builtin=IU8, a_neg=False))
    assert d[0, 0] == 200
    with pytest.raises(ValueError, match=r"\ba\b"):      # signed by default: 200 is out of range
        jwmma.gemm(a, b, builtin=IU8)


def test_item2_signed_only_builtin_refuses_large_unsigned():
    a = np.zeros((16, 128), np.uint8)
    a[:, 0] = 200
    with pytest.raises(ValueError, match=r"\ba\b"):
        jwmma.gemm(a, np.ones((128, 16), np.int8), builtin=I8_C4)


# =============================================================================== item 3
def test_item3_traced_pack_index_checked_mode():
    pos = np.full((16, 64), 5, np.int32)
    assert "check" in inspect.signature(jwmma.pack_index).parameters
    assert_jit_reports(lambda p: jwmma.pack_index(FP8, p, check=True), (pos,), r"pos must hold values in \[0, 3\]")


def test_item3_traced_pack_index_unchecked_keeps_the_low_bits_as_documented():
    pos = np.full((16, 64), 5, np.int32)
    got = np.asarray(jax.jit(lambda p: jwmma.pack_index(FP8, p))(pos))
    assert (got.view(np.uint32) == 0x55555555).all()          # 5 & 3 = 1 in every field
    assert "check" in (jwmma.pack_index.__doc__ or ""), "pack_index must document what check=False keeps"


def test_item3_traced_pack_a_checked_mode():
    x = np.full((16, 64), 300, np.int32)
    assert_jit_reports(lambda v: jwmma.pack_a(I8_C4, v, check=True), (x,), r"a_comp must hold values in \[-128, 127\]")


def test_item3_traced_pack_b_checked_mode():
    x = np.full((32, 16), 16, np.int32)
    assert_jit_reports(lambda v: jwmma.pack_b(IU4, v, check=True), (x,), r"\bb must hold values in \[-8, 15\]")


def _i8_pair(rng):
    v = rng.integers(-5, 5, (16, 64)).astype(np.int8)
    b = rng.integers(-5, 5, (128, 16)).astype(np.int8)
    return v, b


def test_item3_traced_gemm_positions_checked_mode(rng):
    v, b = _i8_pair(rng)
    p7 = np.tile(np.array([0, 7], np.int32), (16, 32))
    assert_jit_reports(lambda v, p, b: jwmma.gemm((v, p), b, builtin=I8_C4, check=True), (v, p7, b),
                       r"a positions must hold values in \[0, 3\]")


def test_item3_traced_gemm_positions_unchecked_keep_the_low_bits(rng):
    v, b = _i8_pair(rng)
    p7 = np.tile(np.array([0, 7], np.int32), (16, 32))
    d7 = np.asarray(jax.jit(lambda v, p, b: jwmma.gemm((v, p), b, builtin=I8_C4))(v, p7, b))
    d3 = np.asarray(jwmma.gemm((v, p7 & 3), b, builtin=I8_C4))
    np.testing.assert_array_equal(d7, d3)


def test_item3_concrete_gemm_positions_are_refused(rng):
    v, b = _i8_pair(rng)
    p7 = np.tile(np.array([0, 7], np.int32), (16, 32))
    with pytest.raises(ValueError, match="a positions"):
        jwmma.gemm((v, p7), b, builtin=I8_C4)


def test_item3_traced_decompress_checked_mode():
    values = np.ones((2, 4), np.float16)
    pos = np.array([[0, 1, 2, 9], [0, 1, 2, 3]], np.int32)
    assert_jit_reports(lambda v, p: jwmma.decompress_2_4(v, p, check=True), (values, pos), r"\bpos\b")


def test_item3_metadata_refuses_out_of_range_positions():
    with pytest.raises(ValueError, match=r"\bpos"):
        kernel.metadata(np.full((1, 8), 5))
    with pytest.raises(ValueError, match=r"\bpos"):
        kernel.metadata(np.full((1, 8), -1))
    np.testing.assert_array_equal(np.asarray(kernel.metadata(np.full((1, 8), 1))), [[0x55, 0x55]])


def test_item3_metadata_traced_checked_mode():
    assert_jit_reports(lambda p: kernel.metadata(p, check=True), (np.full((1, 8), 5, np.int32),), r"\bpos")


@pytest.mark.parametrize("x", [2**33, 2**32, -(2**31) - 1, -(2**40)])
def test_item3_i32_refuses_values_that_are_not_32_bits(x):
    with pytest.raises(ValueError, match="32"):
        kernel.i32(x)


@pytest.mark.parametrize("x", [0, -1, 2**31 - 1, -(2**31), 0x88888888, 2**32 - 1])
def test_item3_i32_keeps_the_bits_of_32_bit_values(x):
    got = kernel.i32(x)
    assert np.asarray(got).dtype == np.int32 and int(got) == O.i32_reference(x)


# =============================================================================== item 4
@pytest.mark.parametrize("dtype,row", [
    (E5M2, [0x7E, 0, 0, 0xFE]),                  # sNaN-ish payloads, positive and negative
    (E5M2, [0, 0x7D, 0xFF, 0]),
    (E4M3, [0xFF, 0, 0x7F, 0]),                  # the two E4M3FN NaNs
    (BF16, [0x7F81, 0, 0, 0x7FA0]),
    (BF16, [0, 0xFFC1, 0x7F80, 0]),              # negative NaN, +Inf
    (np.float16, [0x7C01, 0xFE00, 0, 0]),
    (np.float32, [0, 0x7F800001, 0, 0xFFBFFFFF]),
])
@pytest.mark.parametrize("jit", [False, True])
def test_item4_kept_nans_are_copied_bit_for_bit(dtype, row, jit):
    width = np.dtype(dtype).itemsize
    x = np.array([row], O.UINT_OF_WIDTH[width]).view(dtype)
    compress = jax.jit(jwmma.compress_2_4) if jit else jwmma.compress_2_4
    prune = jax.jit(jwmma.prune_2_4) if jit else jwmma.prune_2_4
    values, pos = compress(x)
    nz = [i for i in range(4) if O.is_nonzero(dtype, x[0, i])]
    np.testing.assert_array_equal(np.asarray(pos), [nz])
    np.testing.assert_array_equal(bits(values), bits(x)[:, nz])
    np.testing.assert_array_equal(bits(prune(x)), bits(x))
    np.testing.assert_array_equal(bits(jwmma.decompress_2_4(values, pos)), bits(x))


def _f16(*vals):
    return np.array([vals], np.float16)


HIPSPARSELT_CASES = [
    # float32 rounding ties: 8192 + 2^-12 and 8192 + 2^-11 both round to 8192: first pair wins
    (_f16(2**-12, 8192, 2**-11, 0), [0, 1]),
    (np.array([[2**-30, 1, 2**-29, 0]], BF16), [0, 1]),
    (_f16(np.nan, 1, 2, 3), [2, 3]),            # NaN pairs never win
    (_f16(1, 2, np.nan, 3), [1, 3]),
    (_f16(1, np.inf, 5, 7), [0, 1]),            # the first pair holding an Inf wins
    (_f16(3, 4, 1, -np.inf), [0, 3]),
    (_f16(np.nan, np.nan, 5, np.nan), [0]),     # every pair holds a NaN: only position 0 stays
    (np.array([[3, -3, 3, 0]], np.int8), [0, 1]),
    (np.array([[np.nan, 0, 448, 2]], E4M3), [2, 3]),
    (np.array([[np.inf, 0, 1, np.inf]], E5M2), [0, 1]),
]


@pytest.mark.parametrize("x,kept", HIPSPARSELT_CASES)
def test_item4_hipsparselt_pruning_rule(x, kept):
    want = np.zeros_like(x)
    want[0, kept] = x[0, kept]
    np.testing.assert_array_equal(bits(O.prune_hipsparselt(x)), bits(want))  # the oracle agrees
    got = jwmma.prune_2_4(x, rule="hipsparselt")
    assert np.asarray(got).dtype == x.dtype
    np.testing.assert_array_equal(bits(got), bits(want))


def test_item4_default_rule_stays_two_largest_magnitudes_with_its_nan_rule():
    x = _f16(2**-12, 8192, 2**-11, 0)
    np.testing.assert_array_equal(bits(jwmma.prune_2_4(x)), bits(_f16(0, 8192, 2**-11, 0)))
    x = _f16(np.nan, 1, 2, 3)     # a NaN ranks as the largest magnitude (it stays visible)
    np.testing.assert_array_equal(bits(jwmma.prune_2_4(x)), bits(_f16(np.nan, 0, 0, 3)))
    assert "NaN" in (jwmma.prune_2_4.__doc__ or ""), "prune_2_4 must document its NaN rule"


def test_item4_prune_rule_argument_is_checked():
    with pytest.raises(ValueError, match=r"\brule\b.*hipsparselt"):
        jwmma.prune_2_4(_f16(1, 2, 3, 4), rule="nope")
    with pytest.raises(TypeError, match=r"\ba\b"):   # hipSPARSELt prunes f16, bf16, i8, fp8 only
        jwmma.prune_2_4(np.array([[1, 2, 3, 4]], np.int64), rule="hipsparselt")


# =============================================================================== item 5
SMALL_FAMILY = [FP8, F16_ACC, IU8, I8_C4]


@pytest.mark.parametrize("name", SMALL_FAMILY + [pytest.param(n, marks=pytest.mark.slow)
                                                 for n in O.NAMES if n not in SMALL_FAMILY])
def test_item5_builtin_with_zero_waves(name):
    a, b, c, idx = zero_regs(name, (0,))
    d = call_builtin(name, a, b, c, idx)
    assert d.shape == c.shape and np.asarray(d).dtype == c.dtype


@pytest.mark.parametrize("name", SMALL_FAMILY + [pytest.param(n, marks=pytest.mark.slow)
                                                 for n in O.NAMES if n not in SMALL_FAMILY])
def test_item5_fragments_with_zero_batch(name):
    bt = O.TABLE[name]
    vt = {"f16": np.float16, "bf16": BF16, "fp8": E4M3, "bf8": E5M2, "iu8": np.int8, "i8": np.int8,
          "iu4": np.int8, "f32": np.float32, "i32": np.int32}
    for which, shape in (("a", (bt.m, bt.kc)), ("b", (bt.k, bt.n)), ("c", (bt.m, bt.n))):
        x = np.zeros((0,) + shape, vt[getattr(bt, f"{which}_type")])
        regs = getattr(jwmma, f"pack_{which}")(name, x)
        assert regs.shape == (0, bt.wave, bt.regs(which)), which
        back = getattr(jwmma, f"unpack_{which}")(name, regs)
        assert back.shape == x.shape, which
    idx = jwmma.pack_index(name, np.zeros((0, bt.m, bt.kc), np.int32))
    assert idx.shape == (0, bt.wave) and np.asarray(idx).dtype == np.int32
    assert jwmma.unpack_index(name, idx).shape == (0, bt.m, bt.kc)


@pytest.mark.parametrize("path", ["matrix", "registers"])
@pytest.mark.parametrize("m,n,k", [(0, 16, 128), (16, 0, 128), (0, 0, 128), (5, 3, 0)])
def test_item5_gemm_with_empty_dims(m, n, k, path):
    rng = np.random.default_rng(0)
    a = np.zeros((m, k), np.int8)
    b = rng.integers(-3, 3, (k, n)).astype(np.int8)
    c = rng.integers(-9, 9, (m, n)).astype(np.int32)
    d = np.asarray(jwmma.gemm(a, b, c, builtin=I8_C4, path=path))
    assert d.shape == (m, n) and d.dtype == np.int32
    np.testing.assert_array_equal(d, c)     # no products: D = C (K = 0: no instruction issued)


def test_item5_gemm_float_empty_m():
    d = jwmma.gemm(np.zeros((0, 128), E4M3), np.zeros((128, 16), E4M3))
    assert d.shape == (0, 16) and np.asarray(d).dtype == np.float32


def test_item5_2_4_helpers_with_zero_size():
    for shape in ((0, 8), (3, 0), (0, 0, 4)):
        x = np.zeros(shape, np.float16)
        assert jwmma.prune_2_4(x).shape == shape
        v, p = jwmma.compress_2_4(x)
        assert v.shape == shape[:-1] + (shape[-1] // 2,) == p.shape
        d = jwmma.decompress_2_4(v, p)
        assert d.shape == shape and np.asarray(d).dtype == np.float16
    assert kernel.metadata(np.zeros((0, 8), np.int32)).shape == (0, 2)


class I8Policy:
    """One 16x16 tile per wave of smfmac_i32_16x16x128_i8, written from BUILTINS.md 4.2:
    A lane (g, r) holds compressed columns 16g..16g+15 of row r (bytes of 4 words); B element
    f sits at dense k = 64*(f//16) + 16g + f%16 of column r; the index word is the row's
    metadata bytes 4g..4g+3; D element t is (4g + t, r)."""

    builtin = I8_C4

    def load_a(sA, warp_m, lane, tk_comp):
        g, r = lane // 16, lane % 16
        base = (warp_m * 16 + r) * tk_comp + 16 * g
        v = jnp.arange(4)
        return kernel.pack_bytes(sA[base + 4 * v], sA[base + 4 * v + 1], sA[base + 4 * v + 2], sA[base + 4 * v + 3])

    def load_b(sB, warp_n, lane, cta_n):
        g, r = lane // 16, lane % 16
        v = jnp.arange(8)

        def byte(bb):
            f = 4 * v + bb
            return sB[(64 * (f // 16) + 16 * g + f % 16) * cta_n + warp_n * 16 + r]

        return kernel.pack_bytes(byte(0), byte(1), byte(2), byte(3))

    def index(sM, warp_m, lane, tm):
        g, r = lane // 16, lane % 16
        row = (warp_m * 16 + r) * tm + 4 * g
        return kernel.pack_bytes(sM[row], sM[row + 1], sM[row + 2], sM[row + 3])

    def store_c(d, sub_m, sub_n, N, lane):
        g, r = lane // 16, lane % 16
        return (sub_m + 4 * g + jnp.arange(4)) * N + sub_n + r, d


def test_item5_kernel_run_with_m_zero(rng):
    a = np.asarray(jwmma.prune_2_4(rng.integers(-9, 9, (32, 256)).astype(np.int8)))
    b = rng.integers(-9, 9, (256, 16)).astype(np.int8)
    kernel.check(I8Policy, a, b, waves=(2, 1))        # the policy itself is right
    d = kernel.run(I8Policy, a[:0], b)
    assert d.shape == (0, 16) and np.asarray(d).dtype == np.int32


@pytest.mark.parametrize("argv,option", [
    (["gemm", "-m", "0", "-n", "16", "-k", "128"], "-m"),
    (["gemm", "-m", "16", "-n", "0", "-k", "128"], "-n"),
    (["gemm", "--batch", "0", "-m", "16", "-n", "16", "-k", "128"], "--batch"),
    (["gemm", "--batch", "-2", "-m", "16", "-n", "16", "-k", "128"], "--batch"),
    (["gemm", "-m", "16", "-n", "16", "-k", "0"], "-k"),        # today: silently K = 2*M
])
def test_item5_cli_gemm_empty_or_negative_sizes(argv, option):
    assert_clean_cli_error(argv, option)


# =============================================================================== item 7
@pytest.mark.slow  # runs real GEMMs through the CLI/study: kept out of the default run's budget
@pytest.mark.parametrize("builtin", [F16_ACC, BF16_ACC])
def test_item7_study_runs_16_bit_accumulators(builtin):
    st = jwmma.study.run(ks=[32], models=["exact"], formats=[builtin], seeds=1, m=16, n=16,
                         progress=False, figures=False)
    assert len(st.points) == 1
    # exact = one rounding into the destination format: every output is correctly rounded
    assert st.points[0]["ident"] == 1.0


@pytest.mark.slow  # runs real GEMMs through the CLI/study: kept out of the default run's budget
def test_item7_study_cli_with_f16_accumulator(tmp_path):
    rc, out, err, exc = run_cli(["study", "--builtin", F16_ACC, "--k", "32", "--model", "exact", "--seeds", "1",
                                 "--size", "16", "--no-plots", "--no-progress", "--out", str(tmp_path / "st")])
    assert exc is None and rc == 0, err[-1500:]


# =============================================================================== item 8
def test_item8_gemm_bad_model_fields():
    assert_clean_cli_error(["gemm", "--model", "FusedGroups(grp=2)", "-m", "16", "-n", "16", "-k", "128"],
                           "--model", "grp")


def test_item8_study_bad_model_fields(tmp_path):
    assert_clean_cli_error(["study", "--model", "FusedGroups(grp=2)", "--k", "128", "--seeds", "1", "--size", "16",
                            "--no-plots", "--out", str(tmp_path / "st")], "--model", "grp")


def test_item8_layout_panel_zero():
    assert_clean_cli_error(["layout", F16_C4, "--grid", "--panel", "0"], "--panel")


@pytest.mark.slow  # runs real GEMMs through the CLI/study: kept out of the default run's budget
def test_item8_gemm_k_not_a_multiple_of_4_works_like_the_api():
    rc, out, err, exc = run_cli(["gemm", "-m", "16", "-n", "16", "-k", "6", "--no-progress"])
    assert exc is None and rc == 0, err[-1500:]


@pytest.mark.parametrize("argv,option", [
    (["study", "--k", "abc"], "--k"),
    (["study", "--size", "8x"], "--size"),
    (["study", "--size", "x8"], "--size"),
    (["study", "--k", "128:"], "--k"),
])
def test_item8_study_parse_errors_name_the_option(argv, option, tmp_path):
    assert_clean_cli_error(argv + ["--out", str(tmp_path / "st"), "--no-plots"], option)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_item8_gemm_scale_must_be_finite(value):
    assert_clean_cli_error(["gemm", "--scale", value, "-m", "16", "-n", "16", "-k", "128"], "--scale")


def test_item8_gemm_clamp_on_a_float_builtin_is_refused():
    assert_clean_cli_error(["gemm", "--builtin", "swmmac_f32_16x16x32_f16_w32", "--clamp", "-m", "16", "-n", "16",
                            "-k", "32"], "--clamp")


@pytest.mark.parametrize("lanes", ["3-1", "5-", ",", "-"])
def test_item8_layout_lane_ranges_that_select_nothing(lanes):
    assert_clean_cli_error(["layout", F16_C4, "--lane", lanes], "--lane")


# =============================================================================== item 9
def _bad_idx_i8():
    bt = O.TABLE[I8_C4]
    pos = np.tile(np.array([0, 1], np.int64), (bt.m, bt.kc // 2))
    words = O.pack_index(bt, pos).view(np.uint32).copy()
    lane, pair = 37, 2
    words[lane] = (words[lane] & ~np.uint32(0xF << (4 * pair))) | np.uint32((2 | 1 << 2) << (4 * pair))  # (2, 1)
    return words.view(np.int32)


def test_item9_checked_builtin_inside_jit():
    a, b, c, _ = zero_regs(I8_C4)
    bad = _bad_idx_i8()
    with pytest.raises(ValueError, match=r"lane 37\b.*pair 2\b"):      # eager: already a ValueError
        call_builtin(I8_C4, a, b, c, bad, check=True)
    assert_jit_reports(lambda i: call_builtin(I8_C4, a, b, c, i, check=True), (bad,), r"lane 37\b.*pair 2\b")


def _not_2_4():
    a = np.zeros((3, 8), np.float32)
    a[2, 4:8] = [1, 2, 3, 4]
    return a


def test_item9_compress_inside_jit():
    assert_jit_reports(jwmma.compress_2_4, (_not_2_4(),), r"a24 is not 2:4 sparse: row 2 group 1\b")


def test_item9_compress_under_vmap_is_a_value_error():
    with pytest.raises(ValueError, match="not 2:4 sparse"):
        jax.vmap(jwmma.compress_2_4)(_not_2_4())


def test_item9_gemm_inside_jit_names_a_and_keeps_the_hint(rng):
    a = rng.integers(1, 5, (16, 128)).astype(np.int8)      # dense: not 2:4
    b = rng.integers(-5, 5, (128, 16)).astype(np.int8)
    with pytest.raises(ValueError, match=r"\ba is not 2:4 sparse.*prune=True"):
        jwmma.gemm(a, b, builtin=I8_C4)
    assert_jit_reports(lambda a, b: jwmma.gemm(a, b, builtin=I8_C4), (a, b),
                       r"\ba is not 2:4 sparse.*prune=True", forbid=(r"\ba24\b",))


# ============================================================================== item 10
def test_item10_check_must_be_a_bool():
    a, b, c, idx = zero_regs(I8_C4)
    idx = idx + O.i32_reference(0x44444444)      # valid pairs (0, 1): only `check` is wrong
    for bad in ("yes", 2, 1.0):
        with pytest.raises(TypeError, match=r"\bcheck\b"):
            call_builtin(I8_C4, a, b, c, idx, check=bad)


def test_item10_index_set_must_be_an_int_not_a_bool():
    with pytest.raises(TypeError, match="index_set"):
        jwmma.pack_index(F16_C4, np.zeros((16, 32), np.int32), index_set=True)
    with pytest.raises(TypeError, match="index_set"):
        jwmma.unpack_index(F16_C4, np.zeros(64, np.int32), index_set=True)


def test_item10_traced_static_arguments_are_reported_as_such():
    pos = np.zeros((16, 32), np.int32)
    with pytest.raises((TypeError, ValueError), match="compile-time constant"):
        jax.jit(lambda s: jwmma.pack_index(F16_C4, pos, index_set=s))(1)
    with pytest.raises((TypeError, ValueError), match="compile-time constant"):
        jax.jit(lambda s: jwmma.unpack_index(F16_C4, np.zeros(64, np.int32), index_set=s))(1)
    a, b, c, idx = zero_regs(I8_C4)
    with pytest.raises((TypeError, ValueError), match="compile-time constant"):
        jax.jit(lambda s: call_builtin(I8_C4, a, b, c, idx, cbsz=s, abid=0))(0)


def test_item10_builtins_accept_model_strings_with_fields(rng):
    bt = O.TABLE[F16_C4]
    A = rng.standard_normal((bt.m, bt.kc)).astype(np.float16)
    B = rng.standard_normal((bt.k, bt.n)).astype(np.float16)
    args = (jwmma.pack_a(F16_C4, A), jwmma.pack_b(F16_C4, B), jwmma.pack_c(F16_C4, np.zeros((16, 16), np.float32)),
            jwmma.pack_index(F16_C4, np.tile([0, 1], (16, 16))))
    want = np.asarray(jwmma.smfmac_f32_16x16x64_f16(*args, model=jwmma.models.CDNA3(group=16)))
    got = np.asarray(jwmma.smfmac_f32_16x16x64_f16(*args, model="CDNA3(group=16)"))
    np.testing.assert_array_equal(bits(got), bits(want))
    a24 = np.zeros((16, 64), np.float16)
    a24[:, 0::4] = A[:, 0::2]
    a24[:, 1::4] = A[:, 1::2]
    g_want = np.asarray(jwmma.gemm(a24, B, builtin=F16_C4, model=jwmma.models.CDNA3(group=16)))
    np.testing.assert_array_equal(bits(jwmma.gemm(a24, B, builtin=F16_C4, model="CDNA3(group=16)")), bits(g_want))


def test_item10_unknown_model_error_lists_the_model_classes():
    a, b, c, idx = zero_regs(F16_C4)
    with pytest.raises(ValueError) as info:
        call_builtin(F16_C4, a, b, c, idx, model="nope")
    for word in ("exact", "cdna3", "CDNA3", "FusedGroups"):
        assert word in str(info.value), str(info.value)
    a, b, c, idx = zero_regs(IU8)
    with pytest.raises(ValueError) as info:
        call_builtin(IU8, a, b, c, idx, model="nope")
    assert "IntegerDot" in str(info.value), str(info.value)


def test_item10_dot_dtype_error_lists_the_integer_dtypes():
    with pytest.raises(TypeError) as info:
        jwmma.dot(np.zeros(4, np.float32), np.zeros(4, np.float32), np.float32(0))
    for name in ("float16", "bfloat16", "float8_e4m3fn", "int8", "uint8", "int4", "uint4"):
        assert name in str(info.value), str(info.value)


# ============================================================================== item 11
@pytest.mark.slow  # runs real GEMMs through the CLI/study: kept out of the default run's budget
@pytest.mark.parametrize("builtin", [F16_ACC, BF16_ACC])
def test_item11_gemm_cli_compares_in_the_destination_format(builtin):
    rc, out, err, exc = run_cli(["gemm", "--builtin", builtin, "-m", "32", "-n", "32", "-k", "32", "--model", "exact",
                                 "--json", "--no-progress"])
    assert exc is None and rc == 0, err[-1500:]
    row = json.loads(out)[0]
    assert row["ident"] == 1.0, {k: row[k] for k in ("ident", "max_abs_ulp") if k in row}
    assert row["max_abs_ulp"] == 0


# ============================================================================== item 12
@pytest.mark.slow  # runs real GEMMs through the CLI/study: kept out of the default run's budget
def test_item12_exact_is_order_dependent_at_gemm_level(rng):
    """The fact the docs must state: `exact` rounds to f32 after every K step (builtin call),
    so the order of the steps changes the result (here about 60% of the outputs)."""
    k = 8 * 64
    x = rng.standard_normal((32, k)) * 2.0 ** rng.integers(-8, 8, (32, k))
    a = np.asarray(jwmma.prune_2_4(x.astype(np.float16)))
    b = (rng.standard_normal((k, 32)) * 2.0 ** rng.integers(-8, 8, (k, 32))).astype(np.float16)
    d = np.asarray(jwmma.gemm(a, b, builtin=F16_C4, model="exact"))
    steps = [slice(s * 64, (s + 1) * 64) for s in range(8)][::-1]
    d_rev = np.asarray(jwmma.gemm(np.concatenate([a[:, s] for s in steps], 1),
                                  np.concatenate([b[s] for s in steps], 0), builtin=F16_C4, model="exact"))
    assert (bits(d) != bits(d_rev)).sum() > d.size // 10


def test_item12_docs_say_what_exact_means_for_a_gemm():
    doc = jwmma.gemm.__doc__ or ""
    assert "exact" in doc, "jwmma.gemm's docstring must say what model='exact' means for a whole GEMM"
    readme = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(jwmma.__file__))), "README.md")
    texts = [doc] + ([Path(readme).read_text()] if os.path.exists(readme) else [])
    for text in texts:
        flat = " ".join(text.split())
        assert not re.search(r"every model but\W+exact", flat), "exact is order dependent at GEMM level"


# ============================================================================== item 13
def _summary_row(ident, model="exact"):
    row = dict(dist="normal", format="fp8", model=model, remedy="none", K=128, seeds=1)
    row.update(mean_rel=1e-7, max_rel=2e-7, bias=0.0, ident=ident, mean_abs_ulp=0.01)
    return row


def test_item13_study_table_does_not_round_to_100_percent():
    text = jwmma.study.format_table([_summary_row(1 - 1 / 4096), _summary_row(1.0, "cdna3")])
    lines = text.strip().splitlines()
    assert "100.0%" not in lines[1], lines[1]
    assert lines[1].split()[-2] != lines[2].split()[-2], "an imperfect ident must not print like a perfect one"


def test_item13_study_dash_m_is_not_model():
    rc, out, err, exc = run_cli(["study", "--help"])
    assert rc == 0 and exc is None
    flat = " ".join(out.split())
    assert not re.search(r"--model(?: \S+)?, -m\b|(?<![\w-])-m(?: \S+)?, --model\b", flat), "-m means M in `jwmma gemm`"


@pytest.mark.slow  # runs real GEMMs through the CLI/study: kept out of the default run's budget
def test_item13_gemm_table_aligns_with_long_model_names():
    long_model = "FusedGroups(group=32, product_rounding='nearest')"
    rc, out, err, exc = run_cli(["gemm", "--builtin", F16_C4, "-m", "16", "-n", "16", "-k", "64", "--model",
                                 f"exact,{long_model}", "--no-progress"])
    assert exc is None and rc == 0, err[-1500:]
    lines = [ln for ln in out.splitlines() if ln.strip()]
    head = next(ln for ln in lines if ln.lstrip().startswith("model"))
    rows = [ln for ln in lines if ln.startswith("exact") or ln.startswith("FusedGroups")]
    assert len(rows) == 2, out
    col = head.index("time") + len("time")       # right-aligned column: values end under "time"
    for r in rows:
        m = re.search(r"\d+\.\d+s", r)
        assert m and m.end() == col, f"time column misaligned:\n{head}\n{r}"
