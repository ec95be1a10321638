"""The multi-block MFMA (docs/spec/BUILTINS_DENSE.md 10): `mfma_f32_32x32x1f32`, `_16x16x1f32`,
`_4x4x1f32`, `mfma_i32_32x32x4i8`, `_16x16x4i8`, `_4x4x4i8`, `mfma_f32_32x32x4f16`, `_16x16x4f16`,
`_4x4x4f16` (gfx908, gfx90a, gfx942, gfx950), `mfma_f32_32x32x4bf16_1k`, `_16x16x4bf16_1k`,
`_4x4x4bf16_1k` (gfx90a and later) and the non-1k `mfma_f32_32x32x2bf16`, `_16x16x2bf16`,
`_4x4x2bf16` (gfx908 and gfx90a only):

* every layout entry of the calculator dumps (`cdna3_mfma_more_calculator.json`, the CDNA1 and
  CDNA2 dumps), every ``A_cbsz*_abid*`` and ``B_blgp*`` variant included;
* i8 registers in and out against Python integers computed here from the dumps' entries (cbsz,
  abid and blgp applied, the i32 result wrapping);
* f32/f16/bf16 bits against MMA-Sim 2.1.1 fed one block at a time (cbsz/abid applied), skipped
  without torch and mmasim;
* the modifiers' rules (cbsz 0..log2(blocks), abid 0..2**cbsz - 1) and the fragments' block axis.
"""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import jwmma
from jwmma.isa.table import lookup
from tests import calculator_dumps
from tests import mmasim_support as mmasim

F32 = ("mfma_f32_32x32x1f32", "mfma_f32_16x16x1f32", "mfma_f32_4x4x1f32")
I8 = ("mfma_i32_32x32x4i8", "mfma_i32_16x16x4i8", "mfma_i32_4x4x4i8")
F16 = ("mfma_f32_32x32x4f16", "mfma_f32_16x16x4f16", "mfma_f32_4x4x4f16")
BF16 = ("mfma_f32_32x32x4bf16_1k", "mfma_f32_16x16x4bf16_1k", "mfma_f32_4x4x4bf16_1k")
BF16_12 = ("mfma_f32_32x32x2bf16", "mfma_f32_16x16x2bf16", "mfma_f32_4x4x2bf16")
ROWS = F32 + I8 + F16 + BF16 + BF16_12
CHIPS = {n: ("gfx908", "gfx90a") if n in BF16_12 else ("gfx942", "gfx950", "gfx90a") if n in BF16
         else ("gfx942", "gfx950", "gfx908", "gfx90a") for n in ROWS}  # the default target first
PAIRS = [(n, t) for n in ROWS for t in CHIPS[n]]
ARCH = {"gfx908": "CDNA1", "gfx90a": "CDNA2", "gfx942": "CDNA3", "gfx950": "CDNA3"}


def _instruction(name, target):
    dump = calculator_dumps.instructions(target)
    return next(((k, v) for k, v in dump.items() if v["builtin"] == name), (None, None))


def _variant(spec, key):
    """The (lane, element, block, row, col) entries jwmma's layouts give for a dump key: for
    A_cbsz{c}_abid{a} / B_blgp{v} the lane a block's element is read from."""
    which = key[0]
    layout = {"A": spec.a_layout, "B": spec.b_layout, "C": spec.c_layout, "D": spec.c_layout}[which]
    src = np.arange(64)
    if key.startswith("A_cbsz"):
        c, a = map(int, key[len("A_cbsz"):].split("_abid"))
        src = jwmma.isa.layouts.cbsz_lanes(spec.m, c, a)
    elif key.startswith("B_blgp"):
        src = jwmma.isa.layouts.BLGP_LANES[int(key[len("B_blgp"):])]
    rows = spec.k if which == "B" else spec.m
    out = set()
    for lane in range(64):
        for e in range(layout.shape[1]):
            blk, r = divmod(int(layout[lane, e, 0]), rows)
            out.add((int(src[lane]), e, blk, r, int(layout[lane, e, 1])))
    return out


