"""Operands of `crosscheck.py`: the data classes, drawn with numpy from fixed seeds (no JAX
computation: the formats come from `jwmma.numerics.formats`).

Everything is built from integer draws of a `numpy.random.Generator` (PCG64, the same
stream on every machine) as element codes, then viewed as the element dtype, so two machines
build identical operands; `crosscheck.py` stores a digest of every operand set so that a
comparison can prove it. The only float arithmetic is the issue-20 draw (N(0,1) * 2**U, a
power-of-two scaling of numpy's normal variates, then one ml_dtypes cast), kept because it
is the data that found the GPU drift.

Float builtins take four classes, integer builtins three (`classes`):

* ``normal``: values of random sign over a few binades around 1.
* ``wide``: A rows, C rows and B columns in four bands (`A_BANDS`, `B_BANDS`, `C_BANDS`):
  the issue-20 draw N(0,1) * 2**U{-12..11}; the exponent range up to the square root of the
  maximum (subnormals included); the bottom of the range (tiny x tiny: subnormal f32 results;
  every other tiny A row is all +-0, so D is the subnormal C there); the top two binades for
  A and C with one sign per row, against positive B columns of 2**-9..4 (D near the maximum
  or overflowing to Inf of that sign; the other huge products overflow both ways: NaN).
* ``ties``: every group of 4 along K is a tie pattern for pruning: the 2nd and 3rd largest
  magnitudes equal (same sign, opposite signs), +0 against -0, all zeros of mixed signs, four
  equal magnitudes, top and bottom ties, subnormal ties, three-way ties, and a few groups
  without a tie (the prune part adds NaN against Inf, or against the maximum in formats
  without Inf: a NaN ranks as an infinite magnitude). A is not 2:4: the GEMM prunes it
  (``gemm(prune=True)``); B and C are plain, so every output is finite.
* ``specials``: NaN (payloads of both kinds), +-Inf, -0, +0 and +-max, about two in every
  third A row (among the kept values) and B column (also in B rows that A prunes) and in
  10% of C; A rows of -0 against positive B columns (and -0 in C) for signed-zero results.
* integers: ``normal`` (uniform over the range), ``ties`` (the integer tie patterns: equal
  magnitudes of either sign, zeros, -128 against 127), ``saturate`` (extreme factors whose
  products all push one way, up in even rows and down in odd ones, C within an eighth of
  what they add from INT32_MAX or INT32_MIN: the sum crosses the limit, so clamp=True
  saturates, staged_clamp after a K-half, and clamp=False wraps).

Except for ``ties``, a sparse builtin's A is dense-shaped and already 2:4 (two kept values
per group, +0 elsewhere), so ``gemm(prune=True)`` keeps exactly those.
"""
from __future__ import annotations

import zlib

import ml_dtypes
import numpy as np

from jwmma.numerics import cast  # one rounding from float64 on every machine

FLOAT_CLASSES = ("normal", "wide", "ties", "specials")
INT_CLASSES = ("normal", "ties", "saturate")
PAIRS = np.array([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)])

__all__ = ["FLOAT_CLASSES", "INT_CLASSES", "classes", "gemm_shape", "gemm_operands", "wave_operands",
           "prune_inputs", "issue20_repro", "seed_of", "Fmt", "float_fmt"]


def seed_of(*parts) -> int:
    """A seed from names (CRC32: the same on every machine and Python)."""
    return zlib.crc32("|".join(map(str, parts)).encode())


def classes(integer: bool) -> tuple:
    return INT_CLASSES if integer else FLOAT_CLASSES


