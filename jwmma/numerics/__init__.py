"""Bit-level numerics: number formats, decoding and exact rounding into bit patterns.

The bottom layer of jwmma: no instruction, layout or model knowledge. `formats` defines the
formats and decodes codes into fields; `rounding` rounds exact values into codes; `host`
converts numpy arrays into the formats with one rounding on every machine.
"""
from __future__ import annotations

from . import formats, host, rounding
from .formats import (
    BF6, BF8, BF8_FNUZ, BF16, F16, F32, FP4, FP6, FP8, FP8_FNUZ, I4, I8, I32, U4, U8, XF32, ZERO_EXP, Fields,
    FloatFormat, IntFormat, decode, decode_int, format_of,
)
from .host import cast, to_f32_odd
from .rounding import x64_scope

__all__ = [
    "formats", "host", "rounding", "cast", "to_f32_odd", "FloatFormat", "IntFormat", "Fields", "F32", "F16", "BF16", "FP8", "BF8",
    "FP8_FNUZ", "BF8_FNUZ", "FP6", "BF6", "FP4", "XF32", "I8", "U8", "I4", "U4", "I32", "ZERO_EXP", "format_of", "decode", "decode_int",
    "x64_scope",
]
