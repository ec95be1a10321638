"""RDNA3 (gfx11) dense WMMA: `wmma_f32_16x16x16_{f16,bf16}_w32/_w64` and
`wmma_i32_16x16x16_{iu8,iu4}_w32/_w64` (docs/spec/BUILTINS_MORE.md section 5; the 16-bit outputs
with opsel: tests/test_rdna3_wmma16.py).

* Layouts: every entry of AMD's matrix instruction calculator dump
  (tests/data/rdna3_wmma_calculator.json: A and B replicated in every 16-lane group, each copy
  an entry) is the table's layout, and the table has no other entry.
* Arithmetic: rocjitsu's gfx1100 hardware captures (tests/data/gfx1100_wmma_captures.json:
  103 DOT2 cases through `jwmma.dot`, the 256-output WMMA matrix through the builtins of both
  wave sizes and through `jwmma.gemm`) bit for bit; adversarial waves against the slow oracle
  tests/oracles/ref_gfx11.py; the integer rows against exact Python integers with wrap or one
  final saturation.
"""
from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import jwmma
from oracles import ref_gfx11
from oracles.gfx11_codes import random_codes as _codes

DATA = Path(__file__).parent / "data"
CALC = json.loads((DATA / "rdna3_wmma_calculator.json").read_text())
CAP = json.loads((DATA / "gfx1100_wmma_captures.json").read_text())
DT = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}
FLOAT = [f"wmma_f32_16x16x16_{t}_w{w}" for w in (32, 64) for t in ("f16", "bf16")]
INT = [f"wmma_i32_16x16x16_{t}_w{w}" for w in (32, 64) for t in ("iu8", "iu4")]
ROWS = FLOAT + INT
SIXTEEN = [f"wmma_{t}_16x16x16_{t}{tie}_w{w}" for w in (32, 64) for t in ("f16", "bf16") for tie in ("", "_tied")]


def _calc(name):
    key = "v_" + name
    return CALC["instructions"][key]


# ------------------------------------------------------------------------ layouts
@pytest.mark.parametrize("name", ROWS)
def test_layouts_are_the_calculators_every_entry(name):
    spec = jwmma.BUILTINS[name]
    inst = _calc(name)
    assert inst["builtin"] == name and inst["wave"] == spec.wave
    for key, layout in (("A", spec.a_layout), ("B", spec.b_layout), ("C", spec.c_layout), ("D", spec.c_layout)):
        op = inst["operands"][key]
        ours = {(lane, e, int(layout[lane, e, 0]), int(layout[lane, e, 1]))
                for lane in range(layout.shape[0]) for e in range(layout.shape[1])}
        theirs = {tuple(x) for x in op["entries"]}
        assert ours == theirs, (name, key)
    assert spec.a.elem_bits == inst["operands"]["A"]["element_bits"]
    assert spec.c.elem_bits == inst["operands"]["C"]["element_bits"]