# ------------------------------------------------------------------------- float codes
class Fmt:
    """What the generators need of a float format (jwmma.numerics.formats.FloatFormat)."""

    def __init__(self, f):
        self.bits, self.ebits, self.mbits, self.nan, self.inf = f.bits, f.ebits, f.mbits, f.nan, f.inf
        self.dtype = np.dtype(f.dtype)
        self.top = (1 << f.ebits) - (2 if f.nan == "ieee" else 1)  # largest finite exponent field
        self.bias = f.bias
        self.sign = 1 << (f.bits - 1)
        mmax = (1 << f.mbits) - (2 if f.nan == "fn" else 1)
        self.max = (self.top << f.mbits) | mmax  # magnitude code of the largest finite value

    def code(self, s, e, m):
        m = np.asarray(m)
        if self.nan == "fn":  # E4M3FN: exponent and mantissa all ones is NaN
            m = np.where(np.asarray(e) == self.top, np.minimum(m, (1 << self.mbits) - 2), m)
        c = (np.asarray(s) << (self.bits - 1)) | (np.asarray(e) << self.mbits) | m
        if self.nan == "fnuz":  # 0x80 is the NaN: no -0
            c = np.where(c == self.sign, 0, c)
        return c

    def nan_codes(self, rng, shape):
        if self.nan == "none":  # OCP MX FP6/FP4 have no NaN: their extremes instead
            return (rng.integers(0, 2, shape) << (self.bits - 1)) | self.max
        if self.nan == "fnuz":
            return np.full(shape, self.sign)
        if self.nan == "fn":
            return (rng.integers(0, 2, shape) << (self.bits - 1)) | (self.sign - 1)
        m = rng.integers(1, 1 << self.mbits, shape)  # quiet and signalling, any payload
        return (rng.integers(0, 2, shape) << (self.bits - 1)) | (((1 << self.ebits) - 1) << self.mbits) | m

    def inf_codes(self, rng, shape):
        return (rng.integers(0, 2, shape) << (self.bits - 1)) | (((1 << self.ebits) - 1) << self.mbits)

    def view(self, codes):
        width = {1: np.uint8, 2: np.uint16, 4: np.uint32}[self.dtype.itemsize]
        return np.asarray(codes).astype(np.int64).astype(width).view(self.dtype)


def float_fmt(name: str) -> Fmt:
    from jwmma.numerics.formats import FLOAT_FORMATS

    return Fmt(FLOAT_FORMATS[name])


