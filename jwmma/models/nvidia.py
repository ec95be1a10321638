"""NVIDIA tensor cores as `FusedDotAdd` parameters, chosen from the operand formats the way
`cdna3` chooses its group size (NUMERICS.md "NVIDIA tensor cores").

The table transcribes MMA-Sim 2.1.1 ``mmasim/nv_ptx/sim.py`` (classes MMA, WGMMA, TCGen05MMA):

| arch      | instruction       | 16-bit inputs  | 8-bit inputs                  | zero exponent f32/f16 |
|-----------|-------------------|----------------|-------------------------------|-----------------------|
| ampere    | mma (sm_80)       | F=24, group 8  | none                          | -132 / -20            |
| ada       | mma (sm_89)       | F=24, group 8  | F=13, group 16, f32 out E8M13 | -132 / -20            |
| hopper    | wgmma (sm_90a)    | F=25, group 16 | F=13, group 32, f32 out E8M13 | -133 / -21            |
| blackwell | tcgen05 (sm_100a) | F=25, group 16 | F=25, group 32                | -133 / -21            |

Groups are 16 (Ampere/Ada) or 32 (Hopper/Blackwell) bytes of the wider operand. C is aligned
with the products; f32 outputs are rounded toward zero (to 23 fraction bits, or 13 for
E8M13), f16 outputs to nearest even. ``b200_measured`` is the B200 as its captures show it:
16-bit inputs as ``blackwell`` (B200 f16 capture 5000/5000); 8-bit inputs with an f32
accumulator as the fit to the B200 E4M3 capture (5000/5000): the products truncated at F=25
below their maximum, C added after them, one round-to-nearest-even. Its fp8 -> f16 path is
unknown and refused. 8-bit means any 8-bit float, FNUZ included (a gfx942 fp8 GEMM can be
studied with Hopper's accumulator); the 16-bit output combinations MMA-Sim's tables leave out
(bf16 -> f16 output, fp8 -> f16 on Ada) take the same parameters (an extension, not evidence).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..numerics.formats import BF16, F16, F32, FP8
from .fields import Choice
from .base import Context, Model
from .fused_dot_add import FusedDotAdd

__all__ = ["TABLE", "EVIDENCE", "design", "designs", "NvidiaTensorCore"]

#: arch -> (instruction, F for 16-bit inputs, group in bytes, 8-bit design or None,
#: zero exponent with f32 / f16 output). 8-bit design: 'narrow' = F=13 and E8M13 f32 output;
#: 'wide' = as the 16-bit inputs; 'measured' = the B200 E4M3 capture fit.
TABLE = {
    "ampere": ("mma.sync (sm_80)", 24, 16, None, -132, -20),
    "ada": ("mma.sync (sm_89)", 24, 16, "narrow", -132, -20),
    "hopper": ("wgmma.mma_async (sm_90a)", 25, 32, "narrow", -133, -21),
    "blackwell": ("tcgen05.mma (sm_100a)", 25, 32, "wide", -133, -21),
    "b200_measured": ("B200 captures (instruction not recorded; likely mma.sync)", 25, 32, "measured", -133, -21),
}

_CAPTURES = "shared/data/nvidia_captures (MATLAB-tensor-core b12b5a7)"
#: arch -> what the design rests on
EVIDENCE = {
    "ampere": "MMA-Sim 2.1.1 mma sm_80 table (bit-identical differential); no capture here",
    "ada": "MMA-Sim 2.1.1 mma sm_89 table (bit-identical differential); no capture here",
    "hopper": (f"MMA-Sim 2.1.1 wgmma table; measured: H100 E4M3, E5M2 (C = 0), f16, bf16 captures "
               f"5000/5000 each ({_CAPTURES}); C alignment for fp8 from MMA-Sim only"),
    "blackwell": (f"MMA-Sim 2.1.1 tcgen05 table; measured: B200 f16 capture 5000/5000; the B200 E4M3 "
                  f"capture is NOT reproduced (3207/5000, see nvidia_b200_measured)"),
    "b200_measured": (f"fit to the B200 captures ({_CAPTURES}): f16 5000/5000, E4M3 5000/5000 with products "
                      f"truncated at F=25, C added last, one RNE; other designs that keep C to >= 30 bits fit "
                      f"as well; fp8 -> f16 unknown"),
}


def design(arch: str, ctx: Context) -> FusedDotAdd | str:
    """The `FusedDotAdd` that ``arch`` uses for the formats of ``ctx``, or why it has none.

    Args:
        arch: a key of `TABLE`; ctx: the operand and accumulator formats.
    Returns:
        The model, or a sentence (for the ValueError of `NvidiaTensorCore.check`).
    """
    instr, f16bits, group_bytes, eight, ez32, ez16 = TABLE[arch]
    if ctx.integer:
        return f"nvidia_{arch} models floating-point tensor-core instructions, not integer ones"
    if ctx.c not in (F32, F16):
        return f"nvidia_{arch} has no {ctx.c.name} accumulator (NVIDIA tensor cores accumulate in f32 or f16)"
    width = max(ctx.a.bits, ctx.b.bits)
    if width not in (8, 16):
        return f"nvidia_{arch} takes 8- or 16-bit operands, got {ctx.a.name} x {ctx.b.name}"
    f32 = ctx.c == F32
    ez = ez32 if f32 else ez16
    group = group_bytes // (width // 8)
    out = "toward_zero" if f32 else "nearest"
    if width == 16:
        return FusedDotAdd(group=group, frac_bits=f16bits, zero_exponent=ez, output_rounding=out)
    if eight is None:
        return f"nvidia_{arch} ({instr}) has no 8-bit floating-point inputs; use nvidia_ada or later"
    if eight == "narrow":
        return FusedDotAdd(group=group, frac_bits=13, zero_exponent=ez, output_rounding=out,
                           output_frac_bits=13 if f32 else None)
    if eight == "wide":
        return FusedDotAdd(group=group, frac_bits=f16bits, zero_exponent=ez, output_rounding=out)
    if not f32:
        return ("nvidia_b200_measured: no model reproduces the B200's fp8 inputs with an f16 output; "
                "use nvidia_blackwell for MMA-Sim's tcgen05 algorithm")
    return FusedDotAdd(group=group, frac_bits=f16bits, c_alignment="after", zero_exponent=ez,
                       output_rounding="nearest")


def designs(arch: str) -> list[tuple[str, FusedDotAdd | str]]:
    """Every (operands -> accumulator, design or reason) of ``arch``, for listings."""
    out = []
    for label, fa, fc in (("16-bit -> f32", BF16, F32), ("16-bit -> f16", BF16, F16),
                          ("8-bit -> f32", FP8, F32), ("8-bit -> f16", FP8, F16)):
        out.append((label, design(arch, Context(fa, fa, fc))))
    return out


@dataclass(frozen=True)
class NvidiaTensorCore(Model):
    """The tensor-core design of one NVIDIA architecture (a key of `TABLE`), resolved per
    operand / accumulator formats into a `FusedDotAdd` (module doc)."""

    arch: str = "hopper"

    name = "nvidia"

    FIELDS = {"arch": Choice(values=tuple(TABLE))}

    def describe(self):
        return f"nvidia_{self.arch}"

    def resolved(self, ctx: Context) -> FusedDotAdd:
        """The `FusedDotAdd` for ``ctx``; ValueError where the architecture has none."""
        d = design(self.arch, ctx)
        if isinstance(d, str):
            raise ValueError(d)
        return d

    def check(self, ctx: Context):
        why = super().check(ctx)
        if why:
            return why
        d = design(self.arch, ctx)
        return d if isinstance(d, str) else d.check(ctx)

    def accumulate(self, a, b, c_bits, ctx: Context, options=None):
        """`Model.accumulate` of the resolved design."""
        return self.resolved(ctx).accumulate(a, b, c_bits, ctx, options)

    def instruction(self, ctx: Context, a, pos, b, c, select, options):
        """`Model.instruction` of the resolved design (its fast paths, where it has any)."""
        return self.resolved(ctx).instruction(ctx, a, pos, b, c, select, options)

    def working_set(self, ctx: Context, options, a_shape, b_shape) -> int:
        return self.resolved(ctx).working_set(ctx, options, a_shape, b_shape)
