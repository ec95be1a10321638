"""The Pallas backend: one fused kernel per model family for a whole GEMM (issue #12).

A program owns a (tm x tn) output tile and keeps its accumulator in registers across K in
hardware order (`driver`); each model family gives the per-unit step (`fused` for
`FusedGroups`/`CDNA3`, `gfx12` for `Gfx12Dot4`, `exact`, `fma_chain`, `integer`), bit for bit
with the model's XLA arithmetic (NUMERICS.md; `tests/test_pallas.py` compares them in Pallas
interpret mode, `benchmarks/crosscheck.py` on a GPU).

`matrix_path` has the contract of `jwmma.tiled.paths.matrix_path` (tile-padded codes in, D
codes out), which calls it when ``options.backend == 'pallas'``. `kernel_for` says whether a
family has a kernel (and, for ``backend='auto'``, whether it was measured faster: `AUTO`).
"""
from __future__ import annotations

import functools

import jax

from ...engine.options import PallasOptions
from ...engine.step import context
from ...models.exact import Exact
from ...models.fma_chain import FMAChain
from ...models.fused import FusedGroups
from ...models.gfx12 import Gfx12Dot4
from ...models.integer import IntegerDot
from . import exact, fma_chain, fused, gfx12, integer
from .driver import Kernel, Tiling, run

__all__ = ["matrix_path", "kernel_for", "tiling", "AUTO", "Kernel", "Tiling", "PallasOptions"]

#: backend='auto' on a GPU: whether the family's kernel beat the XLA path on an H200
#: (benchmarks/RESULTS.md, "Pallas backend"); the key is (family, 8-bit operands)
AUTO = {
    ("fused", True): True,  # fp8/bf8 cdna3, vec3 (16, 64): 4.1e11 MAC/s, ~1.2x XLA
    ("fused", False): False,  # f16/bf16 cdna3: 0.9x XLA
    ("gfx12", True): True,  # 2.5x
    ("gfx12", False): True,  # 2.9x
    ("exact", True): True,  # ~28x
    ("exact", False): True,
    ("fma_chain", True): True,  # 53x
    ("fma_chain", False): True,
    ("integer", True): False,  # bit-exact, not timed at scale
    ("integer", False): False,
}


def family(model) -> str | None:
    """The kernel family of ``model`` (None: no Pallas kernel)."""
    for cls, name in ((FusedGroups, "fused"), (Gfx12Dot4, "gfx12"), (Exact, "exact"), (FMAChain, "fma_chain"),
                      (IntegerDot, "integer")):
        if isinstance(model, cls):
            return name
    return None


def kernel_for(spec, model, options) -> bool:
    """Whether the GEMM of ``spec`` under ``model`` runs on the Pallas backend with these
    (resolved) options. ``backend='pallas'`` and no kernel: ValueError naming the model;
    ``backend='auto'`` (``options.pallas.auto``): only where `AUTO` says it is faster."""
    if options.backend != "pallas":
        return False
    fam = family(model)
    if fam is None:
        if options.pallas.auto:
            return False
        raise ValueError(f"backend='pallas' has no kernel for model {model.describe()} (families: "
                         f"FusedGroups/CDNA3, Gfx12Dot4, Exact, FMAChain, IntegerDot); use backend='xla' or 'auto'")
    if options.pallas.auto:
        return AUTO.get((fam, spec.a_format.bits <= 8 if not spec.integer else True), False)
    return True


def tiling(spec, model, popts: PallasOptions) -> Tiling:
    """The concrete `driver.Tiling` of ``popts``, the family defaults filled in (the fastest
    measured on an H200, benchmarks/RESULTS.md "Pallas backend"): fused groups 3-D (8, 64)
    with 4 warps and the float64 combine; gfx12 (32, 64), 4 warps, f32 rounding by conversion;
    every other kernel (32, 64), 4 warps."""
    fam = family(model)
    vec3 = (fam == "fused") if popts.vec3 is None else popts.vec3
    tm = popts.tm or (8 if fam == "fused" and vec3 else 32)
    fc = (fam == "fused") if popts.float_combine is None else popts.float_combine
    fr = (fam == "gfx12") if popts.float_round is None else popts.float_round
    return Tiling(tm=tm, tn=popts.tn or 64, num_warps=popts.num_warps or 4, num_stages=popts.num_stages,
                  interpret=bool(popts.interpret), reload=popts.reload, float_combine=fc, float_round=fr, vec3=vec3)


def make_kernel(spec, model, *, a_signed=True, b_signed=True, clamp=False, tiling: Tiling = Tiling()) -> Kernel:
    """The `driver.Kernel` of ``model`` on ``spec`` (ValueError if the family has none)."""
    ctx = context(spec, clamp)
    fam = family(model)
    if fam == "fused":
        return fused.make_step(spec, model, ctx, reload=tiling.reload, float_combine=tiling.float_combine,
                               vec3=tiling.vec3)
    if fam == "gfx12":
        return gfx12.make_step(spec, model, ctx, float_round=tiling.float_round)
    if fam == "exact":
        return exact.make_step(spec, model, ctx)
    if fam == "fma_chain":
        return fma_chain.make_step(spec, model, ctx)
    if fam == "integer":
        return integer.make_step(spec, model, ctx, a_signed=a_signed, b_signed=b_signed)
    raise ValueError(f"no Pallas kernel for model {model.describe()}")


@functools.partial(jax.jit, static_argnames=("spec", "model", "options", "a_signed", "b_signed", "clamp"))
def matrix_path(a_codes, pos, b_codes, c, *, spec, model, options, a_signed=True, b_signed=True, clamp=False):
    """D codes of the GEMM (the contract and bits of `jwmma.tiled.paths.matrix_path`).

    a_codes, pos: (*batch, Mp, Kp/2) int32; b_codes: (*batch, Kp, Np); c: (*batch, Mp, Np)
    int32 accumulator bits (i32 values for integer builtins). Traced inside the caller's
    `x64_scope`. Returns (*batch, Mp, Np) int32."""
    t = tiling(spec, model, options.pallas)
    kern = make_kernel(spec, model, a_signed=a_signed, b_signed=b_signed, clamp=clamp, tiling=t)
    return run(kern, a_codes, pos, b_codes, c, tiling=t)
