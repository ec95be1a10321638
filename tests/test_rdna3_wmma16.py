"""RDNA3 (gfx11) WMMA with 16-bit outputs: `wmma_f16_16x16x16_f16_w32/_w64`,
`wmma_bf16_16x16x16_bf16_w32/_w64` and their `_tied` forms (docs/spec/BUILTINS_MORE.md 5.1,
NUMERICS.md 2.3).

* Layouts: every C/D entry of AMD's matrix instruction calculator dump
  (tests/data/rdna3_wmma_calculator.json), OPSEL[2] = 0 (`C`, `D`: the low halves) and = 1
  (`C_opsel4`, `D_opsel4`: the high halves), is where the table, `pack_c(..., opsel=)` and the
  `jwmma layout` view put each C/D element; A and B are the f32-output rows' (every entry too).
* Arithmetic: rocjitsu's gfx1100 (W7900) hardware captures of the packed WMMA bit for bit:
  the 28 result matrices (tests/data/gfx1100_packed_wmma_captures.json: wave32 and wave64, f16
  and bf16, 7 fixtures each, inputs from tests/data/gfx1201_wmma_captures.json) and the operand
  captures a builtin can express (tests/data/gfx1100_packed_operand_captures.json: both OPSEL[2]
  halves, selector bits the hardware ignores), all through the oracle by default and through the
  builtins of their format and wave size, plain and `_tied`, both opsel values (by default the
  two rows of `test_against_the_oracle_and_by_hand`, every row in the slow test); the slow oracle
  tests/oracles/ref_gfx11.py (rocjitsu's packed DOT2 step written from the spec: C widened, an f16
  C aligned on a -14 floor, narrowed after every step) on adversarial waves, both opsel values,
  plain and `_tied`, both wave sizes; hand-made cases for each behaviour (subnormal C, NaN/Inf
  payloads, overflow to Inf, ties, bf16 truncation) whose expected bits are worked out in the test.
* The other half of each D VGPR: C's in the `_tied` builtins, zero in the plain ones (the
  hardware leaves the destination's bits there; jwmma's documented choice).
"""
from __future__ import annotations

import json
from pathlib import Path

import jax
import ml_dtypes
import numpy as np
import pytest

import jwmma
from oracles import ref_gfx11
from oracles.gfx11_codes import random_codes as _codes

DATA = Path(__file__).parent / "data"
CALC = json.loads((DATA / "rdna3_wmma_calculator.json").read_text())
PACKED = json.loads((DATA / "gfx1100_packed_wmma_captures.json").read_text())
OPERAND = json.loads((DATA / "gfx1100_packed_operand_captures.json").read_text())
INPUTS = json.loads((DATA / "gfx1201_wmma_captures.json").read_text())["packed_wmma"]
DT = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}
NAMES = [f"wmma_{t}_16x16x16_{t}{tie}_w{w}" for w in (32, 64) for t in ("f16", "bf16") for tie in ("", "_tied")]


def _calc(name):
    plain = name.replace("_tied", "")
    inst = CALC["instructions"]["v_" + plain]
    assert name in inst["builtins"] and inst["wave"] == jwmma.BUILTINS[name].wave
    return inst


def _entries(inst, key):
    return {tuple(x) for x in inst["operands"][key]["entries"]}


# ------------------------------------------------------------------------ layouts
@pytest.mark.parametrize("name", NAMES)
def test_layouts_are_the_calculators_every_entry(name):
    spec = jwmma.BUILTINS[name]
    inst = _calc(name)
    assert spec.opsel and spec.tied == ("_tied" in name) and spec.c.elem_bits == 16 == inst["operands"]["C"]["element_bits"]
    assert spec.c.n == 2 * spec.c_layout.shape[1] == 256 // spec.wave * 2  # two 16-bit halves per VGPR
    for key, layout in (("A", spec.a_layout), ("B", spec.b_layout)):
        ours = {(lane, e, int(layout[lane, e, 0]), int(layout[lane, e, 1]))
                for lane in range(layout.shape[0]) for e in range(layout.shape[1])}
        assert ours == _entries(inst, key), key
    for opsel, keys in ((0, ("C", "D")), (1, ("C_opsel4", "D_opsel4"))):
        elem = spec.c_elements(opsel)
        ours = {(lane, int(elem[t]), int(spec.c_layout[lane, t, 0]), int(spec.c_layout[lane, t, 1]))
                for lane in range(spec.lanes) for t in range(spec.c_layout.shape[1])}
        shown = {(en.lane, en.e, en.row, en.col) for en in jwmma.isa.view.entries(spec, "c", opsel=opsel)}
        for key in keys:
            assert ours == _entries(inst, key) == shown, (key, opsel)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["wmma_bf16_16x16x16_bf16_tied_w64", "wmma_f16_16x16x16_f16_w32"])
