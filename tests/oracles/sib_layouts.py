"""Register layouts and index fields of the sibling builtins, as BUILTINS_MORE.md states them.

Transcribes, formula string by formula string:
* BUILTINS.md 1 (packing): element e of w bits at vgpr = (e*w)//32, lo = (e*w)%32, hi = lo+w-1;
* BUILTINS_MORE.md 1.2 (CDNA3 SMFMAC A/B/C/D, forward and inverse), 1.3 (index sets, CBSZ/ABID
  ranges, nibble/field bit positions, idx packing);
* BUILTINS_MORE.md 2.2 (RDNA4 dense WMMA A/B/C/D, forward and inverse).

Forward functions map (lane, element) -> matrix coordinate; `*_inverse` map a coordinate back
to (lane, element) with the spec's inverse formulas. Where the spec gives no inverse (the
compressed-column inverse of SMFMAC A) the function says it is derived. Plain Python; never
imports jwmma."""
from __future__ import annotations

from .sib_table import ROWS, Row


def _row(name_or_row) -> Row:
    return name_or_row if isinstance(name_or_row, Row) else ROWS[name_or_row]


def element_bits(w: int, e: int):
    """BUILTINS.md 1: (vgpr, lo, hi) of element e of w-bit elements."""
    return (e * w) // 32, (e * w) % 32, (e * w) % 32 + w - 1


# ============================================================== CDNA3 SMFMAC (section 1.2)
def _sm(r: Row, lane: int):
    M = r.m
    return 64 // M, lane // M, lane % M  # G, g, r


def sm_counts(name):
    """(G, nA, nB) from 1.2: G = 64//M, nA = 64//w, nB = 128//w."""
    r = _row(name)
    w = r.elem_bits
    return 64 // r.m, 64 // w, 128 // w


def sm_a(name, lane: int, e: int):
    """A (compressed): (row i, compressed column c) of stored element e of lane L:
    i = r, c = nA*g + e."""
    r = _row(name)
    _, g, rr = _sm(r, lane)
    _, na, _ = sm_counts(r)
    return rr, na * g + e


def sm_a_container(name, lane: int, t: int):
    """Container t (elements 2t, 2t+1): (cvgpr, clo, chi, dense group q) with
    cvgpr = (t*2*w)//32, clo = (t*2*w)%32, chi = clo + 2*w - 1, q = (nA//2)*g + t."""
    r = _row(name)
    w = r.elem_bits
    _, g, _ = _sm(r, lane)
    _, na, _ = sm_counts(r)
    clo = (t * 2 * w) % 32
    return (t * 2 * w) // 32, clo, clo + 2 * w - 1, (na // 2) * g + t


