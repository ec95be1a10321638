"""The single-block dense MFMA rows on MI100 (gfx908, CDNA1) and MI200 (gfx90a, CDNA2), the
``target=`` of `mfma_f32_32x32x2f32`, `_16x16x4f32`, `_32x32x8f16`, `_16x16x16f16` (both chips)
and `_32x32x8bf16_1k`, `_16x16x16bf16_1k` (gfx90a only; docs/spec/BUILTINS_DENSE.md 9), and the
rows of those two chips alone: non-1k bf16 `mfma_f32_32x32x4bf16`, `_16x16x8bf16` and the old i8
`mfma_i32_32x32x8i8`, `_16x16x16i8` (their i8 arithmetic against a Python-int reference):

* layouts, BLGP swizzles and modifier support against the calculator dumps
  `tests/data/cdna1_mfma_calculator.json` and `cdna2_mfma_calculator.json` (every entry);
* arithmetic, registers in and registers out, against MMA-Sim 2.1.1's own simulators
  ``mmasim.amd.sim.MFMA("CDNA1" | "CDNA2", suffix)`` (NUMERICS.md 9.3-9.5) on random, adversarial
  (subnormals, the largest values, NaN/Inf, -0) and flush-edge data (products and sums around
  2**-126, exact cancellations, zeros of both signs); the MMA-Sim part is skipped without torch
  and mmasim;
* the targets LLVM refuses and the modifiers each chip refuses.
"""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import jwmma
from jwmma.isa.layouts import BLGP_LANES
from jwmma.isa.table import lookup
from tests import calculator_dumps
from tests import mmasim_support as mmasim

ROWS = ("mfma_f32_32x32x2f32", "mfma_f32_16x16x4f32", "mfma_f32_32x32x8f16", "mfma_f32_16x16x16f16",
        "mfma_f32_32x32x8bf16_1k", "mfma_f32_16x16x16bf16_1k")
#: (row, target) pairs LLVM selects (isGFX90APlus keeps the bf16_1k forms off gfx908)
PAIRS = [(n, t) for t in ("gfx908", "gfx90a") for n in ROWS if not (t == "gfx908" and "bf16" in n)]
ARCH = {"gfx908": "CDNA1", "gfx90a": "CDNA2"}
#: the rows LLVM selects on gfx908 and gfx90a only (isGFX908orGFX90A)
ONLY = ("mfma_f32_32x32x4bf16", "mfma_f32_16x16x8bf16", "mfma_i32_32x32x8i8", "mfma_i32_16x16x16i8")
ONLY_PAIRS = [(n, t) for t in ("gfx908", "gfx90a") for n in ONLY]
#: MMA-Sim's suffix of each row (its CDNA1/CDNA2 lists spell the old mnemonics)
SUFFIX = {n: n.removeprefix("mfma_") for n in ROWS + ONLY}


def _instruction(name, target):
    dump = calculator_dumps.instructions(target)
    return next(((k, v) for k, v in dump.items() if v["builtin"] == name), (None, None))


def _entries(layout):
    lanes, n, _ = layout.shape
    return {(int(L), int(e), int(layout[L, e, 0]), int(layout[L, e, 1])) for L in range(lanes) for e in range(n)}


# ------------------------------------------------------------------------------ rows, layouts
def test_targets_are_the_calculators_chips():
    """A row runs on gfx908 / gfx90a exactly where the CDNA1 / CDNA2 calculator has it, with the
    calculator's M, N, K; bf16_1k is CDNA2-only."""
    for t in ("gfx908", "gfx90a"):
        for n in ROWS:
            _, v = _instruction(n, t)
            assert (v is not None) == ((n, t) in PAIRS) == (t in jwmma.BUILTINS[n].targets), (n, t)
            if v is not None:
                spec = lookup(n, t)
                assert (spec.m, spec.n, spec.k) == tuple(int(v["detail"][x]) for x in "MNK")
                assert spec.arch == spec.target == t and spec.wave == 64 and int(v["detail"]["blocks"]) == 1
    assert jwmma.BUILTINS["mfma_f32_16x16x16f16"].target == "gfx942"  # the default stays MI300