# ------------------------------------------------------------------------------ rows, layouts
def test_rows_targets_and_shapes_are_the_calculators():
    """Each row runs where LLVM selects it (bf16_1k: isGFX90APlus; non-1k bf16: isGFX908orGFX90A),
    with the calculator's M, N, K, blocks and register counts."""
    for name in ROWS:
        spec = jwmma.BUILTINS[name]
        assert spec.target == CHIPS[name][0] and spec.blocks == 64 // spec.m
        want = set(CHIPS[name])
        assert set(spec.targets) == want, name
        for t in ("gfx908", "gfx90a", "gfx942"):
            _, v = _instruction(name, t)
            assert (v is not None) == (t in want), (name, t)
            if v is None:
                continue
            d = v["detail"]
            assert (spec.m, spec.n, spec.k, spec.blocks) == tuple(int(d[x]) for x in ("M", "N", "K", "blocks"))
            assert spec.c.n == spec.m and spec.a.n == (1 if name in F32 + I8 else 2 if name in BF16_12 else 4)


@pytest.mark.parametrize("target", ["gfx908", "gfx90a", "gfx942"])
def test_every_layout_entry_equals_the_calculator(target):
    """Every entry of every operand key (A, B, C, D, every A_cbsz*_abid*, every B_blgp*)."""
    seen = 0
    for name in ROWS:
        _, v = _instruction(name, target)
        if v is None:
            continue
        spec = lookup(name, target)
        keys = set(v["operands"])
        top = spec.blocks.bit_length() - 1
        assert {k for k in keys if k.startswith("A_cbsz")} == {
            f"A_cbsz{c}_abid{a}" for c in range(1, top + 1) for a in range(1 << c)}  # cbsz 0: key A
        assert {k for k in keys if k.startswith("B_blgp")} == {f"B_blgp{b}" for b in range(1, 8)}
        for key, o in v["operands"].items():
            assert _variant(spec, key) == set(map(tuple, o["entries"])), (name, target, key)
            seen += 1
    assert seen > 100


# ------------------------------------------------------------------------------ i8: exact wrap
def _i8_reference(v, a_words, b_words, c_words, cbsz, abid, blgp):
    """D registers in plain Python from the dump's entries: block b's A from the A_cbsz/abid
    entries, B from the B_blgp entries, C/D where the C/D entries put them; exact sums, wrapped."""
    ops = v["operands"]
    akey = f"A_cbsz{cbsz}_abid{abid}" if cbsz else "A"
    bkey = f"B_blgp{blgp}" if blgp else "B"

    def byte(words, lane, e):
        x = (int(words[lane][0]) >> (8 * e)) & 0xFF
        return x - 256 if x >= 128 else x

    a = {(blk, r, k): byte(a_words, lane, e) for lane, e, blk, r, k in ops[akey]["entries"]}
    b = {(blk, k, j): byte(b_words, lane, e) for lane, e, blk, k, j in ops[bkey]["entries"]}
    kk = 1 + max(k for _, k, _ in b)
    d = [[0] * len(c_words[0]) for _ in range(64)]
    for lane, e, blk, i, j in ops["C"]["entries"]:
        total = int(c_words[lane][e]) + sum(a[(blk, i, k)] * b[(blk, k, j)] for k in range(kk))
        total &= 0xFFFFFFFF
        d[lane][e] = total - (1 << 32) if total >= 1 << 31 else total
    return d


def _i8_case(rng, name, target, cbsz, abid, blgp, kind):
    _, v = _instruction(name, target)
    spec = lookup(name, target)
    if kind == "extreme":  # -128 and 127 bytes, C at the i32 edges: sums wrap
        a = rng.choice(np.array([0x80808080, 0x7F7F7F7F, 0x807F807F], np.uint32), (64, 1)).view(np.int32)
        b = rng.choice(np.array([0x80808080, 0x7F7F7F7F], np.uint32), (64, 1)).view(np.int32)
        c = rng.choice(np.array([2**31 - 1, -2**31, 2**31 - 5000, -2**31 + 5000], np.int64), (64, spec.c.n))
        c = c.astype(np.int32)
    else:
        a = rng.integers(-2**31, 2**31, (64, 1), dtype=np.int64).astype(np.int32)
        b = rng.integers(-2**31, 2**31, (64, 1), dtype=np.int64).astype(np.int32)
        c = rng.integers(-2**31, 2**31, (64, spec.c.n), dtype=np.int64).astype(np.int32)
    got = np.asarray(getattr(jwmma, name)(a, b, c, cbsz, abid, blgp, target=target))
    want = np.array(_i8_reference(v, a.tolist(), b.tolist(), c.tolist(), cbsz, abid, blgp), np.int64).astype(np.int32)
    assert np.array_equal(got, want), (name, target, cbsz, abid, blgp)