def test_pack_c_puts_each_value_where_the_calculator_says(name):
    """pack_c(opsel=h) writes C[row][col] into register element 2v + h (the calculator's entry)
    and zeros into the other halves; unpack_c(opsel=h) reads them back."""
    spec = jwmma.BUILTINS[name]
    inst = _calc(name)
    c = (np.arange(256).reshape(16, 16) + 1).astype(DT[spec.c_type])
    for opsel, key in ((0, "C"), (1, "C_opsel4")):
        regs = np.asarray(jwmma.pack_c(name, c, opsel=bool(opsel))).view(np.uint16)
        want = np.zeros_like(regs)
        for lane, e, row, col in _entries(inst, key):
            want[lane, e] = c.view(np.uint16)[row, col]
        assert np.array_equal(regs, want)
        back = np.asarray(jwmma.unpack_c(name, regs.view(DT[spec.c_type]), opsel=opsel))
        assert np.array_equal(back.view(np.uint16), c.view(np.uint16))


# ------------------------------------------------------------------------ the oracle
def _c_codes(rng, fmt, shape):
    """16-bit C codes around the products' scale, with subnormal and overflowing-size C, NaN
    payloads and Inf (a wide exponent spread so that overflow to Inf and underflow happen)."""
    fb, bias, emask = ref_gfx11.FORMATS[fmt]
    field = rng.integers(max(1, bias - 14), min(emask, bias + 16), shape)
    field = np.where(rng.random(shape) < 0.12, 0, field)  # subnormal C (f16: kept; bf16: read as zero)
    field = np.where(rng.random(shape) < 0.01, emask, field)
    frac = rng.integers(0, 1 << fb, shape)
    return ((rng.integers(0, 2, shape) << 15) | (field << fb) | frac).astype(np.uint16)


def _call(name, a, b, c, c_other, opsel):
    """D of the builtin on matrices of codes, C in half opsel and c_other in the other: (D's half
    opsel, D's other half) as (waves, 16, 16) codes. Checks on the way that pack_c puts each
    value in the register element the calculator names and zeros in the other half."""
    t = jwmma.BUILTINS[name].c_type
    mine = np.asarray(jwmma.pack_c(name, c.view(DT[t]), opsel=bool(opsel)))
    theirs = np.asarray(jwmma.pack_c(name, c_other.view(DT[t]), opsel=1 - opsel))
    for regs, mat, half in ((mine, c, opsel), (theirs, c_other, 1 - opsel)):
        want = np.zeros(regs.shape, np.uint16)
        for lane, e, row, col in _entries(_calc(name), "C_opsel4" if half else "C"):
            want[:, lane, e] = mat[:, row, col]
        assert np.array_equal(regs.view(np.uint16), want), half
    regs = np.where(np.arange(mine.shape[-1]) % 2 == opsel, mine, theirs)
    d = getattr(jwmma, name)(jwmma.pack_a(name, a.view(DT[t])), jwmma.pack_b(name, b.view(DT[t])), regs, bool(opsel))
    got = np.asarray(jwmma.unpack_c(name, d, opsel=opsel)).view(np.uint16)
    other = np.asarray(jwmma.unpack_c(name, d, opsel=1 - opsel)).view(np.uint16)
    return got, other


