"""The kernels of the seed pages, replayed lane-parallel in numpy and fed to jwmma.

CDNA4: SmfmacCdna4FP8Policy (load_a / load_b / store_c, idx = 0x88888888) with
smfmac_f32_16x16x128_fp8_fp8. RDNA4: a swmmac_f32_16x16x32_f16_w32 step whose loads and store
follow the page's srcA / srcB / accumulator tables. Both must give the exactly rounded product
of the 2:4 matrix with B (model="exact"), over two K steps like the kernels' loops. A lane-local
(wrong) CDNA4 A loader must give a different result.

Eight independent instances run as one batch of 8 waves (the shape the builtin tests compile).
"""
from fractions import Fraction

import numpy as np

import jwmma
from oracles.reference import F16, F32, FP8, decode, rand_float_codes, round_to_bits

WAVES = 8


def _nonzero(codes, fmt):
    """Replace zeros by 1.0 so the kept positions are real non-zeros."""
    return np.where((codes & ((1 << (fmt.bits - 1)) - 1)) == 0, fmt.bias << fmt.mbits, codes)


def _sparse_02(rng, fmt, m, k):
    """Dense 2:4 matrix codes keeping positions 0 and 2 of every group (the pages' pattern)."""
    a = np.zeros((m, k), np.int64)
    vals = _nonzero(rand_float_codes(rng, fmt, "wide", (m, k // 2)), fmt)
    a[:, 0::2] = vals  # dense 2c <- compressed c
    return a


def _value(fmt, code):
    kind, _, v = decode(fmt, int(code))
    assert kind == "num"
    return v


def _exact_steps(fmt, a_steps, b_steps):
    """RN_f32 after each K step of D <- A_s @ B_s + D (one builtin call per step), D0 = 0."""
    m, n = a_steps[0].shape[0], b_steps[0].shape[1]
    d = np.zeros((m, n), np.int64)  # f32 bits
    for a, b in zip(a_steps, b_steps):
        av = [[_value(fmt, x) for x in row] for row in a]
        bv = [[_value(fmt, x) for x in row] for row in b]
        for i in range(m):
            for j in range(n):
                t = _value(F32, d[i, j]) + sum((av[i][x] * bv[x][j] for x in range(len(bv)) if av[i][x] != 0), Fraction(0))
                d[i, j] = 0 if t == 0 else round_to_bits(F32, t)
    return d


# ----------------------------------------------------------------------------- CDNA4 FP8
def cdna4_load_a(sA, warp_m, tk_comp):
    """SEED-C4 load_a, over all 64 lanes at once: byte b of VGPR j <- sA[a_off + 4j + b]."""
    lane = np.arange(64)
    g, n = lane // 16, lane % 16
    a_off = (warp_m * 16 + n) * tk_comp + g * 16
    a = np.zeros((64, 4), np.uint32)
    for j in range(4):
        for byte in range(4):
            a[:, j] |= sA[a_off + j * 4 + byte].astype(np.uint32) << (8 * byte)
    return a.view(np.int32)


def cdna4_load_a_lane_local(sA, warp_m, tk_comp):
    """The A loader lane-local pairing (H1) would need: c = 32*(e//8) + 8g + e%8. Wrong for
    gfx950 (BUILTINS.md 4.3 / 8)."""
    lane = np.arange(64)
    g, n = lane // 16, lane % 16
    a = np.zeros((64, 4), np.uint32)
    for e in range(16):
        c = 32 * (e // 8) + 8 * g + e % 8
        a[:, e // 4] |= sA[(warp_m * 16 + n) * tk_comp + c].astype(np.uint32) << (8 * (e % 4))
    return a.view(np.int32)


def cdna4_load_b(sB, warp_n, cta_n):
    """SEED-C4 load_b: kk = (v/4)*64 + g*16 + (v%4)*4; byte b of VGPR v <- sB[(kk+b)*cta_n + col]."""
    lane = np.arange(64)
    g, n = lane // 16, lane % 16
    b_col = warp_n * 16 + n
    b = np.zeros((64, 8), np.uint32)
    for v in range(8):
        kk = (v // 4) * 64 + g * 16 + (v % 4) * 4
        for byte in range(4):
            b[:, v] |= sB[(kk + byte) * cta_n + b_col].astype(np.uint32) << (8 * byte)
    return b.view(np.int32)


def cdna4_store_c(d, sub_m, sub_n, D, N):
    """SEED-C4 store_c: D[(sub_m + g*4 + r)*N + sub_n + n] = d[r]."""
    lane = np.arange(64)
    g, n = lane // 16, lane % 16
    for r in range(4):
        D[(sub_m + g * 4 + r) * N + sub_n + n] = d[:, r]


def _cdna4_instance(rng, steps=2):
    """Host data of one 16x16 tile over `steps` K=128 steps: dense A (2:4, kept 0 and 2),
    compressed A buffer per step, B per step (fp8 codes)."""
    a_dense = [_sparse_02(rng, FP8, 16, 128) for _ in range(steps)]
    b = [rand_float_codes(rng, FP8, "wide", (128, 16)) for _ in range(steps)]
    return a_dense, b


def _run_cdna4(instances, loader):
    steps = len(instances[0][0])
    d = np.zeros((WAVES, 64, 4), np.float32)
    for s in range(steps):
        a = np.stack([loader(inst[0][s][:, 0::2].astype(np.uint8).ravel(), 0, 64) for inst in instances])
        b = np.stack([cdna4_load_b(inst[1][s].astype(np.uint8).ravel(), 0, 16) for inst in instances])
        idx = np.full((WAVES, 64), np.uint32(0x88888888)).view(np.int32)
        d = np.asarray(jwmma.smfmac_f32_16x16x128_fp8_fp8(a, b, d, idx, 0, 0, model="exact"))
    out = []
    for w in range(WAVES):
        D = np.zeros(16 * 16, np.float32)
        cdna4_store_c(d[w], 0, 0, D, 16)
        out.append(D.reshape(16, 16).view(np.uint32).astype(np.int64))
    return out


def test_cdna4_fp8_example_computes_the_exact_product():
    rng = np.random.default_rng(950)
    instances = [_cdna4_instance(rng) for _ in range(WAVES)]
    got = _run_cdna4(instances, cdna4_load_a)
    for w, (a_dense, b) in enumerate(instances):
        want = _exact_steps(FP8, a_dense, b)
        np.testing.assert_array_equal(got[w], want, err_msg=f"instance {w}")


def test_cdna4_fp8_example_with_lane_local_a_loader_is_wrong():
    rng = np.random.default_rng(951)
    instances = [_cdna4_instance(rng, steps=1) for _ in range(WAVES)]
    got = _run_cdna4(instances, cdna4_load_a_lane_local)
    differ = 0
    for w, (a_dense, b) in enumerate(instances):
        want = _exact_steps(FP8, a_dense, b)
        differ += int((got[w] != want).any())
        # only lane group 0, bytes 0-7 line up; every output mixes all of K, so nearly all differ
        assert (got[w] != want).mean() > 0.9
    assert differ == WAVES


# ---------------------------------------------------------------------------- RDNA4 f16
SRC_A = {0: [(0, 1), (2, 3), (8, 9), (10, 11)], 1: [(4, 5), (6, 7), (12, 13), (14, 15)]}  # seed srcA table
SRC_B = {0: (0, 16), 1: (8, 24)}  # seed srcB table: first K row of VGPRs 0-3 and of VGPRs 4-7


def rdna4_load_a(a_comp):
    """srcA table: lane L holds row L%16; VGPR v holds compressed K SRC_A[L//16][v] (low, high)."""
    lane = np.arange(32)
    h, r = lane // 16, lane % 16
    a = np.zeros((32, 8), np.uint16)
    for v in range(4):
        lo = np.array([SRC_A[x][v][0] for x in h])
        hi = np.array([SRC_A[x][v][1] for x in h])
        a[:, 2 * v] = a_comp[r, lo]
        a[:, 2 * v + 1] = a_comp[r, hi]
    return a.view(np.float16)


def rdna4_load_a_contiguous(a_comp):
    """A plausible but wrong loader: contiguous compressed K 8h..8h+7."""
    lane = np.arange(32)
    h, r = lane // 16, lane % 16
    a = np.zeros((32, 8), np.uint16)
    for e in range(8):
        a[:, e] = a_comp[r, 8 * h + e]
    return a.view(np.float16)


def rdna4_load_b(b):
    """srcB table: lane L holds column L%16; VGPRs 0-3 hold K rows 8h..8h+7, VGPRs 4-7 hold
    16+8h..16+8h+7 (two f16 per VGPR, low half first)."""
    lane = np.arange(32)
    h, col = lane // 16, lane % 16
    out = np.zeros((32, 16), np.uint16)
    for f in range(16):
        first = np.array([SRC_B[x][f // 8] for x in h])
        out[:, f] = b[first + f % 8, col]
    return out.view(np.float16)


def rdna4_store_c(d):
    """Accumulator: lane = floor(i/8)*16 + j, VGPR = i mod 8."""
    D = np.zeros((16, 16), np.int64)
    bits = d.view(np.uint32)
    for i in range(16):
        for j in range(16):
            D[i, j] = bits[(i // 8) * 16 + j, i % 8]
    return D


def _run_rdna4(instances, loader, rng):
    d = np.zeros((WAVES, 32, 8), np.float32)
    for s in range(len(instances[0][0])):
        a = np.stack([loader(inst[0][s][:, 0::2]) for inst in instances])
        b = np.stack([rdna4_load_b(inst[1][s]) for inst in instances])
        # positions (0, 2) of the 4 groups a lane holds: 0x8888; bits 31:16 are not read
        idx = (np.uint32(0x8888) | (rng.integers(0, 1 << 16, (WAVES, 32)).astype(np.uint32) << 16)).view(np.int32)
        d = np.asarray(jwmma.swmmac_f32_16x16x32_f16_w32(a, b, d, idx, model="exact"))
    return [rdna4_store_c(d[w]) for w in range(WAVES)]


def _rdna4_instances(rng, steps):
    return [([_sparse_02(rng, F16, 16, 32).astype(np.uint16) for _ in range(steps)],
             [rand_float_codes(rng, F16, "wide", (32, 16)).astype(np.uint16) for _ in range(steps)])
            for _ in range(WAVES)]


def test_rdna4_f16_kernel_step_computes_the_exact_product():
    rng = np.random.default_rng(1201)
    instances = _rdna4_instances(rng, steps=2)
    got = _run_rdna4(instances, rdna4_load_a, rng)
    for w, (a_dense, b) in enumerate(instances):
        want = _exact_steps(F16, [x.astype(np.int64) for x in a_dense], [x.astype(np.int64) for x in b])
        np.testing.assert_array_equal(got[w], want, err_msg=f"instance {w}")


def test_rdna4_contiguous_a_loader_is_wrong():
    rng = np.random.default_rng(1202)
    instances = _rdna4_instances(rng, steps=1)
    got = _run_rdna4(instances, rdna4_load_a_contiguous, rng)
    for w, (a_dense, b) in enumerate(instances):
        want = _exact_steps(F16, [x.astype(np.int64) for x in a_dense], [x.astype(np.int64) for x in b])
        assert (got[w] != want).mean() > 0.9
