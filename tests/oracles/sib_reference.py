"""Slow scalar reference of the 25 sibling builtins under the `exact` model (no jwmma).

Sources: BUILTINS.md 1 (little-endian packing, generic sparse semantics: k = 4*q + p, the
products a * Bdense[k][j], duplicate positions add), BUILTINS_MORE.md 1.1-1.3 (CDNA3 SMFMAC:
operands, FNUZ on gfx942 / OCP on gfx950, i8 signed x signed wrapping mod 2**32, CBSZ/ABID),
2.1-2.2 (RDNA4 dense WMMA: a_sign/b_sign = signed when true, clamp = i32 saturation,
D = C + sum_k A[i][k]*B[k][j], packed f16/bf16 accumulators), NUMERICS.md 0 (`exact`) and 4
(integers exact; wrap without clamp). Integer clamp staging: 'khalf' = saturate after C + the
products of documented k < K/2, then again after the rest (CLAMP_EVIDENCE.md: what gfx1201
does); 'final' = one saturation of the exact total.

Registers follow API.md 1: arrays (lanes, n) of the HIP vector's entries (16-bit elements one
per entry; 8/4-bit elements packed little-endian into 32-bit words); any dtype of the right
item size is accepted and read as bits."""
from __future__ import annotations

import numpy as np

from . import sib_formats as F
from . import sib_layouts as L
from .formats import I32_MAX, I32_MIN, sat32, wrap32  # noqa: F401  (the oracles' integer rules)
from .formats import int_decode as int_value
from .sib_table import ROWS, Row, vec_elem_bits, vec_len


def _row(name) -> Row:
    return name if isinstance(name, Row) else ROWS[name]


# =================================================================== registers <-> codes
_VEC = {"a": "a_vec", "b": "b_vec", "c": "d_vec", "d": "d_vec"}


def reg_dtype(name, which: str) -> np.dtype:
    """API.md 1 element dtypes: f16 -> float16, bf16 (`short`) -> int16, 8/4-bit -> int32
    words, accumulators float32 / int32 / float16 / int16 (bf16)."""
    r = _row(name)
    t = r.c_type if which in ("c", "d") else (r.a_type if which == "a" else r.b_type)
    if vec_elem_bits(getattr(r, _VEC[which])) == 32:
        return np.dtype(np.float32 if t == "f32" else np.int32)
    return np.dtype(np.float16 if t == "f16" else np.int16)


def regs_to_codes(name, which: str, regs) -> list:
    """(lanes, n) registers -> (lanes, elements) unsigned element codes (nested lists)."""
    r = _row(name)
    vec = getattr(r, _VEC[which])
    n, ew = vec_len(vec), vec_elem_bits(vec)
    regs = np.asarray(regs)
    if regs.shape != (r.wave, n) or regs.dtype.itemsize * 8 != ew:
        raise ValueError(f"{which}: expected ({r.wave}, {n}) of {ew}-bit entries, got "
                         f"{regs.shape} {regs.dtype}")
    words = regs.view(np.uint16 if ew == 16 else np.uint32)
    w = L.elem_width(r, which)
    out = []
    for lane in range(r.wave):
        if ew == w:
            out.append([int(x) for x in words[lane]])
            continue
        row = []
        for e in range(L.elems(r, which)):
            v, lo, _ = L.element_bits(w, e)
            row.append((int(words[lane, v]) >> lo) & ((1 << w) - 1))
        out.append(row)
    return out


def codes_to_regs(name, which: str, codes) -> np.ndarray:
    """Inverse of regs_to_codes; returns the API dtype."""
    r = _row(name)
    vec = getattr(r, _VEC[which])
    n, ew = vec_len(vec), vec_elem_bits(vec)
    w = L.elem_width(r, which)
    out = np.zeros((r.wave, n), np.uint64)
    for lane in range(r.wave):
        for e in range(L.elems(r, which)):
            code = int(codes[lane][e]) & ((1 << w) - 1)
            if ew == w:
                out[lane, e] = code
            else:
                v, lo, _ = L.element_bits(w, e)
                out[lane, v] = int(out[lane, v]) | (code << lo)
    return out.astype(np.uint16 if ew == 16 else np.uint32).view(reg_dtype(r, which))


