"""Accuracy measurement of emulated GEMMs: operands, exact references and error metrics.

Shared by `jwmma study` and `jwmma gemm`. `make_operands` draws float64 data from one of
`DISTRIBUTIONS`, 2:4-prunes A in float64, scales into the input format's range and rounds to
it; `reference` forms the exact product of the quantised operands (error-free float64 parts
added with `math.fsum`) and its correctly rounded float32 value; `metrics` measures a result
against it (definitions in `jwmma.study`'s module docstring).
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from .isa import BuiltinSpec, lookup
# ---------------------------------------------------------------------------- tables
#: input format -> the gfx950 builtin used for it by default
FORMATS = {
    "fp8": "smfmac_f32_16x16x128_fp8_fp8",
    "bf8": "smfmac_f32_16x16x128_bf8_bf8",
    "f16": "smfmac_f32_16x16x64_f16",
    "bf16": "smfmac_f32_16x16x64_bf16",
}
FORMAT_ALIASES = {
    "e4m3": "fp8", "e4m3fn": "fp8", "float8_e4m3fn": "fp8", "e5m2": "bf8", "float8_e5m2": "bf8",
    "fp16": "f16", "half": "f16", "float16": "f16", "bfloat16": "bf16",
}
_DTYPES = {"fp8": ml_dtypes.float8_e4m3fn, "bf8": ml_dtypes.float8_e5m2, "f16": np.float16,
           "bf16": ml_dtypes.bfloat16}
#: precision (significand bits, hidden bit included) of each input format
_PRECISION = {"fp8": 4, "bf8": 3, "f16": 11, "bf16": 8}

SCALINGS = ("auto", "row", "tensor", "none")

#: u = 2**-24, the unit roundoff of float32 (a float, exact)
U32 = float(np.ldexp(1.0, -24))


def _normal(rng, shape):
    return rng.standard_normal(shape)


def _uniform(rng, shape):
    return rng.uniform(-1.0, 1.0, shape)


def _positive(rng, shape):
    return rng.uniform(0.0, 1.0, shape)


def _lognormal(rng, shape):
    return rng.choice([-1.0, 1.0], shape) * rng.lognormal(0.0, 1.5, shape)


def _positive_lognormal(rng, shape):
    return rng.lognormal(0.0, 2.0, shape)


def _student_t(rng, shape):
    return rng.standard_t(3.0, shape)


def _outliers(rng, shape):
    x = rng.standard_normal(shape)
    hit = rng.random(shape) < 0.002
    return np.where(hit, 100.0 * x, x)


#: name -> (sampler(rng, shape) -> float64, description)
DISTRIBUTIONS = {
    "normal": (_normal, "N(0, 1)"),
    "uniform": (_uniform, "U(-1, 1)"),
    "positive": (_positive, "U(0, 1): every product positive, no cancellation (shows bias)"),
    "lognormal": (_lognormal, "random sign x LogNormal(0, 1.5): heavy-tailed magnitudes"),
    "positive_lognormal": (_positive_lognormal, "LogNormal(0, 2): positive, wide dynamic range (shows truncation bias)"),
    "student_t": (_student_t, "Student-t, 3 degrees of freedom: heavy tails"),
    "outliers": (_outliers, "N(0, 1), 0.2% of the entries x100 (scattered outliers)"),
    "channels": (_normal, "N(0, 1), 1% of the K channels x30 in both operands (outlier channels)"),
}
_CHANNEL_FRACTION, _CHANNEL_GAIN = 0.01, 30.0


# ---------------------------------------------------------------------------- data
def _rng(seed: int, dist: str, k: int, m: int, n: int, what: str) -> np.random.Generator:
    """Independent of the model, remedy and format: every model sees the same raw data."""
    ss = np.random.SeedSequence([int(seed), int(k), int(m), int(n), zlib.crc32(dist.encode()),
                                 zlib.crc32(what.encode())])
    return np.random.default_rng(ss)


def sample(dist: str, shape, rng: np.random.Generator) -> np.ndarray:
    """float64 samples of distribution ``dist`` (for 'channels' the plain N(0, 1) draws; the
    outlier channels are applied by `make_operands`, the same ones to A and B)."""
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {dist!r}; valid: {', '.join(DISTRIBUTIONS)}")
    return np.asarray(DISTRIBUTIONS[dist][0](rng, shape), np.float64)


def prune_2_4_f64(a: np.ndarray) -> np.ndarray:
    """Keep the two largest |values| of every 4 along the last axis (ties: lower position)."""
    g = a.reshape(*a.shape[:-1], a.shape[-1] // 4, 4)
    mag = np.abs(g)
    # stable sort of -|x|: equal magnitudes keep their order, so the lower position wins
    order = np.argsort(-mag, axis=-1, kind="stable")
    keep = np.zeros(g.shape, bool)
    np.put_along_axis(keep, order[..., :2], True, axis=-1)
    return np.where(keep, g, 0.0).reshape(a.shape)


def _fmt_max(dtype) -> float:
    return float(ml_dtypes.finfo(dtype).max)


def to_f32_odd(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounded to odd: truncate, and set the last bit if anything was cut.
    A format with at most 22 significand bits rounded (RNE) from this value gets the correct
    RNE of ``x`` (ml_dtypes casts float64 through float32, which would round twice)."""
    x = np.asarray(x, np.float64)
    r = x.astype(np.float32)
    over = np.abs(r.astype(np.float64)) > np.abs(x)
    r = np.where(over, np.nextafter(r, np.float32(0)), r)  # round toward zero
    inexact = r.astype(np.float64) != x
    bits = r.view(np.uint32) | inexact.astype(np.uint32)
    return bits.view(np.float32)


