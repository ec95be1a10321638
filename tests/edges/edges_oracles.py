"""Independent references for the edge-case suite (issue #10). NEVER imports jwmma.

Everything here is written from the specifications, slow and obvious:

* the builtin table and register layouts: /work/shared/spec/BUILTINS.md sections 1, 2.1-2.2
  (RDNA4) and 4.1-4.2 (CDNA4), transcribed as formulas;
* registers <-> matrices: BUILTINS.md section 1 (little-endian packing of 16/8/4-bit
  elements into 32-bit words) and the index rule bits [s+2e+1 : s+2e];
* arithmetic: the `exact` model of NUMERICS.md section 0 (exact products, exact sum with C,
  one round-to-nearest-even into the destination format with gradual underflow, overflow to
  Inf, IEEE special values, an exact zero is +0 unless every product and C are -0), and the
  integer semantics of section 4 (exact sum, wrap modulo 2^32 or saturate once);
* 2:4 helpers: API.md section 4 and BUILTINS.md section 5 (hipSPARSELt padding);
* hipSPARSELt's pruning kernel (`prune_strip_kernel` in hipSPARSELt's rocsparselt_prune.cpp,
  read through the search tool): described and re-implemented in `prune_hipsparselt_group`.

Values are Python ints and exact rationals (integers scaled by a power of two); numpy is
used only to hold arrays and to reinterpret bit patterns.
"""
from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import ml_dtypes
import numpy as np

# ------------------------------------------------------------------------------ formats
#: element formats: (exponent bits, mantissa bits, bias, has_inf, numpy dtype)
FLOAT_FORMATS = {
    "f32": (8, 23, 127, True, np.dtype(np.float32)),
    "f16": (5, 10, 15, True, np.dtype(np.float16)),
    "bf16": (8, 7, 127, True, np.dtype(ml_dtypes.bfloat16)),
    "fp8": (4, 3, 7, False, np.dtype(ml_dtypes.float8_e4m3fn)),   # OCP E4M3FN (gfx950, gfx12)
    "bf8": (5, 2, 15, True, np.dtype(ml_dtypes.float8_e5m2)),     # OCP E5M2
}
ELEM_BITS = {"f32": 32, "i32": 32, "f16": 16, "bf16": 16, "fp8": 8, "bf8": 8, "iu8": 8, "i8": 8, "iu4": 4}
UINT_OF_WIDTH = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def float_bits(x) -> np.ndarray:
    """Bit patterns (unsigned ints of the same width) of a float array."""
    x = np.asarray(x)
    return x.view(UINT_OF_WIDTH[x.dtype.itemsize])


def decode(fmt: str, code: int):
    """Bit pattern -> ('nan',) | ('inf', sign) | ('num', Fraction, sign_bit)."""
    ebits, mbits, bias, has_inf, _ = FLOAT_FORMATS[fmt]
    total = 1 + ebits + mbits
    code &= (1 << total) - 1
    sign = code >> (total - 1)
    e = (code >> mbits) & ((1 << ebits) - 1)
    m = code & ((1 << mbits) - 1)
    emax_field = (1 << ebits) - 1
    if has_inf and e == emax_field:
        return ("nan",) if m else ("inf", sign)
    if not has_inf and e == emax_field and m == (1 << mbits) - 1:  # E4M3FN: S.1111.111 is NaN
        return ("nan",)
    if e == 0:
        mag = Fraction(m, 1 << mbits) * Fraction(2) ** (1 - bias)
    else:
        mag = Fraction((1 << mbits) | m, 1 << mbits) * Fraction(2) ** (e - bias)
    return ("num", -mag if sign else mag, sign)


