"""`dot_general` and `einsum`: any contraction of a JAX model through an emulated matrix unit
(API.md section 11).

``jwmma.dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type, unit=...)``
has ``jax.lax.dot_general``'s contract (any number of contracting and batch dimensions, in any
positions; the result's dimensions are the batch dims, then lhs's free dims, then rhs's, each
in operand order) and computes it as the unit's tiled GEMM (`jwmma.gemm`):

1. Canonical operands (layout only, no value changes): ``lhs_c`` = lhs transposed to (batch,
   free, contracting) and reshaped to (G, N, K); ``rhs_c`` = rhs transposed to (batch,
   contracting, free) and reshaped to (G, K, M). K runs over the contracting pairs in the
   order ``dimension_numbers`` lists them (the last pair fastest); N over lhs's free dims and
   M over rhs's, in operand order (row-major); G over the batch pairs in their order (one GEMM
   batch dim, absent without batch dims: the compiled programs depend on these four sizes
   only, not on how the dims are laid out).
2. The instruction's operands: with ``unit.a == "rhs"`` (default) A = rhs_c^T (G, M, K)
   and B = lhs_c^T (G, K, N), D = A @ B is the result transposed; with ``"lhs"`` A =
   lhs_c, B = rhs_c and D is the result. A is pruned to 2:4 along K when ``unit.prune``; both
   are quantised by ``unit.scaling`` (`jwmma.quant.scaling`: 'row' = A per row, B per column,
   i.e. per output channel and per token; 'tensor' = one factor for the whole operand, batch
   dims included); the factors are undone in float32.
3. The float32 result is rounded once into the result dtype (``preferred_element_type``, or
   ``jnp.result_type(lhs, rhs)`` as lax): RNE with subnormals, beyond the range Inf (NaN in
   formats without Inf); float64 (with ``jax_enable_x64``) holds the float32 values exactly.

With ``scaling="none"`` and a float32 result the bits are those of ``jwmma.gemm(A, B)`` on the
canonical operands cast to the input formats (A pruned), transposed for ``a="rhs"``.

Differentiable (a `jax.custom_vjp` on the canonical GEMM; JAX differentiates the layout steps):
with ``unit.backward is None``, dlhs_c = g @ rhs_eff^T and drhs_c = lhs_eff^T @ g are float32
products (precision HIGHEST) of the effective operands (pruned, quantised, rescaled: the
straight-through estimator; drhs is dense, so a pruning mask may move while training); with a
backward unit both run as ``dot_general`` through that unit (its own ``a``, ``prune``,
``scaling``): dlhs_c = dot_general(g, rhs_eff) over M, drhs_c = dot_general(lhs_eff, g) over N.

Nothing falls back to a native dot: operands the unit cannot take raise unless the unit says
``fallback="native"`` (then ``jax.lax.dot_general`` runs them, logged once per kind).
``jwmma.matmul`` is the 2-D case of this path (`jwmma.quant.matmul`).
"""
from __future__ import annotations

import functools
import logging
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..engine.sparsity import check_2_4, compress_groups, prune_2_4
from ..engine.validation import as_array, is_concrete
from ..keywords import strict_keywords
from ..numerics.formats import F32, format_of
from ..numerics.rounding import round_f64, x64_scope
from ..tiled import gemm
from . import scaling as sc
from .unit import Unit

__all__ = ["dot_general", "einsum", "effective_product", "contract", "quantise_gemm_operands", "check_dimension_numbers", "result_dtype",
           "einsum_dimension_numbers", "LOGGER"]

#: the logger of the explicit fallbacks (``Unit(fallback="native")``), one record per kind
LOGGER = logging.getLogger("jwmma.quant")
_LOGGED: set = set()

_FLOATS = "float32, float16, bfloat16, float64 or an ml_dtypes fp8 type"


