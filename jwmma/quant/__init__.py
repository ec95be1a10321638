"""A model's matmuls and contractions through the emulated matrix units (API.md sections 9 and
11): `Unit` (one unit as one hashable value), `dot_general` and `einsum` (``jax.lax.dot_general``'s
and ``jnp.einsum``'s contracts), `matmul` (their 2-D case) and the quantisation they apply
(`scaling`). Above the GEMM (`jwmma.tiled`), below the layers of `jwmma.nn` and the network
study."""
from __future__ import annotations

from . import scaling
from .dot_general import dot_general, effective_product, einsum, quantise_gemm_operands
from .matmul import MatmulConfig, apply, config, matmul, quantise_operands
from .scaling import SCALINGS
from .unit import Unit

__all__ = ["Unit", "dot_general", "einsum", "effective_product", "matmul", "apply", "config", "MatmulConfig", "quantise_operands",
           "quantise_gemm_operands", "SCALINGS", "scaling"]