def _layouts_and_blgp(name, target):
    """The row on ``target`` and its calculator record, after checking every A, B, C, D entry and
    every B_blgp{v} entry (the row's B entry read from lane BLGP_LANES[v]) against the dump."""
    spec = lookup(name, target)
    _, v = _instruction(name, target)
    ops = v["operands"]
    for key, layout in (("A", spec.a_layout), ("B", spec.b_layout), ("C", spec.c_layout), ("D", spec.c_layout)):
        assert _entries(layout) == {tuple(x) for x in ops[key]["entries"]}, key
    b = _entries(spec.b_layout)
    for blgp in range(1, 8):
        want = {tuple(x) for x in ops[f"B_blgp{blgp}"]["entries"]}
        assert {(int(BLGP_LANES[blgp][L]), e, k, j) for (L, e, k, j) in b} == want, blgp
    return spec, v


@pytest.mark.parametrize("name,target", PAIRS)
def test_layouts_and_blgp_equal_the_calculator(name, target):
    """A, B, C, D: every (lane, element) -> (row, col) the calculator prints for that chip; every
    B_blgp{v} entry is the row's B entry read from lane BLGP_LANES[v]; the modifiers the chip's
    calculator accepts are the ones the row takes (blgp on all six, cbsz/abid on none)."""
    spec, v = _layouts_and_blgp(name, target)
    assert v["detail"]["BLGP bits supported"] == "True" and spec.blgp == "swizzle"
    assert v["detail"]["CBSZ and ABID bits supported"] == "False"
    assert any(p["command"].endswith("--cbsz 1") and not p["accepted"] for p in v["probes"])


def test_models_and_evidence_per_target():
    for name, target in PAIRS:
        spec = lookup(name, target)
        want = "cdna1" if target == "gfx908" else "cdna2"
        assert spec.default_model == want, (name, target)
        assert spec.default_evidence.startswith("measured: MMA-Sim 2.1.1's CDNA"), spec.default_evidence
    for name in ROWS:  # gfx942 and gfx950 unchanged
        assert lookup(name, "gfx942").default_model == lookup(name, "gfx950").default_model == "cdna3"
        assert lookup(name).blgp == ("swizzle" if name.endswith("f32") else "")


# ------------------------------------------------------------------------------ bad input
def test_refused_target_names_the_chips():
    a = np.ones((16, 16), ml_dtypes.bfloat16)
    with pytest.raises(ValueError, match=r"target for mfma_f32_16x16x16bf16_1k must be one of \['gfx942', 'gfx950', "
                                         r"'gfx90a'\], got 'gfx908' \(.*isGFX90APlus.*not on gfx908"):
        jwmma.gemm(a, a, builtin="mfma_f32_16x16x16bf16_1k", target="gfx908")
    name = "mfma_f32_32x32x8bf16_1k"
    r = jwmma.pack_a(name, np.ones((32, 8), ml_dtypes.bfloat16))
    c = jwmma.pack_c(name, np.zeros((32, 32), np.float32))
    with pytest.raises(ValueError, match="got 'gfx908'.*isGFX90APlus"):
        jwmma.mfma_f32_32x32x8bf16_1k(r, r, c, target="gfx908")
    with pytest.raises(ValueError, match=r"must be one of \['gfx942', 'gfx950', 'gfx908', 'gfx90a'\], got 'gfx1100'"):
        lookup("mfma_f32_16x16x16f16", "gfx1100")


def test_modifiers_per_target():
    """blgp 1..7 on gfx908/gfx90a (the B swizzle), refused on gfx942 for f16/bf16; cbsz/abid
    refused everywhere (single-block); blgp 8 refused."""
    name = "mfma_f32_16x16x16f16"
    a = jwmma.pack_a(name, np.ones((16, 16), np.float16))
    c = jwmma.pack_c(name, np.zeros((16, 16), np.float32))
    with pytest.raises(ValueError, match="blgp must be 0 for mfma_f32_16x16x16f16 on gfx942 .*on gfx908/gfx90a"):
        jwmma.mfma_f32_16x16x16f16(a, a, c, 0, 0, 2)
    for target in ("gfx908", "gfx90a"):
        jwmma.mfma_f32_16x16x16f16(a, a, c, 0, 0, 7, target=target)
        with pytest.raises(ValueError, match=r"blgp must be in \[0, 7\], got 8"):
            jwmma.mfma_f32_16x16x16f16(a, a, c, 0, 0, 8, target=target)
        with pytest.raises(ValueError, match="cbsz must be 0 for mfma_f32_16x16x16f16"):
            jwmma.mfma_f32_16x16x16f16(a, a, c, 1, target=target)
        with pytest.raises(ValueError, match="abid must be 0"):
            jwmma.mfma_f32_16x16x16f16(a, a, c, 0, 1, target=target)


