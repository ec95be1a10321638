"""Slow scalar reference models, written from the specs, never from jwmma.

Everything here is plain Python integers (values are ``n * 2**e`` with ``n`` an int), one output
at a time. Sources:

* NUMERICS.md section 0 (``exact``), 1.1 and 1.3 (CDNA3, MMA-Sim GitHub c785138), 3 (formats),
  4 (integers); BUILTINS.md section 1 (generic sparse semantics);
* MMA-Sim 2.x (PyPI ``mmasim``), ``mmasim/arithmetic/fdpa.py``: ``tr_fdpa`` (f16/bf16),
  ``gtr_fdpa`` (fp8/bf8) and ``truncated_fused_sum``, transcribed to exact integer arithmetic.
  The 2.x differences to c785138 are: zero products take no part in the group maximum
  (``e[s == 0] = -999``), the group sum is floored to F2+1 fractional bits of e_max, added to
  the C part, renormalised (``frexp_and_normalize(..., e_subnormal=-126)``) and floored to F2
  bits before the f32 RNE, and a bf16 product >= 2**128 is an Inf product
  (``s[overflow] *= inf``), so it meets an opposite Inf (C or product) as NaN.

This module must not import jwmma: it is what jwmma is checked against. It also holds the
input generators shared by the test files (codes, i.e. integer bit patterns).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

# the shared oracle formats (tests/oracles/formats.py), under the names the tests use
from .formats import (  # noqa: F401
    BF8, BF8_FNUZ, BF16, F16, F32, FMTS, FP8, FP8_FNUZ, Fmt, Val, codes_of, decode, encode, encode_fraction,
    from_codes, inf_bits, int_decode, is_nan, qnan, same_bits, sat32, value, wrap32,
)
from .formats import I32_MAX as INT_MAX  # noqa: F401
from .formats import I32_MIN as INT_MIN  # noqa: F401


def _dyadic_sum(terms):
    """Exact sum of (n, e) terms as (n, e)."""
    terms = [t for t in terms if t[0] != 0]
    if not terms:
        return 0, 0
    e0 = min(e for _, e in terms)
    return sum(n << (e - e0) for n, e in terms), e0


# ------------------------------------------------------------------------ products
def _product(va: Val, vb: Val, fa: Fmt, fb: Fmt):
    """('nan',) | ('inf', neg) | ('num', neg, P, exp_a, exp_b): the IEEE product."""
    if va.kind == "nan" or vb.kind == "nan":
        return ("nan",)
    neg = va.neg ^ vb.neg
    if va.kind == "inf" or vb.kind == "inf":
        if va.zero or vb.zero:
            return ("nan",)
        return ("inf", neg)
    return ("num", neg, va.sig * vb.sig, va.exp, vb.exp)


def _ieee_specials(prods, vc: Val):
    """None when every product and C are finite, else the bits-independent verdict
    ('nan',) or ('inf', neg)."""
    nan = vc.kind == "nan" or any(p[0] == "nan" for p in prods)
    pinf = (vc.kind == "inf" and not vc.neg) or any(p[0] == "inf" and not p[1] for p in prods)
    ninf = (vc.kind == "inf" and vc.neg) or any(p[0] == "inf" and p[1] for p in prods)
    if nan or (pinf and ninf):
        return ("nan",)
    if pinf or ninf:
        return ("inf", ninf)
    return None


def _special_bits(verdict, fc: Fmt):
    return qnan(fc) if verdict[0] == "nan" else inf_bits(fc, verdict[1])


# =========================================================================== exact
def exact_dot(a, b, c, fa: Fmt, fb: Fmt, fc: Fmt) -> int:
    """NUMERICS 0: exact products, exact sum with C, one RNE to fc (gradual underflow,
    overflow to Inf), IEEE specials; an exact zero is +0 unless every product and C are -0."""
    prods = [_product(decode(x, fa), decode(y, fb), fa, fb) for x, y in zip(a, b)]
    vc = decode(c, fc)
    sp = _ieee_specials(prods, vc)
    if sp:
        return _special_bits(sp, fc)
    mab = fa.mbits + fb.mbits
    terms = [((-P if neg else P), ea + eb - mab) for _, neg, P, ea, eb in prods]
    terms.append(((-vc.sig if vc.neg else vc.sig), vc.exp - fc.mbits))
    n, e = _dyadic_sum(terms)
    all_neg_zero = all(p[2] == 0 and p[1] for p in prods) and vc.zero and vc.neg
    return encode(fc, n, e, neg_zero=all_neg_zero)


# =========================================================================== fma chain
def _round_f32_state(n, e, neg_zero):
    return encode(F32, n, e, neg_zero)


def fma_chain_dot(a, b, c, fa: Fmt, fb: Fmt, fc: Fmt) -> int:
    """acc <- RN_f32(a_k * b_k + acc), k in order, one correct rounding per step (an f32
    FMA), IEEE specials and signed zeros, subnormals kept. A 16-bit C is widened exactly
    first and the f32 result is rounded once to fc at the end."""
    vc = decode(c, fc)
    # the accumulator as f32 bits (16-bit C widens exactly)
    if vc.kind == "nan":
        acc = qnan(F32)
    elif vc.kind == "inf":
        acc = inf_bits(F32, vc.neg)
    else:
        acc = encode(F32, -vc.sig if vc.neg else vc.sig, vc.exp - fc.mbits, neg_zero=bool(vc.neg))
    mab = fa.mbits + fb.mbits
    for x, y in zip(a, b):
        p = _product(decode(x, fa), decode(y, fb), fa, fb)
        va = decode(acc, F32)
        sp = _ieee_specials([p], va)
        if sp:
            acc = _special_bits(sp, F32)
            continue
        _, neg, P, ea, eb = p
        n, e = _dyadic_sum([((-P if neg else P), ea + eb - mab), ((-va.sig if va.neg else va.sig), va.exp - 23)])
        both_neg_zero = P == 0 and neg and va.zero and va.neg
        acc = encode(F32, n, e, neg_zero=both_neg_zero)
    if fc == F32:
        return acc
    v = decode(acc, F32)
    if v.kind == "nan":
        return qnan(fc)
    if v.kind == "inf":
        return inf_bits(fc, v.neg)
    return encode(fc, -v.sig if v.neg else v.sig, v.exp - 23, neg_zero=bool(v.neg))


# =========================================================================== CDNA3 / fused groups
@dataclass(frozen=True)
class FusedParams:
    """Same parameters (and defaults) as jwmma.models.FusedGroups / CDNA3. ``None`` means
    the CDNA3 choice for the operand formats: group 16 and two stages for 8-bit operands,
    group 8 otherwise; C is dropped far below the sum exactly in the two-stage path.
    zero_exponent=None, renormalize=True is MMA-Sim 2.x; (-126, False) is c785138."""

    group: int | None = None
    frac_bits: int = 24
    sum_bits: int = 31
    two_stage: bool | None = None
    product_rounding: str = "truncate"
    c_drop: bool | None = None
    zero_exponent: int | None = None
    renormalize: bool = True

    def resolve(self, fa: Fmt, fb: Fmt):
        eight = max(fa.bits, fb.bits) == 8
        group = self.group or (16 if eight else 8)
        two = eight if self.two_stage is None else self.two_stage
        drop = two if self.c_drop is None else self.c_drop
        return group, two, drop


CDNA3_2X = FusedParams()
CDNA3_C785138 = FusedParams(zero_exponent=-126, renormalize=False)


def _align(P: int, neg: int, sh: int, rounding: str) -> int:
    """Signed (-1)**neg * P * 2**-sh rounded to an integer: 'truncate' (toward zero),
    'floor', or 'nearest' (ties to even)."""
    if sh <= 0:
        m = P << -sh
        return -m if neg else m
    if rounding == "truncate":
        m = P >> sh
        return -m if neg else m
    v = -P if neg else P
    if rounding == "floor":
        return v >> sh
    return round(Fraction(v, 1 << sh))  # Python rounds Fractions half to even


def _fused_sum(items, F, mab, rounding):
    """items: (P, E, neg) with E None for products out of the maximum. Returns (S, E_T):
    the sum in units of 2**(E_T - F) (E_T None: nothing in the maximum, S = 0)."""
    es = [E for _, E, _ in items if E is not None]
    if not es:
        return 0, None
    ET = max(es)
    S = 0
    for P, E, neg in items:
        if E is None:
            assert P == 0
            continue
        S += _align(P, neg, ET - E + mab - F, rounding)
    return S, ET


def _floor_shift(x: int, n: int) -> int:
    """floor(x * 2**n)."""
    return x << n if n >= 0 else x >> -n


def cdna3_group(a, b, c_bits: int, fa: Fmt, fb: Fmt, prm: FusedParams, two: bool, drop: bool) -> int:
    """One group: NUMERICS 1.3 ``fused_dot_rd_add`` (renormalize=False) or MMA-Sim 2.x
    ``tr_fdpa``/``gtr_fdpa`` (renormalize=True), then RNE to f32. Returns f32 bits."""
    F, F2 = prm.frac_bits, prm.sum_bits
    mab = fa.mbits + fb.mbits
    vas = [decode(x, fa) for x in a]
    vbs = [decode(y, fb) for y in b]
    prods = [_product(va, vb, fa, fb) for va, vb in zip(vas, vbs)]
    vc = decode(c_bits, F32)

    # ---- specials first
    big = []  # signs of finite products >= 2**128 (bf16 only)
    for p in prods:
        if p[0] == "num" and p[2] and p[2].bit_length() - 1 + p[3] + p[4] - mab >= 128:
            big.append(p[1])
    if prm.renormalize:  # 2.x: an overflowing product *is* an Inf product
        prods_sp = [("inf", p[1]) if (p[0] == "num" and p[2] and p[2].bit_length() - 1 + p[3] + p[4] - mab >= 128) else p
                    for p in prods]
        sp = _ieee_specials(prods_sp, vc)
        if sp:
            return _special_bits(sp, F32)
    else:  # c785138: the float64 sum decides first; overflow only when it is finite
        sp = _ieee_specials(prods, vc)
        if sp:
            return _special_bits(sp, F32)
        if big:
            if 0 in big and 1 in big:
                return qnan(F32)
            return inf_bits(F32, big[0])

    # ---- exact products and their exponents
    items = []
    for (_, neg, P, ea, eb), va, vb in zip(prods, vas, vbs):
        if prm.zero_exponent is None:
            E = None if P == 0 else ea + eb
        else:
            z = prm.zero_exponent
            E = (z if va.sig == 0 else ea) + (z if vb.sig == 0 else eb)
        items.append((P, E, neg))

    if two and len(items) > 1:
        S0, E0 = _fused_sum(items[0::2], F, mab, prm.product_rounding)
        S1, E1 = _fused_sum(items[1::2], F, mab, prm.product_rounding)
        es = [x for x in (E0, E1) if x is not None]
        if es:
            E = max(es)
            S = sum(_floor_shift(Sh, Eh - E) for Sh, Eh in ((S0, E0), (S1, E1)) if Eh is not None)
        else:
            S, E = 0, None
    else:  # (a two-stage group of one product has an empty odd half: it adds nothing)
        S, E = _fused_sum(items, F, mab, prm.product_rounding)

    # ---- combine with C (value Cs * 2**(ec - 23); ec = -126 for zero and subnormals)
    Cs = -vc.sig if vc.neg else vc.sig
    ec = vc.exp
    Mx = ec if E is None else max(E, ec)
    ks = F2 + 1 if prm.renormalize else F2
    grid = Mx - ks  # the sum's grid
    s_n = 0 if E is None else _floor_shift(S, (E - F) - grid)
    c_n = _floor_shift(Cs, (ec - 23) - (Mx - F))  # C floored to F fractional bits of Mx
    if drop and ec < Mx - F - 1:
        c_n = 0
    R = s_n + (c_n << ((Mx - F) - grid))
    if prm.renormalize and R:
        lead = abs(R).bit_length() - 1 + grid
        g2 = max(lead, F32.min_exp) - F2
        if g2 > grid:
            R = R >> (g2 - grid)  # floor
            grid = g2
    return encode(F32, R, grid)  # an exact zero is +0


def cdna3_dot(a, b, c_bits, fa: Fmt, fb: Fmt, prm: FusedParams = CDNA3_2X) -> int:
    """The fused-group model over consecutive groups, the f32 result of each group being
    the next group's C (the last group may be partial)."""
    group, two, drop = prm.resolve(fa, fb)
    acc = int(c_bits)
    for lo in range(0, len(a), group):
        acc = cdna3_group(a[lo:lo + group], b[lo:lo + group], acc, fa, fb, prm, two, drop)
    return acc


