"""`cdna3` (FusedGroups / CDNA3) vs the scalar reference (tests/ref_models.py), bit for bit.

Two published MMA-Sim versions are covered, both as jwmma presets/variants and as reference
parameter sets:

* ``"cdna3"`` = ``CDNA3()`` = MMA-Sim 2.x (PyPI): zero products take no part in the group
  maximum; the group sum is floored to F2+1 bits of Mx, added to C, renormalised and floored
  to F2 bits before the f32 RNE; a bf16 product >= 2**128 is an Inf product.
* ``CDNA3(zero_exponent=-126, renormalize=False)`` = GitHub c785138, which NUMERICS.md 1.3
  transcribes (zero factors have exponent -126; S floored to 31 bits of Mx, added exactly).

Plus the parametrised family (group, frac_bits, sum_bits, two_stage, product_rounding,
c_drop), the worked cases of NUMERICS 1.3 and every builtin the model applies to (C f32).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jwmma
import oracles.ref_models as R
from jwmma.models import CDNA3, FusedGroups

PAIRS = [(R.F16, R.F16), (R.BF16, R.BF16), (R.FP8, R.FP8), (R.BF8, R.BF8), (R.FP8, R.BF8), (R.BF8, R.FP8)]
PAIR_IDS = [f"{a.name}x{b.name}" for a, b in PAIRS]
C785138 = CDNA3(zero_exponent=-126, renormalize=False)
VARIANTS = [("cdna3", R.CDNA3_2X), (C785138, R.CDNA3_C785138)]
VARIANT_IDS = ["2.x", "c785138"]


def _ref_params(model) -> R.FusedParams:
    return R.FusedParams(**{k: getattr(model, k) for k in R.FusedParams.__dataclass_fields__})


def run_dot(A, B, C, fa, fb, model):
    d = jwmma.dot(R.from_codes(A, fa), R.from_codes(B, fb), R.from_codes(C, R.F32), model=model)
    return R.codes_of(np.asarray(d)).reshape(-1)


def check_rows(A, B, C, fa, fb, model, prm, labels=None):
    got = run_dot(A, B, C, fa, fb, model)
    bad = []
    for r in range(len(C)):
        want = R.cdna3_dot([int(x) for x in A[r]], [int(x) for x in B[r]], int(C[r]), fa, fb, prm)
        if not R.same_bits(int(got[r]), want, R.F32):
            bad.append((r, labels[r] if labels else "", hex(int(got[r])), hex(want)))
    assert not bad, f"{len(bad)} mismatches (row, scenario, got, want): {bad[:8]}"


def f32(x) -> int:
    return int(R.codes_of(np.float32(x)))


def dot1(a, b, c, dtype, model):
    """One output of jwmma.dot for python lists a, b and a float or bits C."""
    a = np.array([a], dtype)
    b = np.array([b], dtype)
    c = np.array([c], np.float32) if not isinstance(c, int) else np.array([c], np.uint32).view(np.float32)
    return int(R.codes_of(np.asarray(jwmma.dot(a, b, c, model=model))).reshape(-1)[0])


# ------------------------------------------------------------------ the reference itself
def test_reference_matches_mmasim_on_worked_examples():
    """The reference reproduces the hand-derived examples of NUMERICS 1.3 (independent of jwmma)."""
    one16, one8 = int(R.codes_of(np.float16(1))), int(R.codes_of(ml_dtypes.float8_e4m3fn(1)))
    for prm in (R.CDNA3_2X, R.CDNA3_C785138):
        assert R.cdna3_dot([one16], [one16], f32(-(2.0**-30)), R.F16, R.F16, prm) == 0x3F7FFFFF
        assert R.cdna3_dot([one8], [one8], f32(-(2.0**-30)), R.FP8, R.FP8, prm) == 0x3F800000
        assert R.cdna3_dot([one16], [one16], f32(2.0**-30), R.F16, R.F16, prm) == 0x3F800000
    zero, big = int(R.codes_of(np.float16(0))), int(R.codes_of(np.float16(2.0**10)))
    c = 0x80800001  # -(2**-126 + 2**-149)
    assert R.cdna3_dot([zero], [big], c, R.F16, R.F16, R.CDNA3_C785138) == 0x80800200  # -(2**-126 + 2**-140)
    assert R.cdna3_dot([zero], [big], c, R.F16, R.F16, R.CDNA3_2X) == c


# ------------------------------------------------------------------ free-standing dot
@pytest.mark.parametrize("model,prm", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("fa,fb", [pytest.param(a, b, marks=() if i in (0, 2, 4) else pytest.mark.slow)
                                   for i, (a, b) in enumerate(PAIRS)], ids=PAIR_IDS)
def test_cdna3_dot_mixed_scenarios(fa, fb, model, prm):
    """Random, uniform-code, cancellation, spread, subnormal, all-zero-group, tiny, NaN/Inf
    (E4M3 0x7F/0xFF) and bf16-overflow rows; C random/+-0/subnormal/tiny +-/huge/C-drop
    boundary/-sum/Inf/NaN. K = 21 (f16/bf16: groups 8, 8, 5) or 37 (fp8: 16, 16, 5)."""
    rng = np.random.default_rng(R.seed_of(fa.name, fb.name, str(prm)))
    k = 21 if fa.bits == 16 else 37
    A, B, C, labels = R.gen_float_rows(rng, fa, fb, 280, k)
    check_rows(A, B, C, fa, fb, model, prm, labels)


@pytest.mark.parametrize("fa,fb,k", [(R.FP8, R.BF8, 17), (R.F16, R.F16, 1), (R.BF8, R.BF8, 1)],
                         ids=["fp8xbf8-K17", "f16-K1", "bf8-K1"])
def test_cdna3_dot_group_of_one(fa, fb, k):
    """A last group of a single product (K = 16n + 1 in the two-stage path): its odd half is
    empty and adds nothing (MMA-Sim 2.x itself raises on an empty half)."""
    rng = np.random.default_rng(k + fa.bits)
    A, B, C, labels = R.gen_float_rows(rng, fa, fb, 60, k)
    check_rows(A, B, C, fa, fb, "cdna3", R.CDNA3_2X, labels)


@pytest.mark.slow
@pytest.mark.parametrize("k", [2, 8, 9, 16, 31, 64, 100])
@pytest.mark.parametrize("model,prm", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("fa,fb", PAIRS, ids=PAIR_IDS)
def test_cdna3_dot_many_k(fa, fb, model, prm, k):
    rng = np.random.default_rng(R.seed_of(fa.name, fb.name, str(prm), k))
    A, B, C, labels = R.gen_float_rows(rng, fa, fb, 400, k)
    check_rows(A, B, C, fa, fb, model, prm, labels)


@pytest.mark.parametrize("fa,fb,k", [(R.F16, R.F16, 8 * 17 + 3),
                                      pytest.param(R.FP8, R.BF8, 16 * 17 + 5, marks=pytest.mark.slow)],
                         ids=["f16-K139", "fp8xbf8-K277"])
def test_cdna3_dot_long_k_scan(fa, fb, k):
    """More than 16 full groups: the groups run through lax.scan, plus a partial group."""
    rng = np.random.default_rng(R.seed_of(fa.name, k, "scan"))
    A, B, C, labels = R.gen_float_rows(rng, fa, fb, 40, k)
    check_rows(A, B, C, fa, fb, "cdna3", R.CDNA3_2X, labels)


FAMILY = [
    (FusedGroups(group=4, frac_bits=20, sum_bits=26, product_rounding="nearest"), R.F16, R.F16, 13),
    (FusedGroups(group=32, two_stage=False, c_drop=True), R.FP8, R.FP8, 45),  # int64 product sums
    (FusedGroups(frac_bits=30, sum_bits=40, two_stage=True, product_rounding="floor"), R.BF16, R.BF16, 19),
    (FusedGroups(group=5, two_stage=True), R.BF8, R.BF8, 23),  # odd groups and halves
    (FusedGroups(group=16, two_stage=True, c_drop=False, renormalize=False), R.FP8, R.BF8, 37),
    (CDNA3(zero_exponent=-126), R.F16, R.F16, 21),  # hybrid: c785138 zeros, 2.x combine
    (CDNA3(renormalize=False), R.BF16, R.BF16, 21),  # hybrid: 2.x zeros, c785138 combine/overflow
    (CDNA3(zero_exponent=-20, product_rounding="nearest"), R.BF8, R.FP8, 33),
    (FusedGroups(frac_bits=28, sum_bits=30), R.F16, R.F16, 13),  # widest float-alignment path
    (FusedGroups(frac_bits=29, sum_bits=33), R.F16, R.F16, 13),  # integer alignment path
    (FusedGroups(frac_bits=6, sum_bits=12, zero_exponent=-126), R.FP8, R.BF8, 21),  # frac_bits < mab
]


@pytest.mark.parametrize("model,fa,fb,k", [pytest.param(*row, marks=() if i % 2 == 0 else pytest.mark.slow)
                                           for i, row in enumerate(FAMILY)],
                         ids=[f"{i}-{m.describe()[:40]}" for i, (m, *_) in enumerate(FAMILY)])
def test_fused_family(model, fa, fb, k):
    """Every parameter of FusedGroups against the parametrised reference."""
    rng = np.random.default_rng(R.seed_of(model.describe(), k))
    A, B, C, labels = R.gen_float_rows(rng, fa, fb, 160, k)
    check_rows(A, B, C, fa, fb, model, _ref_params(model), labels)


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
@pytest.mark.parametrize("model,prm", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("fa,fb", [PAIRS[1], PAIRS[4]], ids=[PAIR_IDS[1], PAIR_IDS[4]])
def test_cdna3_dot_hypothesis(fa, fb, model, prm, data):
    k = 21 if fa.bits == 16 else 37  # same shapes as the scenario test: no new compilation
    n = 280

    def codes(f):
        interesting = R.special_codes(f) + [0, 1 << (f.bits - 1), 1, (1 << f.mbits) - 1, 1 << f.mbits,
                                            R.make_code(f, 0, f.max_exp, (1 << f.mbits) - 1),
                                            R.make_code(f, 1, f.max_exp, 3), R.make_code(f, 0, 0, 0)]
        return st.lists(st.one_of(st.sampled_from(interesting), st.integers(0, (1 << f.bits) - 1)), min_size=k, max_size=k)

    cstrat = st.one_of(st.sampled_from([0, 0x80000000, 1, 0x80000001, 0x80800001, 0xB0800000, 0x30800000,
                                        0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000]),
                       st.integers(0, 2**32 - 1))
    rows = data.draw(st.lists(st.tuples(codes(fa), codes(fb), cstrat), min_size=1, max_size=6))
    A = np.array([r[0] for r in rows] * (n // len(rows) + 1), np.int64)[:n]
    B = np.array([r[1] for r in rows] * (n // len(rows) + 1), np.int64)[:n]
    C = np.array([r[2] for r in rows] * (n // len(rows) + 1), np.int64)[:n]
    got = run_dot(A, B, C, fa, fb, model)
    for r in range(len(rows)):
        want = R.cdna3_dot([int(x) for x in A[r]], [int(x) for x in B[r]], int(C[r]), fa, fb, prm)
        assert R.same_bits(int(got[r]), want, R.F32), (r, hex(int(got[r])), hex(want))


# ------------------------------------------------------------------ NUMERICS 1.3 worked cases
@pytest.mark.parametrize("model", ["cdna3", C785138], ids=VARIANT_IDS)
def test_f16_tiny_negative_c_is_floored(model):
    """f16 1*1 + (-2**-30): C is floored to 24 fractional bits of Mx = 0, giving -2**-24, so
    the result is 0x3F7FFFFF (0.99999994) instead of the exact 1.0 (both MMA-Sim versions)."""
    assert dot1([1.0], [1.0], -(2.0**-30), np.float16, model) == 0x3F7FFFFF
    assert dot1([1.0], [1.0], -(2.0**-30), np.float16, "exact") == 0x3F800000


@pytest.mark.parametrize("dtype", [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2], ids=["fp8", "bf8"])
@pytest.mark.parametrize("model", ["cdna3", C785138], ids=VARIANT_IDS)
def test_fp8_path_drops_far_c(model, dtype):
    """fp8 path: the same C (ec = -30 < Mx - 25) is dropped: 1.0."""
    assert dot1([1.0], [1.0], -(2.0**-30), dtype, model) == 0x3F800000
    # at the boundary ec = Mx - 25 it is kept (floored to -2**-24)
    assert dot1([1.0], [1.0], -(2.0**-25), dtype, model) == 0x3F7FFFFF
    assert dot1([1.0], [1.0], -(2.0**-26), dtype, model) == 0x3F800000


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn], ids=["f16", "bf16", "fp8"])
@pytest.mark.parametrize("model", ["cdna3", C785138], ids=VARIANT_IDS)
def test_positive_tiny_c_disappears(model, dtype):
    assert dot1([1.0], [1.0], 2.0**-30, dtype, model) == 0x3F800000
    assert dot1([1.0], [1.0], 2.0**-149, dtype, model) == 0x3F800000


def test_all_zero_group_c785138_vs_2x():
    """NUMERICS 1.3: f16 ``0 * 2**10`` with C = -(2**-126 + 2**-149).

    c785138 (what NUMERICS transcribes): the zero factor has exponent -126, so the zero
    product has E = -126 + 10 = -116 = Mx and C is floored on the 2**(Mx-24) = 2**-140 grid:
    -(2**-126 + 2**-140) = 0x80800200.

    MMA-Sim 2.x (the default "cdna3" preset): zero products take no part in the maximum
    (``e[s == 0] = -999``), so Mx = ec = -126, C's 24 bits are kept exactly and the result
    is C itself, 0x80800001. This is the one worked example whose answer differs between the
    two versions."""
    c = 0x80800001
    assert dot1([0.0], [2.0**10], c, np.float16, C785138) == 0x80800200
    assert dot1([0.0], [2.0**10], c, np.float16, "cdna3") == 0x80800001
    assert dot1([0.0], [2.0**10], c, np.float16, "exact") == 0x80800001


@pytest.mark.parametrize("model", ["cdna3", C785138], ids=VARIANT_IDS)
def test_negative_c_contributes_at_least_one_unit(model):
    """16-bit path: any nonzero negative C takes at least -1 unit of 2**(Mx-24)."""
    assert dot1([1.0], [1.0], -(2.0**-149), np.float16, model) == 0x3F7FFFFF
    # products truncated toward zero, C floored: -(1 + 2**-30) product-free: C alone is exact
    assert dot1([0.0], [0.0], -(2.0**-149), np.float16, "cdna3") == 0x80000001


def test_exact_zero_is_positive():
    for model in ("cdna3", C785138):
        assert dot1([1.0, -1.0], [1.0, 1.0], -0.0, np.float16, model) == 0
        assert dot1([-0.0], [1.0], -0.0, np.float16, model) == 0


def test_bf16_overflow_corner_between_versions():
    """bf16 products >= 2**128. Group 1 overflows to +Inf; group 2 holds a product <= -2**128.
    c785138: the float64 sum of group 2 (finite products + C = +Inf) is +Inf, returned before
    the overflow rule: +Inf. MMA-Sim 2.x: the overflowing product is -Inf and meets C = +Inf:
    NaN. (NUMERICS 1.3 last bullet: no hardware evidence either way.)"""
    big = 2.0**100
    a = [big] + [0.0] * 7 + [-big] + [0.0] * 7
    b = [big] + [0.0] * 7 + [big] + [0.0] * 7
    assert dot1(a, b, 0.0, ml_dtypes.bfloat16, C785138) == 0x7F800000
    assert R.is_nan(dot1(a, b, 0.0, ml_dtypes.bfloat16, "cdna3"), R.F32)
    # one group with both signs of overflow: NaN in both; one sign and C = -Inf:
    assert R.is_nan(dot1([big, -big], [big, big], 0.0, ml_dtypes.bfloat16, C785138), R.F32)
    assert dot1([big, 1.0], [big, 1.0], 0xFF800000, ml_dtypes.bfloat16, C785138) == 0xFF800000
    assert R.is_nan(dot1([big, 1.0], [big, 1.0], 0xFF800000, ml_dtypes.bfloat16, "cdna3"), R.F32)
    # overflow is decided before any cancellation: 2**200 - 2**199 is NaN, not 2**199
    for model in ("cdna3", C785138):
        assert R.is_nan(dot1([big, -big], [big, big * 0.5], 0.0, ml_dtypes.bfloat16, model), R.F32)


@pytest.mark.parametrize("model", ["cdna3", C785138], ids=VARIANT_IDS)
def test_tiny_negative_result_rounds_to_negative_zero(model):
    """bf16 (-2**-133) * 2**-133 + 0: the sum is floored to -1 unit of the 2**-157/-158 grid,
    which the final RNE takes to -0.0 (IEEE: a nonzero negative value rounding to zero).
    NUMERICS 1.3's "exact zero -> +0" is about R == 0 only; MMA-Sim 2.x gives -0.0 too."""
    bits = dot1([-(2.0**-133)], [2.0**-133], 0.0, ml_dtypes.bfloat16, model)
    assert bits == 0x80000000
    assert bits == R.cdna3_dot([int(R.codes_of(ml_dtypes.bfloat16(-(2.0**-133))))],
                               [int(R.codes_of(ml_dtypes.bfloat16(2.0**-133)))], 0, R.BF16, R.BF16,
                               R.CDNA3_2X if model == "cdna3" else R.CDNA3_C785138)


