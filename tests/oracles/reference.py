"""A slow, obvious scalar reference for the 25 sparse builtins, written from the specs only.

Nothing here imports jwmma. Sources: BUILTINS.md sections 1 (register packing, index fields,
generic semantics), 2.1/2.2 (RDNA4 table and layouts), 4.1/4.2 (CDNA4 table and layouts), 5
(hipSPARSELt padding); NUMERICS.md "exact" (one rounding) and section 4 (integer staging).

Values are Python ints and ``fractions.Fraction``; every loop runs over single elements.
The reference works on *one wave*: registers are numpy arrays of shape (lanes, n).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, lru_cache

import ml_dtypes
import numpy as np

from . import formats as _f
from .formats import BF8, BF16, F16, F32, FP8, I32_MAX, I32_MIN, Fmt, encode_fraction, sat32, wrap32  # noqa: F401

# ===================================================================================== formats
# Fmt and the rounding are shared with the other oracles (tests/oracles/formats.py); these are
# the forms this module's callers use.

FMTS = {f.name: f for f in (F32, F16, BF16, FP8, BF8)}
QNAN = {f.name: _f.qnan(f) for f in (F32, F16, BF16)}


def is_nan_code(fmt: Fmt, code: int) -> bool:
    return _f.decode(code, fmt).kind == "nan"


def is_inf_code(fmt: Fmt, code: int) -> bool:
    return _f.decode(code, fmt).kind == "inf"


@lru_cache(maxsize=None)
def decode(fmt: Fmt, code: int):
    """-> (kind, sign, value): kind 'nan' | 'inf' | 'num'; value a signed Fraction for 'num'
    (the sign of a zero is only in ``sign``)."""
    v = _f.decode(code, fmt)
    return (v.kind, v.neg, _f.value(code, fmt) if v.kind == "num" else None)


def inf_bits(fmt: Fmt, sign: int) -> int:
    return _f.inf_bits(fmt, sign)


def round_to_bits(fmt: Fmt, x: Fraction) -> int:
    """Round the non-zero exact value x to ``fmt``: nearest, ties to even, gradual underflow,
    overflow to Inf. A value that rounds to zero keeps its sign."""
    assert x != 0
    return encode_fraction(fmt, x)


def encode(fmt: Fmt, x, negative_zero=False) -> int:
    """The code of the exactly representable value x (asserts it is representable)."""
    x = Fraction(x)
    if x == 0:
        return (1 << (fmt.bits - 1)) if negative_zero else 0
    bits = round_to_bits(fmt, x)
    assert decode(fmt, bits) == ("num", int(x < 0), x), f"{x} is not representable in {fmt.name}"
    return bits


def grid_exp(fmt: Fmt) -> int:
    """S such that every finite value of fmt is an integer multiple of 2**-S (the subnormal
    quantum 2**(1 - bias - mbits))."""
    return fmt.bias + fmt.mbits - 1


_SCALED = {}


def decode_scaled(fmt: Fmt, code: int):
    """-> (kind, sign, N) with value = N * 2**-grid_exp(fmt) exactly (N a signed int)."""
    key = (fmt.name, code)
    hit = _SCALED.get(key)
    if hit is None:
        kind, sign, v = decode(fmt, code)
        n = None
        if kind == "num":
            n = v * Fraction(2) ** grid_exp(fmt)
            assert n.denominator == 1
            n = int(n)
        hit = _SCALED[key] = (kind, sign, n)
    return hit


def float_dot_bits(out: Fmt, fa: Fmt, fb: Fmt, fc: Fmt, pairs, c_code: int) -> int:
    """The `exact` model for one output: bits of RN(sum a*b + c) in ``out``.

    pairs: (a_code, b_code) of every product. IEEE specials: any NaN factor or NaN C, Inf*0,
    or +Inf and -Inf together give NaN (returned as the canonical quiet NaN: compare NaN-ness
    only); an exact zero is +0 unless every product and C are -0.

    The sum is exact: products are integers on the grid 2**-(Sa+Sb), C on 2**-Sc; both are
    moved to the finer grid with Python ints and the total is rounded once."""
    nan = pinf = ninf = False
    sp = grid_exp(fa) + grid_exp(fb)
    sc = grid_exp(fc)
    g = max(sp, sc)
    total = 0  # in units of 2**-g
    all_neg_zero = True
    for ac, bc in pairs:
        ka, sa, na = decode_scaled(fa, ac)
        kb, sb, nb = decode_scaled(fb, bc)
        sg = sa ^ sb
        if ka == "nan" or kb == "nan":
            nan = True
            continue
        if ka == "inf" or kb == "inf":
            if (ka == "num" and na == 0) or (kb == "num" and nb == 0):
                nan = True  # Inf * 0
            elif sg:
                ninf = True
            else:
                pinf = True
            continue
        p = na * nb
        total += p << (g - sp)
        if not (p == 0 and sg == 1):
            all_neg_zero = False
    kc, sgc, nc = decode_scaled(fc, c_code)
    if kc == "nan":
        nan = True
    elif kc == "inf":
        if sgc:
            ninf = True
        else:
            pinf = True
    else:
        total += nc << (g - sc)
        if not (nc == 0 and sgc == 1):
            all_neg_zero = False
    if nan or (pinf and ninf):
        return QNAN[out.name]
    if pinf:
        return inf_bits(out, 0)
    if ninf:
        return inf_bits(out, 1)
    if total == 0:
        return (1 << (out.bits - 1)) if all_neg_zero else 0
    return round_to_bits(out, Fraction(total, 2**g))


# ============================================================================ builtin table

# BUILTINS.md 2.1 / 4.1: name -> (arch, M, dense K, A type, B type, C type, HIP vector lengths
# of A, B, C per lane)
TABLE = {
    "swmmac_f32_16x16x32_f16_w32": ("gfx12", 16, 32, "f16", "f16", "f32", 8, 16, 8),
    "swmmac_f32_16x16x32_bf16_w32": ("gfx12", 16, 32, "bf16", "bf16", "f32", 8, 16, 8),
    "swmmac_f16_16x16x32_f16_w32": ("gfx12", 16, 32, "f16", "f16", "f16", 8, 16, 8),
    "swmmac_bf16_16x16x32_bf16_w32": ("gfx12", 16, 32, "bf16", "bf16", "bf16", 8, 16, 8),
    "swmmac_i32_16x16x32_iu8_w32": ("gfx12", 16, 32, "iu8", "iu8", "i32", 2, 4, 8),
    "swmmac_i32_16x16x32_iu4_w32": ("gfx12", 16, 32, "iu4", "iu4", "i32", 1, 2, 8),
    "swmmac_i32_16x16x64_iu4_w32": ("gfx12", 16, 64, "iu4", "iu4", "i32", 2, 4, 8),
    "swmmac_f32_16x16x32_fp8_fp8_w32": ("gfx12", 16, 32, "fp8", "fp8", "f32", 2, 4, 8),
    "swmmac_f32_16x16x32_fp8_bf8_w32": ("gfx12", 16, 32, "fp8", "bf8", "f32", 2, 4, 8),
    "swmmac_f32_16x16x32_bf8_fp8_w32": ("gfx12", 16, 32, "bf8", "fp8", "f32", 2, 4, 8),
    "swmmac_f32_16x16x32_bf8_bf8_w32": ("gfx12", 16, 32, "bf8", "bf8", "f32", 2, 4, 8),
    "smfmac_f32_16x16x64_f16": ("gfx950", 16, 64, "f16", "f16", "f32", 8, 16, 4),
    "smfmac_f32_32x32x32_f16": ("gfx950", 32, 32, "f16", "f16", "f32", 8, 16, 16),
    "smfmac_f32_16x16x64_bf16": ("gfx950", 16, 64, "bf16", "bf16", "f32", 8, 16, 4),
    "smfmac_f32_32x32x32_bf16": ("gfx950", 32, 32, "bf16", "bf16", "f32", 8, 16, 16),
    "smfmac_i32_16x16x128_i8": ("gfx950", 16, 128, "i8", "i8", "i32", 4, 8, 4),
    "smfmac_i32_32x32x64_i8": ("gfx950", 32, 64, "i8", "i8", "i32", 4, 8, 16),
    "smfmac_f32_16x16x128_fp8_fp8": ("gfx950", 16, 128, "fp8", "fp8", "f32", 4, 8, 4),
    "smfmac_f32_16x16x128_fp8_bf8": ("gfx950", 16, 128, "fp8", "bf8", "f32", 4, 8, 4),
    "smfmac_f32_16x16x128_bf8_fp8": ("gfx950", 16, 128, "bf8", "fp8", "f32", 4, 8, 4),
    "smfmac_f32_16x16x128_bf8_bf8": ("gfx950", 16, 128, "bf8", "bf8", "f32", 4, 8, 4),
    "smfmac_f32_32x32x64_fp8_fp8": ("gfx950", 32, 64, "fp8", "fp8", "f32", 4, 8, 16),
    "smfmac_f32_32x32x64_fp8_bf8": ("gfx950", 32, 64, "fp8", "bf8", "f32", 4, 8, 16),
    "smfmac_f32_32x32x64_bf8_fp8": ("gfx950", 32, 64, "bf8", "fp8", "f32", 4, 8, 16),
    "smfmac_f32_32x32x64_bf8_bf8": ("gfx950", 32, 64, "bf8", "bf8", "f32", 4, 8, 16),
}
NAMES = list(TABLE)
RDNA4 = [n for n in NAMES if TABLE[n][0] == "gfx12"]
CDNA4 = [n for n in NAMES if TABLE[n][0] == "gfx950"]
ELEM_BITS = {"f16": 16, "bf16": 16, "fp8": 8, "bf8": 8, "iu8": 8, "i8": 8, "iu4": 4}


@dataclass(frozen=True)
class Ref:
    name: str

    # ---- table facts (cached on the instance, whose __dict__ `cached_property` writes past
    # the frozen dataclass's __setattr__: the layouts ask for them per element)
    @cached_property
    def row(self):
        return TABLE[self.name]

    @cached_property
    def arch(self):
        return self.row[0]

    @cached_property
    def wave(self):
        return 32 if self.arch == "gfx12" else 64

    @cached_property
    def m(self):
        return self.row[1]

    @cached_property
    def n(self):
        return self.row[1]

    @cached_property
    def kd(self):
        return self.row[2]

    @cached_property
    def kc(self):
        return self.kd // 2

    @cached_property
    def a_type(self):
        return self.row[3]

    @cached_property
    def b_type(self):
        return self.row[4]

    @cached_property
    def c_type(self):
        return self.row[5]

    @cached_property
    def a_vec(self):
        return self.row[6]

    @cached_property
    def b_vec(self):
        return self.row[7]

    @cached_property
    def c_vec(self):
        return self.row[8]

    @cached_property
    def bits(self):  # element bits of A and B
        return ELEM_BITS[self.a_type]

    @cached_property
    def na(self):  # A elements per lane
        return self.m * self.kc // self.wave

    @cached_property
    def nb(self):
        return self.kd * self.n // self.wave

    @cached_property
    def nc(self):
        return self.m * self.n // self.wave

    @cached_property
    def integer(self):
        return self.c_type == "i32"

    @cached_property
    def signed_choice(self):
        return self.a_type in ("iu8", "iu4")

    @cached_property
    def float_types(self):
        return FMTS.get(self.a_type), FMTS.get(self.b_type), FMTS.get(self.c_type)

    # ---- register dtypes (API.md section 1)
    def reg_dtype(self, which):
        if which == "c":
            return {
                "f32": np.dtype(np.float32),
                "i32": np.dtype(np.int32),
                "f16": np.dtype(np.float16),
                "bf16": np.dtype(np.int16),  # RDNA4 v8 short
            }[self.c_type]
        t = self.a_type if which == "a" else self.b_type
        if self.bits < 16:
            return np.dtype(np.int32)
        if t == "f16":
            return np.dtype(np.float16)
        return np.dtype(np.int16) if self.arch == "gfx12" else np.dtype(ml_dtypes.bfloat16)

    def vec(self, which):
        return {"a": self.a_vec, "b": self.b_vec, "c": self.c_vec}[which]

    def elems(self, which):
        return {"a": self.na, "b": self.nb, "c": self.nc}[which]

    def elem_bits(self, which):
        if which == "c":
            return 32 if self.c_type in ("f32", "i32") else 16
        return self.bits

    # ---- layouts (BUILTINS.md 2.2 and 4.2)
    def a_coord(self, lane, e):
        """(row i, compressed column c) of A element e of ``lane``."""
        if self.arch == "gfx12":
            h, r = lane // 16, lane % 16
            if self.bits == 16:
                return r, 8 * (e // 4) + 4 * h + e % 4
            return r, self.na * h + e
        g, r = lane // self.m, lane % self.m
        return r, self.na * g + e

    def b_coord(self, lane, f):
        """(dense k, column j) of B element f of ``lane``."""
        if self.arch == "gfx12":
            h, r = lane // 16, lane % 16
            if self.bits == 16:
                return 16 * (f // 8) + 8 * h + f % 8, r
            return self.nb * h + f, r
        g, r = lane // self.m, lane % self.m
        half = self.nb // 2
        return (f // half) * (self.kd // 2) + half * g + f % half, r

    def c_coord(self, lane, t):
        """(row i, column j) of accumulator element t of ``lane``."""
        if self.arch == "gfx12":
            return 8 * (lane // 16) + t, lane % 16
        if self.m == 16:
            return 4 * (lane // 16) + t, lane % 16
        return 8 * (t // 4) + 4 * (lane // 32) + t % 4, lane % 32

    @lru_cache(maxsize=1 << 16)  # asked once per element of every operand; a Ref is frozen (its name)
    def coord(self, which, lane, x):
        return {"a": self.a_coord, "b": self.b_coord, "c": self.c_coord}[which](lane, x)

    def shape(self, which):
        return {"a": (self.m, self.kc), "b": (self.kd, self.n), "c": (self.m, self.n)}[which]

    # ---- index sets
    @property
    def index_sets(self):
        """Bit offset s of every index set (set number -> s)."""
        if self.arch == "gfx12":
            return (0,) if (self.a_type == "iu4" and self.kd == 64) else (0, 16)
        return (0, 16) if self.bits == 16 else (0,)

    def cdna4_offset(self, cbsz, abid):
        """gfx950: 16-bit types use set abid[0] when cbsz[1:0] == 0, else set 0; 8-bit: 0."""
        if self.bits == 16 and (cbsz & 3) == 0:
            return 16 * (abid & 1)
        return 0

    def index_bits_used(self, s):
        return range(s, s + 2 * self.na)


# ==================================================================== registers <-> codes


def lane_codes_to_regs(ref: Ref, which: str, codes) -> np.ndarray:
    """(lanes, elems) element bit patterns (ints; signed values allowed for ints) ->
    (lanes, vec) registers: 16-bit elements one per vector entry, 8/4-bit elements packed
    little-endian in 32-bit words, 32-bit accumulators as they are."""
    lanes, n = ref.wave, ref.elems(which)
    w = ref.elem_bits(which)
    dt = ref.reg_dtype(which)
    out = np.zeros((lanes, ref.vec(which)), np.uint64)
    for lane in range(lanes):
        for e in range(n):
            code = int(codes[lane][e]) & ((1 << w) - 1)
            if w >= 16:
                out[lane, e] = code
            else:
                word, bit = (e * w) // 32, (e * w) % 32
                out[lane, word] = int(out[lane, word]) | (code << bit)
    if w == 16:
        return out.astype(np.uint16).view(dt)
    return out.astype(np.uint32).view(dt)


def regs_to_lane_codes(ref: Ref, which: str, regs) -> list:
    """Inverse: (lanes, vec) registers -> (lanes, elems) unsigned element codes (lists)."""
    w = ref.elem_bits(which)
    regs = np.asarray(regs)
    words = regs.view(np.uint16 if regs.dtype.itemsize == 2 else np.uint32)
    out = []
    for lane in range(ref.wave):
        row = []
        for e in range(ref.elems(which)):
            if w >= 16:
                row.append(int(words[lane, e]))
            else:
                word, bit = (e * w) // 32, (e * w) % 32
                row.append((int(words[lane, word]) >> bit) & ((1 << w) - 1))
        out.append(row)
    return out


def matrix_to_lane_codes(ref: Ref, which: str, mat) -> list:
    out = []
    for lane in range(ref.wave):
        out.append([mat[ref.coord(which, lane, x)[0]][ref.coord(which, lane, x)[1]] for x in range(ref.elems(which))])
    return out


def lane_codes_to_matrix(ref: Ref, which: str, lane_codes) -> list:
    rows, cols = ref.shape(which)
    mat = [[None] * cols for _ in range(rows)]
    for lane in range(ref.wave):
        for x in range(ref.elems(which)):
            i, j = ref.coord(which, lane, x)
            assert mat[i][j] is None, "layout covers an element twice"
            mat[i][j] = lane_codes[lane][x]
    assert all(v is not None for row in mat for v in row), "layout misses an element"
    return mat


def pack_matrix(ref: Ref, which: str, mat) -> np.ndarray:
    return lane_codes_to_regs(ref, which, matrix_to_lane_codes(ref, which, mat))


def pack_index(ref: Ref, pos, s: int, garbage: int = 0) -> np.ndarray:
    """(M, Kc) positions -> (lanes,) int32 index words: bits s+2e+1:s+2e = position of the
    lane's A element e. ``garbage`` (a (lanes,) list of ints or 0) fills the other bits."""
    words = []
    for lane in range(ref.wave):
        w = 0
        for e in range(ref.na):
            i, c = ref.a_coord(lane, e)
            w |= (int(pos[i][c]) & 3) << (s + 2 * e)
        used = sum(3 << (s + 2 * e) for e in range(ref.na))
        g = int(garbage[lane]) if not isinstance(garbage, int) else garbage
        words.append((w | (g & ~used)) & 0xFFFFFFFF)
    return np.array(words, np.uint32).view(np.int32)


