"""Seed-style per-VGPR tables for some sibling builtins, written out by hand from the prose of
BUILTINS_MORE.md (not computed from its formulas), in the style of the seed pages'
`list-table`s (seeds/000 srcA/srcB/accumulator tables). The tests check them against the
formula transcriptions in sib_layouts.py.

Each table maps (lane group, VGPR) -> the matrix coordinates held there, in element order
(low bits first). Sources, quoted:
* 2.2 "Half 0 holds k 0-3 (VGPR 0-1) and 8-11 (VGPR 2-3); half 1 holds 4-7, 12-15" (16-bit A/B);
  "iu8/fp8: 8 bytes in 2 VGPRs; iu4 K16: 8 nibbles in one VGPR; iu4 K32: 16 nibbles" with
  k = nA*h + e (contiguous per half);
* 2.2 C/D "i = 8*h + t", packed 16-bit: element t at bits (t*16)%32 of VGPR (t*16)//32,
  i.e. VGPR v holds rows 8h+2v (low half) and 8h+2v+1 (high half) (BUILTINS.md 2.2 wording);
* 1.2 "lane group g covers dense k 2*nA*g .. 2*nA*g + 2*nA - 1 (16-bit: 8g..8g+7; 8-bit:
  16g..16g+15)", "16-bit: the whole VGPR t; 8-bit: half t%2 of VGPR t//2", B "k = nB*g + f";
* 1.2 D 16x16 "i = 4*g + t"; 32x32 written as the seed's row table (rows 0-3 lanes 0-31 VGPRs
  0-3, rows 4-7 lanes 32-63 VGPRs 0-3, rows 8-11 lanes 0-31 VGPRs 4-7, ...);
* 1.3 "16-bit types: 4 sets of 8 bits; 8-bit types: 2 sets of 16 bits"."""

# ------------------------------------------------------------------ RDNA4 dense WMMA
# A (rows) / B (columns), 16-bit: half -> [VGPR 0, 1, 2, 3] -> K values (low half first)
WMMA_16BIT_AB = {
    0: [(0, 1), (2, 3), (8, 9), (10, 11)],
    1: [(4, 5), (6, 7), (12, 13), (14, 15)],
}
# 8-bit (iu8, fp8, bf8), K16: half -> [VGPR 0 bytes 0..3, VGPR 1 bytes 0..3]
WMMA_8BIT_AB = {
    0: [(0, 1, 2, 3), (4, 5, 6, 7)],
    1: [(8, 9, 10, 11), (12, 13, 14, 15)],
}
# iu4 K16: one VGPR, nibbles 0..7
WMMA_IU4_K16_AB = {0: [tuple(range(0, 8))], 1: [tuple(range(8, 16))]}
# iu4 K32: two VGPRs of 8 nibbles
WMMA_IU4_K32_AB = {0: [tuple(range(0, 8)), tuple(range(8, 16))],
                   1: [tuple(range(16, 24)), tuple(range(24, 32))]}
# accumulator, 32-bit (v8f32 / v8i32): half -> VGPR t -> row
WMMA_D32_ROWS = {0: [0, 1, 2, 3, 4, 5, 6, 7], 1: [8, 9, 10, 11, 12, 13, 14, 15]}
# accumulator, packed f16/bf16: half -> VGPR v -> (row in bits 15:0, row in bits 31:16)
WMMA_D16_ROWS = {0: [(0, 1), (2, 3), (4, 5), (6, 7)], 1: [(8, 9), (10, 11), (12, 13), (14, 15)]}

# ------------------------------------------------------------------ CDNA3 SMFMAC
# A, 16x16x32 f16/bf16: lane group g (lanes 16g..16g+15) -> VGPR t -> (compressed cols, dense k span)
SM_16x16x32_16BIT_A = {
    0: [((0, 1), range(0, 4)), ((2, 3), range(4, 8))],
    1: [((4, 5), range(8, 12)), ((6, 7), range(12, 16))],
    2: [((8, 9), range(16, 20)), ((10, 11), range(20, 24))],
    3: [((12, 13), range(24, 28)), ((14, 15), range(28, 32))],
}
# A, 32x32x16 f16/bf16: lane half g (lanes 32g..32g+31)
SM_32x32x16_16BIT_A = {
    0: [((0, 1), range(0, 4)), ((2, 3), range(4, 8))],
    1: [((4, 5), range(8, 12)), ((6, 7), range(12, 16))],
}
# A, 16x16x64 8-bit: lane group g -> VGPR v -> bytes 0..3 as compressed cols; containers are
# the 16-bit halves (bytes 0-1 = container 2v, bytes 2-3 = container 2v+1)
SM_16x16x64_8BIT_A = {
    0: [(0, 1, 2, 3), (4, 5, 6, 7)],
    1: [(8, 9, 10, 11), (12, 13, 14, 15)],
    2: [(16, 17, 18, 19), (20, 21, 22, 23)],
    3: [(24, 25, 26, 27), (28, 29, 30, 31)],
}
# B, 16x16x32 f16/bf16: lane group g -> VGPRs 0-3 (8 elements) -> dense K rows
SM_16x16x32_16BIT_B = {0: range(0, 8), 1: range(8, 16), 2: range(16, 24), 3: range(24, 32)}
# B, 32x32x32 8-bit: lane half g -> VGPRs 0-3 (16 bytes) -> dense K rows
SM_32x32x32_8BIT_B = {0: range(0, 16), 1: range(16, 32)}
# D 16x16: lane group g -> VGPRs 0..3 -> rows
SM_D16_ROWS = {0: [0, 1, 2, 3], 1: [4, 5, 6, 7], 2: [8, 9, 10, 11], 3: [12, 13, 14, 15]}
# D 32x32 row table: (rows, lanes, VGPRs)
SM_D32_ROW_TABLE = [
    (range(0, 4), range(0, 32), range(0, 4)), (range(4, 8), range(32, 64), range(0, 4)),
    (range(8, 12), range(0, 32), range(4, 8)), (range(12, 16), range(32, 64), range(4, 8)),
    (range(16, 20), range(0, 32), range(8, 12)), (range(20, 24), range(32, 64), range(8, 12)),
    (range(24, 28), range(0, 32), range(12, 16)), (range(28, 32), range(32, 64), range(12, 16)),
]
# index sets: element width -> [(ABID, (lo, hi) bits of the set)] with CBSZ = 0
SM_INDEX_SETS = {
    16: [(0, (0, 7)), (1, (8, 15)), (2, (16, 23)), (3, (24, 31))],
    8: [(0, (0, 15)), (1, (16, 31))],
}