@pytest.mark.parametrize("model", ["cdna3", C785138], ids=VARIANT_IDS)
def test_f32_overflow_tie(model):
    """C = FLT_MAX plus a product of exactly half an ulp (2**103) is a tie that rounds to
    even, i.e. up to Inf, in every model. With a further tiny negative product the exact sum
    is below the tie (FLT_MAX under `exact`), but cdna3 truncates that product to nothing on
    the 2**(103-24) grid and still overflows."""
    bf = ml_dtypes.bfloat16
    assert dot1([2.0**51, 0.0], [2.0**52, 0.0], 0x7F7FFFFF, bf, model) == 0x7F800000
    assert dot1([2.0**51, -(2.0**-50)], [2.0**52, 2.0**-50], 0x7F7FFFFF, bf, model) == 0x7F800000
    assert dot1([2.0**51, -(2.0**-50)], [2.0**52, 2.0**-50], 0x7F7FFFFF, bf, "exact") == 0x7F7FFFFF
    assert dot1([2.0**51, 0.0], [2.0**52, 0.0], 0x7F7FFFFF, bf, "exact") == 0x7F800000


def test_cdna3_refuses_16bit_accumulators():
    with pytest.raises(ValueError):
        jwmma.dot(np.ones((1, 4), np.float16), np.ones((1, 4), np.float16), np.zeros(1, np.float16), model="cdna3")
    spec = jwmma.BUILTINS["swmmac_f16_16x16x32_f16_w32"]
    with pytest.raises(ValueError):
        jwmma.swmmac_f16_16x16x32_f16_w32(np.zeros((32, 8), np.float16), np.zeros((32, 16), np.float16),
                                          np.zeros((32, 8), np.float16), np.zeros(32, np.int32), model="cdna3")
    assert spec.c_type == "f16"


