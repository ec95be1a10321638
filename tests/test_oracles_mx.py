"""Self-tests of the MX and dense-MFMA oracles (tests/oracles/mx.py, tests/oracles/mfma_dense.py).

They need no jwmma: element decoding against ml_dtypes, rounding against ml_dtypes' float64
casts and a brute-force nearest-code search, block scaling, lane packing, the layout formulas
of BUILTINS_DENSE.md (coverage, inverses, the sources' own examples), and the scaled / xf32
references against the existing CDNA3 and FMA-chain references, an independent float32 numpy
transcription of rocjitsu's block loop, and hand-computed cases.

Where ml_dtypes and the oracles' rules differ (checked only where they agree):
* NaN into FP6/BF6/FP4: ml_dtypes 0.7 gives -0, the oracle raises ValueError (no NaN code);
  +-Inf: ml_dtypes gives +-max, the oracle raises ValueError;
* FP8 with ``saturate=True``: ml_dtypes never saturates (overflow -> NaN / Inf), so only
  in-range values are compared.
"""
from __future__ import annotations

import functools
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from oracles import mfma_dense as MD
from oracles import mx
from oracles.formats import F32, decode, encode_fraction
from oracles.ref_models import FusedParams, cdna3_dot, fma_chain_dot

ALL = [mx.FP6_E2M3, mx.BF6_E3M2, mx.FP4_E2M1, mx.FP8_E4M3, mx.BF8_E5M2]
IDS = [f.name for f in ALL]


def ml_value(code: int, f) -> float:
    """ml_dtypes' decoding of a code (the formats are one byte wide in ml_dtypes)."""
    return float(np.array([code], np.uint8).view(f.dtype)[0])


def f32(x: float) -> int:
    return int(np.array([x], np.float32).view(np.uint32)[0])


# =========================================================================== decoding
@pytest.mark.parametrize("f", ALL, ids=IDS)
def test_every_code_decodes_as_ml_dtypes(f):
    for code in range(1 << f.bits):
        got = mx.decode_code(f, code)
        want = ml_value(code, f)
        if np.isnan(want):
            assert got == "nan", hex(code)
        elif np.isinf(want):
            assert got == ("-inf" if want < 0 else "inf"), hex(code)
        else:
            assert got == Fraction(want), (hex(code), got, want)
            assert decode(code, f).neg == int(np.signbit(want))


def test_named_decoders_and_ranges():
    assert sorted({mx.decode_fp4_e2m1(c) for c in range(8)}) == [Fraction(x) for x in (0, 0.5, 1, 1.5, 2, 3, 4, 6)]
    assert mx.decode_fp4_e2m1(0xF) == -6
    assert max(mx.decode_fp6_e2m3(c) for c in range(64)) == Fraction(15, 2)
    assert min(mx.decode_fp6_e2m3(c) for c in range(1, 32)) == Fraction(1, 8)
    assert max(mx.decode_bf6_e3m2(c) for c in range(64)) == 28
    assert min(mx.decode_bf6_e3m2(c) for c in range(1, 32)) == Fraction(1, 16)
    assert [mx.max_finite(n) for n in ("fp6", "bf6", "fp4", "fp8", "bf8")] == [Fraction(15, 2), 28, 6, 448, 57344]
    assert [mx.fmt_of(c).name for c in range(5)] == ["fp8", "bf8", "fp6", "bf6", "fp4"]
    assert mx.fmt_of("e2m1") is mx.FP4_E2M1
    assert mx.decode_fp8_e4m3(0x7F) == mx.decode_fp8_e4m3(0xFF) == "nan"
    assert mx.decode_fp8_e4m3(0x7E) == 448
    assert mx.decode_bf8_e5m2(0x7C) == "inf" and mx.decode_bf8_e5m2(0xFC) == "-inf"
    assert mx.decode_bf8_e5m2(0x7D) == "nan"
    with pytest.raises(ValueError):
        mx.fmt_of(5)


def test_e8m0_every_code():
    e8 = ml_dtypes.float8_e8m0fnu
    for code in range(256):
        want = float(np.array([code], np.uint8).view(e8)[0])
        got = mx.decode_e8m0(code)
        if code == 255:
            assert got == "nan" and np.isnan(want)
            with pytest.raises(ValueError):
                mx.e8m0_exponent(code)
        else:
            assert got == Fraction(2) ** (code - 127) == Fraction(want)
            assert mx.e8m0_exponent(code) == code - 127


def test_xf32_cut(rng):
    bits = [int(x) for x in rng.integers(0, 2**32, size=2000)]
    bits += [0x3F800000 | (1 << 12), 0x3F800000 | (1 << 13), 0x7F800001, 0xFF801FFF, 0x7FC00000, 0x7F802000,
             0x80001FFF, 0x00002000, 0x80000000]
    for b in bits:
        cut = mx.xf32_bits(b)
        assert cut == b & ~0x1FFF & 0xFFFFFFFF
        # as MMA-Sim: x >> 13 << 13 on the int32 view
        x = np.array([b], np.uint32).view(np.int32)
        assert cut == int(((x >> 13) << 13).view(np.uint32)[0])
        v = float(np.array([cut], np.uint32).view(np.float32)[0])
        d = mx.decode_xf32(b)
        if np.isnan(v):
            assert d == "nan"
        elif np.isinf(v):
            assert d == ("-inf" if v < 0 else "inf")
        else:
            assert d == Fraction(v)
    assert mx.decode_xf32(0x3F800000 | (1 << 12)) == 1  # 1 + 2**-11 truncates to 1
    assert mx.decode_xf32(0x3F800000 | (1 << 13)) == 1 + Fraction(1, 1024)
    assert mx.decode_xf32(0x7F800001) == "inf" and mx.decode_xf32(0xFF801FFF) == "-inf"  # payload only in the cut bits
    assert mx.decode_xf32(0x7F802000) == "nan"


