"""OCP Microscaling (MX) formats for the oracles: element decoding, rounding, block scaling and
the lane packing of the CDNA4 block-scaled MFMA operands. Plain Python ints and Fractions.

Written from the OCP Microscaling Formats (MX) v1.0 specification (element formats FP8 E4M3 /
E5M2, FP6 E2M3 / E3M2, FP4 E2M1, scale E8M0; the block-conversion rule of its section 6.3) and
docs/spec/BUILTINS_DENSE.md sections 5.1-5.3 (format codes, packing), 6 (xf32 = f32 bits with
the low 13 mantissa bits cleared, MMA-Sim's ``x >> 13 << 13``). Never imports jwmma.

Conventions (those of `formats`):

* a format is a `formats.Fmt`; the 6- and 4-bit ones have ``nan == 'none'`` (no Inf, no NaN,
  every code a number, the all-ones exponent an ordinary binade);
* ``decode_*`` return the exact value as a ``Fraction``, or one of the strings ``'nan'``,
  ``'inf'``, ``'-inf'`` for the codes that are not numbers. A signed zero decodes to
  ``Fraction(0)`` (the sign is lost); `formats.decode` keeps it (``Val.neg``);
* codes are non-negative Python ints holding the format's low bits.
"""
from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes

from .formats import BF8, F32, FP8, Fmt, decode

# =========================================================================== formats
FP6_E2M3 = Fmt("fp6", 2, 3, 1, "none", ml_dtypes.float6_e2m3fn)  # bias 1, max 7.5
BF6_E3M2 = Fmt("bf6", 3, 2, 3, "none", ml_dtypes.float6_e3m2fn)  # bias 3, max 28
FP4_E2M1 = Fmt("fp4", 2, 1, 1, "none", ml_dtypes.float4_e2m1fn)  # bias 1, max 6
FP8_E4M3 = FP8  # OCP E4M3FN: bias 7, max 448, NaN = S.1111.111, no Inf
BF8_E5M2 = BF8  # OCP E5M2: bias 15, max 57344, IEEE Inf/NaN

#: the scaled MFMA's format codes (CBSZ for A, BLGP for B), BUILTINS_DENSE.md 5.1
MX_FORMATS = (FP8_E4M3, BF8_E5M2, FP6_E2M3, BF6_E3M2, FP4_E2M1)
MX_BY_NAME = {f.name: f for f in MX_FORMATS}
_ALIASES = {"e4m3": "fp8", "e5m2": "bf8", "e2m3": "fp6", "e3m2": "bf6", "e2m1": "fp4"}

#: emax_elem of OCP MX v1.0 (the exponent of the largest normal of the element format)
EMAX_ELEM = {"fp8": 8, "bf8": 15, "fp6": 2, "bf6": 4, "fp4": 2}

E8M0_NAN = 255
E8M0_BIAS = 127


def fmt_of(f) -> Fmt:
    """A format given as a `Fmt`, a name ('fp8', 'bf8', 'fp6', 'bf6', 'fp4' or 'e4m3', 'e5m2',
    'e2m3', 'e3m2', 'e2m1') or the scaled MFMA's format code 0..4 (BUILTINS_DENSE.md 5.1)."""
    if isinstance(f, Fmt):
        return f
    if isinstance(f, int) and not isinstance(f, bool):
        if not 0 <= f < len(MX_FORMATS):
            raise ValueError(f"format code must be 0..4, got {f}")
        return MX_FORMATS[f]
    name = _ALIASES.get(str(f).lower(), str(f).lower())
    if name not in MX_BY_NAME:
        raise ValueError(f"unknown MX element format {f!r}")
    return MX_BY_NAME[name]


def max_finite(f) -> Fraction:
    """The largest finite magnitude of ``f`` (7.5, 28, 6, 448, 57344)."""
    f = fmt_of(f)
    top = (1 << (f.mbits + 1)) - (2 if f.nan == "fn" else 1)  # E4M3FN: S.1111.111 is NaN
    return Fraction(top) * Fraction(2) ** (f.max_exp - f.mbits)


# =========================================================================== decoding
def _special(kind: str, neg: int):
    if kind == "nan":
        return "nan"
    return "-inf" if neg else "inf"