def _band(rng, f: Fmt, shape, band):
    """Codes of one band: 'plain' (a few binades around 1), 'issue' (issue 20's draw),
    'half' (the finite exponent range up to the square root of the maximum, subnormals
    included: two of them never overflow), 'tiny' (subnormals and the smallest normals),
    'huge' (the top two binades), 'pos' (positive, 2**-9 .. 4: huge x pos is near the
    maximum or overflows)."""
    s = rng.integers(0, 2, shape)
    m = rng.integers(0, 1 << f.mbits, shape)
    if band == "plain":
        e = np.clip(rng.integers(f.bias - 3, f.bias + 3, shape), 1, f.top)
    elif band == "half":
        e = rng.integers(0, f.bias + (f.top - f.bias) // 2 + 1, shape)
    elif band == "tiny":
        e = rng.integers(0, 3, shape)
    elif band == "huge":
        e = rng.integers(f.top - 1, f.top + 1, shape)
    elif band == "pos":
        s = np.zeros(shape, np.int64)
        e = np.clip(rng.integers(f.bias - 9, f.bias + 2, shape), 1, f.top)
    elif band == "issue":  # issue 20: x = N(0,1) * 2**U{-12..11}, then cast
        x = rng.standard_normal(shape) * np.ldexp(1.0, rng.integers(-12, 12, shape))
        fmax = float(ml_dtypes.finfo(f.dtype).max) if f.dtype != np.float32 else float(np.finfo(np.float32).max)
        v = cast(np.clip(x, -fmax, fmax), f.dtype)  # once-rounded: the same codes with any ml_dtypes
        width = {1: np.uint8, 2: np.uint16, 4: np.uint32}[f.dtype.itemsize]
        return v.view(width).astype(np.int64)
    else:
        raise ValueError(band)
    return f.code(s, e, m)


#: the wide class: A row r and C row r in band r % 4, B column j in band j % 4
A_BANDS = ("issue", "half", "tiny", "huge")
B_BANDS = ("issue", "half", "tiny", "pos")
C_BANDS = ("issue", "half", "tiny", "huge")


def _wide(rng, fa: Fmt, fb: Fmt, fc: Fmt, m, n, k):
    """(a, b, c) codes of the wide class. Tiny x tiny gives subnormal f32 results (every
    other tiny A row is all +-0, so D is the subnormal C there); huge rows (one sign per row,
    C near the maximum with the same sign) x pos columns land near the maximum or overflow
    to Inf of that sign; huge x issue/half overflows both ways (NaN)."""
    a, b, c = np.empty((m, k), np.int64), np.empty((k, n), np.int64), np.empty((m, n), np.int64)
    for i in range(4):
        r, j = np.arange(i, m, 4), np.arange(i, n, 4)
        a[r] = _band(rng, fa, (len(r), k), A_BANDS[i])
        b[:, j] = _band(rng, fb, (k, len(j)), B_BANDS[i])
        c[r] = _band(rng, fc, (len(r), n), C_BANDS[i])
    huge = np.arange(3, m, 4)
    sign = rng.integers(0, 2, (len(huge), 1))
    a[huge] = (a[huge] & (fa.sign - 1)) | (sign << (fa.bits - 1))
    c[huge] = (c[huge] & (fc.sign - 1)) | (sign << (fc.bits - 1))
    zero = np.arange(2, m, 8)
    a[zero] = 0 if fa.nan == "fnuz" else (rng.integers(0, 2, (len(zero), k)) << (fa.bits - 1))
    return a, b, c


def _specials(rng, f: Fmt, codes, rate):
    """Replace a fraction ``rate`` of ``codes`` (a float or an array broadcasting against
    them) by NaN, +-Inf, -0, +0, +-max."""
    kinds = [f.nan_codes(rng, codes.shape), np.zeros(codes.shape, np.int64),
             (rng.integers(0, 2, codes.shape) << (f.bits - 1)) | f.max]
    if f.inf:
        kinds.append(f.inf_codes(rng, codes.shape))
    if f.nan != "fnuz":
        kinds.append(np.full(codes.shape, f.sign))  # -0
    which = rng.integers(0, len(kinds), codes.shape)
    pick = np.choose(which, kinds)
    return np.where(rng.random(codes.shape) < rate, pick, codes)


def _tie_groups(rng, f: Fmt, groups, specials=True):
    """(groups, 4) codes, one tie pattern per group (module doc), positions shuffled;
    ``specials=False`` leaves out NaN against Inf (in a GEMM every output would be NaN)."""
    g = np.zeros((groups, 4), np.int64)
    mags = np.sort(_band(rng, f, (groups, 3), "plain") & (f.sign - 1), axis=1)[:, ::-1]
    hi, mid, lo = mags[:, 0], mags[:, 1], np.minimum(mags[:, 2], np.maximum(mags[:, 1] - 1, 0))
    sub = rng.integers(1, 1 << f.mbits, groups)  # subnormal magnitudes
    neg0 = f.sign if f.nan != "fnuz" else 0
    pattern = rng.integers(0, 10, groups)
    if not specials:
        pattern = np.where(pattern == 7, 0, pattern)
    s = rng.integers(0, 2, (groups, 4)) << (f.bits - 1)
    for p in range(10):
        r = pattern == p
        n = int(r.sum())
        if n == 0:
            continue
        h, md, l, sb = hi[r], mid[r], lo[r], sub[r]
        z = np.zeros(n, np.int64)
        if p == 0:  # 2nd == 3rd, random signs
            rows = [h, md, md, l]
        elif p == 1:  # 2nd == 3rd, opposite signs
            rows = [h, md, md | f.sign, l]
        elif p == 2:  # +0 against -0 behind one value
            rows = [h, z, z + neg0, z]
        elif p == 3:  # all zeros, mixed signs
            rows = [z, z + neg0, z + neg0, z]
        elif p == 4:  # four equal magnitudes
            rows = [md, md, md, md]
        elif p == 5:  # top tie and bottom tie
            rows = [h, h, l, l]
        elif p == 6:  # subnormal ties behind a normal
            rows = [h, sb, sb, z]
        elif p == 7:  # NaN against Inf (or the maximum where there is no Inf)
            other = f.inf_codes(rng, n) if f.inf else z + f.max
            rows = [f.nan_codes(rng, n), other, md, l]
        elif p == 8:  # three-way tie behind the largest
            rows = [h, md, md, md]
        else:  # no tie
            rows = list(np.sort(_band(rng, f, (n, 4), "plain") & (f.sign - 1), axis=1).T)
        block = np.stack(rows, axis=1)
        sr = s[r]
        if f.nan == "fnuz":  # a signed zero is its NaN: zeros stay +0
            sr = np.where((block & (f.sign - 1)) == 0, 0, sr)
        if p not in (1, 2, 3, 7):  # random signs; the others fix theirs
            block = block | sr
        elif p == 1:  # both signs of the tie flip together: still opposite
            block[:, [0, 3]] |= sr[:, [0, 3]]
            block[:, 1] ^= sr[:, 1]
            block[:, 2] ^= sr[:, 1]
        g[r] = block
    perm = np.argsort(rng.random((groups, 4)), axis=1)
    return np.take_along_axis(g, perm, axis=1)


def _mask_2_4(rng, x, k):
    """Zero (+0 code) two of every four along the last axis (K padded to a multiple of 4 and
    cut back)."""
    kp = -(-k // 4) * 4
    keep = np.zeros(x.shape[:-1] + (kp // 4, 4), bool)
    pairs = PAIRS[rng.integers(0, 6, keep.shape[:-1])]
    np.put_along_axis(keep, pairs, True, axis=-1)
    keep = keep.reshape(x.shape[:-1] + (kp,))[..., :k]
    return np.where(keep, x, 0)


def _float_class(rng, cls, fa: Fmt, fb: Fmt, fc: Fmt, m, n, k, sparse):
    """(a, b, c) codes of one float class: a (m, k) dense-shaped, b (k, n), c (m, n)."""
    if cls == "normal":
        a, b, c = _band(rng, fa, (m, k), "plain"), _band(rng, fb, (k, n), "plain"), _band(rng, fc, (m, n), "plain")
    elif cls == "wide":
        a, b, c = _wide(rng, fa, fb, fc, m, n, k)
    elif cls == "ties":
        kp = -(-k // 4) * 4
        a = _tie_groups(rng, fa, m * kp // 4, specials=False).reshape(m, kp)[:, :k]
        b, c = _band(rng, fb, (k, n), "plain"), _band(rng, fc, (m, n), "plain")
        return a, b, c
    elif cls == "specials":  # about 2 specials in every third A row (of the kept values) and B column
        rows, cols = (np.arange(m) % 3 == 0)[:, None], (np.arange(n) % 3 == 0)[None, :]
        a = _specials(rng, fa, _band(rng, fa, (m, k), "plain"), rows * (4.0 / k if sparse else 2.0 / k))
        b = _specials(rng, fb, _band(rng, fb, (k, n), "plain"), cols * (2.0 / k))
        c = _specials(rng, fc, _band(rng, fc, (m, n), "plain"), 0.1)
        if fa.nan != "fnuz":  # rows of -0 (D: C plus signed zeros)
            a[1::7] = fa.sign
            c[1::7] = np.where(rng.random((len(c[1::7]), n)) < 0.5, fc.sign, c[1::7])
        if fb.nan != "fnuz":
            b[:, 2::7] = fb.sign
        b[:, 4::5] &= fb.sign - 1  # positive columns: -0 rows x these give -0 products only (D = -0 with C = -0)
    else:
        raise ValueError(cls)
    if sparse:
        a = _mask_2_4(rng, a, k)
    return a, b, c


# ------------------------------------------------------------------------- integers
def _int_ranges(spec):
    """(A lo, hi), (B lo, hi) and the dtypes: A signed, B unsigned for iu8/iu4 (the signedness
    gemm reads from the dtypes), signed for i8."""
    t = spec.a_type
    if t == "iu8":
        return (-128, 127), (0, 255), np.int8, np.uint8
    if t == "iu4":
        return (-8, 7), (0, 15), ml_dtypes.int4, ml_dtypes.uint4
    return (-128, 127), (-128, 127), np.int8, np.int8


def _int_ties(rng, lo, hi, groups):
    g = np.zeros((groups, 4), np.int64)
    top = min(hi, -lo) if lo < 0 else hi
    v = np.sort(rng.integers(1, top + 1, (groups, 3)), axis=1)[:, ::-1]
    h, md, l = v[:, 0], v[:, 1], np.minimum(v[:, 2], v[:, 1] - 1)
    pattern = rng.integers(0, 7, groups)
    neg = lo < 0
    for p in range(7):
        r = pattern == p
        n = int(r.sum())
        if n == 0:
            continue
        hh, mm, ll, z = h[r], md[r], l[r], np.zeros(n, np.int64)
        if p == 0:
            rows = [hh, mm, mm, ll]
        elif p == 1:
            rows = [hh, mm, -mm if neg else mm, ll]
        elif p == 2:
            rows = [hh, z, z, z]
        elif p == 3:
            rows = [z, z, z, z]
        elif p == 4:
            rows = [mm, -mm if neg else mm, mm, mm]
        elif p == 5:  # -128 (magnitude 128) against 127, or the unsigned maximum
            rows = [z + lo, z + hi, z + hi, ll] if neg else [z + hi, z + hi, mm, ll]
        else:
            rows = [hh, mm, mm, mm]
        g[r] = np.stack(rows, axis=1)
    if neg:  # random signs on the patterns that do not fix them
        flip = (rng.random((groups, 4)) < 0.5) & np.isin(pattern, (0, 2, 6))[:, None] & (g > lo)
        g = np.where(flip, -g, g)
    perm = np.argsort(rng.random((groups, 4)), axis=1)
    return np.clip(np.take_along_axis(g, perm, axis=1), lo, hi)


def _int_class(rng, cls, spec, m, n, k, sparse):
    (alo, ahi), (blo, bhi), _, _ = _int_ranges(spec)
    if cls == "normal":
        a = rng.integers(alo, ahi + 1, (m, k))
        b = rng.integers(blo, bhi + 1, (k, n))
        c = rng.integers(-(2**24), 2**24, (m, n))
    elif cls == "ties":
        kp = -(-k // 4) * 4
        a = _int_ties(rng, alo, ahi, m * kp // 4).reshape(m, kp)[:, :k]
        b = rng.integers(blo, bhi + 1, (k, n))
        c = rng.integers(-(2**24), 2**24, (m, n))
        return a, b, c
    elif cls == "saturate":  # even rows push up, odd rows down; B at its extreme magnitude
        up = (np.arange(m) % 2 == 0)[:, None]
        bmag = bhi if blo >= 0 else blo  # the largest |B|
        b = np.where(rng.random((k, n)) < 0.9, bmag, rng.integers(blo, bhi + 1, (k, n)))
        sign_b = 1 if bmag > 0 else -1
        a_up, a_down = (ahi, alo) if sign_b > 0 else (alo, ahi)
        a = np.where(up, a_up, a_down) * np.ones((m, k), np.int64)
        a = np.where(rng.random((m, k)) < 0.1, rng.integers(alo, ahi + 1, (m, k)), a)
        reach = abs(ahi if a_up == ahi else alo) * abs(bmag) * (k // 2)  # what the products add
        near = rng.integers(0, max(reach // 8, 2), (m, n))
        c = np.where(up, 2**31 - 1 - near, -(2**31) + near)
    else:
        raise ValueError(cls)
    if sparse:
        a = _mask_2_4(rng, a, k)
    return a, b, c


# ------------------------------------------------------------------------- operand sets
def _formats(spec):
    """The Fmt of A, B, C values (xf32 operands are float32 values: their f32 codes)."""
    from jwmma.numerics.formats import F32, FLOAT_FORMATS

    fc = F32 if spec.c_type == "f32" else FLOAT_FORMATS[spec.c_type]
    value = lambda f: F32 if f.name == "xf32" else f  # noqa: E731
    return Fmt(value(spec.a_format)), Fmt(value(spec.b_format)), Fmt(fc)


#: block-scaled rows: the (fmt_a, fmt_b) pairs the grid runs (fp8/bf8/fp6/bf6/fp4, mixed)
SCALED_PAIRS = ((0, 0), (1, 4), (4, 2), (2, 3), (3, 1))


def gemm_scales(spec, names):
    """A block-scaled row's E8M0 scales per class, (len(classes), *batch, M, ceil(K/32)) and
    (len(classes), *batch, ceil(K/32), N) uint8: normal near 127; wide the whole range (0 =
    2**-127 and 254 included: products far out of the f32 range); ties 127; specials with
    0xFF (NaN) in some rows and columns."""
    batch, m, n, k = gemm_shape(spec)
    nb = -(-k // spec.scale_block)
    out_a, out_b = [], []
    for cls in names:
        rng = np.random.default_rng(seed_of("scales", spec.name, spec.fmt_codes, cls))
        sa, sb = (rng.integers(120, 135, batch + shape) for shape in ((m, nb), (nb, n)))
        if cls == "wide":
            sa = np.where(rng.random(sa.shape) < 0.5, rng.integers(0, 255, sa.shape), sa)
            sb = np.where(rng.random(sb.shape) < 0.5, rng.integers(0, 255, sb.shape), sb)
        elif cls == "ties":
            sa, sb = np.full_like(sa, 127), np.full_like(sb, 127)
        elif cls == "specials":
            sa[..., ::5, 1] = 255
            sb[..., 2, ::7] = 255
        out_a.append(sa)
        out_b.append(sb)
    return np.stack(out_a).astype(np.uint8), np.stack(out_b).astype(np.uint8)


def gemm_shape(spec) -> tuple:
    """(batch, M, N, K): two row and two column tiles, both cut short (odd M and N), K three
    steps and an odd part of a fourth, and a batch of 2 behind the class axis."""
    cut = lambda t, by: by if t > by else t // 2 + 1  # noqa: E731 - 4x4 multi-block tiles: 5 of 8
    return (2,), 2 * spec.m - cut(spec.m, 11), 2 * spec.n - cut(spec.n, 13), 3 * spec.k + 5


def _values(spec, codes_a, codes_b, codes_c):
    if spec.c_type == "f64":  # made as float64 values (`_f64_class`)
        return codes_a, codes_b, codes_c
    if spec.integer:
        _, _, da, db = _int_ranges(spec)
        return (np.asarray(codes_a).astype(da), np.asarray(codes_b).astype(db),
                np.asarray(codes_c).astype(np.int64).astype(np.int32))
    fa, fb, fc = _formats(spec)
    return fa.view(codes_a), fb.view(codes_b), fc.view(codes_c)


def _f64_class(rng, cls, m, n, k):
    """(a, b, c) float64 values of one class for the f64 MFMA (built with numpy, whose float64
    arithmetic keeps subnormals): normal; wide (exponents over the whole range: products that
    underflow to subnormals or overflow, C as wide); ties (C = 2**53 and 2**54 with products of
    1, 3 and 2**-53 multiples: sums exactly halfway between doubles, both RNE directions);
    specials (NaN, Inf, -0 rows and columns, subnormals)."""
    def normal(shape):
        return rng.standard_normal(shape) * np.ldexp(1.0, rng.integers(-8, 9, shape))

    if cls == "normal":
        return normal((m, k)), normal((k, n)), normal((m, n))
    if cls == "wide":
        def wide(shape, lo, hi):
            return np.ldexp(rng.uniform(1, 2, shape) * rng.choice([-1.0, 1.0], shape), rng.integers(lo, hi, shape))
        return wide((m, k), -560, 520), wide((k, n), -560, 520), wide((m, n), -1074, 1023)
    if cls == "ties":
        a = rng.choice(np.array([1.0, -1.0, 3.0, 0.5, 1 + 2.0**-52]), (m, k))
        b = rng.choice(np.array([1.0, 2.0**-53, -2.0**-53, 0.5, 2.0**-52]), (k, n))
        c = rng.choice(np.array([2.0**53, -2.0**53, 2.0**54, 1.0, 2.0**53 + 2]), (m, n))
        return a, b, c
    a, b, c = normal((m, k)), normal((k, n)), normal((m, n))  # specials
    for x, p in ((a, 2.0 / k), (b, 2.0 / k), (c, 0.1)):
        pick = rng.random(x.shape)
        x[pick < p / 3] = np.nan
        x[(pick >= p / 3) & (pick < 2 * p / 3)] = np.inf * rng.choice([-1.0, 1.0])
        x[(pick >= 2 * p / 3) & (pick < p)] = np.ldexp(rng.uniform(1, 2), -1060)  # subnormal
    a[1::7], b[:, 2::7] = -0.0, -0.0
    c[1::7] = np.where(rng.random((len(c[1::7]), n)) < 0.5, -0.0, c[1::7])
    b[:, 4::5] = np.abs(b[:, 4::5])
    return a, b, c


def _class_operands(spec, cls, rng, batch, m, n, k, sparse):
    out = []
    for _ in range(int(np.prod(batch, dtype=np.int64))):
        if spec.c_type == "f64":
            out.append(_f64_class(rng, cls, m, n, k))
        elif spec.integer:
            out.append(_int_class(rng, cls, spec, m, n, k, sparse))
        else:
            fa, fb, fc = _formats(spec)
            out.append(_float_class(rng, cls, fa, fb, fc, m, n, k, sparse))
    return [np.stack([o[i] for o in out]).reshape(batch + out[0][i].shape) for i in range(3)]


def gemm_operands(spec):
    """(a, b, c, classes): values of shape (len(classes), *batch, M, K) etc. (`gemm_shape`)."""
    batch, m, n, k = gemm_shape(spec)
    names = classes(spec.integer)
    parts = [_class_operands(spec, cls, np.random.default_rng(seed_of("gemm", spec.name, spec.target,
                                                                      *spec.fmt_codes, cls)),
                             batch, m, n, k, not spec.dense) for cls in names]
    a, b, c = (np.stack([p[i] for p in parts]) for i in range(3))
    return (*_values(spec, a, b, c), names)


WAVES = 4


def _compress(a, key):
    """Top two of every four by ``key`` (stable: ties to the lower position): (values, pos)."""
    g, kg = a.reshape(a.shape[:-1] + (-1, 4)), key.reshape(key.shape[:-1] + (-1, 4))
    order = np.argsort(-kg, axis=-1, kind="stable")[..., :2]
    pos = np.sort(order, axis=-1)
    vals = np.take_along_axis(g, pos, axis=-1)
    return vals.reshape(a.shape[:-1] + (-1,)), pos.reshape(a.shape[:-1] + (-1,))


def wave_operands(spec):
    """Matrix-side operands of the direct builtin calls: per class `WAVES` single tiles, A
    compressed in numpy (its two largest codes by magnitude per group; the specials class
    also gets duplicate positions whose second value is the first negated: exact
    cancellation). Returns (a_vals, pos or None, b, c, classes), leading dims
    (len(classes), WAVES), and a multi-block row's block axis after them."""
    names = classes(spec.integer)
    sets = []
    for cls in names:
        rng = np.random.default_rng(seed_of("waves", spec.name, spec.target, *spec.fmt_codes, cls))
        waves = (WAVES, spec.blocks) if spec.blocks > 1 else (WAVES,)  # a multi-block call: (blocks, M, K)
        a, b, c = _class_operands(spec, cls, rng, waves, spec.m, spec.n, spec.k, False)
        pos = None
        if not spec.dense:
            if spec.integer:
                key = np.abs(a)
            else:
                fa = _formats(spec)[0]
                mag = a & (fa.sign - 1)
                is_nan = {"ieee": mag > ((1 << fa.ebits) - 1) << fa.mbits, "fn": mag == fa.sign - 1,
                          "fnuz": a == fa.sign}[fa.nan]
                key = np.where(is_nan, fa.sign, mag)
            a, pos = _compress(a, key)
            if cls == "specials":
                dup = rng.random(pos[..., 0::2].shape) < 0.15
                pos[..., 1::2] = np.where(dup, pos[..., 0::2], pos[..., 1::2])
                fa = _formats(spec)[0]
                neg = a[..., 0::2] ^ fa.sign if fa.nan != "fnuz" else a[..., 0::2]
                a[..., 1::2] = np.where(dup, neg, a[..., 1::2])
        sets.append((a, pos, b, c))
    a, b, c = (np.stack([s[i] for s in sets]) for i in (0, 2, 3))
    pos = None if spec.dense else np.stack([s[1] for s in sets]).astype(np.int32)
    a, b, c = _values(spec, a, b, c)
    return a, pos, b, c, names


# ------------------------------------------------------------------------- prune_2_4
PRUNE_DTYPES = ("f16", "bf16", "fp8", "bf8", "fp8_fnuz", "bf8_fnuz", "i8", "u8", "i4", "u4")
HIPSPARSELT = ("f16", "bf16", "fp8", "bf8", "i8")
PRUNE_CLASSES = ("ties", "specials", "wide", "normal")


def prune_inputs(name: str, rows: int = 48, cols: int = 64):
    """(len(PRUNE_CLASSES), rows, cols) values of one dtype for `jwmma.prune_2_4`, dense
    (not 2:4): every class as full groups of 4."""
    rng = np.random.default_rng(seed_of("prune", name))
    out = []
    if name in ("i8", "u8", "i4", "u4"):
        lo, hi = {"i8": (-128, 127), "u8": (0, 255), "i4": (-8, 7), "u4": (0, 15)}[name]
        dt = {"i8": np.int8, "u8": np.uint8, "i4": ml_dtypes.int4, "u4": ml_dtypes.uint4}[name]
        for cls in PRUNE_CLASSES:
            if cls == "ties":
                x = _int_ties(rng, lo, hi, rows * cols // 4).reshape(rows, cols)
            elif cls in ("specials", "wide"):  # extremes and zeros
                x = rng.choice(np.array(sorted({lo, lo + 1, 0, 1, hi - 1, hi})), (rows, cols))
            else:
                x = rng.integers(lo, hi + 1, (rows, cols))
            out.append(x)
        return np.stack(out).astype(dt), PRUNE_CLASSES
    f = float_fmt(name)
    for cls in PRUNE_CLASSES:
        if cls == "ties":
            x = _tie_groups(rng, f, rows * cols // 4).reshape(rows, cols)
        elif cls == "specials":
            x = _specials(rng, f, _band(rng, f, (rows, cols), "plain"), 0.3)
        elif cls == "wide":  # every band, subnormals included
            x = np.concatenate([_band(rng, f, (rows // 6, cols), b) for b in
                                ("issue", "half", "tiny", "huge", "pos", "plain")])
        else:
            x = _band(rng, f, (rows, cols), "plain")
        out.append(x)
    return f.view(np.stack(out)), PRUNE_CLASSES


# ------------------------------------------------------------------------- issue 20's repro data
def _issue_draw(rng, shape, dtype):
    x = rng.standard_normal(shape)
    return cast(x * np.ldexp(1.0, rng.integers(-12, 12, shape)), dtype)  # once-rounded (see module doc)


def issue20_repro():
    """The two operand sets of issue 20 (its "Repro data"), exactly as drawn there:
    {name: (builtin, model, prune, a, b, c)}."""
    bf16 = ml_dtypes.bfloat16
    rng = np.random.default_rng(1001)
    a1 = _issue_draw(rng, (2, 96, 640), bf16)
    b1 = _issue_draw(rng, (2, 640, 80), bf16)
    c1 = _issue_draw(rng, (2, 96, 80), np.float32)
    rng = np.random.default_rng(1011)
    a2 = _issue_draw(rng, (64, 256), bf16)
    b2 = _issue_draw(rng, (256, 48), bf16)
    c2 = _issue_draw(rng, (64, 48), np.float32)
    return {
        "issue20_1001": ("smfmac_f32_16x16x64_bf16", "cdna3", True, a1, b1, c1),
        "issue20_1011": ("wmma_f32_16x16x16_bf16_w32_gfx12", "gfx12_dot4", False, a2, b2, c2),
    }