def test_replicated_inputs_are_read_from_lanes_0_to_15():
    """Every copy is packed; a call reads the first 16 lanes (the other copies may disagree)."""
    name = "wmma_f32_16x16x16_f16_w64"
    rng = np.random.default_rng(0)
    a = rng.integers(-4, 5, (16, 16)).astype(np.float16)
    b = rng.integers(-4, 5, (16, 16)).astype(np.float16)
    ra, rb = np.asarray(jwmma.pack_a(name, a)), np.asarray(jwmma.pack_b(name, b))
    for g in range(4):  # pack writes every copy
        assert np.array_equal(ra[16 * g:16 * g + 16], ra[:16]) and np.array_equal(rb[16 * g:16 * g + 16], rb[:16])
    c = jwmma.pack_c(name, np.zeros((16, 16), np.float32))
    d = jwmma.wmma_f32_16x16x16_f16_w64(ra, rb, c)
    junk_a, junk_b = ra.copy(), rb.copy()
    junk_a[16:], junk_b[16:] = np.float16(7), np.float16(-3)
    assert np.array_equal(np.asarray(jwmma.wmma_f32_16x16x16_f16_w64(junk_a, junk_b, c)), np.asarray(d))
    assert np.array_equal(np.asarray(jwmma.unpack_a(name, junk_a)), a)
    with pytest.raises(ValueError, match=r"wmma_f32_16x16x16_f16_w64: check=True: a lane 16 element 0 differs from "
                                         r"lane 0 \(\d+ element\(s\) of other copies differ\)"):
        jwmma.wmma_f32_16x16x16_f16_w64(junk_a, junk_b, c, check=True)
    jwmma.wmma_f32_16x16x16_f16_w64(ra, rb, c, check=True)  # equal copies pass
    with pytest.raises(ValueError, match=r"check=True: b lane 35 element 2 differs from lane 3"):
        bad_b = rb.copy()
        bad_b[35, 2] = -bad_b[3, 2] if bad_b[3, 2] != 0 else np.float16(1)
        jwmma.wmma_f32_16x16x16_f16_w64(ra, bad_b, c, check=True)
    exact = jwmma.wmma_f32_16x16x16_f16_w64(junk_a, junk_b, c, model="exact")
    assert np.array_equal(np.asarray(jwmma.unpack_c(name, exact)), a.astype(np.float32) @ b.astype(np.float32))


# ------------------------------------------------------------------------ gfx1100 captures
@pytest.mark.parametrize("fmt", ["f16", "bf16"])
def test_dot2_captures(fmt):
    rows = CAP["dot2"][fmt]
    a = np.array([[r["a"] & 0xFFFF, r["a"] >> 16] for r in rows], np.uint16).view(DT[fmt])
    b = np.array([[r["b"] & 0xFFFF, r["b"] >> 16] for r in rows], np.uint16).view(DT[fmt])
    c = np.array([r["c"] for r in rows], np.uint32).view(np.float32)
    want = np.array([r["expected"] for r in rows], np.uint32)
    got = np.asarray(jwmma.dot(a, b, c, model="gfx11_dot2")).view(np.uint32)
    assert np.array_equal(got, want)
    oracle = [ref_gfx11.dot2(r["a"] & 0xFFFF, r["b"] & 0xFFFF, r["a"] >> 16, r["b"] >> 16, r["c"], fmt) for r in rows]
    assert oracle == want.tolist()


def _wmma_matrix():
    w = CAP["wmma_integer_matrix"]
    want = np.array(w["expected"], np.uint32).reshape(16, 16)
    return np.array(w["a"], np.float32), np.array(w["b"], np.float32), np.array(w["c"], np.float32), want


@pytest.mark.parametrize("name", [n if n in ("wmma_f32_16x16x16_f16_w32", "wmma_f32_16x16x16_bf16_w64")
                                  else pytest.param(n, marks=pytest.mark.slow) for n in FLOAT])
def test_wmma_capture_through_the_builtin(name):
    """rocjitsu's 256-output gfx1100 WMMA capture, both wave sizes; `exact` differs."""
    a, b, c, want = _wmma_matrix()
    t = jwmma.BUILTINS[name].a_type
    regs = (jwmma.pack_a(name, a.astype(DT[t])), jwmma.pack_b(name, b.astype(DT[t])), jwmma.pack_c(name, c))
    fn = getattr(jwmma, name)
    got = np.asarray(jwmma.unpack_c(name, fn(*regs))).view(np.uint32)
    assert np.array_equal(got, want)
    exact = np.asarray(jwmma.unpack_c(name, fn(*regs, model="exact"))).view(np.uint32)
    assert (exact != want).sum() == 105