def quantise(x: np.ndarray, dtype, scaling: str, axis: int) -> np.ndarray:
    """Scale ``x`` into the range of ``dtype`` and round to it (RNE from float64; ml_dtypes).

    scaling 'row': every slice along ``axis`` (a row of A, a column of B) is multiplied by
    max_finite / amax(slice), so that its largest magnitude becomes the format's largest
    value (the usual amax recipe of FP8 training/inference); 'tensor': one such factor for
    the whole matrix; 'none': no scaling. Values beyond the range saturate to +-max (a
    clamping conversion) instead of becoming NaN/Inf."""
    hi = _fmt_max(dtype)
    if scaling in ("row", "tensor"):
        amax = np.max(np.abs(x), axis=axis, keepdims=True) if scaling == "row" else np.max(np.abs(x))
        x = x * np.where(amax > 0, hi / np.where(amax > 0, amax, 1.0), 1.0)
    elif scaling != "none":
        raise ValueError(f"scaling must be one of {SCALINGS}, got {scaling!r}")
    return to_f32_odd(np.clip(x, -hi, hi)).astype(dtype)


def _auto_scaling(spec: BuiltinSpec, scaling: str) -> str:
    if scaling == "auto":
        return "row" if max(spec.a_format.bits, spec.b_format.bits) == 8 else "none"
    return scaling


def make_operands(dist: str, k: int, m: int, n: int, seed: int, builtin="smfmac_f32_16x16x128_fp8_fp8",
                  scaling: str = "auto"):
    """(A24, B): A (m, k) 2:4-pruned and B (k, n), quantised to the builtin's input types.

    Pipeline: float64 samples -> prune A 2:4 (float64) -> scale (A per row, B per column for
    'row'; 'auto' = 'row' for 8-bit inputs, 'none' for f16/bf16) -> RNE to the format
    (`quantise`).
    The raw data depend only on (seed, dist, k, m, n)."""
    spec = lookup(builtin) if isinstance(builtin, str) else builtin
    scaling = _auto_scaling(spec, scaling)
    a = sample(dist, (m, k), _rng(seed, dist, k, m, n, "a"))
    b = sample(dist, (k, n), _rng(seed, dist, k, m, n, "b"))
    if dist == "channels":  # the same outlier channels (K indices) in A and B
        gain = np.where(_rng(seed, dist, k, m, n, "ch").random(k) < _CHANNEL_FRACTION, _CHANNEL_GAIN, 1.0)
        a, b = a * gain, b * gain[:, None]
    a = prune_2_4_f64(a)
    if scaling in ("row", "tensor"):
        top = _fmt_max(_DTYPES[spec.a_type]) * _fmt_max(_DTYPES[spec.b_type]) * k
        if top >= float(np.finfo(np.float32).max):
            raise ValueError(f"scaling {scaling!r} to the {spec.a_type}/{spec.b_type} range overflows the f32 "
                             f"accumulator at K={k}; use scaling='none'")
    a_q = quantise(a, _DTYPES[spec.a_type], scaling, axis=1)
    b_q = quantise(b, _DTYPES[spec.b_type], scaling, axis=0)
    return a_q, b_q


