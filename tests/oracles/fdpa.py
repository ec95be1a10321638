"""Slow, obvious reference of the NVIDIA truncated fused dot-product-add (MMA-Sim 2.1.1 arithmetic/fdpa.py, issue #14), in
Python integers and fractions. Independent of jwmma, JAX and MMA-Sim: it decodes bit patterns
itself and follows the written algorithm step by step.

    fdpa_dot(a_codes, b_codes, c_code, fa, fb, fc, group, F, c_alignment, zero_exp, rounding,
             out_frac) -> result code of fc
"""
from __future__ import annotations

from fractions import Fraction

#: name -> (exponent bits, mantissa bits, bias, special-value encoding)
FORMATS = {
    "f32": (8, 23, 127, "ieee"),
    "f16": (5, 10, 15, "ieee"),
    "bf16": (8, 7, 127, "ieee"),
    "e4m3": (4, 3, 7, "fn"),       # OCP E4M3FN: NaN = S.1111.111 only, no Inf
    "e5m2": (5, 2, 15, "ieee"),
    "e4m3fnuz": (4, 3, 8, "fnuz"),  # NaN = 0x80 only, no Inf, no -0
    "e5m2fnuz": (5, 2, 16, "fnuz"),
}
NAN = {"f32": 0x7FFFFFFF, "f16": 0x7FFF}


def decode(fmt: str, code: int):
    """-> (kind, sign, sig, e): kind 'nan' / 'inf' / 'num'; a number is (-1)**sign * sig *
    2**(e - mbits), e the exponent with subnormals at the minimum exponent 1 - bias."""
    eb, mb, bias, sp = FORMATS[fmt]
    nbits = 1 + eb + mb
    code = int(code) & ((1 << nbits) - 1)
    sign = code >> (nbits - 1)
    ef = (code >> mb) & ((1 << eb) - 1)
    mant = code & ((1 << mb) - 1)
    if sp == "ieee" and ef == (1 << eb) - 1:
        return ("nan" if mant else "inf", sign, 0, 0)
    if sp == "fn" and ef == (1 << eb) - 1 and mant == (1 << mb) - 1:
        return ("nan", sign, 0, 0)
    if sp == "fnuz" and code == 1 << (nbits - 1):
        return ("nan", 0, 0, 0)
    sig = mant | (1 << mb) if ef else mant
    return ("num", sign, sig, max(ef, 1) - bias)


def value(fmt: str, sign: int, sig: int, e: int) -> Fraction:
    mb = FORMATS[fmt][1]
    v = Fraction(sig) * Fraction(2) ** (e - mb)
    return -v if sign else v


def trunc_to(x: Fraction, unit_exp: int) -> Fraction:
    """x truncated toward zero to a multiple of 2**unit_exp."""
    u = Fraction(2) ** unit_exp
    q = abs(x) / u
    n = q.numerator // q.denominator
    return (n if x >= 0 else -n) * u


def round_to(x: Fraction, fmt: str, frac: int, rounding: str) -> int:
    """Code of x rounded to ``frac`` fraction bits in the exponent range of ``fmt``; overflow
    to Inf (both modes); zero is +0."""
    eb, mb, bias, _ = FORMATS[fmt]
    nbits = 1 + eb + mb
    if x == 0:
        return 0
    sign = 1 if x < 0 else 0
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    e = max(e, 1 - bias)
    ulp = Fraction(2) ** (e - frac)
    q = a / ulp
    n, r = divmod(q.numerator, q.denominator)
    if rounding == "nearest":
        r2 = 2 * r
        if r2 > q.denominator or (r2 == q.denominator and n % 2 == 1):
            n += 1
    if n == 0:
        return 0
    v = n * ulp
    # re-derive the exponent after a carry
    if v >= Fraction(2) ** (e + 1):
        e += 1
    emax = (1 << eb) - 2 - bias
    if e > emax:
        return (sign << (nbits - 1)) | (((1 << eb) - 1) << mb)
    if v < Fraction(2) ** (1 - bias):  # subnormal
        field, m = 0, v / Fraction(2) ** (1 - bias - mb)
    else:
        field, m = e + bias, v / Fraction(2) ** (e - mb) - (1 << mb)
    assert m.denominator == 1
    return (sign << (nbits - 1)) | (field << mb) | int(m)


def fdpa_group(a_codes, b_codes, c_code, fa, fb, fc, F, c_alignment, zero_exp, rounding, out_frac):
    """One group: code of fc."""
    eb, mb, _, _ = FORMATS[fc]
    inf_code = ((1 << eb) - 1) << mb
    sign_bit = 1 << (eb + mb)
    A = [decode(fa, x) for x in a_codes]
    B = [decode(fb, x) for x in b_codes]
    C = decode(fc, c_code)
    # ---- specials, as float arithmetic would give them
    nan = C[0] == "nan"
    infs = set()
    if C[0] == "inf":
        infs.add(C[1])
    for x, y in zip(A, B):
        if x[0] == "nan" or y[0] == "nan":
            nan = True
        elif x[0] == "inf" or y[0] == "inf":
            other = y if x[0] == "inf" else x
            if other[0] == "num" and other[2] == 0:
                nan = True  # Inf * 0
            else:
                infs.add(x[1] ^ y[1])
    if nan or len(infs) == 2:
        return NAN[fc]
    if infs:
        return inf_code | (sign_bit if 1 in infs else 0)
    # ---- finite: terms (value, exponent or None)
    terms = []
    for x, y in zip(A, B):
        v = value(fa, *x[1:]) * value(fb, *y[1:])
        terms.append((v, x[3] + y[3] if v != 0 else zero_exp))
    cv = value(fc, *C[1:])
    cterm = (cv, C[3] if cv != 0 else zero_exp)
    if c_alignment == "with_products":
        terms.append(cterm)
    exps = [e for _, e in terms if e is not None]
    if not exps:
        total = Fraction(0)
    else:
        emax = max(exps)
        total = sum((trunc_to(v, emax - F) for v, _ in terms), Fraction(0))
    if c_alignment == "after":
        total += cv
    return round_to(total, fc, mb if out_frac is None else out_frac, rounding)


def fdpa_dot(a_codes, b_codes, c_code, fa, fb, fc, group, F, c_alignment="with_products",
             zero_exp=-133, rounding="toward_zero", out_frac=None):
    """K products in consecutive groups of ``group`` (None: one group), the result of each group
    being the next one's C. Returns the code of fc."""
    k = len(a_codes)
    g = group or k
    c = c_code
    for lo in range(0, k, g):
        c = fdpa_group(a_codes[lo:lo + g], b_codes[lo:lo + g], c, fa, fb, fc, F, c_alignment,
                       zero_exp, rounding, out_frac)
    return c
