"""Tests of the `gfx12_dot4` model (jwmma/models/gfx12.py), all bit for bit (NaNs included:
this model fixes its NaN payloads).

1. hardware captures: the 44 DOT2 and 6 dense-WMMA results of
   gfx1201_dot_captures.json (tests/data/, or $JWMMA_CAPTURES), plus a subset of rocjitsu's packed-output WMMA captures
   (16-bit accumulators, embedded below);
2. the scalar reference tests/ref_gfx12.py (plain Python ints, written from NUMERICS.md) on
   random, adversarial and hypothesis-generated inputs for every operand/accumulator format;
3. every RDNA4 float builtin against the reference applied to the generic sparse semantics.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jwmma
import oracles.ref_gfx12 as R
from jwmma import models
from jwmma.numerics.formats import BF8, BF16, F16, F32, FP8
from jwmma.models import Context, Gfx12Dot4

DT = {
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "fp8": np.dtype(ml_dtypes.float8_e4m3fn),
    "bf8": np.dtype(ml_dtypes.float8_e5m2),
    "f32": np.dtype(np.float32),
}
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32}
WAVE32_K = [(k & 3) | ((k & 4) << 1) | ((k & 8) >> 1) for k in range(16)]  # captures' doc


# ============================================================================== helpers
def values(bits, fmt):
    """Bit patterns -> an array of the format's dtype (a view: no float arithmetic)."""
    dt = DT[fmt]
    return np.asarray(bits).astype(np.int64).astype(UINT[dt.itemsize]).view(dt)


def codes(x):
    """An array of a float dtype -> its bit patterns (int64)."""
    x = np.asarray(x)
    return x.view(UINT[x.dtype.itemsize]).astype(np.int64)


def model_bits(a, b, c, fa, fb, fc, model):
    return codes(jwmma.dot(values(a, fa), values(b, fb), values(c, fc), model=model))


def ref_kw(model: Gfx12Dot4):
    return dataclasses.asdict(model)


def ref_bits(a, b, c, fa, fb, fc, model):
    kw = ref_kw(model)
    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    out = [
        R.dot_bits([int(x) for x in a[r]], [int(x) for x in b[r]], int(c[r]), fa, fb, fc, **kw)
        for r in range(a.shape[0])
    ]
    return np.array(out, np.int64)


def assert_bits(got, want, what, a=None, b=None, c=None, width=8):
    got, want = np.asarray(got), np.asarray(want)
    bad = np.argwhere(got != want)
    if len(bad):
        lines = [f"{what}: {len(bad)} of {got.size} results differ"]
        for idx in bad[:6]:
            i = tuple(int(x) for x in idx)
            line = f"  at {i}: got 0x{int(got[i]):0{width}x} want 0x{int(want[i]):0{width}x}"
            if a is not None and len(i) == 1:
                line += f"  a={[hex(int(x)) for x in a[i[0]]]} b={[hex(int(x)) for x in b[i[0]]]} c={hex(int(c[i[0]]))}"
            lines.append(line)
        pytest.fail("\n".join(lines))


def compare_with_ref(a, b, c, fa, fb, fc, model, what=""):
    got = model_bits(a, b, c, fa, fb, fc, model)
    want = ref_bits(a, b, c, fa, fb, fc, model)
    width = 8 if fc == "f32" else 4
    assert_bits(got, want, f"{what} {fa}x{fb}->{fc} {model.describe()}", a, b, c, width)


def padded_bits(a, b, c, fa, fb, fc, model):
    """model_bits on the common (FAMILIES * ROWS_PER_FAMILY, K) batch shape: rows (and K, with
    zero products at the end) are padded so that the compiled kernel is shared between tests."""
    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    n, k = a.shape
    rows = FAMILIES * ROWS_PER_FAMILY
    assert n <= rows and k <= K
    A = np.zeros((rows, K), np.int64)
    B = np.zeros((rows, K), np.int64)
    C = np.zeros(rows, np.int64)
    A[:n, :k], B[:n, :k], C[:n] = a, b, c
    return model_bits(A, B, C, fa, fb, fc, model)[:n]


# ================================================================ 1. hardware captures
def _captures():
    here = Path(__file__).resolve()
    for p in (os.environ.get("JWMMA_CAPTURES"), here.parent / "data/gfx1201_dot_captures.json",
              here.parents[2] / "shared/data/gfx1201_dot_captures.json",
              here.parents[1] / "shared/data/gfx1201_dot_captures.json"):
        if p and Path(p).is_file():
            return json.loads(Path(p).read_text())
    pytest.skip("gfx1201_dot_captures.json not found (set JWMMA_CAPTURES)")


@pytest.mark.parametrize("fmt", ["f16", "bf16"])
def test_dot2_captures(fmt):
    """V_DOT2_F32_{F16,BF16}: one step of two products; element 0 in bits 15:0."""
    rows = _captures()["dot2"][fmt]
    assert len(rows) == 22
    a = np.array([[r["a"] & 0xFFFF, r["a"] >> 16] for r in rows])
    b = np.array([[r["b"] & 0xFFFF, r["b"] >> 16] for r in rows])
    c = np.array([r["c"] for r in rows])
    want = np.array([r["expected"] for r in rows])
    got = model_bits(a, b, c, fmt, fmt, "f32", Gfx12Dot4())
    assert_bits(got, want, f"DOT2 {fmt} captures", a, b, c)


@pytest.mark.parametrize("fmt", ["f16", "bf16"])
def test_wmma_captures(fmt):
    """Dense 16x16x16 WMMA, one output: 16 products in 4 steps; wave64 in K order, wave32 in
    the permuted order of the capture's doc."""
    rows = _captures()["wmma_one_output"][fmt]
    assert len(rows) == 3
    a = np.array([r["a"] for r in rows])
    b = np.array([r["b"] for r in rows])
    c = np.array([r["c"] for r in rows])
    a2 = np.concatenate([a, a[:, WAVE32_K]])
    b2 = np.concatenate([b, b[:, WAVE32_K]])
    c2 = np.concatenate([c, c])
    want = np.array([r["expected_wave64"] for r in rows] + [r["expected_wave32"] for r in rows])
    got = model_bits(a2, b2, c2, fmt, fmt, "f32", Gfx12Dot4())
    assert_bits(got, want, f"WMMA {fmt} captures (rows 0-2 wave64, 3-5 wave32)", a2, b2, c2)
    # the two orders differ on hardware for some of them: the order matters in the model too
    assert any(r["expected_wave32"] != r["expected_wave64"] for r in rows)


