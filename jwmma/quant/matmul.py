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

`jwmma.matmul` is the 2-D case of `jwmma.dot_general` (`jwmma.quant.dot_general`): one code
path, x's last dim contracted with w's first, x as lhs and w as rhs (the unit's A).
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..engine.validation import as_array
from ..keywords import strict_keywords
from ..numerics.formats import format_of
from .arguments import check_x64
from .contraction import contract, quantise_gemm_operands
from .unit import Unit, is_f64

__all__ = ["matmul", "MatmulConfig", "quantise_operands", "config", "apply"]

#: matmul's configuration is a `jwmma.Unit` (the former name, kept for existing callers)
MatmulConfig = Unit


def config(*, builtin="smfmac_f32_16x16x128_fp8_fp8", model=None, scaling=None, prune=None, target=None,
           backend=None, options=None, devices=None, mesh=None, mesh_axes=None, formats=None) -> Unit:
    """The `jwmma.Unit` of `matmul`'s keywords (checked: ValueError/TypeError naming the
    keyword). The layers of `jwmma.nn` build one at construction time.

    Args:
        `matmul`'s keywords (``prune`` None: True for sparse builtins, False for dense ones).
    Returns:
        The `Unit` (``a="rhs"``: w is the instruction's A).
    """
    return Unit(builtin, model=model, scaling=scaling, prune=prune, target=target, backend=backend, options=options,
                devices=devices, mesh=mesh, mesh_axes=mesh_axes, formats=formats)


def _check_operands(x, w):
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
    return x, w


def quantise_operands(x2, w, cfg: Unit):
    """(q_w^T, q_x^T): the builtin's A = w^T (N, K) pruned along K and B = x^T (K, T), as
    `scaling.Quantised` (values in the input formats, float32 inverse factors: (N, 1) and
    (1, T) for 'row'). Call inside `x64_scope()`.

    Args:
        x2: (T, K) float array; w: (K, N) float array; cfg: the `Unit` (`config`).
    Returns:
        ``(q_w^T, q_x^T)``, two `jwmma.quant.scaling.Quantised`.
    """
    return quantise_gemm_operands(jnp.swapaxes(jnp.asarray(w), 0, 1), jnp.swapaxes(jnp.asarray(x2), 0, 1), cfg)


@strict_keywords
def matmul(x, w, *, builtin: str = "smfmac_f32_16x16x128_fp8_fp8", model=None, scaling: str | None = None,
           prune: bool | None = None, target: str | None = None, backend: str | None = None, options=None,
           devices=None, mesh=None, mesh_axes=None, formats: tuple | None = None):
    """y = x @ w as the matrix unit computes it: w 2:4-sparse along K as the builtin's A.

    Args:
        x: (..., K) floats (float32, float16, bfloat16, an ml_dtypes fp8 type; float64 is
            rounded to float32 first, except by the f64 MFMA, which take every float exactly);
            the leading dims are the GEMM's N (tokens).
        w: (K, N) floats; pruned 2:4 along K (`jwmma.prune_2_4`, the two largest magnitudes
            of every 4) when ``prune=True`` (None, the default: True for the sparse builtins,
            False for the dense ones, the RDNA4 WMMA and CDNA MFMA); with ``prune=False`` a
            sparse builtin's w must already be 2:4 along K (checked when w is concrete; a
            traced w is taken as it is, as ``jwmma.gemm(check=False)`` takes it), a dense
            builtin's w is any w.
        builtin: a floating-point builtin of `jwmma.BUILTINS`; A (w) and B (x) take its A and
            B input formats; target: its chip where it has several (gfx942 FNUZ / gfx950).
        model: a preset name, model text or object (None: the builtin's default).
        scaling: 'row' (w per output channel, x per row: amax -> the format's largest value,
            as ``jwmma study``), 'tensor' (one factor per operand), 'none' (a plain
            cast: RNE, out of range -> Inf, or NaN without Inf) or 'mx' (the block-scaled
            builtins: OCP MX E8M0 scales per 32 elements along K, applied by the
            instruction). `jwmma.quant.scaling` has the exact recipe. None (default): 'row',
            or 'none' for the f64 MFMA (`jwmma.Unit`).
        formats: a block-scaled builtin's (w, x) element formats ('fp8', 'bf8', 'fp6', 'bf6',
            'fp4'; None: fp8 x fp8), e.g. ('fp4', 'fp8') for MXFP4 weights and MXFP8 tokens.
        backend, options: execution options of `jwmma.gemm` (never the bits).
        devices, mesh, mesh_axes: the sharded gemm's keywords (the GEMM's M = output
            channels, N = tokens).
    Returns:
        (..., N) float32: the accumulators with the factors undone, fl32(fl32(d * r_w) * r_x);
        float64 for the f64 MFMA (with ``jax_enable_x64`` on: the float64 D of `jwmma.gemm`).
        With scaling='none' and a float32 accumulator these are the bits of
        ``jwmma.gemm(w^T, x^T, builtin=..., model=...)`` transposed (the operands cast to the
        input formats, w pruned). Differentiable: straight-through estimator (module doc).
    """
    cfg = config(builtin=builtin, model=model, scaling=scaling, prune=prune, target=target, backend=backend,
                 options=options, devices=devices, mesh=mesh, mesh_axes=mesh_axes, formats=formats)
    return apply(cfg, x, w)


def apply(cfg: Unit, x, w):
    """`matmul` with a prepared unit (`config`): checks the operands, then runs the unit's
    contraction of x's last dim with w's first.

    Args:
        cfg: a `jwmma.Unit` with ``a="rhs"``; x: (..., K) floats; w: (K, N) floats.
    Returns:
        (..., N) float32 (`matmul`; float64 for an f64 unit).
    """
    check_x64(cfg, "jwmma.matmul")
    x, w = _check_operands(x, w)
    if cfg.a != "rhs":
        raise ValueError(f"matmul takes w as the unit's A: the unit must have a='rhs', got a={cfg.a!r}")
    dims = ((x.ndim - 1,), (0,), (), ())
    out = np.float64 if is_f64(cfg.spec) else np.float32  # the f64 MFMA's D is float64 (needs x64: `contract`)
    return contract(cfg, x, w, dims, np.dtype(out), a_what="w^T (w along K)")
