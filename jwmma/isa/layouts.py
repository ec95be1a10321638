"""Register layouts: which matrix element each (lane, vector element) holds.

Built once with numpy from the formulas of BUILTINS.md sections 2.2 (RDNA4) and 4.2
(CDNA4), BUILTINS_MORE.md 1.2 (CDNA3 SMFMAC), 2.2 (RDNA4 dense WMMA) and 5.2 (RDNA3 WMMA).
Every array has shape (lanes, n, 2):
  A: [lane, e] -> (row i, compressed column c)   (c // 2 is the dense group q; k = 4q + pos;
     dense WMMA: (row i, dense k))
  B: [lane, f] -> (dense k, column j)
  C: [lane, t] -> (row i, column j)
A layout covers its matrix exactly once, except RDNA3 WMMA's A and B, which every lane group of
16 lanes holds whole (2 copies in wave32, 4 in wave64): `inverse` then gives the first copy
(lanes 0-15), the one the emulator reads.
"""
from __future__ import annotations

import numpy as np

__all__ = ["rdna4_a", "rdna4_b", "rdna4_c", "rdna4_dense_b", "cdna4_a", "cdna4_b", "cdna4_c", "cdna3_b",
           "cdna4_scaled_a", "cdna4_scaled_b", "scale_lanes", "BLGP_LANES", "blocks_a", "blocks_b", "blocks_c",
           "cbsz_lanes", "rdna3_a", "rdna3_b", "rdna3_c", "f64_a", "f64_b", "f64_c",
           "inverse"]


def _grid(lanes: int, n: int):
    lane, e = np.meshgrid(np.arange(lanes), np.arange(n), indexing="ij")
    return lane, e


def _stack(a, b):
    return np.stack([a, b], axis=-1).astype(np.int32)


