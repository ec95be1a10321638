"""Study operands: data distributions, 2:4 pruning, scaling and quantisation into the input
formats (the definitions are in `jwmma.study`'s module docstring).

`make_operands` draws float64 data from one of `DISTRIBUTIONS`, 2:4-prunes A in float64,
scales into the input format's range and rounds to it once (RNE from float64).
"""
from __future__ import annotations

import zlib

import ml_dtypes
import numpy as np

from ..isa.table import BuiltinSpec, lookup
from ..isa.types import element_type
from ..numerics.host import to_f32_odd  # the study rounds float64 once (numerics.host)

__all__ = ["FORMATS", "FORMAT_ALIASES", "SCALINGS", "DISTRIBUTIONS", "format_dtype", "precision", "data_rng",
           "sample", "prune_2_4_f64", "to_f32_odd", "quantise", "auto_scaling", "make_operands", "resolve_format",
           "INPUT_FORMATS"]

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
SCALINGS = ("auto", "row", "tensor", "none")


def format_dtype(fmt: str) -> np.dtype:
    """The numpy dtype of an input format name of `FORMATS` ('fp8' -> float8_e4m3fn)."""
    return element_type(fmt).format.dtype


def precision(fmt: str) -> int:
    """Significand bits, hidden bit included, of an input format name ('fp8' -> 4)."""
    return element_type(fmt).format.mbits + 1


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


def data_rng(seed: int, dist: str, k: int, m: int, n: int, what: str) -> np.random.Generator:
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


def auto_scaling(spec: BuiltinSpec, scaling: str) -> str:
    """The scaling 'auto' stands for: 'row' for 8-bit inputs, 'none' for f16/bf16."""
    if scaling == "auto":
        return "row" if max(spec.a_format.bits, spec.b_format.bits) == 8 else "none"
    return scaling


def make_operands(dist: str, k: int, m: int, n: int, seed: int, builtin="smfmac_f32_16x16x128_fp8_fp8",
                  scaling: str = "auto", target: str | None = None):
    """(A24, B): A (m, k) 2:4-pruned and B (k, n), quantised to the builtin's input types.

    Pipeline: float64 samples -> prune A 2:4 (float64) -> scale (A per row, B per column for
    'row'; 'auto' = 'row' for 8-bit inputs, 'none' for f16/bf16) -> RNE to the format
    (`quantise`).
    The raw data depend only on (seed, dist, k, m, n). ``builtin``: a name (decoded on
    ``target``, None: the row's default; gfx942's fp8/bf8 are FNUZ) or a `BuiltinSpec`."""
    spec = lookup(builtin, target) if isinstance(builtin, str) else builtin
    scaling = auto_scaling(spec, scaling)
    a = sample(dist, (m, k), data_rng(seed, dist, k, m, n, "a"))
    b = sample(dist, (k, n), data_rng(seed, dist, k, m, n, "b"))
    if dist == "channels":  # the same outlier channels (K indices) in A and B
        gain = np.where(data_rng(seed, dist, k, m, n, "ch").random(k) < _CHANNEL_FRACTION, _CHANNEL_GAIN, 1.0)
        a, b = a * gain, b * gain[:, None]
    a = prune_2_4_f64(a)
    if scaling in ("row", "tensor"):
        top = _fmt_max(format_dtype(spec.a_type)) * _fmt_max(format_dtype(spec.b_type)) * k
        if top >= float(np.finfo(np.float32).max):
            raise ValueError(f"scaling {scaling!r} to the {spec.a_type}/{spec.b_type} range overflows the f32 "
                             f"accumulator at K={k}; use scaling='none'")
    a_q = quantise(a, format_dtype(spec.a_type), scaling, axis=1)
    b_q = quantise(b, format_dtype(spec.b_type), scaling, axis=0)
    return a_q, b_q


#: the float input formats a study operand may have (the gfx942 builtins' FNUZ fp8/bf8 included)
INPUT_FORMATS = tuple(FORMATS) + ("fp8_fnuz", "bf8_fnuz")


def resolve_format(fmt: str, target: str | None = None) -> tuple[str, BuiltinSpec]:
    """A format name ('fp8', 'bf8', 'f16', 'bf16' or an alias) or a builtin name ->
    (format label, builtin spec as decoded on ``target``, None: the row's default; ValueError
    for a target the row does not list). The label of a builtin with mixed inputs is
    'fp8_bf8'...; FNUZ inputs (gfx942) are 'fp8_fnuz', 'bf8_fnuz'."""
    key = FORMAT_ALIASES.get(str(fmt).lower(), str(fmt).lower())
    if key in FORMATS:
        return key, lookup(FORMATS[key], target)
    try:
        lookup(fmt)
    except (ValueError, KeyError):
        raise ValueError(
            f"unknown format or builtin {fmt!r}; formats: {', '.join(FORMATS)} (aliases "
            f"{', '.join(FORMAT_ALIASES)}), or a float builtin of jwmma.BUILTINS"
        ) from None
    spec = lookup(fmt, target)
    if spec.integer or spec.a_type not in INPUT_FORMATS or spec.b_type not in INPUT_FORMATS:
        raise ValueError(f"{spec.name} is not a floating-point builtin; the study needs one")
    label = spec.a_type if spec.a_type == spec.b_type else f"{spec.a_type}_{spec.b_type}"
    return label, spec
