"""Element formats of the sibling builtins, decoded to exact values (plain Python, no jwmma).

Transcribes: BUILTINS_MORE.md 1.1 (gfx942 fp8/bf8 = FNUZ E4M3FNUZ / E5M2FNUZ, gfx950 = OCP
E4M3FN / E5M2), 2.1 (RDNA4 fp8/bf8 = OCP; f16; bf16 as `short` bit patterns); NUMERICS.md 3
(format table: FNUZ bias 8 / 16, NaN = 0x80 only, no Inf, no -0; OCP E4M3FN NaN = S.1111.111,
no Inf; E5M2 IEEE-like) and NUMERICS.md 0 (`exact`: one final round-to-nearest-even to the
destination with gradual underflow, overflow to Inf, IEEE special values; NaN compared by
NaN-ness only).

The formats, their decoding and the rounding are the oracles' one formats module
(`oracles.formats`), and the `exact` dot is the builtins' reference (`oracles.reference`);
this module names them as the sibling references use them: which format an element type is
on a target (`element_format`), and `decode` as (kind, sign, value) with kind 'nan' | 'inf'
| 'num' and value an exact Fraction ('num' only; the sign of a zero lives in `sign`)."""
from __future__ import annotations

from fractions import Fraction

from . import formats as _f
from .formats import BF8 as E5M2  # OCP "bf8" (gfx950, gfx12)
from .formats import BF8_FNUZ as E5M2FNUZ  # gfx942 "bf8"
from .formats import BF16, F16, F32, Fmt
from .formats import FP8 as E4M3FN  # OCP "fp8" (gfx950, gfx12)
from .formats import FP8_FNUZ as E4M3FNUZ  # gfx942 "fp8"
from .reference import decode as _decode
from .reference import float_dot_bits

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
    return _f.is_nan(code, f)


def decode(f: Fmt, code: int):
    """Exact decoding of one code: ('nan'|'inf'|'num', sign, Fraction | None)."""
    return _decode(f, code)


def round_rne(f: Fmt, x: Fraction, zero_sign: int = 0) -> int:
    """Bits of x rounded to nearest, ties to even, in the 'ieee' format f: gradual underflow,
    overflow to +-Inf; an exact zero gets `zero_sign`, an inexact underflow the sign of x."""
    assert f.nan == "ieee"
    return _f.encode_fraction(f, x, neg_zero=bool(zero_sign))


def exact_dot(fa: Fmt, fb: Fmt, fc: Fmt, pairs, c_code: int, out: Fmt | None = None) -> int:
    """The `exact` model of one output (NUMERICS.md 0): bits in `out` (default fc) of
    RNE(sum a*b + c) (`oracles.reference.float_dot_bits`: exact on an integer grid; NaN if
    any NaN, Inf*0, or +Inf with -Inf; an exact zero is -0 only when every term is -0)."""
    return float_dot_bits(fc if out is None else out, fa, fb, fc, pairs, c_code)
