"""The instruction set, declared: element types, the table of builtins, register layouts,
HIP calling conventions, and text/figure views of the layouts (BUILTINS.md).

numpy only (matplotlib, optional, for `plot`): nothing here computes arithmetic or imports JAX.
"""
from __future__ import annotations

from . import conventions, layouts, table, types, view
from .table import BUILTINS, BuiltinSpec, Family, IndexRule, Operand, lookup
from .types import TYPES, ElementType, Storage, element_type

__all__ = [
    "conventions", "layouts", "table", "types", "view", "BUILTINS", "BuiltinSpec", "Family", "IndexRule",
    "Operand", "lookup", "TYPES", "ElementType", "Storage", "element_type",
]
