"""Layout transcriptions (BUILTINS_MORE.md 1.2, 1.3, 2.2, 2.3, 3) against each other: forward vs
inverse formulas, every matrix element covered exactly once, and the facts the spec states."""
import itertools

import pytest

from oracles import sib_layouts as L
from oracles.sib_table import NAMES, ROWS, SMFMAC, WMMA


def _cover(name, which):
    rows, cols = L.shape(name, which)
    seen = {}
    r = ROWS[name]
    for lane in range(r.wave):
        for x in range(L.elems(name, which)):
            u, v = L.coord(name, which, lane, x)
            assert 0 <= u < rows and 0 <= v < cols, (which, lane, x, u, v)
            assert (u, v) not in seen, (which, (lane, x), seen.get((u, v)))
            seen[(u, v)] = (lane, x)
    assert len(seen) == rows * cols
    return seen


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("which", ["a", "b", "c"])
def test_forward_covers_once_and_inverse_inverts(name, which):
    seen = _cover(name, which)
    for (u, v), lx in seen.items():
        assert L.inverse(name, which, u, v) == lx


@pytest.mark.parametrize("name", NAMES)
def test_c_layout_is_d_layout(name):
    """1.1: C layout = D layout (the instruction is D += A*B); 2.2: C has the D layout."""
    r = ROWS[name]
    for lane in range(r.wave):
        for t in range(r.nc):
            assert L.coord(name, "c", lane, t) == L.coord(name, "d", lane, t)