# ---------------------------------------------------------------------------- reference
@dataclass
class Reference:
    """Exact product of the quantised operands: ``exact`` (float64, the exact sum rounded to
    nearest in float64), ``f32`` (the exact sum correctly rounded to float32), ``scale``
    (sum_k |a_ik b_kj|, float64)."""

    exact: np.ndarray
    f32: np.ndarray
    scale: np.ndarray


def _exponent_bands(x: np.ndarray, width: int):
    """Split x into sum of parts whose nonzero elements have frexp exponents in
    [lo, lo + width): yields (lo, part)."""
    nz = x != 0
    if not nz.any():
        return
    _, e = np.frexp(x)
    lo_all = int(e[nz].min())
    hi_all = int(e[nz].max())
    for lo in range(lo_all, hi_all + 1, width):
        sel = nz & (e >= lo) & (e < lo + width)
        if sel.any():
            yield lo, np.where(sel, x, 0.0)


def _exact_parts(a: np.ndarray, b: np.ndarray, pa: int, pb: int) -> list[np.ndarray]:
    """float64 matrices whose exact (real) sum is a @ b, each computed without any rounding.

    An element x with frexp exponent e of a format with p significand bits is an integer
    multiple of 2**(e - p) below 2**e. Bands of exponents [lo, lo + w) of A and B give
    products that are multiples of 2**(lo_a + lo_b - pa - pb) below 2**(lo_a + lo_b + 2w);
    a K-term sum of them is an integer below K * 2**(2w + pa + pb) <= 2**53, so float64 holds
    every partial sum exactly whatever order the matmul adds in."""
    k = a.shape[-1]
    lg = max(1, math.ceil(math.log2(max(k, 2))))
    w = (53 - pa - pb - lg) // 2
    if w < 1:  # pragma: no cover - K of 2**40 and more
        raise ValueError(f"K={k} is too large for the exact reference")
    parts = []
    bands_b = list(_exponent_bands(b, w))
    for _, pa_ in _exponent_bands(a, w):
        for _, pb_ in bands_b:
            parts.append(np.matmul(pa_, pb_))
    return parts