def decode_code(f, code: int):
    """Exact value of a code of ``f`` (its low ``f.bits`` bits): a Fraction, or 'nan' / 'inf' /
    '-inf'. Subnormals are kept (value sig * 2**(1 - bias - mbits))."""
    f = fmt_of(f)
    v = decode(int(code), f)
    if v.kind != "num":
        return _special(v.kind, v.neg)
    x = Fraction(v.sig) * Fraction(2) ** (v.exp - f.mbits)
    return -x if v.neg else x


def decode_fp6_e2m3(code: int) -> Fraction:
    """FP6 E2M3 (bias 1, no Inf/NaN; 64 codes, max 7.5, min subnormal 0.125) -> Fraction."""
    return decode_code(FP6_E2M3, code)


def decode_bf6_e3m2(code: int) -> Fraction:
    """BF6 E3M2 (bias 3, no Inf/NaN; 64 codes, max 28, min subnormal 0.0625) -> Fraction."""
    return decode_code(BF6_E3M2, code)


def decode_fp4_e2m1(code: int) -> Fraction:
    """FP4 E2M1 (bias 1, no Inf/NaN): codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign."""
    return decode_code(FP4_E2M1, code)


def decode_fp8_e4m3(code: int):
    """OCP FP8 E4M3FN -> Fraction, or 'nan' for 0x7F / 0xFF (no Inf)."""
    return decode_code(FP8_E4M3, code)


def decode_bf8_e5m2(code: int):
    """OCP FP8 E5M2 -> Fraction, or 'inf' / '-inf' (0x7C / 0xFC) or 'nan' (exponent 31, mantissa != 0)."""
    return decode_code(BF8_E5M2, code)


def e8m0_exponent(code: int) -> int:
    """The exponent ``s - 127`` of an E8M0 code s (0..254); 255 (NaN) raises ValueError."""
    code = int(code) & 0xFF
    if code == E8M0_NAN:
        raise ValueError("E8M0 code 255 is NaN, it has no exponent")
    return code - E8M0_BIAS


def decode_e8m0(code: int):
    """E8M0 scale code s (low 8 bits) -> Fraction 2**(s - 127) (s = 0 is 2**-127), or 'nan' for s = 255."""
    code = int(code) & 0xFF
    if code == E8M0_NAN:
        return "nan"
    return Fraction(2) ** (code - E8M0_BIAS)


def xf32_bits(bits: int) -> int:
    """f32 bits cut to xf32: the low 13 mantissa bits cleared (truncation toward zero to 10
    mantissa bits, MMA-Sim ``x >> 13 << 13``). A NaN whose payload lies only in those bits
    becomes an Inf of its sign; other NaNs stay NaN (payload truncated)."""
    return int(bits) & 0xFFFFE000


def decode_xf32(bits: int):
    """f32 bits -> the exact value of their xf32 cut (`xf32_bits`): Fraction, 'nan', 'inf' or '-inf'."""
    return decode_code(F32, xf32_bits(bits))


# =========================================================================== rounding
def _floor_log2(a: Fraction) -> int:
    """floor(log2(a)) of a positive Fraction."""
    n, d = a.numerator, a.denominator
    e = n.bit_length() - d.bit_length()
    # 2**e <= n/d < 2**(e+1) after at most one correction
    if e >= 0:
        if n < d << e:
            e -= 1
    elif n << -e < d:
        e -= 1
    return e


def _as_fraction(x):
    """(Fraction, negative-zero flag) of an int, Fraction or finite float."""
    if isinstance(x, float):
        return Fraction(x), (x == 0 and math.copysign(1.0, x) < 0)
    return Fraction(x), False


