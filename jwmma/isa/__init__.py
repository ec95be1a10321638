"""The instruction set, declared: element types, the table of builtins, register layouts,
HIP calling conventions, and text/figure views of the layouts (BUILTINS.md).

numpy only (matplotlib, optional, for `plot`): nothing here computes arithmetic or imports JAX.
"""
from __future__ import annotations

from . import conventions, layouts, records, table, types, view
from .records import BuiltinSpec, Family, IndexRule, Operand
from .table import BUILTINS, lookup
from .types import TYPES, ElementType, Storage, element_type

__all__ = [
    "conventions", "layouts", "records", "table", "types", "view", "BUILTINS", "BuiltinSpec", "Family", "IndexRule",
    "Operand", "lookup", "TYPES", "ElementType", "Storage", "element_type",
]