@pytest.mark.parametrize("w", [4, 8, 16, 32])
def test_element_packing(w):
    """BUILTINS.md 1: element e at vgpr (e*w)//32, bits [lo+w-1:lo]; fields tile each VGPR."""
    per = 32 // w
    for e in range(4 * per):
        v, lo, hi = L.element_bits(w, e)
        assert (v, lo, hi) == (e // per, (e % per) * w, (e % per) * w + w - 1)


# ------------------------------------------------------------------------- SMFMAC 1.2
@pytest.mark.parametrize("name", SMFMAC)
def test_smfmac_a_containers_and_dense_inverse(name):
    r = ROWS[name]
    G, na, nb = L.sm_counts(name)
    w = r.elem_bits
    dense = {}
    for lane in range(64):
        g = lane // r.m
        ks = set()
        for t in range(na // 2):
            cv, clo, chi, q = L.sm_a_container(name, lane, t)
            # the container holds elements 2t (low half) and 2t+1 (high half)
            assert L.element_bits(w, 2 * t) == (cv, clo, clo + w - 1)
            assert L.element_bits(w, 2 * t + 1) == (cv, clo + w, chi)
            if w == 16:
                assert (cv, clo, chi) == (t, 0, 31)  # "16-bit: the whole VGPR t"
            else:
                assert (cv, clo, chi) == (t // 2, 16 * (t % 2), 16 * (t % 2) + 15)  # "half t%2 of VGPR t//2"
            for x in (2 * t, 2 * t + 1):
                i, c = L.sm_a(name, lane, x)
                assert c // 2 == q  # "(also q = c//2)"
            for p in range(4):
                k = 4 * q + p
                ks.add(k)
                dense.setdefault((lane % r.m, k), []).append((lane, t))
                assert L.sm_a_dense_inverse(name, lane % r.m, k) == (lane, t)
        # "lane group g covers dense k 2*nA*g .. 2*nA*g + 2*nA - 1"
        assert ks == set(range(2 * na * g, 2 * na * g + 2 * na))
    assert len(dense) == r.m * r.k and all(len(v) == 1 for v in dense.values())


@pytest.mark.parametrize("name", SMFMAC)
def test_smfmac_pairing_is_lane_local(name):
    """1.2: container t of lane L meets B elements 4t..4t+3 of lane M*g + j."""
    r = ROWS[name]
    _, na, _ = L.sm_counts(name)
    for lane in range(64):
        g = lane // r.m
        for t in range(na // 2):
            q = L.sm_a_container(name, lane, t)[3]
            for j in range(r.n):
                assert [L.sm_b(name, r.m * g + j, 4 * t + u) for u in range(4)] == [(4 * q + u, j) for u in range(4)]


def test_smfmac_d_written_out():
    for name in SMFMAC:
        r = ROWS[name]
        for lane in range(64):
            for t in range(r.nc):
                i, j = L.sm_d(name, lane, t)
                assert j == lane % r.m
                if r.m == 16:
                    assert i == 4 * (lane // 16) + t
                else:
                    assert i == 8 * (t // 4) + 4 * (lane // 32) + t % 4


def test_cdna3_b_differs_from_cdna4_split_b():
    """1.4: CDNA3 B is contiguous (k = nB*g + f); CDNA4 splits halves (BUILTINS.md 4.2:
    (f//half)*(Kd/2) + half*g + f%half). Same for g = 0 only in the first half of the lane."""
    name = "smfmac_f32_16x16x32_f16"
    r = ROWS[name]
    _, _, nb = L.sm_counts(name)
    half = nb // 2
    diff = 0
    for lane in range(64):
        g = lane // 16
        for f in range(nb):
            cdna4 = (f // half) * (r.k // 2) + half * g + f % half
            diff += L.sm_b(name, lane, f)[0] != cdna4
    assert diff > 0


# ------------------------------------------------------------------------- index 1.3
ACCEPTED = [(cbsz, abid) for cbsz in range(4) for abid in range(4)]


@pytest.mark.parametrize("name", SMFMAC)
def test_index_sets_and_ranges(name):
    r = ROWS[name]
    _, na, _ = L.sm_counts(name)
    sets = L.index_sets(name)
    assert sets == (4 if r.elem_bits == 16 else 2) == r.abid_max + 1
    ok = [(c, a) for c, a in ACCEPTED if a < sets]
    assert len(ok) == (16 if r.elem_bits == 16 else 8)  # "all 16 or 8 accepted CBSZ/ABID pairs"
    for cbsz, abid in ok:
        s = L.index_offset(name, cbsz, abid)
        assert s == (2 * na * abid if cbsz == 0 else 0)
        # BUILTINS.md section 3 taken as written (masks), equal on the accepted pairs
        sec3 = (8 * (abid & 3) if (cbsz & 3) == 0 else 0) if r.elem_bits == 16 else (16 * (abid & 1) if (cbsz & 3) == 0 else 0)
        assert s == sec3
        fields = [L.index_field(name, e, cbsz, abid) for e in range(na)]
        assert fields == [(s + 2 * e, s + 2 * e + 1) for e in range(na)]
        for t in range(na // 2):
            klo, khi = L.index_nibble(name, t, cbsz, abid)
            # nibble t: low 2 bits = element 2t, high 2 bits = element 2t+1
            assert (klo, klo + 1) == fields[2 * t] and (klo + 2, khi) == fields[2 * t + 1]
        assert s + 2 * na <= 32
    # the CBSZ = 0 sets tile the 32-bit word without overlap
    bits = sorted(b for a in range(sets) for e in range(na) for b in L.index_field(name, e, 0, a))
    assert bits == list(range(32))


@pytest.mark.parametrize("name", SMFMAC)
@pytest.mark.parametrize("cbsz,abid", [(4, 0), (7, 0), (-1, 0), (0, -1), (0, 4), (1, 4), (3, 9), (True, 0), (0, 1.0)])
def test_index_rejects_what_calc_rejects(name, cbsz, abid):
    sets = L.index_sets(name)
    if isinstance(abid, int) and not isinstance(abid, bool) and 0 <= abid < sets and cbsz in (0, 1, 2, 3) and not isinstance(cbsz, bool):
        pytest.skip("accepted pair")
    with pytest.raises(ValueError, match="cbsz|abid"):
        L.index_offset(name, cbsz, abid)
    if sets == 2:
        with pytest.raises(ValueError, match="abid"):
            L.index_offset(name, 0, 2)  # 8-bit types: ABID 0..1 only


@pytest.mark.parametrize("name", SMFMAC)
def test_pack_index_formula(name):
    r = ROWS[name]
    _, na, _ = L.sm_counts(name)
    pos = [[(3 * i + 5 * c) % 4 for c in range(r.kc)] for i in range(r.m)]
    for cbsz, abid in [(0, a) for a in range(L.index_sets(name))] + [(2, 1)]:
        s = L.index_offset(name, cbsz, abid)
        words = L.pack_index(name, pos, cbsz, abid)
        for lane in range(64):
            for e in range(na):
                i, c = L.sm_a(name, lane, e)
                assert (words[lane] >> (s + 2 * e)) & 3 == pos[i][c]
            assert words[lane] >> (s + 2 * na) == 0 and words[lane] & ((1 << s) - 1) == 0


# --------------------------------------------------------------------------- WMMA 2.2
@pytest.mark.parametrize("name", WMMA)
def test_wmma_written_out(name):
    r = ROWS[name]
    for lane in range(32):
        h = lane // 16
        ka = [L.wm_a(name, lane, e)[1] for e in range(r.na)]
        kb = [L.wm_b(name, lane, f)[0] for f in range(r.nb)]
        assert ka == kb  # "B: the same formulas with f for e and j for i"
        assert all(L.wm_a(name, lane, e)[0] == lane % 16 == L.wm_b(name, lane, e)[1] for e in range(r.na))
        if r.elem_bits == 16:
            # "Half 0 holds k 0-3 (VGPR 0-1) and 8-11 (VGPR 2-3); half 1 holds 4-7, 12-15"
            assert ka == ([0, 1, 2, 3, 8, 9, 10, 11] if h == 0 else [4, 5, 6, 7, 12, 13, 14, 15])
        else:
            assert ka == list(range(r.na * h, r.na * h + r.na))
            vgprs = {L.element_bits(r.elem_bits, e)[0] for e in range(r.na)}
            assert len(vgprs) == {8: 2, 4: 1 if r.k == 16 else 2}[r.elem_bits]
        for t in range(8):
            assert L.wm_d(name, lane, t) == (8 * h + t, lane % 16)
            v, lo, hi = L.wm_d_bits(name, t)
            if r.c_bits == 16:  # packed: VGPR v holds rows 8h+2v (low) and 8h+2v+1 (high)
                assert (v, lo, hi) == (t // 2, 16 * (t % 2), 16 * (t % 2) + 15)
            else:
                assert (v, lo, hi) == (t, 0, 31)


# SWMMAC A/B formulas of BUILTINS.md 2.2, transcribed here for the 2.3 comparison
SWMMAC_PAIRS = {  # SWMMAC builtin -> (A bits, SWMMAC nA, dense twin)
    "swmmac_f32_16x16x32_f16_w32": (16, 8, "wmma_f32_16x16x16_f16_w32_gfx12"),
    "swmmac_f32_16x16x32_bf16_w32": (16, 8, "wmma_f32_16x16x16_bf16_w32_gfx12"),
    "swmmac_f16_16x16x32_f16_w32": (16, 8, "wmma_f16_16x16x16_f16_w32_gfx12"),
    "swmmac_bf16_16x16x32_bf16_w32": (16, 8, "wmma_bf16_16x16x16_bf16_w32_gfx12"),
    "swmmac_i32_16x16x32_iu8_w32": (8, 8, "wmma_i32_16x16x16_iu8_w32_gfx12"),
    "swmmac_i32_16x16x32_iu4_w32": (4, 8, "wmma_i32_16x16x16_iu4_w32_gfx12"),
    "swmmac_i32_16x16x64_iu4_w32": (4, 16, "wmma_i32_16x16x32_iu4_w32_gfx12"),
    **{f"swmmac_f32_16x16x32_{a}_{b}_w32": (8, 8, f"wmma_f32_16x16x16_{a}_{b}_w32_gfx12")
       for a in ("fp8", "bf8") for b in ("fp8", "bf8")},
}


def _swmmac_a_col(bits, na, lane, e):
    h = lane // 16
    return 8 * (e // 4) + 4 * h + e % 4 if bits == 16 else na * h + e


def test_swmmac_compressed_a_is_dense_wmma_a():
    """2.3: the SWMMAC compressed A layout is exactly the dense WMMA A layout of a 16 x Kc
    matrix, for all 11 pairs (3072 stored-value slots)."""
    slots = 0
    for sw, (bits, na, dense) in SWMMAC_PAIRS.items():
        r = ROWS[dense]
        assert r.na == na and r.elem_bits == bits and r.k == {8: 16, 16: 32}[na]
        for lane in range(32):
            for e in range(na):
                assert L.wm_a(dense, lane, e) == (lane % 16, _swmmac_a_col(bits, na, lane, e))
                slots += 1
    assert len(SWMMAC_PAIRS) == 11 and slots == 3072


def test_swmmac_16bit_b_differs_from_dense_b():
    """2.3: SWMMAC 16-bit B is k = 16*(f//8) + 8*h + f%8 (16 elements), dense 8*(f//4)+4*h+f%4."""
    name = "wmma_f32_16x16x16_f16_w32_gfx12"
    differ = 0
    for lane in range(32):
        h = lane // 16
        for f in range(8):
            differ += L.wm_b(name, lane, f)[0] != 16 * (f // 8) + 8 * h + f % 8
    assert differ == 32 * 4  # in every lane 4 of the 8 dense elements sit elsewhere in SWMMAC