def _captures(fmt, wave):
    """The transcribed gfx1100 result matrices of one format and wave size, as `_cases` rows: (what,
    A, B, C, D) with A, B, C, D 16 x 16 codes (the loader's rules: tests/data/gfx1100_packed_wmma_captures.json)."""
    out = []
    for case in PACKED["cases"]:
        if (case["fmt"], case["wave"]) == (fmt, wave):
            fx = INPUTS[fmt][case["fixture"]]
            assert fx["fixture"] == case["fixture"]
            a, b, c, d = (np.array(x, np.uint16).reshape(16, 16) for x in (fx["a"], fx["b"], fx["c"], case["expected"]))
            out.append((f"gfx1100 capture {fmt} wave{wave} fixture {case['fixture']}", a, b, c, d))
    return out


def _field(word, lo, width):
    return (word >> lo) & ((1 << width) - 1)


def _operand_captures(fmt, opsel):
    """The gfx1100 operand captures (tests/data/gfx1100_packed_operand_captures.json, any wave
    size) that the builtin of `fmt` with this opsel expresses: A = v0, B = v8, C = VGPR v16, no
    NEG/NEG_HI/CLAMP, OP_SEL[2] = opsel; OP_SEL[1:0] and OP_SEL_HI may be anything (the captures
    show they change nothing: every such entry of one input has one result). As `_cases` rows,
    one per distinct input. Checks on the way that D's other half kept the destination's old
    bits (the destination is v24, not C)."""
    opcode = int(_calc(f"wmma_{fmt}_16x16x16_{fmt}_w32")["detail"]["VOP3P Opcode"], 16)
    found = {}
    for case in OPERAND["cases"]:
        w0, w1 = (int(x, 16) for x in case["encoding"])
        a, b, c, got = (int(case[k], 16) for k in ("a", "b", "c", "expected_gfx1100"))
        if (_field(w0, 16, 7) != opcode or _field(w0, 8, 3) or _field(w0, 15, 1) or _field(w1, 29, 3)
                or (_field(w1, 0, 9), _field(w1, 9, 9), _field(w1, 18, 9)) != (256, 264, 272)
                or _field(w0, 13, 1) != opsel):
            continue
        half = 16 * opsel
        assert got & ~(0xFFFF << half) == 0x56781234 & ~(0xFFFF << half), case  # D's other half kept
        found.setdefault((a, b, c), set()).add((got >> half) & 0xFFFF)
    out = []
    for (a, b, c), ds in found.items():
        assert len(ds) == 1, (hex(a), hex(b), hex(c), ds)  # ignored selector bits: one result
        k = np.arange(16) % 2  # A[i][k] is half k % 2 of the word (lane i, VGPR k // 2), B[k][j] likewise
        mat_a = np.tile((a >> (16 * k)) & 0xFFFF, (16, 1)).astype(np.uint16)
        mat_b = np.tile(((b >> (16 * k)) & 0xFFFF)[:, None], (1, 16)).astype(np.uint16)
        mat_c = np.full((16, 16), (c >> (16 * opsel)) & 0xFFFF, np.uint16)
        out.append((f"gfx1100 operand capture {fmt} opsel {opsel} a={a:#010x} b={b:#010x} c={c:#010x}",
                    mat_a, mat_b, mat_c, np.full((16, 16), ds.pop(), np.uint16)))
    return out


def test_every_gfx1100_capture_by_the_oracle():
    """All 28 result matrices (every wave size, format and fixture) and the operand captures of
    both formats and both opsel values, every output, against the oracle."""
    seen = sorted((c["wave"], c["fmt"], c["fixture"]) for c in PACKED["cases"])
    assert seen == sorted((w, f, x) for w in (32, 64) for f in ("f16", "bf16") for x in range(7))
    for fmt in ("f16", "bf16"):
        # the same inputs at both wave sizes: the oracle (which has no wave size) once for both
        pairs = [((w32, d32), (w64, d64), a, b, c)
                 for (w32, a, b, c, d32), (w64, *_, d64) in zip(_captures(fmt, 32), _captures(fmt, 64), strict=True)]
        pairs += [((what, d), a, b, c) for opsel in (0, 1) for what, a, b, c, d in _operand_captures(fmt, opsel)]
        for *wants, a, b, c in pairs:
            assert len({what.replace("wave64", "wave32") for what, _ in wants}) == 1, wants
            ref = np.array(ref_gfx11.wmma16(a, b, c, fmt), np.uint16)
            for what, d in wants:
                assert np.array_equal(ref, d), (what, int((ref != d).sum()))
    assert all(len(_operand_captures(f, o)) == 1 for f in ("f16", "bf16") for o in (0, 1))