def round_to(fmt: str, value: Fraction) -> int:
    """Round-to-nearest-even of a (nonzero or zero) rational into ``fmt`` bits (+0 for 0).
    Gradual underflow; overflow to Inf (the formats used as destinations all have Inf)."""
    ebits, mbits, bias, has_inf, _ = FLOAT_FORMATS[fmt]
    assert has_inf
    sign = 1 if value < 0 else 0
    mag = -value if sign else value
    sbit = sign << (ebits + mbits)
    if mag == 0:
        return sbit
    emin = 1 - bias
    # exponent of the leading bit
    e = mag.numerator.bit_length() - mag.denominator.bit_length()
    if Fraction(2) ** e > mag:
        e -= 1
    e = max(e, emin)
    q = e - mbits  # quantum
    scaled = mag / Fraction(2) ** q
    sig = scaled.numerator // scaled.denominator
    rem = scaled - sig
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and sig % 2 == 1):
        sig += 1
    if sig == 1 << (mbits + 1):
        sig >>= 1
        e += 1
    if sig >= 1 << mbits:
        field = e + bias
        if field >= (1 << ebits) - 1:
            return sbit | (((1 << ebits) - 1) << mbits)  # Inf
        return sbit | (field << mbits) | (sig - (1 << mbits))
    return sbit | sig  # subnormal (e == emin)


def qnan_like(fmt: str) -> int:
    ebits, mbits, *_ = FLOAT_FORMATS[fmt]
    return (((1 << ebits) - 1) << mbits) | (1 << (mbits - 1))


def is_nan_bits(fmt: str, code: int) -> bool:
    return decode(fmt, code)[0] == "nan"


# ------------------------------------------------------------------------------ table
@dataclasses.dataclass(frozen=True)
class Builtin:
    """One row of BUILTINS.md 2.1 / 4.1, with what the formulas of 2.2 / 4.2 need."""

    name: str
    arch: str          # "gfx12" | "gfx950"
    m: int
    n: int
    k: int             # dense K
    a_type: str
    b_type: str
    c_type: str
    na: int            # stored A elements per lane
    nb: int            # B elements per lane
    nc: int            # C/D elements per lane

    @property
    def wave(self):
        return 32 if self.arch == "gfx12" else 64

    @property
    def kc(self):
        return self.k // 2

    @property
    def integer(self):
        return self.c_type == "i32"

    @property
    def signed_choice(self):
        return self.a_type in ("iu8", "iu4")

    @property
    def index_sets(self):
        """Bit offsets s of the index sets."""
        if self.arch == "gfx12":
            return (0,) if self.k == 64 else (0, 16)     # iu4 16x16x64: one 32-bit set
        return (0, 16) if ELEM_BITS[self.a_type] == 16 else (0,)

    def regs(self, which: str) -> int:
        """HIP vector length n of operand a/b/c."""
        t = getattr(self, f"{which}_type")
        elems = getattr(self, f"n{which}")
        bits = ELEM_BITS[t]
        return elems if bits >= 16 else elems * bits // 32

    def reg_dtypes(self, which: str):
        """Accepted register dtypes, the canonical one (API.md section 1) first; the others
        hold the same bits (uint32 words; uint16 bit patterns for bf16: jwmma's extensions)."""
        t = getattr(self, f"{which}_type")
        if ELEM_BITS[t] < 16:
            return (np.dtype(np.int32), np.dtype(np.uint32))
        if t == "i32":
            return (np.dtype(np.int32),)
        if t == "f32":
            return (np.dtype(np.float32),)
        if t == "f16":
            return (np.dtype(np.float16),)
        # bf16: RDNA4 stores shorts; CDNA4 __bf16 (int16/uint16 bit patterns also accepted)
        if self.arch == "gfx12":
            return (np.dtype(np.int16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.uint16))
        return (np.dtype(ml_dtypes.bfloat16), np.dtype(np.int16), np.dtype(np.uint16))