@pytest.mark.parametrize("path", ["matrix", "registers"])
def test_wmma_capture_through_gemm(path):
    """The capture through gemm on both paths (the register path packs every copy and reads
    lanes 0-15), and a K = 48 chain of three such steps against the oracle."""
    a, b, c, want = _wmma_matrix()
    d = jwmma.gemm(a.astype(np.float16), b.astype(np.float16), c, builtin="wmma_f32_16x16x16_f16_w64", path=path)
    assert np.array_equal(np.asarray(d).view(np.uint32), want)
    rng = np.random.default_rng(5)
    a3, b3 = _codes(rng, "bf16", (16, 48)), _codes(rng, "bf16", (48, 16))
    c3 = _c_codes(rng, (16, 16))
    d = jwmma.gemm(a3.view(DT["bf16"]), b3.view(DT["bf16"]), c3.view(np.float32),
                   builtin="wmma_f32_16x16x16_bf16_w32", path=path)
    acc = c3
    for s in range(3):
        acc = ref_gfx11.wmma(a3[:, 16 * s:16 * s + 16], b3[16 * s:16 * s + 16], acc, "bf16")
    assert np.asarray(d).view(np.uint32).tolist() == acc


# ------------------------------------------------------------------------ adversarial data
def _c_codes(rng, shape):
    e = rng.integers(120, 135, shape)
    e = np.where(rng.random(shape) < 0.05, 0, e)
    frac = rng.integers(0, 1 << 23, shape)
    return ((rng.integers(0, 2, shape) << 31) | (e << 23) | frac).astype(np.uint32)


def _against_oracle(name, waves, seed):
    spec = jwmma.BUILTINS[name]
    fmt = spec.a_type
    rng = np.random.default_rng(seed)
    a = _codes(rng, fmt, (waves, 16, 16))
    b = _codes(rng, fmt, (waves, 16, 16))
    c = _c_codes(rng, (waves, 16, 16))
    regs = (jwmma.pack_a(name, a.view(DT[fmt])), jwmma.pack_b(name, b.view(DT[fmt])),
            jwmma.pack_c(name, c.view(np.float32)))
    got = np.asarray(jwmma.unpack_c(name, getattr(jwmma, name)(*regs))).view(np.uint32)
    for w in range(waves):
        assert got[w].tolist() == ref_gfx11.wmma(a[w], b[w], c[w], fmt), (name, w)


@pytest.mark.parametrize("name", ["wmma_f32_16x16x16_f16_w32", "wmma_f32_16x16x16_bf16_w64"])
def test_adversarial_waves_against_the_oracle(name):
    _against_oracle(name, 2, 1)


@pytest.mark.slow
@pytest.mark.parametrize("name", FLOAT)
def test_adversarial_waves_against_the_oracle_full(name):
    _against_oracle(name, 24, 2)


# ------------------------------------------------------------------------ integer rows
def _int_case(name, rng, waves, a_signed, b_signed, clamp, big=False):
    spec = jwmma.BUILTINS[name]
    bits = 8 if spec.a_type == "iu8" else 4
    lo = lambda s: -(1 << (bits - 1)) if s else 0
    hi = lambda s: (1 << (bits - 1)) - 1 if s else (1 << bits) - 1
    a = rng.integers(lo(a_signed), hi(a_signed) + 1, (waves, 16, 16))
    b = rng.integers(lo(b_signed), hi(b_signed) + 1, (waves, 16, 16))
    c = rng.integers(-(2**31), 2**31, (waves, 16, 16)) if big else rng.integers(-1000, 1000, (waves, 16, 16))
    if big:  # next to the limits, so that the sum crosses them
        c = np.where(c >= 0, 2**31 - 1 - rng.integers(0, 3000, c.shape), -(2**31) + rng.integers(0, 3000, c.shape))
    dt = {(8, True): np.int8, (8, False): np.uint8, (4, True): ml_dtypes.int4, (4, False): ml_dtypes.uint4}
    ra = jwmma.pack_a(name, a.astype(dt[bits, a_signed]))
    rb = jwmma.pack_b(name, b.astype(dt[bits, b_signed]))
    rc = jwmma.pack_c(name, c.astype(np.int32))
    d = np.asarray(jwmma.unpack_c(name, getattr(jwmma, name)(a_signed, ra, b_signed, rb, rc, clamp)))
    for w in range(waves):
        for i in range(16):
            for j in range(16):
                s = int(c[w, i, j]) + sum(int(a[w, i, k]) * int(b[w, k, j]) for k in range(16))
                want = min(max(s, -(2**31)), 2**31 - 1) if clamp else (s + 2**31) % 2**32 - 2**31
                assert int(d[w, i, j]) == want, (name, a_signed, b_signed, clamp, w, i, j)