def _against_oracle(name, opsel, waves, seed, cases=()):
    """``waves`` adversarial waves against the oracle; the hand-made ``cases`` (`_cases`), the
    gfx1100 result matrices of the row's format and wave size and the operand captures of its
    format and opsel against their bits; all in one call of the builtin."""
    spec = jwmma.BUILTINS[name]
    fmt = spec.c_type
    rng = np.random.default_rng(seed)
    a, b = _codes(rng, fmt, (waves, 16, 16)), _codes(rng, fmt, (waves, 16, 16))
    c, c_other = _c_codes(rng, fmt, (waves, 16, 16)), _c_codes(rng, fmt, (waves, 16, 16))
    caps = _captures(fmt, spec.wave) + _operand_captures(fmt, opsel)
    if caps:
        a, b, c = (np.concatenate([x, np.stack([cap[i] for cap in caps])]) for i, x in ((1, a), (2, b), (3, c)))
        c_other = np.concatenate([c_other, _c_codes(rng, fmt, (len(caps), 16, 16))])
        waves += len(caps)
    if cases:
        a, b, c = (np.concatenate([x, np.stack([case[i] for case in cases])]) for i, x in ((1, a), (2, b), (3, c)))
        c_other = np.concatenate([c_other, _c_codes(rng, fmt, (len(cases), 16, 16))])
    got, other = _call(name, a, b, c, c_other, opsel)
    for w in range(waves - len(caps)):  # the captures meet the oracle in test_every_gfx1100_capture_by_the_oracle
        assert got[w].tolist() == ref_gfx11.wmma16(a[w], b[w], c[w], fmt), (name, opsel, w)
    for w, (what, *_, want) in enumerate(caps, start=waves - len(caps)):  # hardware, bit for bit
        assert np.array_equal(got[w], want), (what, int((got[w] != want).sum()))
    for w, (what, *_, want) in enumerate(cases, start=waves):  # every output of a case is output (0, 0)
        assert np.all(got[w] == want), (what, hex(int(got[w, 0, 0])), hex(want))
        assert ref_gfx11.wmma16(a[w][:1], b[w][:, :1], c[w][:1, :1], fmt) == [[want]], what
    want_other = c_other if jwmma.BUILTINS[name].tied else np.zeros_like(c_other)
    assert np.array_equal(other, want_other)


# ------------------------------------------------------------------------ behaviours by hand
def _f16(x):
    return int(np.float16(x).view(np.uint16))


def _bf16(x):
    return int(np.array(x, np.float32).view(np.uint32)) >> 16  # exact for the values used here


def _one_output(fmt, pairs, c):
    """A, B, C codes (16 x 16) whose output (0, 0) is c + sum of pairs (k = 0, 1, ...: (a, b)
    codes), the other products +0 x +0; the other outputs are copies of it (row 0 of A and
    column 0 of B everywhere)."""
    a = np.zeros((16, 16), np.uint16)
    b = np.zeros((16, 16), np.uint16)
    for k, (x, y) in enumerate(pairs):
        a[:, k], b[k, :] = x, y
    return a, b, np.full((16, 16), c, np.uint16)