# =========================================================================== rounding
@functools.lru_cache(maxsize=None)
def _codes_by_value(name):
    """{finite non-negative value: code} of a format (the positive codes)."""
    f = mx.fmt_of(name)
    return {v: c for c in range(1 << (f.bits - 1)) if not isinstance(v := mx.decode_code(f, c), str)}


def _finite_values(f):
    """Sorted distinct finite non-negative values of f."""
    return sorted(_codes_by_value(f.name))


def _brute_round(f, x: Fraction, saturate: bool):
    """Nearest finite value of f by search; ties to the code with an even last mantissa bit;
    |x| beyond max: the max (saturate) or None (overflow)."""
    a = abs(x)
    mxv = mx.max_finite(f)
    vals = _finite_values(f)
    # the value one ulp above max (the first unrepresentable binade step) decides overflow
    top_ulp = Fraction(2) ** (f.max_exp - f.mbits)
    if a >= mxv + top_ulp / 2 and not (a == mxv + top_ulp / 2 and _code_of(f, mxv) % 2 == 0):
        return mxv if saturate else None
    best = min(vals, key=lambda v: (abs(v - a), _code_of(f, v) % 2))
    return best


def _code_of(f, v):
    return _codes_by_value(f.name)[v]


@pytest.mark.parametrize("f", ALL, ids=IDS)
def test_round_random_matches_ml_dtypes(f, rng):
    n = 1500
    x = rng.standard_normal(n) * np.exp2(rng.integers(-14, 20, n).astype(float))
    x = np.concatenate([x, [0.0, -0.0, 1e-300, -1e-300, 1e300, -1e300]])
    with np.errstate(over="ignore"):
        want = x.astype(f.dtype).view(np.uint8)
    for v, w in zip(x, want):
        w = int(w)
        if mx.decode_code(f, w) == "nan" or mx.decode_code(f, w) in ("inf", "-inf"):
            assert f.bits == 8  # ml_dtypes overflows only the 8-bit formats
            assert mx.round_to_code(f, float(v)) == w  # IEEE overflow (non-saturating default)
            sat = mx.round_to_code(f, float(v), saturate=True)
            assert mx.decode_code(f, sat) == (mx.max_finite(f) if v > 0 else -mx.max_finite(f))
        else:
            assert mx.round_to_code(f, float(v)) == w, (v, hex(w))
            assert mx.round_to_code(f, float(v), saturate=True) == w


@pytest.mark.parametrize("f", ALL, ids=IDS)
def test_round_ties_and_edges(f):
    """Every midpoint of consecutive values (ties to even), the midpoints around the largest
    value, values a hair off each midpoint, negative mirrors: against ml_dtypes (float64 ->
    format) where it does not overflow, and against a brute-force search with exact Fractions."""
    vals = _finite_values(f)
    ulp_top = Fraction(2) ** (f.max_exp - f.mbits)
    pts = [(lo + hi) / 2 for lo, hi in zip(vals, vals[1:])] + [vals[-1] + ulp_top / 2, vals[-1] + ulp_top,
                                                               vals[-1] * 4]
    eps = Fraction(1, 2**40)
    cases = []
    for p in pts:
        cases += [p, p + eps * p, p - eps * p]
    cases += [Fraction(1, 3), Fraction(2, 3) * vals[1], Fraction(7, 5), vals[1] / 2, vals[1] / 3]
    for x in cases:
        for s in (1, -1):
            v = s * x
            for sat in (True, False):
                if f.nan == "none" and not sat:
                    continue
                got = mx.round_to_code(f, v, saturate=sat)
                want = _brute_round(f, v, sat)
                if want is None:
                    assert mx.decode_code(f, got) in ("nan", "inf", "-inf")
                    if f.nan == "ieee":
                        assert mx.decode_code(f, got) == ("inf" if s > 0 else "-inf")
                    continue
                assert abs(mx.decode_code(f, got)) == want, (f.name, v, sat, hex(got))
                assert (got >> (f.bits - 1)) == (s < 0)  # the sign, also for a rounded-away zero
            fv = float(v)
            # ml_dtypes before 0.7 casts float64 through float32 (two roundings): compare with
            # it only where the float32 step is exact
            if Fraction(fv) == v and Fraction(float(np.float32(fv))) == v:
                w = int(np.array([fv]).astype(f.dtype).view(np.uint8)[0])
                if not isinstance(mx.decode_code(f, w), str):
                    assert mx.round_to_code(f, fv) == w, (f.name, fv)


