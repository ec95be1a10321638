"""`exact` model vs the scalar reference (tests/ref_models.py), bit for bit.

NUMERICS.md section 0: exact products, exact sum with C, one RNE rounding to the destination
(f32, or f16/bf16 accumulators), gradual underflow, overflow to Inf, IEEE specials, an exact
zero is +0 unless every term is -0. Covered: free-standing `jwmma.dot` for f16, bf16, fp8,
bf8 and the mixed fp8/bf8 pairs (K not a multiple of any group), 16-bit accumulators,
hypothesis inputs, and every float builtin of both architectures.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jwmma
import oracles.ref_models as R

PAIRS = [(R.F16, R.F16), (R.BF16, R.BF16), (R.FP8, R.FP8), (R.BF8, R.BF8), (R.FP8, R.BF8), (R.BF8, R.FP8)]
PAIR_IDS = [f"{a.name}x{b.name}" for a, b in PAIRS]


def run_dot(A, B, C, fa, fb, fc, model):
    d = jwmma.dot(R.from_codes(A, fa), R.from_codes(B, fb), R.from_codes(C, fc), model=model)
    return R.codes_of(np.asarray(d))


def check_rows(A, B, C, fa, fb, fc, model, ref, labels=None):
    got = run_dot(A, B, C, fa, fb, fc, model)
    bad = []
    for r in range(len(C)):
        want = ref([int(x) for x in A[r]], [int(x) for x in B[r]], int(C[r]))
        if not R.same_bits(int(got[r]), want, fc):
            bad.append((r, labels[r] if labels else "", hex(int(got[r])), hex(want)))
    assert not bad, f"{len(bad)} mismatches (row, scenario, got, want): {bad[:8]}"


# ------------------------------------------------------------------ the reference itself
def test_reference_rounding_matches_numpy():
    """R.encode (RNE, gradual underflow, overflow) agrees with numpy's float64 -> float32 /
    float16 casts and ml_dtypes' float32 -> bfloat16 / fp8 casts."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=4000) * np.exp2(rng.integers(-170, 140, size=4000).astype(float))
    x[:8] = [0.0, -0.0, 2.0**-149, -(2.0**-150), 2.0**-150 * 3, 3.4028235677973366e38, 2.0**128 - 2.0**103, 1e-46]
    for f, src in ((R.F32, np.float64), (R.F16, np.float64), (R.BF16, np.float32), (R.FP8, np.float32), (R.BF8, np.float32)):
        with np.errstate(over="ignore"):
            xs = x.astype(src)
            want = R.codes_of(xs.astype(f.dtype))
        srcf = R.F32 if src == np.float32 else None
        for v, w in zip(xs, want):
            if not np.isfinite(v):
                continue
            if srcf is not None:
                d = R.decode(int(R.codes_of(np.float32(v))), R.F32)
                n, e = (-d.sig if d.neg else d.sig), d.exp - 23
            else:
                m, e2 = np.frexp(v)
                n, e = int(m * 2.0**53), int(e2) - 53
            got = R.encode(f, n, e, neg_zero=bool(np.signbit(v)))
            if f.name == "fp8" and abs(v) > 464:
                continue  # ml_dtypes: NaN beyond 464 (issue #400); not a destination format
            assert R.same_bits(got, int(w), f), (f.name, v, hex(got), hex(int(w)))


def test_reference_exact_small_cases():
    one = int(R.codes_of(np.float16(1)))
    assert R.exact_dot([one], [one], 0xB0800000, R.F16, R.F16, R.F32) == 0x3F800000  # 1 - 2**-30 -> 1.0
    negz = int(R.codes_of(np.float16(-0.0)))
    assert R.exact_dot([negz], [one], 0x80000000, R.F16, R.F16, R.F32) == 0x80000000
    assert R.exact_dot([negz], [one], 0x00000000, R.F16, R.F16, R.F32) == 0
    assert R.exact_dot([one, one | 0x8000], [one, one], 0x80000000, R.F16, R.F16, R.F32) == 0  # cancellation: +0


# ------------------------------------------------------------------ free-standing dot
@pytest.mark.parametrize("fa,fb", PAIRS, ids=PAIR_IDS)
def test_exact_dot_mixed_scenarios(fa, fb):
    rng = np.random.default_rng(R.seed_of(fa.name, fb.name, "exact"))
    k = 21 if fa.bits == 16 else 37
    A, B, C, labels = R.gen_float_rows(rng, fa, fb, 280, k)
    check_rows(A, B, C, fa, fb, R.F32, "exact", lambda a, b, c: R.exact_dot(a, b, c, fa, fb, R.F32), labels)


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 2, 8, 16, 17, 64, 129])
@pytest.mark.parametrize("fa,fb", PAIRS, ids=PAIR_IDS)
def test_exact_dot_many_k(fa, fb, k):
    rng = np.random.default_rng(R.seed_of(fa.name, fb.name, k, "exact"))
    A, B, C, labels = R.gen_float_rows(rng, fa, fb, 400, k)
    check_rows(A, B, C, fa, fb, R.F32, "exact", lambda a, b, c: R.exact_dot(a, b, c, fa, fb, R.F32), labels)


