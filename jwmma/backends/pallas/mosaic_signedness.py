"""Mosaic GPU's lane-semantics lowering keeps a signedness with every integer register array
and picks signed or unsigned instructions from it (comparisons, max/min, division, the
int32 -> int64 and int -> float conversions), not from the value's dtype. One rule loses it:
``select_n`` (``jnp.where``) takes the predicate's signedness, unsigned, whenever its true
case is a splat (a constant or a broadcast scalar), so ``jnp.where(d.sig == 0, 0, d.exp + 512)``
gives an int32 that every later ``<`` or ``max`` treats as unsigned. Mosaic GPU's interpreter
computes on the dtypes, so only a GPU shows it: on an H200 (JAX 0.11.2) the fused, gfx12,
exact and block-scaled kernels disagreed with XLA on up to half of the outputs, the chain
kernels (no such select feeds a signed comparison) on none (benchmarks/RESULTS.md).

`install` wraps that rule so that the result takes the signedness of its dtype, for the
kernels this package names (`KERNEL_NAME`; a user's own Mosaic GPU kernels keep JAX's rule).
This is the one place that reaches into JAX's Mosaic GPU internals; where they differ from
what it expects it raises, since the kernels would otherwise lower to wrong bits.
"""
from __future__ import annotations

__all__ = ["KERNEL_NAME", "install"]

#: the name the Mosaic driver gives its kernels (``kernel_name``): the fixed rule applies to these
KERNEL_NAME = "jwmma_gemm_tile"

_MARK = "_jwmma_signed_select"


def _fixed(original):
    from jax.experimental.mosaic.gpu import fragmented_array, utils

    def rule(ctx, *args, **params):
        out = original(ctx, *args, **params)
        if not ctx.module_ctx.name.startswith(KERNEL_NAME):
            return out
        want = utils.is_signed(ctx.avals_out[0].dtype)
        if isinstance(out, fragmented_array.FragmentedArray) and want is not None and out.is_signed != want:
            out = out.astype(out.mlir_dtype, is_signed=want)  # the same registers, relabelled
        return out

    setattr(rule, _MARK, True)
    return rule


def install() -> None:
    """Wrap Mosaic GPU's lane-semantics ``select_n`` lowering (module doc); idempotent.

    Raises:
      RuntimeError: this JAX's Mosaic GPU lowering is not laid out as expected.
    """
    from jax import lax

    try:
        from jax._src.pallas.mosaic_gpu import lowering
        from jax._src.pallas.mosaic_gpu.core import LANExWARP_SEMANTICS, LANExWG_SEMANTICS
        from jax.experimental.mosaic.gpu import fragmented_array

        fragmented_array.FragmentedArray.astype  # noqa: B018 - present, or the fix cannot apply
        tables = [lowering.mosaic_lowering_rules[key] for key in (LANExWG_SEMANTICS, LANExWARP_SEMANTICS)]
    except (ImportError, AttributeError, KeyError) as e:
        raise RuntimeError(
            "PallasOptions(lowering='mosaic') needs to correct Mosaic GPU's select signedness "
            f"(jwmma.backends.pallas.mosaic_signedness) and cannot on this JAX ({e}); use lowering='triton' "
            "or backend='xla'") from e
    for table in tables:
        rule = table.get(lax.select_n_p)
        if rule is None:
            raise RuntimeError("this JAX's Mosaic GPU lowering has no select_n rule to correct; use "
                               "lowering='triton' or backend='xla'")
        if not getattr(rule, _MARK, False):
            table[lax.select_n_p] = _fixed(rule)