def test_round_named_and_non_finite():
    assert mx.round_fp4_e2m1(Fraction(5, 2)) == 0x4  # 2.5 ties to 2
    assert mx.round_fp4_e2m1(Fraction(7, 2)) == 0x6  # 3.5 ties to 4
    assert mx.round_fp4_e2m1(100) == 0x7 and mx.round_fp4_e2m1(-100) == 0xF
    assert mx.round_fp6_e2m3(Fraction(31, 4)) == 0x1F  # 7.75 saturates to 7.5
    assert mx.round_bf6_e3m2(30) == 0x1F
    assert mx.round_fp6_e2m3(-0.0) == 0x20 and mx.round_fp6_e2m3(0) == 0
    assert mx.round_fp6_e2m3(Fraction(-1, 100)) == 0x20  # rounds to -0
    assert mx.round_fp8_e4m3(464) == 0x7E and mx.round_fp8_e4m3(465) == 0x7F
    assert mx.round_fp8_e4m3(465, saturate=True) == 0x7E and mx.round_fp8_e4m3(-465, saturate=True) == 0xFE
    assert mx.round_bf8_e5m2(61440) == 0x7C and mx.round_bf8_e5m2(61439) == 0x7B
    assert mx.round_bf8_e5m2(-61440, saturate=True) == 0xFB
    for f in (mx.FP6_E2M3, mx.BF6_E3M2, mx.FP4_E2M1):
        for bad in (float("nan"), float("inf"), float("-inf")):
            with pytest.raises(ValueError):
                mx.round_to_code(f, bad)
    assert mx.round_fp8_e4m3(float("nan")) == 0x7F and mx.round_bf8_e5m2(float("nan")) == 0x7E
    assert mx.round_fp8_e4m3(float("-inf")) == 0xFF and mx.round_fp8_e4m3(float("inf"), saturate=True) == 0x7E
    assert mx.round_bf8_e5m2(float("-inf")) == 0xFC and mx.round_bf8_e5m2(float("inf"), saturate=True) == 0x7B


# =========================================================================== block scaling
def test_block_scale_by_hand():
    assert mx.mx_block_scale([1.0] * 32, "fp8") == (127 - 8, [0x78] * 32)  # 1 = 256 * 2**-8
    assert mx.mx_block_scale([6.0] + [1.0] * 31, "fp4") == (127, [0x7] + [0x2] * 31)
    assert mx.mx_block_scale([0.0] * 31 + [-0.0], "fp6") == (127, [0] * 31 + [0x20])  # all zero: factor 1
    s, c = mx.mx_block_scale([7.9, 0.1] + [0.0] * 30, "fp6")  # amax 7.9: X = 2 - 2 = 0
    assert s == 127 and c[0] == 0x1F and mx.decode_fp6_e2m3(c[1]) == Fraction(1, 8)


def test_block_scale_clamps():
    s, c = mx.mx_block_scale([Fraction(2) ** -140] * 32, "fp4")  # X = -142 clamps to -127
    assert s == 0 and c == [0] * 32  # 2**-13 rounds to +0 in FP4
    s, c = mx.mx_block_scale([Fraction(2) ** -126] * 32, "fp4")  # X = -128 clamps to -127
    assert s == 0 and c == [0x4] * 32  # 2**-126 / 2**-127 = 2
    s, c = mx.mx_block_scale([Fraction(2) ** 200, 1.0] + [0] * 30, "bf8")  # X = 185 clamps to 127
    assert s == 254 and c[0] == 0x7B and c[1] == 0  # saturates to 57344; 2**-127 -> 0
    s, c = mx.mx_block_scale([float(2**127) * 1.9, -3.0] + [0.0] * 30, "fp8")
    # X = floor(log2 amax) - emax leaves amax / 2**X in [256, 512): 486.4 saturates to 448
    assert s == 127 + 127 - 8 and c[0] == 0x7E and c[1] == mx.round_fp8_e4m3(Fraction(-3, 2**119))
    with pytest.raises(ValueError):
        mx.mx_block_scale([1.0, float("nan")] + [0.0] * 30, "fp8")
    with pytest.raises(ValueError):
        mx.mx_block_scale([float("inf")] + [0.0] * 31, "fp4")


@pytest.mark.parametrize("f", ALL, ids=IDS)
def test_block_scale_random(f, rng):
    """Scale code = floor(log2 amax) - emax + 127 (in range here); elements = ml_dtypes' cast of
    v / 2**X where it is finite, else the saturated max; |element| <= max; the dequantised
    block is within half an element ulp of the input."""
    for _ in range(20):
        v = rng.standard_normal(32) * np.exp2(float(rng.integers(-30, 30)))
        v[rng.integers(32)] *= 2.0 ** rng.integers(0, 8)
        s, codes = mx.mx_block_scale([float(x) for x in v], f)
        amax = max(abs(Fraction(float(x))) for x in v)
        X = s - 127
        assert Fraction(2) ** (X + mx.EMAX_ELEM[f.name]) <= amax < Fraction(2) ** (X + mx.EMAX_ELEM[f.name] + 1)
        scaled = v * 2.0 ** -X
        want = scaled.astype(f.dtype).view(np.uint8)
        for x, w, c in zip(scaled, want, codes):
            w = int(w)
            if isinstance(mx.decode_code(f, w), str):
                assert mx.decode_code(f, c) == (mx.max_finite(f) if x > 0 else -mx.max_finite(f))
            else:
                assert c == w
            assert abs(mx.decode_code(f, c)) <= mx.max_finite(f)


def test_quantize_rows():
    rows = [[float(i + 1)] * 64 for i in range(3)]
    codes, scales = mx.mx_quantize_rows(rows, "fp4")
    assert len(codes) == 3 and len(codes[0]) == 64 and scales == [[125, 125], [126, 126], [126, 126]]
    assert mx.decode_fp4_e2m1(codes[2][0]) * Fraction(2) ** (scales[2][0] - 127) == 3
    with pytest.raises(ValueError):
        mx.mx_quantize_rows([[1.0] * 33], "fp4")


# =========================================================================== packing
@pytest.mark.parametrize("w", [4, 6, 8])
def test_pack_round_trip(w, rng):
    for count in (32, 1, 17):
        codes = [int(x) for x in rng.integers(0, 1 << w, size=count)]
        words = mx.pack_lane(codes, w)
        assert len(words) == 8 and all(0 <= x < 2**32 for x in words)
        assert mx.unpack_lane(words, w, count) == codes
        used = mx.words_used(w, count)
        assert all(x == 0 for x in words[used:])
        for e, c in enumerate(codes):  # element e from its pieces
            got, shift = 0, 0
            for word, lo, hi in mx.element_bits(w, e):
                got |= ((words[word] >> lo) & ((1 << (hi - lo + 1)) - 1)) << shift
                shift += hi - lo + 1
            assert got == c and shift == w


