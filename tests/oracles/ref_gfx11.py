"""Slow reference of the RDNA3 (gfx1100) WMMA arithmetic as NUMERICS.md 2.3 states it: an
f16/bf16 -> f32 output is 8 DOT2 steps over the K pairs (0, 1), ..., (14, 15), each step's f32
bits the next step's C. The 16-bit outputs (f16 -> f16, bf16 -> bf16) take the same steps on C
widened exactly to f32, an f16 C aligned on a -14 floor, and narrow after every step: f16 by RNE
from the step's integer total (gradual underflow, overflow to Inf), bf16 by keeping the top 16
bits of the f32 result; special results narrowed as rocjitsu's packed WMMA writes them. Python
integers only; decodes bit patterns itself; imports nothing of the package.
"""
from __future__ import annotations

FACTOR_NAN = 0xFFC00A3D
INVALID = 0xFFC00000
NONE = None  # the lead of a zero term

#: (fraction bits, exponent bias, exponent field mask) per 16-bit input format
FORMATS = {"f16": (10, 15, 0x1F), "bf16": (7, 127, 0xFF)}


def factor(code: int, fmt: str) -> dict:
    """A 16-bit factor: sign, significand (bf16 subnormals read as zero), alignment exponent
    max(field, 1) - bias, and the NaN/Inf flags."""
    fb, bias, emask = FORMATS[fmt]
    field = (code >> fb) & emask
    frac = code & ((1 << fb) - 1)
    special = field == emask
    if special:
        sig = 0
    elif field:
        sig = (1 << fb) | frac
    else:
        sig = 0 if fmt == "bf16" else frac
    return {"neg": code >> 15 == 1, "sig": sig, "ae": max(field, 1) - bias, "fb": fb,
            "nan": special and frac != 0, "inf": special and frac == 0}


def lead(sig: int, lsb: int):
    return lsb + sig.bit_length() - 1 if sig else NONE


def on_grid(sig: int, lsb: int, grid: int) -> int:
    """floor(sig * 2**(lsb - grid)): the magnitude truncated onto the grid."""
    sh = lsb - grid
    return sig << sh if sh >= 0 else sig >> -sh


def round_f32(total: int, grid: int, frame_neg: bool) -> int:
    """f32 bits of total * 2**grid in C's sign frame: 24 significant bits, ties to even; a
    zero total and exponents below -126 give +0, above 127 +-Inf."""
    if total == 0:
        return 0
    neg = (total < 0) != frame_neg
    mag = abs(total)
    top = mag.bit_length() - 1
    drop = top - 23
    if drop <= 0:
        sig = mag << -drop
    else:
        sig, rest = mag >> drop, mag & ((1 << drop) - 1)
        half = 1 << (drop - 1)
        if rest > half or (rest == half and sig & 1):
            sig += 1
    exp = top + grid
    if sig == 1 << 24:
        sig, exp = sig >> 1, exp + 1
    sign = 0x80000000 if neg else 0
    if exp < -126:
        return 0
    if exp > 127:
        return sign | 0x7F800000
    return sign | ((exp + 127) << 23) | (sig & 0x7FFFFF)


def _step(a0: int, b0: int, a1: int, b1: int, c: int, fmt: str, c_floor=None):
    """One DOT2 step up to its rounding: ('special', f32 bits) or ('sum', total, grid, C negative);
    ``c_floor``: the lowest lead C takes in the grid (the f16 output's -14), None for none."""
    pairs = [(factor(a0, fmt), factor(b0, fmt)), (factor(a1, fmt), factor(b1, fmt))]
    if any(x["nan"] for p in pairs for x in p):
        return "special", FACTOR_NAN
    zero = lambda x: not x["inf"] and not x["nan"] and x["sig"] == 0
    if any((x["inf"] and zero(y)) or (y["inf"] and zero(x)) for x, y in pairs):
        return "special", INVALID
    signs = {x["neg"] != y["neg"] for x, y in pairs if x["inf"] or y["inf"]}
    if signs == {True, False}:
        return "special", INVALID
    cfield, cfrac, cneg = (c >> 23) & 0xFF, c & 0x7FFFFF, c >> 31 == 1
    if cfield == 0xFF and cfrac:
        return "special", c | 0x400000
    if cfield == 0xFF:
        signs.add(cneg)
    if signs:
        return "special", INVALID if len(signs) == 2 else (0xFF800000 if True in signs else 0x7F800000)
    csig = (cfrac | 1 << 23) if cfield else 0  # a subnormal C is zero
    terms = [(csig, cfield - 150, cneg)]
    for x, y in pairs:
        terms.append((x["sig"] * y["sig"], x["ae"] + y["ae"] - x["fb"] - y["fb"], x["neg"] != y["neg"]))
    if all(t[0] == 0 for t in terms):
        return "sum", 0, 0, cneg
    pgrid = max((x["ae"] + y["ae"] for x, y in pairs if x["sig"] * y["sig"]), default=None)
    leads = [lead(s, e) for s, e, _ in terms[1:] if s]
    c_lead = lead(csig, cfield - 150)
    if c_floor is not None:
        c_lead = c_floor if c_lead is None else max(c_lead, c_floor)
    grid = max(leads + ([c_lead] if c_lead is not None else [])) - 26
    if pgrid is not None:
        grid = max(grid, pgrid - 24)
    total = 0
    for s, e, n in terms:
        m = on_grid(s, e, grid)
        total += m if n == cneg else -m - 1
    return "sum", total, grid, cneg


