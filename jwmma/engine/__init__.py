"""The engine: one instruction on registers or matrices, and its public entry points.

`fragments` (the register codec), `step` (one instruction step: decode, hand the matrices to
the model), `builtins` (the 25 functions, built through one calling-convention adapter),
`index` (index sets and undefined pairs), `dot` (a model on plain vectors), `sparsity` (2:4
helpers), `options` (execution options), `validation` (argument checks).
"""
from __future__ import annotations

from . import builtins, dot, fragments, index, options, sparsity, step, validation
from .builtins import FUNCTIONS
from .options import Options

__all__ = ["builtins", "dot", "fragments", "index", "options", "sparsity", "step", "validation", "FUNCTIONS",
           "Options"]
