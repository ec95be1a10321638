"""The dense CDNA3/CDNA4 MFMA rows (docs/spec/BUILTINS_DENSE.md): layouts against AMD's
calculator (every lane and element of `tests/data/cdna3_mfma_calculator.json`), the gfx950 and
block-scaled layouts, register packing and scale registers against the plain-Python oracles,
and each builtin's arithmetic (registers in, registers out) against the oracles' references on
random and adversarial data.
"""
from __future__ import annotations

import json
import pathlib

import ml_dtypes
import numpy as np
import pytest

import jwmma
import oracles.mfma_dense as O
import oracles.mx as MX
from oracles import ref_models as R
from oracles.formats import BF8_FNUZ, BF16, F16, FP8_FNUZ, from_codes

DUMP = json.loads((pathlib.Path(__file__).parent / "data" / "cdna3_mfma_calculator.json").read_text())
CDNA3 = {v["builtin"]: (k, v) for k, v in DUMP["instructions"].items() if "f64" not in k}
SCALED = ("mfma_scale_f32_16x16x128_f8f6f4", "mfma_scale_f32_32x32x64_f8f6f4")
CDNA4 = ("mfma_f32_16x16x32_f16", "mfma_f32_32x32x16_f16", "mfma_f32_16x16x32_bf16", "mfma_f32_32x32x16_bf16",
         "mfma_i32_16x16x64_i8", "mfma_i32_32x32x32_i8")
FMT_DTYPES = {0: ml_dtypes.float8_e4m3fn, 1: ml_dtypes.float8_e5m2, 2: ml_dtypes.float6_e2m3fn,
              3: ml_dtypes.float6_e3m2fn, 4: ml_dtypes.float4_e2m1fn}
WIDTH = {0: 8, 1: 8, 2: 6, 3: 6, 4: 4}


def _layout_entries(layout):
    lanes, n, _ = layout.shape
    return {(int(L), int(e), int(layout[L, e, 0]), int(layout[L, e, 1])) for L in range(lanes) for e in range(n)}


# ------------------------------------------------------------------------------ layouts
def test_every_cdna3_dense_instruction_of_the_calculator_is_a_row():
    """The 18 single-block CDNA3 instructions the calculator knows (f64 aside: not emulated,
    `jwmma list` says so) are rows, with the calculator's M, N, K."""
    assert len(CDNA3) == 18
    for name, (instr, v) in CDNA3.items():
        spec = jwmma.BUILTINS[name]
        assert (spec.m, spec.n, spec.k) == tuple(int(v["detail"][x]) for x in "MNK"), name
        assert spec.dense and spec.wave == 64 and spec.arch == "gfx942"


@pytest.mark.parametrize("name", sorted(CDNA3))
def test_cdna3_layouts_equal_the_calculator(name):
    """A, B, C and D: every (lane, element) -> matrix position the calculator prints (C = D)."""
    _, v = CDNA3[name]
    spec = jwmma.BUILTINS[name]
    ops = v["operands"]
    for key, layout in (("A", spec.a_layout), ("B", spec.b_layout), ("C", spec.c_layout), ("D", spec.c_layout)):
        want = {tuple(x) for x in ops[key]["entries"]}
        assert _layout_entries(layout) == want, (name, key)


@pytest.mark.parametrize("name", ["mfma_f32_32x32x2f32", "mfma_f32_16x16x4f32"])
@pytest.mark.parametrize("blgp", range(1, 8))
def test_blgp_lanes_equal_the_calculator(name, blgp):
    """BLGP on the f32 forms: the source lane of every B entry, as the calculator prints it;
    and the builtin computes with those lanes (B from the swizzled registers)."""
    _, v = CDNA3[name]
    spec = jwmma.BUILTINS[name]
    want = {tuple(x) for x in v["operands"][f"B_blgp{blgp}"]["entries"]}
    src = jwmma.isa.layouts.BLGP_LANES[blgp]
    got = {(int(src[L]), e, k, j) for (L, e, k, j) in _layout_entries(spec.b_layout)}
    assert got == want
    for L in range(64):  # and the oracle's table
        assert src[L] == O.blgp_source_lane(blgp, L)


