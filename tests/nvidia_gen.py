"""Test data: operand codes for the differential tests (random bit patterns, realistic values,
adversarial structure). Test-only; shares nothing with the code under test."""
import numpy as np
import ml_dtypes

DTYPES = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "f16": np.float16,
          "bf16": ml_dtypes.bfloat16, "e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
          "e5m2fnuz": ml_dtypes.float8_e5m2fnuz, "f32": np.float32}
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def to_codes(x, fmt):
    with np.errstate(over="ignore"):  # out-of-range values become Inf/NaN on purpose
        x = np.asarray(x).astype(DTYPES[fmt])
    return x.view(UINT[x.dtype.itemsize]).astype(np.int64)


def from_codes(codes, fmt):
    dt = np.dtype(DTYPES[fmt])
    return np.asarray(codes).astype(UINT[dt.itemsize]).view(dt)


def operands(rng, fmt, n, k, specials=True):
    """(n, k) codes: a mix of all-bit-pattern rows, normal values of varied scale, subnormals,
    cancelling pairs and huge exponent spreads."""
    bits = np.dtype(DTYPES[fmt]).itemsize * 8
    kinds = rng.integers(0, 6, n)
    out = np.empty((n, k), np.int64)
    for i in range(n):
        t = kinds[i]
        if t == 0 and specials:  # every bit pattern (NaN, Inf, subnormals, -0 included)
            row = rng.integers(0, 1 << bits, k)
        elif t <= 1:  # realistic values
            row = to_codes(rng.standard_normal(k) * 2.0 ** rng.integers(-4, 5), fmt)
        elif t == 2:  # wide exponent spread, incl. subnormals of the format
            info = ml_dtypes.finfo(DTYPES[fmt])
            lo, hi = np.log2(float(info.smallest_subnormal)), np.log2(float(info.max))
            v = np.exp2(rng.uniform(lo, hi, k)) * rng.choice([-1, 1], k)
            row = to_codes(v, fmt)
        elif t == 3:  # cancelling pairs: x, -x
            v = rng.standard_normal(k) * 2.0 ** rng.integers(-3, 4, k)
            v[1::2] = -v[0::2][: len(v[1::2])]
            row = to_codes(v, fmt)
        elif t == 4:  # mostly zeros with a few values
            v = np.where(rng.random(k) < 0.7, 0.0, rng.standard_normal(k))
            row = to_codes(v, fmt)
        else:  # tiny values and zeros: products below the zero exponent, gradual underflow
            lo = {"bf16": (-80, -60), "f16": (-24, -8)}.get(fmt, (-16, -6))
            v = np.exp2(rng.uniform(*lo, k)) * rng.choice([-1, 1], k)
            v = np.where(rng.random(k) < 0.3, 0.0, v)
            row = to_codes(v, fmt)
        out[i] = row
    # formats without NaN-free patterns: keep NaNs out of the non-special rows (casts give none)
    return out


def accumulators(rng, fmt, n, specials=True):
    """(n,) C codes: zeros of both signs, tiny, subnormal, huge, Inf/NaN, and ordinary values."""
    choices = [0.0, -0.0, 1.0, -1.0, 2.0 ** -140, -(2.0 ** -130), 3e38, -3e38, 0.7, -1e-5, 1e6]
    if fmt == "f16":
        choices = [0.0, -0.0, 1.0, -1.0, 2.0 ** -20, -(2.0 ** -15), 65000.0, -60000.0, 0.7, -1e-5, 300.0]
    v = rng.standard_normal(n) * 2.0 ** rng.integers(-30, 20, n)
    pick = rng.random(n) < 0.4
    v = np.where(pick, rng.choice(choices, n), v)
    v = np.where(rng.random(n) < 0.15, 0.0, v)  # C = 0 often: its exponent is the zero exponent
    codes = to_codes(v, fmt)
    if specials:
        sp = rng.random(n) < 0.05
        special = {"f32": [0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001], "f16": [0x7C00, 0xFC00, 0x7E00]}[fmt]
        codes = np.where(sp, rng.choice(special, n), codes)
    return codes


def near_zero_exponent(rng, fa, fb, fc, n, k, zero_exp):
    """Rows whose products have exponents around ``zero_exp`` (and zeros among them), with C = 0
    or tiny: the cases where a zero product's exponent decides the group maximum."""
    ia, ib = ml_dtypes.finfo(DTYPES[fa]), ml_dtypes.finfo(DTYPES[fb])
    lo_a, hi_a = int(np.log2(float(ia.smallest_subnormal))), int(np.log2(float(ia.max)))
    lo_b, hi_b = int(np.log2(float(ib.smallest_subnormal))), int(np.log2(float(ib.max)))
    target = rng.integers(zero_exp - 30, zero_exp + 3, (n, k))
    ea = np.clip(target // 2 + rng.integers(-3, 4, (n, k)), lo_a, hi_a - 1)
    eb = np.clip(target - ea, lo_b, hi_b - 1)
    frac = 1 + rng.integers(0, 8, (n, k)) / 8
    sign = rng.choice([-1.0, 1.0], (n, k))
    a = np.where(rng.random((n, k)) < 0.25, 0.0, sign * frac * np.exp2(ea.astype(float)))
    b = np.where(rng.random((n, k)) < 0.1, 0.0, np.exp2(eb.astype(float)) * (1 + rng.integers(0, 4, (n, k)) / 4))
    c = np.where(rng.random(n) < 0.6, 0.0, rng.choice([-1.0, 1.0], n) * np.exp2(rng.integers(zero_exp - 20, zero_exp + 10, n).astype(float)))
    return to_codes(a, fa), to_codes(b, fb), to_codes(c, fc)


def zero_exponent_rows(fmt, ez, F):
    """Two dot products of 3 terms that pin the zero exponent ez of a design with F fraction
    bits (hand-derived): [main, pin, 0 * 1] with C = 0.
    bf16 -> f32, toward zero: main = 2**-148; pin = -2**(ez-F-1), resp. -2**(ez-F).
      The zero sets E_max = ez (all else is lower), the grid is 2**(ez-F): the first pin is cut
      (result 2**-148 = 0x2), the second is kept (2**-148 - tiny -> RZ 2**-149 = 0x1). One less
      (ez-1) would keep both (0x1, 0x1), one more (ez+1) cut both (0x2, 0x2).
    f16 -> f16, nearest: main = 2**-25 (a tie between +0 and 2**-24); pin = +2**(ez-F-1), resp.
      +2**(ez-F): cut -> tie -> even: 0x0; kept -> above the tie: 0x1.
    Returns a, b (2, 3), c (2,), expected codes (2,)."""
    def split(e):  # a product 2**e of two values of the format
        return 2.0 ** (e // 2), 2.0 ** (e - e // 2)
    if fmt == "bf16":
        main, pins, dt, cdt, want = -148, [ez - F - 1, ez - F], ml_dtypes.bfloat16, np.float32, [0x2, 0x1]
        sgn = -1.0
    else:
        main, pins, dt, cdt, want = -25, [ez - F - 1, ez - F], np.float16, np.float16, [0x0, 0x1]
        sgn = 1.0
    a, b = [], []
    for p in pins:
        (m1, m2), (p1, p2) = split(main), split(p)
        a.append([m1, sgn * p1, 0.0])
        b.append([m2, p2, 1.0])
    return np.array(a).astype(dt), np.array(b).astype(dt), np.zeros(2, cdt), want
