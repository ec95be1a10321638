"""The engine: one instruction on registers or matrices, and its public entry points.

`fragments` (the register codec: pack/unpack, re-exporting `registers`, `element_codes`,
`index_registers` and `block_scales`), `step` (one instruction step: decode, hand the matrices to
the model), `builtins` (the builtin functions, one per table row, built through one calling-convention adapter),
`index` (index sets and undefined pairs), `dot` (a model on plain vectors), `sparsity` (2:4
helpers), `options` (execution options), `validation` (argument checks).
"""
from __future__ import annotations

from . import (block_scales, builtins, dot, element_codes, fragments, index, index_registers, options, sparsity, step,
               validation)
from .builtins import FUNCTIONS
from .options import Options

__all__ = ["block_scales", "builtins", "dot", "element_codes", "fragments", "index", "index_registers", "options",
           "sparsity", "step", "validation", "FUNCTIONS", "Options"]
