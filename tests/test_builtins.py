"""All 25 builtins against the scalar reference (tests/reference.py) of the generic semantics
of BUILTINS.md section 1: `exact` model for floats (one rounding, IEEE specials), exact
integer dots with wrap / final saturation / GoC's two-stage saturation (NUMERICS.md 4).

Every float builtin runs one batch of 8 waves of random and adversarial data (narrow and wide
exponents, subnormals, signed zeros, NaN/Inf, overflow, exact cancellation, NaN/Inf in pruned
B rows, equal and decreasing index pairs); results are compared bit for bit (NaN by NaN-ness).
"""
import functools
import zlib
from fractions import Fraction

import jax
import ml_dtypes
import numpy as np
import pytest

import jwmma
from oracles.reference import (
    I32_MAX, I32_MIN, NAMES, Ref, assert_same_bits, encode, float_dot_bits, is_inf_code, is_nan_code,
    lane_codes_to_matrix, out_fmt, pack_index, pack_matrix, rand_float_codes, rand_positions, reference,
    regs_to_lane_codes, special_codes,
)

FLOAT = [n for n in NAMES if not Ref(n).integer]
INT_RDNA4 = [n for n in NAMES if Ref(n).integer and Ref(n).arch == "gfx12"]
INT_CDNA4 = [n for n in NAMES if Ref(n).integer and Ref(n).arch == "gfx950"]
FLOAT_KINDS = ["narrow", "wide", "tiny", "special", "cancel", "zeros", "pruned", "huge"]
VALID_PAIRS = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]


def call(name, a, b, c, idx, *cbsz_abid, a_neg=True, b_neg=True, clamp=False, **kw):
    f = getattr(jwmma, name)
    if Ref(name).signed_choice:
        return np.asarray(f(a_neg, a, b_neg, b, c, idx, clamp, **kw))
    return np.asarray(f(a, b, c, idx, *cbsz_abid, **kw))


def _signed_flip(fmt, codes):
    return codes ^ (1 << (fmt.bits - 1))