def _table():
    rows = []
    r4 = [
        ("swmmac_f32_16x16x32_f16_w32", "f16", "f16", "f32", 32),
        ("swmmac_f32_16x16x32_bf16_w32", "bf16", "bf16", "f32", 32),
        ("swmmac_f16_16x16x32_f16_w32", "f16", "f16", "f16", 32),
        ("swmmac_bf16_16x16x32_bf16_w32", "bf16", "bf16", "bf16", 32),
        ("swmmac_i32_16x16x32_iu8_w32", "iu8", "iu8", "i32", 32),
        ("swmmac_i32_16x16x32_iu4_w32", "iu4", "iu4", "i32", 32),
        ("swmmac_i32_16x16x64_iu4_w32", "iu4", "iu4", "i32", 64),
        ("swmmac_f32_16x16x32_fp8_fp8_w32", "fp8", "fp8", "f32", 32),
        ("swmmac_f32_16x16x32_fp8_bf8_w32", "fp8", "bf8", "f32", 32),
        ("swmmac_f32_16x16x32_bf8_fp8_w32", "bf8", "fp8", "f32", 32),
        ("swmmac_f32_16x16x32_bf8_bf8_w32", "bf8", "bf8", "f32", 32),
    ]
    for name, at, bt, ct, k in r4:
        na = 16 if k == 64 else 8
        nb = 32 if k == 64 else 16
        rows.append(Builtin(name, "gfx12", 16, 16, k, at, bt, ct, na, nb, 8))
    c4 = [("smfmac_f32_16x16x64_f16", "f16", "f16", 16, 64), ("smfmac_f32_32x32x32_f16", "f16", "f16", 32, 32),
          ("smfmac_f32_16x16x64_bf16", "bf16", "bf16", 16, 64), ("smfmac_f32_32x32x32_bf16", "bf16", "bf16", 32, 32)]
    c4 += [("smfmac_i32_16x16x128_i8", "i8", "i8", 16, 128), ("smfmac_i32_32x32x64_i8", "i8", "i8", 32, 64)]
    for a in ("fp8", "bf8"):
        for b in ("fp8", "bf8"):
            c4.append((f"smfmac_f32_16x16x128_{a}_{b}", a, b, 16, 128))
            c4.append((f"smfmac_f32_32x32x64_{a}_{b}", a, b, 32, 64))
    for name, at, bt, m, k in c4:
        bits = ELEM_BITS[at]
        na = 8 if bits == 16 else 16
        nb = 2 * na
        ct = "i32" if at == "i8" else "f32"
        rows.append(Builtin(name, "gfx950", m, m, k, at, bt, ct, na, nb, 4 if m == 16 else 16))
    return {r.name: r for r in rows}


TABLE = _table()
NAMES = tuple(TABLE)