def test_blgp_computes_with_the_swizzled_lanes(rng):
    name = "mfma_f32_16x16x4f32"
    a = rng.standard_normal((16, 4)).astype(np.float32)
    b = rng.standard_normal((4, 16)).astype(np.float32)
    ra, rb, rc = jwmma.pack_a(name, a), np.asarray(jwmma.pack_b(name, b)), jwmma.pack_c(name, np.zeros((16, 16), np.float32))
    for blgp in (3, 6):
        d = jwmma.mfma_f32_16x16x4f32(ra, rb, rc, 0, 0, blgp)
        swz = rb[jwmma.isa.layouts.BLGP_LANES[blgp]]  # the registers each lane reads
        ref = jwmma.mfma_f32_16x16x4f32(ra, swz, rc)
        np.testing.assert_array_equal(np.asarray(d).view(np.uint32), np.asarray(ref).view(np.uint32))
        assert not np.array_equal(np.asarray(d), np.asarray(jwmma.mfma_f32_16x16x4f32(ra, rb, rc)))


@pytest.mark.parametrize("name", CDNA4)
def test_cdna4_dense_layouts_equal_the_oracle(name):
    spec = jwmma.BUILTINS[name]
    m, k = spec.m, spec.k
    a = {(L, e, *O.dense_a(m, k, L, e)) for L in range(64) for e in range(spec.a.elems)}
    b = {(L, e, *O.dense_b(m, k, L, e)) for L in range(64) for e in range(spec.b.elems)}
    c = {(L, t, *O.cd(m, L, t)) for L in range(64) for t in range(O.cd_elems(m))}
    assert _layout_entries(spec.a_layout) == a
    assert _layout_entries(spec.b_layout) == b
    assert _layout_entries(spec.c_layout) == c
    assert spec.arch == "gfx950" and spec.targets == ("gfx950",)


@pytest.mark.parametrize("name", SCALED)
@pytest.mark.parametrize("fa,fb", [(0, 4), (2, 1), (3, 3)])
def test_scaled_layouts_equal_the_oracle(name, fa, fb):
    """fp8/bf8 in 16-element chunks, fp6/bf6/fp4 contiguous (BUILTINS_DENSE.md 5.2), per format."""
    spec = jwmma.isa.table.lookup(name, formats=(fa, fb))
    m = spec.m
    assert (spec.a_type, spec.b_type) == (jwmma.isa.table.SCALE_FORMATS[fa], jwmma.isa.table.SCALE_FORMATS[fb])
    a = {(L, e, *O.scaled_a(m, WIDTH[fa], L, e)) for L in range(64) for e in range(32)}
    b = {(L, e, *O.scaled_b(m, WIDTH[fb], L, e)) for L in range(64) for e in range(32)}
    assert _layout_entries(spec.a_layout) == a
    assert _layout_entries(spec.b_layout) == b
    assert spec.a.n == spec.b.n == 8 and spec.a.elem_bits == WIDTH[fa]


# ------------------------------------------------------------------------------ registers
@pytest.mark.parametrize("fmt", range(5))
def test_scaled_register_packing_equals_the_oracle(rng, fmt):
    """Every lane's 32 codes packed little-endian into 8 words (6-bit codes straddle words;
    unused words zero), both ways."""
    name = SCALED[0]
    codes = rng.integers(0, 1 << WIDTH[fmt], (16, 128)).astype(np.uint8)
    regs = np.asarray(jwmma.pack_a(name, codes.view(FMT_DTYPES[fmt]))).view(np.uint32)
    spec = jwmma.isa.table.lookup(name, formats=(fmt, 0))
    for L in range(64):
        lane = [int(codes[i, k]) for (i, k) in (tuple(spec.a_layout[L, e]) for e in range(32))]
        assert list(regs[L]) == MX.pack_lane(lane, WIDTH[fmt]), L
    back = np.asarray(jwmma.unpack_a(name, regs.view(np.int32), fmt=fmt)).view(np.uint8)
    np.testing.assert_array_equal(back & ((1 << WIDTH[fmt]) - 1), codes)