# ------------------------------------------------------------------ through the builtins
CDNA3_BUILTINS = [n for n, s in jwmma.BUILTINS.items() if s.c_type == "f32" and not s.dense]  # dense WMMA: test_siblings
DEFAULT_CDNA3 = {"smfmac_f32_16x16x128_bf8_fp8", "smfmac_f32_32x32x32_bf16", "swmmac_f32_16x16x32_f16_w32"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in DEFAULT_CDNA3 else pytest.mark.slow)
                                  for n in CDNA3_BUILTINS])
def test_cdna3_builtin(name):
    """Groups of 16 (8-bit) / 8 (16-bit) consecutive compressed products, even/odd split in
    compressed order (NUMERICS 1.4). Two waves: NaN/Inf operands with poisoned pruned B rows
    (must not leak), and finite operands (the builtins' branch without product specials)."""
    spec = jwmma.BUILTINS[name]
    ref = lambda a, b, c, fa, fb, fc: R.cdna3_dot(a, b, c, fa, fb, R.CDNA3_2X)  # noqa: E731
    bad = R.builtin_float_mismatches(getattr(jwmma, name), spec, "cdna3", ref, (name, "cdna3"))
    assert not bad, f"{name}: {len(bad)} mismatches (wave, (i, j), got, want): {bad[:6]}"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["smfmac_f32_16x16x64_f16", "smfmac_f32_16x16x128_fp8_bf8", "smfmac_f32_32x32x32_bf16"])
def test_c785138_builtin(name):
    spec = jwmma.BUILTINS[name]
    ref = lambda a, b, c, fa, fb, fc: R.cdna3_dot(a, b, c, fa, fb, R.CDNA3_C785138)  # noqa: E731
    bad = R.builtin_float_mismatches(getattr(jwmma, name), spec, C785138, ref, (name, "c785138"))
    assert not bad, f"{name}: {len(bad)} mismatches (wave, (i, j), got, want): {bad[:6]}"