# ------------------------------------------------------------------------------ layouts
def a_layout(bt: Builtin) -> np.ndarray:
    """[lane, e] -> (row i, compressed column c) (BUILTINS.md 2.2 / 4.2)."""
    out = np.zeros((bt.wave, bt.na, 2), np.int64)
    for lane in range(bt.wave):
        for e in range(bt.na):
            if bt.arch == "gfx12":
                h, r = lane // 16, lane % 16
                if ELEM_BITS[bt.a_type] == 16:
                    c = 8 * (e // 4) + 4 * h + e % 4
                else:
                    c = bt.na * h + e
                out[lane, e] = (r, c)
            else:
                g, r = lane // bt.m, lane % bt.m
                out[lane, e] = (r, bt.na * g + e)
    return out


def b_layout(bt: Builtin) -> np.ndarray:
    """[lane, f] -> (dense k, column j)."""
    out = np.zeros((bt.wave, bt.nb, 2), np.int64)
    for lane in range(bt.wave):
        for f in range(bt.nb):
            if bt.arch == "gfx12":
                h, r = lane // 16, lane % 16
                if ELEM_BITS[bt.b_type] == 16:
                    k = 16 * (f // 8) + 8 * h + f % 8
                else:
                    k = bt.nb * h + f
                out[lane, f] = (k, r)
            else:
                g, r = lane // bt.m, lane % bt.m
                half = bt.nb // 2
                k = (f // half) * (bt.k // 2) + half * g + f % half
                out[lane, f] = (k, r)
    return out


def c_layout(bt: Builtin) -> np.ndarray:
    """[lane, t] -> (row i, column j)."""
    out = np.zeros((bt.wave, bt.nc, 2), np.int64)
    for lane in range(bt.wave):
        for t in range(bt.nc):
            if bt.arch == "gfx12":
                h, r = lane // 16, lane % 16
                out[lane, t] = (8 * h + t, r)
            elif bt.m == 16:
                out[lane, t] = (4 * (lane // 16) + t, lane % 16)
            else:
                out[lane, t] = (8 * (t // 4) + 4 * (lane // 32) + t % 4, lane % 32)
    return out


_LAYOUTS = {}


def layouts(bt: Builtin):
    if bt.name not in _LAYOUTS:
        _LAYOUTS[bt.name] = (a_layout(bt), b_layout(bt), c_layout(bt))
    return _LAYOUTS[bt.name]


# ------------------------------------------------------------------- element codes
def value_codes(t: str, x) -> np.ndarray:
    """Logical matrix values -> int64 bit patterns of element type t (ints: two's complement
    low bits). Raises ValueError for integers outside the type's range (the contract)."""
    x = np.asarray(x)
    if t in FLOAT_FORMATS:
        return float_bits(x).astype(np.int64)
    v = x.astype(np.int64)
    return v & ((1 << ELEM_BITS[t]) - 1)


def codes_to_values(t: str, codes, signed=True) -> np.ndarray:
    codes = np.asarray(codes, np.int64)
    if t in FLOAT_FORMATS:
        dt = FLOAT_FORMATS[t][4]
        return codes.astype(UINT_OF_WIDTH[dt.itemsize]).view(dt)
    bits = ELEM_BITS[t]
    v = codes & ((1 << bits) - 1)
    if t == "i32" or signed:
        v = np.where(v >= 1 << (bits - 1), v - (1 << bits), v)
    return v


def int_range(t: str, signed: bool):
    bits = ELEM_BITS[t]
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


# ------------------------------------------------------------- registers <-> matrices
def matrix_to_regs(bt: Builtin, which: str, codes, dtype=None) -> np.ndarray:
    """(*batch, R, C) element codes -> (*batch, lanes, n) registers (BUILTINS.md 1)."""
    lay = layouts(bt)["abc".index(which)]
    t = getattr(bt, f"{which}_type")
    bits = ELEM_BITS[t]
    codes = np.asarray(codes, np.int64)
    batch = codes.shape[:-2]
    lane_codes = codes[..., lay[..., 0], lay[..., 1]]  # (*batch, lanes, elems)
    dtype = np.dtype(dtype or bt.reg_dtypes(which)[0])
    if bits >= 16:
        width = UINT_OF_WIDTH[dtype.itemsize]
        return (lane_codes & ((1 << bits) - 1)).astype(width).view(dtype)
    per = 32 // bits
    n = bt.regs(which)
    words = np.zeros(batch + (bt.wave, n), np.int64)
    for e in range(lane_codes.shape[-1]):
        words[..., e // per] |= (lane_codes[..., e] & ((1 << bits) - 1)) << (bits * (e % per))
    return words.astype(np.uint32).view(np.int32)


def regs_to_matrix(bt: Builtin, which: str, regs) -> np.ndarray:
    """Inverse of `matrix_to_regs`: (*batch, lanes, n) -> (*batch, R, C) int64 codes."""
    lay = layouts(bt)["abc".index(which)]
    t = getattr(bt, f"{which}_type")
    bits = ELEM_BITS[t]
    regs = np.asarray(regs)
    batch = regs.shape[:-2]
    if bits >= 16:
        lane_codes = regs.view(UINT_OF_WIDTH[regs.dtype.itemsize]).astype(np.int64)
    else:
        words = regs.view(np.uint32).astype(np.int64)
        per = 32 // bits
        elems = lay.shape[1]
        lane_codes = np.zeros(batch + (bt.wave, elems), np.int64)
        for e in range(elems):
            lane_codes[..., e] = (words[..., e // per] >> (bits * (e % per))) & ((1 << bits) - 1)
    shape = {"a": (bt.m, bt.kc), "b": (bt.k, bt.n), "c": (bt.m, bt.n)}[which]
    out = np.zeros(batch + shape, np.int64)
    out[..., lay[..., 0], lay[..., 1]] = lane_codes
    return out


def pack_index(bt: Builtin, pos, s: int = 0) -> np.ndarray:
    """(*batch, M, Kc) positions 0..3 -> (*batch, lanes) int32 index words."""
    lay = layouts(bt)[0]
    pos = np.asarray(pos, np.int64)
    lane_pos = pos[..., lay[..., 0], lay[..., 1]]  # (*batch, lanes, na)
    words = np.zeros(pos.shape[:-2] + (bt.wave,), np.int64)
    for e in range(bt.na):
        words |= (lane_pos[..., e] & 3) << (s + 2 * e)
    return words.astype(np.uint32).view(np.int32)


def unpack_index(bt: Builtin, idx, s: int = 0) -> np.ndarray:
    lay = layouts(bt)[0]
    words = np.asarray(idx).view(np.uint32).astype(np.int64)
    out = np.zeros(words.shape[:-1] + (bt.m, bt.kc), np.int64)
    for e in range(bt.na):
        out[..., lay[:, e, 0], lay[:, e, 1]] = (words >> (s + 2 * e)) & 3
    return out


# ------------------------------------------------------------------- exact arithmetic
_NUM_CACHE: dict = {}


def _decoded(fmt, code):
    key = (fmt, int(code))
    got = _NUM_CACHE.get(key)
    if got is None:
        got = _NUM_CACHE[key] = decode(fmt, int(code))
    return got


def exact_dot(fa: str, fb: str, fc: str, a_codes, b_codes, c_code) -> int:
    """RN_fc(c + sum_k a_k * b_k) with IEEE specials (NUMERICS.md 0, the `exact` model).
    a_codes, b_codes: sequences of bit patterns; c_code: the accumulator's bits."""
    nan = False
    pinf = ninf = False
    total = Fraction(0)
    all_neg_zero = True
    for ac, bc in zip(a_codes, b_codes):
        x, y = _decoded(fa, ac), _decoded(fb, bc)
        if x[0] == "nan" or y[0] == "nan":
            nan = True
            continue
        if x[0] == "inf" or y[0] == "inf":
            other = y if x[0] == "inf" else x
            if other[0] == "num" and other[1] == 0:
                nan = True  # Inf * 0
                continue
            s = (x[1] if x[0] == "inf" else x[2]) ^ (y[1] if y[0] == "inf" else y[2])
            if s:
                ninf = True
            else:
                pinf = True
            continue
        p = x[1] * y[1]
        total += p
        if not (p == 0 and (x[2] ^ y[2]) == 1):
            all_neg_zero = False
    c = _decoded(fc, c_code)
    if c[0] == "nan":
        nan = True
    elif c[0] == "inf":
        if c[1]:
            ninf = True
        else:
            pinf = True
    else:
        total += c[1]
        if not (c[1] == 0 and c[2] == 1):
            all_neg_zero = False
    if nan or (pinf and ninf):
        return -1  # NaN (compared by NaN-ness)
    ebits, mbits, *_ = FLOAT_FORMATS[fc]
    if pinf or ninf:
        return ((1 if ninf else 0) << (ebits + mbits)) | (((1 << ebits) - 1) << mbits)
    if total == 0:
        return (1 << (ebits + mbits)) if all_neg_zero else 0
    return round_to(fc, total)


def builtin_reference(bt: Builtin, a_regs, b_regs, c_regs, idx, *, s=0, a_signed=True, b_signed=True,
                      clamp=False):
    """D registers of one call of builtin ``bt`` under the `exact` model, for broadcast
    (*batch) waves. Float D: uint bit patterns, with -1 marking NaN (compare NaN-ness);
    integer D: int64 values."""
    a_regs, b_regs, c_regs, idx = (np.asarray(x) for x in (a_regs, b_regs, c_regs, idx))
    batch = np.broadcast_shapes(a_regs.shape[:-2], b_regs.shape[:-2], c_regs.shape[:-2], idx.shape[:-1])
    a_regs = np.broadcast_to(a_regs, batch + a_regs.shape[-2:])
    b_regs = np.broadcast_to(b_regs, batch + b_regs.shape[-2:])
    c_regs = np.broadcast_to(c_regs, batch + c_regs.shape[-2:])
    idx = np.broadcast_to(idx, batch + idx.shape[-1:])
    A = regs_to_matrix(bt, "a", a_regs)
    B = regs_to_matrix(bt, "b", b_regs)
    C = regs_to_matrix(bt, "c", c_regs)
    P = unpack_index(bt, idx, s)
    D = gemm_step_reference(bt, A, P, B, C, a_signed=a_signed, b_signed=b_signed, clamp=clamp)
    lay = layouts(bt)[2]
    return D[..., lay[..., 0], lay[..., 1]]


def gemm_step_reference(bt, A, P, B, C, *, a_signed=True, b_signed=True, clamp=False):
    """One instruction on matrices: A (*b, M, Kc) codes, P positions, B (*b, K, N) codes,
    C (*b, M, N) codes -> D (*b, M, N) (floats: bits, -1 = NaN; ints: int64 values)."""
    batch = A.shape[:-2]
    m, kc = A.shape[-2:]
    n = B.shape[-1]
    D = np.zeros(batch + (m, n), np.int64)
    for w in np.ndindex(*batch):
        a, p, b, c = A[w], P[w], B[w], C[w]
        krow = 4 * (np.arange(kc) // 2)[None, :] + p  # (M, Kc) dense k of each stored value
        if bt.integer:
            av = codes_to_values(bt.a_type, a, a_signed)
            bv = codes_to_values(bt.b_type, b, b_signed)
            cv = codes_to_values("i32", c)
            for i in range(m):
                sel = bv[krow[i], :]  # (Kc, N)
                tot = cv[i].astype(object) + (av[i][:, None].astype(object) * sel.astype(object)).sum(axis=0)
                for j in range(n):
                    D[w + (i, j)] = wrap_or_clamp(int(tot[j]), clamp)
        else:
            for i in range(m):
                for j in range(n):
                    D[w + (i, j)] = exact_dot(bt.a_type, bt.b_type, bt.c_type, a[i], b[krow[i], j], c[i, j])
    return D


def wrap_or_clamp(v: int, clamp: bool) -> int:
    if clamp:
        return max(-(2**31), min(2**31 - 1, v))
    return (v + 2**31) % 2**32 - 2**31


# ------------------------------------------------------------------------- 2:4 helpers
def magnitude_key(dtype, v):
    """Exact |v| for ranking: Python int for integers, Fraction for floats; NaN ranks as Inf
    (jwmma's documented rule: a NaN stays visible), Inf as a value above every finite."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu" or dtype in (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4)):
        return (0, abs(int(v)))
    f = float(np.asarray(v, dtype).astype(np.float64))  # exact for every float dtype used
    if math.isnan(f) or math.isinf(f):
        return (1, 0)
    return (0, abs(Fraction(f)))


def prune_largest_group(dtype, group):
    """Indices (2) kept by "the two largest magnitudes, ties to the lower position"."""
    keys = [magnitude_key(dtype, v) for v in group]
    order = sorted(range(4), key=lambda i: (-keys[i][0], -keys[i][1], i))
    return sorted(order[:2])


def prune_largest(x) -> np.ndarray:
    """Reference prune_2_4 (default rule): same dtype and shape; kept values bit for bit,
    the others +0."""
    x = np.asarray(x)
    out = np.zeros_like(x)
    g = x.reshape(-1, 4)
    o = out.reshape(-1, 4)
    for r in range(g.shape[0]):
        for i in prune_largest_group(x.dtype, list(g[r])):
            o[r, i] = g[r, i]
    return out


def prune_hipsparselt_group(dtype, group):
    """hipSPARSELt `prune_strip_kernel` (rocsparselt_prune.cpp, Tc = float for f16, bf16, i8,
    E4M3, E5M2): for the pairs (0,1), (0,2), (0,3), (1,2), (1,3), (2,3) in that order, the score
    is the float32 sum |float(a)| + |float(b)| (rounded to nearest even in float32); a pair
    replaces the best so far only if its score is strictly greater (the best starts at -1.0,
    at positions (0, 0)). So NaN scores never win, ties keep the first pair, the first pair
    holding an Inf wins, and a group whose every pair holds a NaN keeps position 0 only."""
    vals = [np.float32(np.asarray(v, dtype).astype(np.float32)) for v in group]
    best = np.float32(-1.0)
    pa = pb = 0
    with np.errstate(invalid="ignore", over="ignore"):
        for a in range(4):
            for b in range(a + 1, 4):
                score = np.float32(np.abs(vals[a]) + np.abs(vals[b]))
                if score > best:
                    best, pa, pb = score, a, b
    return sorted({pa, pb})


def prune_hipsparselt(x) -> np.ndarray:
    x = np.asarray(x)
    out = np.zeros_like(x)
    g = x.reshape(-1, 4)
    o = out.reshape(-1, 4)
    for r in range(g.shape[0]):
        for i in prune_hipsparselt_group(x.dtype, list(g[r])):
            o[r, i] = g[r, i]
    return out


def is_nonzero(dtype, v) -> bool:
    """-0.0 counts as zero, NaN as non-zero."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu" or dtype in (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4)):
        return int(v) != 0
    bits = int(float_bits(np.asarray([v], dtype))[0])
    return (bits & ~(1 << (dtype.itemsize * 8 - 1))) != 0


def compress_reference(x):
    """(…, K) 2:4 -> (values (…, K/2) bit-copied, positions (…, K/2) int, pad mask (…, K/2)
    True where the slot is hipSPARSELt padding, i.e. compare it as 'a zero of either sign').
    Returns None where some group has more than two non-zeros (with the first such
    (row index tuple, group))."""
    x = np.asarray(x)
    k = x.shape[-1]
    lead = x.shape[:-1]
    values = np.zeros(lead + (k // 2,), x.dtype)
    pos = np.zeros(lead + (k // 2,), np.int64)
    pad = np.zeros(lead + (k // 2,), bool)
    for row in np.ndindex(*lead):
        for q in range(k // 4):
            grp = x[row + (slice(4 * q, 4 * q + 4),)]
            nz = [i for i in range(4) if is_nonzero(x.dtype, grp[i])]
            if len(nz) > 2:
                return None, (row, q)
            if len(nz) == 2:
                p = nz
                pd = [False, False]
            elif len(nz) == 1:
                p = [nz[0], 3] if nz[0] < 3 else [2, 3]
                pd = [False, True] if nz[0] < 3 else [True, False]
            else:
                p, pd = [2, 3], [True, True]
            for s in range(2):
                values[row + (2 * q + s,)] = 0 if pd[s] else grp[p[s]]
                pos[row + (2 * q + s,)] = p[s]
                pad[row + (2 * q + s,)] = pd[s]
    return (values, pos, pad), None


def decompress_reference(values, pos):
    values = np.asarray(values)
    pos = np.asarray(pos, np.int64)
    lead = values.shape[:-1]
    kc = values.shape[-1]
    out = np.zeros(lead + (2 * kc,), values.dtype)
    for row in np.ndindex(*lead):
        for c in range(kc):
            out[row + (4 * (c // 2) + pos[row + (c,)],)] = values[row + (c,)]
    return out


# ------------------------------------------------------------------------- whole GEMMs
def gemm_reference(bt: Builtin, a, b, c=None, *, a_signed=True, b_signed=True, clamp=False):
    """The tiled kernel of API.md section 5 under the `exact` model.

    ``a``: dense 2:4 (*b, M, K) values (compressed as hipSPARSELt does) or a (values,
    positions) pair of (*b, M, K/2) (used as given); b: (*b, K, N) values; c: (*b, M, N)
    values or None. M, N, K are zero-padded to whole tiles (A padding groups: values 0 at
    positions (2, 3)); then for every K step one instruction (exact sum, one rounding;
    integers wrap or saturate per step), each step's D the next step's C. Returns D
    (*b, M, N): floats as bit patterns (-1 = NaN), integers as int64 values."""
    if isinstance(a, tuple):
        vals, pos = (np.asarray(x) for x in a)
        pos = pos.astype(np.int64)
        k = 2 * vals.shape[-1]
    else:
        a = np.asarray(a)
        k = a.shape[-1]
        kq = -(-k // 4) * 4
        dense = np.zeros(a.shape[:-1] + (kq,), a.dtype)
        dense[..., :k] = a
        (vals, pos, _), bad = compress_reference(dense)
        assert bad is None, bad
    b = np.asarray(b)
    m, n = vals.shape[-2], b.shape[-1]
    batch = np.broadcast_shapes(vals.shape[:-2], b.shape[:-2], () if c is None else np.asarray(c).shape[:-2])
    mp, np_ = -(-m // bt.m) * bt.m, -(-n // bt.n) * bt.n
    kp = -(-k // bt.k) * bt.k
    V = np.zeros(batch + (mp, kp // 2), vals.dtype)
    V[..., :m, :vals.shape[-1]] = vals
    P = np.tile(np.array([2, 3], np.int64), batch + (mp, kp // 4))
    P[..., :m, :pos.shape[-1]] = pos
    B = np.zeros(batch + (kp, np_), b.dtype)
    B[..., :k, :n] = b
    a_codes = value_codes(bt.a_type, V)
    b_codes = value_codes(bt.b_type, B)
    acc = np.zeros(batch + (mp, np_), np.int64)
    if c is not None:
        acc[..., :m, :n] = value_codes(bt.c_type, np.asarray(c))
    for s in range(kp // bt.k):
        D = gemm_step_reference(bt, a_codes[..., s * bt.kc:(s + 1) * bt.kc], P[..., s * bt.kc:(s + 1) * bt.kc],
                                b_codes[..., s * bt.k:(s + 1) * bt.k, :], acc,
                                a_signed=a_signed, b_signed=b_signed, clamp=clamp)
        if bt.integer:
            acc = D & 0xFFFFFFFF
        else:  # a NaN goes on as a quiet NaN in the next step's C
            acc = np.where(D == -1, qnan_like(bt.c_type), D)
    out = acc[..., :m, :n]
    if bt.integer:
        return codes_to_values("i32", out)
    flat = [(-1 if is_nan_bits(bt.c_type, int(v)) else int(v)) for v in out.reshape(-1)]
    return np.array(flat, np.int64).reshape(out.shape)


# ------------------------------------------------------------------------------ misc
def metadata_reference(pos) -> np.ndarray:
    """hipSPARSELt metadata bytes: byte b, bits [2s+1:2s] = position of element 4b+s."""
    pos = np.asarray(pos, np.int64)
    g = pos.reshape(pos.shape[:-1] + (pos.shape[-1] // 4, 4))
    return (g[..., 0] | g[..., 1] << 2 | g[..., 2] << 4 | g[..., 3] << 6).astype(np.uint8)


def i32_reference(x: int) -> int:
    """static_cast<int>(uint32_t(x)) for x in [-2^31, 2^32): the same 32 bits as int32."""
    assert -(2**31) <= x < 2**32
    return (x + 2**31) % 2**32 - 2**31


def pack_bytes_reference(b0, b1, b2, b3) -> int:
    return i32_reference((b0 & 255) | (b1 & 255) << 8 | (b2 & 255) << 16 | (b3 & 255) << 24)