@pytest.mark.parametrize("target", [pytest.param("gfx908", marks=pytest.mark.slow), "gfx90a"])
def test_blgp_computes_with_the_swizzled_lanes(rng, target):
    name = "mfma_f32_32x32x8f16"
    a = rng.standard_normal((32, 8)).astype(np.float16)
    b = rng.standard_normal((8, 32)).astype(np.float16)
    ra, rb = jwmma.pack_a(name, a), np.asarray(jwmma.pack_b(name, b))
    rc = jwmma.pack_c(name, np.zeros((32, 32), np.float32))
    d = jwmma.mfma_f32_32x32x8f16(ra, rb, rc, 0, 0, 5, target=target)
    ref = jwmma.mfma_f32_32x32x8f16(ra, rb[BLGP_LANES[5]], rc, target=target)
    np.testing.assert_array_equal(np.asarray(d).view(np.uint32), np.asarray(ref).view(np.uint32))


# ------------------------------------------------------------------------------ models
def test_model_fields_and_refusals():
    M = jwmma.models
    assert M.PRESETS["cdna1"][0] == M.CDNA1() and M.PRESETS["cdna2"][0] == M.CDNA2()
    assert M.parse_model("Exact(group=4)") == M.Exact(group=4)
    assert M.model_label(M.PairwiseTree(flush_denormals=False)) == "PairwiseTree(flush_denormals=False)"
    with pytest.raises(ValueError, match="group must be a power of two, got 3"):
        M.PairwiseTree(group=3)
    f = "mfma_f32_16x16x4f32"
    r = jwmma.pack_a(f, np.ones((16, 4), np.float32))
    c = jwmma.pack_c(f, np.zeros((16, 16), np.float32))
    with pytest.raises(ValueError, match="on f32 operands CDNA1 is MMA-Sim's FMA chain"):
        jwmma.mfma_f32_16x16x4f32(r, r, c, model="CDNA1(group=2)", target="gfx908")
    with pytest.raises(ValueError, match="16-bit .* operands with an f32 accumulator"):
        jwmma.mfma_f32_16x16x4f32(r, r, c, model="PairwiseTree()")
    x = "mfma_f32_16x16x8_xf32"
    rx, cx = jwmma.pack_a(x, np.ones((16, 8), np.float32)), jwmma.pack_c(x, np.zeros((16, 16), np.float32))
    for preset, chip in (("cdna1", "MI100"), ("cdna2", "MI200")):
        with pytest.raises(ValueError, match=f"models {chip}'s f32, f16 and bf16 MFMA; xf32 x xf32 is none"):
            jwmma.mfma_f32_16x16x8_xf32(rx, rx, cx, model=preset)


def test_exact_groups(rng):
    """Exact(group=L) with L >= K is Exact(); smaller groups round once per group (a product
    far below C is lost in one group and kept by the exact sum)."""
    name = "mfma_f32_16x16x16f16"
    a = np.asarray(jwmma.numerics.cast(rng.standard_normal((16, 16)), np.float16))
    b = np.asarray(jwmma.numerics.cast(rng.standard_normal((16, 16)), np.float16))
    c = rng.standard_normal((16, 16)).astype(np.float32)
    run = lambda m: np.asarray(jwmma.gemm(a, b, c, builtin=name, model=m)).view(np.uint32)  # noqa: E731
    np.testing.assert_array_equal(run("Exact(group=16)"), run("exact"))
    a2 = np.zeros((16, 16), np.float16)
    b2 = np.zeros((16, 16), np.float16)
    a2[:, 0], b2[0, :] = 1, 1            # group 1: 1 + 2**-24 ... rounds to 1
    a2[:, 4], b2[4, :] = 2.0**-12, 2.0**-12  # group 2: the 2**-24 again: lost per group of 4
    a2[:, 8], b2[8, :] = -1, 1
    c2 = np.full((16, 16), 2.0**-24, np.float32)
    g = np.asarray(jwmma.gemm(a2, b2, c2, builtin=name, model="Exact(group=4)"))
    e = np.asarray(jwmma.gemm(a2, b2, c2, builtin=name, model="exact"))
    assert g[0, 0] == 0.0 and e[0, 0] == np.float32(2.0**-23)


