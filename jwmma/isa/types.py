"""The element types of the instruction table: one registry (BUILTINS.md sections 1, 2.1, 4.1;
NUMERICS.md section 3).

Every fact about an operand type name ("f16", "fp8", "iu8", "i32", ...) is stated here once:
its width in the registers, its number format (floats) or formats by signedness (integers),
the logical values it takes on the matrix side, and which types can accumulate. `Storage`
states the HIP scalar types that hold register elements (spelling and numpy dtypes). The
table, fragments, `jwmma.dot`, gemm, kernels, studies and the command line derive from it:
adding a number format is one entry here (and its `FloatFormat` in `jwmma.numerics`).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

import ml_dtypes
import numpy as np

from ..numerics.formats import (BF6, BF8, BF8_FNUZ, BF16, F16, F32, F64, FP4, FP6, FP8, FP8_FNUZ, I4, I8, I32, U4,
                               U8, XF32, FloatFormat, IntFormat)

__all__ = ["Storage", "HALF", "SHORT", "BF16_STORAGE", "PACKED", "LONG", "DOUBLE", "FLOAT", "INT", "ElementType",
           "TYPES", "element_type"]


@dataclass(frozen=True)
class Storage:
    """A HIP scalar type holding the elements of a register vector.

    Fields: ``hip``: its spelling in prototypes ('half', 'short', 'bf16', 'int', 'long',
    'float'); ``dtype``: the numpy dtype of the registers; ``also``: other dtypes accepted for
    the same bits (reinterpreted, as API.md section 1 documents); ``words``: register elements
    per HIP scalar (2 for `long`: a 64-bit HIP operand is passed as its two 32-bit halves, low
    word first).
    """

    hip: str
    dtype: np.dtype
    also: tuple = ()
    words: int = 1

    def accepts(self, dtype) -> bool:
        """Whether registers of numpy ``dtype`` are accepted.

        Args:
            dtype: anything `numpy.dtype` accepts.
        Returns:
            True for ``self.dtype`` and the dtypes of ``self.also``.
        """
        dtype = np.dtype(dtype)
        return dtype == self.dtype or dtype in self.also


_I16, _U16, _BF = np.dtype(np.int16), np.dtype(np.uint16), np.dtype(ml_dtypes.bfloat16)
HALF = Storage("half", np.dtype(np.float16))
SHORT = Storage("short", _I16, (_BF, _U16))  # bf16 bit patterns in `short` (RDNA4)
BF16_STORAGE = Storage("bf16", _BF, (_I16, _U16))  # `__bf16` (CDNA4)
PACKED = Storage("int", np.dtype(np.int32), (np.dtype(np.uint32),))  # 8/4-bit elements in words
LONG = Storage("long", np.dtype(np.int32), (np.dtype(np.uint32),), words=2)  # 8 bytes in a 64-bit `long`
# a `double` (the f64 MFMA; a VGPR pair) as its two 32-bit halves, low word first, as `long` is:
# 32-bit words exist whatever the user's jax_enable_x64, float64 and uint64 arrays do not
DOUBLE = Storage("double", np.dtype(np.uint32), (np.dtype(np.int32),), words=2)
FLOAT = Storage("float", np.dtype(np.float32))
INT = Storage("int", np.dtype(np.int32))


@dataclass(frozen=True)
class ElementType:
    """One operand element type of the table.

    Fields: ``name``; ``bits``: width of one element in the registers; ``format``: the
    `FloatFormat` of a float type; ``signed`` / ``unsigned``: the `IntFormat` of an integer
    type read as signed / unsigned (``unsigned`` only for types whose builtins take a sign
    choice, iu8 and iu4); ``storage``: the usual HIP storage of its register elements (a table
    family may store it otherwise, e.g. RDNA4 bf16 in `short`); ``accumulator``: whether it
    can be the type of C and D.
    """

    name: str
    bits: int
    format: FloatFormat | None = None
    signed: IntFormat | None = None
    unsigned: IntFormat | None = None
    storage: Storage = PACKED
    accumulator: bool = False
    read_shift: int = 0

    @property
    def is_float(self) -> bool:
        return self.format is not None

    def int_format(self, signed: bool = True) -> IntFormat:
        """The integer format of this type read with the given signedness.

        Args:
            signed: the builtin's a_neg/b_neg (types without a sign choice ignore it).
        Returns:
            An `IntFormat`.
        """
        if self.is_float:
            raise TypeError(f"{self.name} is a floating-point type")
        return self.signed if signed or self.unsigned is None else self.unsigned

    @property
    def range(self) -> tuple[int, int]:
        """(lo, hi): the integer values a matrix of this type may hold, whichever the
        signedness (iu8: -128..255)."""
        hi = (self.unsigned or self.signed).hi
        return self.signed.lo, hi

    def value_dtype(self, signed: bool = True) -> np.dtype:
        """The numpy dtype of this type's logical values on the matrix side.

        Args:
            signed: for integer types with a sign choice, the reading.
        Returns:
            The format's dtype for floats, int32 for i32, int8/uint8 for narrower integers.
        """
        if self.is_float:
            return self.format.dtype
        fmt = self.int_format(signed)
        if fmt.bits == 32:
            return fmt.dtype
        return np.dtype(np.int8 if fmt.signed else np.uint8)


TYPES = MappingProxyType({t.name: t for t in (
    ElementType("f16", 16, F16, storage=HALF, accumulator=True),
    ElementType("bf16", 16, BF16, storage=BF16_STORAGE, accumulator=True),
    ElementType("fp8", 8, FP8),
    ElementType("bf8", 8, BF8),
    ElementType("fp8_fnuz", 8, FP8_FNUZ),  # gfx942 fp8/bf8 (BUILTINS_MORE.md 1.1)
    ElementType("bf8_fnuz", 8, BF8_FNUZ),
    ElementType("iu8", 8, signed=I8, unsigned=U8),
    ElementType("iu4", 4, signed=I4, unsigned=U4),
    ElementType("i8", 8, signed=I8),
    ElementType("fp6", 6, FP6),  # OCP MX (gfx950 scaled MFMA; docs/spec/BUILTINS_DENSE.md 5)
    ElementType("bf6", 6, BF6),
    ElementType("fp4", 4, FP4),
    ElementType("xf32", 32, XF32, storage=FLOAT, read_shift=13),  # CDNA3 xf32 MFMA (BUILTINS_DENSE.md 6)
    ElementType("f32", 32, F32, storage=FLOAT, accumulator=True),
    ElementType("f64", 64, F64, storage=DOUBLE, accumulator=True),  # the f64 MFMA (BUILTINS_DENSE.md 11)
    ElementType("i32", 32, signed=I32, storage=INT, accumulator=True),
)})


def element_type(name: str) -> ElementType:
    """The registry entry of an element type name.

    Args:
        name: 'f16', 'bf16', 'fp8', 'bf8', 'fp8_fnuz', 'bf8_fnuz', 'fp6', 'bf6', 'fp4', 'iu8', 'iu4',
            'i8', 'xf32', 'f32', 'f64' or 'i32'.
    Returns:
        The `ElementType`.
    """
    try:
        return TYPES[name]
    except KeyError:
        raise ValueError(f"unknown element type {name!r}; valid: {', '.join(TYPES)}") from None