def test_i8_registers_equal_python_ints(rng):
    _i8_case(rng, "mfma_i32_16x16x4i8", "gfx942", 1, 1, 3, "extreme")


@pytest.mark.slow
@pytest.mark.parametrize("name", I8)
@pytest.mark.parametrize("target", ["gfx908", "gfx90a", "gfx942"])
def test_i8_registers_equal_python_ints_grid(rng, name, target):
    top = lookup(name, target).blocks.bit_length() - 1
    for cbsz in range(top + 1):
        abid = int(rng.integers(0, 1 << cbsz))
        for kind in ("random", "extreme"):
            _i8_case(rng, name, target, cbsz, abid, int(rng.integers(0, 8)), kind)


# ------------------------------------------------------------------------------ floats: MMA-Sim
def _suffix(name, target):
    """MMA-Sim's name: the builtin's on CDNA1/CDNA2, the _Nb_ mnemonic on CDNA3."""
    s = name.removeprefix("mfma_")
    if ARCH[target] != "CDNA3":
        return s
    mm, kk, t = re.fullmatch(r"f32_(\d+)x\1x(\d)(f32|f16|bf16)(?:_1k)?", s).groups()
    return f"f32_{mm}x{mm}x{kk}_{64 // int(mm)}b_{t}"


def _values(rng, dtype, shape, kind):
    """random: moderate values; adversarial: subnormals, the largest values, Inf, NaN, zeros
    of both signs and exact cancellations."""
    dtype = np.dtype(dtype)
    x = rng.standard_normal(shape) * 2.0 ** rng.integers(-6, 7, shape)
    x = np.asarray(jwmma.numerics.cast(x, dtype))
    if kind == "random":
        return x
    u = np.uint32 if dtype.itemsize == 4 else np.uint16
    info = np.finfo(np.float32) if dtype == np.float32 else ml_dtypes.finfo(dtype)
    bits = x.view(u).copy()
    pick = rng.random(shape)
    sub = pick < 0.12
    bits[sub] = rng.integers(1, 1 << int(info.nmant), int(sub.sum())).astype(u)
    bits[(pick >= 0.12) & (pick < 0.2)] = 0
    bits[(pick >= 0.2) & (pick < 0.24)] = np.array(info.max, dtype).view(u)
    bits[(pick >= 0.24) & (pick < 0.25)] = np.array(np.inf, dtype).view(u)
    bits[(pick >= 0.25) & (pick < 0.255)] = np.array(np.nan, dtype).view(u)
    bits |= (rng.random(shape) < 0.5).astype(u) << u(8 * dtype.itemsize - 1)
    return bits.view(dtype)