def test_pack_known_bits():
    assert mx.element_bits(6, 5) == [(0, 30, 31), (1, 0, 3)]
    assert mx.element_bits(6, 10) == [(1, 28, 31), (2, 0, 1)]
    assert mx.element_bits(6, 16) == [(3, 0, 5)]
    assert mx.element_bits(4, 7) == [(0, 28, 31)] and mx.element_bits(8, 31) == [(7, 24, 31)]
    codes = [0] * 32
    codes[5] = 0b111111
    assert mx.pack_lane(codes, 6)[:2] == [0xC0000000, 0xF]
    codes = list(range(16)) * 2
    assert mx.pack_lane(codes, 4)[:4] == [0x76543210, 0xFEDCBA98, 0x76543210, 0xFEDCBA98]  # 2b = low nibble
    assert mx.pack_lane([0x1FF, 0x100], 8)[0] == 0x00FF  # bits above w are ignored
    assert [mx.words_used(w) for w in (8, 6, 4)] == [8, 6, 4]
    with pytest.raises(ValueError):
        mx.pack_lane([0] * 33, 8)


# =========================================================================== layouts
DENSE = [(32, 2), (16, 4), (32, 4), (16, 8), (32, 8), (16, 16), (32, 16), (16, 32), (16, 64), (32, 32)]


@pytest.mark.parametrize("M,K", DENSE)
def test_dense_layout_covers_once(M, K):
    nk = MD.dense_nk(M, K)
    assert 64 * nk == M * K
    seen_a, seen_b = set(), set()
    for L in range(64):
        for e in range(nk):
            ik = MD.dense_a(M, K, L, e)
            kj = MD.dense_b(M, K, L, e)
            assert 0 <= ik[0] < M and 0 <= ik[1] < K and 0 <= kj[0] < K and 0 <= kj[1] < M
            seen_a.add(ik)
            seen_b.add(kj)
            assert MD.dense_a_inverse(M, K, *ik) == (L, e) and MD.dense_b_inverse(M, K, *kj) == (L, e)
            assert ik[1] == kj[0]  # the pairing is lane-local
    assert len(seen_a) == len(seen_b) == M * K


@pytest.mark.parametrize("M", [16, 32])
def test_cd_layout_covers_once(M):
    seen = set()
    for L in range(64):
        for t in range(MD.cd_elems(M)):
            ij = MD.cd(M, L, t)
            seen.add(ij)
            assert MD.cd_inverse(M, *ij) == (L, t)
    assert seen == {(i, j) for i in range(M) for j in range(M)}
    assert MD.cd(16, 17, 2) == (6, 1) and MD.cd(32, 33, 5) == (13, 1)


def test_f64_cd_layout():
    seen = set()
    for L in range(64):
        for t in range(4):
            ij = MD.cd_f64(L, t)
            seen.add(ij)
            assert MD.cd_f64_inverse(*ij) == (L, t)
    assert len(seen) == 256 and MD.cd_f64(17, 0) == (1, 1)  # lane group g holds rows g, g+4, ...


def test_blgp():
    assert [MD.blgp_source_lane(b, 37) for b in range(8)] == [37, 5, 37, 53, 5, 21, 37, 53]
    assert [MD.blgp_source_lane(b, 50) for b in range(8)] == [50, 18, 50, 2, 2, 18, 34, 50]
    for M, K in ((32, 2), (16, 4)):
        assert all(MD.blgp_b_source(M, K, 0, k, j) == MD.dense_b_inverse(M, K, k, j) for k in range(K) for j in range(M))
    with pytest.raises(ValueError):
        MD.blgp_source_lane(8, 0)


@pytest.mark.parametrize("M", [16, 32])
@pytest.mark.parametrize("w", [8, 6, 4])
def test_scaled_layout_covers_once(M, w):
    K = 2048 // M
    seen = set()
    for L in range(64):
        for e in range(MD.SCALED_ELEMS):
            i, k = MD.scaled_a(M, w, L, e)
            assert MD.scaled_b(M, w, L, e) == (k, i)
            assert 0 <= i < M and 0 <= k < K
            seen.add((i, k))
            assert MD.scaled_inverse(M, w, i, k) == (L, e)
    assert len(seen) == M * K


