"""The instruction table and its layout arrays against BUILTINS.md (sections 2.1/2.2, 4.1/4.2)
and the tables printed in the seed pages. Expectations are written out here and in
tests/reference.py; jwmma's own layout code is never used to compute them."""
import numpy as np
import pytest

import jwmma
from oracles.reference import CDNA4, NAMES, RDNA4, Ref

API_TYPES = {"f16", "bf16", "fp8", "bf8", "iu8", "iu4", "i8"}


# ------------------------------------------------------------------------------ table facts
def test_table_holds_the_25_seed_builtins():
    """The 25 of the seed pages, plus the 25 siblings of BUILTINS_MORE.md (tests/test_siblings.py) and the
    26 dense MFMA of BUILTINS_DENSE.md (tests/test_mfma_dense.py)."""
    assert len(jwmma.BUILTINS) == 113
    assert {n for n, s in jwmma.BUILTINS.items() if s.family in ("RDNA4 SWMMAC", "CDNA4 SMFMAC")} == set(NAMES)
    assert len(RDNA4) == 11 and len(CDNA4) == 14
    for name in NAMES:  # one function per builtin, named without the prefix
        assert callable(getattr(jwmma, name))


@pytest.mark.parametrize("name", NAMES)
def test_table_facts(name):
    spec, ref = jwmma.BUILTINS[name], Ref(name)
    assert spec.name == name
    assert spec.arch == ref.arch
    assert spec.wave == ref.wave == (32 if name.startswith("swmmac") else 64)
    assert (spec.m, spec.n, spec.k) == (ref.m, ref.n, ref.kd)
    # k is the DENSE K of the name
    assert f"x{spec.k}_" in name
    assert spec.kc == spec.k // 2
    assert (spec.a_type, spec.b_type, spec.c_type) == (ref.a_type, ref.b_type, ref.c_type)
    assert spec.a_type in API_TYPES and spec.b_type in API_TYPES
    assert spec.c_type in {"f32", "f16", "bf16", "i32"}
    for which, layout in (("a", spec.a_layout), ("b", spec.b_layout), ("c", spec.c_layout)):
        assert isinstance(layout, np.ndarray), which
        assert np.issubdtype(layout.dtype, np.integer), which
        assert layout.shape == (ref.wave, ref.elems(which), 2), which


def test_table_element_counts_match_builtins_md():
    # BUILTINS.md 2.1 / 4.1 "A el/lane" and "B el/lane" columns
    want = {
        "swmmac_f32_16x16x32_f16_w32": (8, 16), "swmmac_i32_16x16x32_iu8_w32": (8, 16),
        "swmmac_i32_16x16x32_iu4_w32": (8, 16), "swmmac_i32_16x16x64_iu4_w32": (16, 32),
        "swmmac_f32_16x16x32_bf8_fp8_w32": (8, 16), "smfmac_f32_16x16x64_f16": (8, 16),
        "smfmac_f32_32x32x32_bf16": (8, 16), "smfmac_i32_16x16x128_i8": (16, 32),
        "smfmac_i32_32x32x64_i8": (16, 32), "smfmac_f32_16x16x128_fp8_bf8": (16, 32),
        "smfmac_f32_32x32x64_bf8_bf8": (16, 32),
    }
    for name, (na, nb) in want.items():
        spec = jwmma.BUILTINS[name]
        assert spec.a_layout.shape[1] == na and spec.b_layout.shape[1] == nb, name


# ---------------------------------------------------------------- layouts vs the formulas
def _all(layout):
    return {(lane, x): tuple(int(v) for v in layout[lane, x]) for lane in range(layout.shape[0]) for x in range(layout.shape[1])}


@pytest.mark.parametrize("name", NAMES)
def test_layouts_match_reference_formulas(name):
    spec, ref = jwmma.BUILTINS[name], Ref(name)
    for which, layout in (("a", spec.a_layout), ("b", spec.b_layout), ("c", spec.c_layout)):
        for (lane, x), got in _all(layout).items():
            assert got == ref.coord(which, lane, x), (which, lane, x)


@pytest.mark.parametrize("name", NAMES)
def test_layouts_cover_each_matrix_element_once(name):
    spec, ref = jwmma.BUILTINS[name], Ref(name)
    for which, layout in (("a", spec.a_layout), ("b", spec.b_layout), ("c", spec.c_layout)):
        rows, cols = ref.shape(which)
        seen = {}
        for key, (i, j) in _all(layout).items():
            assert 0 <= i < rows and 0 <= j < cols, (which, key)
            assert (i, j) not in seen, (which, key, seen.get((i, j)))
            seen[(i, j)] = key
        assert len(seen) == rows * cols, which


