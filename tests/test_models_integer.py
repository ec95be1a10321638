"""Integer models (IntegerDot: `exact` = final staging, `staged_clamp`) vs the reference.

NUMERICS.md section 4: exact products and sums; no clamp: (C + sum) mod 2**32; clamp with
'final': one saturation to [-2**31, 2**31-1]; clamp with 'staged' (GoC, RDNA4 SWMMAC):
saturate after C + stage 0 and again after + stage 1, stage 0 = the first half of the
products in K order (compressed ck < Kc/2; GoC's gfx1201 digests, tests/test_integer_clamp_hardware.py). Covered: `jwmma.dot` for int8/uint8/int4/uint4, and every integer builtin
with signed/unsigned operands and clamp on/off, plus the worked example of section 4.
"""
from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jwmma
import oracles.ref_models as R

INT_DTYPES = {"i8": (np.int8, 8, True), "u8": (np.uint8, 8, False), "i4": (ml_dtypes.int4, 4, True),
              "u4": (ml_dtypes.uint4, 4, False)}


def _rand(rng, bits, signed, size):
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    v = rng.integers(lo, hi + 1, size=size)
    ext = rng.random(size=size)  # a quarter of the values at the extremes
    v = np.where(ext < 0.125, lo, np.where(ext < 0.25, hi, v))
    return v


def test_reference_integer_rules():
    assert R.wrap32(2**31) == -(2**31) and R.wrap32(-(2**31) - 1) == 2**31 - 1
    assert R.int_dot([127] * 8 + [-127] * 8, [127] * 16, 2**31 - 101, clamp=True, staging="final") == 2147483547
    assert R.int_dot([127] * 8 + [-127] * 8, [127] * 16, 2**31 - 101, clamp=True, staging="staged") == 2147354615
    assert R.int_dot([127] * 8 + [-127] * 8, [127] * 16, 2**31 - 101, clamp=False) == 2147483547
    assert R.int_dot([255] * 4, [255] * 4, 2**31 - 1, clamp=False) == R.wrap32(2**31 - 1 + 4 * 255 * 255)