def test_captures_through_reference():
    """The scalar reference reproduces the same captures (it is a check of the checker)."""
    cap = _captures()
    for fmt in ("f16", "bf16"):
        for r in cap["dot2"][fmt]:
            got = R.dot_bits([r["a"] & 0xFFFF, r["a"] >> 16], [r["b"] & 0xFFFF, r["b"] >> 16], r["c"], fmt, fmt, "f32")
            assert got == r["expected"], (fmt, r)
        for r in cap["wmma_one_output"][fmt]:
            assert R.dot_bits(r["a"], r["b"], r["c"], fmt, fmt, "f32") == r["expected_wave64"]
            a32 = [r["a"][k] for k in WAVE32_K]
            b32 = [r["b"][k] for k in WAVE32_K]
            assert R.dot_bits(a32, b32, r["c"], fmt, fmt, "f32") == r["expected_wave32"]


def _hex16(s):
    return np.array([int(s[i:i + 4], 16) for i in range(0, len(s), 4)], np.int64)


@pytest.mark.parametrize("fmt", ["f16", "bf16"])
def test_packed_wmma_captures(fmt):
    """16-bit accumulators (V_WMMA_F16_16X16X16_F16 / _BF16_..._BF16, wave32): narrowing after
    every step, fixed 16-bit NaN payloads, quieted C NaNs, bf16 truncation, subnormal C."""
    A, B, C, W = [], [], [], []
    for fx in PACKED_WMMA.values():
        if fx["fmt"] != fmt:
            continue
        a, b, c, want = (_hex16(fx[k]) for k in ("a", "b", "c", "expected"))
        rows = len(want) // 16
        a = a.reshape(rows, 16)[:, WAVE32_K]
        bt = b.reshape(16, 16).T[:, WAVE32_K]  # B is row-major K x N: column j is bt[j]
        A.append(np.repeat(a, 16, axis=0))  # output (i, j) is row 16*i + j
        B.append(np.tile(bt, (rows, 1)))
        C.append(c)
        W.append(want)
    a, b, c, want = (np.concatenate(x) for x in (A, B, C, W))
    assert len(want) == {"f16": 288, "bf16": 304}[fmt]
    assert_bits(model_bits(a, b, c, fmt, fmt, fmt, Gfx12Dot4()), want, f"packed WMMA {fmt}", a, b, c, 4)
    assert_bits(ref_bits(a, b, c, fmt, fmt, fmt, Gfx12Dot4()), want, f"reference, packed {fmt}", a, b, c, 4)


@pytest.mark.parametrize("fmt,ovfl", [("f16", False), ("f16", True), ("bf16", False)])
def test_packed_overflow_mode(fmt, ovfl):
    """rocjitsu's gfx1201 witness of intermediate narrowing (HardwareOverflowModeAtIntermediate
    Steps): step 1 overflows, a later step adds -max. f16 with MODE.FP16_OVFL saturates the
    step-1 result to 65504, which the later step cancels to 0; otherwise Inf sticks."""
    mx, inf, two, one = {"f16": (0x7BFF, 0x7C00, 0x4000, 0x3C00), "bf16": (0x7F7F, 0x7F80, 0x4000, 0x3F80)}[fmt]
    a = np.zeros((4, K), np.int64)
    b = np.zeros((4, K), np.int64)
    want = []
    for p in range(4):
        a[p, :2] = inf if p == 3 else mx | (0x8000 if p == 2 else 0)
        b[p, :2] = two
        if p:
            a[p, 4] = mx | (0 if p == 2 else 0x8000)
            b[p, 4] = one
        w = inf | (0x8000 if p == 2 else 0)
        if fmt == "f16" and ovfl and p != 3:
            w = 0x7BFF if p == 0 else 0
        want.append(w)
    c = np.zeros(4, np.int64)
    model = Gfx12Dot4(fp16_ovfl=ovfl)
    assert_bits(padded_bits(a, b, c, fmt, fmt, fmt, model), want, f"overflow mode {fmt} fp16_ovfl={ovfl}", a, b, c, 4)
    assert_bits(ref_bits(a, b, c, fmt, fmt, fmt, model), want, "reference, overflow mode", a, b, c, 4)


# ========================================================= 2. against the scalar reference
def _finite(rng, f: R.Fmt, shape, lo, hi):
    """Random finite codes with exponent fields in [lo, hi] (clipped to the finite range)."""
    top = f.emax_field - (1 if f.kind == "ieee" else 0)
    ef = np.clip(rng.integers(lo, hi + 1, shape), 0, top)
    mant = rng.integers(0, 1 << f.mbits, shape)
    if f.kind == "fn":  # S.1111.111 is NaN
        mant = np.where((ef == f.emax_field) & (mant == (1 << f.mbits) - 1), mant - 1, mant)
    sign = rng.integers(0, 2, shape)
    return (sign << (f.bits - 1)) | (ef << f.mbits) | mant


def _specials(f: R.Fmt):
    """Zeros, NaNs (incl. the E4M3 codes 0x7F/0xFF), Infs, extremes of one format."""
    s = 1 << (f.bits - 1)
    top = f.emax_field
    out = [0, s, 1, s | 1, (1 << f.mbits) - 1]  # +-0, +-min subnormal, max subnormal
    if f.kind == "fn":
        out += [0x7F, 0xFF, 0x7E, 0xFE]  # NaN, NaN, +-448
    else:
        inf = top << f.mbits
        out += [inf, s | inf, inf | 1, s | inf | (1 << (f.mbits - 1)), inf - 1, s | (inf - 1)]
    return np.array(out, np.int64)


def gen(rng, fmt: str, shape, mode: str):
    """Operand/accumulator codes of one adversarial family."""
    f = R.FMTS[fmt]
    n = 1 << f.bits
    if mode == "any":  # every bit pattern, specials included
        return rng.integers(0, n, shape)
    if mode == "window":  # exponents near 1: rounding, carries, cancellation
        return _finite(rng, f, shape, f.bias - 2, f.bias + 2)
    if mode == "spread":  # the whole finite range: huge exponent differences
        return _finite(rng, f, shape, 0, f.emax_field)
    if mode == "subnormal":
        return _finite(rng, f, shape, 0, 1)
    if mode in ("mixed", "rare"):  # window values with specials and subnormals sprinkled in
        rate = 0.04 if mode == "mixed" else 0.005
        x = _finite(rng, f, shape, f.bias - 3, f.bias + 3)
        pick = rng.random(shape)
        x = np.where(pick < rate, rng.choice(_specials(f), shape), x)
        return np.where((pick >= rate) & (pick < rate + 0.06), _finite(rng, f, shape, 0, 1), x)
    raise ValueError(mode)