# ------------------------------------------------------------------------------ argument checks
def _check_unit(unit, where: str) -> Unit:
    if isinstance(unit, Unit):
        return unit
    if unit is None:
        raise TypeError(f"{where} needs unit=jwmma.Unit(...) (the emulated matrix unit), got none; e.g. "
                        f"unit=jwmma.Unit('smfmac_f32_16x16x128_fp8_fp8', scaling='row')")
    hint = " (build it with jwmma.Unit(**that_dict))" if isinstance(unit, dict) else \
        " (build it with jwmma.Unit(builtin=that_name))" if isinstance(unit, str) else ""
    raise TypeError(f"{where}: unit must be a jwmma.Unit, got {type(unit).__name__}{hint}")


def _dims(value, what: str, ndim: int, shape) -> tuple:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (value,)
    if not isinstance(value, (tuple, list, np.ndarray)):
        raise TypeError(f"dimension_numbers: {what} must be a sequence of ints (dimension indices), got "
                        f"{type(value).__name__} {value!r}")
    out = []
    for d in (np.asarray(value).tolist() if isinstance(value, np.ndarray) else value):
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"dimension_numbers: {what} must hold ints, got {d!r} ({type(d).__name__}) in {value!r}")
        d = int(d)
        if not 0 <= d < ndim:
            neg = f"; for {d} write {d + ndim}" if -ndim <= d < 0 else ""
            raise ValueError(f"dimension_numbers: {what} names dimension {d}, out of range for an operand of rank "
                             f"{ndim} (shape {tuple(shape)}): dimensions are 0..{ndim - 1}, non-negative as "
                             f"jax.lax.dot_general takes them{neg}")
        out.append(d)
    return tuple(out)


def check_dimension_numbers(dimension_numbers, lhs_shape, rhs_shape) -> tuple:
    """Check ``dimension_numbers`` as ``jax.lax.dot_general`` would, with messages that name the
    part, the expected and the actual value.

    Args:
        dimension_numbers: ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``,
            each a sequence of non-negative dimension indices.
        lhs_shape, rhs_shape: the operands' shapes.
    Returns:
        ``(lc, rc, lb, rb)``, tuples of ints. TypeError for a wrong structure or type,
        ValueError for dims out of range, repeated, both batch and contracting, or of
        different sizes on the two sides.
    """
    dn = dimension_numbers
    try:
        (lc, rc), (lb, rb) = dn
    except (TypeError, ValueError):
        raise TypeError(f"dimension_numbers must be ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)), "
                        f"e.g. (((1,), (0,)), ((), ())) for a matrix product, got {dn!r}") from None
    ln, rn = len(lhs_shape), len(rhs_shape)
    lc, lb = _dims(lc, "lhs_contracting", ln, lhs_shape), _dims(lb, "lhs_batch", ln, lhs_shape)
    rc, rb = _dims(rc, "rhs_contracting", rn, rhs_shape), _dims(rb, "rhs_batch", rn, rhs_shape)
    for kind, a, b in (("contracting", lc, rc), ("batch", lb, rb)):
        if len(a) != len(b):
            raise ValueError(f"dimension_numbers: lhs_{kind} {a} and rhs_{kind} {b} must pair up (as many dims on "
                             f"each side), got {len(a)} and {len(b)}")
    for side, c, b, shape in (("lhs", lc, lb, lhs_shape), ("rhs", rc, rb, rhs_shape)):
        seen = c + b
        repeated = sorted({d for d in seen if seen.count(d) > 1})
        if repeated:
            both = [d for d in repeated if d in c and d in b]
            why = f"both contracting and batch: {both}" if both else f"repeated: {repeated}"
            raise ValueError(f"dimension_numbers: each {side} dimension may appear once among {side}_contracting "
                             f"{c} and {side}_batch {b}; {why} (shape {tuple(shape)})")
    for kind, a, b in (("contracting", lc, rc), ("batch", lb, rb)):
        for i, j in zip(a, b):
            if lhs_shape[i] != rhs_shape[j]:
                raise ValueError(f"dimension_numbers: {kind} dims must have equal sizes; lhs dim {i} has size "
                                 f"{lhs_shape[i]} (shape {tuple(lhs_shape)}), rhs dim {j} has size {rhs_shape[j]} "
                                 f"(shape {tuple(rhs_shape)})")
    return lc, rc, lb, rb


