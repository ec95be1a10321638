"""The units of the transformer study (`UNITS`): every contraction through the unit, except where
a row says otherwise.

MI300X dense fp8 (gfx942: FNUZ fp8, default model ``cdna3``), MI355X dense fp8 (gfx950: OCP fp8,
``cdna3`` parameters), MI355X MXFP8/MXFP6/MXFP4 (``mfma_scale_f32_16x16x128_f8f6f4``, OCP MX
block scales of 32 along K, default model ``cdna4_mx``; MXFP8 also under ``mx_rocjitsu``),
RDNA4 dense WMMA fp8 and bf16 (``gfx12_dot4``), CDNA4 sparse fp8 with 2:4 pruning, NVIDIA
Hopper's fp8 accumulator (``nvidia_hopper`` on the MI355X fp8 operands) and ``exact`` (the
MI355X fp8 operands, sums exact up to one float32 rounding per K step). The dense and sparse
fp8 units scale their operands per row (`jwmma.Unit` ``scaling="row"``: the weight per output
channel, the activation per token; for q @ k^T the key per position and the query per
position, for p @ v the value per (head, channel) and the probabilities per query), the MX
units per block of 32 along K (``"mx"``, applied by the instruction), and bf16 is a plain cast
(``"none"``: bf16 has float32's range).

*The sparse row* prunes the weights of the projections, the MLP and the logits (the tied
embedding, pruned along d_model for the logits only; the lookup stays dense) 2:4 along K, one
shot, no fine-tuning. Its attention contractions (q @ k^T, p @ v) run on the same chip's dense
fp8 MFMA (the MI355X fp8 unit): 2:4 sparsity is a property given to weights offline; pruning
keys or values at run time would be a different model, not a different arithmetic.

`TRAINING_UNIT` is the emulated training run's: MXFP8 forward, MI355X dense fp8 (row scaling)
for both backward GEMMs of every contraction (``Unit(..., backward=Unit(...))``,
`jwmma.dot_general`'s custom VJP).
"""
from __future__ import annotations

import dataclasses
import functools

from ...quant import Unit, dot_general, einsum
from .model import ATTENTION, ModelConfig, model_of

__all__ = ["UnitConfig", "UNITS", "UNIT_KEYS", "TRAINING_UNIT", "unit_configs", "unit_model", "exact_twin"]


def exact_twin(unit: Unit) -> Unit:
    """The unit whose products are ``unit``'s exact twin
    (`jwmma.study.transformer.errors.contraction_errors`): ``unit`` under ``model="exact"``; a
    block-scaled unit (``scaling="mx"``) under its default model, which stands for the float64
    product of its effective operands (`jwmma.quant.effective_product`)."""
    return unit.replace(model=None) if unit.scaling == "mx" else unit.replace(model="exact")


@dataclasses.dataclass(frozen=True)
class UnitConfig:
    """One row of the study: a key, a label, the unit of the weight contractions and the unit
    of the attention contractions (the same unit except for the sparse row)."""

    key: str
    label: str
    unit: Unit
    attention: Unit | None = None

    @property
    def attention_unit(self) -> Unit:
        return self.attention or self.unit

    def unit_for(self, name: str) -> Unit:
        """The unit of the contraction ``name`` (`jwmma.study.transformer.model.CONTRACTIONS`
        or ``"logits"``)."""
        return self.attention_unit if name in ATTENTION else self.unit

    def exact(self) -> "UnitConfig":
        """The same builtins and operands under ``model="exact"`` (`exact_twin`)."""
        return UnitConfig(self.key + ":exact", self.label + " (exact)", exact_twin(self.unit),
                          None if self.attention is None else exact_twin(self.attention))

    def describe(self) -> dict:
        """The row's JSON facts: key, label, builtin, target, model, scaling, formats, prune
        (and the attention unit's under ``attention`` when it differs)."""
        def one(u):
            return dict(builtin=u.builtin, target=u.target or u.spec.target, model=u.model or u.spec.default_model,
                        scaling=u.scaling, formats=f"{u.spec.a_type}x{u.spec.b_type}", prune=bool(u.prune))
        d = dict(key=self.key, label=self.label, **one(self.unit))
        if self.attention is not None:
            d["attention"] = one(self.attention)
        return d


_FP8 = "mfma_f32_16x16x32_fp8_fp8"
_MX = "mfma_scale_f32_16x16x128_f8f6f4"
_MI355X_FP8 = Unit(_FP8, target="gfx950", scaling="row")

UNITS = (
    UnitConfig("exact", "exact (MI355X fp8 operands)", _MI355X_FP8.replace(model="exact")),
    UnitConfig("mi300x-fp8", "MI300X fp8 (FNUZ)", Unit(_FP8, scaling="row")),
    UnitConfig("mi355x-fp8", "MI355X fp8", _MI355X_FP8),
    UnitConfig("mi355x-mxfp8", "MI355X MXFP8", Unit(_MX, scaling="mx", formats=("fp8", "fp8"))),
    UnitConfig("mi355x-mxfp8-rocjitsu", "MI355X MXFP8 (mx_rocjitsu)",
               Unit(_MX, scaling="mx", formats=("fp8", "fp8"), model="mx_rocjitsu")),
    UnitConfig("mi355x-mxfp6", "MI355X MXFP6", Unit(_MX, scaling="mx", formats=("fp6", "fp6"))),
    UnitConfig("mi355x-mxfp4", "MI355X MXFP4", Unit(_MX, scaling="mx", formats=("fp4", "fp4"))),
    UnitConfig("rdna4-fp8", "RDNA4 fp8", Unit("wmma_f32_16x16x16_fp8_fp8_w32_gfx12", scaling="row")),
    UnitConfig("rdna4-bf16", "RDNA4 bf16", Unit("wmma_f32_16x16x16_bf16_w32_gfx12", scaling="none")),
    UnitConfig("mi355x-sparse-fp8", "MI355X sparse fp8 2:4", Unit("smfmac_f32_16x16x128_fp8_fp8", scaling="row"),
               attention=_MI355X_FP8),
    UnitConfig("hopper-fp8", "Hopper fp8", _MI355X_FP8.replace(model="nvidia_hopper")),
)
UNIT_KEYS = tuple(u.key for u in UNITS)
#: the emulated training run's unit: MXFP8 forward, MI355X dense fp8 (row scaling) backward
TRAINING_UNIT = Unit(_MX, scaling="mx", formats=("fp8", "fp8"), backward=_MI355X_FP8)


def unit_configs(keys=UNIT_KEYS) -> list:
    """The `UNITS` rows named by ``keys``, in their order; ValueError for an unknown key."""
    by_key = {u.key: u for u in UNITS}
    bad = [k for k in keys if k not in by_key]
    if bad:
        raise ValueError(f"unknown unit(s) {bad}; the units are {', '.join(UNIT_KEYS)}")
    return [by_key[k] for k in keys]


def unit_model(cfg: ModelConfig, ucfg: UnitConfig):
    """`jwmma.study.transformer.model.model_of` with every contraction through ``ucfg``'s units
    (`jwmma.dot_general` for the Dense layers and the logits, `jwmma.einsum` for the attention)."""
    return model_of(cfg, functools.partial(dot_general, unit=ucfg.unit),
                    functools.partial(einsum, unit=ucfg.attention_unit))
