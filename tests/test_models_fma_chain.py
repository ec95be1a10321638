"""`fma_chain_k` (the earlier `fma_chain`: `FMAChain()`'s defaults) vs the scalar reference
(tests/ref_models.py), bit for bit. rocjitsu's choices (the ``fma_chain`` preset: register
order, bf16 truncation, NaN propagation) are tested in test_fma_chain_rocjitsu.py.

acc <- RN_f32(a_k * b_k + acc) for k in compressed-K order (one correct rounding per step, an
f32 FMA), IEEE specials and signed zeros, subnormals kept; a 16-bit C is widened exactly and
the f32 result rounded once to f16/bf16 at the end. Covered: `jwmma.dot` for every operand
pair, 16-bit accumulators, hypothesis inputs and every float builtin.
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


def run_dot(A, B, C, fa, fb, fc):
    d = jwmma.dot(R.from_codes(A, fa), R.from_codes(B, fb), R.from_codes(C, fc), model="fma_chain_k")
    return R.codes_of(np.asarray(d)).reshape(-1)


def check_rows(A, B, C, fa, fb, fc, labels=None, n_check=None):
    got = run_dot(A, B, C, fa, fb, fc)
    bad = []
    for r in range(n_check or len(C)):
        want = R.fma_chain_dot([int(x) for x in A[r]], [int(x) for x in B[r]], int(C[r]), fa, fb, fc)
        if not R.same_bits(int(got[r]), want, fc):
            bad.append((r, labels[r] if labels else "", hex(int(got[r])), hex(want)))
    assert not bad, f"{len(bad)} mismatches (row, scenario, got, want): {bad[:8]}"


def test_reference_fma_chain_small_cases():
    h = lambda x: int(R.codes_of(np.float16(x)))  # noqa: E731
    # one rounding per step: 1 + 2**-24 (tie, to even: 1) then + 2**-24 again -> still 1
    assert R.fma_chain_dot([h(1), h(2.0**-12), h(2.0**-12)], [h(1), h(2.0**-12), h(2.0**-12)], 0, R.F16, R.F16, R.F32) == 0x3F800000
    # exact would give 1 + 2**-23
    assert R.exact_dot([h(1), h(2.0**-12), h(2.0**-12)], [h(1), h(2.0**-12), h(2.0**-12)], 0, R.F16, R.F16, R.F32) == 0x3F800001
    # -0 + (-0 * 1) = -0; +0 + (-0) = +0
    assert R.fma_chain_dot([h(-0.0)], [h(1)], 0x80000000, R.F16, R.F16, R.F32) == 0x80000000
    assert R.fma_chain_dot([h(-0.0)], [h(1)], 0, R.F16, R.F16, R.F32) == 0
    # an f32 overflow in the middle of the chain stays Inf (exact: 2**128 - 2**128 = 0)
    bf = lambda x: int(R.codes_of(ml_dtypes.bfloat16(x)))  # noqa: E731
    a, b = [bf(2.0**64), bf(2.0**64)], [bf(2.0**64), bf(-(2.0**64))]
    assert R.fma_chain_dot(a, b, 0, R.BF16, R.BF16, R.F32) == 0x7F800000
    assert R.exact_dot(a, b, 0, R.BF16, R.BF16, R.F32) == 0


@pytest.mark.parametrize("fa,fb", PAIRS, ids=PAIR_IDS)
def test_fma_chain_dot_mixed_scenarios(fa, fb):
    rng = np.random.default_rng(R.seed_of(fa.name, fb.name, "fma"))
    k = 21 if fa.bits == 16 else 37
    A, B, C, labels = R.gen_float_rows(rng, fa, fb, 280, k)
    check_rows(A, B, C, fa, fb, R.F32, labels)


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 2, 16, 64, 130])
@pytest.mark.parametrize("fa,fb", PAIRS, ids=PAIR_IDS)
def test_fma_chain_dot_many_k(fa, fb, k):
    """k = 130 goes through lax.scan (more than 16 steps unrolled)."""
    rng = np.random.default_rng(R.seed_of(fa.name, fb.name, k, "fma"))
    A, B, C, labels = R.gen_float_rows(rng, fa, fb, 300, k)
    check_rows(A, B, C, fa, fb, R.F32, labels)


@pytest.mark.parametrize("fa,fb,fc", [(R.F16, R.F16, R.F16), (R.BF16, R.BF16, R.BF16), (R.BF8, R.FP8, R.BF16)],
                         ids=["f16->f16", "bf16->bf16", "bf8xfp8->bf16"])
def test_fma_chain_dot_16bit_accumulator(fa, fb, fc):
    rng = np.random.default_rng(R.seed_of(fa.name, fc.name, "fma16"))
    A, B, _, labels = R.gen_float_rows(rng, fa, fb, 200, 19)
    C = R.gen_acc16(rng, fc, (200,))
    check_rows(A, B, C, fa, fb, fc, labels)


def test_fma_chain_16bit_accumulator_rounds_twice():
    """The chain runs in f32 and is rounded to f16 once at the end: 1 + 2**-11 + 2**-30 is
    1 + 2**-11 in f32 (a tie for f16), which then rounds to even (1.0). `exact` rounds up."""
    a = np.array([[1, 2.0**-11, 2.0**-15]], np.float16)
    b = np.array([[1, 1, 2.0**-15]], np.float16)
    c = np.zeros(1, np.float16)
    fma = int(R.codes_of(np.asarray(jwmma.dot(a, b, c, model="fma_chain_k"))).reshape(-1)[0])
    assert fma == int(R.codes_of(np.float16(1.0)))
    ref = R.fma_chain_dot(list(R.codes_of(a)[0]), list(R.codes_of(b)[0]), 0, R.F16, R.F16, R.F16)
    assert ref == fma


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
@pytest.mark.parametrize("fa,fb", [PAIRS[0], PAIRS[3]], ids=[PAIR_IDS[0], PAIR_IDS[3]])
def test_fma_chain_dot_hypothesis(fa, fb, data):
    k = 21 if fa.bits == 16 else 37  # the scenario test's shapes: no new compilation
    n = 280

    def codes(f):
        interesting = R.special_codes(f) + [0, 1 << (f.bits - 1), 1, 1 << f.mbits,
                                            R.make_code(f, 0, f.max_exp, (1 << f.mbits) - 1)]
        return st.lists(st.one_of(st.sampled_from(interesting), st.integers(0, (1 << f.bits) - 1)), min_size=k, max_size=k)

    cstrat = st.one_of(st.sampled_from([0, 0x80000000, 1, 0x80000001, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0x7FC00000]),
                       st.integers(0, 2**32 - 1))
    rows = data.draw(st.lists(st.tuples(codes(fa), codes(fb), cstrat), min_size=1, max_size=6))
    rep = n // len(rows) + 1
    A = np.array([r[0] for r in rows] * rep, np.int64)[:n]
    B = np.array([r[1] for r in rows] * rep, np.int64)[:n]
    C = np.array([r[2] for r in rows] * rep, np.int64)[:n]
    check_rows(A, B, C, fa, fb, R.F32, n_check=len(rows))


# ------------------------------------------------------------------ through the builtins
FLOAT_BUILTINS = [n for n, s in jwmma.BUILTINS.items() if s.c_type != "i32" and not s.dense]  # dense WMMA: test_siblings
DEFAULT_FMA = {"smfmac_f32_16x16x64_bf16", "smfmac_f32_16x16x128_fp8_bf8", "swmmac_bf16_16x16x32_bf16_w32",
               "swmmac_f32_16x16x32_bf8_bf8_w32"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in DEFAULT_FMA else pytest.mark.slow)
                                  for n in FLOAT_BUILTINS])
def test_fma_chain_builtin(name):
    spec = jwmma.BUILTINS[name]
    bad = R.builtin_float_mismatches(getattr(jwmma, name), spec, "fma_chain_k", R.fma_chain_dot, (name, "fma"))
    assert not bad, f"{name}: {len(bad)} mismatches (wave, (i, j), got, want): {bad[:6]}"
