"""jwmma: bit-exact, vectorised JAX emulation of AMD's matrix-core builtins, sparse and dense.

The 11 RDNA4 ``__builtin_amdgcn_swmmac_*_w32`` (gfx1200/1201, wave32), the 14 CDNA4
``__builtin_amdgcn_smfmac_*`` (gfx950, wave64), their siblings the 14 CDNA3 SMFMAC (gfx942,
MI300; ``target="gfx950"`` for the same code on gfx950) and the 11 RDNA4 dense
``__builtin_amdgcn_wmma_*_w32_gfx12``, and the dense MFMA of CDNA3 (18, gfx942) and CDNA4
(8, gfx950, with the block-scaled ``mfma_scale_f32_*_f8f6f4``) are functions of this package,
named without the ``__builtin_amdgcn_`` prefix and taking the HIP arguments in HIP order::

    d = jwmma.smfmac_f32_16x16x128_fp8_fp8(a, b, c, idx, cbsz=0, abid=0, model="cdna3")

See ``jwmma.BUILTINS`` (the instruction table), ``jwmma.pack_a``... (fragments),
``jwmma.prune_2_4``... (2:4 sparsity), ``jwmma.gemm`` (whole GEMMs), ``jwmma.kernel`` (your
own kernel's loaders), ``jwmma.models`` (arithmetic models), ``jwmma.Options`` (execution
choices), ``jwmma.matmul`` (a model's y = x @ w through a builtin), ``jwmma.Unit``,
``jwmma.dot_general`` and ``jwmma.einsum`` (any contraction through an emulated unit, lax's and
jnp's contracts), ``jwmma.nn`` (Flax and Equinox layers and a qwix provider on them) and ``jwmma.study`` (accumulation studies); the last two load on first use. The layers are
described in docs/ARCHITECTURE.md.
"""
from __future__ import annotations

import importlib