# ------------------------------------------------------------------------------ against MMA-Sim
def _operand(rng, dtype, shape, kind):
    """random: moderate values; adversarial: subnormals, the largest value, Inf, NaN, -0;
    edge: exponents near the f32 flush boundary for the products (bf16) or inputs (f16),
    subnormal inputs and zeros of both signs."""
    dtype = np.dtype(dtype)
    u = np.uint32 if dtype.itemsize == 4 else np.uint16
    info = np.finfo(np.float32) if dtype == np.float32 else ml_dtypes.finfo(dtype)
    if kind == "random":
        x = rng.standard_normal(shape) * 2.0 ** rng.integers(-6, 7, shape)
        return np.asarray(jwmma.numerics.cast(x, dtype))
    if kind == "adversarial":
        x = np.asarray(jwmma.numerics.cast(rng.standard_normal(shape) * 2.0 ** rng.integers(-20, 21, shape), dtype))
    else:  # edge: products of two such values land around 2**-126 (bf16) / f16's smallest normals
        low = -63 if dtype == ml_dtypes.bfloat16 else -14 if dtype == np.float16 else -63
        e = np.where(rng.random(shape) < 0.7, rng.integers(low - 3, low + 4, shape), rng.integers(-2, 3, shape))
        x = np.asarray(jwmma.numerics.cast((1 + rng.random(shape)) * 2.0 ** e, dtype))
    bits = x.view(u).copy()
    pick = rng.random(shape)
    mant = int(info.nmant)
    sub = pick < 0.1
    bits[sub] = rng.integers(1, 1 << mant, int(sub.sum())).astype(u)  # subnormals
    bits[(pick >= 0.1) & (pick < 0.15)] = 0  # zeros (signed below)
    if kind == "adversarial":
        bits[(pick >= 0.15) & (pick < 0.19)] = np.array(info.max, dtype).view(u)
        bits[(pick >= 0.19) & (pick < 0.2)] = np.array(np.inf, dtype).view(u)
        bits[(pick >= 0.2) & (pick < 0.205)] = np.array(np.nan, dtype).view(u)
    sign = (rng.random(shape) < 0.5).astype(u) << u(8 * dtype.itemsize - 1)
    return (bits | sign).view(dtype)


def _cancel(rng, a, b):
    """Exact cancellations: for some k, column k+1 of A repeats column k and row k+1 of B is
    row k negated, so the two products cancel (zeros of either sign and tiny remainders)."""
    for k in range(0, a.shape[1] - 1, 2):
        if rng.random() < 0.4:
            a[:, k + 1] = a[:, k]
            b[k + 1, :] = -b[k, :]
    return a, b


def _c(rng, m, n, kind):
    c = (rng.standard_normal((m, n)) * 4).astype(np.float32)
    bits = c.view(np.uint32)
    pick = rng.random((m, n))
    if kind == "edge":
        c = ((1 + rng.random((m, n))) * 2.0 ** rng.integers(-128, -123, (m, n))).astype(np.float32)
        bits = c.view(np.uint32)
        bits[pick < 0.2] = rng.integers(1, 1 << 23, int((pick < 0.2).sum())).astype(np.uint32)
        bits[(pick >= 0.2) & (pick < 0.3)] = 0x00800000  # 2**-126
        bits[(pick >= 0.3) & (pick < 0.4)] = 0
        bits |= (rng.random((m, n)) < 0.5).astype(np.uint32) << np.uint32(31)
    elif kind == "adversarial":
        bits[pick < 0.05] = rng.integers(1, 1 << 23, int((pick < 0.05).sum())).astype(np.uint32)
        bits[(pick >= 0.05) & (pick < 0.08)] = 0x80000000
        bits[(pick >= 0.08) & (pick < 0.09)] = 0x7F800000
        bits[(pick >= 0.09) & (pick < 0.095)] = 0x7FC00000
    return c


