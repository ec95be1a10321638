"""jwmma: bit-exact, vectorised JAX emulation of AMD's sparse matrix-core builtins.

The 11 RDNA4 ``__builtin_amdgcn_swmmac_*_w32`` (gfx1200/1201, wave32) and the 14 CDNA4
``__builtin_amdgcn_smfmac_*`` (gfx950, wave64) are functions of this package, named without
the ``__builtin_amdgcn_`` prefix and taking the HIP arguments in HIP order::

    d = jwmma.smfmac_f32_16x16x128_fp8_fp8(a, b, c, idx, cbsz=0, abid=0, model="cdna3")

See ``jwmma.BUILTINS`` (the instruction table), ``jwmma.pack_a``... (fragments),
``jwmma.prune_2_4``... (2:4 sparsity), ``jwmma.models`` (arithmetic models).
"""
from __future__ import annotations

from . import kernel, models
from .builtins import FUNCTIONS as _FUNCTIONS
from .builtins import index_violations
from .dot import dot
from .gemm import gemm
from .fragments import pack_a, pack_b, pack_c, pack_index, unpack_a, unpack_b, unpack_c, unpack_index
from .isa import BUILTINS, BuiltinSpec
from .sparsity import compress_2_4, decompress_2_4, prune_2_4
from . import study
from .layout_plot import plot_layout

globals().update(_FUNCTIONS)

__version__ = "0.1.0"

__all__ = [
    "BUILTINS", "BuiltinSpec", "models", "kernel", "index_violations", "dot", "gemm",
    "pack_a", "unpack_a", "pack_b", "unpack_b", "pack_c", "unpack_c", "pack_index", "unpack_index",
    "prune_2_4", "compress_2_4", "decompress_2_4",
    *_FUNCTIONS,
]
__all__ += ["study", "plot_layout"]