from . import kernel, models
from .engine.builtins import (
    smfmac_f32_16x16x64_bf16,
    smfmac_f32_16x16x64_f16,
    smfmac_f32_16x16x128_bf8_bf8,
    smfmac_f32_16x16x128_bf8_fp8,
    smfmac_f32_16x16x128_fp8_bf8,
    smfmac_f32_16x16x128_fp8_fp8,
    smfmac_f32_32x32x32_bf16,
    smfmac_f32_32x32x32_f16,
    smfmac_f32_32x32x64_bf8_bf8,
    smfmac_f32_32x32x64_bf8_fp8,
    smfmac_f32_32x32x64_fp8_bf8,
    smfmac_f32_32x32x64_fp8_fp8,
    smfmac_i32_16x16x128_i8,
    smfmac_i32_32x32x64_i8,
    swmmac_bf16_16x16x32_bf16_w32,
    swmmac_f16_16x16x32_f16_w32,
    swmmac_f32_16x16x32_bf8_bf8_w32,
    swmmac_f32_16x16x32_bf8_fp8_w32,
    swmmac_f32_16x16x32_bf16_w32,
    swmmac_f32_16x16x32_f16_w32,
    swmmac_f32_16x16x32_fp8_bf8_w32,
    swmmac_f32_16x16x32_fp8_fp8_w32,
    swmmac_i32_16x16x32_iu4_w32,
    swmmac_i32_16x16x32_iu8_w32,
    swmmac_i32_16x16x64_iu4_w32,
    smfmac_f32_16x16x32_f16,
    smfmac_f32_32x32x16_f16,
    smfmac_f32_16x16x32_bf16,
    smfmac_f32_32x32x16_bf16,
    smfmac_i32_16x16x64_i8,
    smfmac_i32_32x32x32_i8,
    smfmac_f32_16x16x64_fp8_fp8,
    smfmac_f32_16x16x64_fp8_bf8,
    smfmac_f32_16x16x64_bf8_fp8,
    smfmac_f32_16x16x64_bf8_bf8,
    smfmac_f32_32x32x32_fp8_fp8,
    smfmac_f32_32x32x32_fp8_bf8,
    smfmac_f32_32x32x32_bf8_fp8,
    smfmac_f32_32x32x32_bf8_bf8,
    wmma_f32_16x16x16_f16_w32_gfx12,
    wmma_f32_16x16x16_bf16_w32_gfx12,
    wmma_f16_16x16x16_f16_w32_gfx12,
    wmma_bf16_16x16x16_bf16_w32_gfx12,
    wmma_i32_16x16x16_iu8_w32_gfx12,
    wmma_i32_16x16x16_iu4_w32_gfx12,
    wmma_i32_16x16x32_iu4_w32_gfx12,
    wmma_f32_16x16x16_fp8_fp8_w32_gfx12,
    wmma_f32_16x16x16_fp8_bf8_w32_gfx12,
    wmma_f32_16x16x16_bf8_fp8_w32_gfx12,
    wmma_f32_16x16x16_bf8_bf8_w32_gfx12,
    wmma_f32_16x16x16_f16_w32,
    wmma_f32_16x16x16_bf16_w32,
    wmma_f32_16x16x16_f16_w64,
    wmma_f32_16x16x16_bf16_w64,
    wmma_f16_16x16x16_f16_w32,
    wmma_f16_16x16x16_f16_tied_w32,
    wmma_bf16_16x16x16_bf16_w32,
    wmma_bf16_16x16x16_bf16_tied_w32,
    wmma_f16_16x16x16_f16_w64,
    wmma_f16_16x16x16_f16_tied_w64,
    wmma_bf16_16x16x16_bf16_w64,
    wmma_bf16_16x16x16_bf16_tied_w64,
    wmma_i32_16x16x16_iu8_w32,
    wmma_i32_16x16x16_iu4_w32,
    wmma_i32_16x16x16_iu8_w64,
    wmma_i32_16x16x16_iu4_w64,
    mfma_f32_32x32x2f32,
    mfma_f32_16x16x4f32,
    mfma_f32_32x32x4_xf32,
    mfma_f32_16x16x8_xf32,
    mfma_f32_32x32x8f16,
    mfma_f32_16x16x16f16,
    mfma_f32_32x32x8bf16_1k,
    mfma_f32_16x16x16bf16_1k,
    mfma_f32_32x32x4bf16,
    mfma_f32_16x16x8bf16,
    mfma_i32_32x32x8i8,
    mfma_i32_16x16x16i8,
    mfma_i32_32x32x16_i8,
    mfma_i32_16x16x32_i8,
    mfma_f32_32x32x16_fp8_fp8,
    mfma_f32_32x32x16_fp8_bf8,
    mfma_f32_32x32x16_bf8_fp8,
    mfma_f32_32x32x16_bf8_bf8,
    mfma_f32_16x16x32_fp8_fp8,
    mfma_f32_16x16x32_fp8_bf8,
    mfma_f32_16x16x32_bf8_fp8,
    mfma_f32_16x16x32_bf8_bf8,
    mfma_f32_16x16x32_f16,
    mfma_f32_32x32x16_f16,
    mfma_f32_16x16x32_bf16,
    mfma_f32_32x32x16_bf16,
    mfma_i32_16x16x64_i8,
    mfma_i32_32x32x32_i8,
    mfma_scale_f32_16x16x128_f8f6f4,
    mfma_scale_f32_32x32x64_f8f6f4,
    mfma_f32_32x32x1f32,
    mfma_f32_16x16x1f32,
    mfma_f32_4x4x1f32,
    mfma_i32_32x32x4i8,
    mfma_i32_16x16x4i8,
    mfma_i32_4x4x4i8,
    mfma_f32_32x32x4f16,
    mfma_f32_16x16x4f16,
    mfma_f32_4x4x4f16,
    mfma_f32_32x32x4bf16_1k,
    mfma_f32_16x16x4bf16_1k,
    mfma_f32_4x4x4bf16_1k,
    mfma_f32_32x32x2bf16,
    mfma_f32_16x16x2bf16,
    mfma_f32_4x4x2bf16,
    mfma_f64_16x16x4f64,
    mfma_f64_4x4x4f64,
)
from .engine.dot import dot
from .engine.effort import enable_compilation_cache
from .engine.fragments import (pack_a, pack_b, pack_c, pack_index, pack_scale, unpack_a, unpack_b, unpack_c, unpack_index,
                               unpack_scale)