def unpack_index(ref: Ref, idx, s: int) -> list:
    rows, cols = ref.shape("a")
    pos = [[None] * cols for _ in range(rows)]
    for lane in range(ref.wave):
        w = int(np.asarray(idx).view(np.uint32)[lane])
        for e in range(ref.na):
            i, c = ref.a_coord(lane, e)
            pos[i][c] = (w >> (s + 2 * e)) & 3
    return pos


int_value = _f.int_decode


# ============================================================================ the reference


def reference(name, a, b, c, idx, *, s=0, a_signed=True, b_signed=True, clamp=False, staged=False):
    """D registers of one wave under the generic semantics of BUILTINS.md section 1.

    a, b, c: (lanes, vec) registers; idx: (lanes,) int32. ``s``: offset of the index set.
    Floats: the `exact` model. Integers: exact dot; clamp off wraps mod 2**32; clamp on
    saturates once at the end, or (``staged``) after each of two stages: compressed columns
    ck < Kc/2 (lane half 0), then the rest (GoC's gfx1201 digests, issue #13).
    """
    ref = Ref(name)
    a_l = regs_to_lane_codes(ref, "a", a)
    b_mat = lane_codes_to_matrix(ref, "b", regs_to_lane_codes(ref, "b", b))  # Bdense[k][j]
    c_l = regs_to_lane_codes(ref, "c", c)
    c_mat = lane_codes_to_matrix(ref, "c", c_l)
    words = np.asarray(idx).view(np.uint32)
    # terms[i][j]: (a code, b code, compressed column) of every product of output (i, j)
    terms = [[[] for _ in range(ref.n)] for _ in range(ref.m)]
    for lane in range(ref.wave):
        for e in range(ref.na):
            i, col = ref.a_coord(lane, e)
            q = col // 2  # dense group of the stored element
            p = (int(words[lane]) >> (s + 2 * e)) & 3
            k = 4 * q + p
            for j in range(ref.n):
                terms[i][j].append((a_l[lane][e], b_mat[k][j], col))
    d_mat = [[None] * ref.n for _ in range(ref.m)]
    for i in range(ref.m):
        for j in range(ref.n):
            if ref.integer:
                d_mat[i][j] = _int_out(ref, terms[i][j], c_mat[i][j], a_signed, b_signed, clamp, staged)
            else:
                fa, fb, fc = ref.float_types
                d_mat[i][j] = float_dot_bits(fc, fa, fb, fc, [(x, y) for x, y, _ in terms[i][j]], c_mat[i][j])
    return pack_matrix(ref, "c", d_mat)