def codes_to_matrix(name, which: str, codes) -> list:
    """Lane codes -> matrix (nested lists) through the forward layout; asserts every matrix
    element is covered exactly once."""
    rows, cols = L.shape(name, which)
    mat = [[None] * cols for _ in range(rows)]
    r = _row(name)
    for lane in range(r.wave):
        for x in range(L.elems(r, which)):
            u, v = L.coord(r, which, lane, x)
            assert mat[u][v] is None, f"{which}: ({u},{v}) covered twice"
            mat[u][v] = codes[lane][x]
    assert all(v is not None for row in mat for v in row), f"{which}: element not covered"
    return mat


def matrix_to_codes(name, which: str, mat) -> list:
    """Matrix -> lane codes through the spec's inverse formulas."""
    r = _row(name)
    out = [[None] * L.elems(r, which) for _ in range(r.wave)]
    rows, cols = L.shape(name, which)
    for u in range(rows):
        for v in range(cols):
            lane, x = L.inverse(r, which, u, v)
            out[lane][x] = mat[u][v]
    return out


def pack(name, which, mat) -> np.ndarray:
    return codes_to_regs(name, which, matrix_to_codes(name, which, mat))


def unpack(name, which, regs) -> list:
    return codes_to_matrix(name, which, regs_to_codes(name, which, regs))


# =========================================================================== arithmetic
def _target_formats(r: Row, target: str):
    if target not in r.targets:
        raise ValueError(f"target must be one of {r.targets} for {r.name}, got {target!r}")
    tgt = "gfx12" if r.family == "wmma_gfx12" else target
    return (F.element_format(r.a_type, tgt), F.element_format(r.b_type, tgt),
            F.element_format(r.c_type, tgt))


def _float_out(fa, fb, fc, terms, c_code) -> int:
    return F.exact_dot(fa, fb, fc, terms, c_code)


