"""Independent references for the edge-case suite (issue #10). NEVER imports jwmma.

Everything here is written from the specifications, slow and obvious:

* the builtin table, register layouts, index sets, number formats and the `exact` dot are the
  oracles' (`tests/oracles/reference.py`, `tests/oracles/formats.py`: BUILTINS.md sections 1,
  2.1-2.2, 4.1-4.2; NUMERICS.md sections 0 and 3), named here as this suite uses them;
* registers <-> matrices, batched over waves: BUILTINS.md section 1 (little-endian packing of
  16/8/4-bit elements into 32-bit words) and the index rule bits [s+2e+1 : s+2e];
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
import os
import sys
from fractions import Fraction

import ml_dtypes
import numpy as np

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/, home of the oracles
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
from oracles import formats as _f  # noqa: E402
from oracles import reference as _r  # noqa: E402

# ------------------------------------------------------------------------------ formats
#: element formats: (exponent bits, mantissa bits, bias, has_inf, numpy dtype)
FLOAT_FORMATS = {f.name: (f.ebits, f.mbits, f.bias, f.has_inf, np.dtype(f.dtype))
                 for f in (_f.F32, _f.F16, _f.BF16, _f.FP8, _f.BF8)}  # fp8, bf8: OCP E4M3FN, E5M2
ELEM_BITS = {"f32": 32, "i32": 32, **_r.ELEM_BITS}
UINT_OF_WIDTH = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def float_bits(x) -> np.ndarray:
    """Bit patterns (unsigned ints of the same width) of a float array."""
    x = np.asarray(x)
    return x.view(UINT_OF_WIDTH[x.dtype.itemsize])


def decode(fmt: str, code: int):
    """Bit pattern -> ('nan',) | ('inf', sign) | ('num', Fraction, sign_bit)."""
    kind, sign, value = _r.decode(_f.FMTS[fmt], int(code))
    return ("nan",) if kind == "nan" else ("inf", sign) if kind == "inf" else ("num", value, sign)


def qnan_like(fmt: str) -> int:
    """The canonical quiet NaN of ``fmt`` (fp8 E4M3FN: 0x7F, its only positive NaN)."""
    return _f.qnan(_f.FMTS[fmt])


def is_nan_bits(fmt: str, code: int) -> bool:
    return _f.is_nan(int(code), _f.FMTS[fmt])


# ------------------------------------------------------------------------------ table
@dataclasses.dataclass(frozen=True)
class Builtin(_r.Ref):
    """One row of BUILTINS.md 2.1 / 4.1 (`oracles.reference.Ref`: table facts, layouts, index
    sets), with the names this suite uses (``k``: dense K; ``regs``: HIP vector lengths) and
    the register dtypes jwmma accepts."""

    @property
    def k(self):
        return self.kd

    def regs(self, which: str) -> int:
        """HIP vector length n of operand a/b/c."""
        return self.vec(which)

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


TABLE = {name: Builtin(name) for name in _r.NAMES}
NAMES = tuple(TABLE)


# ------------------------------------------------------------------------------ layouts
_LAYOUTS = {}


def layouts(bt: Builtin):
    """(A, B, C) layout arrays (lanes, n, 2): [lane, element] -> matrix (row, column), from the
    reference's coordinates (BUILTINS.md 2.2 / 4.2)."""
    if bt.name not in _LAYOUTS:
        _LAYOUTS[bt.name] = tuple(
            np.array([[bt.coord(w, lane, x) for x in range(bt.elems(w))] for lane in range(bt.wave)], np.int64)
            for w in "abc")
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
def exact_dot(fa: str, fb: str, fc: str, a_codes, b_codes, c_code) -> int:
    """RN_fc(c + sum_k a_k * b_k) with IEEE specials (NUMERICS.md 0, the `exact` model:
    `oracles.reference.float_dot_bits`). a_codes, b_codes: sequences of bit patterns; c_code:
    the accumulator's bits. Returns the bits, -1 for NaN (compared by NaN-ness)."""
    f = _f.FMTS
    out = _r.float_dot_bits(f[fc], f[fa], f[fb], f[fc], zip(a_codes, b_codes), int(c_code))
    return -1 if _f.is_nan(out, f[fc]) else out


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
    return _f.sat32(v) if clamp else _f.wrap32(v)


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
    """-0.0 counts as zero, NaN as non-zero (`nonzero_mask` of one element)."""
    return bool(nonzero_mask(np.asarray([v], np.dtype(dtype)))[0])


def nonzero_mask(x) -> np.ndarray:
    """Which elements are non-zero: -0.0 counts as zero, NaN as non-zero. On the bits: no
    element passes through a Python float, which would quieten a signalling NaN and raise
    numpy's invalid-value warning."""
    x = np.asarray(x)
    if x.dtype.kind in "iu" or x.dtype in (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4)):
        return x.astype(np.int64) != 0
    b = float_bits(x).astype(np.uint64)
    return (b & ~np.uint64(1 << (x.dtype.itemsize * 8 - 1))) != 0


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