def sm_a_dense_inverse(name, i: int, k: int):
    """Dense A[i][k] -> (lane L, container t): q = k//4, L = M*(q//(nA//2)) + i, t = q%(nA//2)."""
    r = _row(name)
    _, na, _ = sm_counts(r)
    q = k // 4
    return r.m * (q // (na // 2)) + i, q % (na // 2)


def sm_a_inverse(name, i: int, c: int):
    """Compressed A[i][c] -> (lane, e). Derived (the spec states only the dense inverse):
    L = M*(c//nA) + i, e = c % nA."""
    r = _row(name)
    _, na, _ = sm_counts(r)
    return r.m * (c // na) + i, c % na


def sm_b(name, lane: int, f: int):
    """B (dense): (k, column j): j = r, k = nB*g + f."""
    r = _row(name)
    _, g, rr = _sm(r, lane)
    _, _, nb = sm_counts(r)
    return nb * g + f, rr


def sm_b_inverse(name, k: int, j: int):
    """B[k][j] -> (lane, f): L = M*(k//nB) + j, f = k%nB."""
    r = _row(name)
    _, _, nb = sm_counts(r)
    return r.m * (k // nb) + j, k % nb


def sm_d(name, lane: int, t: int):
    """C/D: (i, j) of element t (VGPR t), j = r; 16x16: i = 4*g + t;
    32x32: i = 8*(t//4) + 4*g + t%4."""
    r = _row(name)
    _, g, rr = _sm(r, lane)
    if r.m == 16:
        return 4 * g + t, rr
    return 8 * (t // 4) + 4 * g + t % 4, rr


def sm_d_inverse(name, i: int, j: int):
    """16x16: L = 16*(i//4) + j, t = i%4; 32x32: L = 32*((i//4)%2) + j, t = 4*(i//8) + i%4."""
    r = _row(name)
    if r.m == 16:
        return 16 * (i // 4) + j, i % 4
    return 32 * ((i // 4) % 2) + j, 4 * (i // 8) + i % 4


# ----------------------------------------------------------------- index (section 1.3)
def index_sets(name) -> int:
    """Number of index sets: 32 // (2*nA) (16-bit types: 4 sets of 8 bits; 8-bit: 2 of 16)."""
    _, na, _ = sm_counts(name)
    return 32 // (2 * na)


def check_cbsz_abid(name, cbsz, abid):
    """CALC accepts CBSZ 0..3 and ABID 0..sets-1 (ABID ignored for CBSZ 1..3 but still range
    checked); everything else is undefined and refused (ValueError), never masked."""
    sets = index_sets(name)
    if isinstance(cbsz, bool) or not isinstance(cbsz, int) or not 0 <= cbsz <= 3:
        raise ValueError(f"cbsz must be an int in 0..3 for {name}, got {cbsz!r}")
    if isinstance(abid, bool) or not isinstance(abid, int) or not 0 <= abid < sets:
        raise ValueError(f"abid must be an int in 0..{sets - 1} for {name}, got {abid!r}")


def index_offset(name, cbsz: int = 0, abid: int = 0) -> int:
    """s = 2*nA*ABID if CBSZ == 0 else 0 (after the range check)."""
    check_cbsz_abid(name, cbsz, abid)
    _, na, _ = sm_counts(name)
    return 2 * na * abid if cbsz == 0 else 0


def index_field(name, e: int, cbsz: int = 0, abid: int = 0):
    """Bits [b+1:b] of stored element e: b = s + 2*e."""
    b = index_offset(name, cbsz, abid) + 2 * e
    return b, b + 1


def index_nibble(name, t: int, cbsz: int = 0, abid: int = 0):
    """Nibble of container t: klo = s + 4*t, khi = klo + 3."""
    klo = index_offset(name, cbsz, abid) + 4 * t
    return klo, klo + 3


def pack_index(name, pos, cbsz: int = 0, abid: int = 0) -> list:
    """idx_L = sum(pos[r][nA*g + e] << (s + 2*e) for e in range(nA)) for every lane (unsigned
    32-bit ints). pos: M x Kc nested lists of 0..3."""
    r = _row(name)
    s = index_offset(r, cbsz, abid)
    _, na, _ = sm_counts(r)
    out = []
    for lane in range(64):
        g, rr = lane // r.m, lane % r.m
        out.append(sum((pos[rr][na * g + e] & 3) << (s + 2 * e) for e in range(na)))
    return out


# =========================================================== RDNA4 dense WMMA (section 2.2)
def _wm_ab(r: Row, e: int, h: int):
    if r.elem_bits == 16:
        return 8 * (e // 4) + 4 * h + e % 4
    return r.na * h + e


def wm_a(name, lane: int, e: int):
    """A: (row i, k): i = r; 16-bit k = 8*(e//4) + 4*h + e%4; 8/4-bit k = nA*h + e."""
    r = _row(name)
    return lane % 16, _wm_ab(r, e, lane // 16)


def wm_b(name, lane: int, f: int):
    """B: (k, column j): the A formulas with f for e and j for i."""
    r = _row(name)
    return _wm_ab(r, f, lane // 16), lane % 16


def _wm_ab_inverse(r: Row, idx: int, k: int):
    if r.elem_bits == 16:
        return 16 * ((k // 4) % 2) + idx, 4 * (k // 8) + k % 4
    return 16 * (k // r.na) + idx, k % r.na


def wm_a_inverse(name, i: int, k: int):
    """16-bit: L = 16*((k//4)%2) + i, e = 4*(k//8) + k%4; 8/4-bit: L = 16*(k//nA) + i, e = k%nA."""
    return _wm_ab_inverse(_row(name), i, k)


def wm_b_inverse(name, k: int, j: int):
    return _wm_ab_inverse(_row(name), j, k)


def wm_d(name, lane: int, t: int):
    """C/D: i = 8*h + t, j = r."""
    return 8 * (lane // 16) + t, lane % 16


def wm_d_inverse(name, i: int, j: int):
    """L = 16*(i//8) + j, t = i%8."""
    return 16 * (i // 8) + j, i % 8


def wm_d_bits(name, t: int):
    """(dvgpr, dlo, dhi) of accumulator element t, wo = 32 or 16 (packed f16/bf16)."""
    wo = _row(name).c_bits
    return (t * wo) // 32, (t * wo) % 32, (t * wo) % 32 + wo - 1


# ====================================================================== family dispatch
def coord(name, which: str, lane: int, x: int):
    """'a' -> (i, c) compressed (SMFMAC) or (i, k) (WMMA); 'b' -> (k, j); 'c'/'d' -> (i, j)."""
    r = _row(name)
    if r.sparse:
        f = {"a": sm_a, "b": sm_b, "c": sm_d, "d": sm_d}[which]
    else:
        f = {"a": wm_a, "b": wm_b, "c": wm_d, "d": wm_d}[which]
    return f(r, lane, x)


def inverse(name, which: str, u: int, v: int):
    r = _row(name)
    if r.sparse:
        f = {"a": sm_a_inverse, "b": sm_b_inverse, "c": sm_d_inverse, "d": sm_d_inverse}[which]
    else:
        f = {"a": wm_a_inverse, "b": wm_b_inverse, "c": wm_d_inverse, "d": wm_d_inverse}[which]
    return f(r, u, v)


def shape(name, which: str):
    r = _row(name)
    return {"a": (r.m, r.kc if r.sparse else r.k), "b": (r.k, r.n), "c": (r.m, r.n), "d": (r.m, r.n)}[which]


def elems(name, which: str) -> int:
    r = _row(name)
    return {"a": r.na, "b": r.nb, "c": r.nc, "d": r.nc}[which]


def elem_width(name, which: str) -> int:
    r = _row(name)
    return r.c_bits if which in ("c", "d") else r.elem_bits