def _int_out(ref, terms, c_code, a_signed, b_signed, clamp, staged):
    cval = int_value(c_code, 32, True)
    stage = [0, 0]
    for ac, bc, col in terms:
        stage[int(2 * col >= ref.kc)] += int_value(ac, ref.bits, a_signed) * int_value(bc, ref.bits, b_signed)
    if not clamp:
        return wrap32(cval + stage[0] + stage[1])
    if staged:
        return sat32(sat32(cval + stage[0]) + stage[1])
    return sat32(cval + stage[0] + stage[1])


def dense_exact_f32(a_vals, b_vals, c_vals):
    """Exactly rounded f32 bits of A @ B + C for finite Fraction matrices (lists)."""
    m, k, n = len(a_vals), len(b_vals), len(b_vals[0])
    out = [[0] * n for _ in range(m)]
    for i in range(m):
        for j in range(n):
            t = sum((a_vals[i][x] * b_vals[x][j] for x in range(k)), Fraction(0)) + c_vals[i][j]
            out[i][j] = 0 if t == 0 else round_to_bits(F32, t)
    return out


# ================================================================================ comparisons


def out_fmt(ref: Ref):
    return FMTS.get(ref.c_type)


def bits_of(x) -> np.ndarray:
    x = np.asarray(x)
    return x.view({2: np.uint16, 4: np.uint32}[x.dtype.itemsize]).astype(np.int64)