# =============================================================== CDNA3 SMFMAC (section 1)
def smfmac_terms(name, a, b, idx, cbsz=0, abid=0, lane_local=False):
    """terms[i][j] = [(a code, b code), ...] of output (i, j) under the generic semantics
    (BUILTINS.md 1): stored element e of lane L with field p meets Bdense[4*q + p][j].
    lane_local=True reads B_{M*g+j}[4*(e//2) + p] instead (the 1.2 pairing statement)."""
    r = _row(name)
    s = L.index_offset(r, cbsz, abid)
    a_l = regs_to_codes(r, "a", a)
    b_l = regs_to_codes(r, "b", b)
    b_mat = codes_to_matrix(r, "b", b_l)
    words = np.asarray(idx).astype(np.int64) & 0xFFFFFFFF
    terms = [[[] for _ in range(r.n)] for _ in range(r.m)]
    for lane in range(64):
        g = lane // r.m
        for e in range(r.na):
            i, col = L.sm_a(r, lane, e)
            q = col // 2
            p = (int(words[lane]) >> (s + 2 * e)) & 3
            for j in range(r.n):
                bc = b_l[r.m * g + j][4 * (e // 2) + p] if lane_local else b_mat[4 * q + p][j]
                terms[i][j].append((a_l[lane][e], bc))
    return terms


def smfmac(name, a, b, c, idx, cbsz=0, abid=0, *, target="gfx942"):
    """D registers (64, nC) of one wave, `exact` model (floats) / exact wrapping i32 (i8)."""
    r = _row(name)
    if not r.sparse:
        raise ValueError(f"{name} is not an SMFMAC builtin")
    terms = smfmac_terms(r, a, b, idx, cbsz, abid)
    c_mat = unpack(r, "c", c)
    d = [[None] * r.n for _ in range(r.m)]
    if r.integer:
        if target not in r.targets:
            raise ValueError(f"target must be one of {r.targets}, got {target!r}")
        for i in range(r.m):
            for j in range(r.n):
                tot = int_value(c_mat[i][j], 32, True) + sum(
                    int_value(x, 8, True) * int_value(y, 8, True) for x, y in terms[i][j])
                d[i][j] = wrap32(tot) & 0xFFFFFFFF
    else:
        fa, fb, fc = _target_formats(r, target)
        for i in range(r.m):
            for j in range(r.n):
                d[i][j] = _float_out(fa, fb, fc, terms[i][j], c_mat[i][j])
    return pack(r, "d", d)


# ============================================================= RDNA4 dense WMMA (section 2)
def wmma(name, a, b, c):
    """Float dense WMMA, `exact` (packed f16/bf16 accumulators: one RNE to f16/bf16)."""
    r = _row(name)
    if r.sparse or r.integer:
        raise ValueError(f"{name} is not a float dense WMMA builtin")
    fa, fb, fc = _target_formats(r, "gfx12")
    am, bm, cm = unpack(r, "a", a), unpack(r, "b", b), unpack(r, "c", c)
    d = [[_float_out(fa, fb, fc, [(am[i][k], bm[k][j]) for k in range(r.k)], cm[i][j])
          for j in range(r.n)] for i in range(r.m)]
    return pack(r, "d", d)


def int_dot(a_vals, b_vals, c: int, clamp: bool, staging: str = "khalf") -> int:
    """Exact integer dot over documented K (lists in K order) onto the i32 value c.
    No clamp: wrap mod 2**32. Clamp 'final': one saturation; 'khalf': saturate after
    c + the first K/2 products, then after adding the rest."""
    prods = [x * y for x, y in zip(a_vals, b_vals)]
    if not clamp:
        return wrap32(c + sum(prods))
    if staging == "final":
        return sat32(c + sum(prods))
    if staging == "khalf":
        h = len(prods) // 2
        return sat32(sat32(c + sum(prods[:h])) + sum(prods[h:]))
    raise ValueError(f"staging must be 'khalf' or 'final', got {staging!r}")


def wmma_int(name, a_sign, a, b_sign, b, c, clamp, *, staging="khalf"):
    """Integer dense WMMA in HIP argument order (a_sign, A, b_sign, B, C, clamp)."""
    r = _row(name)
    if r.sparse or not r.integer:
        raise ValueError(f"{name} is not an integer dense WMMA builtin")
    w = r.elem_bits
    am, bm, cm = unpack(r, "a", a), unpack(r, "b", b), unpack(r, "c", c)
    d = [[None] * r.n for _ in range(r.m)]
    for i in range(r.m):
        for j in range(r.n):
            av = [int_value(am[i][k], w, bool(a_sign)) for k in range(r.k)]
            bv = [int_value(bm[k][j], w, bool(b_sign)) for k in range(r.k)]
            d[i][j] = int_dot(av, bv, int_value(cm[i][j], 32, True), bool(clamp), staging) & 0xFFFFFFFF
    return pack(r, "d", d)


# ================================================================================ helpers
def out_format(name):
    r = _row(name)
    return None if r.integer else F.element_format(r.c_type, "gfx12")


def same_bits(name, got, want) -> list:
    """Positions (lane, t) where D registers differ; NaN compares by NaN-ness only."""
    f = out_format(name)
    g = regs_to_codes(name, "d", got)
    w = regs_to_codes(name, "d", want)
    bad = []
    for lane in range(len(g)):
        for t in range(len(g[lane])):
            x, y = g[lane][t], w[lane][t]
            if f is not None and F.is_nan(f, x) and F.is_nan(f, y):
                continue
            if x != y:
                bad.append((lane, t, x, y))
    return bad
