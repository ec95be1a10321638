"""Study operands: data distributions, 2:4 pruning, scaling and quantisation into the input
formats (the definitions are in `jwmma.study`'s module docstring).

`make_operands` draws float64 data from one of `DISTRIBUTIONS`, 2:4-prunes A in float64 (for
the sparse builtins), scales into the input format's range and rounds to it once (RNE from
float64); for the block-scaled builtins the scales may be OCP MX block scales.
"""
from __future__ import annotations

import zlib

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from ..isa.table import SCALE_FORMATS, BuiltinSpec, lookup
from ..isa.types import element_type
from ..numerics.host import to_f32_odd  # the study rounds float64 once (numerics.host)
from ..numerics.rounding import x64_scope
from ..quant import scaling as scaling_rule

__all__ = ["FORMATS", "FORMAT_ALIASES", "SCALINGS", "DISTRIBUTIONS", "format_dtype", "precision", "data_rng",
           "sample", "prune_2_4_f64", "to_f32_odd", "quantise", "auto_scaling", "make_operands", "resolve_format",
           "effective_values", "INPUT_FORMATS"]

#: input format -> the gfx950 builtin used for it by default (the OCP MX formats, and the MX
#: recipes of fp8/bf8, on the block-scaled MFMA with both operands in that format)
FORMATS = {
    "fp8": "smfmac_f32_16x16x128_fp8_fp8",
    "bf8": "smfmac_f32_16x16x128_bf8_bf8",
    "f16": "smfmac_f32_16x16x64_f16",
    "bf16": "smfmac_f32_16x16x64_bf16",
    "fp6": "mfma_scale_f32_16x16x128_f8f6f4",
    "bf6": "mfma_scale_f32_16x16x128_f8f6f4",
    "fp4": "mfma_scale_f32_16x16x128_f8f6f4",
    "mxfp8": "mfma_scale_f32_16x16x128_f8f6f4",
    "mxbf8": "mfma_scale_f32_16x16x128_f8f6f4",
}
#: a format label of the block-scaled builtin -> its element format
_SCALED_ELEMENT = {"fp6": "fp6", "bf6": "bf6", "fp4": "fp4", "mxfp8": "fp8", "mxbf8": "bf8"}


FORMAT_ALIASES = {
    "e4m3": "fp8", "e4m3fn": "fp8", "float8_e4m3fn": "fp8", "e5m2": "bf8", "float8_e5m2": "bf8",
    "fp16": "f16", "half": "f16", "float16": "f16", "bfloat16": "bf16",
    "e2m3": "fp6", "float6_e2m3fn": "fp6", "e3m2": "bf6", "float6_e3m2fn": "bf6", "e2m1": "fp4",
    "float4_e2m1fn": "fp4", "mxfp6": "fp6", "mxbf6": "bf6", "mxfp4": "fp4",
}
SCALINGS = ("auto", "row", "tensor", "none", "mx")


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
    """The scaling 'auto' stands for: 'mx' for the block-scaled builtins (OCP MX block scales,
    which the instruction applies), 'row' for 8-bit inputs, 'none' for f16/bf16. 'mx' on a
    builtin without scale operands: ValueError."""
    if scaling == "auto":
        if spec.scaled:
            return "mx"
        return "row" if max(spec.a_format.bits, spec.b_format.bits) == 8 else "none"
    if scaling == "mx" and not spec.scaled:
        raise ValueError(f"scaling 'mx' needs a block-scaled builtin (mfma_scale_*: formats fp6, bf6, fp4, mxfp8, "
                         f"mxbf8); {spec.name} has no scale operand")
    return scaling


def _mx_words(x: np.ndarray, fmt, axis: int) -> np.ndarray:
    """OCP MX quantisation of float64 ``x`` along ``axis`` (`jwmma.quant.scaling`, the rule the
    units use) as the block-scaled GEMM's uint16 words ``element code | E8M0 scale << 8``."""
    with x64_scope():  # one program: eagerly, the rule's decoding compiled ~60 small ones
        q = jax.jit(scaling_rule.quantise, static_argnums=(1, 2, 3))(jnp.asarray(x, jnp.float64), fmt, "mx", axis)
    codes = np.asarray(q.values)
    codes = codes.view(np.uint8) if codes.dtype != np.uint8 else codes
    scales = np.repeat(np.asarray(q.scales), scaling_rule.MX_BLOCK, axis=axis)
    scales = np.take(scales, np.arange(x.shape[axis]), axis=axis)
    return codes.astype(np.uint16) | (scales.astype(np.uint16) << 8)


def _scaled_plain(x: np.ndarray, fmt, scaling: str, axis: int) -> np.ndarray:
    """'row'/'tensor'/'none' quantisation for the block-scaled builtin: its uint16 words with
    the scale 127 (factor 1)."""
    q = quantise(x, fmt.dtype, scaling, axis)
    return q.view(np.uint8).astype(np.uint16) | np.uint16(127 << 8)