@pytest.mark.parametrize("name", SCALED)
@pytest.mark.parametrize("opsel", [0, 2])
def test_scale_registers_equal_the_oracle(rng, name, opsel):
    spec = jwmma.BUILTINS[name]
    nb = spec.k // 32
    sa = rng.integers(0, 256, (spec.m, nb)).astype(np.uint8)
    sb = rng.integers(0, 256, (nb, spec.n)).astype(np.uint8)
    wa = np.asarray(jwmma.pack_scale(name, sa, "a", opsel=opsel)).view(np.uint32)
    wb = np.asarray(jwmma.pack_scale(name, sb, "b", opsel=opsel)).view(np.uint32)
    assert list(wa) == O.scale_words(sa.tolist(), spec.m, opsel)
    assert list(wb) == O.scale_words(sb.T.tolist(), spec.n, opsel)
    np.testing.assert_array_equal(np.asarray(jwmma.unpack_scale(name, wa.view(np.int32), "a", opsel=opsel)), sa)
    np.testing.assert_array_equal(np.asarray(jwmma.unpack_scale(name, wb.view(np.int32), "b", opsel=opsel)), sb)
    e8m0 = sa.view(ml_dtypes.float8_e8m0fnu)  # the ml_dtypes scale type holds the same codes
    np.testing.assert_array_equal(np.asarray(jwmma.pack_scale(name, e8m0, "a", opsel=opsel)).view(np.uint32), wa)


# ------------------------------------------------------------------------------ arithmetic
def _codes(rng, fmt, shape, adversarial):
    w = WIDTH[fmt]
    if not adversarial:  # values of moderate exponent
        x = rng.standard_normal(shape) * 2.0 ** rng.integers(-2, 3, shape)
        return np.asarray(jwmma.numerics.cast(x, FMT_DTYPES[fmt])).view(np.uint8)
    codes = rng.integers(0, 1 << w, shape).astype(np.uint8)  # every code: subnormals, max, NaN/Inf
    codes[rng.random(shape) < 0.3] &= np.uint8((1 << (w - 1)) | ((1 << (w - 2)) - 1))  # more small values
    return codes


def _scales(rng, shape, adversarial):
    """E8M0 codes: near 127, or (adversarial) any code, 0 (2**-127) and 255 (NaN) included."""
    if not adversarial:
        return rng.integers(120, 135, shape).astype(np.uint8)
    return np.where(rng.random(shape) < 0.6, rng.integers(110, 145, shape), rng.integers(0, 256, shape)).astype(np.uint8)


MODELS = {"cdna4_mx": dict(scale_at="product", block_sum="fused"),
          "mx_rocjitsu": dict(scale_at="block", block_sum="fma_chain"),
          "BlockScaled(block_sum='fma_chain')": dict(scale_at="product", block_sum="fma_chain"),
          "BlockScaled(scale_at='block', group=8)": dict(scale_at="block", block_sum="fused", group=8),
          "BlockScaled(group=16, subbyte_frac_bits=12, nan_scale='exponent')":
              dict(scale_at="product", block_sum="fused", group=16, subbyte_frac_bits=12, nan_scale="exponent")}
CASES = [(SCALED[0], 0, 0, "cdna4_mx"), (SCALED[1], 4, 2, "cdna4_mx"), (SCALED[0], 1, 3, "mx_rocjitsu"),
         (SCALED[1], 2, 4, "BlockScaled(block_sum='fma_chain')"),
         (SCALED[0], 3, 1, "BlockScaled(scale_at='block', group=8)"),
         (SCALED[0], 4, 4, "BlockScaled(group=16, subbyte_frac_bits=12, nan_scale='exponent')")]
SLOW_CASES = [(n, fa, fb, m) for n in SCALED for fa in range(5) for fb in range(5) for m in MODELS
              if (n, fa, fb, m) not in CASES and (fa + fb + len(m)) % 3 == 0]