def _mmasim(name, target):
    return mmasim.mfma(ARCH[target], SUFFIX[name])  # skips without torch and mmasim


def _same(got, want):
    mmasim.assert_same_bits(got, want, "jwmma vs MMA-Sim")


def _check(rng, name, target, kind):
    mfma = _mmasim(name, target)  # skips without torch and mmasim
    spec = lookup(name, target)
    dt = spec.a_format.dtype
    a = _operand(rng, dt, (spec.m, spec.k), kind)
    b = _operand(rng, dt, (spec.k, spec.n), kind)
    if kind != "random":
        a, b = _cancel(rng, a, b)
    c = _c(rng, spec.m, spec.n, kind)
    fn = getattr(jwmma, name)
    regs = fn(jwmma.pack_a(name, a), jwmma.pack_b(name, b), jwmma.pack_c(name, c), target=target)
    got = np.asarray(jwmma.unpack_c(name, regs)).view(np.uint32)
    want = mmasim.call(mfma, a, b, c).view(np.uint32)
    _same(got, want)


#: one fast case per arithmetic: CDNA1 f16 groups, CDNA2 f16 and bf16 trees, the f32 chain
FAST = [("mfma_f32_16x16x16f16", "gfx908", "edge"), ("mfma_f32_16x16x16bf16_1k", "gfx90a", "edge"),
        ("mfma_f32_32x32x8f16", "gfx90a", "adversarial"), ("mfma_f32_16x16x4f32", "gfx908", "adversarial")]
GRID = [(n, t, k) for n, t in PAIRS for k in ("random", "adversarial", "edge") if (n, t, k) not in FAST]


@pytest.mark.parametrize("name,target,kind", FAST)
def test_builtin_equals_mmasim(rng, name, target, kind):
    _check(rng, name, target, kind)


@pytest.mark.slow
@pytest.mark.parametrize("name,target,kind", GRID)
def test_builtin_equals_mmasim_grid(rng, name, target, kind):
    _check(rng, name, target, kind)


@pytest.mark.parametrize("name,target", [("mfma_f32_32x32x8bf16_1k", "gfx90a"), ("mfma_f32_16x16x16f16", "gfx908")])
def test_gemm_on_the_target_equals_mmasim_steps(rng, name, target):
    """jwmma.gemm(..., target=) chains the chip's instruction over K: three MMA-Sim calls, each
    D the next C."""
    mfma = _mmasim(name, target)  # skips without torch and mmasim
    spec = lookup(name, target)
    dt = spec.a_format.dtype
    a = _operand(rng, dt, (spec.m, 3 * spec.k), "edge")
    b = _operand(rng, dt, (3 * spec.k, spec.n), "edge")
    c = _c(rng, spec.m, spec.n, "edge")
    got = np.asarray(jwmma.gemm(a, b, c, builtin=name, target=target)).view(np.uint32)
    _same(got, mmasim.k_steps(mfma, a, b, c, spec.k).view(np.uint32))
    other = np.asarray(jwmma.gemm(a, b, c, builtin=name)).view(np.uint32)  # gfx942: another arithmetic
    assert not np.array_equal(np.isnan(other.view(np.float32)) | (other == got), np.ones_like(got, bool))