@pytest.mark.parametrize("model,staging", [("exact", "final"), ("staged_clamp", "staged")])
@pytest.mark.parametrize("clamp", [False, True], ids=["wrap", "clamp"])
@pytest.mark.parametrize("ta,tb", [("i8", "i8"), ("u8", "u8"), ("i8", "u8"), ("u4", "i4")])
def test_integer_dot(ta, tb, clamp, model, staging):
    da, ba, sa = INT_DTYPES[ta]
    db, bb, sb = INT_DTYPES[tb]
    rng = np.random.default_rng(R.seed_of(ta, tb, clamp, model))
    n, k = 300, 40  # stages: 0..19 | 20..39
    a = _rand(rng, ba, sa, (n, k))
    b = _rand(rng, bb, sb, (n, k))
    c = rng.integers(-(2**31), 2**31, size=n)
    c[: n // 3] = 2**31 - 1 - rng.integers(0, 2**17, size=n // 3)
    c[n // 3: 2 * n // 3] = -(2**31) + rng.integers(0, 2**17, size=n // 3)
    # rows whose two stages push C beyond the limit in opposite directions
    a_hi, a_lo = ((1 << (ba - 1)) - 1, -(1 << (ba - 1))) if sa else ((1 << ba) - 1, 0)
    a[:20, :20], a[:20, 20:], b[:20] = a_hi, a_lo, (1 << (bb - 1)) - 1
    got = np.asarray(jwmma.dot(a.astype(da), b.astype(db), c.astype(np.int32), model=model, clamp=clamp))
    want = [R.int_dot(list(a[r]), list(b[r]), int(c[r]), clamp, staging) for r in range(n)]
    bad = [(r, int(got[r]), want[r]) for r in range(n) if int(got[r]) != want[r]]
    assert not bad, bad[:8]


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(rows=st.lists(st.tuples(st.lists(st.integers(-128, 127), min_size=40, max_size=40),
                               st.lists(st.integers(-128, 127), min_size=40, max_size=40),
                               st.one_of(st.sampled_from([2**31 - 1, -(2**31), 0, 2**31 - 101]),
                                         st.integers(-(2**31), 2**31 - 1))), min_size=1, max_size=5),
       clamp=st.booleans())
def test_integer_dot_hypothesis(rows, clamp):
    """i8 x i8, K = 40, staged and final clamps (same shapes as test_integer_dot)."""
    n = 300
    rep = n // len(rows) + 1
    a = np.array([r[0] for r in rows] * rep)[:n].astype(np.int8)
    b = np.array([r[1] for r in rows] * rep)[:n].astype(np.int8)
    c = np.array([r[2] for r in rows] * rep)[:n].astype(np.int32)
    for model, staging in (("exact", "final"), ("staged_clamp", "staged")):
        got = np.asarray(jwmma.dot(a, b, c, model=model, clamp=clamp))
        for r in range(len(rows)):
            assert int(got[r]) == R.int_dot(rows[r][0], rows[r][1], rows[r][2], clamp, staging)


# ------------------------------------------------------------------ through the builtins
INT_BUILTINS = [n for n, s in jwmma.BUILTINS.items() if s.c_type == "i32" and s.family in ("RDNA4 SWMMAC", "CDNA4 SMFMAC")]
RDNA4_INT = [n for n in INT_BUILTINS if jwmma.BUILTINS[n].signed_choice]
CDNA4_INT = [n for n in INT_BUILTINS if not jwmma.BUILTINS[n].signed_choice]
DEFAULT_INT = {
    ("swmmac_i32_16x16x32_iu8_w32", True, True, True, "staged_clamp"),
    ("swmmac_i32_16x16x32_iu8_w32", False, True, True, "exact"),
    ("swmmac_i32_16x16x32_iu8_w32", True, False, False, "staged_clamp"),
    ("swmmac_i32_16x16x32_iu4_w32", False, False, True, "staged_clamp"),
    ("swmmac_i32_16x16x32_iu4_w32", True, True, False, "exact"),
    ("swmmac_i32_16x16x64_iu4_w32", True, False, True, "staged_clamp"),
    ("swmmac_i32_16x16x64_iu4_w32", False, True, True, "exact"),
}
RDNA4_CASES = [
    pytest.param(n, an, bn, cl, m, marks=() if (n, an, bn, cl, m) in DEFAULT_INT else pytest.mark.slow,
                 id=f"{n}-a{'s' if an else 'u'}-b{'s' if bn else 'u'}-{'clamp' if cl else 'wrap'}-{m}")
    for n in RDNA4_INT for an, bn in itertools.product([True, False], repeat=2)
    for cl in (True, False) for m in ("exact", "staged_clamp")
]


def _elem_bits(t):
    return {"iu8": 8, "i8": 8, "iu4": 4}[t]


@pytest.mark.parametrize("name,a_neg,b_neg,clamp,model", RDNA4_CASES)
def test_rdna4_integer_builtin(name, a_neg, b_neg, clamp, model):
    spec = jwmma.BUILTINS[name]
    bits = _elem_bits(spec.a_type)
    rng = np.random.default_rng(R.seed_of(name, a_neg, b_neg, clamp, model))
    A, pos, B, C = R.gen_builtin_int(rng, bits, a_neg, bits, b_neg, spec.m, spec.n, spec.k)
    got = R.run_builtin(getattr(jwmma, name), spec, A, pos, B, C, model=model, a_neg=a_neg, b_neg=b_neg, clamp=clamp)
    staging = "staged" if model == "staged_clamp" else "final"

    def ref(a, b, c):  # decode the stored codes with the builtin's signedness flags
        a = [R.int_decode(x, bits, a_neg) for x in a]
        b = [R.int_decode(x, bits, b_neg) for x in b]
        return R.int_dot(a, b, c, clamp, staging)

    want = R.builtin_ref(spec, A, pos, B, C, ref)
    bad = R.mismatches(got, want, None)
    assert not bad, f"{len(bad)} mismatches: {bad[:6]}"


@pytest.mark.parametrize("name,model", [pytest.param(n, m, marks=() if (n, m) == (CDNA4_INT[0], "exact") else pytest.mark.slow)
                                        for n in CDNA4_INT for m in ("exact", "staged_clamp")])
def test_cdna4_integer_builtin_wraps(name, model):
    """gfx950 i8 SMFMAC: signed x signed, no clamp operand: always wraps mod 2**32."""
    spec = jwmma.BUILTINS[name]
    rng = np.random.default_rng(R.seed_of(name, model))
    A, pos, B, C = R.gen_builtin_int(rng, 8, True, 8, True, spec.m, spec.n, spec.k)
    got = R.run_builtin(getattr(jwmma, name), spec, A, pos, B, C, model=model)
    want = R.builtin_ref(spec, A, pos, B, C, lambda a, b, c: R.int_dot(
        [R.int_decode(x, 8, True) for x in a], [R.int_decode(x, 8, True) for x in b], c, False))
    bad = R.mismatches(got, want, None)
    assert not bad, f"{len(bad)} mismatches: {bad[:6]}"


def test_staged_clamp_worked_example():
    """NUMERICS 4: C = 2**31 - 101, stage sums +16129*8 and -16129*8 (127*127 products):
    a single (final) clamp gives 2147483547, the staged clamp 2147354615 (stage 0 saturates
    to 2**31 - 1 first). Through swmmac_i32_16x16x32_iu8_w32 with clamp=True, signed A/B;
    stage 0 = compressed positions 0..7, stage 1 = 8..15."""
    name = "swmmac_i32_16x16x32_iu8_w32"
    spec = jwmma.BUILTINS[name]
    A = np.tile(np.array([127] * 8 + [-127] * 8), (spec.m, 1))
    B = np.full((spec.k, spec.n), 127)
    pos = np.tile(np.array([0, 2]), (spec.m, spec.kc // 2))
    C = np.full((spec.m, spec.n), 2**31 - 101)
    fn = jwmma.swmmac_i32_16x16x32_iu8_w32
    staged = R.run_builtin(fn, spec, A, pos, B, C, model=None, a_neg=True, b_neg=True, clamp=True)
    single = R.run_builtin(fn, spec, A, pos, B, C, model="exact", a_neg=True, b_neg=True, clamp=True)
    assert spec.default_model == "staged_clamp"
    assert (staged == 2147354615).all()
    assert (single == 2147483547).all()
    # the same through the public packing helpers
    d = fn(True, jwmma.pack_a(name, A.astype(np.int8)), True, jwmma.pack_b(name, B.astype(np.int8)),
           jwmma.pack_c(name, C.astype(np.int32)), jwmma.pack_index(name, pos), True)
    assert (np.asarray(jwmma.unpack_c(name, d)) == 2147354615).all()


@pytest.mark.parametrize("batch,m,n,k", [((2,), 37, 21, 3), ((2,), 37, 21, 13), ((2,), 37, 21, 53), ((2,), 37, 21, 67),
                                         ((3, 2), 53, 51, 53)])
def test_int8_gemm_of_any_depth(batch, m, n, k):
    """A wrapping int8 GEMM is one int8 matrix product (`Model.gemm_sum`); XLA:GPU once summed
    int8 operands of K = 3, 5, 13, 53 wrongly, and a GEMM whose padded A was square (the
    crosscheck's (3, 2) x 53 x 51 x 53 shape; benchmarks/RESULTS.md), so odd depths, a batch
    and that shape are checked against Python integers on whatever device runs the suite."""
    rng = np.random.default_rng(k + m)
    a = _rand(rng, 8, True, (*batch, m, k)).astype(np.int8)
    b = _rand(rng, 8, True, (*batch, k, n)).astype(np.int8)
    c = rng.integers(-(2**31), 2**31, size=(*batch, m, n)).astype(np.int32)
    got = np.asarray(jwmma.gemm(a, b, c, builtin="mfma_i32_32x32x16_i8", model="exact"))
    for g in np.ndindex(*batch):
        for i in range(m):
            for j in range(n):
                want = int(c[g][i, j]) + sum(int(a[g][i, t]) * int(b[g][t, j]) for t in range(k))
                assert int(got[g][i, j]) == R.wrap32(want), (g, i, j)
