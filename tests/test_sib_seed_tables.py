"""The seed-style tables written from BUILTINS_MORE.md's prose (sib_seed_tables.py) against the
formula transcriptions (sib_layouts.py)."""
import pytest

from oracles import sib_layouts as L
from oracles import sib_seed_tables as T
from oracles.sib_table import ROWS, SMFMAC, WMMA


def _vgpr_groups(name, which, lane):
    """{VGPR: tuple of K values} of lane's A ('a', column k) or B ('b', row k), element order."""
    r = ROWS[name]
    out = {}
    for e in range(L.elems(name, which)):
        v = L.element_bits(r.elem_bits, e)[0]
        u, w = L.coord(name, which, lane, e)
        out.setdefault(v, []).append(w if which == "a" else u)
    return [tuple(out[v]) for v in sorted(out)]


WMMA_AB_TABLES = {16: T.WMMA_16BIT_AB, 8: T.WMMA_8BIT_AB}


@pytest.mark.parametrize("name", WMMA)
def test_wmma_ab_tables(name):
    r = ROWS[name]
    table = (T.WMMA_IU4_K16_AB if r.k == 16 else T.WMMA_IU4_K32_AB) if r.elem_bits == 4 else WMMA_AB_TABLES[r.elem_bits]
    for lane in range(32):
        for which in ("a", "b"):
            assert _vgpr_groups(name, which, lane) == table[lane // 16], (which, lane)


@pytest.mark.parametrize("name", WMMA)
def test_wmma_accumulator_tables(name):
    r = ROWS[name]
    for lane in range(32):
        h = lane // 16
        by_vgpr = {}
        for t in range(8):
            v = L.wm_d_bits(name, t)[0]
            by_vgpr.setdefault(v, []).append(L.wm_d(name, lane, t)[0])
        got = [tuple(by_vgpr[v]) for v in sorted(by_vgpr)]
        want = T.WMMA_D16_ROWS[h] if r.c_bits == 16 else [(x,) for x in T.WMMA_D32_ROWS[h]]
        assert got == want


SM_A_TABLES = {("smfmac_f32_16x16x32_f16", 16): T.SM_16x16x32_16BIT_A, ("smfmac_f32_16x16x32_bf16", 16): T.SM_16x16x32_16BIT_A,
               ("smfmac_f32_32x32x16_f16", 32): T.SM_32x32x16_16BIT_A, ("smfmac_f32_32x32x16_bf16", 32): T.SM_32x32x16_16BIT_A}


@pytest.mark.parametrize("name,m", list(SM_A_TABLES))
def test_smfmac_16bit_a_tables(name, m):
    table = SM_A_TABLES[(name, m)]
    for lane in range(64):
        g = lane // m
        for t, (cols, dense_k) in enumerate(table[g]):
            assert tuple(L.sm_a(name, lane, e)[1] for e in (2 * t, 2 * t + 1)) == cols
            q = L.sm_a_container(name, lane, t)[3]
            assert list(range(4 * q, 4 * q + 4)) == list(dense_k)


@pytest.mark.parametrize("name", [n for n in SMFMAC if "16x16x64" in n])
def test_smfmac_8bit_a_table(name):
    for lane in range(64):
        assert _vgpr_groups(name, "a", lane) == T.SM_16x16x64_8BIT_A[lane // 16]


def test_smfmac_b_tables():
    for name in ("smfmac_f32_16x16x32_f16", "smfmac_f32_16x16x32_bf16"):
        for lane in range(64):
            assert [L.sm_b(name, lane, f)[0] for f in range(8)] == list(T.SM_16x16x32_16BIT_B[lane // 16])
    for name in [n for n in SMFMAC if "32x32x32" in n]:
        for lane in range(64):
            assert [L.sm_b(name, lane, f)[0] for f in range(16)] == list(T.SM_32x32x32_8BIT_B[lane // 32])


@pytest.mark.parametrize("name", SMFMAC)
def test_smfmac_accumulator_tables(name):
    r = ROWS[name]
    if r.m == 16:
        for lane in range(64):
            assert [L.sm_d(name, lane, t)[0] for t in range(4)] == T.SM_D16_ROWS[lane // 16]
    else:
        for rows, lanes, vgprs in T.SM_D32_ROW_TABLE:
            assert {L.sm_d(name, lane, t)[0] for lane in lanes for t in vgprs} == set(rows)


@pytest.mark.parametrize("name", SMFMAC)
def test_smfmac_index_set_table(name):
    r = ROWS[name]
    _, na, _ = L.sm_counts(name)
    table = T.SM_INDEX_SETS[16 if r.elem_bits == 16 else 8]
    assert len(table) == L.index_sets(name)
    for abid, (lo, hi) in table:
        assert L.index_field(name, 0, 0, abid)[0] == lo and L.index_field(name, na - 1, 0, abid)[1] == hi