@pytest.mark.parametrize("name", INT)
def test_integer_rows(name):
    rng = np.random.default_rng(3)
    _int_case(name, rng, 1, True, False, False)
    _int_case(name, rng, 1, False, True, True, big=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", INT)
@pytest.mark.parametrize("signs", [(True, True), (True, False), (False, True), (False, False)])
@pytest.mark.parametrize("clamp", [False, True])
def test_integer_rows_full(name, signs, clamp):
    rng = np.random.default_rng(4)
    _int_case(name, rng, 2, *signs, clamp, big=True)
    _int_case(name, rng, 2, *signs, clamp)


# ------------------------------------------------------------------------ refusals
def test_wrong_wave_registers_are_named():
    z = lambda *s: np.zeros(s, np.float16)
    with pytest.raises(ValueError, match=r"wmma_f32_16x16x16_f16_w32: a must have shape \(\*batch, 32, 16\).*got \(64, 16\)"):
        jwmma.wmma_f32_16x16x16_f16_w32(z(64, 16), z(32, 16), np.zeros((32, 8), np.float32))
    with pytest.raises(ValueError, match=r"c must have shape \(\*batch, 64, 4\).*got \(64, 8\)"):
        jwmma.wmma_f32_16x16x16_f16_w64(z(64, 16), z(64, 16), np.zeros((64, 8), np.float32))
    i = lambda *s: np.zeros(s, np.int32)
    with pytest.raises(ValueError, match=r"b must have shape \(\*batch, 32, 2\).*got \(32, 4\)"):
        jwmma.wmma_i32_16x16x16_iu4_w32(True, i(32, 2), True, i(32, 4), i(32, 8), False)


def test_float_rows_take_no_integer_modifiers():
    z = lambda *s: np.zeros(s, np.float16)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'clamp'"):
        jwmma.wmma_f32_16x16x16_f16_w32(z(32, 16), z(32, 16), np.zeros((32, 8), np.float32), clamp=True)
    with pytest.raises(TypeError, match=r"clamp must be a Python bool.*got 2"):
        jwmma.wmma_i32_16x16x16_iu8_w32(True, np.zeros((32, 4), np.int32), True, np.zeros((32, 4), np.int32),
                                        np.zeros((32, 8), np.int32), 2)


def test_gfx11_dot2_refuses_other_formats():
    with pytest.raises(ValueError, match=r"Gfx11Dot2\(\) multiplies f16 x f16 or bf16 x bf16"):
        jwmma.gemm(np.zeros((16, 16), ml_dtypes.float8_e4m3fn), np.zeros((16, 16), ml_dtypes.float8_e4m3fn),
                   np.zeros((16, 16), np.float32), builtin="wmma_f32_16x16x16_fp8_fp8_w32_gfx12", model="gfx11_dot2")


# ------------------------------------------------------------------------ downstream
def test_listing_targets_and_layout_command(capsys):
    from jwmma.cli import main
    assert main(["list", "--arch", "gfx1100", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sorted(r["name"] for r in rows) == sorted(ROWS + SIXTEEN)
    assert main(["list", "--target", "gfx1151"]) == 0
    out = capsys.readouterr().out
    assert all(n in out for n in ROWS)
    spec = jwmma.isa.table.lookup("wmma_i32_16x16x16_iu8_w64", "gfx1151")
    assert spec.arch == "gfx1151" and spec.targets == ("gfx1100", "gfx1151")
    assert main(["layout", "wmma_f32_16x16x16_f16_w64", "--element", "3,5"]) == 0
    out = capsys.readouterr().out
    assert [f"lane {L:2d}  elem  5  v[2] bits [31:16]   -> A[3][5]" in out for L in (3, 19, 35, 51)] == [True] * 4
    assert main(["layout", "wmma_f32_16x16x16_bf16_w32", "-o", "c", "--lane", "17"]) == 0
    out = capsys.readouterr().out
    assert "lane 17  elem  1  v[1] bits [31:0]    -> C[3][1]" in out