# ------------------------------------------------------------------ RDNA4 (gfx12, wave32)
def rdna4_a(n_a: int, elem_bits: int) -> np.ndarray:
    """A (compressed): lane L holds row L % 16. 16-bit types interleave the lane halves:
    c = 8*(e//4) + 4*h + e%4; 8- and 4-bit types are contiguous: c = n_a*h + e."""
    lane, e = _grid(32, n_a)
    h, r = lane // 16, lane % 16
    if elem_bits == 16:
        c = 8 * (e // 4) + 4 * h + e % 4
    else:
        c = n_a * h + e
    return _stack(r, c)


def rdna4_b(n_b: int, elem_bits: int) -> np.ndarray:
    """B (dense): lane L holds column L % 16. 16-bit: k = 16*(f//8) + 8*h + f%8;
    8- and 4-bit: k = n_b*h + f."""
    lane, f = _grid(32, n_b)
    h, r = lane // 16, lane % 16
    if elem_bits == 16:
        k = 16 * (f // 8) + 8 * h + f % 8
    else:
        k = n_b * h + f
    return _stack(k, r)


def rdna4_c() -> np.ndarray:
    """C/D: element t of lane L is (8*(L//16) + t, L % 16)."""
    lane, t = _grid(32, 8)
    return _stack(8 * (lane // 16) + t, lane % 16)


def rdna4_dense_b(n_b: int, elem_bits: int) -> np.ndarray:
    """Dense WMMA B (BUILTINS_MORE.md 2.2): the A formulas with column j = L % 16 for row i,
    16-bit k = 8*(f//4) + 4*h + f%4, 8/4-bit k = n_b*h + f. (Dense WMMA A is `rdna4_a` of
    a 16 x K matrix: SWMMAC's compressed A layout is the dense one of half K, 2.3.)"""
    return rdna4_a(n_b, elem_bits)[..., ::-1].copy()


# ------------------------------------------------------------------ RDNA3 (gfx11, wave32 and wave64)
def rdna3_a(wave: int, k: int) -> np.ndarray:
    """RDNA3 WMMA A (BUILTINS_MORE.md 5.2): element e of lane L is A[L % 16][e] (16-bit: VGPR
    e//2, half e%2; iu8: byte e of the 4 VGPRs; iu4: nibble e). Every lane group of 16 lanes
    holds the whole matrix: wave/16 copies."""
    lane, e = _grid(wave, k)
    return _stack(lane % 16, e)


def rdna3_b(wave: int, k: int) -> np.ndarray:
    """RDNA3 WMMA B: element e of lane L is B[e][L % 16], replicated as A is."""
    return rdna3_a(wave, k)[..., ::-1].copy()


def rdna3_c(wave: int) -> np.ndarray:
    """RDNA3 WMMA 32-bit C/D: element t (VGPR t) of lane L is (g*t + L // 16, L % 16) with
    g = wave/16 lane groups: rows interleave across the lane groups."""
    g = wave // 16
    lane, t = _grid(wave, 16 // g)
    return _stack(g * t + lane // 16, lane % 16)


# ------------------------------------------------------------------ CDNA4 (gfx950, wave64)
def cdna4_a(m: int, n_a: int) -> np.ndarray:
    """A (compressed): contiguous per lane group, c = n_a*g + e, g = L // M, row L % M."""
    lane, e = _grid(64, n_a)
    g, r = lane // m, lane % m
    return _stack(r, n_a * g + e)


def cdna4_b(m: int, n_b: int, kd: int) -> np.ndarray:
    """B (dense), split in two K halves: k = (f // half)*(Kd/2) + half*g + f % half."""
    lane, f = _grid(64, n_b)
    g, r = lane // m, lane % m
    half = n_b // 2
    k = (f // half) * (kd // 2) + half * g + f % half
    return _stack(k, r)


def cdna3_b(m: int, n_b: int) -> np.ndarray:
    """CDNA3 B (dense, BUILTINS_MORE.md 1.2): contiguous per lane group, k = n_b*g + f."""
    lane, f = _grid(64, n_b)
    g, r = lane // m, lane % m
    return _stack(n_b * g + f, r)


def cdna4_scaled_a(m: int, n: int, bits: int) -> np.ndarray:
    """Scaled MFMA A (BUILTINS_DENSE.md 5.2), row i = L % M: 8-bit formats hold 16-element
    chunks, k = 16*(64//M)*(e//16) + 16*g + e%16; 6- and 4-bit formats hold 32 consecutive
    k, k = 32*g + e (g = L // M)."""
    lane, e = _grid(64, n)
    g, r = lane // m, lane % m
    k = 16 * (64 // m) * (e // 16) + 16 * g + e % 16 if bits == 8 else 32 * g + e
    return _stack(r, k)


def cdna4_scaled_b(m: int, n: int, bits: int) -> np.ndarray:
    """Scaled MFMA B: `cdna4_scaled_a`'s formulas with the column j = L % N for the row."""
    return cdna4_scaled_a(m, n, bits)[..., ::-1].copy()


def scale_lanes(m: int, k: int, block: int = 32) -> np.ndarray:
    """(M, K/block) int32: the lane whose scale register holds the E8M0 scale of row i (of A;
    of column j of B, N = M) and K block kb: M*kb + i (BUILTINS_DENSE.md 5.3)."""
    i, kb = np.meshgrid(np.arange(m), np.arange(k // block), indexing="ij")
    return (m * kb + i).astype(np.int32)


#: BLGP (CDNA3 f32 MFMA, BUILTINS_DENSE.md 3.1): the lane B is read from, for blgp 0..7
BLGP_LANES = np.stack([np.arange(64), np.arange(64) % 32, 32 + np.arange(64) % 32, (np.arange(64) + 16) % 64,
                       np.arange(64) % 16, 16 + np.arange(64) % 16, 32 + np.arange(64) % 16,
                       48 + np.arange(64) % 16]).astype(np.int32)
BLGP_LANES.setflags(write=False)


def cdna4_c(m: int) -> np.ndarray:
    """C/D: 16x16: (4*(L//16) + t, L % 16); 32x32: (8*(t//4) + 4*(L//32) + t%4, L % 32)."""
    if m == 16:
        lane, t = _grid(64, 4)
        return _stack(4 * (lane // 16) + t, lane % 16)
    lane, t = _grid(64, 16)
    return _stack(8 * (t // 4) + 4 * (lane // 32) + t % 4, lane % 32)


# ------------------------------------------------------------------ CDNA multi-block MFMA (wave64)
# BUILTINS_DENSE.md 10: blocks = 64 / M independent products; block b of A sits in rows
# bM..bM+M-1 of a (blocks*M, K) matrix, of B in rows bK..bK+K-1 of (blocks*K, N), of C/D in
# rows bM..bM+M-1 of (blocks*M, N).
def blocks_a(m: int, n_a: int) -> np.ndarray:
    """A: lane L holds row L % M of block L // M, all K in its elements: stacked row L, k = e."""
    lane, e = _grid(64, n_a)
    return _stack(lane, e)


def blocks_b(m: int, n_b: int) -> np.ndarray:
    """B: lane L holds column L % N of block L // N, k = e: stacked row K*(L // N) + e."""
    lane, e = _grid(64, n_b)
    return _stack(n_b * (lane // m) + e, lane % m)


def blocks_c(m: int) -> np.ndarray:
    """C/D (calculator): 32x32 (2 blocks): block t // 16, row 8*((t%16)//4) + 4*(L//32) + t%4,
    column L % 32; 16x16 (4 blocks): block t // 4, row 4*(L//16) + t%4, column L % 16; 4x4
    (16 blocks): block L // 4, row t, column L % 4."""
    lane, t = _grid(64, m)  # blocks * M * N / 64 = M registers
    if m == 32:
        row = 32 * (t // 16) + 8 * ((t % 16) // 4) + 4 * (lane // 32) + t % 4
    elif m == 16:
        row = 16 * (t // 4) + 4 * (lane // 16) + t % 4
    else:
        row = 4 * (lane // 4) + t
    return _stack(row, lane % m)


def cbsz_lanes(m: int, cbsz: int, abid: int) -> np.ndarray:
    """CBSZ/ABID (calculator ``_get_cbsz_abid_transformed_block``): block b computes with the A
    of block (b // 2**cbsz) * 2**cbsz + abid, so A lane L is read from lane
    M * (2**cbsz * ((L // M) // 2**cbsz) + abid) + L % M (64 lanes, blocks * M = 64)."""
    lane = np.arange(64)
    g = 1 << cbsz
    return (m * (g * ((lane // m) // g) + abid) + lane % m).astype(np.int32)


# ------------------------------------------------------------------ CDNA f64 MFMA (wave64)
# BUILTINS_DENSE.md 11: one double (a VGPR pair) per element. 16x16x4 is single-block; 4x4x4 has
# 4 blocks, stacked along the rows as above, whose lanes interleave differently from the other
# multi-block forms (lane = 4*block + 16*k + i for A, 16*i + 4*block + j for C/D).
def f64_a(m: int) -> np.ndarray:
    """A (one double a lane): 16x16x4 row L % 16, k = L // 16; 4x4x4 block (L // 4) % 4, row
    L % 4, k = L // 16, i.e. stacked row 4*block + i = L % 16: the same formula."""
    lane, _ = _grid(64, 1)
    return _stack(lane % 16, lane // 16)


def f64_b(m: int) -> np.ndarray:
    """B: 16x16x4 k = L // 16, column L % 16; 4x4x4 block (L // 4) % 4, k = L // 16, column
    L % 4: stacked row 4*block + k."""
    lane, _ = _grid(64, 1)
    if m == 16:
        return _stack(lane // 16, lane % 16)
    return _stack(4 * ((lane // 4) % 4) + lane // 16, lane % 4)


def f64_c(m: int) -> np.ndarray:
    """C/D: 16x16x4 element t (VGPR pair 2t+1:2t) of lane L is (4*t + L // 16, L % 16), so lane
    group g holds rows g, g+4, g+8, g+12 (not the f32 layout's 4g..4g+3); 4x4x4 (one double a
    lane) block (L // 4) % 4, row L // 16, column L % 4: stacked row 4*block + L // 16."""
    if m == 16:
        lane, t = _grid(64, 4)
        return _stack(4 * t + lane // 16, lane % 16)
    lane, _ = _grid(64, 1)
    return _stack(4 * ((lane // 4) % 4) + lane // 16, lane % 4)


def inverse(layout: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Flat (lane * n + e) position of every matrix element, shape ``shape``: for a
    replicated layout (lanes * n = copies * size, RDNA3 WMMA A/B) the lowest, i.e. the copy
    in the first lanes.

    Raises if the layout does not cover the matrix exactly once, or exactly ``copies`` times
    (a table error)."""
    lanes, n, _ = layout.shape
    size = shape[0] * shape[1]
    copies, rest = divmod(lanes * n, size)
    rows, cols = layout[..., 0], layout[..., 1]
    if (rows < 0).any() or (rows >= shape[0]).any() or (cols < 0).any() or (cols >= shape[1]).any():
        raise AssertionError("layout out of range")
    cell = (rows.astype(np.int64) * shape[1] + cols).reshape(-1)
    if rest or copies < 1 or (np.bincount(cell, minlength=size) != copies).any():
        raise AssertionError("layout does not cover the matrix exactly once (or once per copy)")
    inv = np.full(size, lanes * n, np.int64)
    np.minimum.at(inv, cell, np.arange(lanes * n))
    return inv.reshape(shape).astype(np.int32)