@pytest.mark.parametrize("name", RDNA4)
def test_rdna4_formulas_written_out(name):
    """BUILTINS.md 2.2, in the alternative forms the spec states."""
    spec, ref = jwmma.BUILTINS[name], Ref(name)
    na, nb = ref.na, ref.nb
    for lane in range(32):
        h, r = lane // 16, lane % 16
        for e in range(na):
            i, c = (int(v) for v in spec.a_layout[lane, e])
            assert i == r
            if ref.bits == 16:
                assert c // 2 == 4 * (e // 4) + 2 * h + (e // 2) % 2  # dense group q
                assert c % 2 == e % 2  # low half = first stored value
                assert (h, e) == ((c // 4) % 2, 4 * (c // 8) + c % 4)  # the stated inverse
            else:
                assert c == na * h + e and c // 2 == (na // 2) * h + e // 2
        for f in range(nb):
            k, j = (int(v) for v in spec.b_layout[lane, f])
            assert j == r
            if ref.bits == 16:
                vgpr = f // 2
                base = 8 * h if vgpr < 4 else 16 + 8 * h  # VGPRs 0-3: 8h..8h+7; 4-7: 16+8h..
                assert k == base + f % 8
            else:
                assert k == nb * h + f
        for t in range(8):
            assert tuple(int(v) for v in spec.c_layout[lane, t]) == (8 * h + t, r)


CDNA4_WRITTEN = {  # BUILTINS.md 4.2, per shape: (A compressed column, B dense k)
    (16, 16): (lambda g, e: 8 * g + e, lambda g, f: 32 * (f // 8) + 8 * g + f % 8),  # 16x16x64 16-bit
    (32, 16): (lambda g, e: 8 * g + e, lambda g, f: 16 * (f // 8) + 8 * g + f % 8),  # 32x32x32 16-bit
    (16, 8): (lambda g, e: 16 * g + e, lambda g, f: 64 * (f // 16) + 16 * g + f % 16),  # 16x16x128
    (32, 8): (lambda g, e: 16 * g + e, lambda g, f: 32 * (f // 16) + 16 * g + f % 16),  # 32x32x64
}


@pytest.mark.parametrize("name", CDNA4)
def test_cdna4_formulas_written_out(name):
    spec, ref = jwmma.BUILTINS[name], Ref(name)
    m = ref.m
    a_c, b_k = CDNA4_WRITTEN[(m, ref.bits)]
    for lane in range(64):
        g, r = lane // m, lane % m
        for e in range(ref.na):
            assert tuple(int(v) for v in spec.a_layout[lane, e]) == (r, a_c(g, e))
        for f in range(ref.nb):
            assert tuple(int(v) for v in spec.b_layout[lane, f]) == (b_k(g, f), r)
        for t in range(ref.nc):
            i = 4 * (lane // 16) + t if m == 16 else 8 * (t // 4) + 4 * (lane // 32) + t % 4
            assert tuple(int(v) for v in spec.c_layout[lane, t]) == (i, r)


# -------------------------------------------------------------------- the seed-page tables
RDNA4_16BIT = [n for n in RDNA4 if Ref(n).bits == 16]

# SEED-R4 srcA table: lane group -> compressed K pairs of VGPRs 0..3
SEED_R4_SRC_A = {0: [(0, 1), (2, 3), (8, 9), (10, 11)], 1: [(4, 5), (6, 7), (12, 13), (14, 15)]}
# SEED-R4 srcB table: lane group -> (K rows of VGPRs 0-3, K rows of VGPRs 4-7)
SEED_R4_SRC_B = {0: (range(0, 8), range(16, 24)), 1: (range(8, 16), range(24, 32))}


@pytest.mark.parametrize("name", RDNA4_16BIT)
def test_seed_rdna4_src_a_table(name):
    a = jwmma.BUILTINS[name].a_layout
    for lane in range(32):
        for vgpr, pair in enumerate(SEED_R4_SRC_A[lane // 16]):
            # VGPR v holds vector elements 2v (bits 15:0) and 2v+1 (bits 31:16)
            assert (int(a[lane, 2 * vgpr, 1]), int(a[lane, 2 * vgpr + 1, 1])) == pair
            assert int(a[lane, 2 * vgpr, 0]) == lane % 16 == int(a[lane, 2 * vgpr + 1, 0])


@pytest.mark.parametrize("name", RDNA4_16BIT)
def test_seed_rdna4_src_b_table(name):
    b = jwmma.BUILTINS[name].b_layout
    for lane in range(32):
        lo, hi = SEED_R4_SRC_B[lane // 16]
        assert [int(b[lane, f, 0]) for f in range(8)] == list(lo)  # VGPRs 0-3
        assert [int(b[lane, f, 0]) for f in range(8, 16)] == list(hi)  # VGPRs 4-7
        assert all(int(b[lane, f, 1]) == lane % 16 for f in range(16))


@pytest.mark.parametrize("name", RDNA4)
def test_seed_rdna4_accumulator_formula(name):
    c = jwmma.BUILTINS[name].c_layout
    for i in range(16):
        for j in range(16):
            lane, g = (i // 8) * 16 + j, i % 8  # seed: lane = floor(i/8)*16 + j, VGPR = i mod 8
            assert tuple(int(v) for v in c[lane, g]) == (i, j)
    for lane in range(32):
        for g in range(8):
            assert tuple(int(v) for v in c[lane, g]) == ((lane // 16) * 8 + g, lane % 16)
    # row-to-lane table: rows 0-7 -> lanes 0-15, rows 8-15 -> lanes 16-31, VGPRs 0-7
    for rows, lanes in ((range(0, 8), range(0, 16)), (range(8, 16), range(16, 32))):
        assert {int(c[lane, g, 0]) for lane in lanes for g in range(8)} == set(rows)


def test_rdna4_packed_16bit_accumulator_halves():
    """BUILTINS.md 2.2: f16/bf16 C is packed, VGPR v holds rows 8h+2v (low) and 8h+2v+1."""
    for name in ("swmmac_f16_16x16x32_f16_w32", "swmmac_bf16_16x16x32_bf16_w32"):
        c = jwmma.BUILTINS[name].c_layout
        assert jwmma.BUILTINS[name].c.n == 8
        for lane in range(32):
            h = lane // 16
            for v in range(4):
                assert int(c[lane, 2 * v, 0]) == 8 * h + 2 * v
                assert int(c[lane, 2 * v + 1, 0]) == 8 * h + 2 * v + 1


CDNA4_ROW_TABLE_16 = [(range(0, 4), range(0, 16)), (range(4, 8), range(16, 32)),
                      (range(8, 12), range(32, 48)), (range(12, 16), range(48, 64))]
CDNA4_ROW_TABLE_32 = [  # (rows, lanes, VGPRs) as printed in SEED-C4
    (range(0, 4), range(0, 32), range(0, 4)), (range(4, 8), range(32, 64), range(0, 4)),
    (range(8, 12), range(0, 32), range(4, 8)), (range(12, 16), range(32, 64), range(4, 8)),
    (range(16, 20), range(0, 32), range(8, 12)), (range(20, 24), range(32, 64), range(8, 12)),
    (range(24, 28), range(0, 32), range(12, 16)), (range(28, 32), range(32, 64), range(12, 16)),
]


@pytest.mark.parametrize("name", CDNA4)
def test_seed_cdna4_accumulator_formulas_and_tables(name):
    spec = jwmma.BUILTINS[name]
    c, m = spec.c_layout, spec.m
    for i in range(m):
        for j in range(m):
            if m == 16:
                lane, g = 16 * (i // 4) + j, i % 4
            else:
                lane, g = (32 * (i // 4)) % 64 + j, 4 * (i // 8) + i % 4
            assert tuple(int(v) for v in c[lane, g]) == (i, j)
    for lane in range(64):
        for g in range(c.shape[1]):
            if m == 16:
                i = 4 * (lane // 16) + g % 4
            else:
                i = (8 * (g // 4)) % 32 + 4 * (lane // 32) + g % 4
            assert tuple(int(v) for v in c[lane, g]) == (i, lane % m)
    if m == 16:
        for rows, lanes in CDNA4_ROW_TABLE_16:
            got = {(int(c[lane, g, 0])) for lane in lanes for g in range(4)}
            assert got == set(rows)
    else:
        for rows, lanes, vgprs in CDNA4_ROW_TABLE_32:
            got = {int(c[lane, g, 0]) for lane in lanes for g in vgprs}
            assert got == set(rows)


CDNA4_16x16x128_8BIT = [n for n in CDNA4 if "16x16x128" in n]


@pytest.mark.parametrize("name", CDNA4_16x16x128_8BIT)
def test_seed_cdna4_fp8_example_loaders(name):
    """SEED-C4 SmfmacCdna4FP8Policy: load_b reads B[kk + b][n] into byte b of VGPR v with
    kk = (v/4)*64 + g*16 + (v%4)*4; load_a reads Acomp[n][16g + 4j + b] into byte b of VGPR j."""
    spec = jwmma.BUILTINS[name]
    for lane in range(64):
        g, n = lane // 16, lane % 16
        for v in range(8):
            kk = (v // 4) * 64 + g * 16 + (v % 4) * 4
            for byte in range(4):
                assert tuple(int(x) for x in spec.b_layout[lane, 4 * v + byte]) == (kk + byte, n)
        for j in range(4):
            for byte in range(4):
                assert tuple(int(x) for x in spec.a_layout[lane, 4 * j + byte]) == (n, 16 * g + 4 * j + byte)


# -------------------------------------------------------------------------- pairing facts
@pytest.mark.parametrize("name", RDNA4)
def test_rdna4_pairing_is_lane_local(name):
    """BUILTINS.md 2.2: A container t of lane L meets B elements 4t..4t+3 of lane 16h + j."""
    spec = jwmma.BUILTINS[name]
    for lane in range(32):
        h = lane // 16
        for t in range(spec.a_layout.shape[1] // 2):
            q = int(spec.a_layout[lane, 2 * t, 1]) // 2
            assert int(spec.a_layout[lane, 2 * t + 1, 1]) // 2 == q
            for j in range(16):
                ks = [int(spec.b_layout[16 * h + j, 4 * t + u, 0]) for u in range(4)]
                assert ks == [4 * q + u for u in range(4)]


def test_cdna4_pairing_is_not_lane_local():
    """BUILTINS.md 4.3: lane group 1, A VGPR 0 of 16x16x128 covers dense 32..39, which sit in
    B lane group 2, VGPRs 0-1."""
    spec = jwmma.BUILTINS["smfmac_f32_16x16x128_fp8_fp8"]
    lane = 16  # lane group 1
    dense = sorted({4 * (int(spec.a_layout[lane, e, 1]) // 2) + p for e in range(4) for p in range(4)})
    assert dense == list(range(32, 40))
    holders = {(ln // 16, f // 4) for ln in range(64) for f in range(32) if int(spec.b_layout[ln, f, 0]) in dense}
    assert holders == {(2, 0), (2, 1)}
    own = [int(spec.b_layout[lane, f, 0]) for f in range(8)]
    assert own != dense


# ---------------------------------------------------------------------------- index_bit
@pytest.mark.parametrize("name", NAMES)
def test_index_bit(name):
    spec, ref = jwmma.BUILTINS[name], Ref(name)
    for set_no, s in enumerate(ref.index_sets):
        for lane in range(ref.wave):
            for e in range(ref.na):
                assert spec.index_bit(lane, e, set_no) == s + 2 * e
                if set_no == 0:
                    assert spec.index_bit(lane, e) == 2 * e
    # fields stay inside the 32-bit word and the sets do not overlap
    assert max(spec.index_bit(0, ref.na - 1, k) for k in range(len(ref.index_sets))) + 1 < 32
    with pytest.raises(ValueError, match="index_set"):
        spec.index_bit(0, 0, len(ref.index_sets))


def test_index_sets_per_family():
    assert Ref("swmmac_i32_16x16x64_iu4_w32").index_sets == (0,)  # all 32 bits, one set
    for name in NAMES:
        spec, ref = jwmma.BUILTINS[name], Ref(name)
        n_sets = len(ref.index_sets)
        # 2 sets of 16 bits except iu4 K64 and the 8-bit gfx950 types (one 32-bit set)
        assert n_sets == (1 if name in ("swmmac_i32_16x16x64_iu4_w32",) or (ref.arch == "gfx950" and ref.bits == 8) else 2)
        if n_sets == 2:
            assert spec.index_bit(0, 0, 1) == 16
        with pytest.raises(ValueError):
            spec.index_bit(ref.wave, 0)
        with pytest.raises(ValueError):
            spec.index_bit(0, ref.na)
