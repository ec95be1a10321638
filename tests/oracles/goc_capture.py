"""GoC's gfx1201 integer WMMA/SWMMAC capture corpus, reproduced in plain Python (no jwmma).

Transcribes bjacob/goc (MIT): tests/rdna4_integer_wmma_capture.h
(`integer_wmma_capture_inputs`: xorshift32 from 0xa3987412 + sample; registers 0..5 operand
words, 6..13 near-limit accumulators from {0, 0x7fffffff, 0x80000000, 0xffffffff, 0x7fffff80,
0x80000080}, 14 sparse metadata of nibbles from {4, 8, 12, 9, 13, 14}) and tests/capture_hash.h
(FNV-1a 64 over D register 0..7, lane 0..31, four little-endian bytes per word).

`dense_d` runs the sibling reference (sib_reference.wmma_int, BUILTINS_MORE.md 2.2 layouts) on
those registers; `swmmac_int_d` is a small register-level SWMMAC integer evaluator written from
BUILTINS.md 2.2 (layouts, index fields, s = 16*index_key, generic semantics) with the clamp
stage rule as a parameter, used only to weigh GoC's SWMMAC digests."""
from __future__ import annotations

import numpy as np

from . import sib_reference as R

FNV_OFFSET = 14695981039346656037
FNV_PRIME = 1099511628211
M32 = 0xFFFFFFFF
DENSE = ("wmma_i32_16x16x16_iu8_w32_gfx12", "wmma_i32_16x16x16_iu4_w32_gfx12", "wmma_i32_16x16x32_iu4_w32_gfx12")


def capture_inputs(sample: int) -> list:
    """data[15][32] exactly as goc_test::integer_wmma_capture_inputs(sample, data)."""
    data = [[0] * 32 for _ in range(15)]
    state = (0xA3987412 + sample) & M32

    def nxt():
        nonlocal state
        state ^= (state << 13) & M32
        state ^= state >> 17
        state ^= (state << 5) & M32
        return state

    for reg in range(6):
        for lane in range(32):
            data[reg][lane] = nxt()
    acc = (0, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x7FFFFF80, 0x80000080)
    for reg in range(6, 14):
        for lane in range(32):
            data[reg][lane] = acc[nxt() % 6]
    pairs = (4, 8, 12, 9, 13, 14)
    for lane in range(32):
        w = 0
        for group in range(8):
            w |= pairs[nxt() % 6] << (4 * group)
        data[14][lane] = w
    return data


def fnv_words(words, h: int = FNV_OFFSET) -> int:
    for word in words:
        for byte in range(4):
            h = ((h ^ ((int(word) >> (8 * byte)) & 255)) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def inputs_digest(data) -> int:
    return fnv_words(w for reg in data for w in reg)


def d_digest(d_regs) -> int:
    """Digest of (32, 8) D registers: register 0..7 outer, lane inner."""
    d = np.asarray(d_regs).view(np.uint32)
    return fnv_words(int(d[lane, reg]) for reg in range(8) for lane in range(32))


def _regs(data, first: int, count: int) -> np.ndarray:
    return np.array([[data[first + v][lane] for v in range(count)] for lane in range(32)], np.uint32).view(np.int32)


def dense_d(data, shape: int, mode: int, staging: str = "khalf") -> np.ndarray:
    """D of GoC's dense shape (0 iu8 K16, 1 iu4 K16, 2 iu4 K32) and mode (bit 0 signed A,
    bit 1 signed B, bit 2 clamp) through the sibling reference."""
    name = DENSE[shape]
    n = 1 if shape == 1 else 2
    a, b, c = _regs(data, 0, n), _regs(data, 2, n), _regs(data, 6, 8)
    return R.wmma_int(name, bool(mode & 1), a, bool(mode & 2), b, c, bool(mode & 4), staging=staging)


# ---------------------------------------------------------------------- SWMMAC (BUILTINS.md 2.2)
SWMMAC = {0: (8, 8, 16, True), 1: (4, 8, 16, True), 2: (4, 16, 32, False)}  # bits, nA, nB, 16-bit sets


def swmmac_int_d(data, op: int, variant: int, stage_of) -> list:
    """D[reg][lane] of GoC SWMMAC op (0 iu8 K32, 1 iu4 K32, 2 iu4 K64), variant (bit 0/1 signs,
    bit 2 clamp, bit 3 index key), clamp stage of compressed column c given by stage_of(c, nA).
    A: c = nA*h + e, i = L%16; B: k = nB*h + f, j = L%16; field of e at bits s + 2e,
    s = 16*index_key for the 16-bit-index forms; product A[i][c] * B[4*(c//2) + p][j]."""
    bits, na, nb, sets = SWMMAC[op]
    sa, sb, clamp, key = variant & 1, (variant >> 1) & 1, variant & 4, (variant >> 3) & 1
    s = 16 * key if sets else 0

    def el(words, e):
        v = (e * bits) // 32
        x = (words[v] >> ((e * bits) % 32)) & ((1 << bits) - 1)
        return x

    b_mat = {}
    for lane in range(32):
        words = [data[2 + v][lane] for v in range(4)]
        for f in range(nb):
            b_mat[(nb * (lane // 16) + f, lane % 16)] = R.int_value(el(words, f), bits, bool(sb))
    out = [[0] * 32 for _ in range(8)]
    for lane in range(32):
        for t in range(8):
            i, j = 8 * (lane // 16) + t, lane % 16
            stage = [0, 0]
            for h in (0, 1):
                la = 16 * h + i
                words = [data[0][la], data[1][la]]
                for e in range(na):
                    c = na * h + e
                    p = (data[14][la] >> (s + 2 * e)) & 3
                    stage[stage_of(c, na)] += R.int_value(el(words, e), bits, bool(sa)) * b_mat[(4 * (c // 2) + p, j)]
            acc = R.int_value(data[6 + t][lane], 32, True)
            r = R.sat32(R.sat32(acc + stage[0]) + stage[1]) if clamp else R.wrap32(acc + stage[0] + stage[1])
            out[t][lane] = r & M32
    return out


def swmmac_digest(out) -> int:
    return fnv_words(out[reg][lane] for reg in range(8) for lane in range(32))