def _unit_words(unit: Unit) -> str:
    spec = unit.spec
    model = unit.model if unit.model is not None else spec.default_model
    return (f"{unit.builtin}: A {spec.a_type} x B {spec.b_type}, {spec.c_type} accumulator, model {model!r}, "
            f"scaling {unit.scaling!r}")


def _check_precision(precision, unit: Unit) -> None:
    """None, DEFAULT and HIGHEST (and their names) are taken: they ask for nothing the unit does
    not do. HIGH, other algorithms or presets ask for an arithmetic the unit does not have."""
    if precision is None:
        return
    items = tuple(precision) if isinstance(precision, (tuple, list)) else (precision,)
    ok = (lax.Precision.DEFAULT, lax.Precision.HIGHEST)
    for p in items:
        q = p
        if isinstance(p, str):
            try:
                q = lax.Precision(p)
            except Exception:
                q = None
        preset = getattr(lax, "DotAlgorithmPreset", None)
        if p is None or q in ok or (preset is not None and p is getattr(preset, "DEFAULT", object())):
            continue
        raise ValueError(f"precision={precision!r} cannot be honoured: the unit computes in its own formats "
                         f"({_unit_words(unit)}) whatever the precision. Pass precision=None (DEFAULT and HIGHEST "
                         f"are taken and mean the same here), or run this contraction with jax.lax.dot_general")


def _is_float(dtype) -> bool:
    d = np.dtype(dtype)
    fmt = format_of(d)
    return d == np.float64 or (fmt is not None and fmt.is_float)


def result_dtype(lhs_dtype, rhs_dtype, preferred_element_type=None):
    """The result dtype of a unit's contraction: ``preferred_element_type`` or the operands'
    promoted dtype, as ``jax.lax.dot_general`` gives it (canonicalised: float64 only with
    ``jax_enable_x64``).

    Args:
        lhs_dtype, rhs_dtype: the operands' dtypes; preferred_element_type: None or a float dtype.
    Returns:
        A numpy float dtype (ValueError for a non-float ``preferred_element_type``).
    """
    if preferred_element_type is None:
        out = jnp.result_type(lhs_dtype, rhs_dtype)
    else:
        try:
            out = np.dtype(preferred_element_type)
        except TypeError:
            raise TypeError(f"preferred_element_type must be a dtype or None, got {preferred_element_type!r}") from None
        if not _is_float(out):
            raise ValueError(f"preferred_element_type={out}: the unit's result is floating-point (its accumulator, "
                             f"factors undone in float32, rounded once into the result type); pass None or one of "
                             f"{_FLOATS}")
    return np.dtype(jax.dtypes.canonicalize_dtype(out))


def _operand_error(name: str, dtype, unit: Unit) -> ValueError:
    return ValueError(f"{name} has dtype {np.dtype(dtype)}, which the unit ({_unit_words(unit)}) cannot take: it "
                      f"quantises floating-point operands ({_FLOATS}) into its input formats. Convert it, e.g. "
                      f"{name}.astype(jnp.float32) (jwmma.numerics.cast rounds float64 once into any format), or "
                      f"build the unit with fallback='native' to run such contractions as jax.lax.dot_general "
                      f"(logged once)")


def _fallback(unit: Unit, lhs, rhs, dn, precision, preferred_element_type):
    key = (unit, str(np.dtype(lhs.dtype)), str(np.dtype(rhs.dtype)))
    if key not in _LOGGED:
        _LOGGED.add(key)
        LOGGER.warning("jwmma: a contraction of %s x %s operands runs natively (jax.lax.dot_general), as "
                       "fallback='native' of the unit %s asks", np.dtype(lhs.dtype), np.dtype(rhs.dtype), unit.builtin)
    return lax.dot_general(lhs, rhs, dn, precision=precision, preferred_element_type=preferred_element_type)