def round_to_code(f, x, *, saturate=None) -> int:
    """Code of the exact rational ``x`` (int, Fraction or float) rounded to nearest, ties to
    even, in ``f`` (any `Fmt` with at most 8 bits; MX formats by name or code), with gradual
    underflow. A nonzero value that rounds to zero gives the zero of its sign; an exact zero is
    +0 except a float -0.0.

    Overflow (a rounded magnitude above `max_finite`):
    * ``saturate`` True: the largest finite magnitude of the sign (OCP MX v1.0 conversion);
    * ``saturate`` False: IEEE: E5M2 +-Inf, E4M3FN its NaN code of the sign (0x7F / 0xFF);
    * ``saturate`` None (default): True for the 6- and 4-bit formats (they have no Inf/NaN),
      False for the 8-bit ones.

    Non-finite ``x``: the 6- and 4-bit formats have no code for it, so a NaN or an Inf raises
    ValueError (MX v1.0 leaves it implementation-defined; ml_dtypes gives -0 for NaN and the
    largest magnitude for Inf). 8-bit formats: a NaN gives the format's NaN code (0x7F E4M3,
    0x7E E5M2); an Inf gives E5M2's Inf, E4M3's NaN of the sign, or with ``saturate`` True the
    largest finite magnitude (OCP 8-bit saturating conversion)."""
    f = fmt_of(f)
    assert f.bits <= 8
    if saturate is None:
        saturate = f.nan == "none"
    sbit = 1 << (f.bits - 1)
    if isinstance(x, float) and not math.isfinite(x):
        if f.nan == "none":
            raise ValueError(f"{f.name} has no code for {x!r}")
        if math.isnan(x):
            return (f.emask << f.mbits) | (f.mmask if f.nan == "fn" else 1 << (f.mbits - 1))
        neg = x < 0
        return _overflow_code(f, neg, saturate)
    xf, negz = _as_fraction(x)
    if xf == 0:
        return sbit if negz else 0
    neg = xf < 0
    a = -xf if neg else xf
    s = sbit if neg else 0
    qe = max(_floor_log2(a), f.min_exp) - f.mbits  # exponent of the last kept place
    q = round(a / Fraction(2) ** qe)  # Python rounds a Fraction half to even
    if q == 0:
        return s
    if q >> (f.mbits + 1):  # carried into the next binade (q is then a power of two)
        q >>= 1
        qe += 1
    if Fraction(q) * Fraction(2) ** qe > max_finite(f):
        return _overflow_code(f, neg, saturate)
    if q < (1 << f.mbits):  # subnormal
        return s | q
    field = qe + f.mbits + f.bias
    return s | (field << f.mbits) | (q - (1 << f.mbits))


def _max_code(f: Fmt) -> int:
    """Code of +max_finite(f)."""
    if f.nan == "none":
        return (f.emask << f.mbits) | f.mmask
    if f.nan == "fn":
        return (f.emask << f.mbits) | (f.mmask - 1)
    return ((f.emask - 1) << f.mbits) | f.mmask


def _overflow_code(f: Fmt, neg: bool, saturate: bool) -> int:
    s = (1 << (f.bits - 1)) if neg else 0
    if saturate or f.nan == "none":
        return s | _max_code(f)
    if f.nan == "ieee":
        return s | (f.emask << f.mbits)
    if f.nan == "fn":
        return s | (f.emask << f.mbits) | f.mmask
    raise ValueError(f"no overflow code for {f.name}")


def round_fp6_e2m3(x) -> int:
    """RNE into FP6 E2M3 with saturation to +-7.5 (see `round_to_code`)."""
    return round_to_code(FP6_E2M3, x)


def round_bf6_e3m2(x) -> int:
    """RNE into BF6 E3M2 with saturation to +-28."""
    return round_to_code(BF6_E3M2, x)


def round_fp4_e2m1(x) -> int:
    """RNE into FP4 E2M1 with saturation to +-6."""
    return round_to_code(FP4_E2M1, x)


def round_fp8_e4m3(x, saturate=False) -> int:
    """RNE into OCP E4M3FN; overflow (a value >= 464) to NaN, or to +-448 with ``saturate``."""
    return round_to_code(FP8_E4M3, x, saturate=saturate)


def round_bf8_e5m2(x, saturate=False) -> int:
    """RNE into OCP E5M2; overflow (a value >= 61440) to +-Inf, or to +-57344 with ``saturate``."""
    return round_to_code(BF8_E5M2, x, saturate=saturate)


