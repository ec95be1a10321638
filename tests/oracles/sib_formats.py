"""Element formats of the sibling builtins, decoded to exact values (plain Python, no jwmma).

Transcribes: BUILTINS_MORE.md 1.1 (gfx942 fp8/bf8 = FNUZ E4M3FNUZ / E5M2FNUZ, gfx950 = OCP
E4M3FN / E5M2), 2.1 (RDNA4 fp8/bf8 = OCP; f16; bf16 as `short` bit patterns); NUMERICS.md 3
(format table: FNUZ bias 8 / 16, NaN = 0x80 only, no Inf, no -0; OCP E4M3FN NaN = S.1111.111,
no Inf; E5M2 IEEE-like) and NUMERICS.md 0 (`exact`: one final round-to-nearest-even to the
destination with gradual underflow, overflow to Inf, IEEE special values; NaN compared by
NaN-ness only).

A code is an unsigned int of the format's width. `decode` returns
(kind, sign, value) with kind 'nan' | 'inf' | 'num' and value an exact Fraction ('num' only;
the sign of a zero lives in `sign`)."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache


@dataclass(frozen=True)
class Fmt:
    name: str
    ebits: int
    mbits: int
    bias: int
    special: str  # 'ieee' (exp all ones: Inf/NaN) | 'fn' (only S.1111.111 NaN) | 'fnuz' (only 0x80 NaN)

    @property
    def bits(self) -> int:
        return 1 + self.ebits + self.mbits

    @property
    def emax_field(self) -> int:
        return (1 << self.ebits) - 1


F32 = Fmt("f32", 8, 23, 127, "ieee")
F16 = Fmt("f16", 5, 10, 15, "ieee")
BF16 = Fmt("bf16", 8, 7, 127, "ieee")
E4M3FN = Fmt("e4m3fn", 4, 3, 7, "fn")  # OCP "fp8" (gfx950, gfx12)
E5M2 = Fmt("e5m2", 5, 2, 15, "ieee")  # OCP "bf8" (gfx950, gfx12)
E4M3FNUZ = Fmt("e4m3fnuz", 4, 3, 8, "fnuz")  # gfx942 "fp8"
E5M2FNUZ = Fmt("e5m2fnuz", 5, 2, 16, "fnuz")  # gfx942 "bf8"
FORMATS = {f.name: f for f in (F32, F16, BF16, E4M3FN, E5M2, E4M3FNUZ, E5M2FNUZ)}

# which concrete format a builtin element type means on a target (BUILTINS_MORE 1.1 / 2.1)
_FP8 = {"gfx942": (E4M3FNUZ, E5M2FNUZ), "gfx950": (E4M3FN, E5M2), "gfx12": (E4M3FN, E5M2)}


def element_format(elem: str, target: str) -> Fmt:
    """'f16' | 'bf16' | 'fp8' | 'bf8' | 'f32' on 'gfx942' | 'gfx950' | 'gfx12' -> Fmt."""
    if elem in ("fp8", "bf8"):
        if target not in _FP8:
            raise ValueError(f"target must be one of {sorted(_FP8)}, got {target!r}")
        return _FP8[target][elem == "bf8"]
    return {"f16": F16, "bf16": BF16, "f32": F32}[elem]


def is_nan(f: Fmt, code: int) -> bool:
    code &= (1 << f.bits) - 1
    ef = (code >> f.mbits) & f.emax_field
    m = code & ((1 << f.mbits) - 1)
    if f.special == "ieee":
        return ef == f.emax_field and m != 0
    if f.special == "fn":
        return ef == f.emax_field and m == (1 << f.mbits) - 1
    return code == 1 << (f.bits - 1)  # fnuz: the "negative zero" pattern is the only NaN


@lru_cache(maxsize=None)
def decode(f: Fmt, code: int):
    """Exact decoding of one code: ('nan'|'inf'|'num', sign, Fraction | None)."""
    code &= (1 << f.bits) - 1
    sign = code >> (f.bits - 1)
    ef = (code >> f.mbits) & f.emax_field
    m = code & ((1 << f.mbits) - 1)
    if is_nan(f, code):
        return ("nan", sign, None)
    if f.special == "ieee" and ef == f.emax_field:
        return ("inf", sign, None)
    if ef == 0:
        mag = Fraction(m, 1 << f.mbits) * Fraction(2) ** (1 - f.bias)
    else:
        mag = Fraction((1 << f.mbits) + m, 1 << f.mbits) * Fraction(2) ** (ef - f.bias)
    return ("num", sign, -mag if sign else mag)


def _inf(f: Fmt, sign: int) -> int:
    return (sign << (f.bits - 1)) | (f.emax_field << f.mbits)


def qnan(f: Fmt) -> int:
    """A quiet NaN of an 'ieee' output format (payloads are not modelled)."""
    return (f.emax_field << f.mbits) | (1 << (f.mbits - 1))


def round_rne(f: Fmt, x: Fraction, zero_sign: int = 0) -> int:
    """Bits of x rounded to nearest, ties to even, in the 'ieee' format f: gradual underflow,
    overflow to +-Inf; a result that is exactly or rounds to zero gets `zero_sign`
    (for an inexact underflow that is the sign of x)."""
    assert f.special == "ieee"
    if x == 0:
        return zero_sign << (f.bits - 1)
    sign = 1 if x < 0 else 0
    a = -x if sign else x
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, 1 - f.bias)  # subnormal range shares the exponent of the smallest normal
    q = a / Fraction(2) ** (e - f.mbits)  # significand in units of the last place
    n, rem = divmod(q.numerator, q.denominator)
    if 2 * rem > q.denominator or (2 * rem == q.denominator and n & 1):
        n += 1
    if n == 0:
        return sign << (f.bits - 1)
    if n == 1 << (f.mbits + 1):
        n >>= 1
        e += 1
    if n < 1 << f.mbits:  # subnormal
        return (sign << (f.bits - 1)) | n
    if e + f.bias >= f.emax_field:
        return _inf(f, sign)
    return (sign << (f.bits - 1)) | ((e + f.bias) << f.mbits) | (n - (1 << f.mbits))


def quantum_exp(f: Fmt) -> int:
    """Every finite value of f is an integer multiple of 2**quantum_exp(f) (the subnormal step)."""
    return 1 - f.bias - f.mbits


_SCALED: dict = {}


def decode_scaled(f: Fmt, code: int):
    """(kind, sign, N) with value = N * 2**quantum_exp(f) exactly (N a signed int, 'num' only).
    Cached by (format name, code): the oracle calls this once per product."""
    key = (f.name, code)
    hit = _SCALED.get(key)
    if hit is None:
        kind, sign, v = decode(f, code)
        n = None
        if kind == "num":
            n = v / Fraction(2) ** quantum_exp(f)
            assert n.denominator == 1
            n = int(n)
        hit = _SCALED[key] = (kind, sign, n)
    return hit


def exact_dot(fa: Fmt, fb: Fmt, fc: Fmt, pairs, c_code: int, out: Fmt | None = None) -> int:
    """The `exact` model of one output (NUMERICS.md 0): bits in `out` (default fc) of
    RNE(sum a*b + c), computed exactly on an integer grid.

    pairs: (a code, b code) of every product. NaN if any NaN, Inf*0, or +Inf with -Inf; else
    +-Inf if any infinite term; an exact zero sum is -0 only when every term is a zero of
    negative sign (IEEE sum of signed zeros), else +0."""
    out = fc if out is None else out
    pos_inf = neg_inf = nan = False
    qp = quantum_exp(fa) + quantum_exp(fb)
    qc = quantum_exp(fc)
    g = min(qp, qc)
    total = 0  # units of 2**g
    all_neg_zero = True
    for x, y in pairs:
        ka, sa, na = decode_scaled(fa, x)
        kb, sb, nb = decode_scaled(fb, y)
        sgn = sa ^ sb
        if ka == "nan" or kb == "nan":
            nan = True
            continue
        if ka == "inf" or kb == "inf":
            if (kb == "num" and nb == 0) if ka == "inf" else (ka == "num" and na == 0):
                nan = True
            elif sgn:
                neg_inf = True
            else:
                pos_inf = True
            continue
        p = na * nb
        total += p << (qp - g)
        if not (p == 0 and sgn):
            all_neg_zero = False
    kc, sc, nc = decode_scaled(fc, c_code)
    if kc == "nan":
        nan = True
    elif kc == "inf":
        neg_inf |= bool(sc)
        pos_inf |= not sc
    else:
        total += nc << (qc - g)
        if not (nc == 0 and sc):
            all_neg_zero = False
    if nan or (pos_inf and neg_inf):
        return qnan(out)
    if pos_inf or neg_inf:
        return _inf(out, int(neg_inf))
    if total == 0:
        return int(all_neg_zero) << (out.bits - 1)
    return round_rne(out, Fraction(total) * Fraction(2) ** g, zero_sign=int(total < 0))