# ------------------------------------------------------------------------------ the GEMM
def _pad4(a):
    """(..., K) zero-padded to a multiple of 4 along K (what gemm does with A)."""
    return _pad_k(a, -1)


def _as_f32(v):
    """A float input as float32 (exactly; float64 rounded once, RNE with subnormals)."""
    if np.dtype(v.dtype) == np.float32:
        return v
    return lax.bitcast_convert_type(round_f64(sc.exact_f64(v), F32), jnp.float32)


def quantise_gemm_operands(a, b, unit: Unit):
    """The instruction's operands as the unit builds them: A pruned along K (``unit.prune``),
    both quantised into the builtin's input formats (`scaling.Quantised`: values in the
    formats, float32 inverse factors, for 'row' (*batch, M, 1) and (*batch, 1, N)). Call
    inside `x64_scope()`.

    Args:
        a: (*batch, M, K) floats, the instruction's A; b: (*batch, K, N) floats, its B.
        unit: the `Unit`.
    Returns:
        ``(qa, qb)``, two `jwmma.quant.scaling.Quantised`.
    """
    spec = unit.spec
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
    if not _is_float(v.dtype):
        return jnp.pad(v, widths)
    uint = {4: jnp.uint32, 2: jnp.uint16, 1: jnp.uint8}[np.dtype(v.dtype).itemsize]
    return lax.bitcast_convert_type(jnp.pad(lax.bitcast_convert_type(v, uint), widths), v.dtype)


def _compressed(a):
    """A (G, M, K) in the input format, pruned by the unit: the (values, positions) pair that
    `jwmma.gemm` compresses a dense-shaped A into (K padded to whole groups, compressed on the
    bits, `compress_groups`). Given as a pair, gemm does not check the 2:4 structure again when
    the program runs: the check of a traced dense A is a host callback (a debug effect), which
    costs a round trip per GEMM and keeps the contraction alive where its result is unused."""
    bits = _pad_k(lax.bitcast_convert_type(a, _WIDTH[np.dtype(a.dtype).itemsize]), -1)
    values, positions = compress_groups(bits, float_bits=True)
    return lax.bitcast_convert_type(values, a.dtype), positions


def _convert(y, dtype):
    """float32 ``y`` rounded once into ``dtype`` (module doc, step 3)."""
    dtype = np.dtype(dtype)
    if dtype == np.float32:
        return y
    v = sc.exact_f64(y)
    return v if dtype == np.float64 else sc.cast(v, format_of(dtype))


@functools.partial(jax.jit, static_argnums=(0, 3))  # one program per unit and shape, eager calls too
def _forward(unit: Unit, lhs_c, rhs_c, effective: bool):
    """y_c (G, N, M) float32 and, when ``effective``, the effective operands (lhs_eff (G, N, K),
    rhs_eff (G, K, M), float32) for the backward pass (else None). Called inside `x64_scope()`,
    so that transformations of its program (vmap) also see 64-bit types."""
    swap = functools.partial(jnp.swapaxes, axis1=-1, axis2=-2)
    a_in, b_in = (swap(rhs_c), swap(lhs_c)) if unit.a == "rhs" else (lhs_c, rhs_c)
    qa, qb = quantise_gemm_operands(a_in, b_in, unit)
    a_gemm, b_gemm = (_compressed(qa.values), _pad_k(qb.values, -2)) if unit.prune and not unit.spec.dense else \
        (qa.values, qb.values)
    scales = dict(scale_a=qa.scales, scale_b=qb.scales) if unit.scaling == "mx" else {}
    d = gemm(a_gemm, b_gemm, **unit.gemm_keywords(), **scales)  # (G, M, N), the accumulator's dtype
    unscaled = unit.scaling in ("none", "mx")  # no factor to undo ("mx": the instruction applied its scales)
    y = d.astype(jnp.float32) if unscaled and np.dtype(d.dtype) == np.float32 else \
        sc.rescale(sc.exact_f64(d), qa.inv, qb.inv)
    eff = None
    if effective:
        ea, eb = sc.effective(qa, unit.spec.a_format, axis=-1), sc.effective(qb, unit.spec.b_format, axis=-2)
        eff = (swap(eb), swap(ea)) if unit.a == "rhs" else (ea, eb)
    return swap(y) if unit.a == "rhs" else y, eff


