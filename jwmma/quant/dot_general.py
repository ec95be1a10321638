"""`dot_general` and `einsum`: any contraction of a JAX model through an emulated matrix unit
(API.md section 11).

``jwmma.dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type, unit=...)``
has ``jax.lax.dot_general``'s contract (any number of contracting and batch dimensions, in any
positions; the result's dimensions are the batch dims, then lhs's free dims, then rhs's, each
in operand order) and computes it as the unit's tiled GEMM (`jwmma.gemm`), one job per module:

1. `dimensions`: the dimension numbers checked, the operands transposed and reshaped (layout
   only) to the canonical lhs_c (G, N, K) and rhs_c (G, K, M);
2. `contraction`: A and B of the instruction taken from them (``unit.a``), A pruned to 2:4
   along K (``unit.prune``), both quantised (``unit.scaling``), the GEMM run and its factors
   undone in float32, one `jax.custom_vjp` around it (``unit.backward``);
3. `contraction`: the float32 result rounded once into the result dtype
   (``preferred_element_type``, or ``jnp.result_type(lhs, rhs)`` as lax).

An f64 unit (the f64 MFMA) skips the quantisation: its operands enter `jwmma.gemm` at their
exact float64 values and its float64 result is rounded once into the result dtype, float64
unless ``preferred_element_type`` says otherwise. It needs ``jax_enable_x64`` on (TypeError
otherwise: JAX has no float64 arrays without it).

`arguments` checks the unit, the precision and the dtypes. Nothing falls back to a native
dot: operands the unit cannot take raise unless the unit says ``fallback="native"`` (then
``jax.lax.dot_general`` runs them, logged once per kind). `einsum` is one `dot_general` of
the dimension numbers `einsum_subscripts` reads from its subscripts. ``jwmma.matmul`` is the
2-D case of this path (`jwmma.quant.matmul`).
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..engine.validation import as_array
from ..keywords import strict_keywords
# contract, quantise_gemm_operands, check_dimension_numbers, result_dtype, einsum_dimension_numbers and LOGGER
# stay names of this module (__all__): jwmma.nn.qwix, the transformer study and users import them from here
from .arguments import (LOGGER, check_precision, check_unit, check_x64, is_float, native_fallback, operand_error,
                        result_dtype, unit_result_dtype)
from .contraction import contract, effective_operands, quantise_gemm_operands
from .dimensions import canonical_operands, check_dimension_numbers
from .einsum_subscripts import einsum_dimension_numbers
from .unit import Unit

__all__ = ["dot_general", "einsum", "effective_product", "contract", "quantise_gemm_operands", "check_dimension_numbers", "result_dtype",
           "einsum_dimension_numbers", "LOGGER"]


@strict_keywords
def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, *, unit: Unit | None = None,
                out_sharding=None):
    """``jax.lax.dot_general(lhs, rhs, dimension_numbers, ...)`` through the emulated unit.

    Args:
        lhs: array (the instruction's B with the default ``unit.a == "rhs"``: activations);
            rhs: array (its A: the weights, 2:4-pruned along the contracting dims when
            ``unit.prune``). Floats: float32, float16, bfloat16, an ml_dtypes fp8 type, float64
            (rounded to float32 first; an f64 unit takes every float at its exact float64
            value); other dtypes raise unless ``unit.fallback == "native"``.
        dimension_numbers: ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``, as
            lax: any number of dims in any positions (non-negative indices).
        precision: None, DEFAULT or HIGHEST (or a pair of them): the unit's arithmetic is its
            own; anything else raises (`jwmma.quant.arguments.check_precision` says why).
        preferred_element_type: the result dtype (a float dtype) or None (the operands'
            promoted dtype, as lax; float64 for an f64 unit).
        unit: a `jwmma.Unit` (keyword; ``functools.partial(jwmma.dot_general, unit=unit)`` is
            a ``dot_general`` for Flax layers).
        out_sharding: None (lax's keyword; place the result with
            ``jax.lax.with_sharding_constraint`` instead, or give the unit ``devices``/``mesh``).
    Returns:
        (*batch, *lhs_free, *rhs_free) in the result dtype: the unit's accumulators with the
        quantisation factors undone in float32, rounded once into the result dtype
        (`jwmma.quant.contraction`; an f64 unit's float64 result rounded once). Differentiable
        (``unit.backward``), works under ``jit`` and ``vmap``. An f64 unit with
        ``jax_enable_x64`` off raises TypeError (module doc).
    """
    unit = check_unit(unit, "jwmma.dot_general")
    check_x64(unit, "jwmma.dot_general")
    lhs, rhs = as_array(lhs, "lhs"), as_array(rhs, "rhs")
    dims = check_dimension_numbers(dimension_numbers, tuple(lhs.shape), tuple(rhs.shape))
    if out_sharding is not None:
        raise ValueError(f"out_sharding={out_sharding!r} is not taken by jwmma.dot_general: constrain the result "
                         f"with jax.lax.with_sharding_constraint, or give the unit devices=/mesh= (the sharded gemm)")
    for name, v in (("lhs", lhs), ("rhs", rhs)):
        if not is_float(v.dtype):
            if unit.fallback == "native":
                return native_fallback(unit, lhs, rhs, dimension_numbers, precision, preferred_element_type)
            raise operand_error(name, v.dtype, unit)
    check_precision(precision, unit)
    out_dtype = unit_result_dtype(unit, lhs.dtype, rhs.dtype, preferred_element_type)
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
    unit = check_unit(unit, "jwmma.quant.effective_product")
    check_x64(unit, "jwmma.quant.effective_product")
    lhs, rhs = as_array(lhs, "lhs"), as_array(rhs, "rhs")
    lc, rc, lb, rb = check_dimension_numbers(dimension_numbers, tuple(lhs.shape), tuple(rhs.shape))
    for name, v in (("lhs", lhs), ("rhs", rhs)):
        if not is_float(v.dtype):
            raise operand_error(name, v.dtype, unit)
    lhs_c, rhs_c, out_shape = canonical_operands(lhs, rhs, (lc, rc, lb, rb))
    le, re = effective_operands(unit, lhs_c, rhs_c)
    return np.matmul(le, re).reshape(out_shape)


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
    unit = check_unit(unit, "jwmma.einsum")
    check_x64(unit, "jwmma.einsum")
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
