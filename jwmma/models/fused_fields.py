"""What the fused-group models of an f32 accumulator declare alike: `FusedGroups` (and its
`CDNA3`) and `BlockScaled` (NUMERICS.md sections 1.3 and 9).

Both align every product of a group to F = ``frac_bits`` fraction bits below the group's
largest exponent (MMA-Sim's F = 24 for CDNA3); `frac_bits_field` declares that field, its
rule and default once. Both model f32 accumulators only and name themselves with every field
in messages (`F32FusedModel`). The base holds no dataclass field: a base's fields come first,
which would move BlockScaled's ``group`` and ``frac_bits`` ahead of ``scale_at`` and change its
text, repr and hash.
"""
from __future__ import annotations

import dataclasses

from ..numerics.formats import F32
from .base import Context, Model
from .fields import Int, declare

__all__ = ["F32FusedModel", "frac_bits_field"]


def frac_bits_field() -> dataclasses.Field:
    """The ``frac_bits`` field: F, the fraction bits a fused group keeps below its largest
    exponent, an int in [1, 40], 24 unless given. A new declaration per class (a dataclass
    owns the fields in its body).

    Returns:
        The ``dataclasses.Field`` (`jwmma.models.fields.declare`).
    """
    return declare(Int(lo=1, hi=40), default=24)


class F32FusedModel(Model):
    """Base of the fused-group models of an f32 accumulator (module doc): their `check` and
    `describe`."""

    def check(self, ctx: Context):
        why = super().check(ctx)
        if why:
            return why
        if ctx.c != F32:
            return f"{self.describe()} accumulates in f32; it does not model {ctx.c.name} outputs"
        return None

    def describe(self):
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__dataclass_fields__)
        return f"{type(self).__name__}({fields})"
