"""Arithmetic models (NUMERICS.md). Models are values: frozen dataclasses whose fields are
the design parameters (group size, fractional bits, rounding...), so a study can sweep them.
The named models are presets of these classes; `base` declares the protocol every model
follows (and through which each model owns its fast paths).

    jwmma.models.CDNA3(group=16, frac_bits=24, two_stage=True)
    jwmma.models.FusedGroups(group=32, frac_bits=20, product_rounding="nearest")
    jwmma.models.Exact(group=4)                  # exact groups carrying the accumulator (CDNA1)
    jwmma.models.PairwiseTree(group=4, flush_denormals=True)    # MI200 f16/bf16 (CDNA2)
    jwmma.models.Gfx12Dot4(step=4, pairs=True)
    jwmma.models.FusedDotAdd(group=32, frac_bits=13, output_frac_bits=13)   # Hopper fp8
    jwmma.models.NvidiaTensorCore(arch="hopper")
    jwmma.models.BlockScaled(scale_at="block", block_sum="fma_chain")    # gfx950 MX, rocjitsu
"""
from __future__ import annotations

from .base import Context, Model
from .exact import CDNA1, Exact
from .fma_chain import FMAChain
from .fused import CDNA3, FusedGroups
from .fused_dot_add import FusedDotAdd
from .gfx11 import Gfx11Dot2
from .gfx12 import Gfx12Dot4
from .integer import IntegerDot
from .nvidia import NvidiaTensorCore
from .pairwise import CDNA2, PairwiseTree
from .scaled import BlockScaled
from .parse import model_label, parse_model
from .presets import ALIASES, EVIDENCE, PRESETS, names, resolve

__all__ = [
    "Model", "Context", "Exact", "CDNA1", "FMAChain", "FusedGroups", "CDNA3", "PairwiseTree", "CDNA2", "Gfx11Dot2",
    "Gfx12Dot4", "IntegerDot",
    "FusedDotAdd", "NvidiaTensorCore", "BlockScaled", "PRESETS", "EVIDENCE", "ALIASES", "names", "resolve", "parse_model", "model_label",
]