def effective_values(spec: BuiltinSpec, x: np.ndarray, which: str) -> np.ndarray:
    """The exact float64 values an operand of `make_operands` stands for: its values, or (the
    block-scaled builtin's uint16 words) element * 2**(scale - 127); NaN for a NaN scale."""
    if not spec.scaled:
        return np.asarray(x).astype(np.float64)
    fmt = spec.a_format if which == "a" else spec.b_format
    words = np.asarray(x)
    elem = (words & 0xFF).astype(np.uint8).view(fmt.dtype).astype(np.float64)
    scale = (words >> 8).astype(np.int64)
    return np.where(scale == 255, np.nan, np.ldexp(elem, np.where(scale == 255, 0, scale - 127)))


def make_operands(dist: str, k: int, m: int, n: int, seed: int, builtin="smfmac_f32_16x16x128_fp8_fp8",
                  scaling: str = "auto", target: str | None = None):
    """(A24, B): A (m, k) 2:4-pruned (a dense builtin's: not pruned) and B (k, n), quantised to
    the builtin's input types (the block-scaled builtins: uint16 words, element code | E8M0
    scale << 8, the form `jwmma.gemm` takes with fmt_a/fmt_b; `effective_values` reads them).

    Pipeline: float64 samples -> prune A 2:4 (float64; sparse builtins) -> scale (A per row, B
    per column for 'row'; 'auto' = 'mx' for the block-scaled builtins (OCP MX block scales
    along K, `jwmma.quant.scaling`), 'row' for 8-bit inputs, 'none' for f16/bf16) -> RNE to
    the format (`quantise`).
    The raw data depend only on (seed, dist, k, m, n). ``builtin``: a name (decoded on
    ``target``, None: the row's default; gfx942's fp8/bf8 are FNUZ) or a `BuiltinSpec`."""
    spec = lookup(builtin, target) if isinstance(builtin, str) else builtin
    scaling = auto_scaling(spec, scaling)
    a = sample(dist, (m, k), data_rng(seed, dist, k, m, n, "a"))
    b = sample(dist, (k, n), data_rng(seed, dist, k, m, n, "b"))
    if dist == "channels":  # the same outlier channels (K indices) in A and B
        gain = np.where(data_rng(seed, dist, k, m, n, "ch").random(k) < _CHANNEL_FRACTION, _CHANNEL_GAIN, 1.0)
        a, b = a * gain, b * gain[:, None]
    if not spec.dense:
        a = prune_2_4_f64(a)
    if spec.scaled:  # the block-scaled builtin: uint16 words of element codes and E8M0 scales
        if scaling == "mx":
            return _mx_words(a, spec.a_format, 1), _mx_words(b, spec.b_format, 0)
        return _scaled_plain(a, spec.a_format, scaling, 1), _scaled_plain(b, spec.b_format, scaling, 0)
    if scaling in ("row", "tensor"):
        top = _fmt_max(format_dtype(spec.a_type)) * _fmt_max(format_dtype(spec.b_type)) * k
        if top >= float(np.finfo(np.float32).max):
            raise ValueError(f"scaling {scaling!r} to the {spec.a_type}/{spec.b_type} range overflows the f32 "
                             f"accumulator at K={k}; use scaling='none'")
    a_q = quantise(a, format_dtype(spec.a_type), scaling, axis=1)
    b_q = quantise(b, format_dtype(spec.b_type), scaling, axis=0)
    return a_q, b_q


#: the float input formats a study operand may have (the gfx942 builtins' FNUZ fp8/bf8 included)
INPUT_FORMATS = ("fp8", "bf8", "f16", "bf16", "fp6", "bf6", "fp4", "fp8_fnuz", "bf8_fnuz")


def resolve_format(fmt: str, target: str | None = None) -> tuple[str, BuiltinSpec]:
    """A format name ('fp8', 'bf8', 'f16', 'bf16' or an alias) or a builtin name ->
    (format label, builtin spec as decoded on ``target``, None: the row's default; ValueError
    for a target the row does not list). The label of a builtin with mixed inputs is
    'fp8_bf8'...; FNUZ inputs (gfx942) are 'fp8_fnuz', 'bf8_fnuz'."""
    key = FORMAT_ALIASES.get(str(fmt).lower(), str(fmt).lower())
    if key in _SCALED_ELEMENT:  # both operands in that format, on the block-scaled MFMA
        code = {t: c for c, t in SCALE_FORMATS.items()}[_SCALED_ELEMENT[key]]
        return key, lookup(FORMATS[key], target, (code, code))
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
    if spec.integer:
        raise ValueError(f"{spec.name} is an integer builtin (exact sums); the study needs a floating-point one")
    if spec.a_type not in INPUT_FORMATS or spec.b_type not in INPUT_FORMATS:
        raise ValueError(f"{spec.name} takes {spec.a_type} x {spec.b_type}; the study measures errors against "
                         f"float64 products, so it takes the narrower input formats ({', '.join(INPUT_FORMATS)})")
    label = spec.a_type if spec.a_type == spec.b_type else f"{spec.a_type}_{spec.b_type}"
    return label, spec