# =========================================================================== integers
def int_dot(a, b, c: int, clamp: bool, staging: str = "final") -> int:
    """NUMERICS 4. a, b: ints (already sign- or zero-extended). No clamp: (C + sum) mod 2**32.
    Clamp, 'final': saturate once. Clamp, 'staged': stage 0 = the first half of the products
    in K order, stage 1 = the rest (GoC's gfx1201 digests, issue #13: SWMMAC compressed
    ck < Kc/2 = lane half 0; dense WMMA k < K/2); saturate after C + stage 0 and again after
    adding stage 1."""
    prods = [int(x) * int(y) for x, y in zip(a, b)]
    if not clamp:
        return wrap32(int(c) + sum(prods))
    if staging == "final":
        return sat32(int(c) + sum(prods))
    half = len(prods) - len(prods) // 2
    s0, s1 = sum(prods[:half]), sum(prods[half:])
    return sat32(sat32(int(c) + s0) + s1)


# =========================================================================== helpers for tests
def seed_of(*parts) -> int:
    """A deterministic seed (Python's str hash is salted per process)."""
    import zlib

    return zlib.crc32(repr(parts).encode())


def selected_b(b_dense, pos):
    """BUILTINS.md section 1: for compressed column c of row i the B row is
    k = 4*(c//2) + pos[i, c]. b_dense (K, N), pos (M, Kc) -> (M, Kc, N)."""
    pos = np.asarray(pos)
    m, kc = pos.shape
    k = 4 * (np.arange(kc) // 2)[None, :] + pos
    return np.asarray(b_dense)[k, :]


# --------------------------------------------------------------- input generators (codes)
def _rand_finite_codes(rng, f: Fmt, shape):
    """Uniform over all finite codes (covers every exponent, subnormals and zeros)."""
    n = int(np.prod(shape))
    out = rng.integers(0, 1 << f.bits, size=n)
    bad = np.array([decode(int(x), f).kind != "num" for x in out])
    while bad.any():
        out[bad] = rng.integers(0, 1 << f.bits, size=int(bad.sum()))
        bad = np.array([decode(int(x), f).kind != "num" for x in out])
    return out.reshape(shape)


def make_code(f: Fmt, neg: int, exp: int, mant: int) -> int:
    """Code of (-1)**neg * 1.mant * 2**exp (exp clamped into the normal range)."""
    exp = min(max(exp, f.min_exp), f.max_exp)
    return (neg << (f.bits - 1)) | ((exp + f.bias) << f.mbits) | (mant & ((1 << f.mbits) - 1))


def special_codes(f: Fmt):
    """NaN and Inf codes of f: all of them for 8-bit formats (E4M3FN: 0x7F, 0xFF), a few
    for 16-bit ones."""
    if f.bits == 8:
        return [x for x in range(256) if decode(x, f).kind != "num"]
    emask = ((1 << f.ebits) - 1) << f.mbits
    sb = 1 << (f.bits - 1)
    return [emask, emask | sb, emask | 1, emask | sb | 1, emask | (1 << (f.mbits - 1)), emask | ((1 << f.mbits) - 1)]


def gen_float_rows(rng, fa: Fmt, fb: Fmt, n: int, k: int, specials=True):
    """(A codes (n, k), B codes (n, k), C f32 codes (n,), labels): a mix of scenarios.

    normal data, uniform codes (huge exponent spreads, subnormals), cancellation pairs,
    wide spreads, subnormal operands, all-zero groups (+-0), NaN/Inf codes (E4M3 0x7F/0xFF),
    bf16 products >= 2**128; C random, +-0, subnormal, tiny negative/positive, huge,
    +-Inf, NaN, and about minus the product sum."""
    A = np.zeros((n, k), np.int64)
    B = np.zeros((n, k), np.int64)
    C = np.zeros(n, np.int64)
    labels = []
    kinds = ["normal", "codes", "cancel", "spread", "subnormal", "zerogroups", "tiny"]
    if specials:
        kinds += ["specials"]
        if fa.name == "bf16" or fb.name == "bf16":
            kinds += ["overflow", "overflow"]
    for r in range(n):
        kind = kinds[r % len(kinds)] if r < 2 * len(kinds) else kinds[rng.integers(len(kinds))]
        labels.append(kind)
        a = _normal_codes(rng, fa, k)
        bb = _normal_codes(rng, fb, k)
        if kind == "codes":
            a = _rand_finite_codes(rng, fa, k)
            bb = _rand_finite_codes(rng, fb, k)
        elif kind == "tiny":  # products near and below the f32 subnormal range (bf16)
            for arr, f in ((a, fa), (bb, fb)):
                for j in range(k):
                    arr[j] = make_code(f, int(rng.integers(2)), int(f.min_exp + rng.integers(0, 4)), int(rng.integers(1 << f.mbits)))
        elif kind == "cancel":
            for j in range(0, k - 1, 2):
                if rng.random() < 0.8:
                    a[j + 1] = a[j] ^ (1 << (fa.bits - 1))
                    bb[j + 1] = bb[j]
            # a few small terms survive the cancellation
            for j in rng.choice(k, size=min(k, 2), replace=False):
                a[j] = make_code(fa, int(rng.integers(2)), int(rng.integers(fa.min_exp, 1)), int(rng.integers(8)))
        elif kind == "spread":
            for j in range(k):
                if rng.random() < 0.5:
                    a[j] = make_code(fa, int(rng.integers(2)), int(fa.max_exp - rng.integers(3)), int(rng.integers(1 << fa.mbits)))
                else:
                    a[j] = make_code(fa, int(rng.integers(2)), int(fa.min_exp + rng.integers(3)), int(rng.integers(1 << fa.mbits)))
        elif kind == "subnormal":
            for arr, f in ((a, fa), (bb, fb)):
                for j in range(k):
                    if rng.random() < 0.6:
                        arr[j] = (int(rng.integers(2)) << (f.bits - 1)) | int(rng.integers(0, 1 << f.mbits))
        elif kind == "zerogroups":
            g = 16 if max(fa.bits, fb.bits) == 8 else 8
            for lo in range(0, k, g):
                if rng.random() < 0.5:
                    for j in range(lo, min(k, lo + g)):
                        a[j] = int(rng.integers(2)) << (fa.bits - 1)  # +-0
        elif kind == "specials":
            for arr, f in ((a, fa), (bb, fb)):
                sp = special_codes(f)
                for j in range(k):
                    u = rng.random()
                    if u < 0.08:
                        arr[j] = sp[rng.integers(len(sp))]
                    elif u < 0.16:
                        arr[j] = int(rng.integers(2)) << (f.bits - 1)
        elif kind == "overflow":  # bf16 products >= 2**128 of both signs
            for j in range(k):
                if rng.random() < 0.3:
                    for arr, f in ((a, fa), (bb, fb)):
                        if f.name == "bf16":
                            arr[j] = make_code(BF16, int(rng.integers(2)), int(64 + rng.integers(0, 64)), int(rng.integers(128)))
        A[r], B[r] = a, bb
        C[r] = _gen_c(rng, fa, fb, a, bb, kind, specials)
    return A, B, C, labels


def _normal_codes(rng, f: Fmt, k):
    v = rng.normal(size=k) * np.exp2(rng.integers(-3, 4, size=k).astype(float))
    return codes_of(v.astype(np.float32).astype(f.dtype))


def _products(a, b, fa, fb):
    out = []
    for x, y in zip(a, b):
        va, vb = value(int(x), fa), value(int(y), fb)
        if isinstance(va, float) or isinstance(vb, float):
            return None
        out.append(va * vb)
    return out


def _gen_c(rng, fa, fb, a, b, kind, specials):
    """An f32 C code for the row (a, b)."""
    u = int(rng.integers(14 if specials else 11))
    sign = int(rng.integers(2)) << 31
    if u == 0:
        return sign  # +-0
    if u == 1:
        return sign | int(rng.integers(1, 1 << 23))  # subnormal
    if u == 2:  # tiny negative
        return (1 << 31) | make_code(F32, 0, int(rng.integers(-126, -20)), int(rng.integers(1 << 23)))
    if u == 3:  # tiny positive
        return make_code(F32, 0, int(rng.integers(-126, -20)), int(rng.integers(1 << 23)))
    if u == 4:  # huge
        return sign | make_code(F32, 0, int(rng.integers(20, 128)), int(rng.integers(1 << 23)))
    if u in (5, 6):  # near the C-drop / C-floor boundary: 22..28 binades under the top product
        p = _products(a[: 16], b[: 16], fa, fb)
        top = max((abs(x) for x in p), default=0) if p else 0
        if top:
            e = (top.numerator.bit_length() - top.denominator.bit_length()) - int(rng.integers(22, 29))
            return sign | make_code(F32, 0, max(e, -126), int(rng.integers(1 << 23)))
        return sign
    if u == 7:  # about minus the sum (cancellation with C)
        p = _products(a, b, fa, fb)
        if p is None:
            return 0
        s = sum(p)
        if abs(s) >= 2**127:
            return 0
        return int(codes_of(np.float32(-float(s)))) ^ int(rng.integers(0, 4))
    if u == 8:
        return int(_rand_finite_codes(rng, F32, 1)[0])
    if u >= 11:
        return [0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001][int(rng.integers(4))]
    return int(codes_of(np.float32(rng.normal() * 4.0)))


def gen_acc16(rng, f: Fmt, shape, specials=True):
    """16-bit accumulator codes: normal, uniform finite codes, +-0, subnormal, Inf/NaN."""
    n = int(np.prod(shape))
    out = np.empty(n, np.int64)
    sp = special_codes(f)
    for i in range(n):
        u = int(rng.integers(10 if specials else 9))
        if u < 4:
            out[i] = _normal_codes(rng, f, 1)[0]
        elif u < 6:
            out[i] = _rand_finite_codes(rng, f, 1)[0]
        elif u == 6:
            out[i] = int(rng.integers(2)) << (f.bits - 1)
        elif u < 9:
            out[i] = (int(rng.integers(2)) << (f.bits - 1)) | int(rng.integers(1, 1 << f.mbits))
        else:
            out[i] = sp[int(rng.integers(len(sp)))]
    return out.reshape(shape)


def cap_exponents(codes, f: Fmt, cap: int):
    """Codes with every normal exponent above ``cap`` lowered to ``cap`` (same sign/mantissa)."""
    out = np.array(codes, np.int64)
    for idx in np.ndindex(out.shape):
        v = decode(int(out[idx]), f)
        if v.kind == "num" and v.sig >> f.mbits and v.exp > cap:
            out[idx] = make_code(f, v.neg, cap, v.sig)
    return out


def gen_builtin_float(rng, fa: Fmt, fb: Fmt, fc: Fmt, m, n, kd, specials=True, finite_operands=False):
    """One instruction's inputs as codes: compressed A (M, Kc), positions (M, Kc) (valid
    pairs p0 < p1), dense B (K, N), C (M, N).

    A rows and B columns get scenarios (normal, uniform codes, cancelling pairs against a
    constant B column, spreads, subnormals, all-zero groups, one row/column with NaN/Inf).
    Half of the 2:4 groups use one position pair for every row and their *pruned* B rows
    hold NaN/Inf: they must never reach the arithmetic.

    ``finite_operands``: no NaN/Inf anywhere in A and B (pruned rows included) and no bf16
    product that can reach 2**128, so that jwmma's builtins take their no-product-specials
    branch; C still carries +-0/subnormal/Inf/NaN when ``specials``."""
    kc = kd // 2
    g = 16 if max(fa.bits, fb.bits) == 8 else 8
    A = np.empty((m, kc), np.int64)
    for i in range(m):
        kind = ["normal", "codes", "cancel", "spread", "subnormal", "zerogroups", "normal"][i % 7]
        a = _normal_codes(rng, fa, kc)
        if kind == "codes":
            a = _rand_finite_codes(rng, fa, kc)
        elif kind == "cancel":
            for t in range(0, kc - 1, 2):
                a[t + 1] = a[t] ^ (1 << (fa.bits - 1))
        elif kind == "spread":
            for t in range(kc):
                e = fa.max_exp - int(rng.integers(3)) if rng.random() < 0.5 else fa.min_exp + int(rng.integers(3))
                a[t] = make_code(fa, int(rng.integers(2)), e, int(rng.integers(1 << fa.mbits)))
        elif kind == "subnormal":
            for t in range(kc):
                if rng.random() < 0.6:
                    a[t] = (int(rng.integers(2)) << (fa.bits - 1)) | int(rng.integers(0, 1 << fa.mbits))
        elif kind == "zerogroups":
            for lo in range(0, kc, g):
                if rng.random() < 0.6:
                    a[lo:lo + g] = [int(rng.integers(2)) << (fa.bits - 1) for _ in range(len(a[lo:lo + g]))]
        A[i] = a
    B = np.empty((kd, n), np.int64)
    for j in range(n):
        kind = ["normal", "codes", "const", "subnormal", "normal"][j % 5]
        col = _normal_codes(rng, fb, kd)
        if kind == "codes":
            col = _rand_finite_codes(rng, fb, kd)
        elif kind == "const":
            col[:] = col[0]
        elif kind == "subnormal":
            for t in range(kd):
                if rng.random() < 0.6:
                    col[t] = (int(rng.integers(2)) << (fb.bits - 1)) | int(rng.integers(0, 1 << fb.mbits))
        B[:, j] = col
    c_specials = specials
    if finite_operands:
        specials = False
        A = cap_exponents(A, fa, 62)
        B = cap_exponents(B, fb, 62)
    if specials:  # one A row and one B column carry NaN/Inf/zero codes
        i, j = int(rng.integers(m)), int(rng.integers(n))
        for arr, f in ((A[i], fa), (B[:, j], fb)):
            sp = special_codes(f)
            for t in rng.choice(len(arr), size=3, replace=False):
                arr[t] = sp[int(rng.integers(len(sp)))]
    pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    pos = np.empty((m, kc), np.int64)
    for q in range(kc // 2):
        shared = rng.random() < 0.5
        p = pairs[int(rng.integers(6))]
        for i in range(m):
            if not shared:
                p = pairs[int(rng.integers(6))]
            pos[i, 2 * q], pos[i, 2 * q + 1] = p
        if shared and not finite_operands:  # poison the pruned rows of this group
            sp = special_codes(fb)
            for r in set(range(4)) - set(p):
                B[4 * q + r, :] = [sp[int(rng.integers(len(sp)))] for _ in range(n)]
    if fc == F32:
        C = np.empty((m, n), np.int64)
        bsel = selected_b(B, pos)
        for i in range(m):
            for j in range(n):
                C[i, j] = _gen_c(rng, fa, fb, A[i], bsel[i, :, j], "", c_specials and rng.random() < 0.5)
    else:
        C = gen_acc16(rng, fc, (m, n), c_specials)
    return A, pos, B, C


def gen_builtin_int(rng, a_bits, a_signed, b_bits, b_signed, m, n, kd):
    """Integer inputs (values, not codes): random, extreme rows/columns, C near the i32 limits."""
    def rnd(bits, signed, size):
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        return rng.integers(lo, hi + 1, size=size), lo, hi

    kc = kd // 2
    A, alo, ahi = rnd(a_bits, a_signed, (m, kc))
    B, blo, bhi = rnd(b_bits, b_signed, (kd, n))
    for i in range(0, m, 3):
        A[i] = [ahi, alo, ahi][i % 3] if i % 2 else ahi
    for j in range(0, n, 4):
        B[:, j] = bhi if j % 8 else blo
    C = rng.integers(-(2**31), 2**31, size=(m, n))
    for i in range(m):
        for j in range(n):
            u = rng.random()
            if u < 0.3:
                C[i, j] = 2**31 - 1 - int(rng.integers(0, 2**20))
            elif u < 0.6:
                C[i, j] = -(2**31) + int(rng.integers(0, 2**20))
    pos = np.empty((m, kc), np.int64)
    pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    for i in range(m):
        for q in range(kc // 2):
            pos[i, 2 * q], pos[i, 2 * q + 1] = pairs[int(rng.integers(6))]
    return A, pos, B, C


# --------------------------------------------------- builtin harness (numpy register packing)
# These take the spec row (jwmma.BUILTINS[name]) as a plain object and do the register packing
# with numpy from the table's layout arrays (BUILTINS.md section 1: little-endian packing,
# 2 index bits per stored A element). They never compute arithmetic.
def to_regs(op, layout, codes):
    """Matrix codes -> (lanes, op.n) registers of op.dtype."""
    lane = np.asarray(codes)[layout[..., 0], layout[..., 1]].astype(np.int64)  # (lanes, elems)
    if op.elem_bits >= 16:
        return lane.astype(np.uint32 if op.elem_bits == 32 else np.uint16).view(op.dtype)
    per = 32 // op.elem_bits
    words = np.zeros((lane.shape[0], op.n), np.uint64)
    for e in range(op.elems):
        words[:, e // per] |= (lane[:, e] & ((1 << op.elem_bits) - 1)).astype(np.uint64) << np.uint64((e % per) * op.elem_bits)
    return words.astype(np.uint32).view(np.int32)


def index_regs(spec, pos, s=0):
    words = np.zeros(spec.lanes, np.uint64)
    for e in range(spec.a.elems):
        r, c = spec.a_layout[:, e, 0], spec.a_layout[:, e, 1]
        words |= np.asarray(pos)[r, c].astype(np.uint64) << np.uint64(s + 2 * e)
    return words.astype(np.uint32).view(np.int32)


def from_regs_c(spec, regs):
    """(lanes, n_c) accumulator registers -> (M, N) codes (int32 values for i32)."""
    regs = np.asarray(regs)
    if spec.c_type == "i32":
        lane = regs.astype(np.int64)
    elif spec.c_type == "f32":
        lane = regs.view(np.uint32).astype(np.int64)
    else:
        lane = regs.view(np.uint16).astype(np.int64)
    out = np.empty((spec.m, spec.n), np.int64)
    out[spec.c_layout[..., 0], spec.c_layout[..., 1]] = lane
    return out


def run_builtin(fn, spec, A, pos, B, C, *, model, a_neg=True, b_neg=True, clamp=False):
    """Call the builtin function ``fn`` (jwmma.<name>) on one wave built with numpy from
    matrix codes (floats) or values (integers); return the D matrix codes/values."""
    a = to_regs(spec.a, spec.a_layout, A)
    b = to_regs(spec.b, spec.b_layout, B)
    if spec.c_type in ("f32", "i32"):
        c_lane = np.asarray(C)[spec.c_layout[..., 0], spec.c_layout[..., 1]]
        c = (c_lane.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.float32 if spec.c_type == "f32" else np.int32)
    else:
        c = to_regs(spec.c, spec.c_layout, C)
    idx = index_regs(spec, pos)
    if spec.arch == "gfx950":
        d = fn(a, b, c, idx, 0, 0, model=model)
    elif spec.signed_choice:
        d = fn(a_neg, a, b_neg, b, c, idx, clamp, model=model)
    else:
        d = fn(a, b, c, idx, model=model)
    return from_regs_c(spec, d)


def spec_formats(spec):
    return FMTS[spec.a_type], FMTS[spec.b_type], FMTS[spec.c_type]


def builtin_ref(spec, A, pos, B, C, dot):
    """D[i, j] = dot(A[i, :], B_selected[i, :, j], C[i, j]) over the compressed products in
    compressed-K order (BUILTINS.md section 1; NUMERICS 1.4)."""
    bsel = selected_b(B, pos)
    out = np.empty((spec.m, spec.n), np.int64)
    for i in range(spec.m):
        a = [int(x) for x in A[i]]
        for j in range(spec.n):
            out[i, j] = dot(a, [int(x) for x in bsel[i, :, j]], int(C[i, j]))
    return out


def mismatches(got, want, f: Fmt | None, limit=5):
    """Positions where got and want differ (bits; NaN by NaN-ness; f None: integers)."""
    got, want = np.asarray(got), np.asarray(want)
    bad = []
    for idx in np.ndindex(want.shape):
        g, w = int(got[idx]), int(want[idx])
        ok = (g == w) if f is None else same_bits(g, w, f)
        if not ok:
            bad.append((idx, hex(g & 0xFFFFFFFF) if f else g, hex(w) if f else w))
    return bad


def builtin_float_mismatches(fn, spec, model, dot_ref, seed):
    """Run the float builtin ``fn`` under ``model`` on two waves: one with NaN/Inf operands
    and poisoned pruned B rows (jwmma's product-specials branch) and one with finite
    operands (its fast branch; C still special). ``dot_ref(a, b, c, fa, fb, fc)`` is the
    reference dot. Returns [(wave, (i, j), got, want)] of the differing outputs."""
    fa, fb, fc = spec_formats(spec)
    out = []
    for wave, finite in (("specials", False), ("finite", True)):
        rng = np.random.default_rng(seed_of(seed, wave))
        A, pos, B, C = gen_builtin_float(rng, fa, fb, fc, spec.m, spec.n, spec.k, finite_operands=finite)
        got = run_builtin(fn, spec, A, pos, B, C, model=model)
        want = builtin_ref(spec, A, pos, B, C, lambda a, b, c: dot_ref(a, b, c, fa, fb, fc))
        out += [(wave, *x) for x in mismatches(got, want, fc)]
    return out