def test_scaled_layout_sources():
    """The sources' own statements (BUILTINS_DENSE.md 5.2/5.3)."""
    for i in range(16):  # FPSAN 16x16x128 fp8: lane 16*((k%64)/16) + i, byte (k/64)*16 + (k%16)
        for k in range(128):
            assert MD.scaled_inverse(16, 8, i, k) == (16 * ((k % 64) // 16) + i, (k // 64) * 16 + k % 16)
    for m in range(32):  # FPSAN 32x32x64 fp8: lane 16*(2*((k%32)/16) + m/16) + (m%16), byte (k/32)*16+(k%16)
        for k in range(64):
            assert MD.scaled_inverse(32, 8, m, k) == (16 * (2 * ((k % 32) // 16) + m // 16) + m % 16,
                                                      (k // 32) * 16 + k % 16)
    # 16x16x128 fp8: VGPRs 0-3 of lane group g hold k 16g..16g+15, VGPRs 4-7 hold 64+16g..
    assert [MD.scaled_a(16, 8, 16 * 2 + 3, e)[1] for e in (0, 15, 16, 31)] == [32, 47, 96, 111]
    # FP6/FP4: lane group g holds k 32g..32g+31; ISA-C4 FP6: lanes 16..31 hold K = 32..63
    assert MD.scaled_a(16, 6, 16, 0) == (0, 32) and MD.scaled_a(16, 4, 63, 31) == (15, 127)
    # scale lanes: 16x16 "Lane 16 M=0, K=32..63 ... Lane 63 M=15, K=96..127"; 32x32 "Lane 32 M=0, K=32..63"
    assert MD.scale_lane(16, 0, 1) == 16 and MD.scale_lane(16, 15, 3) == 63 and MD.scale_lane(32, 0, 1) == 32
    assert MD.scale_lane(32, 16, 0) == 16
    assert [MD.scale_byte(0x44332211, s) for s in range(4)] == [0x11, 0x22, 0x33, 0x44]


@pytest.mark.parametrize("M", [16, 32])
def test_scale_words_round_trip(M, rng):
    K = 2048 // M
    sc = rng.integers(0, 256, size=(M, K // 32)).tolist()
    for opsel in range(4):
        words = MD.scale_words(sc, M, opsel, fill=0x7F)
        assert len(words) == 64 and MD.scales_from_words(words, M, K, opsel) == sc
        other = (opsel + 1) % 4
        assert all(MD.scale_byte(x, other) == 0x7F for x in words)


# =========================================================================== scaled reference
def rand_codes(rng, f, shape, p_special=0.0):
    """Random codes of f: every code equally likely, specials (NaN/Inf) replaced unless kept
    with probability p_special."""
    c = rng.integers(0, 1 << f.bits, size=shape)
    for idx in np.ndindex(c.shape):
        while isinstance(mx.decode_code(f, int(c[idx])), str) and rng.random() >= p_special:
            c[idx] = rng.integers(0, 1 << f.bits)
    return c


PAIRS = [("fp8", "fp8"), ("bf8", "bf8"), ("fp6", "fp6"), ("bf6", "bf6"), ("fp4", "fp4"), ("fp8", "fp4"),
         ("bf6", "bf8"), ("fp4", "bf6")]
MODES = [("product", "fused"), ("product", "fma_chain"), ("block", "fused"), ("block", "fma_chain")]


def dot(a, b, c, sa, sb, fa, fb, mode, **kw):
    return MD.scaled_dot(a, b, c, sa, sb, fa, fb, scale_at=mode[0], block_sum=mode[1], **kw)


@pytest.mark.parametrize("fa,fb", PAIRS)
def test_unit_scales_fused_equals_cdna3_reference(fa, fb, rng):
    """Scales 127, C = +0, one group: the fused model is ref_models.cdna3_dot in one single-stage
    group (its C flooring and renormalisation lose nothing then): K = 64 with product scaling and
    group = K, K = 32 with block scaling. Specials included."""
    Fa, Fb = mx.fmt_of(fa), mx.fmt_of(fb)
    for K, mode in ((64, ("product", "fused")), (32, ("block", "fused"))):
        prm = FusedParams(group=K, two_stage=False, c_drop=False)
        for _ in range(12):
            a = [int(x) for x in rand_codes(rng, Fa, K, 0.02)]
            b = [int(x) for x in rand_codes(rng, Fb, K, 0.02)]
            got = dot(a, b, 0, [127] * (K // 32), [127] * (K // 32), fa, fb, mode, group=K)
            want = cdna3_dot(a, b, 0, Fa, Fb, prm)
            assert got == want or (decode(got, F32).kind == decode(want, F32).kind == "nan"), (hex(got), hex(want))


def rand_c(rng, n):
    out = []
    for _ in range(n):
        u = rng.random()
        if u < 0.2:
            out.append(int(rng.integers(2)) << 31)
        elif u < 0.3:
            out.append((int(rng.integers(2)) << 31) | int(rng.integers(1, 1 << 23)))
        else:
            out.append(f32(float(rng.standard_normal() * 2.0 ** rng.integers(-20, 20))))
    return out


@pytest.mark.parametrize("fa,fb", PAIRS[:5])
def test_unit_scales_chain_equals_fma_chain_reference(fa, fb, rng):
    """product/fma_chain with scales 127 is ref_models.fma_chain_dot (signed zeros included);
    product/fused with group 1 is the same chain for any scales (a product alone is exact)."""
    Fa, Fb = mx.fmt_of(fa), mx.fmt_of(fb)
    K = 64
    for c in rand_c(rng, 10):
        a = [int(x) for x in rand_codes(rng, Fa, K)]
        b = [int(x) for x in rand_codes(rng, Fb, K)]
        if rng.random() < 0.3:  # A of signed zeros only
            a = [int(rng.integers(2)) << (Fa.bits - 1) for _ in range(K)]
        got = dot(a, b, c, [127, 127], [127, 127], fa, fb, ("product", "fma_chain"))
        assert got == fma_chain_dot(a, b, c, Fa, Fb, F32)
        sa = [int(x) for x in rng.integers(0, 256, 2)]
        sb = [int(x) for x in rng.integers(0, 256, 2)]
        for ns in ("exponent", "nan"):
            assert (dot(a, b, c, sa, sb, fa, fb, ("product", "fma_chain"), nan_scale=ns)
                    == dot(a, b, c, sa, sb, fa, fb, ("product", "fused"), group=1, nan_scale=ns))


@pytest.mark.parametrize("fa,fb", PAIRS[::2])
def test_wide_fused_is_one_exact_rounding(fa, fb, rng):
    """product/fused with one group and enough fraction bits is RN_f32(C + exact scaled sum)."""
    Fa, Fb = mx.fmt_of(fa), mx.fmt_of(fb)
    K = 64
    for c in rand_c(rng, 8):
        a = [int(x) for x in rand_codes(rng, Fa, K)]
        b = [int(x) for x in rand_codes(rng, Fb, K)]
        sa = [int(x) for x in rng.integers(60, 200, 2)]
        sb = [int(x) for x in rng.integers(60, 200, 2)]
        total = mx.decode_code(F32, c) + sum(
            mx.decode_code(Fa, x) * mx.decode_code(Fb, y) * Fraction(2) ** (sa[k // 32] + sb[k // 32] - 254)
            for k, (x, y) in enumerate(zip(a, b)))
        if total == 0:
            continue
        got = dot(a, b, c, sa, sb, fa, fb, ("product", "fused"), group=K, frac_bits=2000)
        assert got == encode_fraction(F32, total)


def _numpy_block_chain(a, b, c, sa, sb, fa, fb):
    """rocjitsu's exec_f32_scaled_mixed in float32 numpy: per block an f32 sum from +0.0 (every
    product of these formats is exact in f32, so fma(a, b, s) = s + a*b rounded once), ldexp by
    sa + sb - 254, f32 accumulation from C; a 255 scale gives NaN."""
    Fa, Fb = mx.fmt_of(fa), mx.fmt_of(fb)
    av = np.array(a, np.uint8).view(Fa.dtype).astype(np.float32)
    bv = np.array(b, np.uint8).view(Fb.dtype).astype(np.float32)
    acc = np.array([c], np.uint32).view(np.float32)[0]
    with np.errstate(all="ignore"):
        for kb in range(len(a) // 32):
            s = np.float32(0.0)
            for k in range(32 * kb, 32 * kb + 32):
                s = np.float32(s + np.float32(av[k] * bv[k]))
            v = np.float32("nan") if 255 in (sa[kb], sb[kb]) else np.ldexp(s, np.int32(sa[kb] + sb[kb] - 254))
            acc = np.float32(acc + np.float32(v))
    return int(np.array([acc], np.float32).view(np.uint32)[0])


@pytest.mark.parametrize("fa,fb", PAIRS)
def test_block_chain_equals_float32_transcription(fa, fb, rng):
    """block/fma_chain = rocjitsu's loop run in float32: moderate scales with specials in the
    data; extreme scales (subnormal and overflowing blocks, NaN scales) with finite data."""
    Fa, Fb = mx.fmt_of(fa), mx.fmt_of(fb)
    K = 128
    for r, c in enumerate(rand_c(rng, 8)):
        extreme = r % 2
        a = [int(x) for x in rand_codes(rng, Fa, K, 0 if extreme else 0.02)]
        b = [int(x) for x in rand_codes(rng, Fb, K, 0 if extreme else 0.02)]
        lo, hi = (0, 256) if extreme else (100, 155)
        sa = [int(x) for x in rng.integers(lo, hi, 4)]
        sb = [int(x) for x in rng.integers(lo, hi, 4)]
        got = dot(a, b, c, sa, sb, fa, fb, ("block", "fma_chain"))
        want = _numpy_block_chain(a, b, c, sa, sb, fa, fb)
        if decode(want, F32).kind == "nan":
            assert got == 0x7FC00000
        else:
            assert got == want, (hex(got), hex(want), sa, sb)


# ------------------------------------------------------------------ hand-computed cases
ONE_F32 = 0x3F800000
NEXT_F32 = 0x3F800001  # 1 + 2**-23


def _row(K, entries):
    row = [0] * K
    for k, v in entries.items():
        row[k] = v
    return row


def test_hand_fused_vs_chain_inside_a_block():
    """bf8: 1*1 + (1.5*2**-12)*(2**-12) = 1 + 1.5*2**-24 from C = 0. A chain rounds up to
    1 + 2**-23; a fused group truncates the small product to 2**-24 on the 2**-24 grid of
    ET = 0 and then 1 + 2**-24 ties to 1."""
    a, b = _row(32, {0: 0x3C, 1: 0x0E}), _row(32, {0: 0x3C, 1: 0x0C})
    want = {("product", "fma_chain"): NEXT_F32, ("block", "fma_chain"): NEXT_F32,
            ("product", "fused"): ONE_F32, ("block", "fused"): ONE_F32}
    for mode, w in want.items():
        assert dot(a, b, 0, [127], [127], "bf8", "bf8", mode) == w, mode
    assert dot(a, b, 0, [127], [127], "bf8", "bf8", ("product", "fused"), group=1) == NEXT_F32


def test_hand_product_vs_block_chain():
    """fp8 1*1 + 1*1 scaled by 2**-24 onto C = 1: the product chain adds 2**-24 twice (each a
    tie back to 1); the block chain first sums 2, then adds 2**-23."""
    a = b = _row(32, {0: 0x38, 1: 0x38})
    want = {("product", "fma_chain"): ONE_F32, ("block", "fma_chain"): NEXT_F32,
            ("product", "fused"): NEXT_F32, ("block", "fused"): NEXT_F32}
    for mode, w in want.items():
        assert dot(a, b, ONE_F32, [103], [127], "fp8", "fp8", mode) == w, mode


def test_hand_group_across_blocks():
    """fp8 K = 64: block 0 gives 1, block 1 gives 1.5 scaled by 2**-24. A fused group over both
    blocks aligns the scaled product to ET = 0 (truncated to 2**-24, then a tie to 1); every
    other arrangement rounds 1 + 1.5*2**-24 up."""
    a, b = _row(64, {0: 0x38, 32: 0x3C}), _row(64, {0: 0x38, 32: 0x38})
    sa, sb = [127, 103], [127, 127]
    assert dot(a, b, 0, sa, sb, "fp8", "fp8", ("product", "fused"), group=64) == ONE_F32
    assert dot(a, b, 0, sa, sb, "fp8", "fp8", ("product", "fused"), group=32) == NEXT_F32
    for mode in (("block", "fused"), ("block", "fma_chain"), ("product", "fma_chain")):
        assert dot(a, b, 0, sa, sb, "fp8", "fp8", mode, group=64) == NEXT_F32, mode


def test_hand_subbyte_frac_bits():
    """fp4 6*6 + 0.5*0.5: ET = 4; with 2 fraction bits the grid is 4 and 0.25 is cut (36);
    with 24 bits, or when one operand is fp8, the sum is 36.25."""
    a = b = _row(32, {0: 0x7, 1: 0x1})
    m = ("product", "fused")
    assert dot(a, b, 0, [127], [127], "fp4", "fp4", m, subbyte_frac_bits=2) == 0x42100000
    assert dot(a, b, 0, [127], [127], "fp4", "fp4", m) == 0x42110000
    a8 = _row(32, {0: 0x4C, 1: 0x30})  # fp8 6.0 and 0.5
    assert dot(a8, b, 0, [127], [127], "fp8", "fp4", m, subbyte_frac_bits=2) == 0x42110000
    assert dot(a, b, 0, [127], [127], "fp4", "fp4", ("block", "fused"), subbyte_frac_bits=2) == 0x42100000


def test_hand_scales_nan_zero_and_overflow():
    a = b = _row(64, {0: 0x38})
    c = 0x40400000
    for mode in MODES:
        assert dot(a, b, c, [127, 255], [127, 127], "fp8", "fp8", mode) == 0x7FC00000  # an unused block's NaN scale
        assert dot(a, b, c, [127, 127], [127, 127], "fp8", "fp8", mode) == 0x40800000  # 3 + 1
        # 'exponent': 255 is 2**128, block 1 holds no product -> no effect
        assert dot(a, b, c, [127, 255], [127, 127], "fp8", "fp8", mode, nan_scale="exponent") == 0x40800000
        assert dot(a, b, 0, [255, 127], [127, 127], "fp8", "fp8", mode, nan_scale="exponent") == 0x7F800000
        assert dot(a, b, 0, [0, 127], [127, 127], "fp8", "fp8", mode) == 0x00400000  # 2**-127, subnormal
        assert dot(a, b, 0, [0, 127], [0, 127], "fp8", "fp8", mode) == 0  # 2**-254 underflows to +0
    # +2**128 in block 0, -2**128 in block 1: the product chain stays +Inf, the block sums meet as
    # +Inf + -Inf, and one fused group over both cancels exactly
    a = _row(64, {0: 0x38, 32: 0xB8})
    b = _row(64, {0: 0x38, 32: 0x38})
    sa, sb = [255, 255], [127, 127]
    kw = {"nan_scale": "exponent"}
    assert dot(a, b, 0, sa, sb, "fp8", "fp8", ("product", "fma_chain"), **kw) == 0x7F800000
    assert dot(a, b, 0, sa, sb, "fp8", "fp8", ("product", "fused"), group=32, **kw) == 0x7F800000
    assert dot(a, b, 0, sa, sb, "fp8", "fp8", ("product", "fused"), group=64, **kw) == 0
    assert dot(a, b, 0, sa, sb, "fp8", "fp8", ("block", "fma_chain"), **kw) == 0x7FC00000
    assert dot(a, b, 0, sa, sb, "fp8", "fp8", ("block", "fused"), **kw) == 0x7FC00000


def test_hand_specials_and_signed_zeros():
    one8, inf8, ninf8, zero8 = 0x3C, 0x7C, 0xFC, 0x00  # bf8
    s = [127]
    for mode in MODES:
        d = lambda a, b, c: dot(_row(32, a), _row(32, b), c, s, s, "bf8", "bf8", mode)  # noqa: E731
        assert d({0: inf8}, {0: zero8}, 0) == 0x7FC00000  # Inf * 0
        assert d({0: inf8}, {0: one8}, 0xFF800000) == 0x7FC00000  # +Inf product, C = -Inf
        assert d({0: inf8, 1: ninf8}, {0: one8, 1: one8}, 0) == 0x7FC00000
        assert d({0: ninf8}, {0: one8}, ONE_F32) == 0xFF800000
        assert d({}, {}, 0x7FC00001) == 0x7FC00000  # C NaN, canonical NaN out
        assert d({}, {}, 0xFF800000) == 0xFF800000
        assert dot(_row(32, {3: 0x7F}), _row(32, {3: 0x38}), 0, s, s, "fp8", "fp8", mode) == 0x7FC00000  # E4M3 NaN
        # all products -0 (-0 * 1) and C = -0: -0 in the product FMA chain (IEEE); a fused
        # group's sum is an integer, +0 (as CDNA3's); the block modes start each block sum at
        # +0.0, so -0 + +0 = +0
        neg0 = dot([0x80] * 32, [0x38] * 32, 0x80000000, s, s, "fp8", "fp8", mode)
        assert neg0 == (0x80000000 if mode == ("product", "fma_chain") else 0), mode
        assert dot([0x00] * 32, [0x38] * 32, 0x80000000, s, s, "fp8", "fp8", mode) == 0, mode
        # exact cancellation is +0
        assert dot(_row(32, {0: 0x38, 1: 0xB8}), _row(32, {0: 0x38, 1: 0x38}), 0x80000000, s, s, "fp8", "fp8",
                   mode) == 0


def test_matrix_reference_and_registers(rng):
    """scaled_mfma_reference is scaled_dot per output; scaled_builtin_reference (registers, opsel,
    scale words) gives the same D through the layouts, for a mixed fp8 x fp4 16x16x128 and a
    bf6 x fp8 32x32x64."""
    for M, fa, fb in ((16, "fp8", "fp4"), (32, "bf6", "fp8")):
        K = 2048 // M
        Fa, Fb = mx.fmt_of(fa), mx.fmt_of(fb)
        A = rand_codes(rng, Fa, (M, K))
        B = rand_codes(rng, Fb, (K, M))
        C = np.array(rand_c(rng, M * M), np.int64).reshape(M, M)
        sa = rng.integers(110, 140, size=(M, K // 32))
        sb = rng.integers(110, 140, size=(K // 32, M))
        model = dict(scale_at="product", block_sum="fused", group=32 if M == 16 else 64)
        D = MD.scaled_mfma_reference(fa, fb, A, B, C, sa, sb, **model)
        assert D.dtype == np.uint32 and D.shape == (M, M)
        for i, j in ((0, 0), (M - 1, 3), (5, M - 2)):
            assert D[i, j] == dot([int(x) for x in A[i]], [int(x) for x in B[:, j]], int(C[i, j]), sa[i], sb[:, j],
                                  fa, fb, ("product", "fused"), group=model["group"])
        a_regs = MD.scaled_regs(A, fa, M, "a")
        b_regs = MD.scaled_regs(B, fb, M, "b")
        assert (MD.scaled_from_regs(a_regs, fa, M, "a") == A).all() and (MD.scaled_from_regs(b_regs, fb, M, "b") == B).all()
        assert not a_regs[:, mx.words_used(Fa.bits):].any()
        wa = MD.scale_words(sa.tolist(), M, 2, fill=0xFF)  # the other bytes are NaN scales: never read
        wb = MD.scale_words(sb.T.tolist(), M, 1, fill=0xFF)
        c_regs = MD.d_to_regs(C.astype(np.uint32), M)
        d_regs = MD.scaled_builtin_reference(a_regs, b_regs, c_regs.view(np.float32), mx.MX_FORMATS.index(Fa),
                                             mx.MX_FORMATS.index(Fb), 2, wa, 1, wb, M, **model)
        assert (MD.d_from_regs(d_regs, M) == D).all()


# =========================================================================== gfx942 xf32 / f32
def test_xf32_hand_cases():
    one = 0x3F800000
    # NUMERICS 1.3's example in the f32-operand path: 1*1 + C = -2**-30 floors C onto the 24-bit
    # grid of 2**0: 0x3F7FFFFF; the f32 FMA chain rounds to 1.0
    assert MD.xf32_dot([one, 0, 0, 0], [one, 0, 0, 0], f32(-(2.0**-30))) == 0x3F7FFFFF
    assert MD.f32_dot([one], [one], f32(-(2.0**-30))) == one
    # operands are cut: (1 + 2**-11) * 1 is 1; (1 + 2**-10) survives
    assert MD.xf32_dot([0x3F800000 | 1 << 12], [one], 0) == one
    assert MD.xf32_dot([0x3F800000 | 1 << 13], [one], 0) == 0x3F802000
    assert MD.f32_dot([0x3F800000 | 1 << 12], [one], 0) == 0x3F801000
    # a NaN whose payload is only in the cut bits becomes Inf: Inf * 1 -> Inf, Inf * 0 -> NaN
    assert MD.xf32_dot([0x7F800001], [one], 0) == 0x7F800000
    assert MD.xf32_dot([0x7F800001], [0], 0) & 0x7FC00000 == 0x7FC00000
    # groups of 4: the 2**-25 products truncate to 0 on the 2**-24 grid of a group holding 1
    # (group 0: 1 + 3 * 2**-25 -> 1; group 1: RNE(1 + 2**-25) = 1), but sum exactly in a group
    # of their own (4 * 2**-25 = 2**-23, then 1 + 2**-23 in the next group)
    tiny = f32(2.0**-25)
    a = [one, tiny, tiny, tiny, tiny, 0, 0, 0]
    b = [one] * 8
    assert MD.xf32_dot(a, b, 0) == one
    assert MD.xf32_dot(a[1:5] + [one, 0, 0, 0], b, 0) == 0x3F800001
    assert MD.xf32_dot(a[1:5] + [one, 0, 0, 0], b, 0, FusedParams(group=8)) == one  # one group of 8
    assert MD.f32_dot(a[1:5] + [one, 0, 0, 0], b, 0) == 0x3F800001
    assert MD.f32_dot(a, b, 0) == one


def test_xf32_matches_exact_on_small_integers(rng):
    """Small-integer operands: every group sum is exact and every f32 rounding too."""
    M, K, N = 4, 8, 4
    A = rng.integers(-8, 9, size=(M, K)).astype(np.float32).view(np.uint32)
    B = rng.integers(-8, 9, size=(K, N)).astype(np.float32).view(np.uint32)
    C = rng.integers(-100, 100, size=(M, N)).astype(np.float32).view(np.uint32)
    want = (A.view(np.float32).astype(np.int64) @ B.view(np.float32).astype(np.int64) + C.view(np.float32)
            .astype(np.int64)).astype(np.float32).view(np.uint32)
    got_x = MD.xf32_mfma_reference(A, B, C)
    got_f = MD.f32_mfma_reference(A, B, C)
    assert (got_x == want).all() and (got_f == want).all()