@pytest.mark.parametrize("fa,fb,fc", [(R.F16, R.F16, R.F16), (R.BF16, R.BF16, R.BF16), (R.FP8, R.BF8, R.F16)],
                         ids=["f16->f16", "bf16->bf16", "fp8xbf8->f16"])
def test_exact_dot_16bit_accumulator(fa, fb, fc):
    """One RNE of the exact sum directly to f16/bf16 (no f32 step), C widened exactly."""
    rng = np.random.default_rng(7 + fc.bits + fa.bits)
    A, B, _, labels = R.gen_float_rows(rng, fa, fb, 200, 19)
    C = R.gen_acc16(rng, fc, (200,))
    check_rows(A, B, C, fa, fb, fc, "exact", lambda a, b, c: R.exact_dot(a, b, c, fa, fb, fc), labels)


@pytest.mark.parametrize("fa,group", [(R.F16, 4), (R.F16, 3), (R.BF16, 2), (R.BF16, 4), (R.FP8, 2)],
                         ids=["f16/4", "f16/3", "bf16/2", "bf16/4", "fp8/2"])
def test_exact_groups_equal_the_reference_per_group(fa, group):
    """Exact(group=L): each group's exact sum with the running accumulator, rounded once to
    f32 (NUMERICS.md 9.3), against exact_dot applied group by group. The scenarios include
    cancellation pairs, C about minus the product sum, bf16 products beyond f32 and below its
    subnormals; the extra rows put C = -(first product) (an exact cancellation of C and the
    group's largest term, so a small product decides) and ties."""
    rng = np.random.default_rng(R.seed_of(fa.name, group, "groups"))
    k = 4 * group
    A, B, C, labels = R.gen_float_rows(rng, fa, fa, 240, k)
    for r in range(0, 240, 3):  # C cancels the first product exactly where it is an f32
        p = float(R.from_codes(A[r, :1], fa)[0]) * float(R.from_codes(B[r, :1], fa)[0])  # exact in float64
        if np.isfinite(p) and p != 0 and abs(p) < 3e38 and float(np.float32(p)) == p:
            C[r] = int(R.codes_of(np.float32(-p)))
            labels[r] = "C = -p0"

    def per_group(a, b, c):
        for g in range(0, k, group):
            c = R.exact_dot(a[g:g + group], b[g:g + group], c, fa, fa, R.F32)
        return c

    check_rows(A, B, C, fa, fa, R.F32, f"Exact(group={group})", per_group, labels)