def _cases(fmt):
    """(what, A, B, C, expected D bits) per behaviour; D worked out here from the rules of
    NUMERICS.md 2.3 (the comments say how)."""
    if fmt == "f16":
        one, two = _f16(1), _f16(2)
        return [
            # an f16 subnormal C is a value (2**-24 * 5): with +0 products D is C
            ("subnormal C kept", *_one_output(fmt, [], 0x0005), 0x0005),
            # 2**-14 * 2**-10 = 2**-24 (subnormal result, exact on the -14 floor's grid) plus C = 2**-24
            ("subnormal sum", *_one_output(fmt, [(_f16(2**-14), _f16(2**-10))], 0x0001), 0x0002),
            # 256 * 256 = 65536 > 65504 + 16 (half an ulp): +Inf, and Inf stays through the later steps
            ("overflow to Inf", *_one_output(fmt, [(_f16(256), _f16(256))] + [(one, one)] * 4, 0), 0x7C00),
            # C = 2048 (ulp 2) + 1: a tie, to even 2048; 2050 + 1 -> 2052
            ("tie to even", *_one_output(fmt, [(one, one)], _f16(2048)), _f16(2048)),
            ("tie up to even", *_one_output(fmt, [(one, one)], _f16(2050)), _f16(2052)),
            # rounded after every step: 2048 + 1 + 1 in one step is 2050, but 2048 + (1 + 0) then + (1 + 0)
            # rounds twice to 2048
            ("narrowed per step", *_one_output(fmt, [(one, one), (0, 0), (one, one)], _f16(2048)), _f16(2048)),
            ("one step of two", *_one_output(fmt, [(one, one), (one, one)], _f16(2048)), _f16(2050)),
            ("factor NaN", *_one_output(fmt, [(0x7E01, two)], one), 0xFE3D),
            ("Inf x 0", *_one_output(fmt, [(0x7C00, 0)], one), 0xFE00),
            ("+Inf and -Inf", *_one_output(fmt, [(0x7C00, one), (0xFC00, one)], one), 0xFE00),
            # a NaN C keeps its payload and gets the quiet bit
            ("NaN C", *_one_output(fmt, [(one, one)], 0xFC15), 0xFE15),
            ("-Inf product", *_one_output(fmt, [(0x7C00, 0xBC00)], one), 0xFC00),
        ]
    one = _bf16(1)
    return [
        # a bf16 subnormal C widens to an f32 subnormal, which the step reads as zero: +0
        ("subnormal C is zero", *_one_output(fmt, [], 0x0005), 0x0000),
        # 1 + 3 * 2**-9 = 0x3F80C000 in f32; bf16 keeps the top half, 0x3F80 (RNE would give 0x3F81)
        ("truncated", *_one_output(fmt, [(_bf16(3 * 2**-9), one)], one), 0x3F80),
        # -(1 + 3 * 2**-9) truncates toward zero too
        ("truncated negative", *_one_output(fmt, [(_bf16(-3 * 2**-9), one)], _bf16(-1)), 0xBF80),
        # 2**127 * 4 overflows f32: +Inf
        ("overflow to Inf", *_one_output(fmt, [(_bf16(2.0**127), _bf16(4))], 0), 0x7F80),
        ("factor NaN", *_one_output(fmt, [(0x7FC1, one)], one), 0xFFFD),
        ("Inf x 0", *_one_output(fmt, [(0xFF80, 0x8000)], one), 0xFFC0),
        ("NaN C", *_one_output(fmt, [(one, one)], 0xFF81), 0xFFC1),
    ]


@pytest.mark.parametrize("name, opsel", [("wmma_f16_16x16x16_f16_tied_w32", 1), ("wmma_bf16_16x16x16_bf16_w64", 0)])
def test_against_the_oracle_and_by_hand(name, opsel):
    """Two adversarial waves, the gfx1100 captures of the row's format, wave size and opsel (7
    result matrices, one operand capture) and every hand-made case of the format in one call."""
    _against_oracle(name, opsel, 2, 1, _cases(jwmma.BUILTINS[name].c_type))


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("opsel", [0, 1])
def test_against_the_oracle_full(name, opsel):
    _against_oracle(name, opsel, 12, 2, _cases(jwmma.BUILTINS[name].c_type))