# =========================================================================== block scaling
def mx_block_scale(values, f) -> tuple:
    """OCP MX v1.0 (section 6.3) conversion of one block (32 values in MX; any length accepted)
    into an E8M0 scale code and element codes of ``f``.

    ``values``: ints, Fractions or finite floats. X = floor(log2(amax)) - emax_elem (emax_elem:
    E4M3 8, E5M2 15, E2M3 2, E3M2 4, E2M1 2), clamped so that the scale code X + 127 lies in
    0..254 (255 is NaN); element t = round(values[t] / 2**X) to nearest even with saturation to
    the format's largest magnitude (also for the 8-bit formats), a float -0.0 and values that
    round to zero keep their sign.

    Choices where MX leaves room: an all-zero block gets code 127 (factor 1); a NaN or Inf
    among the values raises ValueError (MX leaves their conversion implementation-defined).

    Returns ``(scale_code, [element codes])``."""
    f = fmt_of(f)
    vals = []
    for v in values:
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"non-finite value {v!r} in an MX block")
        vals.append(v)
    if not vals:
        raise ValueError("empty block")
    amax = max(abs(Fraction(v)) for v in vals)
    if amax == 0:
        code = E8M0_BIAS
    else:
        x = _floor_log2(amax) - EMAX_ELEM[f.name]
        code = min(max(x + E8M0_BIAS, 0), 254)
    unit = Fraction(2) ** (code - E8M0_BIAS)
    out = []
    for v in vals:
        if isinstance(v, float) and v == 0:
            out.append(round_to_code(f, v, saturate=True))  # keeps -0.0
        else:
            out.append(round_to_code(f, Fraction(v) / unit, saturate=True))
    return code, out


def mx_quantize_rows(values, f, block: int = 32) -> tuple:
    """`mx_block_scale` along each row of a 2-D array-like (rows x K, K a multiple of ``block``):
    returns (codes rows x K as nested lists, scales rows x K/block). This is the A-operand
    layout of the scaled MFMA (scale of row i, block kb = sa[i][kb]); for B (K x N, blocks along
    K) quantise the transpose and transpose both results."""
    codes, scales = [], []
    for row in values:
        row = list(row)
        if len(row) % block:
            raise ValueError(f"row length {len(row)} is not a multiple of {block}")
        rc, rs = [], []
        for lo in range(0, len(row), block):
            s, c = mx_block_scale(row[lo:lo + block], f)
            rs.append(s)
            rc += c
        codes.append(rc)
        scales.append(rs)
    return codes, scales


# =========================================================================== lane packing
LANE_WORDS = 8


def element_bits(w: int, e: int) -> list:
    """Where element e of width w lies in a lane's eight words: [(word, lo, hi), ...], one piece,
    or two when the element straddles a word boundary (w = 6, e.g. e = 5: (0, 30, 31) then
    (1, 0, 3)); low bits of the element first."""
    lo = w * e
    hi = lo + w - 1
    if lo // 32 == hi // 32:
        return [(lo // 32, lo % 32, hi % 32)]
    return [(lo // 32, lo % 32, 31), (hi // 32, 0, hi % 32)]


def pack_lane(codes, w: int) -> list:
    """Element codes of one lane -> eight uint32 words (Python ints): element e of width w
    (8, 6 or 4) occupies bits w*e .. w*e + w - 1 of the 256-bit little-endian string formed by
    the words (word 0 = bits 0..31); a code's bits above w are ignored; unused words are zero."""
    if w not in (4, 6, 8):
        raise ValueError(f"element width must be 4, 6 or 8, got {w}")
    codes = [int(c) for c in codes]
    if w * len(codes) > 32 * LANE_WORDS:
        raise ValueError(f"{len(codes)} elements of {w} bits do not fit in {LANE_WORDS} words")
    big = 0
    for e, c in enumerate(codes):
        big |= (c & ((1 << w) - 1)) << (w * e)
    return [(big >> (32 * v)) & 0xFFFFFFFF for v in range(LANE_WORDS)]


def unpack_lane(words, w: int, count: int) -> list:
    """Inverse of `pack_lane`: the first ``count`` w-bit element codes of a lane's words."""
    if w not in (4, 6, 8):
        raise ValueError(f"element width must be 4, 6 or 8, got {w}")
    big = 0
    for v, x in enumerate(words):
        big |= (int(x) & 0xFFFFFFFF) << (32 * v)
    return [(big >> (w * e)) & ((1 << w) - 1) for e in range(count)]


def words_used(w: int, count: int = 32) -> int:
    """VGPRs a lane's ``count`` elements of width w occupy (32 elements: 8, 6, 4 for w = 8, 6, 4)."""
    return -(-w * count // 32)