# ------------------------------------------------------------------------------ float data
def float_wave(rng, ref, kind):
    """Matrix-level codes (A (M,Kc), B (Kd,N), C (M,N)) and positions (M,Kc) of one wave."""
    fa, fb, fc = ref.float_types
    (m, kc), (kd, n) = ref.shape("a"), ref.shape("b")
    pos = rand_positions(rng, m, kc, valid=kind in ("narrow", "tiny", "special", "pruned"))
    modes = {"narrow": ("narrow",) * 3, "wide": ("wide",) * 3, "tiny": ("tiny", "tiny", "tiny"),
             "special": ("special",) * 3, "huge": ("huge", "huge", "huge")}
    if kind in modes:
        ma, mb, mc = modes[kind]
        if kind == "tiny":
            mb = "narrow" if rng.random() < 0.5 else "tiny"
        a = rand_float_codes(rng, fa, ma, (m, kc))
        b = rand_float_codes(rng, fb, mb, (kd, n))
        c = rand_float_codes(rng, fc, mc, (m, n))
        if kind == "huge":  # a third of the C values modest, so products decide
            c = np.where(rng.random((m, n)) < 0.3, rand_float_codes(rng, fc, "narrow", (m, n)), c)
        return a, b, c, pos
    if kind == "cancel":
        # B constant along k in every column: output (i, j) = v_j * sum_c A[i, c] + C, and the
        # A rows are shuffled +-x pairs of wide magnitudes plus (in odd rows) two small leftovers
        col = rand_float_codes(rng, fb, "narrow", (n,))
        col = np.where((col & ((1 << (fb.bits - 1)) - 1)) == 0, col | (fb.bias << fb.mbits), col)
        b = np.tile(col, (kd, 1))
        a = np.zeros((m, kc), np.int64)
        for i in range(m):
            half = kc // 2 if i % 2 == 0 else kc // 2 - 1
            x = rand_float_codes(rng, fa, "wide", (half,))
            row = list(x) + list(_signed_flip(fa, x))
            if i % 2:
                row += list(rand_float_codes(rng, fa, rng.choice(["tiny", "narrow"]), (2,)))
            a[i] = rng.permutation(row)
        c = rand_float_codes(rng, fc, "tiny", (m, n))
        return a, b, c, pos
    if kind == "zeros":
        # A rows all zeros of one sign; B columns all zeros or all non-zeros of one sign; C zero
        # with a random sign: -0 results exactly where every product and C are -0
        s_row = rng.integers(0, 2, m)
        s_col = rng.integers(0, 2, n)
        a = np.array([[s_row[i] << (fa.bits - 1)] * kc for i in range(m)], np.int64)
        mag = rand_float_codes(rng, fb, "narrow", (kd, n)) & ((1 << (fb.bits - 1)) - 1)
        mag = np.where(mag == 0, fb.bias << fb.mbits, mag)
        nonzero_col = rng.random(n) < 0.5
        b = np.where(nonzero_col[None, :], mag, 0) | (s_col[None, :] << (fb.bits - 1))
        c = rng.integers(0, 2, (m, n)) << (fc.bits - 1)
        return a, b, c, pos
    if kind == "pruned":
        # one valid pair per group for all rows; every unselected B row holds NaN / Inf
        pairs = [VALID_PAIRS[t] for t in rng.integers(0, 6, kc // 2)]
        pos = np.array([[pairs[c // 2][c % 2] for c in range(kc)] for _ in range(m)])
        a = rand_float_codes(rng, fa, "narrow", (m, kc))
        b = rand_float_codes(rng, fb, "narrow", (kd, n))
        sp = special_codes(fb)
        for k in range(kd):
            if k % 4 not in pairs[k // 4]:
                b[k] = rng.choice(sp, n)
        c = rand_float_codes(rng, fc, "narrow", (m, n))
        return a, b, c, pos
    raise ValueError(kind)


class Case:
    pass


@functools.lru_cache(maxsize=None)
def float_case(name):
    """8 waves (FLOAT_KINDS) of one float builtin, their registers and expected results."""
    ref = Ref(name)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    case = Case()
    case.waves = [float_wave(rng, ref, kind) for kind in FLOAT_KINDS]
    case.a = np.stack([pack_matrix(ref, "a", w[0].tolist()) for w in case.waves])
    case.b = np.stack([pack_matrix(ref, "b", w[1].tolist()) for w in case.waves])
    case.c = np.stack([pack_matrix(ref, "c", w[2].tolist()) for w in case.waves])
    case.pos = [w[3] for w in case.waves]
    case.pos2 = [rand_positions(rng, ref.m, ref.kc, valid=False) for _ in case.waves]
    idx0 = np.stack([pack_index(ref, p, 0) for p in case.pos])
    case.want = np.stack([reference(name, case.a[w], case.b[w], case.c[w], idx0[w], s=0) for w in range(len(case.waves))])
    return case


def index_words(ref, main, other, main_set=0):
    """Index registers holding ``main`` positions in set ``main_set`` and ``other`` positions
    in the other set (when the builtin has two), so reading the wrong set gives other results."""
    out = []
    for p, q in zip(main, other):
        w = pack_index(ref, p, ref.index_sets[main_set]).view(np.uint32)
        if len(ref.index_sets) == 2:
            w = w | pack_index(ref, q, ref.index_sets[1 - main_set]).view(np.uint32)
        out.append(w.view(np.int32))
    return np.stack(out)


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if i % 4 == 0 else pytest.mark.slow)
                                  for i, n in enumerate(FLOAT)])
def test_float_builtin_exact(name):
    ref, case = Ref(name), float_case(name)
    idx = index_words(ref, case.pos, case.pos2, 0)  # unused index bits hold other positions
    got = call(name, case.a, case.b, case.c, idx, model="exact")
    assert got.dtype == ref.reg_dtype("c") and got.shape == case.c.shape
    for w, kind in enumerate(FLOAT_KINDS):
        assert_same_bits(got[w], case.want[w], out_fmt(ref), f"{name} wave {kind}")
    # NaN/Inf in pruned B rows never leak: that wave is finite everywhere
    fmt = out_fmt(ref)
    pruned = got[FLOAT_KINDS.index("pruned")].view(np.uint16 if fmt.bits == 16 else np.uint32)
    assert not any(is_nan_code(fmt, int(v)) or is_inf_code(fmt, int(v)) for v in pruned.ravel())


def test_adversarial_waves_hit_the_interesting_cases():
    """The data really produces NaN, Inf, -0, subnormal and overflow results somewhere."""
    seen = set()
    for name in ("swmmac_f16_16x16x32_f16_w32", "swmmac_f32_16x16x32_bf16_w32", "smfmac_f32_16x16x128_bf8_fp8"):
        ref, case = Ref(name), float_case(name)
        fmt = out_fmt(ref)
        for v in case.want.view(np.uint16 if fmt.bits == 16 else np.uint32).ravel():
            v = int(v)
            e = (v >> fmt.mbits) & fmt.emask
            if is_nan_code(fmt, v):
                seen.add("nan")
            elif is_inf_code(fmt, v):
                seen.add("inf")
            elif v == 1 << (fmt.bits - 1):
                seen.add("-0")
            elif e == 0 and v & fmt.mmask:
                seen.add("subnormal")
    assert seen == {"nan", "inf", "-0", "subnormal"}


# ------------------------------------------------------------------------------ index sets
# the CDNA4 cbsz/abid table on one 16-bit builtin and an 8-bit CDNA4 builtin (no new compile) run
# by default; the rest is slow (each index set is another XLA compile). RDNA4 index_key=1 is
# also covered by default in test_rdna4_integer_index_key (integer compiles are cheap).
FAST_INDEX_SETS = ["smfmac_f32_16x16x64_f16", "smfmac_f32_16x16x128_fp8_fp8"]


def _check_index_sets(name):
    ref, case = Ref(name), float_case(name)
    fmt = out_fmt(ref)
    idx_a = index_words(ref, case.pos, case.pos2, 0)  # wanted positions in set 0
    if ref.arch == "gfx12":
        if len(ref.index_sets) == 2:
            idx_b = index_words(ref, case.pos, case.pos2, 1)  # wanted positions in bits 31:16
            assert_same_bits(call(name, case.a, case.b, case.c, idx_b, model="exact", index_key=1), case.want, fmt,
                             "index_key=1")
            assert_same_bits(call(name, case.a, case.b, case.c, idx_a, model="exact", index_key=0), case.want, fmt,
                             "index_key=0")
        return
    if ref.bits == 8:  # one 32-bit set; cbsz/abid change nothing
        for cbsz, abid in [(0, 0), (0, 1), (3, 7), (7, 15), (4, 2)]:
            assert_same_bits(call(name, case.a, case.b, case.c, idx_a, cbsz, abid, model="exact"), case.want, fmt,
                             f"cbsz={cbsz} abid={abid}")
        return
    idx_b = index_words(ref, case.pos, case.pos2, 1)
    for cbsz in range(8):
        for abid in range(16):
            s = 16 * (abid & 1) if (cbsz & 3) == 0 else 0  # BUILTINS.md 4.2 / 4.4
            idx = idx_a if s == 0 else idx_b
            assert_same_bits(call(name, case.a, case.b, case.c, idx, cbsz, abid, model="exact"), case.want, fmt,
                             f"cbsz={cbsz} abid={abid}")


@pytest.mark.parametrize("name", FAST_INDEX_SETS)
def test_index_sets(name):
    _check_index_sets(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in FLOAT if n not in FAST_INDEX_SETS])
def test_index_sets_all(name):
    _check_index_sets(name)


def test_rdna4_index_keyword_range():
    ref = Ref("swmmac_i32_16x16x64_iu4_w32")
    z = [np.zeros((32, ref.vec(w)), ref.reg_dtype(w)) for w in "abc"]
    with pytest.raises(ValueError, match="index_key"):
        jwmma.swmmac_i32_16x16x64_iu4_w32(True, z[0], True, z[1], z[2], np.zeros(32, np.int32), False, index_key=1)


# ------------------------------------------------------------------------------ integers
def int_waves(rng, ref, a_signed, b_signed):
    bits = ref.bits
    (m, kc), (kd, n) = ref.shape("a"), ref.shape("b")

    def lo(s):
        return -(1 << (bits - 1)) if s else 0

    def hi(s):
        return (1 << (bits - 1)) - 1 if s else (1 << bits) - 1

    def rnd(s, shape):
        return rng.integers(lo(s), hi(s) + 1, shape)

    stage = np.array([(c // 8) % 2 for c in range(kc)])
    waves = [
        (rnd(a_signed, (m, kc)), rnd(b_signed, (kd, n)), rng.integers(-(2**20), 2**20, (m, n)), True),
        (rnd(a_signed, (m, kc)), rnd(b_signed, (kd, n)), rng.integers(I32_MIN, I32_MAX + 1, (m, n)), False),
        # overflow upwards
        (np.full((m, kc), hi(a_signed)), np.full((kd, n), hi(b_signed)), I32_MAX - rng.integers(0, 2000, (m, n)), False),
        # overflow downwards (when a signed operand allows negative products)
        (np.full((m, kc), lo(a_signed) if a_signed else hi(a_signed)),
         np.full((kd, n), hi(b_signed) if a_signed else lo(b_signed)), I32_MIN + rng.integers(0, 2000, (m, n)), True),
        # stage 0 pushes past the limit, stage 1 comes back: staged and single saturation differ
        (np.where(stage[None, :] == 0, hi(a_signed), lo(a_signed)) * np.ones((m, 1), int),
         np.full((kd, n), hi(b_signed)),
         np.where(rng.random((m, n)) < 0.5, I32_MAX - rng.integers(0, 300, (m, n)), I32_MIN + rng.integers(0, 300, (m, n))),
         True),
        (rnd(a_signed, (m, kc)), np.where(rng.random((kd, n)) < 0.5, lo(b_signed), hi(b_signed)),
         np.where(rng.random((m, n)) < 0.5, 1, -1) * (2**31 - 1 - rng.integers(0, 2**16, (m, n))), False),
    ]
    out = []
    for a, b, c, valid in waves:
        out.append((a, b, c, rand_positions(rng, m, kc, valid=valid)))
    return out


def _int_registers(ref, waves, rng, s=0):
    a = np.stack([pack_matrix(ref, "a", w[0].tolist()) for w in waves])
    b = np.stack([pack_matrix(ref, "b", w[1].tolist()) for w in waves])
    c = np.stack([pack_matrix(ref, "c", w[2].tolist()) for w in waves])
    garbage = rng.integers(0, 2**32, (len(waves), ref.wave))
    idx = np.stack([pack_index(ref, w[3], s, garbage=g.tolist()) for w, g in zip(waves, garbage)])
    return a, b, c, idx


INT_CONFIGS = [  # (a_neg, b_neg, clamp, model)
    (True, True, False, None),
    (False, False, True, None),
    (True, False, True, "exact"),
    (False, True, False, "exact"),
    (True, True, True, None),
    (False, True, True, "staged_clamp"),
]


@pytest.mark.parametrize("cfg", INT_CONFIGS, ids=lambda c: f"a{int(c[0])}b{int(c[1])}clamp{int(c[2])}-{c[3]}")
@pytest.mark.parametrize("name", INT_RDNA4)
def test_rdna4_integer_builtin(name, cfg, rng):
    a_neg, b_neg, clamp, model = cfg
    ref = Ref(name)
    waves = int_waves(rng, ref, a_neg, b_neg)
    a, b, c, idx = _int_registers(ref, waves, rng)
    staged = clamp and model in (None, "staged_clamp")  # RDNA4 default: staged_clamp
    kw = {} if model is None else {"model": model}
    got = call(name, a, b, c, idx, a_neg=a_neg, b_neg=b_neg, clamp=clamp, **kw)
    assert got.dtype == np.int32
    for w in range(len(waves)):
        want = reference(name, a[w], b[w], c[w], idx[w], a_signed=a_neg, b_signed=b_neg, clamp=clamp, staged=staged)
        assert_same_bits(got[w], want, None, f"{name} {cfg} wave {w}")


@pytest.mark.parametrize("name", ["swmmac_i32_16x16x32_iu8_w32", "swmmac_i32_16x16x32_iu4_w32"])
def test_rdna4_integer_index_key(name, rng):
    ref = Ref(name)
    waves = int_waves(rng, ref, True, False)
    a, b, c, idx = _int_registers(ref, waves, rng, s=16)
    got = call(name, a, b, c, idx, a_neg=True, b_neg=False, clamp=True, index_key=1)
    for w in range(len(waves)):
        want = reference(name, a[w], b[w], c[w], idx[w], s=16, a_signed=True, b_signed=False, clamp=True, staged=True)
        assert_same_bits(got[w], want, None, f"wave {w}")


@pytest.mark.parametrize("name", INT_CDNA4)
def test_cdna4_i8_signed_and_wraps(name, rng):
    ref = Ref(name)
    waves = int_waves(rng, ref, True, True)
    a, b, c, idx = _int_registers(ref, waves, rng)
    wants = [reference(name, a[w], b[w], c[w], idx[w]) for w in range(len(waves))]
    for cbsz, abid, kw in [(0, 0, {}), (0, 0, {"model": "exact"}), (7, 15, {}), (2, 3, {})]:
        got = call(name, a, b, c, idx, cbsz, abid, **kw)
        for w in range(len(waves)):
            assert_same_bits(got[w], wants[w], None, f"{name} cbsz={cbsz} abid={abid} wave {w}")


def _one_row_int_case(name, a_row, b_val, c00, a_neg=True, b_neg=True):
    """Row 0 of A = a_row (compressed), every B element b_val, C[0][0] = c00, positions (0, 1)."""
    ref = Ref(name)
    a = [[0] * ref.kc for _ in range(ref.m)]
    a[0] = list(a_row)
    b = [[b_val] * ref.n for _ in range(ref.kd)]
    c = [[0] * ref.n for _ in range(ref.m)]
    c[0][0] = c00
    pos = [[c % 2 for c in range(ref.kc)] for _ in range(ref.m)]
    return (pack_matrix(ref, "a", a), pack_matrix(ref, "b", b), pack_matrix(ref, "c", c), pack_index(ref, pos, 0))


def _d00(name, regs):
    ref = Ref(name)
    for lane in range(ref.wave):
        for t in range(ref.nc):
            if ref.c_coord(lane, t) == (0, 0):
                return int(regs[..., lane, t])


def test_staged_clamp_numeric_example():
    """NUMERICS.md section 4: C = 2^31-101, stage sums +16129*8 and -16129*8 -> single clamp
    2147483547, staged clamp 2147354615."""
    name = "swmmac_i32_16x16x32_iu8_w32"
    regs = _one_row_int_case(name, [127] * 8 + [-127] * 8, 127, 2**31 - 101)
    f = jwmma.swmmac_i32_16x16x32_iu8_w32
    a, b, c, idx = regs
    assert _d00(name, np.asarray(f(True, a, True, b, c, idx, True))) == 2147354615  # default: staged
    assert _d00(name, np.asarray(f(True, a, True, b, c, idx, True, model="staged_clamp"))) == 2147354615
    assert _d00(name, np.asarray(f(True, a, True, b, c, idx, True, model="exact"))) == 2147483547
    assert _d00(name, np.asarray(f(True, a, True, b, c, idx, False))) == 2147483547  # no overflow at the end
    # without clamp a sum past INT32_MAX wraps
    regs = _one_row_int_case(name, [127] * 16, 127, 2**31 - 101)
    d = _d00(name, np.asarray(f(True, regs[0], True, regs[1], regs[2], regs[3], False)))
    assert d == 2**31 - 101 + 16 * 16129 - 2**32
    assert _d00(name, np.asarray(f(True, regs[0], True, regs[1], regs[2], regs[3], True))) == I32_MAX
    # unsigned reading of the same bytes: 127 * 255 ... a_neg=False reads -127 as 129
    regs = _one_row_int_case(name, [127] * 8 + [-127 & 0xFF] * 8, 255, 0)
    d = _d00(name, np.asarray(f(False, regs[0], False, regs[1], regs[2], regs[3], False)))
    assert d == 8 * 127 * 255 + 8 * 129 * 255
    d = _d00(name, np.asarray(f(True, regs[0], True, regs[1], regs[2], regs[3], False)))
    assert d == 8 * 127 * -1 + 8 * -127 * -1


def test_staged_clamp_interleaved_stages_k64():
    """iu4 16x16x64 (Kc=32): stage 0 = ck 0..15, stage 1 = ck 16..31 (the first half of the
    products, then the rest: GoC's hardware digests, 128/128; the earlier interleaved reading
    {0..7, 16..23} was wrong, issue #13)."""
    name = "swmmac_i32_16x16x64_iu4_w32"
    row = [7 if c < 16 else -7 for c in range(32)]
    a, b, c, idx = _one_row_int_case(name, row, 7, 2**31 - 101)
    f = jwmma.swmmac_i32_16x16x64_iu4_w32
    assert _d00(name, np.asarray(f(True, a, True, b, c, idx, True))) == I32_MAX - 16 * 49
    assert _d00(name, np.asarray(f(True, a, True, b, c, idx, True, model="exact"))) == 2**31 - 101
    # the stage sums fall the other way for INT32_MIN
    row = [-7 if c < 16 else 7 for c in range(32)]
    a, b, c, idx = _one_row_int_case(name, row, 7, -(2**31) + 50)
    assert _d00(name, np.asarray(f(True, a, True, b, c, idx, True))) == I32_MIN + 16 * 49
    assert _d00(name, np.asarray(f(True, a, True, b, c, idx, True, model="exact"))) == -(2**31) + 50


# ---------------------------------------------------------------- generic gather, by hand
def test_probe_idx_zero_sums_pairs_on_the_first_row():
    """BUILTINS.md 5 (PROBE-R4): idx = 0 gives (a0 + a1) * B[4q] for every group."""
    name = "swmmac_i32_16x16x64_iu4_w32"
    ref = Ref(name)
    rng = np.random.default_rng(7)
    a = rng.integers(-8, 8, (16, 32))
    b = rng.integers(-8, 8, (64, 16))
    c = rng.integers(-1000, 1000, (16, 16))
    regs = [pack_matrix(ref, "a", a.tolist()), pack_matrix(ref, "b", b.tolist()), pack_matrix(ref, "c", c.tolist())]
    d = np.asarray(jwmma.swmmac_i32_16x16x64_iu4_w32(True, regs[0], True, regs[1], regs[2], np.zeros(32, np.int32), False))
    want = c + sum(np.outer(a[:, 2 * q] + a[:, 2 * q + 1], b[4 * q]) for q in range(16))
    for lane in range(32):
        for t in range(8):
            i, j = ref.c_coord(lane, t)
            assert d[lane, t] == want[i, j]


def test_decreasing_and_equal_pairs_gather_their_own_rows():
    """CDNA4 16-bit: pairs (3, 1) and (2, 2) still multiply each stored value by its own
    selected B row (small integers, so every result is exact)."""
    name = "smfmac_f32_16x16x64_f16"
    ref = Ref(name)
    rng = np.random.default_rng(11)
    a = rng.integers(-4, 5, (16, 32)).astype(np.float16)
    b = rng.integers(-4, 5, (64, 16)).astype(np.float16)
    pos = np.array([[(3, 1)[c % 2] if (c // 2) % 2 == 0 else 2 for c in range(32)] for _ in range(16)])
    f16 = lambda x: x.view(np.uint16).astype(int).tolist()  # noqa: E731
    regs_a, regs_b = pack_matrix(ref, "a", f16(a)), pack_matrix(ref, "b", f16(b))
    c = np.zeros((64, 4), np.float32)
    eight = lambda x: np.broadcast_to(x, (8,) + x.shape)  # noqa: E731  (8 waves: the compile of test_float_builtin_exact)
    d = np.asarray(jwmma.smfmac_f32_16x16x64_f16(eight(regs_a), eight(regs_b), eight(c), eight(pack_index(ref, pos, 0)),
                                                 model="exact"))[3]
    want = np.zeros((16, 16))
    for i in range(16):
        for col in range(32):
            want[i] += float(a[i, col]) * b[4 * (col // 2) + pos[i, col]].astype(np.float64)
    for lane in range(64):
        for t in range(4):
            i, j = ref.c_coord(lane, t)
            assert d[lane, t] == want[i, j]
    bad = np.asarray(jwmma.index_violations(name, pack_index(ref, pos, 0)))
    assert bad.all()  # every pair is (3, 1) or (2, 2): index0 >= index1


# ------------------------------------------------------------------- batching and vmap
def _random_regs(rng, ref, batch):
    out = []
    for w in "abc":
        dt = ref.reg_dtype(w)
        width = {2: np.uint16, 4: np.uint32}[dt.itemsize]
        x = rng.integers(0, 1 << (8 * dt.itemsize), batch + (ref.wave, ref.vec(w)), dtype=np.uint64).astype(width)
        if w == "c" and ref.c_type == "f32":  # finite accumulators of moderate size
            x = (x & np.uint32(0x807FFFFF)) | np.uint32(120 << 23)
        out.append(x.view(dt))
    idx = rng.integers(0, 2**32, batch + (ref.wave,), dtype=np.uint64).astype(np.uint32).view(np.int32)
    return out + [idx]


BATCH_CASES = [  # the float case compiles the builtin twice more (4096 and 1 wave): slow
    pytest.param("swmmac_f32_16x16x32_fp8_fp8_w32", {"model": "exact"}, marks=pytest.mark.slow, id="fp8"),
    pytest.param("swmmac_i32_16x16x32_iu8_w32", {"a_neg": True, "b_neg": False, "clamp": True}, id="iu8"),
]


@pytest.mark.parametrize("name,kw", BATCH_CASES)
def test_4096_waves_batched_equal_single_calls(name, kw, rng):
    ref = Ref(name)
    a, b, c, idx = _random_regs(rng, ref, (4096,))
    batched = call(name, a, b, c, idx, **kw)
    assert batched.shape == (4096, ref.wave, ref.vec("c"))
    bits = batched.view(np.uint32)
    for w in range(4096):
        single = call(name, a[w], b[w], c[w], idx[w], **kw)
        np.testing.assert_array_equal(single.view(np.uint32), bits[w], err_msg=f"wave {w}")


@pytest.mark.parametrize("name,kw", [  # the float vmap is one more XLA compile: slow
    pytest.param("smfmac_f32_16x16x128_fp8_bf8", {"model": "exact"}, marks=pytest.mark.slow, id="fp8"),
    pytest.param("swmmac_i32_16x16x32_iu8_w32", {"a_neg": True, "b_neg": False, "clamp": True}, id="iu8"),
])
def test_vmap_and_jit_give_the_same_bits(name, kw, rng):
    ref = Ref(name)
    a, b, c, idx = _random_regs(rng, ref, (8,))
    batched = call(name, a, b, c, idx, **kw).view(np.uint32)  # 8 waves: a shape compiled elsewhere too
    vm = jax.vmap(lambda a, b, c, i: call_jax(name, a, b, c, i, **kw))(a, b, c, idx)
    np.testing.assert_array_equal(np.asarray(vm).view(np.uint32), batched)
    if ref.integer:  # integer compiles are cheap: also single calls, jit and nested vmap
        singles = np.stack([call(name, a[w], b[w], c[w], idx[w], **kw) for w in range(8)]).view(np.uint32)
        np.testing.assert_array_equal(singles, batched)
        jt = jax.jit(lambda a, b, c, i: call_jax(name, a, b, c, i, **kw))(a, b, c, idx)
        np.testing.assert_array_equal(np.asarray(jt).view(np.uint32), batched)
        vv = jax.vmap(jax.vmap(lambda a, b, c, i: call_jax(name, a, b, c, i, **kw)))(
            *(x.reshape((2, 4) + x.shape[1:]) for x in (a, b, c, idx)))
        np.testing.assert_array_equal(np.asarray(vv).reshape(batched.shape).view(np.uint32), batched)


def test_vmap_with_unmapped_and_wider_registers_equals_single_calls(rng):
    """jax.vmap folds its mapped axis into the waves: registers mapped on other axes, one
    register unmapped with more wave dims of its own than the mapped ones, vmap inside jit, and
    an empty mapped axis: each equals the calls one by one."""
    name = "swmmac_i32_16x16x32_iu8_w32"
    ref = Ref(name)
    kw = {"a_neg": True, "b_neg": False, "clamp": True}
    a, b, _, idx = _random_regs(rng, ref, (5,))
    _, _, c, _ = _random_regs(rng, ref, (3,))  # C unmapped, 3 waves of its own
    f = lambda a, b, c, i: call_jax(name, a, b, c, i, **kw)  # noqa: E731
    got = jax.jit(jax.vmap(f, in_axes=(0, 1, None, 0)))(a, np.moveaxis(b, 0, 1), c, idx)
    assert got.shape == (5, 3) + c.shape[1:]
    for v in range(5):
        np.testing.assert_array_equal(np.asarray(got[v]).view(np.uint32),
                                      call(name, a[v], b[v], c, idx[v], **kw).view(np.uint32))
    empty = jax.vmap(f, in_axes=(0, 0, None, 0))(a[:0], b[:0], c, idx[:0])
    assert empty.shape == (0, 3) + c.shape[1:]


@pytest.mark.slow  # one more float compile
def test_vmap_of_a_model_that_chooses_its_path_by_the_data(rng):
    """Folded into the waves, `exact`'s choice between its bf16 sums is made once for the whole
    batch: the same bits as the calls one by one."""
    name = "smfmac_f32_16x16x64_bf16"
    ref = Ref(name)
    a, b, c, idx = _random_regs(rng, ref, (4,))
    got = jax.vmap(lambda a, b, c, i: call_jax(name, a, b, c, i, model="exact"))(a, b, c, idx)
    for v in range(4):
        np.testing.assert_array_equal(np.asarray(got[v]).view(np.uint32),
                                      call(name, a[v], b[v], c[v], idx[v], model="exact").view(np.uint32))


def call_jax(name, a, b, c, idx, *, a_neg=True, b_neg=True, clamp=False, **kw):
    f = getattr(jwmma, name)
    if Ref(name).signed_choice:
        return f(a_neg, a, b_neg, b, c, idx, clamp, **kw)
    return f(a, b, c, idx, **kw)


@pytest.mark.parametrize("name,kw", BATCH_CASES)
def test_leading_batch_dims_broadcast(name, kw, rng):
    ref = Ref(name)
    a, b, c, idx = _random_regs(rng, ref, (8,))
    # A (2, 1), B (1, 4), C unbatched, idx (4,) -> (2, 4) waves
    out = call(name, a[:2, None], b[None, :4], c[0], idx[:4], **kw)
    assert out.shape == (2, 4, ref.wave, ref.vec("c"))
    for x in range(2):
        for y in range(4):
            one = call(name, a[x], b[y], c[0], idx[y], **kw)
            np.testing.assert_array_equal(out[x, y].view(np.uint32), one.view(np.uint32))


# ------------------------------------------------------- rounding, by hand, bit by bit
# A scenario is (products, C, expected bits of D[0][0]); a product (ea, eb, sign) is
# sign * 2^ea * 2^eb (ea None: a zero A value of that sign). All other products of the output
# are +0 * +0, except in the "-0" scenario, where they are -0 * +0.
P, M = 0, 1  # signs
SCENARIOS = {
    ("f16", "f32"): [
        ([(0, 0, P), (-12, -12, P)], 0, 0x3F800000),  # 1 + 2^-24: tie -> even (1.0)
        ([(0, 0, P), (-12, -12, P), (-24, -24, P)], 0, 0x3F800001),  # sticky far below breaks the tie
        ([(0, 0, P), (-12, -11, P), (-12, -12, P)], 0, 0x3F800002),  # tie -> even upwards
        ([(15, 15, P), (15, 15, M), (-24, -24, P)], 0, 0x27800000),  # 2^30 - 2^30 + 2^-48
        ([(0, 0, P), (-12, -12, P)], Fraction(-1, 2**149), 0x3F800000),  # just below the tie
        ([(0, 0, P), (0, 0, M)], Fraction(1, 2**130), 0x00080000),  # C subnormal survives exactly
        ([(15, 15, P), (15, 15, M)], "-0", 0x00000000),  # exact cancellation is +0 even with C = -0
        ([(None, 0, M)], "-0", 0x80000000),  # every product -0 and C -0
    ],
    ("bf16", "f32"): [
        ([(0, 0, P), (-12, -12, P)], 0, 0x3F800000),
        ([(127, 1, P)], 0, 0x7F800000),  # 2^128 overflows to +Inf
        ([(127, 127, P), (127, 127, M), (0, 0, P)], 0, 0x3F800000),  # products beyond f32 cancel exactly
        ([(-126, -24, P)], 0, 0x00000000),  # 2^-150: tie between 0 and 2^-149 -> +0
        ([(-126, -24, M)], 0, 0x80000000),  # ... and -0 for the negative value
        ([(-126, -24, P), (-126, -25, P)], 0, 0x00000001),  # 3 * 2^-151 rounds up to 2^-149
        ([(-133, -10, P)], 0, 0x00000040),  # bf16 subnormal times 2^-10 = 2^-143
        ([(127, 127, P), (127, 127, P)], 0, 0x7F800000),
    ],
    ("8bit", "f32"): [  # powers of two inside both E4M3FN [2^-9, 2^8] and E5M2
        ([(3, 3, P), (-9, -9, P)], 0, 0x42800000),  # 64 + 2^-18: tie -> 64
        ([(3, 3, P), (-9, -9, P)], Fraction(1, 2**149), 0x42800001),  # the C subnormal breaks the tie
        ([(4, 3, P), (-9, -8, P), (-9, -9, P)], 0, 0x43000001),  # 128 + 0.75 ulp
        ([(8, 8, P), (8, 8, M)], Fraction(1, 2**149), 0x00000001),
        ([(-9, -9, M)], 0, 0xB6800000),
        ([(8, 8, P)], Fraction(2**24 - 1) * 2**104, 0x7F7FFFFF),  # f32 max + 2^16 stays max (no Inf)
        ([(3, 3, P), (-9, -9, M)], 0, 0x427FFFFF),  # 64 - 2^-18 is exact
        ([(None, 0, M)], "-0", 0x80000000),
    ],
    ("f16", "f16"): [
        ([(0, 0, P), (-6, -5, P)], 0, 0x3C00),  # 1 + 2^-11: tie -> 1.0
        ([(0, 0, P), (-6, -5, P), (-24, -24, P)], 0, 0x3C01),
        ([(15, 0, P), (15, 0, P)], 0, 0x7C00),  # 2^16 overflows f16
        ([(-12, -13, P)], 0, 0x0000),  # 2^-25: tie between 0 and 2^-24 -> +0
        ([(-12, -13, P), (-24, -24, P)], 0, 0x0001),
        ([(-12, -13, M)], 0, 0x8000),
        ([(-10, -10, P)], 0, 0x0010),  # 2^-20 is an f16 subnormal
        ([(15, 0, P), (15, 0, M)], Fraction(1, 2**24), 0x0001),
    ],
    ("bf16", "bf16"): [
        ([(0, 0, P), (-4, -4, P)], 0, 0x3F80),  # 1 + 2^-8: tie -> 1.0
        ([(0, 0, P), (-4, -4, P), (-100, -100, P)], 0, 0x3F81),
        ([(127, 1, P)], 0, 0x7F80),
        ([(-126, -8, P)], 0, 0x0000),  # 2^-134: tie -> +0
        ([(-126, -8, M), (-126, -9, M)], 0, 0x8001),  # -3 * 2^-135 -> -2^-133
        ([(127, 127, P), (127, 127, M), (0, 0, P)], 0, 0x3F80),
        ([(-126, -1, P)], 0, 0x0040),  # 2^-127 is a bf16 subnormal
        ([(None, 0, M)], "-0", 0x8000),
    ],
}


def _scenario_key(ref):
    a = "8bit" if ref.bits == 8 else ref.a_type
    return (a, ref.c_type)


def _scenario_wave(ref, products, c_val):
    fa, fb, fc = ref.float_types
    neg_zero_fill = c_val == "-0" and all(ea is None for ea, _, _ in products)
    a = [[encode(fa, 0, negative_zero=neg_zero_fill)] * ref.kc for _ in range(ref.m)]
    b = [[0] * ref.n for _ in range(ref.kd)]
    pos = [[c % 2 for c in range(ref.kc)] for _ in range(ref.m)]  # pairs (0, 1)
    for c, (ea, eb, sign) in enumerate(products):
        k = 4 * (c // 2) + c % 2
        a[0][c] = encode(fa, 0, negative_zero=bool(sign)) if ea is None else encode(fa, (-1) ** sign * Fraction(2) ** ea)
        b[k][0] = encode(fb, Fraction(2) ** eb)
    cc = [[0] * ref.n for _ in range(ref.m)]
    cc[0][0] = encode(fc, 0, negative_zero=True) if c_val == "-0" else encode(fc, Fraction(c_val))
    return pack_matrix(ref, "a", a), pack_matrix(ref, "b", b), pack_matrix(ref, "c", cc), pack_index(ref, pos, 0)


@pytest.mark.parametrize("name", FLOAT)
def test_rounding_by_hand(name):
    ref = Ref(name)
    scen = SCENARIOS[_scenario_key(ref)]
    assert len(scen) == len(FLOAT_KINDS)  # 8 waves: the compile of test_float_builtin_exact
    waves = [_scenario_wave(ref, p, c) for p, c, _ in scen]
    a, b, c, idx = (np.stack([w[x] for w in waves]) for x in range(4))
    got = call(name, a, b, c, idx, model="exact")
    fmt = out_fmt(ref)
    lane0 = [(lane, t) for lane in range(ref.wave) for t in range(ref.nc) if ref.c_coord(lane, t) == (0, 0)][0]
    view = np.uint16 if fmt.bits == 16 else np.uint32
    fa, fb, fc = ref.float_types
    for w, (_, _, bits) in enumerate(scen):
        d = got[w].view(view).copy()
        assert int(d[lane0]) == bits, f"scenario {w}: got {int(d[lane0]):#x}, want {bits:#x}"
        d[lane0] = 0
        assert not d.any(), f"scenario {w}: every other output is +0"
        # the reference's arithmetic agrees with the hand value
        a_l, b_l = (regs_to_lane_codes(ref, x, r[w]) for x, r in (("a", a), ("b", b)))
        a_m, b_m = lane_codes_to_matrix(ref, "a", a_l), lane_codes_to_matrix(ref, "b", b_l)
        pairs = [(a_m[0][col], b_m[4 * (col // 2) + col % 2][0]) for col in range(ref.kc)]
        c00 = lane_codes_to_matrix(ref, "c", regs_to_lane_codes(ref, "c", c[w]))[0][0]
        assert float_dot_bits(fc, fa, fb, fc, pairs, c00) == bits, f"reference, scenario {w}"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["swmmac_bf16_16x16x32_bf16_w32", "smfmac_f32_16x16x64_bf16"])
def test_bf16_register_dtype_alternatives(name):
    """RDNA4 bf16 `short` registers also accept bfloat16 (the result has C's dtype); CDNA4
    __bf16 registers also accept int16/uint16 bit patterns. Same bits either way."""
    ref, case = Ref(name), float_case(name)
    idx = index_words(ref, case.pos, case.pos2, 0)
    alt = (lambda x: x.view(ml_dtypes.bfloat16)) if ref.arch == "gfx12" else (lambda x: x.view(np.uint16))
    c = alt(case.c) if ref.c_type == "bf16" else case.c
    got = call(name, alt(case.a), alt(case.b), c, idx, model="exact")
    assert got.dtype == c.dtype
    assert_same_bits(got, case.want, out_fmt(ref), "alternative dtypes")


# ------------------------------------------------------------- the reference itself
def test_reference_decoder_and_rounding_agree_with_numpy():
    """The scalar reference's decoding and rounding against numpy / ml_dtypes conversions."""
    from oracles.reference import BF8, BF16, F16, F32, FP8, decode, round_to_bits

    rng = np.random.default_rng(3)
    for fmt, dt in ((F16, np.float16), (BF16, ml_dtypes.bfloat16), (FP8, ml_dtypes.float8_e4m3fn), (BF8, ml_dtypes.float8_e5m2)):
        width = np.uint16 if fmt.bits == 16 else np.uint8
        codes = np.arange(1 << fmt.bits)
        if fmt.bits == 16:  # every 8-bit code; for 16 bits the edges of every binade and a sample
            codes = np.unique(np.concatenate([codes[(codes & 0x7F) < 2], codes[(codes & 0x7F) > 0x7D],
                                              rng.integers(0, 1 << 16, 3000)]))
        codes = codes.astype(width)
        with np.errstate(all="ignore"):
            vals = codes.view(dt).astype(np.float64)
        for code, v in zip(codes.tolist(), vals.tolist()):
            kind, sign, x = decode(fmt, code)
            if np.isnan(v):
                assert kind == "nan", (fmt.name, code)
            elif np.isinf(v):
                assert kind == "inf" and sign == (v < 0), (fmt.name, code)
            else:
                assert kind == "num" and x == Fraction(v) and sign == (code >> (fmt.bits - 1)), (fmt.name, code)
    xs = np.concatenate([rng.standard_normal(1500) * 2.0 ** rng.integers(-160, 140, 1500),
                         (rng.integers(1, 2**40, 1000) * 2.0 ** rng.integers(-190, -120, 1000))])
    with np.errstate(all="ignore"):
        for x in xs.tolist():
            assert round_to_bits(F32, Fraction(x)) == int(np.float32(x).view(np.uint32)), x  # RNE, subnormals, Inf
            assert round_to_bits(F16, Fraction(x)) == int(np.float16(x).view(np.uint16)), x
            x32 = float(np.float32(x))
            if x32 != 0 and np.isfinite(x32):
                want = int(np.float32(x32).astype(ml_dtypes.bfloat16).view(np.uint16))
                assert round_to_bits(BF16, Fraction(x32)) == want, x32