def _scaled_check(rng, name, fa, fb, model, adversarial):
    spec = jwmma.BUILTINS[name]
    m, k = spec.m, spec.k
    A = _codes(rng, fa, (m, k), adversarial)
    B = _codes(rng, fb, (k, m), adversarial)
    C = rng.standard_normal((m, m)).astype(np.float32) * 4.0
    if adversarial:
        C.view(np.uint32)[rng.random((m, m)) < 0.1] = rng.choice(
            np.array([0x80000000, 0x7F800000, 0xFF800000, 0x7FC00001, 0x00000001, 0x7F7FFFFF], np.uint32))
    sa = _scales(rng, (m, k // 32), adversarial)
    sb = _scales(rng, (k // 32, m), adversarial)
    opsel_a, opsel_b = int(rng.integers(0, 4)), int(rng.integers(0, 4))
    regs_a = np.stack([MX.pack_lane([int(A[i, kk]) for i, kk in (O.scaled_a(m, WIDTH[fa], L, e) for e in range(32))],
                                    WIDTH[fa]) for L in range(64)]).astype(np.uint32)
    regs_b = np.stack([MX.pack_lane([int(B[kk, j]) for kk, j in (O.scaled_b(m, WIDTH[fb], L, e) for e in range(32))],
                                    WIDTH[fb]) for L in range(64)]).astype(np.uint32)
    noise = rng.integers(0, 1 << 32, (64,), dtype=np.uint64).astype(np.uint32)  # the other scale bytes
    wa = np.asarray(O.scale_words(sa.tolist(), m, opsel_a), np.uint32) | (noise & ~np.uint32(0xFF << 8 * opsel_a))
    wb = np.asarray(O.scale_words(sb.T.tolist(), m, opsel_b), np.uint32) | (noise[::-1] & ~np.uint32(0xFF << 8 * opsel_b))
    c_regs = O.d_to_regs(C.view(np.uint32).astype(np.int64), m).astype(np.uint32)
    want = O.scaled_builtin_reference(regs_a, regs_b, c_regs, fa, fb, opsel_a, wa, opsel_b, wb, m, **MODELS[model])
    fn = getattr(jwmma, name)
    got = fn(regs_a.view(np.int32), regs_b.view(np.int32), c_regs.view(np.float32), fa, fb, opsel_a,
             wa.view(np.int32), opsel_b, wb.view(np.int32), model=model)
    got = np.asarray(got).view(np.uint32)
    bad = np.argwhere(got != np.asarray(want, np.uint32))
    assert bad.size == 0, (f"{len(bad)} outputs differ, first at lane/elem {tuple(bad[0])}: "
                           f"{int(got[tuple(bad[0])]):#x} vs {int(want[tuple(bad[0])]):#x}")


@pytest.mark.parametrize("name,fa,fb,model", CASES)
@pytest.mark.parametrize("adversarial", [False, True])
def test_scaled_builtin_equals_the_oracle(rng, name, fa, fb, model, adversarial):
    """The block-scaled builtin, registers in and out (opsel bytes chosen at random, the other
    scale bytes noise), equals the oracle's model bit for bit (NaN results are 0x7FC00000)."""
    _scaled_check(rng, name, fa, fb, model, adversarial)


@pytest.mark.slow
@pytest.mark.parametrize("name,fa,fb,model", SLOW_CASES)
def test_scaled_builtin_equals_the_oracle_grid(rng, name, fa, fb, model):
    _scaled_check(rng, name, fa, fb, model, True)


def test_unscaled_call_is_factor_one(rng):
    """scale_a = scale_b = None: every factor 1 (E8M0 127), what LLVM compiles a literal scale
    of 0 to; equal to passing 127 in the selected bytes."""
    name = SCALED[0]
    a = rng.standard_normal((16, 128)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((128, 16)).astype(ml_dtypes.float8_e5m2)
    ra, rb, rc = jwmma.pack_a(name, a), jwmma.pack_b(name, b), jwmma.pack_c(name, np.ones((16, 16), np.float32))
    ones = jwmma.pack_scale(name, np.full((16, 4), 127, np.uint8), "a", opsel=1)
    d1 = jwmma.mfma_scale_f32_16x16x128_f8f6f4(ra, rb, rc, 0, 1)
    d2 = jwmma.mfma_scale_f32_16x16x128_f8f6f4(ra, rb, rc, 0, 1, 1, ones, 1, ones)
    np.testing.assert_array_equal(np.asarray(d1).view(np.uint32), np.asarray(d2).view(np.uint32))


def _rand_f32(rng, shape, adversarial):
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-8, 9, shape)).astype(np.float32)
    if adversarial:
        bits = x.view(np.uint32)
        pick = rng.random(shape)
        bits[pick < 0.05] = rng.integers(1, 1 << 23, int((pick < 0.05).sum())).astype(np.uint32)  # subnormals
        bits[(pick >= 0.05) & (pick < 0.08)] = 0x7F7FFFFF
        bits[(pick >= 0.08) & (pick < 0.09)] = 0x7F801000  # a NaN whose payload xf32 cuts away: Inf
        bits[(pick >= 0.09) & (pick < 0.1)] = 0x80000000
    return x


@pytest.mark.parametrize("name", ["mfma_f32_16x16x8_xf32", "mfma_f32_32x32x4_xf32", "mfma_f32_16x16x4f32",
                                  "mfma_f32_32x32x2f32"])
@pytest.mark.parametrize("adversarial", [False, True])
def test_f32_and_xf32_builtins_equal_the_oracle(rng, name, adversarial):
    """Default model cdna3: xf32 = operands cut to 10 mantissa bits, fused groups of 4
    (MMA-Sim's CDNA3 xf32); f32 = an FMA chain in K order (MMA-Sim's "fma")."""
    spec = jwmma.BUILTINS[name]
    a = _rand_f32(rng, (spec.m, spec.k), adversarial)
    b = _rand_f32(rng, (spec.k, spec.n), adversarial)
    with np.errstate(over="ignore", invalid="ignore"):
        c = _rand_f32(rng, (spec.m, spec.n), adversarial) * np.float32(16)
    ref = (O.xf32_mfma_reference if "xf32" in name else O.f32_mfma_reference)(
        a.view(np.uint32).tolist(), b.view(np.uint32).tolist(), c.view(np.uint32).tolist())
    d = getattr(jwmma, name)(jwmma.pack_a(name, a), jwmma.pack_b(name, b), jwmma.pack_c(name, c))
    got = np.asarray(jwmma.unpack_c(name, d)).view(np.uint32)
    ref = np.asarray(ref, np.uint32)
    nan = np.isnan(ref.view(np.float32))
    np.testing.assert_array_equal(np.isnan(got.view(np.float32)), nan)
    np.testing.assert_array_equal(got[~nan], ref[~nan])


@pytest.mark.parametrize("name,fmt", [("mfma_f32_16x16x16f16", F16), ("mfma_f32_32x32x8bf16_1k", BF16),
                                      ("mfma_f32_16x16x32_bf16", BF16), ("mfma_f32_16x16x32_fp8_bf8", None)])
def test_cdna3_model_dense_rows_equal_the_oracle(rng, name, fmt):
    """The 16-bit and 8-bit rows under cdna3: MMA-Sim's fused groups (8; fp8: 16 in two stages)
    in the documented K order of the calculator's layout."""
    spec = jwmma.BUILTINS[name]
    fa = fmt or FP8_FNUZ
    fb = fmt or BF8_FNUZ
    a = rng.integers(0, 1 << fa.bits, (spec.m, spec.k))
    b = rng.integers(0, 1 << fb.bits, (spec.k, spec.n))
    c = rng.standard_normal((spec.m, spec.n)).astype(np.float32)
    av, bv = from_codes(a, fa), from_codes(b, fb)
    d = np.asarray(jwmma.gemm(av, bv, c, builtin=name)).view(np.uint32)
    prm = R.CDNA3_2X
    for i in range(0, spec.m, 5):
        for j in range(0, spec.n, 3):
            want = R.cdna3_dot([int(x) for x in a[i]], [int(x) for x in b[:, j]], int(c.view(np.uint32)[i, j]),
                               fa, fb, prm)
            got = int(d[i, j])
            if np.isnan(np.float32(np.uint32(want).view(np.float32))):
                assert np.isnan(np.uint32(got).view(np.float32))
            else:
                assert got == want, (i, j, hex(got), hex(want))


@pytest.mark.parametrize("name", ["mfma_i32_16x16x32_i8", "mfma_i32_32x32x32_i8"])
def test_i8_rows_wrap_exactly(rng, name):
    spec = jwmma.BUILTINS[name]
    a = rng.choice(np.array([-128, 127, -1, 0, 1], np.int8), (spec.m, 3 * spec.k))
    b = rng.choice(np.array([-128, 127, -1, 0, 1], np.int8), (3 * spec.k, spec.n))
    c = rng.choice(np.array([2**31 - 1, -2**31, 0], np.int32), (spec.m, spec.n))
    d = np.asarray(jwmma.gemm(a, b, c, builtin=name))
    ref = (a.astype(np.int64) @ b.astype(np.int64) + c) & 0xFFFFFFFF
    np.testing.assert_array_equal(d.view(np.uint32), ref.astype(np.uint32))


# ------------------------------------------------------------------------------ bad input
def test_modifiers_refused(rng):
    name = "mfma_f32_16x16x16f16"
    a = jwmma.pack_a(name, np.ones((16, 16), np.float16))
    c = jwmma.pack_c(name, np.zeros((16, 16), np.float32))
    with pytest.raises(ValueError, match="cbsz must be 0 for mfma_f32_16x16x16f16 .*single-block"):
        jwmma.mfma_f32_16x16x16f16(a, a, c, 1)
    with pytest.raises(ValueError, match="abid must be 0"):
        jwmma.mfma_f32_16x16x16f16(a, a, c, 0, 1)
    with pytest.raises(ValueError, match="blgp must be 0 for mfma_f32_16x16x16f16"):
        jwmma.mfma_f32_16x16x16f16(a, a, c, 0, 0, 2)
    f = "mfma_f32_16x16x4f32"
    af, cf = jwmma.pack_a(f, np.ones((16, 4), np.float32)), jwmma.pack_c(f, np.zeros((16, 16), np.float32))
    with pytest.raises(ValueError, match=r"blgp must be in \[0, 7\], got 8"):
        jwmma.mfma_f32_16x16x4f32(af, af, cf, 0, 0, 8)
    with pytest.raises(TypeError, match="blgp must be a Python int"):
        jwmma.mfma_f32_16x16x4f32(af, af, cf, 0, 0, 1.0)
    with pytest.raises(ValueError, match="target for mfma_f32_16x16x8_xf32 must be one of \\['gfx942'\\]"):
        jwmma.gemm(np.ones((16, 8), np.float32), np.ones((8, 16), np.float32), builtin="mfma_f32_16x16x8_xf32",
                   target="gfx950")


def test_scaled_bad_input(rng):
    name = SCALED[0]
    ra = jwmma.pack_a(name, np.ones((16, 128), ml_dtypes.float8_e4m3fn))
    rc = jwmma.pack_c(name, np.zeros((16, 16), np.float32))
    fn = jwmma.mfma_scale_f32_16x16x128_f8f6f4
    with pytest.raises(ValueError, match="fmt_a must be a format code .*0 fp8.*4 fp4.*got 5"):
        fn(ra, ra, rc, 5, 0)
    with pytest.raises(ValueError, match=r"opsel_b must be in \[0, 3\], got 4"):
        fn(ra, ra, rc, 0, 0, 0, None, 4, None)
    with pytest.raises(TypeError, match="scale_a for mfma_scale_f32_16x16x128_f8f6f4 must be int32 .*pack_scale"):
        fn(ra, ra, rc, 0, 0, 0, np.zeros(64, np.float32), 0, None)
    with pytest.raises(ValueError, match=r"scale_b .* must have shape \(\*batch, 64\)"):
        fn(ra, ra, rc, 0, 0, 0, None, 0, np.zeros(32, np.int32))
    with pytest.raises(TypeError, match="of a block-scaled MFMA must hold one of float8_e4m3fn"):
        jwmma.pack_a(name, np.ones((16, 128), np.float16))
    with pytest.raises(ValueError, match="is not a model for the block-scaled builtins"):
        fn(ra, ra, rc, model="cdna3")
    with pytest.raises(ValueError, match="models the block-scaled builtins"):
        jwmma.mfma_f32_16x16x16f16(*(jwmma.pack_a("mfma_f32_16x16x16f16", np.ones((16, 16), np.float16)),) * 2,
                                   jwmma.pack_c("mfma_f32_16x16x16f16", np.zeros((16, 16), np.float32)),
                                   model="cdna4_mx")
    with pytest.raises(ValueError, match=r"scales must have shape \(\*batch, M, K/32\) with trailing dims \(16, 4\)"):
        jwmma.pack_scale(name, np.zeros((16, 3), np.uint8))
    with pytest.raises(ValueError, match=r"scales must hold values in \[0, 255\]"):
        jwmma.pack_scale(name, np.full((16, 4), 256, np.int32))
