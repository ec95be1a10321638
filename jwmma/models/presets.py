"""The named models (NUMERICS.md) and how a ``model=`` argument becomes a Model object.

`PRESETS` maps each name to its float model, its integer model (either may be None) and a
one-line description; `ALIASES` are older spellings. `resolve` is what every entry point
(builtins, `jwmma.gemm`, `jwmma.dot`, studies) calls.
"""
from __future__ import annotations

import functools

from .base import Context, Model
from .exact import CDNA1, Exact
from .fma_chain import FMAChain
from .fused import CDNA3
from .gfx11 import Gfx11Dot2
from .gfx12 import Gfx12Dot4
from .integer import IntegerDot
from .nvidia import EVIDENCE as _NV_EVIDENCE
from .nvidia import TABLE as _NV_TABLE
from .nvidia import NvidiaTensorCore
from .pairwise import CDNA2
from .parse import MODEL_CLASSES, parse_model
from .scaled import BlockScaled

__all__ = ["PRESETS", "ALIASES", "EVIDENCE", "names", "resolve"]

#: name -> (float model or None, integer model or None, one-line description)
PRESETS = {
    "exact": (Exact(), IntegerDot("final"), "exact products and sum, one rounding (integers: exact, wrap or one final saturation)"),
    "fma_chain": (FMAChain(order="register", narrowing="truncate", nan="propagate"), None,
                  "rocjitsu's f32 FMA chain: register order on the 8 CDNA4 fp8/bf8 builtins (compressed-K order "
                  "elsewhere), bf16 results truncated, NaN operands propagated"),
    "fma_chain_k": (FMAChain(), None, "the earlier jwmma f32 FMA chain: compressed-K order everywhere, RNE narrowing, "
                                      "canonical NaN"),
    "cdna3": (CDNA3(), None, "MMA-Sim's bit-accurate CDNA3 algorithm (2.x, PyPI): truncated fused groups of 8/16, f32 RNE per group"),
    "cdna3_c785138": (CDNA3(zero_exponent=-126, renormalize=False), None,
                      "the earlier MMA-Sim CDNA3 algorithm (GitHub c785138) that NUMERICS.md 1.3 transcribes"),
    "cdna1": (CDNA1(), None, "MMA-Sim 2.1.1's CDNA1 (MI100) algorithm: f16/bf16 in exact groups of 4/2 products, f32 RNE "
                             "per group; f32 an FMA chain"),
    "cdna2": (CDNA2(), None, "MMA-Sim 2.1.1's CDNA2 (MI200) algorithm: f16/bf16 products and a pairwise tree of 4 in f32 "
                             "RNE, denormals flushed at every step; f32 an FMA chain"),
    "gfx12_dot4": (Gfx12Dot4(), None, "rocjitsu's measured gfx1201 WMMA step: 4 products, floor alignment, f32 RNE per step"),
    "gfx11_dot2": (Gfx11Dot2(), None, "rocjitsu's measured gfx1100 WMMA chain: 8 DOT2 steps, sign-frame truncation, "
                                      "f32 RNE per step, no subnormal results (16-bit C: narrowed per step)"),
    **{f"nvidia_{arch}": (NvidiaTensorCore(arch), None, f"NVIDIA {row[0]} tensor core: truncated fused dot-product-add")
       for arch, row in _NV_TABLE.items()},
    "staged_clamp": (None, IntegerDot("staged"), "exact integer dot; clamp saturates after each K-half (gfx1201, GoC's hardware digests)"),
    "cdna4_mx": (BlockScaled(), None, "gfx950 block-scaled MFMA [ASSUMED]: E8M0 scales per product, fused groups of "
                                      "32 truncated to 24 fractional bits, f32 RNE per group, 0xFF scale -> NaN"),
    "mx_rocjitsu": (BlockScaled(scale_at="block", block_sum="fma_chain"), None,
                    "rocjitsu's block-scaled MFMA: each 32-product block an f32 FMA chain from +0, scaled, added "
                    "with f32 RNE"),
}
#: what each preset rests on (the builtins' own evidence is a column of `jwmma.isa.table`)
EVIDENCE = {
    "exact": "a reference, not a hardware claim",
    "fma_chain": "rocjitsu (AMD's simulator) source: shared/mma_exec.h, mma/arithmetic.h matrix_fma",
    "fma_chain_k": "earlier jwmma reading of rocjitsu/GoC (kept for continuity)",
    "cdna3": "MMA-Sim 2.x CDNA3 (gfx942) algorithm; its use for gfx950 is assumed (no gfx950 characterisation)",
    "cdna3_c785138": "MMA-Sim GitHub c785138 (superseded by cdna3)",
    "cdna1": "MMA-Sim 2.1.1 CDNA1 (MMA_E_FDPA, MMA_FMA), validated on MI100 by its authors",
    "cdna2": ("MMA-Sim 2.1.1 CDNA2 (MMA_FTZ_MUL_ADD, MMA_FMA), validated on MI200 by its authors; PyTorch's note on "
              "MI200 denormal flushing"),
    "gfx12_dot4": "rocjitsu's gfx1201 captures (dense WMMA)",
    "gfx11_dot2": ("rocjitsu's gfx1100 (W7900) DOT2/WMMA captures; gfx1151 silicon differs "
                   "(ROCm/rocm-systems issue 12056, open): [ASSUMED] on RDNA3.5"),
    "staged_clamp": "GoC's gfx1201 hardware digests (dense WMMA 384/384 with saturation after each K-half; final-only 240/384), second-hand",
    "cdna4_mx": ("assumed: no gfx950 characterisation is published; scales enter the product exponents as the CDNA4 "
                 "ISA guide's d_exp sentence says (docs/spec/BUILTINS_DENSE.md 5.3), the group is one 32-K scale block"),
    "mx_rocjitsu": "rocjitsu (AMD's simulator) source: mma_exec.h exec_f32_scaled_mixed (a functional model, not a "
                   "hardware characterisation)",
    **{f"nvidia_{arch}": ev for arch, ev in _NV_EVIDENCE.items()},
}
ALIASES = {"exact16": "exact", "gfx12_dot4_byte": "gfx12_dot4", "gfx12": "gfx12_dot4"}