def gen_c(rng, fmt: str, shape, mode: str):
    f = R.FMTS[fmt]
    if mode == "tiny":  # tiny C of either sign (subnormal or just normal): the floor rules
        return _finite(rng, f, shape, 0, 2)
    if mode == "tiny_neg":
        return _finite(rng, f, shape, 0, 3) | (1 << (f.bits - 1))
    if mode == "zero":
        return rng.choice(np.array([0, 1 << (f.bits - 1)]), shape)
    return gen(rng, fmt, shape, mode)


FAMILIES = 15
ROWS_PER_FAMILY = 96


def adversarial_batch(rng, fa, fb, fc, k, rows_per_mode=ROWS_PER_FAMILY):
    """Rows from each of the FAMILIES families, concatenated: (a, b, c) code arrays."""
    A, B, C = [], [], []
    shape = (rows_per_mode, k)

    def add(a, b, c):
        A.append(a), B.append(b), C.append(c)

    for mode in ("any", "window", "spread", "subnormal", "mixed"):
        add(gen(rng, fa, shape, mode), gen(rng, fb, shape, mode), gen_c(rng, fc, shape[:1], mode))
    for cmode in ("tiny", "tiny_neg", "zero", "window", "spread"):  # the C rules
        add(gen(rng, fa, shape, "window"), gen(rng, fb, shape, "window"), gen_c(rng, fc, shape[:1], cmode))
    # products far below a tiny C / small products under a large C
    add(gen(rng, fa, shape, "subnormal"), gen(rng, fb, shape, "spread"), gen_c(rng, fc, shape[:1], "tiny_neg"))
    # results below the smallest subnormal (bf16): underflow to +0, never -0
    add(gen(rng, fa, shape, "subnormal"), gen(rng, fb, shape, "subnormal"), gen_c(rng, fc, shape[:1], "zero"))
    # cancellation: product 2i+1 is minus product 2i up to a flip of low mantissa bits
    fa_ = R.FMTS[fa]
    a = gen(rng, fa, shape, "window")
    b = gen(rng, fb, shape, "window")
    e = 2 * (k // 2)
    a[:, 1:e:2] = a[:, 0:e:2] ^ (1 << (fa_.bits - 1)) ^ rng.integers(0, 4, a[:, 1:e:2].shape)
    b[:, 1:e:2] = b[:, 0:e:2]
    fix = (fa == "fp8") & ((a & 0x7F) == 0x7F)  # keep E4M3 finite
    a = np.where(fix, a ^ 1, a)
    add(a, b, gen_c(rng, fc, shape[:1], "tiny_neg"))
    add(a, b, gen_c(rng, fc, shape[:1], "window"))
    # cancellation against C: one big product and C = -product (rounded into C's format)
    a = gen(rng, fa, shape, "window")
    b = gen(rng, fb, shape, "window")
    a[:, 1:] = np.where(rng.random(a[:, 1:].shape) < 0.5, 0, a[:, 1:])
    pa = values(a[:, 0], fa).astype(np.float64) * values(b[:, 0], fb).astype(np.float64)
    cv = (-pa).astype(DT[fc]) if fc != "f32" else (-pa).astype(np.float32)
    add(a, b, codes(cv))
    assert len(A) == FAMILIES
    return np.concatenate(A), np.concatenate(B), np.concatenate(C)


F32_COMBOS = [("f16", "f16"), ("bf16", "bf16"), ("fp8", "fp8"), ("fp8", "bf8"), ("bf8", "fp8"), ("bf8", "bf8")]
ALL_COMBOS = [(fa, fb, "f32") for fa, fb in F32_COMBOS] + [("f16", "f16", "f16"), ("bf16", "bf16", "bf16")]
K = 8  # two steps of four: the accumulator goes through one step result


@pytest.mark.parametrize("fa,fb,fc", ALL_COMBOS)
def test_reference_adversarial(fa, fb, fc):
    rng = np.random.default_rng(sum(map(ord, fa + fb + fc)))
    a, b, c = adversarial_batch(rng, fa, fb, fc, K)
    compare_with_ref(a, b, c, fa, fb, fc, Gfx12Dot4(), "adversarial")


def _row_strategy(fmt):
    f = R.FMTS[fmt]
    return st.one_of(
        st.integers(0, (1 << f.bits) - 1),
        st.sampled_from([int(x) for x in _specials(f)]),
        st.integers(0, 7).map(lambda e, f=f: (e << f.mbits) | 1),  # tiny values
    )


@st.composite
def _cases(draw):
    fa, fb, fc = draw(st.sampled_from(ALL_COMBOS))
    a = draw(st.lists(_row_strategy(fa), min_size=K, max_size=K))
    b = draw(st.lists(_row_strategy(fb), min_size=K, max_size=K))
    c = draw(st.one_of(_row_strategy(fc), st.integers(0, (1 << R.FMTS[fc].bits) - 1)))
    return fa, fb, fc, a, b, c


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_reference_hypothesis(case):
    fa, fb, fc, a, b, c = case
    A, B, C = np.array([a]), np.array([b]), np.array([c])
    got = padded_bits(A, B, C, fa, fb, fc, Gfx12Dot4())
    want = ref_bits(A, B, C, fa, fb, fc, Gfx12Dot4())
    assert_bits(got, want, f"hypothesis {fa}x{fb}->{fc}", A, B, C, 8 if fc == "f32" else 4)


VARIANTS = [
    (Gfx12Dot4(step=2), ("f16", "f16", "f32"), 8),
    (Gfx12Dot4(pairs=False), ("bf16", "bf16", "f32"), 8),
    (Gfx12Dot4(pairs=True), ("fp8", "bf8", "f32"), 8),
    (Gfx12Dot4(fp16_ovfl=True), ("f16", "f16", "f16"), 8),
    (Gfx12Dot4(bf16_narrowing="nearest"), ("bf16", "bf16", "bf16"), 8),
    (Gfx12Dot4(step=32, pairs=False), ("bf16", "bf16", "f32"), 64),  # int64 path
]
SLOW_VARIANTS = [
    (Gfx12Dot4(step=8), ("f16", "f16", "f32"), 16),
    (Gfx12Dot4(step=16, pairs=False), ("fp8", "fp8", "f32"), 32),
    (Gfx12Dot4(step=3), ("bf16", "bf16", "bf16"), 9),  # pairs (0,1), (2)
    (Gfx12Dot4(frac_bits=20, c_window=22), ("f16", "f16", "f32"), 8),
    (Gfx12Dot4(frac_bits=30, c_window=30), ("bf8", "bf8", "f32"), 8),
    (Gfx12Dot4(c_floor=-100), ("bf16", "bf16", "f32"), 8),
    (Gfx12Dot4(c_floor=-126), ("f16", "f16", "f16"), 8),
    (Gfx12Dot4(), ("fp8", "fp8", "f16"), 8),  # not a builtin: byte factors into f16
    (Gfx12Dot4(), ("bf8", "fp8", "bf16"), 8),
]


@pytest.mark.parametrize("model,fmts,k", VARIANTS, ids=[f"{m.describe()}-{'x'.join(f)}" for m, f, _ in VARIANTS])
def test_reference_variants(model, fmts, k):
    fa, fb, fc = fmts
    rng = np.random.default_rng(k + sum(map(ord, "".join(fmts))))
    a, b, c = adversarial_batch(rng, fa, fb, fc, k, rows_per_mode=ROWS_PER_FAMILY if k == K else 24)
    compare_with_ref(a, b, c, fa, fb, fc, model, "variant")


@pytest.mark.slow
@pytest.mark.parametrize("model,fmts,k", SLOW_VARIANTS, ids=[f"{m.describe()}-{'x'.join(f)}" for m, f, _ in SLOW_VARIANTS])
def test_reference_variants_slow(model, fmts, k):
    test_reference_variants(model, fmts, k)


@pytest.mark.slow
@pytest.mark.parametrize("fa,fb,fc", ALL_COMBOS)
def test_reference_adversarial_large(fa, fb, fc):
    rng = np.random.default_rng(12345 + sum(map(ord, fa + fb + fc)))
    for k in (16, 7):
        a, b, c = adversarial_batch(rng, fa, fb, fc, k, rows_per_mode=400)
        compare_with_ref(a, b, c, fa, fb, fc, Gfx12Dot4(), f"large K={k}")


def test_long_dot_scan_path():
    """83 products: 20 full steps go through lax.scan (more than grouping.UNROLL), then a
    partial step of 3 (pairs (0,1), (2))."""
    rng = np.random.default_rng(7)
    k = 83
    a = gen(rng, "f16", (24, k), "mixed")
    b = gen(rng, "f16", (24, k), "window")
    c = gen_c(rng, "f32", (24,), "window")
    compare_with_ref(a, b, c, "f16", "f16", "f32", Gfx12Dot4(), "long dot")


# ============================================================== 3. through the builtins
FLOAT_BUILTINS = [n for n, s in jwmma.BUILTINS.items() if s.arch == "gfx12" and not s.integer and not s.dense]
PAIRS_24 = np.array([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)])