@pytest.mark.parametrize("name,target", [("mfma_f32_16x16x16f16", "gfx908"), ("mfma_f32_16x16x16bf16_1k", "gfx90a")])
def test_signed_zeros_equal_mmasim(rng, name, target):
    """Zero results: all products and C zeros of random signs (every product -0 and C -0 in
    some outputs), with subnormal factors (flushed to +0 on gfx90a, kept on gfx908). MMA-Sim's
    CDNA1 exact sum gives +0 even when every term is -0; the IEEE rule (`Exact()`) would not."""
    mfma = _mmasim(name, target)  # skips without torch and mmasim
    spec = lookup(name, target)
    dt = np.dtype(spec.a_format.dtype)
    a = np.zeros((spec.m, spec.k), dt)
    b = np.where(rng.random((spec.k, spec.n)) < 0.5, 1.0, 2.0 ** -20).astype(np.float32)
    b = np.asarray(jwmma.numerics.cast(b, dt))
    a.view(np.uint16)[...] = np.where(rng.random(a.shape) < 0.9, 0x8000, 0).astype(np.uint16)
    a.view(np.uint16)[:, :2] |= np.where(rng.random((spec.m, 2)) < 0.3, 1, 0).astype(np.uint16)  # subnormals
    b.view(np.uint16)[...] |= np.where(rng.random(b.shape) < 0.2, 0x8000, 0).astype(np.uint16)
    c = np.where(rng.random((spec.m, spec.n)) < 0.8, -0.0, 0.0).astype(np.float32)
    a.view(np.uint16)[0], b.view(np.uint16)[:, 0], c[0, 0] = 0x8000, 0x3F80 if dt != np.float16 else 0x3C00, -0.0
    regs = getattr(jwmma, name)(jwmma.pack_a(name, a), jwmma.pack_b(name, b), jwmma.pack_c(name, c), target=target)
    got = np.asarray(jwmma.unpack_c(name, regs)).view(np.uint32)
    want = mmasim.call(mfma, a, b, c).view(np.uint32)
    _same(got, want)
    # gfx908: an exact zero is +0 (CDNA1(signed_zero=False)); gfx90a: C -0 is flushed to +0 first
    assert not (got == 0x80000000).any()
    ieee = getattr(jwmma, name)(jwmma.pack_a(name, a), jwmma.pack_b(name, b), jwmma.pack_c(name, c), target=target,
                                model="Exact(group=4)" if target == "gfx908" else "PairwiseTree(flush_denormals=False)")
    assert (np.asarray(jwmma.unpack_c(name, ieee)).view(np.uint32) == 0x80000000).any()


# ------------------------------------------------------------------------------ gfx908/gfx90a only
def test_only_rows_run_on_the_two_chips():
    """Both calculators have each row with its M, N, K; gfx908 is the default target, gfx942 and
    gfx950 refuse them with LLVM's rule."""
    for name in ONLY:
        assert jwmma.BUILTINS[name].targets == ("gfx908", "gfx90a") and jwmma.BUILTINS[name].target == "gfx908"
        for t in ("gfx908", "gfx90a"):
            _, v = _instruction(name, t)
            spec = lookup(name, t)
            assert (spec.m, spec.n, spec.k) == tuple(int(v["detail"][x]) for x in "MNK"), (name, t)
            assert spec.target == t and spec.blgp == "swizzle" and int(v["detail"]["blocks"]) == 1
        for t in ("gfx942", "gfx950"):
            with pytest.raises(ValueError, match=rf"must be one of \['gfx908', 'gfx90a'\], got '{t}' "
                                                 r"\(.*isGFX908orGFX90A.*not supported on this GPU"):
                lookup(name, t)
    a = np.ones((16, 8), ml_dtypes.bfloat16)
    with pytest.raises(ValueError, match="got 'gfx942'.*isGFX908orGFX90A"):
        jwmma.gemm(a, a.T, builtin="mfma_f32_16x16x8bf16", target="gfx942")
    r = jwmma.pack_a("mfma_i32_16x16x16i8", np.ones((16, 16), np.int8))
    c = jwmma.pack_c("mfma_i32_16x16x16i8", np.zeros((16, 16), np.int32))
    with pytest.raises(ValueError, match="got 'gfx950'.*isGFX908orGFX90A"):
        jwmma.mfma_i32_16x16x16i8(r, r, c, target="gfx950")
    assert not any(re.search(rf"{n}(?!\w)", jwmma.isa.table.OPTIONAL) for n in ONLY)


