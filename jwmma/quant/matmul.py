"""`matmul`: a model's y = x @ w through an emulated matrix unit (API.md section 9).

w (K, N) is the 2:4-sparse operand and enters as the builtin's A, x (..., K) as B:
y^T = gemm(w^T, x^T), the leading dims of x flattened into the GEMM's N (one column per
token). Both are quantised by `scaling` (its module doc has the recipe), the GEMM runs
`jwmma.gemm` (any model, backend, path to the same bits; devices/mesh for the sharded gemm),
and the factors are undone in float32.

Under `jax.grad` the backward pass is the straight-through estimator (a `jax.custom_vjp`):
dx = g @ w_eff^T and dw = x_eff^T @ g, float32 products (precision HIGHEST) of the effective
operands w_eff = fl32(q_w * r_w), x_eff = fl32(q_x * r_x) (pruned, quantised, rescaled). dw
is dense, so the pruning mask may change from one training step to the next.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import models
from ..engine.options import Options
from ..engine.sparsity import check_2_4, prune_2_4
from ..engine.step import context
from ..engine.validation import as_array, check_static_bool, is_concrete
from ..isa.table import lookup
from ..numerics.formats import F32, format_of
from ..keywords import strict_keywords
from ..numerics.rounding import round_f64, x64_scope
from ..tiled import gemm
from . import scaling as sc

__all__ = ["matmul", "MatmulConfig", "quantise_operands", "config"]


@dataclasses.dataclass(frozen=True)
class MatmulConfig:
    """Everything static about a `matmul` call (hashable: it keys the compiled programs)."""

    builtin: str
    target: str | None
    model: object
    scaling: str
    prune: bool
    options: Options | None
    backend: str | None
    devices: object = None
    mesh: object = None
    mesh_axes: object = None

    @property
    def spec(self):
        return lookup(self.builtin, self.target)

    def gemm_keywords(self) -> dict:
        axes = dict(self.mesh_axes[1]) if isinstance(self.mesh_axes, tuple) and self.mesh_axes[:1] == ("dict",) \
            else self.mesh_axes
        return dict(builtin=self.builtin, target=self.target, model=self.model, options=self.options,
                    backend=self.backend, devices=self.devices, mesh=self.mesh, mesh_axes=axes)


def _hashable_devices(devices):
    if devices is None or isinstance(devices, (int, str)):
        return devices
    return tuple(devices)


def _hashable_axes(axes):
    if isinstance(axes, dict):
        return ("dict", tuple(axes.items()))
    return tuple(axes) if isinstance(axes, list) else axes


def config(*, builtin="smfmac_f32_16x16x128_fp8_fp8", model=None, scaling="row", prune=True, target=None,
           backend=None, options=None, devices=None, mesh=None, mesh_axes=None) -> MatmulConfig:
    """The validated `MatmulConfig` of `matmul`'s keywords (ValueError/TypeError naming the
    keyword). The layers of `jwmma.nn` build one at construction time."""
    if not isinstance(builtin, str):
        raise TypeError(f"builtin must be a builtin name (str), got {type(builtin).__name__}")
    spec = lookup(builtin, target)
    if spec.integer:
        raise ValueError(f"matmul runs floating-point builtins; {builtin} has integer inputs "
                         f"({spec.a_type} x {spec.b_type} -> {spec.c_type}): pick a f16/bf16/fp8/bf8 builtin, "
                         f"e.g. 'smfmac_f32_16x16x128_fp8_fp8'")
    if scaling not in sc.SCALINGS:
        raise ValueError(f"scaling must be one of {sc.SCALINGS}, got {scaling!r}")
    prune = check_static_bool(prune, "prune")
    if options is not None and not isinstance(options, Options):
        raise TypeError(f"options must be a jwmma.Options or None, got {type(options).__name__}")
    models.resolve(model, context(spec, False), spec.default_model)  # unknown/inapplicable models raise here
    try:
        cfg = MatmulConfig(builtin, target, model, scaling, prune, options, backend, _hashable_devices(devices), mesh,
                           _hashable_axes(mesh_axes))
        hash(cfg)
    except TypeError as e:
        raise TypeError(f"matmul's keywords must be hashable values (they key its compiled programs): {e}") from None
    return cfg


def _check_operands(x, w, cfg: MatmulConfig):
    x, w = as_array(x, "x"), as_array(w, "w")
    for name, v in (("x", x), ("w", w)):
        d = np.dtype(v.dtype)
        if d != np.float64 and (format_of(d) is None or not format_of(d).is_float):
            raise ValueError(f"{name} must be a floating-point array (float32, float16, bfloat16, float64 or an "
                             f"ml_dtypes fp8 type), got {d}; convert it, e.g. {name}.astype(jnp.float32)")
    if w.ndim != 2:
        raise ValueError(f"w must be (K, N), got shape {tuple(w.shape)}")
    if x.ndim < 1 or x.shape[-1] != w.shape[0]:
        raise ValueError(f"x must be (..., K) with K = {w.shape[0]} (w's rows), got shape {tuple(x.shape)}")
    spec = cfg.spec
    k = w.shape[0]
    if cfg.scaling != "none" and k:
        top = spec.a_format.max_finite * spec.b_format.max_finite * k
        if top >= spec.c_format.max_finite:
            raise ValueError(
                f"scaling={cfg.scaling!r} maps each slice's amax to the largest {spec.a_type}/{spec.b_type} values; "
                f"K={k} of their products overflow the {spec.c_type} accumulator of {spec.name}: use "
                f"scaling='none' (a plain cast; {spec.a_type} needs no factor for float32-ranged data)")
    if not cfg.prune and not spec.dense and is_concrete(w) and w.size:
        wt = jnp.swapaxes(jnp.asarray(w), 0, 1)
        check_2_4(_pad4(wt), what="w^T (w along K)")
    return x, w


def _pad4(a):
    """(..., K) zero-padded to a multiple of 4 along K (what gemm does with A)."""
    pad = -a.shape[-1] % 4
    return a if not pad else jnp.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, pad)])


def _as_f32(v):
    """A float input as float32 (exactly; float64 rounded once, RNE with subnormals)."""
    if np.dtype(v.dtype) == np.float32:
        return v
    return lax.bitcast_convert_type(round_f64(sc.exact_f64(v), F32), jnp.float32)


def quantise_operands(x2, w, cfg: MatmulConfig):
    """(q_w^T, q_x^T): the builtin's A = w^T (N, K) pruned along K and B = x^T (K, T), as
    `scaling.Quantised` (values in the input formats, float32 inverse factors: (N, 1) and
    (1, T) for 'row'). Call inside `x64_scope()`.

    Args:
        x2: (T, K) float array; w: (K, N) float array; cfg: the `MatmulConfig`.
    """
    spec = cfg.spec
    wt = _as_f32(jnp.swapaxes(jnp.asarray(w), 0, 1))  # (N, K)
    if cfg.prune:
        k = wt.shape[-1]
        wt = prune_2_4(_pad4(wt))[..., :k]
    qw = sc.quantise(sc.exact_f64(wt), spec.a_format, cfg.scaling, axis=1)
    qx = sc.quantise(sc.exact_f64(jnp.swapaxes(_as_f32(jnp.asarray(x2)), 0, 1)), spec.b_format, cfg.scaling, axis=0)
    return qw, qx


@functools.partial(jax.jit, static_argnums=(0, 3))  # one program per configuration and shape, eager calls too
def _forward(cfg: MatmulConfig, x, w, effective: bool):
    """y (..., N) float32 and, when ``effective``, the effective operands (x_eff (T, K),
    w_eff (K, N)) for the backward pass (else None). Called inside `x64_scope()`, so that
    transformations of its program (vmap) also see 64-bit types."""
    batch_dims, k, n = x.shape[:-1], w.shape[0], w.shape[1]
    t = math.prod(batch_dims)
    qw, qx = quantise_operands(jnp.reshape(x, (t, k)), w, cfg)
    d = gemm(qw.values, qx.values, **cfg.gemm_keywords())  # (N, T), the accumulator's dtype
    y = d.astype(jnp.float32) if cfg.scaling == "none" and np.dtype(d.dtype) == np.float32 else \
        sc.rescale(sc.exact_f64(d), qw.inv, qx.inv)
    eff = (jnp.swapaxes(sc.effective(qx), 0, 1), jnp.swapaxes(sc.effective(qw), 0, 1)) if effective else None
    return jnp.reshape(jnp.swapaxes(y, 0, 1), batch_dims + (n,)), eff


@functools.lru_cache(maxsize=256)
def _ste(cfg: MatmulConfig):
    """The custom_vjp function (x, w) -> y of one configuration."""

    @jax.custom_vjp
    def f(x, w):
        with x64_scope():
            return _forward(cfg, x, w, False)[0]

    def fwd(x, w):
        with x64_scope():
            y, (x_eff, w_eff) = _forward(cfg, x, w, True)
        return y, (x_eff, w_eff, jnp.zeros((0,), x.dtype), jnp.zeros((0,), w.dtype))

    def bwd(res, g):
        x_eff, w_eff, x_like, w_like = res
        batch_dims, n = g.shape[:-1], g.shape[-1]
        g2 = jnp.reshape(g.astype(jnp.float32), (-1, n))
        hi = lax.Precision.HIGHEST
        dx = jnp.dot(g2, jnp.swapaxes(w_eff, 0, 1), precision=hi)  # (T, K)
        dw = jnp.dot(jnp.swapaxes(x_eff, 0, 1), g2, precision=hi)  # (K, N)
        return jnp.reshape(dx, batch_dims + (w_eff.shape[0],)).astype(x_like.dtype), dw.astype(w_like.dtype)

    f.defvjp(fwd, bwd)
    return f


@strict_keywords
def matmul(x, w, *, builtin: str = "smfmac_f32_16x16x128_fp8_fp8", model=None, scaling: str = "row",
           prune: bool = True, target: str | None = None, backend: str | None = None, options=None,
           devices=None, mesh=None, mesh_axes=None):
    """y = x @ w as the matrix unit computes it: w 2:4-sparse along K as the builtin's A.

    Args:
        x: (..., K) floats (float32, float16, bfloat16, an ml_dtypes fp8 type; float64 is
            rounded to float32 first); the leading dims are the GEMM's N (tokens).
        w: (K, N) floats; pruned 2:4 along K (`jwmma.prune_2_4`, the two largest magnitudes
            of every 4) when ``prune=True``; with ``prune=False`` it must already be 2:4
            along K (checked when w is concrete; a traced w is taken as it is, as
            ``jwmma.gemm(check=False)`` takes it), dense builtins: any w.
        builtin: a floating-point builtin of `jwmma.BUILTINS`; A (w) and B (x) take its A and
            B input formats; target: its chip where it has several (gfx942 FNUZ / gfx950).
        model: a preset name, model text or object (None: the builtin's default).
        scaling: 'row' (w per output channel, x per row: amax -> the format's largest value,
            as ``jwmma study``), 'tensor' (one factor per operand) or 'none' (a plain
            cast: RNE, out of range -> Inf, or NaN without Inf). `jwmma.quant.scaling` has
            the exact recipe.
        backend, options: execution options of `jwmma.gemm` (never the bits).
        devices, mesh, mesh_axes: the sharded gemm's keywords (the GEMM's M = output
            channels, N = tokens).
    Returns:
        (..., N) float32: the accumulators with the factors undone, fl32(fl32(d * r_w) * r_x).
        With scaling='none' and a float32 accumulator these are the bits of
        ``jwmma.gemm(w^T, x^T, builtin=..., model=...)`` transposed (the operands cast to the
        input formats, w pruned). Differentiable: straight-through estimator (module doc).
    """
    cfg = config(builtin=builtin, model=model, scaling=scaling, prune=prune, target=target, backend=backend,
                 options=options, devices=devices, mesh=mesh, mesh_axes=mesh_axes)
    return apply(cfg, x, w)


def apply(cfg: MatmulConfig, x, w):
    """`matmul` with a prepared `MatmulConfig` (checks the operands, then runs)."""
    x, w = _check_operands(x, w, cfg)
    if math.prod(x.shape) == 0 or math.prod(w.shape) == 0:  # no product: zeros (K = 0) or an empty result
        return _ste_empty(x, w)
    return _ste(cfg)(x, w)


@jax.custom_vjp
def _ste_empty(x, w):
    return jnp.zeros(x.shape[:-1] + (w.shape[1],), jnp.float32)


def _empty_fwd(x, w):
    return _ste_empty(x, w), (jnp.zeros_like(x), jnp.zeros_like(w))


def _empty_bwd(res, g):
    return res


_ste_empty.defvjp(_empty_fwd, _empty_bwd)
