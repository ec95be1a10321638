"""Slow scalar reference of the `gfx12_dot4` model, in plain Python ints, from NUMERICS.md only.

Sources: NUMERICS.md section 2.2 (the gfx1201 DOT4 step, its specials and fixed NaN payloads,
the packed 16-bit outputs), section 3 (OCP fp8 decoding, the byte-factor rules), section 5
(16-bit accumulation: narrowing after every step). Nothing here imports jwmma.

Everything works on bit patterns (ints): one step is `step_bits`, a whole dot `dot_bits`.
Numbers are kept as sign/magnitude terms ``(negative, sig, exp)`` meaning
``(-1)**negative * sig * 2**exp``; alignment follows the spec literally:

    align(x, grid): shift = exp - grid; mag = sig >> -shift (shift < 0) or sig << shift;
                    negative -> -mag - (discarded bits != 0)       # floor
"""
from __future__ import annotations

from .formats import BF8, BF16, F16, F32, FP8, Fmt, decode, encode  # the shared oracle formats

FMTS = {f.name: f for f in (F32, F16, BF16, FP8, BF8)}

# fixed payloads (NUMERICS 2.2 / 3): factor NaN, invalid; 16-bit forms narrowed as the packed
# WMMA does (factor NaN 0xFE3D / 0xFFFD; the others keep their top bits / quiet bit)
FACTOR_NAN = {"f32": 0xFFC00A3D, "f16": 0xFE3D, "bf16": 0xFFFD}
INVALID = {"f32": 0xFFC00000, "f16": 0xFE00, "bf16": 0xFFC0}
POS_INF = {"f32": 0x7F800000, "f16": 0x7C00, "bf16": 0x7F80}
NEG_INF = {"f32": 0xFF800000, "f16": 0xFC00, "bf16": 0xFF80}


def rne_bits(negative: bool, mag: int, scale: int, f: Fmt) -> int:
    """Bits of (-1)**negative * mag * 2**scale rounded to nearest even in ``f`` (gradual
    underflow, overflow -> Inf). A zero result (exact or underflowed) is +0."""
    bits = encode(f, -mag if negative else mag, scale)
    return 0 if bits & ((1 << (f.bits - 1)) - 1) == 0 else bits


# ==================================================================================== one step


def align(neg: bool, sig: int, exp: int, grid: int) -> int:
    """Floor of the signed term on ``grid`` (units of 2**grid), two's-complement style."""
    shift = exp - grid
    if sig == 0:
        return 0
    if shift >= 0:
        mag, tail = sig << shift, False
    else:
        mag, tail = sig >> -shift, (sig & ((1 << -shift) - 1)) != 0
    return -mag - int(tail) if neg else mag