def names(integer: bool | None = None) -> list[str]:
    """Preset names.

    Args:
        integer: only the presets for integer (True) or floating-point (False) builtins;
            None for all.
    Returns:
        The names, in `PRESETS` order.
    """
    out = []
    for n, (f, i, _) in PRESETS.items():
        if integer is None or (i if integer else f) is not None:
            out.append(n)
    return out


def resolve(model, ctx: Context, default: str) -> Model:
    """The Model object for a ``model=`` argument.

    Args:
        model: a preset name (or alias), a model text such as 'CDNA3(group=16)'
            (`jwmma.models.parse_model`), a `Model`, or None for ``default``.
        ctx: the formats of the use; default: the preset name used for None.
    Returns:
        The `Model`; ValueError for unknown names or models that do not apply to ``ctx``,
        TypeError for anything else.
    """
    if model is None:
        model = default
    if isinstance(model, str):  # presets are looked up every time: PRESETS may change
        model = _parse(model) if "(" in model else _preset(model, ctx)
    if not isinstance(model, Model):
        raise TypeError(f"model must be a name or a jwmma.models.Model, got {type(model).__name__}")
    why = _why_not(model, ctx)
    if why:
        raise ValueError(why)
    return model


@functools.lru_cache(maxsize=1024)
def _parse(text: str) -> Model:
    """`parse_model`, once per text (cached: every eager call resolves its model; models are
    frozen, so one object serves every call; errors are raised, not cached)."""
    return parse_model(text)


def _why_not(model: Model, ctx: Context):
    """``model.check(ctx)``, once per (model, context): a pure function of both, and checking
    a model's fields costs more than a small call's dispatch (a model that cannot be hashed,
    which no static argument can be, is checked every time)."""
    try:
        hash(model)
    except TypeError:
        return model.check(ctx)
    return _check_once(model, ctx)


@functools.lru_cache(maxsize=1024)
def _check_once(model: Model, ctx: Context):
    return model.check(ctx)


def _preset(name: str, ctx: Context) -> Model:
    key = ALIASES.get(name, name)
    if key not in PRESETS:
        raise ValueError(f"unknown model {name!r}; valid names: {', '.join(names(ctx.integer))}; or a model "
                         f"class with fields, e.g. 'CDNA3(group=16)': {', '.join(MODEL_CLASSES)}")
    f, i, _ = PRESETS[key]
    obj = i if ctx.integer else f
    if obj is None:
        kind = "integer" if ctx.integer else "floating-point"
        raise ValueError(
            f"model {name!r} does not apply to {kind} builtins; valid names: {', '.join(names(ctx.integer))}"
        )
    return obj
