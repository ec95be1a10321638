"""A model's matmuls through the emulated matrix units (API.md section 9): `matmul` and the
quantisation it applies (`scaling`). Above the GEMM (`jwmma.tiled`), below the layers of
`jwmma.nn` and the network study."""
from __future__ import annotations

from . import scaling
from .matmul import MatmulConfig, apply, config, matmul, quantise_operands
from .scaling import SCALINGS

__all__ = ["matmul", "apply", "config", "MatmulConfig", "quantise_operands", "SCALINGS", "scaling"]