def _float_case(rng, name, target, cbsz, abid, kind):
    sim = mmasim.mfma(ARCH[target], _suffix(name, target))  # skips without torch and mmasim
    spec = lookup(name, target)
    nb, dt = spec.blocks, spec.a_format.dtype
    a = _values(rng, dt, (nb, spec.m, spec.k), kind)
    b = _values(rng, dt, (nb, spec.k, spec.n), kind)
    c = _values(rng, np.float32, (nb, spec.m, spec.n), kind)
    if kind == "adversarial" and spec.k > 1:  # exact cancellations: products k and k+1 cancel
        a[:, :, 1] = a[:, :, 0]
        b[:, 1, :] = -b[:, 0, :]
    regs = getattr(jwmma, name)(jwmma.pack_a(name, a, target=target), jwmma.pack_b(name, b, target=target),
                                jwmma.pack_c(name, c, target=target), cbsz, abid, 0, target=target)
    got = np.asarray(jwmma.unpack_c(name, regs, target=target)).view(np.uint32)
    g = 1 << cbsz  # block blk multiplies the A block its cbsz/abid broadcast gives it
    want = mmasim.per_block(sim, a[[(blk // g) * g + abid for blk in range(nb)]], b, c)
    mmasim.assert_same_bits(got, want, "jwmma vs MMA-Sim")


#: one fast case per arithmetic: the f32 chain, CDNA1/CDNA2/CDNA3 f16 and bf16, CDNA2's non-1k bf16 tree of 2
FAST = [("mfma_f32_16x16x1f32", "gfx942", 2, 3, "adversarial"), ("mfma_f32_4x4x4f16", "gfx908", 3, 5, "adversarial"),
        ("mfma_f32_16x16x4bf16_1k", "gfx90a", 1, 0, "adversarial"), ("mfma_f32_32x32x4f16", "gfx942", 1, 1,
                                                                      "adversarial"),
        ("mfma_f32_4x4x2bf16", "gfx90a", 2, 1, "adversarial")]


@pytest.mark.parametrize("name,target,cbsz,abid,kind", FAST)
def test_floats_equal_mmasim(rng, name, target, cbsz, abid, kind):
    _float_case(rng, name, target, cbsz, abid, kind)


@pytest.mark.slow
@pytest.mark.parametrize("name,target", [p for p in PAIRS if p[0] not in I8])
@pytest.mark.parametrize("kind", ["random", "adversarial"])
def test_floats_equal_mmasim_grid(rng, name, target, kind):
    top = lookup(name, target).blocks.bit_length() - 1
    for cbsz in range(top + 1):
        _float_case(rng, name, target, cbsz, int(rng.integers(0, 1 << cbsz)), kind)


def test_blgp_swizzles_b_lanes(rng):
    """blgp v reads B from `BLGP_LANES[v]` on every chip (f32 here; i8 through the dump entries)."""
    name = "mfma_f32_4x4x1f32"
    for target in ("gfx908", "gfx942"):
        a, b = (rng.standard_normal((64, 1)).astype(np.float32) for _ in range(2))
        c = np.zeros((64, 4), np.float32)
        fn = getattr(jwmma, name)
        got = np.asarray(fn(a, b, c, 0, 0, 5, target=target))
        want = np.asarray(fn(a, b[jwmma.isa.layouts.BLGP_LANES[5]], c, 0, 0, 0, target=target))
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


# ------------------------------------------------------------------------------ fragments, bad input
def test_fragments_take_a_block_axis(rng):
    name = "mfma_f32_16x16x4f16"
    a = rng.standard_normal((3, 4, 16, 4)).astype(np.float16)
    regs = jwmma.pack_a(name, a)
    assert regs.shape == (3, 64, 4)
    assert np.array_equal(np.asarray(jwmma.unpack_a(name, regs)), a)
    c = rng.standard_normal((4, 16, 16)).astype(np.float32)
    assert np.array_equal(np.asarray(jwmma.unpack_c(name, jwmma.pack_c(name, c))), c)
    with pytest.raises(ValueError, match=r"\(\*batch, blocks, M, Kc\)"):
        jwmma.pack_a(name, a[0, 0])


@pytest.mark.parametrize("name,cbsz,abid,what", [
    ("mfma_f32_32x32x1f32", 2, 0, "cbsz must be in \\[0, 1\\]"),
    ("mfma_f32_16x16x4f16", 3, 0, "cbsz must be in \\[0, 2\\]"),
    ("mfma_i32_4x4x4i8", -1, 0, "cbsz must be in \\[0, 4\\]"),
    ("mfma_f32_16x16x1f32", 1, 2, "abid must be in \\[0, 1\\]"),
    ("mfma_f32_4x4x4bf16_1k", 0, 1, "abid must be in \\[0, 0\\] .* with cbsz=0"),
])
def test_bad_cbsz_abid_name_the_rule(name, cbsz, abid, what):
    spec = jwmma.BUILTINS[name]
    a = np.zeros((64, spec.a.n), spec.a.dtype)
    b = np.zeros((64, spec.b.n), spec.b.dtype)
    c = np.zeros((64, spec.c.n), spec.c.dtype)
    with pytest.raises(ValueError, match=what) as e:
        getattr(jwmma, name)(a, b, c, cbsz, abid, 0)
    assert "block b computes with the A of block (b // 2**cbsz) * 2**cbsz + abid" in str(e.value)


def test_bad_blgp_and_bf16_on_gfx908():
    spec = jwmma.BUILTINS["mfma_f32_32x32x1f32"]
    regs = [np.zeros((64, op.n), op.dtype) for op in (spec.a, spec.b, spec.c)]
    with pytest.raises(ValueError, match="blgp"):
        jwmma.mfma_f32_32x32x1f32(*regs, 0, 0, 8)
    with pytest.raises(ValueError, match="isGFX90APlus"):
        lookup("mfma_f32_4x4x4bf16_1k", "gfx908")
    with pytest.raises(ValueError, match="isGFX908orGFX90A"):
        lookup("mfma_f32_4x4x2bf16", "gfx942")


def _gemm_case(rng, name, target):
    """jwmma.gemm of a (2M x 3K) x (3K x 2N) problem: its 2 x 2 output tiles, each 3 K steps, are
    the blocks of three chained builtin calls (blocks beyond 4 are zeros); and a GEMM of one
    block's M x N x K is block 0 of one call."""
    spec = lookup(name, target)
    m, k, nb = spec.m, spec.k, spec.blocks
    if spec.integer:
        a = rng.integers(-128, 128, (2 * m, 3 * k)).astype(np.int8)
        b = rng.integers(-128, 128, (3 * k, 2 * m)).astype(np.int8)
        c = rng.integers(-2**31, 2**31, (2 * m, 2 * m), dtype=np.int64).astype(np.int32)
    else:
        a = _values(rng, spec.a_format.dtype, (2 * m, 3 * k), "adversarial")
        b = _values(rng, spec.a_format.dtype, (3 * k, 2 * m), "random")
        c = _values(rng, np.float32, (2 * m, 2 * m), "random")
    got = np.asarray(jwmma.gemm(a, b, c, builtin=name, target=target)).view(np.int32)
    tiles = [(i, j) for i in range(2) for j in range(2)][:nb]
    a_s = np.zeros((3, nb, m, k), a.dtype)
    b_s = np.zeros((3, nb, k, m), b.dtype)
    c_b = np.zeros((nb, m, m), c.dtype)
    for blk, (i, j) in enumerate(tiles):
        for s in range(3):
            a_s[s, blk] = a[i * m:(i + 1) * m, s * k:(s + 1) * k]
            b_s[s, blk] = b[s * k:(s + 1) * k, j * m:(j + 1) * m]
        c_b[blk] = c[i * m:(i + 1) * m, j * m:(j + 1) * m]
    fn = getattr(jwmma, name)
    pk = dict(target=target)
    d = jwmma.pack_c(name, c_b, **pk)
    for s in range(3):
        d = fn(jwmma.pack_a(name, a_s[s], **pk), jwmma.pack_b(name, b_s[s], **pk), d, 0, 0, 0, **pk)
    want = np.asarray(jwmma.unpack_c(name, d, **pk)).view(np.int32)
    for blk, (i, j) in enumerate(tiles):
        assert np.array_equal(got[i * m:(i + 1) * m, j * m:(j + 1) * m], want[blk]), (name, target, blk)
    one = np.asarray(jwmma.gemm(a[:m, :k], b[:k, :m], c[:m, :m], builtin=name, target=target)).view(np.int32)
    d1 = fn(jwmma.pack_a(name, a_s[0], **pk), jwmma.pack_b(name, b_s[0], **pk), jwmma.pack_c(name, c_b, **pk),
            0, 0, 0, **pk)
    assert np.array_equal(one, np.asarray(jwmma.unpack_c(name, d1, **pk))[0].view(np.int32))


def test_gemm_tiles_are_blocks(rng):
    _gemm_case(rng, "mfma_f32_16x16x4f16", "gfx908")


@pytest.mark.slow
@pytest.mark.parametrize("name,target", [("mfma_f32_32x32x1f32", "gfx90a"), ("mfma_f32_4x4x1f32", "gfx942"),
                                         ("mfma_f32_4x4x4bf16_1k", "gfx90a"), ("mfma_f32_32x32x4f16", "gfx950"),
                                         ("mfma_i32_4x4x4i8", "gfx942"), ("mfma_i32_32x32x4i8", "gfx908")])
def test_gemm_tiles_are_blocks_grid(rng, name, target):
    _gemm_case(rng, name, target)


def _register_path_case(rng, name, target):
    """The register path packs consecutive output tiles as the blocks of one call (zero tiles
    filling the last): the matrix path's bits, on a shape of 3 x 2 tiles cut short (5 tiles do
    not fill 2 or 4 blocks), 3 K steps; and a `Unit` on the row computes `jwmma.gemm`'s D."""
    spec = lookup(name, target)
    m, k = spec.m, spec.k
    shape_a, shape_b = (3 * m - 1, 3 * k), (3 * k, 2 * m - 1)
    if spec.integer:
        a = rng.integers(-128, 128, shape_a).astype(np.int8)
        b = rng.integers(-128, 128, shape_b).astype(np.int8)
    else:
        a = _values(rng, spec.a_format.dtype, shape_a, "adversarial")
        b = _values(rng, spec.a_format.dtype, shape_b, "random")
    kw = dict(builtin=name, target=target)
    want = np.asarray(jwmma.gemm(a, b, **kw)).view(np.int32)
    got = np.asarray(jwmma.gemm(a, b, path="registers", **kw)).view(np.int32)
    assert np.array_equal(got, want), (name, target)
    if not spec.integer:  # the unit's GEMM: y = x @ w with w as the builtin's B
        unit = jwmma.Unit(name, target=target, a="lhs", scaling="none")
        y = np.asarray(jwmma.dot_general(a.astype(np.float32), b.astype(np.float32), (((1,), (0,)), ((), ())),
                                         unit=unit)).view(np.int32)
        assert np.array_equal(y, want), (name, target)


def test_register_path_and_unit_take_multi_block_rows(rng):
    _register_path_case(rng, "mfma_f32_16x16x4f16", "gfx90a")


@pytest.mark.slow
@pytest.mark.parametrize("name,target", [("mfma_f32_32x32x1f32", "gfx942"), ("mfma_f32_4x4x2bf16", "gfx908"),
                                         ("mfma_i32_16x16x4i8", "gfx90a"), ("mfma_f32_4x4x4bf16_1k", "gfx950")])
def test_register_path_and_unit_take_multi_block_rows_grid(rng, name, target):
    _register_path_case(rng, name, target)


def test_gemm_refuses_cbsz_abid_and_kernel_takes_multi_block_rows(rng):
    """cbsz/abid have no meaning for independent output tiles: refused with what to do.
    `jwmma.kernel` takes the rows, a wave tile of the call's blocks side by side along N
    (tests/test_kernel_blocks.py runs such policies)."""
    a = rng.standard_normal((32, 1)).astype(np.float32)
    b = rng.standard_normal((1, 32)).astype(np.float32)
    with pytest.raises(ValueError, match="jwmma.gemm with cbsz/abid does not drive the multi-block"):
        jwmma.gemm(a, b, builtin="mfma_f32_32x32x1f32", cbsz=1)

    class Policy:
        builtin = "mfma_f32_4x4x4f16"
        load_a = load_b = index = store_c = staticmethod(lambda *args: None)

    pol = jwmma.kernel.as_policy(Policy)
    assert (pol.blocks, pol.thread_tile_m, pol.thread_tile_n, pol.k_step) == (16, 4, 64, 4)


def test_layout_view_names_the_block():
    """`jwmma layout` shows a stacked row as (block, row of the block)."""
    from jwmma.isa import view
    spec = jwmma.BUILTINS["mfma_i32_4x4x4i8"]
    lines = {view.describe(spec, en) for en in view.entries(spec, "b")}
    assert any(ln.startswith("lane 10  elem  1") and ln.endswith("-> block 2 B[1][2]") for ln in lines)
    assert "16 blocks of K x N" in view.matrix_of(spec, "b")[2]