@functools.partial(jax.jit, static_argnums=0)  # apart from the GEMM: result dtypes share its program
def _to_dtype(dtype, y):
    """float32 ``y`` rounded once into ``dtype`` (inside `x64_scope()`)."""
    return _convert(y, dtype)


def _result(y, dtype):
    return y if np.dtype(dtype) == np.float32 else _to_dtype(dtype, y)


@functools.lru_cache(maxsize=256)
def _forward_unit(unit: Unit) -> Unit:
    """``unit`` without the fields the forward program never reads (backward, fallback), so that
    units differing only there share their compiled forward GEMMs."""
    return unit if unit.backward is None and unit.fallback is None else unit.replace(backward=None, fallback=None)


@functools.lru_cache(maxsize=256)
def _core(unit: Unit, out_dtype):
    """The custom_vjp function (lhs_c, rhs_c) -> y_c of one unit and result dtype."""
    forward_unit = _forward_unit(unit)

    @jax.custom_vjp
    def f(lhs_c, rhs_c):
        with x64_scope():
            return _result(_forward(forward_unit, lhs_c, rhs_c, False)[0], out_dtype)

    def fwd(lhs_c, rhs_c):
        with x64_scope():
            y, (lhs_eff, rhs_eff) = _forward(forward_unit, lhs_c, rhs_c, True)
            y = _result(y, out_dtype)
        return y, (lhs_eff, rhs_eff, jnp.zeros((0,), lhs_c.dtype), jnp.zeros((0,), rhs_c.dtype))

    def bwd(res, g):
        lhs_eff, rhs_eff, lhs_like, rhs_like = res
        g = g.astype(jnp.float32)
        nb = g.ndim - 2
        batch = tuple(range(nb))
        over_m = (((nb + 1,), (nb + 1,)), (batch, batch))  # g (*b, N, M) . rhs_eff (*b, K, M) -> (*b, N, K)
        over_n = (((nb,), (nb,)), (batch, batch))  # lhs_eff (*b, N, K) . g (*b, N, M) -> (*b, K, M)
        if unit.backward is None:  # g @ rhs_eff^T and lhs_eff^T @ g, written as jwmma.matmul always wrote them
            mm = functools.partial(jnp.dot if nb == 0 else jnp.matmul, precision=lax.Precision.HIGHEST)
            swap = functools.partial(jnp.swapaxes, axis1=-1, axis2=-2)
            dl, dr = mm(g, swap(rhs_eff)), mm(swap(lhs_eff), g)
        else:
            dl = dot_general(g, rhs_eff, over_m, unit=unit.backward)
            dr = dot_general(lhs_eff, g, over_n, unit=unit.backward)
        return dl.astype(lhs_like.dtype), dr.astype(rhs_like.dtype)

    f.defvjp(fwd, bwd)
    return f


@jax.custom_vjp
def _empty(lhs_c, rhs_c, like):
    """Zeros (G, N, M) like ``like`` for a GEMM without products (K = 0) or an empty result."""
    return jnp.zeros(lhs_c.shape[:-1] + rhs_c.shape[-1:], like.dtype)


def _empty_fwd(lhs_c, rhs_c, like):
    return _empty(lhs_c, rhs_c, like), (jnp.zeros_like(lhs_c), jnp.zeros_like(rhs_c), jnp.zeros_like(like))


def _empty_bwd(res, g):
    return res


_empty.defvjp(_empty_fwd, _empty_bwd)


def _layout(x, perm, shape):
    """Transpose and reshape; numpy arrays stay numpy (their float64 values reach the unit's
    exact rounding, whatever ``jax_enable_x64`` says), JAX values stay JAX."""
    xp = np if isinstance(x, np.ndarray) else jnp
    if tuple(perm) != tuple(range(x.ndim)):
        x = xp.transpose(x, perm)
    return xp.reshape(x, shape)