def step_bits(a, b, c, fa: Fmt, fb: Fmt, fc: Fmt, *, pairs=None, c_floor=None, frac_bits=24,
              c_window=26, fp16_ovfl=False, bf16_narrowing="truncate") -> int:
    """One gfx12 dot step: the products a[k]*b[k] (codes) accumulated onto C (a code of fc).
    Returns the result code in fc."""
    byte = max(fa.bits, fb.bits) <= 8
    if pairs is None:
        pairs = not byte
    if c_floor is None:
        c_floor = -14 if fc.name == "f16" else -126
    invalid_payload = FACTOR_NAN[fc.name] if byte else INVALID[fc.name]

    # ---- specials, in priority order
    prods = []
    factor_nan = invalid = pos_inf = neg_inf = False
    for x, y in zip(a, b):
        vx, vy = decode(x, fa), decode(y, fb)  # exp: the alignment exponent max(field, 1) - bias
        if vx.kind == "nan" or vy.kind == "nan":
            factor_nan = True
            continue
        neg = bool(vx.neg ^ vy.neg)
        if vx.kind == "inf" or vy.kind == "inf":
            other_zero = vy.zero if vx.kind == "inf" else vx.zero
            if other_zero:
                invalid = True
            if neg:
                neg_inf = True
            else:
                pos_inf = True
            continue
        # finite product: significand product, alignment exponents
        prods.append((neg, vx.sig * vy.sig, vx.exp + vy.exp))
    if factor_nan:
        return FACTOR_NAN[fc.name]
    if invalid or (pos_inf and neg_inf):
        return invalid_payload
    vc = decode(c, fc)
    nc, sc = vc.neg, vc.sig
    if vc.kind == "nan":
        return (c & ((1 << fc.bits) - 1)) | (1 << (fc.mbits - 1))
    if vc.kind == "inf":
        if nc:
            neg_inf = True
        else:
            pos_inf = True
    if pos_inf and neg_inf:
        return invalid_payload
    if pos_inf:
        return POS_INF[fc.name]
    if neg_inf:
        return NEG_INF[fc.name]

    # ---- grids: product k at ae_a + ae_b - 24 (zero products have none); C
    mab = fa.mbits + fb.mbits
    terms = [(neg, p, e - mab, (e - frac_bits) if p else None) for neg, p, e in prods]
    # (a special factor has returned above, so terms[k] is product k: pairs are (0,1), (2,3))
    c_exp = vc.exp - fc.mbits  # C = sc * 2**c_exp (a 16-bit C widens exactly)
    c_lead = c_exp + sc.bit_length() - 1 if sc else None
    grids = [g for *_, g in terms if g is not None]
    G = (c_floor if c_lead is None else max(c_floor, c_lead)) - c_window
    if grids:
        G = max(G, max(grids))

    # ---- C on G; the accumulator special case
    total = align(bool(nc), sc, c_exp, G)
    if sc and nc and c_exp < G and (sc >> (G - c_exp)) == 0:  # no bit survives
        total = 0 if G > c_floor else -1

    # ---- subgroups on their own grid, then on G
    size = 2 if pairs else max(len(terms), 1)
    for i in range(0, len(terms), size):
        grp = terms[i:i + size]
        gg = [g for *_, g in grp if g is not None]
        if not gg:
            continue
        gp = max(gg)
        s = sum(align(neg, p, e, gp) for neg, p, e, _ in grp)
        total += align(s < 0, abs(s), gp, G)

    # ---- rounding into the accumulator format
    negative = total < 0
    mag = abs(total)
    if fc.name == "f16" or (fc.name == "bf16" and bf16_narrowing == "nearest"):
        bits = rne_bits(negative, mag, G, fc)
        if fc.name == "f16" and fp16_ovfl and (bits & 0x7FFF) == 0x7C00:
            bits = (bits & 0x8000) | 0x7BFF
        return bits
    bits = rne_bits(negative, mag, G, F32)
    if fc.name == "bf16":  # truncation of the f32 result to its top 16 bits
        return bits >> 16
    return bits


def dot_bits(a, b, c, fa, fb, fc, *, step=4, **kw) -> int:
    """A whole dot: consecutive steps of ``step`` products, each step's result the next C."""
    fa, fb, fc = (FMTS[f] if isinstance(f, str) else f for f in (fa, fb, fc))
    for i in range(0, len(a), step):
        c = step_bits(a[i:i + step], b[i:i + step], c, fa, fb, fc, **kw)
    return c


# ========================================================================== sparse instruction


def swmmac_bits(a_comp, pos, b, c, fa, fb, fc, **kw):
    """Generic SWMMAC semantics on matrices of codes (lists of lists): output (i, j) takes
    the products a_comp[i][ck] * b[4*(ck//2) + pos[i][ck]][j] in compressed-K order."""
    m, kc = len(a_comp), len(a_comp[0])
    n = len(b[0])
    out = [[0] * n for _ in range(m)]
    for i in range(m):
        rows = [4 * (ck // 2) + pos[i][ck] for ck in range(kc)]
        for j in range(n):
            out[i][j] = dot_bits(a_comp[i], [b[r][j] for r in rows], c[i][j], fa, fb, fc, **kw)
    return out