@pytest.mark.parametrize("k", [21, 32])
def test_exact_bf16_rows_of_close_exponents_equal_the_reference(k):
    """bf16 products whose exponents lie within a few dozen binades of each other take the
    error-free float64 sums (the whole batch decides; a wide row sends it to the exponent
    bands, which the other tests cover). Exponent centres across the whole range, spreads up to
    60 binades, exact cancellation pairs, subnormal factors, and C anything (huge, tiny, Inf,
    NaN, about minus a product)."""
    rng = np.random.default_rng(R.seed_of("bf16 close", k))
    n = 240
    centre_a = rng.integers(-135, 110, size=(n, 1))  # factor exponents: A's often subnormal
    centre_b = np.clip(rng.integers(-110, 100, size=(n, 1)) - centre_a, -110, 110)
    ea = np.clip(centre_a + rng.integers(-15, 16, size=(n, k)), -127, 127)
    eb = np.clip(centre_b + rng.integers(-15, 16, size=(n, k)), -127, 127)

    def codes(e):
        sign = rng.integers(0, 2, size=e.shape)
        mant = rng.integers(0, 128, size=e.shape) & np.where(rng.random(e.shape) < 0.5, ~31, ~0)
        field = e + 127  # field 0: a subnormal factor (its mantissa alone)
        return (sign << 15) | (field << 7) | mant

    A, B = codes(ea), codes(eb)
    pair = rng.random((n, k // 2)) < 0.3  # product 2j + 1 = -product 2j
    A[:, 1:2 * (k // 2):2][pair] = A[:, 0:2 * (k // 2):2][pair] ^ 0x8000
    B[:, 1:2 * (k // 2):2][pair] = B[:, 0:2 * (k // 2):2][pair]
    C = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.int64)
    C[:8] = [0x7F800000, 0xFF800000, 0x7FC00000, 0, 0x80000000, 1, 0x7F7FFFFF, 0x80800000]
    for r in range(8, n, 4):  # about minus the first product where it is an f32
        v = float(R.from_codes(A[r, :1], R.BF16)[0]) * float(R.from_codes(B[r, :1], R.BF16)[0])
        if v != 0 and abs(v) < 3e38:
            C[r] = int(R.codes_of(np.float32(-v)))
    exp_of = lambda x: np.maximum((x >> 7) & 0xFF, 1) - 127  # noqa: E731
    nonzero = ((A & 0x7FFF) != 0) & ((B & 0x7FFF) != 0)
    pe = exp_of(A) + exp_of(B)
    spread = np.where(nonzero, pe, -999).max(1) - np.where(nonzero, pe, 999).min(1)
    assert spread.max() <= 60 and (exp_of(A) == -126).any()  # the close rows, subnormal factors among them
    check_rows(A, B, C, R.BF16, R.BF16, R.F32, "exact", lambda a, b, c: R.exact_dot(a, b, c, R.BF16, R.BF16, R.F32))


def test_exact_double_rounding_is_avoided():
    """A sum exactly half an f16 ulp above a tie after an f32 step: f16 output must be one
    rounding of the exact value (f32 rounding first would lose the sticky bit)."""
    h = np.float16
    # 1 + 2**-11 (tie for f16) + 2**-40 (below f32 precision): exact -> rounds up
    a = np.array([[1, 2.0**-11, 2.0**-20]], h)
    b = np.array([[1, 1, 2.0**-20]], h)
    c = np.array([0], h)
    d = jwmma.dot(a, b, c, model="exact")
    assert int(R.codes_of(np.asarray(d))[0]) == int(R.codes_of(np.float16(1 + 2.0**-10)))


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
@pytest.mark.parametrize("fa,fb", [PAIRS[0], PAIRS[1], PAIRS[4]], ids=[PAIR_IDS[0], PAIR_IDS[1], PAIR_IDS[4]])
def test_exact_dot_hypothesis(fa, fb, data):
    k = 21 if fa.bits == 16 else 37  # the scenario test's shapes: no new compilation
    n = 280

    def codes(f):
        interesting = R.special_codes(f) + [0, 1 << (f.bits - 1), 1, (1 << f.mbits) - 1, (1 << f.mbits),
                                            R.make_code(f, 0, f.max_exp, (1 << f.mbits) - 2)]
        return st.lists(st.one_of(st.sampled_from(interesting), st.integers(0, (1 << f.bits) - 1)), min_size=k, max_size=k)

    cstrat = st.one_of(st.sampled_from([0, 0x80000000, 1, 0x80000001, 0x7F7FFFFF, 0xB0800000, 0x7F800000, 0x7FC00000]),
                       st.integers(0, 2**32 - 1))
    rows = data.draw(st.lists(st.tuples(codes(fa), codes(fb), cstrat), min_size=1, max_size=6))
    rep = n // len(rows) + 1
    A = np.array([r[0] for r in rows] * rep, np.int64)[:n]
    B = np.array([r[1] for r in rows] * rep, np.int64)[:n]
    C = np.array([r[2] for r in rows] * rep, np.int64)[:n]
    got = run_dot(A, B, C, fa, fb, R.F32, "exact")
    for r in range(len(rows)):
        want = R.exact_dot([int(x) for x in A[r]], [int(x) for x in B[r]], int(C[r]), fa, fb, R.F32)
        assert R.same_bits(int(got[r]), want, R.F32), (r, hex(int(got[r])), hex(want))


def test_exact_named_case_f16_tiny_negative_c():
    """NUMERICS 1.3's example under `exact`: f16 1*1 + (-2**-30) is 1.0 (0x3F800000)."""
    one = np.array([[1.0]], np.float16)
    c = np.array([-(2.0**-30)], np.float32)
    for model in ("exact",):
        assert R.codes_of(np.asarray(jwmma.dot(one, one, c, model=model)))[0] == 0x3F800000
    one8 = np.array([[1.0]], ml_dtypes.float8_e4m3fn)
    assert R.codes_of(np.asarray(jwmma.dot(one8, one8, c, model="exact")))[0] == 0x3F800000


# ------------------------------------------------------------------ through the builtins
FLOAT_BUILTINS = [n for n, s in jwmma.BUILTINS.items() if s.c_type != "i32" and not s.dense]  # dense WMMA: test_siblings
# (bf16 `exact` builtins compile slowly: one in the default run, the rest with -m slow)
DEFAULT_EXACT = {"smfmac_f32_32x32x64_bf8_fp8", "swmmac_bf16_16x16x32_bf16_w32"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in DEFAULT_EXACT else pytest.mark.slow)
                                  for n in FLOAT_BUILTINS])
def test_exact_builtin(name):
    """Two waves: NaN/Inf operands with poisoned pruned B rows, and finite operands (the
    builtins' branch without product specials); C carries specials in both."""
    spec = jwmma.BUILTINS[name]
    bad = R.builtin_float_mismatches(getattr(jwmma, name), spec, "exact", R.exact_dot, (name, "exact"))
    assert not bad, f"{name}: {len(bad)} mismatches (wave, (i, j), got, want): {bad[:6]}"