# ------------------------------------------------------------------------ gemm
@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["f16", "bf16"])
@pytest.mark.parametrize("path", ["matrix", "registers"])
def test_gemm(fmt, path):
    """jwmma.gemm with a 16-bit accumulator (K = 48: three steps, each narrowed) against the
    oracle's chain (the register path packs C in the low halves, opsel 0). Slow only: each
    path compiles its own program (about 0.7 s), over the default suite's time budget."""
    rng = np.random.default_rng(7)
    a, b = _codes(rng, fmt, (16, 48), spread=3), _codes(rng, fmt, (48, 16), spread=3)
    c = _c_codes(rng, fmt, (16, 16))
    acc = c
    for s in range(3):
        acc = np.array(ref_gfx11.wmma16(a[:, 16 * s:16 * s + 16], b[16 * s:16 * s + 16], acc, fmt), np.uint16)
    for name in (f"wmma_{fmt}_16x16x16_{fmt}_w32", f"wmma_{fmt}_16x16x16_{fmt}_tied_w64"):
        d = jwmma.gemm(a.view(DT[fmt]), b.view(DT[fmt]), c.view(DT[fmt]), builtin=name, path=path)
        assert np.asarray(d).dtype == DT[fmt] and np.array_equal(np.asarray(d).view(np.uint16), acc), name


# ------------------------------------------------------------------------ refusals and listing
def test_opsel_is_a_bool_of_these_rows_only():
    name = "wmma_f16_16x16x16_f16_w32"
    z = np.zeros((32, 16), np.float16)
    with pytest.raises(TypeError, match=r"opsel must be a Python bool \(a compile-time constant\), got 2"):
        jwmma.wmma_f16_16x16x16_f16_w32(z, z, z, 2)
    with pytest.raises(TypeError, match=r"opsel must be a compile-time constant"):
        jax.jit(lambda o: jwmma.wmma_f16_16x16x16_f16_w32(z, z, z, o))(True)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'opsel'"):
        jwmma.wmma_f32_16x16x16_f16_w32(z, z, np.zeros((32, 8), np.float32), opsel=True)
    with pytest.raises(ValueError, match=r"opsel applies to the RDNA3 f16/bf16-output WMMA .*; "
                                         r"wmma_f16_16x16x16_f16_w32_gfx12 takes none"):
        jwmma.pack_c("wmma_f16_16x16x16_f16_w32_gfx12", np.zeros((16, 16), np.float16), opsel=False)
    with pytest.raises(ValueError, match=r"wmma_f32_16x16x16_f16_w32 takes none"):
        jwmma.unpack_c("wmma_f32_16x16x16_f16_w32", np.zeros((32, 8), np.float32), opsel=1)
    with pytest.raises(TypeError, match=r"opsel must be a Python bool.*got -1"):
        jwmma.unpack_c(name, z, opsel=-1)
    with pytest.raises(ValueError, match=r"c must have shape \(\*batch, 32, 16\).*got \(32, 8\)"):
        jwmma.wmma_f16_16x16x16_f16_w32(z, z, np.zeros((32, 8), np.float16))
    sig = jwmma.BUILTINS["wmma_bf16_16x16x16_bf16_tied_w64"].signature()
    assert sig == ("v8short __builtin_amdgcn_wmma_bf16_16x16x16_bf16_tied_w64(v16short A, v16short B, v8short C, "
                   "bool opsel)")


def test_listed_and_no_longer_named_as_not_emulated(capsys):
    from jwmma.cli import main
    from jwmma.isa.table import OPTIONAL
    assert "wmma_f16" not in OPTIONAL and "_tied" not in OPTIONAL
    assert main(["list", "--arch", "gfx1100", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(NAMES) <= set(rows)
    assert rows["wmma_f16_16x16x16_f16_w64"]["operands"]["c"]["hip_vector"] == "v8half"
    assert jwmma.isa.table.lookup("wmma_bf16_16x16x16_bf16_tied_w32", "gfx1151").arch == "gfx1151"
    assert main(["layout", "wmma_f16_16x16x16_f16_tied_w32", "-o", "d", "--opsel", "1", "--lane", "17"]) == 0
    out = capsys.readouterr().out
    assert "lane 17  elem  3  v[1] bits [31:16]   -> C[3][1]" in out and "D's other half: C's" in out