@pytest.mark.parametrize("name,target", ONLY_PAIRS)
def test_only_rows_layouts_and_blgp_equal_the_calculator(name, target):
    """Every A, B, C, D and B_blgp1..7 entry of the chip's calculator dump; blgp supported,
    cbsz/abid not. Registers: one VGPR of A and of B per lane (2 bf16, `V2s`; 4 i8, `int`)."""
    spec, v = _layouts_and_blgp(name, target)
    assert v["detail"]["BLGP bits supported"] == "True" and v["detail"]["CBSZ and ABID bits supported"] == "False"
    assert spec.a.n == spec.b.n == 1 if spec.integer else spec.a.n == spec.b.n == 2
    assert spec.a.storage.hip == ("int" if spec.integer else "short")


def test_only_rows_models_and_modifiers():
    """bf16: cdna1 on gfx908 (its bf16 groups of 2) and CDNA2(group=2) on gfx90a (MMA-Sim's
    MMA_FTZ_MUL_ADD(P=2) for non-1k bf16; the bf16_1k rows keep the tree of 4); i8: exact.
    blgp 0..7 accepted on both chips, 8 refused; cbsz/abid refused."""
    for name in ONLY[:2]:
        assert lookup(name, "gfx908").default_model == "cdna1"
        assert lookup(name, "gfx90a").default_model == "CDNA2(group=2)"
    assert lookup("mfma_f32_16x16x16bf16_1k", "gfx90a").default_model == "cdna2"
    for name in ONLY[2:]:
        assert lookup(name, "gfx908").default_model == lookup(name, "gfx90a").default_model == "exact"
        assert "no clamp operand" in lookup(name).default_evidence
    name = "mfma_i32_32x32x8i8"
    a = jwmma.pack_a(name, np.ones((32, 8), np.int8))
    c = jwmma.pack_c(name, np.zeros((32, 32), np.int32))
    for target in ("gfx908", "gfx90a"):
        for blgp in range(8):
            jwmma.mfma_i32_32x32x8i8(a, a, c, 0, 0, blgp, target=target)
        with pytest.raises(ValueError, match=r"blgp must be in \[0, 7\], got 8"):
            jwmma.mfma_i32_32x32x8i8(a, a, c, 0, 0, 8, target=target)
        with pytest.raises(ValueError, match="cbsz must be 0 for mfma_i32_32x32x8i8"):
            jwmma.mfma_i32_32x32x8i8(a, a, c, 1, target=target)


def _wrap32(x: int) -> int:
    return (x + 2**31) % 2**32 - 2**31


def _i8_reference(a, b, c):
    """D = A B + C in Python ints, wrapped to i32 once (exact products and sums; no clamp)."""
    m, k = a.shape
    n = b.shape[1]
    return np.array([[_wrap32(sum(int(a[i, q]) * int(b[q, j]) for q in range(k)) + int(c[i, j])) for j in range(n)]
                     for i in range(m)], np.int64).astype(np.int32)


@pytest.mark.parametrize("name,target", [("mfma_i32_32x32x8i8", "gfx908"), ("mfma_i32_16x16x16i8", "gfx90a")])
def test_i8_equals_python_ints(rng, name, target):
    """Random i8 (the extremes -128 and 127 included) and C near both i32 limits, so sums wrap;
    the blgp swizzle reads B from the permuted lanes."""
    spec = lookup(name, target)
    a = rng.integers(-128, 128, (spec.m, spec.k)).astype(np.int8)
    b = rng.integers(-128, 128, (spec.k, spec.n)).astype(np.int8)
    a[0], b[:, 0] = -128, -128
    a[1], b[:, 1] = 127, -128
    c = rng.integers(-(2**31), 2**31, (spec.m, spec.n), dtype=np.int64).astype(np.int32)
    c[:4] = 2**31 - 1 - rng.integers(0, 1000, (4, spec.n))
    c[4:8] = -(2**31) + rng.integers(0, 1000, (4, spec.n))
    fn = getattr(jwmma, name)
    ra, rb, rc = jwmma.pack_a(name, a), np.asarray(jwmma.pack_b(name, b)), jwmma.pack_c(name, c)
    got = np.asarray(jwmma.unpack_c(name, fn(ra, rb, rc, target=target)))
    want = _i8_reference(a, b, c)
    assert (want != (a.astype(np.int64) @ b.astype(np.int64) + c)).any()  # some outputs wrapped
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.asarray(jwmma.gemm(a, b, c, builtin=name, target=target)), want)
    moved = np.empty_like(rb)
    moved[BLGP_LANES[3]] = rb  # blgp 3 (a lane rotation) reads lane L from BLGP_LANES[3][L]: B back in place
    swz = np.asarray(jwmma.unpack_c(name, fn(ra, moved, rc, 0, 0, 3, target=target)))
    np.testing.assert_array_equal(swz, want)


