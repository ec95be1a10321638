"""Arithmetic models (NUMERICS.md). Models are values: frozen dataclasses whose fields are
the design parameters (group size, fractional bits, rounding...), so a study can sweep them.
The named models are presets of these classes.

    jwmma.models.CDNA3(group=16, frac_bits=24, two_stage=True)
    jwmma.models.FusedGroups(group=32, frac_bits=20, product_rounding="nearest")
    jwmma.models.Gfx12Dot4(step=4, pairs=True)
"""
from __future__ import annotations

from .base import Context, Model
from .exact import Exact
from .fma_chain import FMAChain
from .fused import CDNA3, FusedGroups
from .gfx12 import Gfx12Dot4
from .integer import IntegerDot

#: name -> (float model or None, integer model or None, one-line description)
PRESETS = {
    "exact": (Exact(), IntegerDot("final"), "exact products and sum, one rounding (integers: exact, wrap or one final saturation)"),
    "fma_chain": (FMAChain(), None, "f32 FMA chain over the compressed products in compressed-K order (rocjitsu/GoC)"),
    "cdna3": (CDNA3(), None, "MMA-Sim's bit-accurate CDNA3 algorithm (2.x, PyPI): truncated fused groups of 8/16, f32 RNE per group"),
    "cdna3_c785138": (CDNA3(zero_exponent=-126, renormalize=False), None,
                      "the earlier MMA-Sim CDNA3 algorithm (GitHub c785138) that NUMERICS.md 1.3 transcribes"),
    "gfx12_dot4": (Gfx12Dot4(), None, "rocjitsu's measured gfx1201 WMMA step: 4 products, floor alignment, f32 RNE per step"),
    "staged_clamp": (None, IntegerDot("staged"), "exact integer dot; clamp saturates after each of GoC's two stages"),
}
ALIASES = {"exact16": "exact", "gfx12_dot4_byte": "gfx12_dot4", "gfx12": "gfx12_dot4"}


def names(integer: bool | None = None):
    """Preset names (for one kind of builtin if ``integer`` is given)."""
    out = []
    for n, (f, i, _) in PRESETS.items():
        if integer is None or (i if integer else f) is not None:
            out.append(n)
    return out


def resolve(model, ctx: Context, default: str) -> Model:
    """The Model object for ``model`` (a preset name, a Model, or None for ``default``).

    Raises ValueError for unknown names or models that do not apply to ``ctx``."""
    if model is None:
        model = default
    if isinstance(model, str):
        key = ALIASES.get(model, model)
        if key not in PRESETS:
            raise ValueError(
                f"unknown model {model!r}; valid names: {', '.join(names(ctx.integer))}"
            )
        f, i, _ = PRESETS[key]
        obj = i if ctx.integer else f
        if obj is None:
            kind = "integer" if ctx.integer else "floating-point"
            raise ValueError(
                f"model {model!r} does not apply to {kind} builtins; valid names: "
                f"{', '.join(names(ctx.integer))}"
            )
        model = obj
    if not isinstance(model, Model):
        raise TypeError(f"model must be a name or a jwmma.models.Model, got {type(model).__name__}")
    why = model.check(ctx)
    if why:
        raise ValueError(why)
    return model


__all__ = [
    "Model", "Context", "Exact", "FMAChain", "FusedGroups", "CDNA3", "Gfx12Dot4", "IntegerDot",
    "PRESETS", "names", "resolve",
]