def _round_to_odd(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """hi + lo (hi = RN64 of the exact sum, lo the sign of the rest) rounded to odd in float64."""
    bits = hi.view(np.int64)
    even = (bits & 1) == 0
    toward = np.where(lo > 0, np.inf, -np.inf)
    return np.where((lo != 0) & even, np.nextafter(hi, toward), hi)


def reference(a24: np.ndarray, b: np.ndarray, a_format: str | None = None, b_format: str | None = None) -> Reference:
    """The exact GEMM of quantised operands (leading batch dims allowed).

    ``a_format``/``b_format`` ('fp8', 'bf8', 'f16', 'bf16') default to the operands' dtypes.
    The exact sum is formed as a few error-free float64 matmuls (`_exact_parts`) added with
    `math.fsum` (hi) plus the sign of the remainder (lo), then rounded to odd in float64 and
    to float32 with RNE: a correct rounding of the exact value (float64 keeps 29 extra bits)."""
    fa = a_format or _format_of(a24.dtype)
    fb = b_format or _format_of(b.dtype)
    a = np.asarray(a24).astype(np.float64)
    bb = np.asarray(b).astype(np.float64)
    batch = np.broadcast_shapes(a.shape[:-2], bb.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    bb = np.broadcast_to(bb, batch + bb.shape[-2:])
    out_shape = batch + (a.shape[-2], bb.shape[-1])
    hi = np.zeros(out_shape)
    lo = np.zeros(out_shape)
    for idx in np.ndindex(*batch):
        parts = _exact_parts(a[idx], bb[idx], _PRECISION[fa], _PRECISION[fb])
        if not parts:
            continue
        if len(parts) == 1:
            hi[idx] = parts[0]
            continue
        stack = np.stack(parts, axis=-1).reshape(-1, len(parts)).tolist()
        h = [math.fsum(r) for r in stack]
        lo[idx] = np.reshape([math.fsum(r + [-x]) for r, x in zip(stack, h)], out_shape[-2:])
        hi[idx] = np.reshape(h, out_shape[-2:])
    f32 = _round_to_odd(hi, lo).astype(np.float32)
    scale = np.matmul(np.abs(a), np.abs(bb))
    return Reference(hi, f32, scale)


def _format_of(dtype) -> str:
    for name, dt in _DTYPES.items():
        if np.dtype(dtype) == np.dtype(dt):
            return name
    raise TypeError(f"no input format for dtype {dtype}; expected one of {[np.dtype(d).name for d in _DTYPES.values()]}")


# ---------------------------------------------------------------------------- metrics
HIST_BINS = 33  # signed log2 bins -33..33 cover every int32 difference


def ordered(x: np.ndarray) -> np.ndarray:
    """float32 -> int64 order index: adjacent floats differ by 1, +0 and -0 are both 0."""
    bits = np.asarray(x, np.float32).view(np.int32).astype(np.int64)
    return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)


def ulp_diff(d: np.ndarray, ref32: np.ndarray) -> np.ndarray:
    """Signed number of float32 steps from ref32 to d."""
    return ordered(d) - ordered(ref32)


def ulp_bins(u: np.ndarray) -> np.ndarray:
    """Signed log2 bin of each ulp difference: 0 -> 0, +-[2**(b-1), 2**b) -> +-b."""
    mag = np.abs(u)
    b = np.where(mag > 0, np.floor(np.log2(np.maximum(mag, 1))).astype(np.int64) + 1, 0)
    return np.sign(u) * np.minimum(b, HIST_BINS)


def ulp_histogram(u: np.ndarray) -> dict:
    bins, counts = np.unique(ulp_bins(u.ravel()), return_counts=True)
    return {str(int(b)): int(c) for b, c in zip(bins, counts)}


def metrics(d: np.ndarray, ref: Reference) -> dict:
    """Error measures of one point (see the module docstring)."""
    d = np.asarray(d, np.float32)
    fin = np.isfinite(d)
    dd = np.where(fin, d, 0).astype(np.float64)
    err = dd - ref.exact
    s = ref.scale
    rel = np.where(s > 0, np.abs(err) / np.where(s > 0, s, 1.0), np.where(err == 0, 0.0, np.inf))
    rel = np.where(fin, rel, np.inf)
    signed = np.where(s > 0, err / np.where(s > 0, s, 1.0), 0.0)
    u = ulp_diff(d, ref.f32)[fin]
    rn = np.abs(ref.f32.astype(np.float64) - ref.exact) / np.where(s > 0, s, 1.0)
    nref = float(np.sqrt(np.sum(ref.exact**2)))
    nerr = float(np.sqrt(np.sum(err**2))) if fin.all() else math.inf
    return {
        "max_rel": float(rel.max()),
        "mean_rel": float(rel.mean()),
        "bias": float(signed[fin].mean()) if fin.any() else math.nan,
        "fro_rel": nerr / nref if nref > 0 else (0.0 if nerr == 0 else math.inf),
        "ident": float(np.mean(u == 0)) if u.size else 0.0,
        "mean_ulp": float(u.mean()) if u.size else math.nan,
        "mean_abs_ulp": float(np.abs(u).mean()) if u.size else math.nan,
        "max_abs_ulp": int(np.abs(u).max()) if u.size else -1,
        "nonfinite": int((~fin).sum()),
        "rn_mean_rel": float(rn.mean()),
        "ulp_hist": ulp_histogram(u),
    }