from .engine.index import index_violations
from .engine.options import Options, PallasOptions
from .engine.sparsity import compress_2_4, decompress_2_4, prune_2_4
from .engine.validation import checked
from .isa.plot import plot_layout
from .isa.table import BUILTINS, BuiltinSpec
from .tiled import gemm
from .quant import Unit, dot_general, einsum, matmul
from .version import __version__

#: the 113 builtin functions, in table order
BUILTIN_FUNCTIONS = (
    "swmmac_f32_16x16x32_f16_w32", "swmmac_f32_16x16x32_bf16_w32", "swmmac_f16_16x16x32_f16_w32",
    "swmmac_bf16_16x16x32_bf16_w32", "swmmac_i32_16x16x32_iu8_w32", "swmmac_i32_16x16x32_iu4_w32",
    "swmmac_i32_16x16x64_iu4_w32", "swmmac_f32_16x16x32_fp8_fp8_w32", "swmmac_f32_16x16x32_fp8_bf8_w32",
    "swmmac_f32_16x16x32_bf8_fp8_w32", "swmmac_f32_16x16x32_bf8_bf8_w32", "smfmac_f32_16x16x64_f16",
    "smfmac_f32_32x32x32_f16", "smfmac_f32_16x16x64_bf16", "smfmac_f32_32x32x32_bf16", "smfmac_i32_16x16x128_i8",
    "smfmac_i32_32x32x64_i8", "smfmac_f32_16x16x128_fp8_fp8", "smfmac_f32_16x16x128_fp8_bf8",
    "smfmac_f32_16x16x128_bf8_fp8", "smfmac_f32_16x16x128_bf8_bf8", "smfmac_f32_32x32x64_fp8_fp8",
    "smfmac_f32_32x32x64_fp8_bf8", "smfmac_f32_32x32x64_bf8_fp8", "smfmac_f32_32x32x64_bf8_bf8",
    "smfmac_f32_16x16x32_f16", "smfmac_f32_32x32x16_f16", "smfmac_f32_16x16x32_bf16",
    "smfmac_f32_32x32x16_bf16", "smfmac_i32_16x16x64_i8", "smfmac_i32_32x32x32_i8",
    "smfmac_f32_16x16x64_fp8_fp8", "smfmac_f32_16x16x64_fp8_bf8", "smfmac_f32_16x16x64_bf8_fp8",
    "smfmac_f32_16x16x64_bf8_bf8", "smfmac_f32_32x32x32_fp8_fp8", "smfmac_f32_32x32x32_fp8_bf8",
    "smfmac_f32_32x32x32_bf8_fp8", "smfmac_f32_32x32x32_bf8_bf8", "wmma_f32_16x16x16_f16_w32_gfx12",
    "wmma_f32_16x16x16_bf16_w32_gfx12", "wmma_f16_16x16x16_f16_w32_gfx12",
    "wmma_bf16_16x16x16_bf16_w32_gfx12", "wmma_i32_16x16x16_iu8_w32_gfx12", "wmma_i32_16x16x16_iu4_w32_gfx12",
    "wmma_i32_16x16x32_iu4_w32_gfx12", "wmma_f32_16x16x16_fp8_fp8_w32_gfx12",
    "wmma_f32_16x16x16_fp8_bf8_w32_gfx12", "wmma_f32_16x16x16_bf8_fp8_w32_gfx12",
    "wmma_f32_16x16x16_bf8_bf8_w32_gfx12",
    "wmma_f32_16x16x16_f16_w32", "wmma_f32_16x16x16_bf16_w32", "wmma_f32_16x16x16_f16_w64", "wmma_f32_16x16x16_bf16_w64",
    "wmma_f16_16x16x16_f16_w32", "wmma_f16_16x16x16_f16_tied_w32", "wmma_bf16_16x16x16_bf16_w32",
    "wmma_bf16_16x16x16_bf16_tied_w32", "wmma_f16_16x16x16_f16_w64", "wmma_f16_16x16x16_f16_tied_w64",
    "wmma_bf16_16x16x16_bf16_w64", "wmma_bf16_16x16x16_bf16_tied_w64",
    "wmma_i32_16x16x16_iu8_w32", "wmma_i32_16x16x16_iu4_w32", "wmma_i32_16x16x16_iu8_w64", "wmma_i32_16x16x16_iu4_w64",
    "mfma_f32_32x32x2f32", "mfma_f32_16x16x4f32", "mfma_f32_32x32x4_xf32", "mfma_f32_16x16x8_xf32",
    "mfma_f32_32x32x8f16", "mfma_f32_16x16x16f16", "mfma_f32_32x32x8bf16_1k", "mfma_f32_16x16x16bf16_1k",
    "mfma_f32_32x32x4bf16", "mfma_f32_16x16x8bf16", "mfma_i32_32x32x8i8", "mfma_i32_16x16x16i8",
    "mfma_i32_32x32x16_i8", "mfma_i32_16x16x32_i8", "mfma_f32_32x32x16_fp8_fp8", "mfma_f32_32x32x16_fp8_bf8",
    "mfma_f32_32x32x16_bf8_fp8", "mfma_f32_32x32x16_bf8_bf8", "mfma_f32_16x16x32_fp8_fp8",
    "mfma_f32_16x16x32_fp8_bf8", "mfma_f32_16x16x32_bf8_fp8", "mfma_f32_16x16x32_bf8_bf8",
    "mfma_f32_32x32x1f32", "mfma_f32_16x16x1f32", "mfma_f32_4x4x1f32", "mfma_i32_32x32x4i8", "mfma_i32_16x16x4i8",
    "mfma_i32_4x4x4i8", "mfma_f32_32x32x4f16", "mfma_f32_16x16x4f16", "mfma_f32_4x4x4f16",
    "mfma_f32_32x32x4bf16_1k", "mfma_f32_16x16x4bf16_1k", "mfma_f32_4x4x4bf16_1k", "mfma_f32_32x32x2bf16",
    "mfma_f32_16x16x2bf16", "mfma_f32_4x4x2bf16", "mfma_f64_16x16x4f64", "mfma_f64_4x4x4f64",
    "mfma_f32_16x16x32_f16", "mfma_f32_32x32x16_f16", "mfma_f32_16x16x32_bf16", "mfma_f32_32x32x16_bf16",
    "mfma_i32_16x16x64_i8", "mfma_i32_32x32x32_i8", "mfma_scale_f32_16x16x128_f8f6f4",
    "mfma_scale_f32_32x32x64_f8f6f4",
)

__all__ = [
    "BUILTINS", "BuiltinSpec", "BUILTIN_FUNCTIONS", "Options", "PallasOptions", "models", "kernel", "study", "nn", "index_violations",
    "dot", "gemm", "matmul", "Unit", "dot_general", "einsum", "pack_a", "unpack_a", "pack_b", "unpack_b", "pack_c",
    "unpack_c", "pack_index", "unpack_index", "pack_scale", "unpack_scale", "prune_2_4", "compress_2_4",
    "decompress_2_4", "checked", "plot_layout", "enable_compilation_cache", "__version__",
    *BUILTIN_FUNCTIONS,
]


def __getattr__(name: str):
    """``jwmma.study`` and ``jwmma.nn`` are imported on first use: ``import jwmma`` does not
    load the study application (nor matplotlib) or the layers (nor Flax, Equinox)."""
    if name in ("study", "nn"):
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {"study", "nn"})
