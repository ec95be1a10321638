"""A unit's contraction of canonical operands as its tiled GEMM (`jwmma.gemm`), differentiable
through one `jax.custom_vjp` (API.md section 11): steps 2 and 3 of ``jwmma.dot_general``, after
`dimensions` laid the operands out as lhs_c (G, N, K) and rhs_c (G, K, M).

2. The instruction's operands: with ``unit.a == "rhs"`` (default) A = rhs_c^T (G, M, K)
   and B = lhs_c^T (G, K, N), D = A @ B is the result transposed; with ``"lhs"`` A =
   lhs_c, B = rhs_c and D is the result. A is pruned to 2:4 along K when ``unit.prune``; both
   are quantised by ``unit.scaling`` (`jwmma.quant.scaling`: 'row' = A per row, B per column,
   i.e. per output channel and per token; 'tensor' = one factor for the whole operand, batch
   dims included); the factors are undone in float32. A pruned A goes to `gemm` as the
   compressed pair (no host-callback re-check of a traced A).
3. The float32 result is rounded once into the result dtype (``preferred_element_type``, or
   ``jnp.result_type(lhs, rhs)`` as lax): RNE with subnormals, beyond the range Inf (NaN in
   formats without Inf); float64 (with ``jax_enable_x64``) holds the float32 values exactly.

With ``scaling="none"`` and a float32 result the bits are those of ``jwmma.gemm(A, B)`` on the
canonical operands cast to the input formats (A pruned), transposed for ``a="rhs"``.

Differentiable (JAX differentiates the layout steps around it): with ``unit.backward is
None``, dlhs_c = g @ rhs_eff^T and drhs_c = lhs_eff^T @ g are float32 products (precision
HIGHEST) of the effective operands (pruned, quantised, rescaled: the straight-through
estimator; drhs is dense, so a pruning mask may move while training); with a backward unit
both run as the same contraction through that unit (its own ``a``, ``prune``, ``scaling``):
dlhs_c = g . rhs_eff over M, drhs_c = lhs_eff . g over N.

An f64 unit (the f64 MFMA, ``scaling="none"``, used with ``jax_enable_x64`` on) takes the
operands at their exact float64 values (float64 as it is, other floats converted exactly; A
pruned when ``unit.prune``), hands them to `jwmma.gemm` (float64 in, float64 out: one FMA chain
per output over K in order) and rounds its float64 result once into the result dtype (float64
by default: the bits of ``jwmma.gemm(A, B)`` themselves). Its backward pass runs in float64:
``backward=None`` native float64 products (precision HIGHEST) of the operands, a backward unit
that unit on float64 ``g``.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..engine.sparsity import check_2_4, compress_groups, prune_2_4, signed_zero
from ..engine.validation import is_concrete
from ..numerics.formats import F32, format_of
from ..numerics.rounding import round_f64, x64_scope
from .. import models
from ..backends import pallas
from ..engine.effort import compiler_options, eager_vmap_size, effort_jit, settle, shapes_key
from ..engine.options import resolve as resolve_options
from ..engine.step import context
from ..tiled import buckets, emulated_products, gemm, gemm_extent
from . import scaling as sc
from .arguments import check_x64, is_float, result_dtype
from .dimensions import canonical_operands
from .unit import Unit, is_f64

__all__ = ["contract", "quantise_gemm_operands", "effective_operands"]


# ------------------------------------------------------------------------------ the GEMM's operands
def _pad4(a):
    """(..., K) zero-padded to a multiple of 4 along K (what gemm does with A)."""
    return _pad_k(a, -1)


def _as_f32(v):
    """A float input as float32 (exactly; float64 rounded once, RNE with subnormals)."""
    if np.dtype(v.dtype) == np.float32:
        return v
    return lax.bitcast_convert_type(round_f64(sc.exact_f64(v), F32), jnp.float32)


def _as_f64(v):
    """A float input at its exact float64 value (float64 itself untouched: no rounding to
    float32, no float arithmetic that could flush a subnormal)."""
    return v if np.dtype(v.dtype) == np.float64 else sc.exact_f64(v)


def quantise_gemm_operands(a, b, unit: Unit):
    """The instruction's operands as the unit builds them: A pruned along K (``unit.prune``),
    both quantised into the builtin's input formats (`scaling.Quantised`: values in the
    formats, float32 inverse factors, for 'row' (*batch, M, 1) and (*batch, 1, N)); an f64
    unit's are the exact float64 values, factors 1. Call inside `x64_scope()`.

    Args:
        a: (*batch, M, K) floats, the instruction's A; b: (*batch, K, N) floats, its B.
        unit: the `Unit`.
    Returns:
        ``(qa, qb)``, two `jwmma.quant.scaling.Quantised`.
    """
    spec = unit.spec
    if is_f64(spec):  # float64 operands: no narrower format, nothing to scale (scaling "none")
        at, bt = _as_f64(jnp.asarray(a)), _as_f64(jnp.asarray(b))
        if unit.prune:
            at = prune_2_4(_pad4(at))[..., :at.shape[-1]]
        one = jnp.ones((1,) * at.ndim, jnp.float32)
        return sc.Quantised(at, one), sc.Quantised(bt, one)
    at = _as_f32(jnp.asarray(a))
    if unit.prune:
        k = at.shape[-1]
        at = prune_2_4(_pad4(at))[..., :k]
    qa = sc.quantise(sc.exact_f64(at), spec.a_format, unit.scaling, axis=-1)
    qb = sc.quantise(sc.exact_f64(_as_f32(jnp.asarray(b))), spec.b_format, unit.scaling, axis=-2)
    return qa, qb


_WIDTH = {1: jnp.uint8, 2: jnp.uint16}


def _pad_k(v, axis):
    """``v`` zero-padded along ``axis`` (K) to a multiple of 4, on its bits: a float pad may
    not copy bits (docs/ARCHITECTURE.md, "Same bits on every device")."""
    pad = -v.shape[axis] % 4
    if not pad:
        return v
    widths = [(0, 0)] * v.ndim
    widths[axis] = (0, pad)
    if not is_float(v.dtype):
        return jnp.pad(v, widths)
    uint = {8: jnp.uint64, 4: jnp.uint32, 2: jnp.uint16, 1: jnp.uint8}[np.dtype(v.dtype).itemsize]
    return lax.bitcast_convert_type(jnp.pad(lax.bitcast_convert_type(v, uint), widths), v.dtype)


def _compressed(a):
    """A (G, M, K) in the input format, pruned by the unit: the (values, positions) pair that
    `jwmma.gemm` compresses a dense-shaped A into (K padded to whole groups, compressed on the
    bits, `compress_groups`). Given as a pair, gemm does not check the 2:4 structure again when
    the program runs: the check of a traced dense A is a host callback (a debug effect), which
    costs a round trip per GEMM and keeps the contraction alive where its result is unused."""
    bits = _pad_k(lax.bitcast_convert_type(a, _WIDTH[np.dtype(a.dtype).itemsize]), -1)
    values, positions = compress_groups(bits, float_bits=signed_zero(a.dtype))  # fnuz: 0x80 is NaN
    return lax.bitcast_convert_type(values, a.dtype), positions


def _convert(y, dtype):
    """float32 ``y`` (an f64 unit's: float64) rounded once into ``dtype`` (module doc, step 3)."""
    dtype = np.dtype(dtype)
    if np.dtype(y.dtype) == dtype:
        return y
    v = _as_f64(y)
    return v if dtype == np.float64 else sc.cast(v, format_of(dtype))


# ------------------------------------------------------------------------------ the forward program
def _forward(unit: Unit, lhs_c, rhs_c, effective: bool, extent=None):
    """`_forward_program`, compiled (eager operands) at the effort `jwmma.engine.effort.settle`
    decides for the unit's products, as `jwmma.gemm` compiles its own: a small contraction's
    first call waits less on XLA (4 x 256 x 32 fp8: 2.3 -> 1.7 CPU s of compiling on a 2-core
    CPU), and a shape called more than three times is compiled at 'full'. Operands traced by
    eager `jax.vmap`s only: the batched program is compiled on its own, settled for all its
    slices' products (an eager vmap of a 4 x 256 x 32 fp8 matmul over its rows: first call 5.6 -> 3.0
    CPU s on a 2-core CPU, JAX 0.10; 5.5 -> 4.4 s under JAX 0.11). Otherwise
    traced (a user's jit or grad): the outer program decides, so the plain program is traced."""
    traced = not all(is_concrete(x) for x in (lhs_c, rhs_c, extent))
    slices = eager_vmap_size(lhs_c, rhs_c, extent) if traced else 1
    if slices is None:
        return _forward_program(unit, lhs_c, rhs_c, effective, extent, options=None)
    spec = unit.spec
    batch = np.broadcast_shapes(lhs_c.shape[:-2], rhs_c.shape[:-2])
    products = slices * emulated_products(spec, batch, lhs_c.shape[-2], rhs_c.shape[-1], lhs_c.shape[-1])
    model = models.resolve(unit.model, context(spec, False), spec.default_model)
    opts = settle(resolve_options(unit.options, unit.backend), products, model,
                  ("forward", unit, effective, shapes_key(lhs_c, rhs_c, extent), slices))
    # only the compiler settings matter here: where the effort changes none (a GPU, 'full') the one
    # plain program, so that tiering up does not compile the same program again
    fast = bool(compiler_options(opts.platform, opts.compile_effort))
    call = _forward_program.under_eager_vmap if traced else _forward_program
    return call(unit, lhs_c, rhs_c, effective, extent, options=opts if fast else None)


@functools.partial(effort_jit, static_argnames=("unit", "effective", "options"))
def _forward_program(unit: Unit, lhs_c, rhs_c, effective: bool, extent=None, *, options=None):
    """y_c (G, N, M) float32 and, when ``effective``, the effective operands (lhs_eff (G, N, K),
    rhs_eff (G, K, M), float32) for the backward pass (else None); an f64 unit's are float64.
    Called inside `x64_scope()`, so that transformations of its program (vmap) also see 64-bit
    types. ``extent``: int32 (N, M, K) of operands zero-padded to a bucket (`_bucket`): zeros
    change no row or column factor, no MX block scale and no 2:4 choice of the extent's values,
    and the GEMM computes only the extent (`jwmma.tiled.gemm_extent`); y_c is the bucket's, its
    values past the extent not defined. ``options``: only the compile effort of this program
    (the GEMM inside resolves the unit's own)."""
    swap = functools.partial(jnp.swapaxes, axis1=-1, axis2=-2)
    a_in, b_in = (swap(rhs_c), swap(lhs_c)) if unit.a == "rhs" else (lhs_c, rhs_c)
    qa, qb = quantise_gemm_operands(a_in, b_in, unit)
    a_gemm, b_gemm = (_compressed(qa.values), _pad_k(qb.values, -2)) if unit.prune and not unit.spec.dense else \
        (qa.values, qb.values)
    scales = dict(scale_a=qa.scales, scale_b=qb.scales) if unit.scaling == "mx" else {}
    if extent is None:
        d = gemm(a_gemm, b_gemm, **unit.gemm_keywords(), **scales)  # (G, M, N), the accumulator's dtype
    else:  # the extent in the GEMM's (M, N, K) (module doc, step 2)
        gemm_ext = extent[jnp.asarray([1, 0, 2])] if unit.a == "rhs" else extent
        d = gemm_extent(a_gemm, b_gemm, None, gemm_ext, **unit.gemm_keywords(), **scales)
    unscaled = unit.scaling in ("none", "mx")  # no factor to undo ("mx": the instruction applied its scales)
    f64 = is_f64(unit.spec)  # float64 D, kept as it is
    y = d if f64 else d.astype(jnp.float32) if unscaled and np.dtype(d.dtype) == np.float32 else \
        sc.rescale(sc.exact_f64(d), qa.inv, qb.inv)
    eff = None
    if effective:
        ea, eb = (qa.values, qb.values) if f64 else \
            (sc.effective(qa, unit.spec.a_format, axis=-1), sc.effective(qb, unit.spec.b_format, axis=-2))
        eff = (swap(eb), swap(ea)) if unit.a == "rhs" else (ea, eb)
    return swap(y) if unit.a == "rhs" else y, eff


@functools.partial(jax.jit, static_argnums=0)  # apart from the GEMM: result dtypes share its program
def _to_dtype(dtype, y):
    """float32 (f64 unit: float64) ``y`` rounded once into ``dtype`` (inside `x64_scope()`)."""
    return _convert(y, dtype)


def _result(y, dtype):
    return y if np.dtype(dtype) == np.dtype(y.dtype) else _to_dtype(dtype, y)


@functools.lru_cache(maxsize=256)
def _forward_unit(unit: Unit) -> Unit:
    """``unit`` without the fields the forward program never reads (backward, fallback), so that
    units differing only there share their compiled forward GEMMs."""
    return unit if unit.backward is None and unit.fallback is None else unit.replace(backward=None, fallback=None)


def effective_operands(unit: Unit, lhs_c, rhs_c):
    """The canonical operands as ``unit`` quantises them, before its accumulator: the values its
    instruction multiplies (pruned where it prunes, scale factors undone).

    Args:
        unit: the `Unit`; lhs_c: (*batch, N, K) and rhs_c: (*batch, K, M) float arrays
            (`dimensions.canonical_operands`).
    Returns:
        ``(lhs_eff, rhs_eff)``: numpy float64 arrays of lhs_c's and rhs_c's shapes, holding
        the float32 values the unit's forward program hands its backward pass (an f64 unit's:
        the float64 operands, A pruned where it prunes).
    """
    check_x64(unit, "jwmma.quant.effective_operands")
    with x64_scope():  # the operands as `contract` hands them to the unit's program
        _, (le, re) = _forward(_forward_unit(unit), lhs_c, rhs_c, True)
        return np.asarray(le, np.float64), np.asarray(re, np.float64)


# ------------------------------------------------------------------------------ the differentiable contraction
@functools.lru_cache(maxsize=256)
def _core(unit: Unit, out_dtype):
    """The custom_vjp function (lhs_c, rhs_c) -> y_c of one unit and result dtype."""
    forward_unit = _forward_unit(unit)
    f64 = is_f64(unit.spec)

    @jax.custom_vjp
    def f(lhs_c, rhs_c):
        with x64_scope():
            # an f64 unit's effective operands are its float64 inputs (no work): one program for f and fwd
            return _result(_forward(forward_unit, lhs_c, rhs_c, f64)[0], out_dtype)

    def fwd(lhs_c, rhs_c):
        with x64_scope():
            y, (lhs_eff, rhs_eff) = _forward(forward_unit, lhs_c, rhs_c, True)
            y = _result(y, out_dtype)
        return y, (lhs_eff, rhs_eff, jnp.zeros((0,), lhs_c.dtype), jnp.zeros((0,), rhs_c.dtype))

    def bwd(res, g):
        lhs_eff, rhs_eff, lhs_like, rhs_like = res
        if f64:  # g at its exact float64 value; the grads rounded once into the operands' dtypes
            with x64_scope():
                dl, dr = _backward(unit, _as_f64(g), lhs_eff, rhs_eff)
                return _convert(dl, lhs_like.dtype), _convert(dr, rhs_like.dtype)
        dl, dr = _backward(unit, g.astype(jnp.float32), lhs_eff, rhs_eff)
        return dl.astype(lhs_like.dtype), dr.astype(rhs_like.dtype)

    f.defvjp(fwd, bwd)
    return f


def _backward(unit: Unit, g, lhs_eff, rhs_eff):
    """(dlhs_c, drhs_c) of the cotangent ``g`` (*b, N, M) (float32; an f64 unit's float64) and
    the effective operands (module doc): native products of ``g``'s dtype, or the backward unit."""
    nb = g.ndim - 2
    batch = tuple(range(nb))
    over_m = ((nb + 1,), (nb + 1,), batch, batch)  # g (*b, N, M) . rhs_eff (*b, K, M) -> (*b, N, K)
    over_n = ((nb,), (nb,), batch, batch)  # lhs_eff (*b, N, K) . g (*b, N, M) -> (*b, K, M)
    if unit.backward is None:  # g @ rhs_eff^T and lhs_eff^T @ g, written as jwmma.matmul always wrote them
        mm = functools.partial(jnp.dot if nb == 0 else jnp.matmul, precision=lax.Precision.HIGHEST)
        swap = functools.partial(jnp.swapaxes, axis1=-1, axis2=-2)
        dl, dr = mm(g, swap(rhs_eff)), mm(swap(lhs_eff), g)
    else:  # what jwmma.dot_general runs for these operands, its checks passed by construction
        dl = contract(unit.backward, g, rhs_eff, over_m, result_dtype(g.dtype, rhs_eff.dtype))
        dr = contract(unit.backward, lhs_eff, g, over_n, result_dtype(lhs_eff.dtype, g.dtype))
    return dl, dr


@jax.custom_vjp
def _empty(lhs_c, rhs_c, like):
    """Zeros (G, N, M) like ``like`` for a GEMM without products (K = 0) or an empty result."""
    return jnp.zeros(lhs_c.shape[:-1] + rhs_c.shape[-1:], like.dtype)


def _empty_fwd(lhs_c, rhs_c, like):
    return _empty(lhs_c, rhs_c, like), (jnp.zeros_like(lhs_c), jnp.zeros_like(rhs_c), jnp.zeros_like(like))


def _empty_bwd(res, g):
    return res


_empty.defvjp(_empty_fwd, _empty_bwd)


def _check_gemm(unit: Unit, lhs_c, rhs_c, k: int, a_what: str) -> None:
    """What the unit refuses before running: a K whose scaled products overflow the accumulator,
    a sparse A taken as it is (``prune=False``) that is not 2:4 (when concrete)."""
    spec = unit.spec
    if unit.scaling not in ("none", "mx") and k:  # ("mx": each block is scaled into the format's range)
        top = spec.a_format.max_finite * spec.b_format.max_finite * k
        if top >= spec.c_format.max_finite:
            raise ValueError(
                f"scaling={unit.scaling!r} maps each slice's amax to the largest {spec.a_type}/{spec.b_type} values; "
                f"K={k} of their products overflow the {spec.c_type} accumulator of {spec.name}: use "
                f"scaling='none' (a plain cast; {spec.a_type} needs no factor for float32-ranged data)")
    a_c = rhs_c if unit.a == "rhs" else lhs_c
    if not unit.prune and not spec.dense and is_concrete(a_c) and a_c.size:
        a_c = jnp.swapaxes(jnp.asarray(a_c), -1, -2) if unit.a == "rhs" else jnp.asarray(a_c)
        check_2_4(_pad4(a_c), what=a_what)


def contract(unit: Unit, lhs, rhs, dims, out_dtype, *, a_what: str | None = None):
    """The unit's contraction of checked operands (the body of `dot_general`, and of
    `jwmma.matmul` with ``dims = ((x.ndim - 1,), (0,), (), ())``).

    Args:
        unit: the `Unit`; lhs, rhs: float arrays; dims: ``(lc, rc, lb, rb)`` from
            `check_dimension_numbers`; out_dtype: the result dtype (`result_dtype`).
        a_what: how an error names the instruction's A (default: the operand and its K).
    Returns:
        ``lax.dot_general``'s result shape (batch, lhs free, rhs free) in ``out_dtype``.
    """
    check_x64(unit, "a contraction through a Unit")  # (a backward unit's too)
    lhs_c, rhs_c, out_shape = canonical_operands(lhs, rhs, dims)
    k = lhs_c.shape[-1]
    _check_gemm(unit, lhs_c, rhs_c, k, a_what or f"{unit.a} (the unit's A) along its contracting dims (K)")
    if 0 in lhs_c.shape + rhs_c.shape:  # no product: zeros (K = 0) or an empty result
        like = jnp.zeros((0,), out_dtype)
        return jnp.reshape(_empty(jnp.asarray(lhs_c), jnp.asarray(rhs_c), like), out_shape)
    bucket = _bucket(unit, lhs_c, rhs_c)
    if bucket is not None:  # an eager contraction of a few shapes: its bucket's program, cut on the host
        lhs_p, rhs_p, (n, m, _) = bucket
        with x64_scope():
            y = _result(_forward(_forward_unit(unit), lhs_p, rhs_p, False, bucket[2])[0], out_dtype)
        return jax.device_put(np.ascontiguousarray(np.asarray(y)[..., :n, :m].reshape(out_shape)))
    return jnp.reshape(_core(unit, np.dtype(out_dtype))(lhs_c, rhs_c), out_shape)


# ------------------------------------------------------------------------------ shape buckets
def _bucket(unit: Unit, lhs_c, rhs_c):
    """``(lhs_p, rhs_p, extent)``: concrete canonical operands (G, N, K), (G, K, M) zero-padded
    on the host to the bucket of their GEMM (`jwmma.tiled.buckets`) and the int32 (N, M, K) they
    came from, when the unit's GEMM runs on the XLA path on one device with buckets on; None
    otherwise (traced operands: a gradient or the user's jit)."""
    opts = resolve_options(unit.options, unit.backend)
    spec = unit.spec
    if not opts.shape_buckets or unit.devices is not None or unit.mesh is not None or spec.c_type == "f64":
        return None
    if not (is_concrete(lhs_c) and is_concrete(rhs_c)):
        return None
    if pallas.kernel_for(spec, models.resolve(unit.model, context(spec, False), spec.default_model), opts):
        return None
    n, k, m = lhs_c.shape[-2], lhs_c.shape[-1], rhs_c.shape[-1]
    gm, gn = (m, n) if unit.a == "rhs" else (n, m)  # the GEMM's M and N (module doc, step 2)
    bm, bn, bk = buckets.capacity(spec, gm, gn, k)
    bn_c, bm_c = (bn, bm) if unit.a == "rhs" else (bm, bn)
    g = int(np.prod(np.broadcast_shapes(lhs_c.shape[:-2], rhs_c.shape[:-2]), dtype=np.int64))
    if not buckets.fits(g, bm, bn, bk):
        return None
    lhs_p = buckets.pad_bits(lhs_c, {-2: bn_c, -1: bk})
    rhs_p = buckets.pad_bits(rhs_c, {-2: bk, -1: bm_c})
    return lhs_p, rhs_p, np.asarray([n, m, k], np.int32)