@pytest.mark.slow
@pytest.mark.parametrize("name,target", [(n, t) for n, t in ONLY_PAIRS if "i8" in n])
def test_i8_equals_python_ints_grid(rng, name, target):
    spec = lookup(name, target)
    for _ in range(3):
        a = rng.integers(-128, 128, (spec.m, 5 * spec.k)).astype(np.int8)
        b = rng.integers(-128, 128, (5 * spec.k, spec.n)).astype(np.int8)
        c = rng.integers(-(2**31), 2**31, (spec.m, spec.n), dtype=np.int64).astype(np.int32)
        got = np.asarray(jwmma.gemm(a, b, c, builtin=name, target=target))
        np.testing.assert_array_equal(got, _i8_reference(a, b, c))


#: one fast case per new arithmetic (CDNA1 bf16 groups of 2, CDNA2 bf16 trees of 2)
ONLY_FAST = [("mfma_f32_16x16x8bf16", "gfx908", "edge"), ("mfma_f32_32x32x4bf16", "gfx90a", "edge")]
ONLY_GRID = [(n, t, k) for n, t in ONLY_PAIRS if "bf16" in n for k in ("random", "adversarial", "edge")
             if (n, t, k) not in ONLY_FAST]


@pytest.mark.parametrize("name,target,kind", ONLY_FAST)
def test_non_1k_bf16_equals_mmasim(rng, name, target, kind):
    _check(rng, name, target, kind)


@pytest.mark.slow
@pytest.mark.parametrize("name,target,kind", ONLY_GRID)
def test_non_1k_bf16_equals_mmasim_grid(rng, name, target, kind):
    _check(rng, name, target, kind)


@pytest.mark.slow
@pytest.mark.parametrize("name,target", [("mfma_f32_16x16x8bf16", "gfx90a"), ("mfma_f32_32x32x4bf16", "gfx908")])
def test_non_1k_bf16_gemm_equals_mmasim_steps(rng, name, target):
    """jwmma.gemm(..., target=) over 3 K-steps equals three chained MMA-Sim calls."""
    mfma = _mmasim(name, target)  # skips without torch and mmasim
    spec = lookup(name, target)
    a = _operand(rng, ml_dtypes.bfloat16, (spec.m, 3 * spec.k), "edge")
    b = _operand(rng, ml_dtypes.bfloat16, (3 * spec.k, spec.n), "edge")
    c = _c(rng, spec.m, spec.n, "edge")
    got = np.asarray(jwmma.gemm(a, b, c, builtin=name, target=target)).view(np.uint32)
    _same(got, mmasim.k_steps(mfma, a, b, c, spec.k).view(np.uint32))


@pytest.mark.slow  # a check of the test data's power (the MMA-Sim cases are the evidence)
def test_bf16_groups_of_2_are_not_groups_of_4():
    """C = 1 and products 2**-24, 0, 2**-24, 0: groups of 2 join C first, 1 + 2**-24 ties to 1
    twice (result 1); one group of 4 sums 2**-23 first (result 1 + 2**-23). The non-1k rows
    round per pair on both chips; the presets' groups of 4 (cdna2, CDNA1(group=4)) do not."""
    name = "mfma_f32_32x32x4bf16"
    a = np.ones((32, 4), ml_dtypes.bfloat16)
    b = np.zeros((4, 32), ml_dtypes.bfloat16)
    b[0, :], b[2, :] = 2.0**-24, 2.0**-24
    c = np.ones((32, 32), np.float32)
    for target, four in (("gfx908", "CDNA1(group=4)"), ("gfx90a", "cdna2")):
        pairs = np.asarray(jwmma.gemm(a, b, c, builtin=name, target=target))
        whole = np.asarray(jwmma.gemm(a, b, c, builtin=name, target=target, model=four))
        assert (pairs == 1).all() and (whole == np.float32(1 + 2.0**-23)).all(), target