def dot2(a0: int, b0: int, a1: int, b1: int, c: int, fmt: str) -> int:
    """One DOT2 step: f32 bits of a0*b0 + a1*b1 + C (C as f32 bits)."""
    out = _step(a0, b0, a1, b1, c, fmt)
    return out[1] if out[0] == "special" else round_f32(*out[1:])


def widen(code: int, fmt: str) -> int:
    """A 16-bit C code as the f32 bits of the same value (NaN payloads kept, not quieted)."""
    if fmt == "bf16":
        return code << 16
    sign, field, frac = (code >> 15) << 31, (code >> 10) & 0x1F, code & 0x3FF
    if field == 0x1F:
        return sign | 0x7F800000 | frac << 13
    if field:
        return sign | (field + 112) << 23 | frac << 13
    if not frac:
        return sign
    top = frac.bit_length() - 1  # frac * 2**-24 = 1.f * 2**(top - 24)
    return sign | (top + 103) << 23 | ((frac << (23 - top)) & 0x7FFFFF)


def round_f16(total: int, grid: int, frame_neg: bool) -> int:
    """f16 bits of total * 2**grid in C's sign frame: RNE onto the f16 grid (subnormals down
    to 2**-24), overflow to +-Inf, a zero result +0."""
    if total == 0:
        return 0
    neg = (total < 0) != frame_neg
    mag = abs(total)
    exp = max(mag.bit_length() - 1 + grid, -14)  # the binade, subnormals sharing -14's
    quantum = exp - 10  # the f16 place value there
    if grid >= quantum:
        q = mag << (grid - quantum)
    else:
        drop = quantum - grid
        q, rest = mag >> drop, mag & ((1 << drop) - 1)
        if rest > 1 << (drop - 1) or (rest == 1 << (drop - 1) and q & 1):
            q += 1
    if q == 0:
        return 0
    if q == 1 << 11:  # rounded up into the next binade
        q, exp = q >> 1, exp + 1
    sign = 0x8000 if neg else 0
    if exp > 15:
        return sign | 0x7C00
    if q < 1 << 10:  # subnormal
        return sign | q
    return sign | (exp + 15) << 10 | (q & 0x3FF)


def narrow_special(bits: int, fmt: str) -> int:
    """An f32 special result as the 16-bit output holds it: the factor NaN -> 0xFE3D / 0xFFFD; f16
    keeps the sign and the top 10 fraction bits under an all-ones exponent, bf16 the top half."""
    if bits == FACTOR_NAN:
        return 0xFFFD if fmt == "bf16" else 0xFE3D
    if fmt == "bf16":
        return bits >> 16
    return (bits >> 31) << 15 | 0x7C00 | (bits >> 13) & 0x3FF


def dot2_16(a0: int, b0: int, a1: int, b1: int, c16: int, fmt: str) -> int:
    """One DOT2 step with a 16-bit accumulator: the 16-bit result of a0*b0 + a1*b1 + C."""
    out = _step(a0, b0, a1, b1, widen(c16, fmt), fmt, -14 if fmt == "f16" else None)
    if out[0] == "special":
        return narrow_special(out[1], fmt)
    return round_f16(*out[1:]) if fmt == "f16" else round_f32(*out[1:]) >> 16


def wmma(a_bits, b_bits, c_bits, fmt: str):
    """D (16 x 16 f32 bits) of an RDNA3 f16/bf16 -> f32 WMMA on matrices of bit patterns
    (A 16 x 16, B 16 x 16, C 16 x 16 f32 bits)."""
    out = [[0] * 16 for _ in range(16)]
    for i in range(16):
        for j in range(16):
            acc = int(c_bits[i][j])
            for k in range(0, 16, 2):
                acc = dot2(int(a_bits[i][k]), int(b_bits[k][j]), int(a_bits[i][k + 1]), int(b_bits[k + 1][j]), acc, fmt)
            out[i][j] = acc
    return out


def wmma16(a_bits, b_bits, c_bits, fmt: str):
    """D (M x N 16-bit codes) of an RDNA3 f16 -> f16 or bf16 -> bf16 WMMA on matrices of 16-bit
    codes (A M x 16, B 16 x N, C M x N; M = N = 16 for the instruction, fewer rows or columns
    give those outputs alone), narrowed after each of the 8 DOT2 steps."""
    m, n = len(c_bits), len(c_bits[0])
    out = [[0] * n for _ in range(m)]
    for i in range(m):
        for j in range(n):
            acc = int(c_bits[i][j])
            for k in range(0, 16, 2):
                acc = dot2_16(int(a_bits[i][k]), int(b_bits[k][j]), int(a_bits[i][k + 1]), int(b_bits[k + 1][j]), acc,
                              fmt)
            out[i][j] = acc
    return out