def assert_same_bits(got, want, fmt: Fmt | None, what=""):
    """Bit equality; NaN compares by NaN-ness only (fmt None: integers)."""
    g, w = bits_of(got), bits_of(want)
    assert g.shape == w.shape, (g.shape, w.shape)
    if fmt is None:
        bad = g != w
    else:
        nan_g = np.vectorize(lambda v: is_nan_code(fmt, int(v)))(g) if g.size else g.astype(bool)
        nan_w = np.vectorize(lambda v: is_nan_code(fmt, int(v)))(w) if w.size else w.astype(bool)
        bad = (nan_g != nan_w) | (~nan_w & (g != w))
    if bad.any():
        where = np.argwhere(bad)[:8]
        lines = [f"{tuple(int(t) for t in p)}: got {int(g[tuple(p)]):#x} want {int(w[tuple(p)]):#x}" for p in where]
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} differ; first: " + "; ".join(lines))


# ============================================================================ test-data helpers


def max_finite_field(fmt: Fmt):
    return fmt.emask - 1 if fmt.nan == "ieee" else fmt.emask


def rand_float_codes(rng, fmt: Fmt, mode: str, shape):
    """Random bit patterns of ``fmt``.

    narrow: exponents within +-3 of 1.0 (rounding and cancellation happen), 10 % zeros;
    wide: any finite value (subnormals, zeros and large exponent spread included);
    tiny: subnormals, the smallest normals and signed zeros;
    huge: the three largest exponents (overflow);
    special: like wide, 4 % NaN / Inf (E4M3FN: NaN only, 0x7F / 0xFF)."""
    shape = tuple(shape)
    sign = rng.integers(0, 2, shape)
    mant = rng.integers(0, 1 << fmt.mbits, shape)
    top = max_finite_field(fmt)
    if mode == "narrow":
        e = np.clip(fmt.bias + rng.integers(-3, 4, shape), 1, top)
        zero = rng.random(shape) < 0.1
        e = np.where(zero, 0, e)
        mant = np.where(zero, 0, mant)
    elif mode == "wide":
        e = rng.integers(0, top + 1, shape)
    elif mode == "tiny":
        e = rng.choice([0, 0, 0, 1, 2], shape)
        zero = rng.random(shape) < 0.2
        mant = np.where(zero, 0, mant)
    elif mode == "huge":
        e = rng.integers(top - 2, top + 1, shape)
    elif mode == "special":
        e = rng.integers(0, top + 1, shape)
    else:
        raise ValueError(mode)
    codes = (sign << (fmt.bits - 1)) | (e << fmt.mbits) | mant
    if fmt.nan == "fn":  # S.1111.111 is NaN: keep finite codes finite
        codes = np.where((codes & 0x7F) == 0x7F, codes - 1, codes)
    if mode == "special":
        sp = rng.random(shape) < 0.04
        if fmt.nan == "fn":
            spc = rng.choice([0x7F, 0xFF], shape)
        else:
            spc = (sign << (fmt.bits - 1)) | (fmt.emask << fmt.mbits) | rng.choice([0, 0, 1, fmt.mmask], shape)
        codes = np.where(sp, spc, codes)
    return codes.astype(np.int64)


def special_codes(fmt: Fmt):
    """NaN and Inf codes of fmt (E4M3FN: its two NaNs)."""
    if fmt.nan == "fn":
        return [0x7F, 0xFF]
    s = 1 << (fmt.bits - 1)
    inf = fmt.emask << fmt.mbits
    return [inf, s | inf, inf | 1, s | inf | fmt.mmask]


def rand_positions(rng, m, kc, valid=True):
    """(M, Kc) positions: valid -> every pair increasing (p0 < p1); else any 2-bit values."""
    if not valid:
        return rng.integers(0, 4, (m, kc))
    pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    pick = rng.integers(0, 6, (m, kc // 2))
    return np.array([[pairs[pick[i, t]][x] for t in range(kc // 2) for x in (0, 1)] for i in range(m)])