def _canonical(lhs, rhs, dims):
    """The operands as the unit's GEMM takes them, and the result's shape.

    Args:
        lhs, rhs: arrays; dims: ``(lc, rc, lb, rb)`` from `check_dimension_numbers`.
    Returns:
        ``(lhs_c, rhs_c, out_shape)``: lhs_c ``(*batch, N, K)`` and rhs_c ``(*batch, K, M)``
        (one batch dim of the batch dims' product, none without them: the programs depend on
        its size only; K in the order of ``lc``), out_shape ``(*batch, *lhs free, *rhs free)``
        as `jax.lax.dot_general`'s.
    """
    lc, rc, lb, rb = dims
    lfree = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
    rfree = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    bshape = tuple(lhs.shape[d] for d in lb)
    batch = (math.prod(bshape),) if lb else ()
    lshape, rshape = tuple(lhs.shape[d] for d in lfree), tuple(rhs.shape[d] for d in rfree)
    n, m, k = math.prod(lshape), math.prod(rshape), math.prod(lhs.shape[d] for d in lc)
    lhs_c = _layout(lhs, tuple(lb) + tuple(lfree) + tuple(lc), batch + (n, k))
    rhs_c = _layout(rhs, tuple(rb) + tuple(rc) + tuple(rfree), batch + (k, m))
    return lhs_c, rhs_c, bshape + lshape + rshape


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
            `dimension_numbers`; out_dtype: the result dtype (`result_dtype`).
        a_what: how an error names the instruction's A (default: the operand and its K).
    Returns:
        ``lax.dot_general``'s result shape (batch, lhs free, rhs free) in ``out_dtype``.
    """
    lhs_c, rhs_c, out_shape = _canonical(lhs, rhs, dims)
    k = lhs_c.shape[-1]
    _check_gemm(unit, lhs_c, rhs_c, k, a_what or f"{unit.a} (the unit's A) along its contracting dims (K)")
    if 0 in lhs_c.shape + rhs_c.shape:  # no product: zeros (K = 0) or an empty result
        like = jnp.zeros((0,), out_dtype)
        return jnp.reshape(_empty(jnp.asarray(lhs_c), jnp.asarray(rhs_c), like), out_shape)
    return jnp.reshape(_core(unit, np.dtype(out_dtype))(lhs_c, rhs_c), out_shape)


# ------------------------------------------------------------------------------ public entry points
@strict_keywords
def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, *, unit: Unit | None = None,
                out_sharding=None):
    """``jax.lax.dot_general(lhs, rhs, dimension_numbers, ...)`` through the emulated unit.

    Args:
        lhs: array (the instruction's B with the default ``unit.a == "rhs"``: activations);
            rhs: array (its A: the weights, 2:4-pruned along the contracting dims when
            ``unit.prune``). Floats: float32, float16, bfloat16, an ml_dtypes fp8 type, float64
            (rounded to float32 first); other dtypes raise unless ``unit.fallback == "native"``.
        dimension_numbers: ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``, as
            lax: any number of dims in any positions (non-negative indices).
        precision: None, DEFAULT or HIGHEST (or a pair of them): the unit's arithmetic is its
            own; anything else raises (module `jwmma.quant.dot_general` says why).
        preferred_element_type: the result dtype (a float dtype) or None (the operands'
            promoted dtype, as lax).
        unit: a `jwmma.Unit` (keyword; ``functools.partial(jwmma.dot_general, unit=unit)`` is
            a ``dot_general`` for Flax layers).
        out_sharding: None (lax's keyword; place the result with
            ``jax.lax.with_sharding_constraint`` instead, or give the unit ``devices``/``mesh``).
    Returns:
        (*batch, *lhs_free, *rhs_free) in the result dtype: the unit's accumulators with the
        quantisation factors undone in float32, rounded once into the result dtype (module
        doc). Differentiable (``unit.backward``), works under ``jit`` and ``vmap``.
    """
    unit = _check_unit(unit, "jwmma.dot_general")
    lhs, rhs = as_array(lhs, "lhs"), as_array(rhs, "rhs")
    dims = check_dimension_numbers(dimension_numbers, tuple(lhs.shape), tuple(rhs.shape))
    if out_sharding is not None:
        raise ValueError(f"out_sharding={out_sharding!r} is not taken by jwmma.dot_general: constrain the result "
                         f"with jax.lax.with_sharding_constraint, or give the unit devices=/mesh= (the sharded gemm)")
    for name, v in (("lhs", lhs), ("rhs", rhs)):
        if not _is_float(v.dtype):
            if unit.fallback == "native":
                return _fallback(unit, lhs, rhs, dimension_numbers, precision, preferred_element_type)
            raise _operand_error(name, v.dtype, unit)
    _check_precision(precision, unit)
    out_dtype = result_dtype(lhs.dtype, rhs.dtype, preferred_element_type)
    return contract(unit, lhs, rhs, dims, out_dtype)


def effective_product(lhs, rhs, dimension_numbers, *, unit: Unit):
    """The exact product of the operands as ``unit`` quantises them, with no accumulator:
    float64 values of its effective operands (the values its instruction multiplies, scale
    factors undone: for ``scaling="mx"`` each element times its block's E8M0 scale, blocks
    along K in the order `dot_general` lays K out; 2:4-pruned where the unit prunes).
    What a study measures quantisation by, where the builtin has no ``model="exact"`` that
    takes the unit's scales (the block-scaled builtins).

    Args:
        lhs, rhs, dimension_numbers: as `dot_general` (float operands).
        unit: a `jwmma.Unit`.
    Returns:
        numpy float64 array (*batch, *lhs_free, *rhs_free): the products summed exactly up to
        float64's rounding (numpy's matmul).
    """
    unit = _check_unit(unit, "jwmma.quant.effective_product")
    lhs, rhs = as_array(lhs, "lhs"), as_array(rhs, "rhs")
    lc, rc, lb, rb = check_dimension_numbers(dimension_numbers, tuple(lhs.shape), tuple(rhs.shape))
    for name, v in (("lhs", lhs), ("rhs", rhs)):
        if not _is_float(v.dtype):
            raise _operand_error(name, v.dtype, unit)
    lhs_c, rhs_c, out_shape = _canonical(lhs, rhs, (lc, rc, lb, rb))
    with x64_scope():  # the operands as `contract` hands them to the unit's program
        _, (le, re) = _forward(_forward_unit(unit), lhs_c, rhs_c, True)
        le, re = np.asarray(le, np.float64), np.asarray(re, np.float64)
    return np.matmul(le, re).reshape(out_shape)


def _parse(subscripts: str, lhs, rhs):
    """(lhs labels, rhs labels, output labels) of a two-operand einsum, ellipses spelled out
    (opt_einsum's parser, the one ``jnp.einsum`` uses)."""
    from opt_einsum.parser import parse_einsum_input

    try:
        inputs, output, _ = parse_einsum_input((subscripts, lhs, rhs))
    except Exception as e:
        raise ValueError(f"einsum subscripts {subscripts!r} for shapes {tuple(lhs.shape)} x {tuple(rhs.shape)}: "
                         f"{e}") from None
    ls, rs = inputs.split(",")
    return ls, rs, output


@strict_keywords
def einsum(subscripts: str, *operands, unit: Unit | None = None, precision=None, preferred_element_type=None,
           out_sharding=None):
    """``jnp.einsum(subscripts, lhs, rhs)`` through the emulated unit, as one `dot_general`.

    Args:
        subscripts: a two-operand einsum, e.g. ``"bsk,kn->bsn"`` or ``"...qhd,...khd->...hqk"``
            (implicit outputs and ellipses as numpy). Labels in both operands and the output
            are batch dims, in both but not the output contracting dims, in one operand and the
            output free dims. A label in one operand only and not in the output (a sum), or
            twice in one operand (a diagonal), is refused: it is no matrix product.
        operands: ``lhs, rhs``; the second is the instruction's A with the default
            ``unit.a == "rhs"`` (so ``einsum("bsk,kn->bsn", x, w)`` prunes and scales w).
        unit, precision, preferred_element_type, out_sharding: as `dot_general`.
    Returns:
        The output in the order ``subscripts`` gives. K runs over the contracting labels in the
        order they appear in the instruction's A operand.
    """
    unit = _check_unit(unit, "jwmma.einsum")
    if not isinstance(subscripts, str):
        raise TypeError(f"jwmma.einsum takes the subscripts string first, got {type(subscripts).__name__}; "
                        f"e.g. jwmma.einsum('bsk,kn->bsn', x, w, unit=unit)")
    if len(operands) != 2:
        raise ValueError(f"jwmma.einsum contracts two operands (one GEMM), got {len(operands)}: write the "
                         f"contraction as a chain of two-operand einsums, each through the unit")
    lhs, rhs = as_array(operands[0], "lhs"), as_array(operands[1], "rhs")
    dn, perm = einsum_dimension_numbers(subscripts, lhs, rhs, a=unit.a)
    y = dot_general(lhs, rhs, dn, precision, preferred_element_type, unit=unit, out_sharding=out_sharding)
    return y if perm == tuple(range(len(perm))) else jnp.transpose(y, perm)


def einsum_dimension_numbers(subscripts: str, lhs, rhs, a: str = "rhs"):
    """The `dot_general` of a two-operand einsum (what `einsum` runs).

    Args:
        subscripts: the einsum string; lhs, rhs: the operands (anything with ``.shape``);
            a: which operand is the instruction's A (its order of the contracting labels is K's).
    Returns:
        ``(dimension_numbers, perm)``: the dot_general's dimension numbers and the transpose
        of its result into the output's order. ValueError (naming the labels) for what is no
        single matrix product: a label summed in one operand, a diagonal, sizes that differ.
    """
    ls, rs, out = _parse(subscripts, lhs, rhs)
    for name, labels in (("lhs", ls), ("rhs", rs)):
        twice = sorted({c for c in labels if labels.count(c) > 1})
        if twice:
            raise ValueError(f"einsum {subscripts!r}: label(s) {twice} repeat in {name} (a diagonal), which is no "
                             f"matrix product; take the diagonal first (jnp.einsum on that operand alone)")
    for name, labels, other in (("lhs", ls, rs), ("rhs", rs, ls)):
        summed = [c for c in labels if c not in other and c not in out]
        if summed:
            raise ValueError(f"einsum {subscripts!r}: label(s) {summed} of {name} appear in neither the other operand "
                             f"nor the output (a sum, no matrix product): sum them out first, e.g. "
                             f"{name}.sum(axis=...), then contract")
    for c in sorted(set(ls) & set(rs)):
        if lhs.shape[ls.index(c)] != rhs.shape[rs.index(c)]:
            raise ValueError(f"einsum {subscripts!r}: label {c!r} has size {lhs.shape[ls.index(c)]} in lhs (shape "
                             f"{tuple(lhs.shape)}) and {rhs.shape[rs.index(c)]} in rhs (shape {tuple(rhs.shape)}); "
                             f"sizes must be equal (no broadcasting of size 1)")
    a_labels = rs if a == "rhs" else ls
    batch = [c for c in out if c in ls and c in rs]
    contracted = [c for c in a_labels if c in ls and c in rs and c not in out]
    dn = ((tuple(ls.index(c) for c in contracted), tuple(rs.index(c) for c in contracted)),
          (tuple(ls.index(c) for c in batch), tuple(rs.index(c) for c in batch)))
    names = batch + [c for c in ls if c not in batch and c not in contracted] + \
        [c for c in rs if c not in batch and c not in contracted]
    return dn, tuple(names.index(c) for c in out)
