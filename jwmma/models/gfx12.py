"""Placeholder replaced by the gfx12 dot4 model (NUMERICS.md section 2.2)."""
from __future__ import annotations

from dataclasses import dataclass

from .base import Context, Model


@dataclass(frozen=True)
class Gfx12Dot4(Model):
    step: int = 4
    pairs: bool | None = None

    name = "gfx12_dot4"

    def check(self, ctx: Context):
        return "gfx12_dot4 is not implemented yet"
