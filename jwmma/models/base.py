"""What every arithmetic model is given and returns.

A model turns one instruction's products into the accumulator: for every output it sees the
K compressed A values and the K *selected* B values (in compressed-K order, the pruned B rows
never appear) and the accumulator C, and returns D. Shapes broadcast: ``a`` is (..., K, 1) or
(..., K, N), ``b`` is (..., K, N), ``c`` and the result are (..., N). Float operands arrive
decoded (`jwmma.formats.Fields`), the accumulator as int32 bit patterns of ``ctx.c``; integer
operands arrive as sign/zero-extended int32 values. Models run inside `x64_scope()`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..formats import FloatFormat


@dataclass(frozen=True)
class Context:
    """Static facts about one use of a model: operand and accumulator formats."""

    a: FloatFormat | None  # None for integer operands
    b: FloatFormat | None
    c: FloatFormat | None  # None for an i32 accumulator
    clamp: bool = False  # integer builtins: saturate the i32 result
    arch: str = ""  # "gfx12" / "gfx950" / "" (free-standing dot)

    @property
    def integer(self) -> bool:
        return self.c is None


class Model:
    """Base class. Subclasses are frozen dataclasses (hashable: they are static arguments)."""

    name: ClassVar[str] = "model"
    integer: ClassVar[bool] = False  # True for models of integer builtins

    def check(self, ctx: Context) -> str | None:
        """None when the model applies to ``ctx``, otherwise the reason it does not."""
        if ctx.integer != self.integer:
            kind = "integer" if ctx.integer else "floating-point"
            return f"{self.describe()} is not a model for {kind} builtins"
        return None

    def accumulate(self, a, b, c, ctx: Context):
        raise NotImplementedError

    def describe(self) -> str:
        return repr(self)


@dataclass(frozen=True)
class Preset:
    """A named model with the note the instruction table shows for it."""

    model: Model
    doc: str