def test_float_builtins_default_to_gfx12_dot4():
    assert len(FLOAT_BUILTINS) == 8
    for name in FLOAT_BUILTINS:
        assert jwmma.BUILTINS[name].default_model == "gfx12_dot4", name


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if i % 3 == 0 else pytest.mark.slow)
                                  for i, n in enumerate(FLOAT_BUILTINS)])
def test_builtin_against_reference(name):
    """The builtin (default model and model='gfx12_dot4') equals the reference applied to the
    generic semantics: gather the selected B rows, compressed-K order, steps of 4."""
    spec = jwmma.BUILTINS[name]
    fa, fb, fc = spec.a_type, spec.b_type, spec.c_type
    rng = np.random.default_rng(sum(map(ord, name)))
    waves = 2
    a = gen(rng, fa, (waves, spec.m, spec.kc), "rare")
    b = gen(rng, fb, (waves, spec.k, spec.n), "rare")
    c = np.stack([gen_c(rng, fc, (spec.m, spec.n), "window"), gen_c(rng, fc, (spec.m, spec.n), "tiny_neg")])
    pos = PAIRS_24[rng.integers(0, 6, (waves, spec.m, spec.kc // 2))].reshape(waves, spec.m, spec.kc)
    regs_a = jwmma.pack_a(name, values(a, fa))
    regs_b = jwmma.pack_b(name, values(b, fb))
    regs_c = jwmma.pack_c(name, values(c, fc))
    idx = jwmma.pack_index(name, pos)
    fn = getattr(jwmma, name)
    d_default = codes(jwmma.unpack_c(name, fn(regs_a, regs_b, regs_c, idx)))
    d_named = codes(jwmma.unpack_c(name, fn(regs_a, regs_b, regs_c, idx, model="gfx12_dot4")))
    want = np.array([
        R.swmmac_bits(a[w].tolist(), pos[w].tolist(), b[w].tolist(), c[w].tolist(), R.FMTS[fa], R.FMTS[fb], R.FMTS[fc])
        for w in range(waves)
    ])
    width = 8 if fc == "f32" else 4
    assert_bits(d_default, want, f"{name} (default model)", width=width)
    assert_bits(d_named, want, f"{name} (model='gfx12_dot4')", width=width)


def test_builtin_ignores_pruned_specials():
    """NaN/Inf in the B rows that the index does not select never reach the result."""
    name = "swmmac_f32_16x16x32_f16_w32"
    spec = jwmma.BUILTINS[name]
    rng = np.random.default_rng(3)
    waves = 2  # the batch shape of test_builtin_against_reference: its kernel is reused
    a = gen(rng, "f16", (waves, spec.m, spec.kc), "window")
    pos = np.tile(np.array([0, 2]), (waves, spec.m, spec.kc // 2))  # rows 1 and 3 of each group pruned
    b = gen(rng, "f16", (waves, spec.k, spec.n), "window")
    b[:, 1::4] = 0x7E00  # NaN
    b[:, 3::4] = 0x7C00  # +Inf
    c = gen_c(rng, "f32", (waves, spec.m, spec.n), "window")
    d = jwmma.swmmac_f32_16x16x32_f16_w32(
        jwmma.pack_a(name, values(a, "f16")), jwmma.pack_b(name, values(b, "f16")),
        jwmma.pack_c(name, values(c, "f32")), jwmma.pack_index(name, pos))
    got = codes(jwmma.unpack_c(name, d))
    want = np.array([R.swmmac_bits(a[w].tolist(), pos[w].tolist(), b[w].tolist(), c[w].tolist(), R.F16, R.F16, R.F32)
                     for w in range(waves)])
    assert_bits(got, want, "pruned specials")
    assert not np.any((got & 0x7F800000) == 0x7F800000)


# ============================================================== 4. the model as a value
def test_check_contexts():
    m = Gfx12Dot4()
    for ctx in (Context(F16, F16, F32), Context(BF16, BF16, F32), Context(F16, F16, F16), Context(BF16, BF16, BF16),
                Context(FP8, BF8, F32), Context(BF8, BF8, F32)):
        assert m.check(ctx) is None, ctx
    assert m.check(Context(None, None, None)) is not None  # integer builtins
    assert m.check(Context(FP8, FP8, FP8)) is not None  # no fp8 accumulator
    assert models.resolve("gfx12_dot4_byte", Context(FP8, FP8, F32), "exact") == Gfx12Dot4()
    with pytest.raises(ValueError):
        models.resolve(Gfx12Dot4(), Context(None, None, None, arch="gfx12"), "exact")
    with pytest.raises((ValueError, TypeError)):
        jwmma.dot(np.ones(4, np.int8), np.ones(4, np.int8), np.int32(0), model=Gfx12Dot4())


def test_parameters():
    assert Gfx12Dot4() == Gfx12Dot4(step=4, pairs=None)
    assert hash(Gfx12Dot4(step=2)) == hash(Gfx12Dot4(step=2))
    assert Gfx12Dot4().resolved(Context(F16, F16, F32)) == (True, -126)
    assert Gfx12Dot4().resolved(Context(FP8, BF8, F32)) == (False, -126)
    assert Gfx12Dot4().resolved(Context(F16, F16, F16)) == (True, -14)
    assert Gfx12Dot4(pairs=True, c_floor=-20).resolved(Context(FP8, FP8, F32)) == (True, -20)
    for bad in (dict(step=0), dict(frac_bits=3), dict(c_window=-1), dict(bf16_narrowing="up")):  # wrong values
        with pytest.raises(ValueError, match=f"Gfx12Dot4.{next(iter(bad))}"):
            Gfx12Dot4(**bad)
    for bad in (dict(step=2.0), dict(pairs="yes"), dict(c_floor=1.5), dict(fp16_ovfl=1)):  # wrong types
        with pytest.raises(TypeError, match=f"Gfx12Dot4.{next(iter(bad))}"):
            Gfx12Dot4(**bad)
    with pytest.raises(dataclasses.FrozenInstanceError):
        Gfx12Dot4().step = 8
    assert "step=4" in Gfx12Dot4().describe()


def test_fixed_payloads_and_zero_sign():
    """A few spelled-out cases of NUMERICS 2.2 (one step each)."""
    f = Gfx12Dot4()
    cases = [  # (fa, fc, a, b, c, expected)
        ("f16", "f32", [0x7E01, 0x3C00], [0x3C00, 0x3C00], 0x7F812345, 0xFFC00A3D),  # factor NaN first
        ("f16", "f32", [0x7C00, 0x3C00], [0x0000, 0x3C00], 0x7F812345, 0xFFC00000),  # Inf*0 before C NaN
        ("f16", "f32", [0x7C00, 0xFC00], [0x3C00, 0x3C00], 0x00000000, 0xFFC00000),  # +Inf & -Inf
        ("f16", "f32", [0x3C00, 0x3C00], [0x3C00, 0x3C00], 0x7F812345, 0x7FC12345),  # C NaN quieted
        ("f16", "f32", [0x7C00, 0x3C00], [0x3C00, 0x3C00], 0xFF800000, 0xFFC00000),  # Inf & -Inf C
        ("f16", "f32", [0x3C00, 0xBC00], [0x3C00, 0x3C00], 0x80000000, 0x00000000),  # zero is +0
        ("fp8", "f32", [0x7F, 0x38], [0x38, 0x38], 0x00000000, 0xFFC00A3D),  # E4M3 NaN 0x7F
        ("bf8", "f32", [0x7C, 0x38], [0x00, 0x38], 0x00000000, 0xFFC00A3D),  # byte Inf*0: factor payload
        ("bf8", "f32", [0x7C, 0xFC], [0x3C, 0x3C], 0x00000000, 0xFFC00A3D),  # byte +Inf & -Inf
        ("f16", "f16", [0x7E01, 0x3C00], [0x3C00, 0x3C00], 0x0000, 0xFE3D),
        ("f16", "f16", [0x7C00, 0x3C00], [0x0000, 0x3C00], 0x0000, 0xFE00),
        ("f16", "f16", [0x3C00, 0x3C00], [0x3C00, 0x3C00], 0xFC01, 0xFE01),  # C NaN | 0x0200
        ("bf16", "bf16", [0x7FC1, 0x3F80], [0x3F80, 0x3F80], 0x0000, 0xFFFD),
        ("bf16", "bf16", [0x7F80, 0x3F80], [0x0000, 0x3F80], 0x0000, 0xFFC0),
        ("bf16", "bf16", [0x3F80, 0x3F80], [0x3F80, 0x3F80], 0xFF81, 0xFFC1),  # C NaN | 0x0040
        ("f16", "f16", [0x7BFF, 0x7BFF], [0x4000, 0x0000], 0x0000, 0x7C00),  # f16 overflow: Inf
        ("bf16", "bf16", [0x3F80, 0x3F80], [0x3F80, 0x3BC0], 0x0000, 0x3F80),  # 1 + 1.5*2^-8 truncated
    ]
    for fa, fc, a, b, c, want in cases:
        # two products then zero products: the later all-zero step keeps these results
        got = int(padded_bits(np.array([a]), np.array([b]), np.array([c]), fa, fa, fc, f)[0])
        assert got == want, (fa, fc, [hex(x) for x in a], [hex(x) for x in b], hex(c), hex(got), hex(want))
        assert R.dot_bits(a, b, c, fa, fa, fc) == want


# ------------------------------------------------------------------------------------------
# Packed-output WMMA captures (gfx1201, wave32), a subset of rocjitsu's
# tests/fixtures/float_dot/packed_wmma_cases.h (ROCm/rocm-systems, MIT license; Radeon AI Pro
# R9700, TheRock 10.2.0a20260916): kPackedWmmaInputs[bf16][fixture] and
# kPackedWmmaExpected[gfx12][wave32][bf16][fixture]. Concatenated 4-digit hex codes: a = A rows
# (row-major, 16 K each), b = the whole B (row-major K x N), c = C (row-major, the low 16 bits the
# hardware reads), expected = D (row-major). f16_random and bf16_subnormal_c keep only the first
# rows of their 16x16 outputs.
PACKED_WMMA = {
    "f16_random": dict(  # f16 fixture 0, rows 0-1
        fmt="f16",
        a=(
            "380bcc95ca7cbea92c0b3367b997aa372f825015caf34edcaff12e102600c520bf04d384a9f34e6a4344"
            "48cf466154e7539e36912647c269b02fbe4bd280bb3a"
        ),
        b=(
            "49f0a8f65787be2ec2ccd60a3bfdcc06482cceaacaa9ce8d2516357bbea7c06c28e12776aca94fe1c8ce"
            "b7dbbb263c2bc2fe440036c8577bc5e7ba9b4639c0542ca3c7f6b60bcc424ff3c8d0b02ab2493e15c030"
            "566e4ca9d4ce2b7544a926fa2d50a6d4b8e630fe30ceb8a3a4982a5f2ea9cd9d37a0309244efab1a48c4"
            "43e4c7f0c981c7caccf04049d7c1c3db35ba32a93c483cb1ccf54915c84fb3b1c7dc34ca27aed38a2b01"
            "52174eefb45ca87daf9138da3401389656eaab9a2c0d55652b3f4b3f29da2c4f4ea02447b9e4a5ae3102"
            "b9162dfa4827ada04614a960c868b7b6d580c4afc78037d7cbc8483fd1232c86cc094ae5abebbb9ad5eb"
            "4c052d51d278c628bb62d79b333a5190d4223cba5237aac9bc93490bcbdfb650d3cfbfdc2717d1edb8ee"
            "ca8e4b34bd222e244eaa39ff26d12c0c2c06cbc4b806a59f34253471363eade9473932e940343f2db2b1"
            "b851d12acb3ecae8ca9131a3a471c6d9bc5d27664c9926d4cc9ec7a5b23f53c0cef0a540a511271f3179"
            "41985313c8713eab257f45263a02ad85b6c6bc9633de4d7fc1ec2aeab62fd44dcdcfcb3d37604a403b3e"
            "4e40cf12c29bba70b855b511c66f26b6b3c6cdd6bb7a2bd62c60d4055702b4e73a505100251aac75cbd4"
            "2c60b1aab800282bced12b3e2d01cf26a9f9d53ec5af33af4150c57c56865592d7a54c23b0c935e6c6b7"
            "2af8371ab57ad15a"
        ),
        c=(
            "39a92334bb503b783313ba6b99d038fbb0ebbb59349cb3313335a732bab936cdbafdb944389b30c61c06"
            "b5e1b83e3b69b2c63afc2f0a3424b89230cfb5522dc5"
        ),
        expected=(
            "5e3ce5956037e327dc03e1acdf666a35e1f76054e47de85a6253548e654b5815f066ef0fe572f1dc654e"
            "6592e914ea5f6a7ee7d763fdecf9604eef3be557640e"
        ),
    ),
    "f16_specials": dict(  # f16 fixture 2
        fmt="f16",
        a=(
            "480000004600c200450048004600c600c000c600c000c400bc00c500c700bc004600c800c6004200c200"
            "3c00c600c800c7004500c600c200c000fc004000c5003c0047000000c8004600c20046004400c0004600"
            "3c00000040004000c8004700c200470048004700c4004400c50046004500c8003c0040004600c0004200"
            "440048004800c400c500bc004200c5004200c500c800bc00c4004200c2004500c700c000c200c7003c00"
            "42000000c0004600c0004400c7003c004200c200c5000400c000c50042000000bc00c800c400bc00c500"
            "c500c600c0004800c000440046004500c8004400c800c600400046004700c600c500c000c7004600c600"
            "3c00c4008000c200bc004400c2004500c500c000c60047004500fc017c01c000c500bc004200c6000000"
            "c80048004500c600c500450040004800c800c600c400450003ffbc003c00c8003c00c0004400c5004500"
            "4000bc000000c500bc00c80042004600c400c7004000bc00460047004400c500480047000001c000c700"
            "c4004600c700c500c400c20000003c0044004500bc00c600c700c500fc014200c40042003c00c200c500"
            "c500c70044004800c6004600c6004000c700c7004800fc004600c700bc003c0040004000440046003c00"
            "3c004600c200c2004000c70042004000c700c400c8003c00c400c600c0004400420048004500c0003c00"
            "c800c5007c004000"
        ),
        b=(
            "c7004400c200c700c20004013c00bc00c000c000c2004000c00000004500c200bc004500c60047004600"
            "c800c500c700c5000000440048004400450042004000c5004000c600c2004500c200460040004400c000"
            "4700c4004700c00000004000c80000007c0042004000c80048004000c800400044004700c800c200c500"
            "c4004800460044003c00c6004500c4004200c00047004700c7004000c5004800c700c800c500c600c800"
            "bc004700c70046004400c7004700c70044004700c0000000c800c200c800c200c5004800c000c6000000"
            "4400c0000000c2004200c7004000c000c8004700c2003c00c400c500c400c800c700c700c4004200bc00"
            "c7004500c2004800c600c7004500c50046004700c400c4003c00c600c70044004400c80047003c004400"
            "00000000460003ffbc00440000000400000042003c003c00fe013c004400c800c0004000c400c6004400"
            "48004200c500c600c2004500c2004700400042004800c5003c00c7004600c200c50047004700c400c800"
            "00004400470045004000bc003c00000042004400bc004000c7004400bc0000004200c800c700bc00c600"
            "000040004200c0008001c0000000480040004000c500c400c40047000000c7004500c200c200c2004000"
            "c2000000c200420000004200c800c8004600c400c0004600bc00bc00c4004400450042003c00c700c700"
            "bc004600c7004700"
        ),
        c=(
            "fe013c0080003c0000000000fc007bfffc007bff03ff040000003c00fc0103ff8001bc00fe0104007c00"
            "0401fc008001fc01fc00040003ff0000fc000400fe017c01fe0180010000040103ff04007c01fc00fc01"
            "7c010400fbff7bff000080017bffbc008001fbfffc00bc000000040103ffbc00fe0180017e0104010400"
            "03ff7bff7bff00007bff04003c000400fe017c00fc007bff3c000000bc00fc00bc0080003c0000018000"
            "04007bff80017e01fe017e01fbff3c00fe013c0003fffc000001fc01fc00fc007c008001fbfffbff8000"
            "7c01fc007c017bff0400bc000001800003ff0400fc0104007c00fe010400fc01fc008000fc017e01fbff"
            "7c00fc00fe017e01fc0180007c007c00040103ff80007c010001fc0104007e0100008001800180017c01"
            "3c007c0003ff3c007e017c017e01bc007c000401fc01fbfffbff7bff0001fe01bc007c000401fc0103ff"
            "0400fc00fc0080008001fc00040003ff8000040100017c0104008000040104003c00000000007bff7c00"
            "03ff0000fbfffc000000fe0104007e017bfffc0080007c00fe01fc000000fe01bc00fc01fe017c007c00"
            "fc0080000400fc01fe01000003fffe0100013c003c0080017e0103ff3c00fc01fc0080013c00fbff8000"
            "7bff03ff8000bc0080017c0103ff3c0000017e0180000000fc018000bc00800000017c01fbfffe01fc01"
            "fc017c00fbffbc00"
        ),
        expected=(
            "fe015660fc00d5c0d5505a48fc007c00fc007bfe54f0d34055f05600fe01fe3d7c007c00fe00fc00fe00"
            "7c00fe007c00fe00fc00fc00fc007c00fe007c00fe3d7e01fe01fc0052a0cd405590d8187e01fc00fe01"
            "7e01d4c0fbfc7c005080fe3d7bfac0007c00fbfffc00dc7c57405280d6b0d9a8fe01d0e07e015440d8b8"
            "fe3d7bfe7c00fc007c00cdc0c900d960fe017c00fc007bff58005888ce00fc00fe3d5770d0c07c005160"
            "d4007c00cd407e01fe017e01fc004400fe01c8004d40fe3d5520fe01fe00fc007c00d020fbfafc004b80"
            "7e01fc007e017c00d700d800fe3dd5a0d928fc00fe01d6a07c00fe01d440fe01fc00d870fe017e01fc00"
            "7c00fe3dfe3dfe3dfe3dfe3dfe3dfe3dfe3dfe3dfe3dfe3dfe3dfe3dfe3dfe3dfe3dfe3d560055a07e01"
            "d7d07c005888d8607e017e017e01d0807c005770fe01fbfafe3d7c00d360fe01cb807c00d060fe0154c0"
            "d040fc00fc00d0c05240fc00d460fe3d4d404f40fc007e01d4b05a50cf4058005570c80058487bfc7c00"
            "d30056d0fe3dfe3dfe3dfe3dfe3dfe3dfe3dfe3dfe3dfe3dfe3dfe3dfe3dfe3dfe3dfe3dfe3d7c007c00"
            "fe00fc00fc00fe01fe017c00fe00fe01fc00fc007c007c007e01fe3dd5d0fe01fe00d5204e80fc00cf40"
            "7c00d6c04e8058e8ce807e01d42056e0fe3dfe00fc00fe00fe01fc00fc007c00fc00fe00fc00fe01fe00"
            "fe01fe00fc00fe3d"
        ),
    ),
    "bf16_specials": dict(  # bf16 fixture 2
        fmt="bf16",
        a=(
            "4100000040c0c04040a0410040c0c0c0c000c0c0c000c080bf80c0a0c0e0bf8040c0c100c0c04040c040"
            "3f80c0c0c100c0e040a0c0c0c040c000ff804000c0a03f8040e00000c10040c0c04040c04080c00040c0"
            "3f80000040004000c10040e0c04040e0410040e0c0804080c0a040c040a0c1003f80400040c0c0004040"
            "408041004100c080c0a0bf804040c0a04040c0a0c100bf80c0804040c04040a0c0e0c000c040c0e03f80"
            "40400000c00040c0c0004080c0e03f804040c040c0a00080c000c0a040400000bf80c100c080bf80c0a0"
            "c0a0c0c0c0004100c000408040c040a0c1004080c100c0c0400040c040e0c0c0c0a0c000c0e040c0c0c0"
            "3f80c0808000c040bf804080c04040a0c0a0c000c0c040e040a0ff817f81c000c0a0bf804040c0c00000"
            "c100410040a0c0c0c0a040a040004100c100c0c0c08040a0007fbf803f80c1003f80c0004080c0a040a0"
            "4000bf800000c0a0bf80c100404040c0c080c0e04000bf8040c040e04080c0a0410040e00001c000c0e0"
            "c08040c0c0e0c0a0c080c04000003f80408040a0bf80c0c0c0e0c0a0ff814040c08040403f80c040c0a0"
            "c0a0c0e040804100c0c040c0c0c04000c0e0c0e04100ff8040c0c0e0bf803f8040004000408040c03f80"
            "3f8040c0c040c0404000c0e040404000c0e0c080c1003f80c080c0c0c00040804040410040a0c0003f80"
            "c100c0a07f804000"
        ),
        b=(
            "c0e04080c040c0e0c04000813f80bf80c000c000c0404000c000000040a0c040bf8040a0c0c040e040c0"
            "c100c0a0c0e0c0a0000040804100408040a040404000c0a04000c0c0c04040a0c04040c040004080c000"
            "40e0c08040e0c00000004000c10000007f8040404000c10041004000c1004000408040e0c100c040c0a0"
            "c080410040c040803f80c0c040a0c0804040c00040e040e0c0e04000c0a04100c0e0c100c0a0c0c0c100"
            "bf8040e0c0e040c04080c0e040e0c0e0408040e0c0000000c100c040c100c040c0a04100c000c0c00000"
            "4080c0000000c0404040c0e04000c000c10040e0c0403f80c080c0a0c080c100c0e0c0e0c0804040bf80"
            "c0e040a0c0404100c0c0c0e040a0c0a040c040e0c080c0803f80c0c0c0e040804080c10040e03f804080"
            "0000000040c0007fbf80408000000080000040403f803f80ffc13f804080c100c0004000c080c0c04080"
            "41004040c0a0c0c0c04040a0c04040e0400040404100c0a03f80c0e040c0c040c0a040e040e0c080c100"
            "0000408040e040a04000bf803f80000040404080bf804000c0e04080bf8000004040c100c0e0bf80c0c0"
            "000040004040c0008001c0000000410040004000c0a0c080c08040e00000c0e040a0c040c040c0404000"
            "c0400000c040404000004040c100c10040c0c080c00040c0bf80bf80c080408040a040403f80c0e0c0e0"
            "bf8040c0c0e040e0"
        ),
        c=(
            "ffc13f8080003f8000000000ff807f7fff807f7f007f008000003f80ff81007f8001bf80ffc100807f80"
            "0081ff808001ff81ff800080007f0000ff800080ffc17f81ffc1800100000081007f00807f81ff80ff81"
            "7f810080ff7f7f7f000080017f7fbf808001ff7fff80bf8000000081007fbf80ffc180017fc100810080"
            "007f7f7f7f7f00007f7f00803f800080ffc17f80ff807f7f3f800000bf80ff80bf8080003f8000018000"
            "00807f7f80017fc1ffc17fc1ff7f3f80ffc13f80007fff800001ff81ff80ff807f808001ff7fff7f8000"
            "7f81ff807f817f7f0080bf8000018000007f0080ff8100807f80ffc10080ff81ff808000ff817fc1ff7f"
            "7f80ff80ffc17fc1ff8180007f807f800081007f80007f810001ff8100807fc100008001800180017f81"
            "3f807f80007f3f807fc17f817fc1bf807f800081ff81ff7fff7f7f7f0001ffc1bf807f800081ff81007f"
            "0080ff80ff8080008001ff800080007f8000008100017f8100808000008100803f80000000007f7f7f80"
            "007f0000ff7fff800000ffc100807fc17f7fff8080007f80ffc1ff800000ffc1bf80ff81ffc17f807f80"
            "ff8080000080ff81ffc10000007fffc100013f803f8080017fc1007f3f80ff81ff8080013f80ff7f8000"
            "7f7f007f8000bf8080017f81007f3f8000017fc180000000ff818000bf80800000017f81ff7fffc1ff81"
            "ff817f80ff7fbf80"
        ),
        expected=(
            "ffc142ccff80c2b8c2aa4349ff807f7fff807f7f429ec26842be42c0ffc1fffd7f807f80ffc0ff80ffc0"
            "7f80ffc07f80ffc0ff80ff80ff807f80ffc07f80fffd7fc1ffc1ff804254c1a842b2c3037fc1ff80ffc1"
            "7fc1c298ff7f7f7f4210fffd7f7fc0007f80ff7fff80c38f42e84250c2d6c335ffc1c21c7fc14288c317"
            "fffd7f7f7f7fff807f7fc1b8c120c32cffc17f80ff807f7f43004311c1c0ff80fffd42eec2187f80422c"
            "c2807f7fc1a87fc1ffc17fc1ff7f407fffc1c10041a7fffd42a4ffc1ffc0ff807f80c205ff7fff7f4170"
            "7fc1ff807fc17f7fc2e0c300fffdc2b4c325ff80ffc1c2d47f80ffc1c288ffc1ff80c30effc17fc1ff7f"
            "7f80fffdfffdfffdfffdfffdfffdfffdfffdfffdfffdfffdfffdfffdfffdfffdfffdfffd42c042b47fc1"
            "c2fa7f804311c30c7fc17fc17fc1c2107f8042eeffc1ff7ffffd7f7fc26cffc1c1707f80c20cffc14298"
            "c208ff80ff80c2184248ff80c28cfffd41a841e8ff807fc1c296434ac1e8430042aec10043097f7f7f80"
            "c26042dafffdfffdfffdfffdfffdfffdfffdfffdfffdfffdfffdfffdfffdfffdfffdfffdfffd7f807f80"
            "ffc0ff80ff80ffc1ffc17f80ffc0ffc1ff80ff807f807f807fc1fffdc2baffc1ffc0c2a441d0ff7fc1e8"
            "7f7fc2d841d0431dc1d07fc1c28442dcfffdffc0ff80ffc0ffc1ff80ff807f80ff80ffc0ff80ffc1ffc0"
            "ffc1ffc0ff80fffd"
        ),
    ),
    "bf16_subnormal_c": dict(  # bf16 fixture 3, rows 0-2
        fmt="bf16",
        a=(
            "1b0fb0220f6d9dda07a000f833d41a09a07502a5ae05308890ff2fda31f6bb259b5a30708f449dd5078c"
            "80eab3ef1a6b204302e32e5330da90cd2fc631a83b099b14b0200f0e9dc487e8008a338b1a1a206902cf"
            "2e55308310ab2fe7b195bb53"
        ),
        b=(
            "a376a3792321a34b2351a3692314231ca3062334a35c2315a32fa331a31ca33f8c288c218c378c7e8c4f"
            "0c630c298c210c660c080c398c1c8c6e8c5b0c0b8c65ae492e20ae0e2e4bae47ae112e4fae0dae112e6a"
            "2e73ae02ae2a2e722e58ae651fc51f971fba1ff99fef1fa41ffd9fd19fac9fde1ffb9fb51fc91fc01fb9"
            "9fe43492b483348834bb34cf34a7b4b0b4b2349234bb34b1b4ed34cb348634edb4bbbd3fbd2dbd133d31"
            "3d663d7dbd54bd66bd7c3d78bd54bd383d7a3d66bd17bd118970094b095e09108939893c894689418966"
            "090e0926891909258945895f8901a15fa1042100a15e2124a10ca11ca11e216fa1182124a109a120a130"
            "2135a12c9d809dfa9df21ddc1def1dc79d8c1d839dba1da09da11d8c9dce1de31de51dfe3c563c003c69"
            "bc3a3c22bc0a3c29bc32bc34bc16bc0e3c42bc3abc693c603c74910c113a915f916c912d912d9175113d"
            "91341178913c9118112a9137914a91708b808bc38bf38b880bee8bd30b910be48b868b8c0bee8bcf0bd2"
            "8bba0b8d8ba22d4dad55ad07ad55ad47ad4b2d242d7a2d6b2d16ad0d2d1dad5dad692d3aad438ddd8de3"
            "8dca8dcb0dd20dd70da18df10db70d968db70daf0dd18d9f8dca8dc28ea00ed80eb30e800ede0ec80e9c"
            "0e898eb20e8a8ec60e948ee78ead0ee20ee202c782cc02c382f582cd82a682d102da82aa828802bd8298"
            "02af82c282878290"
        ),
        c=(
            "80220029007d00678002006c803b8052808200128057803d8045807d807b0056804c803f803c006d0071"
            "004f803d8059805100160078000f00180040001f0070001c004d8068000b0016803c00710034805c0004"
            "000e004f007600078017007e"
        ),
        expected=(
            "81260158018e013f018501800127003f816c00e38165010e818c815c01310194810701260075008f0137"
            "010700330085814b00eb80e000bb80ef810d0119014e00b7804e814e80f3810181338090805100108036"
            "00738068014d006f811680a9"
        ),
    ),
}
