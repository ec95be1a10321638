"""The instruction table: one keyword record per builtin (BUILTINS.md sections 2 and 4;
BUILTINS_MORE.md sections 1, 2 and 5 for the CDNA3 SMFMAC, the RDNA4 and the RDNA3 dense WMMA).

A row is a builtin's whole description: its family (architecture, wave size, layout formulas,
how the index register is read), shapes, element types, the HIP calling convention, how many
index sets it has, its default arithmetic model and the evidence for that model. Derived
facts (register operands, layout arrays) are computed from the row when the table is built;
the arithmetic itself is `jwmma.models`. Adding a builtin of a known family is adding a row;
a new family is one `Family` (its layout formulas in `jwmma.isa.layouts`). A builtin that
runs on several chips with different fp8/bf8 decodings (the CDNA3 SMFMAC on gfx942 and gfx950)
names its targets and their element types in its row (`targets`); `lookup(name, target)` gives
the row as decoded on one target. Where a chip has other arithmetic or modifiers (the dense
MFMA on gfx908 and gfx90a), the row names them per target (`per_target`: default model,
evidence, blgp rule). The record types a row is built into (`BuiltinSpec`,
`Operand`, `Family`, `IndexRule`) are `jwmma.isa.records`, re-exported here.
"""
from __future__ import annotations

import difflib
from types import MappingProxyType

import numpy as np

from . import layouts
from .conventions import CONVENTIONS
from .records import BuiltinSpec, Family, IndexRule, Operand
from .types import LONG, SHORT, element_type
from . import evidence as ev  # the evidence strings and per-chip model choices the rows name

__all__ = ["Operand", "IndexRule", "Family", "BuiltinSpec", "BUILTINS", "lookup", "rocjitsu_chain_order",
           "RDNA4_SWMMAC", "CDNA4_SMFMAC", "CDNA3_SMFMAC", "RDNA4_WMMA", "RDNA3_WMMA", "RDNA3_WMMA_W64", "CDNA3_MFMA",
           "CDNA_MFMA_BLOCKS", "CDNA_MFMA_F64", "CDNA4_MFMA", "CDNA4_MFMA_SCALE", "TARGETS", "TARGET_RULES", "SCALE_FORMATS", "OPTIONAL"]


RDNA4_SWMMAC = Family(
    "RDNA4 SWMMAC", "gfx12", 32, IndexRule("index_key", "distinct"),
    a_layout=lambda m, n_a, bits, k: layouts.rdna4_a(n_a, bits),
    b_layout=lambda m, n_b, bits, k: layouts.rdna4_b(n_b, bits),
    c_layout=lambda m: layouts.rdna4_c(),
    bf16_storage=SHORT,  # RDNA4 bf16 registers are `short` bit patterns
)
CDNA4_SMFMAC = Family(
    "CDNA4 SMFMAC", "gfx950", 64, IndexRule("cbsz_abid", "increasing"),
    a_layout=lambda m, n_a, bits, k: layouts.cdna4_a(m, n_a),
    b_layout=lambda m, n_b, bits, k: layouts.cdna4_b(m, n_b, k),
    c_layout=layouts.cdna4_c,
)
CDNA3_SMFMAC = Family(
    "CDNA3 SMFMAC", "gfx942", 64, IndexRule("cbsz_abid", "increasing", cbsz_max=3, abid_max=None),
    a_layout=lambda m, n_a, bits, k: layouts.cdna4_a(m, n_a),  # same formula, BUILTINS_MORE.md 1.4
    b_layout=lambda m, n_b, bits, k: layouts.cdna3_b(m, n_b),
    c_layout=layouts.cdna4_c,
    bf16_storage=SHORT,  # CDNA3 bf16 registers are `short` bit patterns (BUILTINS_MORE.md 1.1)
)
RDNA4_WMMA = Family(
    "RDNA4 WMMA", "gfx12", 32, IndexRule("none", "none"),
    a_layout=lambda m, n_a, bits, k: layouts.rdna4_a(n_a, bits),  # BUILTINS_MORE.md 2.2, 2.3
    b_layout=lambda m, n_b, bits, k: layouts.rdna4_dense_b(n_b, bits),
    c_layout=lambda m: layouts.rdna4_c(),
    bf16_storage=SHORT,
    dense=True,
)

_NO_INDEX = IndexRule("none", "none")
RDNA3_WMMA, RDNA3_WMMA_W64 = (  # BUILTINS_MORE.md 5.2: A/B whole in every 16-lane group
    Family(f"RDNA3 WMMA{title}", "gfx11", w, _NO_INDEX,
           a_layout=lambda m, n_a, bits, k, w=w: layouts.rdna3_a(w, k),
           b_layout=lambda m, n_b, bits, k, w=w: layouts.rdna3_b(w, k),
           c_layout=lambda m, w=w: layouts.rdna3_c(w),
           bf16_storage=SHORT,  # LLVM's gfx11 bf16 builtins take `short` bit patterns (v16s)
           dense=True, replicated=True)
    for w, title in ((32, ""), (64, " wave64")))
CDNA3_MFMA = Family(  # docs/spec/BUILTINS_DENSE.md 1.1, 2 (the calculator's every entry)
    "CDNA3 MFMA", "gfx942", 64, _NO_INDEX,
    a_layout=lambda m, n_a, bits, k: layouts.cdna4_a(m, n_a),  # (L % M, nk*(L//M) + e)
    b_layout=lambda m, n_b, bits, k: layouts.cdna3_b(m, n_b),  # (nk*(L//M) + e, L % M)
    c_layout=layouts.cdna4_c,
    bf16_storage=SHORT,  # the `_1k` builtins take bf16 as `short` bit patterns
    dense=True, modifiers="mfma",
)
CDNA_MFMA_BLOCKS = Family(  # BUILTINS_DENSE.md 10: the multi-block forms, blocks = 64 / M
    "CDNA multi-block MFMA", "gfx942", 64, _NO_INDEX,
    a_layout=lambda m, n_a, bits, k: layouts.blocks_a(m, n_a),
    b_layout=lambda m, n_b, bits, k: layouts.blocks_b(m, n_b),
    c_layout=layouts.blocks_c,
    bf16_storage=SHORT,
    dense=True, modifiers="mfma", blocks=True,
)
CDNA_MFMA_F64 = Family(  # BUILTINS_DENSE.md 11: one double (VGPR pair) per element; 4x4x4 has 4 blocks
    "CDNA f64 MFMA", "gfx942", 64, _NO_INDEX,
    a_layout=lambda m, n_a, bits, k: layouts.f64_a(m),
    b_layout=lambda m, n_b, bits, k: layouts.f64_b(m),
    c_layout=layouts.f64_c,
    dense=True, modifiers="mfma",
)
CDNA4_MFMA = Family(  # BUILTINS_DENSE.md 1.2, 4: the CDNA3 formulas with K doubled
    "CDNA4 MFMA", "gfx950", 64, _NO_INDEX,
    a_layout=lambda m, n_a, bits, k: layouts.cdna4_a(m, n_a),
    b_layout=lambda m, n_b, bits, k: layouts.cdna3_b(m, n_b),
    c_layout=layouts.cdna4_c,
    dense=True, modifiers="mfma",
)
CDNA4_MFMA_SCALE = Family(  # BUILTINS_DENSE.md 1.2, 5
    "CDNA4 block-scaled MFMA", "gfx950", 64, _NO_INDEX,
    a_layout=lambda m, n_a, bits, k: layouts.cdna4_scaled_a(m, n_a, bits),
    b_layout=lambda m, n_b, bits, k: layouts.cdna4_scaled_b(m, n_b, bits),
    c_layout=layouts.cdna4_c,
    dense=True, scaled=True,
)

#: the scaled MFMA's format codes (its cbsz/blgp, the builtin's fmt_a/fmt_b; BUILTINS_DENSE.md 5.1)
SCALE_FORMATS = {0: "fp8", 1: "bf8", 2: "fp6", 3: "bf6", 4: "fp4"}

#: what the table leaves out on purpose (`jwmma list` prints it)
OPTIONAL = ""  # nothing left out now (a text, so that `jwmma list` can name what a later table omits)

_FNUZ = {"fp8": "fp8_fnuz", "bf8": "bf8_fnuz"}
#: the CDNA builtins' targets and what their fp8/bf8 are there (BUILTINS_MORE.md 1.1,
#: BUILTINS_DENSE.md 1.1, 9): gfx942 (MI300, the default) decodes FNUZ, gfx950 OCP; 'cdna' adds
#: gfx908 (MI100) and gfx90a (MI200), 'cdna2plus' gfx90a only, 'cdna12' gfx908 and gfx90a alone
#: (LLVM's TableGen predicates)
TARGETS = {
    "cdna3": (("gfx942", _FNUZ), ("gfx950", {})),
    "cdna": (("gfx942", _FNUZ), ("gfx950", {}), ("gfx908", {}), ("gfx90a", {})),
    "cdna2plus": (("gfx942", _FNUZ), ("gfx950", {}), ("gfx90a", {})),
    "cdna12": (("gfx908", {}), ("gfx90a", {})),
    # RDNA3 WMMA: gfx1100 (Radeon 7900, where rocjitsu's captures come from) and gfx1151 (Strix
    # Halo, RDNA3.5): the same layouts and, [ASSUMED] there, the same arithmetic
    "rdna3": (("gfx1100", {}), ("gfx1151", {})),
}
#: which chips run a `TARGETS` entry's builtins, and by which rule (messages for a wrong target)
TARGET_RULES = {
    "cdna": "LLVM selects it on every MFMA chip (HasMAIInsts)",
    "cdna2plus": "LLVM selects it on gfx90a and later only (isGFX90APlus), not on gfx908",
    "cdna12": ("LLVM selects it on gfx908 and gfx90a only (isGFX908orGFX90A); gfx942 and gfx950 refuse it "
               "(LLVM-MC: instruction not supported on this GPU)"),
}


def rocjitsu_chain_order(kc: int) -> tuple[int, ...]:
    """rocjitsu's FMA chain order for the CDNA4 8-bit SMFMAC builtins (NUMERICS.md 8.3):
    chain step -> compressed column. Its ``exec_smfmac_f32_16x16x128_fp8`` /
    ``_32x32x64_fp8`` (shared/mma_exec.h) walk the A registers: step cc reads byte
    4*hb + (cc & 3) of lane group ga, with (ga, hb) = (2*b5 + b3, 2*b2 + b4) for Kc = 64 and
    (b4, 2*b2 + b3) for Kc = 32 (b_i = bit i of cc), and byte b of lane group g is compressed
    column 16*g + b (BUILTINS.md 4.2). So 16x16x128: 0-3, 8-11, 16-19, 24-27, 4-7, 12-15,
    20-23, 28-31, then 32-63 alike; 32x32x64: 0-3, 8-11, 4-7, 12-15, 16-19, 24-27, 20-23, 28-31.

    Args:
        kc: compressed K, 64 (16x16x128) or 32 (32x32x64).
    Returns:
        The permutation as a tuple.
    """
    if kc not in (32, 64):
        raise ValueError(f"rocjitsu's register chain order is known for Kc = 64 and 32, got Kc={kc}")
    out = []
    for cc in range(kc):
        bit = lambda i: (cc >> i) & 1
        ga, hb = (2 * bit(5) + bit(3), 2 * bit(2) + bit(4)) if kc == 64 else (bit(4), 2 * bit(2) + bit(3))
        out.append(16 * ga + 4 * hb + (cc & 3))
    return tuple(out)


def _operand(family: Family, type_name: str, elems: int, long: bool = False) -> Operand:
    t = element_type(type_name)
    storage = family.bf16_storage if (type_name == "bf16" and family.bf16_storage) else t.storage
    if family.scaled and not t.accumulator:  # A, B: v8i32 whatever the format (words beyond it ignored)
        return Operand(8, elems, t.bits, storage)
    if long:  # a 64-bit HIP `long` (CDNA3 i8/fp8 MFMA): its two 32-bit halves
        storage = LONG
    if t.bits == 64:  # a `double` (f64 MFMA): its two 32-bit halves, low word first
        return Operand(elems * storage.words, elems, 64, storage)
    n = elems if t.bits >= 16 else max(1, elems * t.bits // 32)
    return Operand(n, elems, t.bits, storage)


#: (name, target, formats) -> the row as decoded on a target other than its default, or with
#: other format codes (a scaled row's fmt_a/fmt_b)
_VARIANTS: dict = {}
#: name -> the rule behind its targets (`TARGET_RULES`), for the message of a wrong target
_RULES: dict = {}


def _row(family: Family, name: str, *, m: int, n: int, k: int, a: str, b: str, c: str, convention: str,
         sets: int, model: str, evidence: str, targets: str | None = None,
         register_chain: bool = False, blgp: str = "", long: bool = False,
         per_target: dict | None = None, opsel: bool = False, tied: bool = False,
         blocks: int | None = None) -> BuiltinSpec:
    """A table row from its keyword record; operands and layouts follow from the family.
    ``targets`` names an entry of `TARGETS` (the chips it runs on and their element types);
    the first target is the row's, the others are kept for `lookup`. ``register_chain``:
    the FMA chain runs in rocjitsu's register order (`rocjitsu_chain_order`). ``blgp``:
    'swizzle' where blgp permutes B's lanes, 'negate' where its bits negate A, B, C (f64 on
    gfx942/gfx950). ``long``: A and B are 64-bit HIP `long`s. ``blocks``: independent products
    per call where the family's rule (wave / M for a multi-block family, else 1) does not give
    it (f64 4x4x4: 4 blocks of 16 lanes' worth).
    A scaled family's row is built for every pair of `SCALE_FORMATS` (the first, fp8 x fp8,
    is the row; ``a``/``b`` are ignored). ``per_target``: target -> the ``model``, ``evidence``
    and ``blgp`` of the row on that chip, where they differ from the row's (gfx908, gfx90a).
    ``opsel``: 16-bit C/D values in one half of each 32-bit VGPR (the call's opsel picks it), so C
    has two register elements per layout slot; ``tied``: D's other halves are C's."""
    chips = TARGETS[targets] if targets else ((family.arch, {}),)
    per_target = per_target or {}
    if not set(per_target) <= {t for t, _ in chips}:
        raise ValueError(f"{name}: per_target names chips outside its targets")
    kc = k if family.dense else k // 2
    blocks = blocks or (family.wave // m if family.blocks else 1)
    n_a, n_b, n_c = (blocks * x // family.wave for x in (m * kc, k * n, m * n))
    if family.replicated:  # every lane a whole row of A and column of B
        n_a, n_b = kc, k
    if opsel and element_type(c).bits != 16:
        raise ValueError(f"{name}: opsel picks a 16-bit half of each C/D VGPR; {c} is not 16-bit")
    pairs = [(fa, fb) for fa in SCALE_FORMATS for fb in SCALE_FORMATS] if family.scaled else [None]
    variants = []
    for target, types in chips:
        own = per_target.get(target, {})
        for codes in pairs:
            ta, tb = (SCALE_FORMATS[codes[0]], SCALE_FORMATS[codes[1]]) if codes else (types.get(a, a), types.get(b, b))
            bits_a, bits_b = element_type(ta).bits, element_type(tb).bits
            variants.append(BuiltinSpec(
                name=name, family=family.title, arch=target, wave=family.wave, m=m, n=n, k=k,
                a_type=ta, b_type=tb, c_type=c, a=_operand(family, ta, n_a, long), b=_operand(family, tb, n_b, long),
                c=_operand(family, c, 2 * n_c if opsel else n_c), convention=CONVENTIONS[convention], index=family.index, n_sets=sets,
                default_model=own.get("model", model), default_evidence=own.get("evidence", evidence),
                a_layout=family.layout("a", m, n_a, bits_a, k), b_layout=family.layout("b", m, n_b, bits_b, k),
                c_layout=family.layout("c", m), dense=family.dense, target=target,
                targets=tuple(t for t, _ in chips),
                chain_order=rocjitsu_chain_order(kc) if register_chain else None,
                blgp=own.get("blgp", blgp), scaled=family.scaled, fmt_codes=codes or (), blocks=blocks,
                opsel=opsel, tied=tied,
            ))
    spec = variants[0]
    if targets in TARGET_RULES:
        _RULES[name] = TARGET_RULES[targets]
    for v in variants[1:]:
        _VARIANTS[(name, v.target, v.fmt_codes)] = v
    # every layout must cover its matrix exactly once (each distinct layout checked once)
    for v in variants:
        for arr, shape in ((v.a_layout, v.a_shape), (v.b_layout, v.b_shape), (v.c_layout, v.c_shape)):
            if (id(arr), shape) not in _CHECKED:
                layouts.inverse(arr, shape)
                _CHECKED.add((id(arr), shape))
    return spec


_CHECKED: set = set()  # (id of a shared layout array, `Family.layout`'s, the matrix shape it was checked to cover)


_R4, _C4, _C3, _W4 = RDNA4_SWMMAC, CDNA4_SMFMAC, CDNA3_SMFMAC, RDNA4_WMMA
_M3, _M4, _MS, _MB, _MD = CDNA3_MFMA, CDNA4_MFMA, CDNA4_MFMA_SCALE, CDNA_MFMA_BLOCKS, CDNA_MFMA_F64
_ROWS = (
    # RDNA4 SWMMAC (gfx1200/1201, wave32): BUILTINS.md section 2.1
    _row(_R4, "swmmac_f32_16x16x32_f16_w32", m=16, n=16, k=32, a="f16", b="f16", c="f32",
         convention="swmmac", sets=2, model="gfx12_dot4", evidence=ev.GFX12_F32),
    _row(_R4, "swmmac_f32_16x16x32_bf16_w32", m=16, n=16, k=32, a="bf16", b="bf16", c="f32",
         convention="swmmac", sets=2, model="gfx12_dot4", evidence=ev.GFX12_F32),
    _row(_R4, "swmmac_f16_16x16x32_f16_w32", m=16, n=16, k=32, a="f16", b="f16", c="f16",
         convention="swmmac", sets=2, model="gfx12_dot4", evidence=ev.GFX12_16),
    _row(_R4, "swmmac_bf16_16x16x32_bf16_w32", m=16, n=16, k=32, a="bf16", b="bf16", c="bf16",
         convention="swmmac", sets=2, model="gfx12_dot4", evidence=ev.GFX12_16),
    _row(_R4, "swmmac_i32_16x16x32_iu8_w32", m=16, n=16, k=32, a="iu8", b="iu8", c="i32",
         convention="swmmac_iu", sets=2, model="staged_clamp", evidence=ev.STAGED),
    _row(_R4, "swmmac_i32_16x16x32_iu4_w32", m=16, n=16, k=32, a="iu4", b="iu4", c="i32",
         convention="swmmac_iu", sets=2, model="staged_clamp", evidence=ev.STAGED),
    _row(_R4, "swmmac_i32_16x16x64_iu4_w32", m=16, n=16, k=64, a="iu4", b="iu4", c="i32",
         convention="swmmac_iu", sets=1, model="staged_clamp", evidence=ev.STAGED),
    _row(_R4, "swmmac_f32_16x16x32_fp8_fp8_w32", m=16, n=16, k=32, a="fp8", b="fp8", c="f32",
         convention="swmmac", sets=2, model="gfx12_dot4", evidence=ev.GFX12_8),
    _row(_R4, "swmmac_f32_16x16x32_fp8_bf8_w32", m=16, n=16, k=32, a="fp8", b="bf8", c="f32",
         convention="swmmac", sets=2, model="gfx12_dot4", evidence=ev.GFX12_8),
    _row(_R4, "swmmac_f32_16x16x32_bf8_fp8_w32", m=16, n=16, k=32, a="bf8", b="fp8", c="f32",
         convention="swmmac", sets=2, model="gfx12_dot4", evidence=ev.GFX12_8),
    _row(_R4, "swmmac_f32_16x16x32_bf8_bf8_w32", m=16, n=16, k=32, a="bf8", b="bf8", c="f32",
         convention="swmmac", sets=2, model="gfx12_dot4", evidence=ev.GFX12_8),
    # CDNA4 SMFMAC (gfx950, wave64): BUILTINS.md section 4.1
    _row(_C4, "smfmac_f32_16x16x64_f16", m=16, n=16, k=64, a="f16", b="f16", c="f32",
         convention="smfmac", sets=2, model="cdna3", evidence=ev.CDNA3),
    _row(_C4, "smfmac_f32_32x32x32_f16", m=32, n=32, k=32, a="f16", b="f16", c="f32",
         convention="smfmac", sets=2, model="cdna3", evidence=ev.CDNA3),
    _row(_C4, "smfmac_f32_16x16x64_bf16", m=16, n=16, k=64, a="bf16", b="bf16", c="f32",
         convention="smfmac", sets=2, model="cdna3", evidence=ev.CDNA3),
    _row(_C4, "smfmac_f32_32x32x32_bf16", m=32, n=32, k=32, a="bf16", b="bf16", c="f32",
         convention="smfmac", sets=2, model="cdna3", evidence=ev.CDNA3),
    _row(_C4, "smfmac_i32_16x16x128_i8", m=16, n=16, k=128, a="i8", b="i8", c="i32",
         convention="smfmac", sets=1, model="exact", evidence=ev.EXACT_I8),
    _row(_C4, "smfmac_i32_32x32x64_i8", m=32, n=32, k=64, a="i8", b="i8", c="i32",
         convention="smfmac", sets=1, model="exact", evidence=ev.EXACT_I8),
    _row(_C4, "smfmac_f32_16x16x128_fp8_fp8", m=16, n=16, k=128, a="fp8", b="fp8", c="f32",
         convention="smfmac", sets=1, model="cdna3", evidence=ev.CDNA3, register_chain=True),
    _row(_C4, "smfmac_f32_16x16x128_fp8_bf8", m=16, n=16, k=128, a="fp8", b="bf8", c="f32",
         convention="smfmac", sets=1, model="cdna3", evidence=ev.CDNA3, register_chain=True),
    _row(_C4, "smfmac_f32_16x16x128_bf8_fp8", m=16, n=16, k=128, a="bf8", b="fp8", c="f32",
         convention="smfmac", sets=1, model="cdna3", evidence=ev.CDNA3, register_chain=True),
    _row(_C4, "smfmac_f32_16x16x128_bf8_bf8", m=16, n=16, k=128, a="bf8", b="bf8", c="f32",
         convention="smfmac", sets=1, model="cdna3", evidence=ev.CDNA3, register_chain=True),
    _row(_C4, "smfmac_f32_32x32x64_fp8_fp8", m=32, n=32, k=64, a="fp8", b="fp8", c="f32",
         convention="smfmac", sets=1, model="cdna3", evidence=ev.CDNA3, register_chain=True),
    _row(_C4, "smfmac_f32_32x32x64_fp8_bf8", m=32, n=32, k=64, a="fp8", b="bf8", c="f32",
         convention="smfmac", sets=1, model="cdna3", evidence=ev.CDNA3, register_chain=True),
    _row(_C4, "smfmac_f32_32x32x64_bf8_fp8", m=32, n=32, k=64, a="bf8", b="fp8", c="f32",
         convention="smfmac", sets=1, model="cdna3", evidence=ev.CDNA3, register_chain=True),
    _row(_C4, "smfmac_f32_32x32x64_bf8_bf8", m=32, n=32, k=64, a="bf8", b="bf8", c="f32",
         convention="smfmac", sets=1, model="cdna3", evidence=ev.CDNA3, register_chain=True),
    # CDNA3 SMFMAC (gfx942 FNUZ by default, also gfx950 OCP, wave64): BUILTINS_MORE.md 1.1
    *(_row(_C3, f"smfmac_f32_{mm}x{mm}x{kk}_{t}", m=mm, n=mm, k=kk, a=t, b=t, c="f32", convention="smfmac_cdna3",
           sets=4, model="cdna3", evidence=ev.CDNA3_942, targets="cdna3")
      for t in ("f16", "bf16") for mm, kk in ((16, 32), (32, 16))),
    _row(_C3, "smfmac_i32_16x16x64_i8", m=16, n=16, k=64, a="i8", b="i8", c="i32",
         convention="smfmac_cdna3", sets=2, model="exact", evidence=ev.EXACT_I8, targets="cdna3"),
    _row(_C3, "smfmac_i32_32x32x32_i8", m=32, n=32, k=32, a="i8", b="i8", c="i32",
         convention="smfmac_cdna3", sets=2, model="exact", evidence=ev.EXACT_I8, targets="cdna3"),
    *(_row(_C3, f"smfmac_f32_{mm}x{mm}x{kk}_{fa}_{fb}", m=mm, n=mm, k=kk, a=fa, b=fb, c="f32",
           convention="smfmac_cdna3", sets=2, model="cdna3", evidence=ev.CDNA3_942, targets="cdna3")
      for mm, kk in ((16, 64), (32, 32)) for fa in ("fp8", "bf8") for fb in ("fp8", "bf8")),
    # RDNA4 dense WMMA (gfx1200/1201, wave32): BUILTINS_MORE.md 2.1
    _row(_W4, "wmma_f32_16x16x16_f16_w32_gfx12", m=16, n=16, k=16, a="f16", b="f16", c="f32",
         convention="wmma", sets=1, model="gfx12_dot4", evidence=ev.WMMA_F32),
    _row(_W4, "wmma_f32_16x16x16_bf16_w32_gfx12", m=16, n=16, k=16, a="bf16", b="bf16", c="f32",
         convention="wmma", sets=1, model="gfx12_dot4", evidence=ev.WMMA_F32),
    _row(_W4, "wmma_f16_16x16x16_f16_w32_gfx12", m=16, n=16, k=16, a="f16", b="f16", c="f16",
         convention="wmma", sets=1, model="gfx12_dot4", evidence=ev.WMMA_16),
    _row(_W4, "wmma_bf16_16x16x16_bf16_w32_gfx12", m=16, n=16, k=16, a="bf16", b="bf16", c="bf16",
         convention="wmma", sets=1, model="gfx12_dot4", evidence=ev.WMMA_16),
    _row(_W4, "wmma_i32_16x16x16_iu8_w32_gfx12", m=16, n=16, k=16, a="iu8", b="iu8", c="i32",
         convention="wmma_iu", sets=1, model="staged_clamp", evidence=ev.WMMA_INT),
    _row(_W4, "wmma_i32_16x16x16_iu4_w32_gfx12", m=16, n=16, k=16, a="iu4", b="iu4", c="i32",
         convention="wmma_iu", sets=1, model="staged_clamp", evidence=ev.WMMA_INT),
    _row(_W4, "wmma_i32_16x16x32_iu4_w32_gfx12", m=16, n=16, k=32, a="iu4", b="iu4", c="i32",
         convention="wmma_iu", sets=1, model="staged_clamp", evidence=ev.WMMA_INT),
    *(_row(_W4, f"wmma_f32_16x16x16_{fa}_{fb}_w32_gfx12", m=16, n=16, k=16, a=fa, b=fb, c="f32",
           convention="wmma", sets=1, model="gfx12_dot4", evidence=ev.WMMA_8)
      for fa in ("fp8", "bf8") for fb in ("fp8", "bf8")),
    # RDNA3 dense WMMA (gfx1100/1151, wave32 and wave64): BUILTINS_MORE.md 5.1
    *(_row(fam, f"wmma_f32_16x16x16_{t}_w{fam.wave}", m=16, n=16, k=16, a=t, b=t, c="f32", convention="wmma",
           sets=1, model="gfx11_dot2", evidence=ev.GFX11_F32, targets="rdna3")
      for fam in (RDNA3_WMMA, RDNA3_WMMA_W64) for t in ("f16", "bf16")),
    # the 16-bit outputs (BUILTINS_MORE.md 5.1): D in the half of each VGPR that opsel picks; `_tied`: the
    # other halves are C's
    *(_row(fam, f"wmma_{t}_16x16x16_{t}{tie}_w{fam.wave}", m=16, n=16, k=16, a=t, b=t, c=t, convention="wmma_opsel",
           sets=1, model="gfx11_dot2", evidence=ev.GFX11_16, targets="rdna3", opsel=True, tied=bool(tie))
      for fam in (RDNA3_WMMA, RDNA3_WMMA_W64) for t in ("f16", "bf16") for tie in ("", "_tied")),
    *(_row(fam, f"wmma_i32_16x16x16_{t}_w{fam.wave}", m=16, n=16, k=16, a=t, b=t, c="i32",
           convention="wmma_iu_gfx11", sets=1, model="exact", evidence=ev.GFX11_INT, targets="rdna3")
      for fam in (RDNA3_WMMA, RDNA3_WMMA_W64) for t in ("iu8", "iu4")),
    # CDNA3 dense MFMA (gfx942 FNUZ by default, also gfx950 OCP except xf32; wave64):
    # docs/spec/BUILTINS_DENSE.md 1.1, LLVM's spelling
    _row(_M3, "mfma_f32_32x32x2f32", m=32, n=32, k=2, a="f32", b="f32", c="f32", convention="mfma_cdna3",
         sets=1, model="cdna3", evidence=ev.MFMA_F32, targets="cdna", blgp="swizzle", per_target=ev.ON_CDNA12_F32),
    _row(_M3, "mfma_f32_16x16x4f32", m=16, n=16, k=4, a="f32", b="f32", c="f32", convention="mfma_cdna3",
         sets=1, model="cdna3", evidence=ev.MFMA_F32, targets="cdna", blgp="swizzle", per_target=ev.ON_CDNA12_F32),
    _row(_M3, "mfma_f32_32x32x4_xf32", m=32, n=32, k=4, a="xf32", b="xf32", c="f32", convention="mfma_cdna3",
         sets=1, model="cdna3", evidence=ev.MFMA_XF32),
    _row(_M3, "mfma_f32_16x16x8_xf32", m=16, n=16, k=8, a="xf32", b="xf32", c="f32", convention="mfma_cdna3",
         sets=1, model="cdna3", evidence=ev.MFMA_XF32),
    _row(_M3, "mfma_f32_32x32x8f16", m=32, n=32, k=8, a="f16", b="f16", c="f32", convention="mfma_cdna3",
         sets=1, model="cdna3", evidence=ev.MFMA_942, targets="cdna",
         per_target=ev.ON_CDNA12),
    _row(_M3, "mfma_f32_16x16x16f16", m=16, n=16, k=16, a="f16", b="f16", c="f32", convention="mfma_cdna3",
         sets=1, model="cdna3", evidence=ev.MFMA_942, targets="cdna",
         per_target=ev.ON_CDNA12),
    _row(_M3, "mfma_f32_32x32x8bf16_1k", m=32, n=32, k=8, a="bf16", b="bf16", c="f32", convention="mfma_cdna3",
         sets=1, model="cdna3", evidence=ev.MFMA_942, targets="cdna2plus",
         per_target=ev.ON_CDNA2),
    _row(_M3, "mfma_f32_16x16x16bf16_1k", m=16, n=16, k=16, a="bf16", b="bf16", c="f32", convention="mfma_cdna3",
         sets=1, model="cdna3", evidence=ev.MFMA_942, targets="cdna2plus",
         per_target=ev.ON_CDNA2),
    # the gfx908/gfx90a-only single-block forms (isGFX908orGFX90A; BUILTINS_DENSE.md 9): non-1k bf16 (2 bf16
    # in one VGPR, `V2s`) and the old i8 (one int = 4 x i8)
    _row(_M3, "mfma_f32_32x32x4bf16", m=32, n=32, k=4, a="bf16", b="bf16", c="f32", convention="mfma_cdna12",
         sets=1, model="cdna1", evidence=ev.BF16_908, targets="cdna12", blgp="swizzle", per_target=ev.ON_CDNA12_BF16),
    _row(_M3, "mfma_f32_16x16x8bf16", m=16, n=16, k=8, a="bf16", b="bf16", c="f32", convention="mfma_cdna12",
         sets=1, model="cdna1", evidence=ev.BF16_908, targets="cdna12", blgp="swizzle", per_target=ev.ON_CDNA12_BF16),
    _row(_M3, "mfma_i32_32x32x8i8", m=32, n=32, k=8, a="i8", b="i8", c="i32", convention="mfma_cdna12",
         sets=1, model="exact", evidence=ev.MFMA_I8_12, targets="cdna12", blgp="swizzle"),
    _row(_M3, "mfma_i32_16x16x16i8", m=16, n=16, k=16, a="i8", b="i8", c="i32", convention="mfma_cdna12",
         sets=1, model="exact", evidence=ev.MFMA_I8_12, targets="cdna12", blgp="swizzle"),
    _row(_M3, "mfma_i32_32x32x16_i8", m=32, n=32, k=16, a="i8", b="i8", c="i32", convention="mfma_cdna3",
         sets=1, model="exact", evidence=ev.MFMA_I8, targets="cdna3", long=True),
    _row(_M3, "mfma_i32_16x16x32_i8", m=16, n=16, k=32, a="i8", b="i8", c="i32", convention="mfma_cdna3",
         sets=1, model="exact", evidence=ev.MFMA_I8, targets="cdna3", long=True),
    *(_row(_M3, f"mfma_f32_{mm}x{mm}x{kk}_{fa}_{fb}", m=mm, n=mm, k=kk, a=fa, b=fb, c="f32",
           convention="mfma_cdna3", sets=1, model="cdna3", evidence=ev.MFMA_942, targets="cdna3", long=True)
      for mm, kk in ((32, 16), (16, 32)) for fa in ("fp8", "bf8") for fb in ("fp8", "bf8")),
    # CDNA multi-block MFMA (gfx942 by default; gfx908, gfx90a, gfx950 with target=; bf16_1k not on gfx908):
    # BUILTINS_DENSE.md 10; blgp swizzles B's lanes on every chip
    *(_row(_MB, f"mfma_f32_{mm}x{mm}x1f32", m=mm, n=mm, k=1, a="f32", b="f32", c="f32", convention="mfma_blocks",
           sets=1, model="cdna3", evidence=ev.MFMA_F32, targets="cdna", blgp="swizzle", per_target=ev.ON_CDNA12_F32)
      for mm in (32, 16, 4)),
    *(_row(_MB, f"mfma_i32_{mm}x{mm}x4i8", m=mm, n=mm, k=4, a="i8", b="i8", c="i32", convention="mfma_blocks",
           sets=1, model="exact", evidence=ev.MFMA_I8, targets="cdna", blgp="swizzle",
           per_target={t: dict(blgp="swizzle") for t in ("gfx908", "gfx90a")})
      for mm in (32, 16, 4)),
    *(_row(_MB, f"mfma_f32_{mm}x{mm}x4f16", m=mm, n=mm, k=4, a="f16", b="f16", c="f32", convention="mfma_blocks",
           sets=1, model="cdna3", evidence=ev.MFMA_942, targets="cdna", blgp="swizzle", per_target=ev.ON_CDNA12)
      for mm in (32, 16, 4)),
    *(_row(_MB, f"mfma_f32_{mm}x{mm}x4bf16_1k", m=mm, n=mm, k=4, a="bf16", b="bf16", c="f32",
           convention="mfma_blocks", sets=1, model="cdna3", evidence=ev.MFMA_942, targets="cdna2plus", blgp="swizzle",
           per_target=ev.ON_CDNA2)
      for mm in (32, 16, 4)),
    # gfx908/gfx90a's multi-block non-1k bf16 (2 bf16 per VGPR; gone from gfx940 on): the single-block
    # non-1k bf16 rows' arithmetic, one group of K = 2 (BUILTINS_DENSE.md 9, 10)
    *(_row(_MB, f"mfma_f32_{mm}x{mm}x2bf16", m=mm, n=mm, k=2, a="bf16", b="bf16", c="f32",
           convention="mfma_blocks_cdna12", sets=1, model="cdna1", evidence=ev.BF16_908, targets="cdna12",
           blgp="swizzle", per_target=ev.ON_CDNA12_BF16)
      for mm in (32, 16, 4)),
    # CDNA f64 MFMA (gfx942 by default; gfx90a, gfx950 with target=; isGFX90APlus): BUILTINS_DENSE.md 11.
    # an f64 FMA chain on every chip; blgp bits negate A, B, C on gfx942/gfx950, gfx90a has no BLGP here
    _row(_MD, "mfma_f64_16x16x4f64", m=16, n=16, k=4, a="f64", b="f64", c="f64", convention="mfma_f64", sets=1,
         model="cdna3", evidence=ev.MFMA_F64, targets="cdna2plus", blgp="negate", per_target=ev.ON_CDNA2_F64),
    _row(_MD, "mfma_f64_4x4x4f64", m=4, n=4, k=4, a="f64", b="f64", c="f64", convention="mfma_f64", sets=1,
         model="cdna3", evidence=ev.MFMA_F64, targets="cdna2plus", blgp="negate", per_target=ev.ON_CDNA2_F64,
         blocks=4),
    # CDNA4 (gfx950) dense additions and the block-scaled f8f6f4 MFMA: BUILTINS_DENSE.md 1.2, 4, 5
    *(_row(_M4, f"mfma_f32_{mm}x{mm}x{kk}_{t}", m=mm, n=mm, k=kk, a=t, b=t, c="f32", convention="mfma",
           sets=1, model="cdna3", evidence=ev.MFMA_950)
      for t in ("f16", "bf16") for mm, kk in ((16, 32), (32, 16))),
    _row(_M4, "mfma_i32_16x16x64_i8", m=16, n=16, k=64, a="i8", b="i8", c="i32", convention="mfma", sets=1,
         model="exact", evidence=ev.MFMA_I8),
    _row(_M4, "mfma_i32_32x32x32_i8", m=32, n=32, k=32, a="i8", b="i8", c="i32", convention="mfma", sets=1,
         model="exact", evidence=ev.MFMA_I8),
    _row(_MS, "mfma_scale_f32_16x16x128_f8f6f4", m=16, n=16, k=128, a="fp8", b="fp8", c="f32",
         convention="mfma_scale", sets=1, model="cdna4_mx", evidence=ev.MFMA_MX),
    _row(_MS, "mfma_scale_f32_32x32x64_f8f6f4", m=32, n=32, k=64, a="fp8", b="fp8", c="f32",
         convention="mfma_scale", sets=1, model="cdna4_mx", evidence=ev.MFMA_MX),
)

#: name (without ``__builtin_amdgcn_``) -> BuiltinSpec (on its default target; a scaled row with
#: fp8 x fp8), all 113 builtins
BUILTINS = MappingProxyType({r.name: r for r in _ROWS})


def lookup(name: str, target: str | None = None, formats: tuple | None = None) -> BuiltinSpec:
    """The table row of a builtin.

    Args:
        name: the builtin's name, with or without the ``__builtin_amdgcn_`` prefix.
        target: the chip it runs on (None: the row's default, e.g. 'gfx942' for the CDNA3
            SMFMAC and MFMA, which also run on 'gfx950' with OCP fp8/bf8; the f32, f16 and
            bf16_1k single-block MFMA also on 'gfx90a' and, but for bf16_1k, 'gfx908', each
            with its own default model and blgp rule; the non-1k bf16 and old i8 MFMA on
            'gfx908', their default, and 'gfx90a' only).
        formats: a block-scaled builtin's (fmt_a, fmt_b) codes (`SCALE_FORMATS`; None: the
            row's (0, 0), fp8 x fp8); other builtins take None.
    Returns:
        Its `BuiltinSpec`; raises ValueError (with close matches) for an unknown name, a
        target the builtin does not run on or formats it does not take, and TypeError for a
        non-string.
    """
    spec = _lookup(name)
    if formats is not None:
        if not spec.scaled:
            raise ValueError(f"formats apply to the block-scaled builtins (mfma_scale_*); {spec.name} takes none")
        codes = _format_codes(formats)
    else:
        codes = spec.fmt_codes
    target = spec.target if target is None else target
    if target == spec.target and codes == spec.fmt_codes:
        return spec
    if (spec.name, target, codes) in _VARIANTS:
        return _VARIANTS[(spec.name, target, codes)]
    rule = f" ({spec.name} runs on {', '.join(spec.targets)}: {_RULES[spec.name]})" if spec.name in _RULES else ""
    raise ValueError(f"target for {spec.name} must be one of {list(spec.targets)}, got {target!r}{rule}")


def _format_codes(formats) -> tuple:
    """(fmt_a, fmt_b) as validated ints of `SCALE_FORMATS`."""
    if not isinstance(formats, tuple) or len(formats) != 2:
        raise TypeError(f"formats must be a pair (fmt_a, fmt_b), got {formats!r}")
    out = []
    for what, v in zip(("fmt_a", "fmt_b"), formats):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or int(v) not in SCALE_FORMATS:
            names = ", ".join(f"{c} {t}" for c, t in SCALE_FORMATS.items())
            raise ValueError(f"{what} must be a format code ({names}), got {v!r}")
        out.append(int(v))
    return tuple(out)


def _lookup(name: str) -> BuiltinSpec:
    if not isinstance(name, str):
        raise TypeError(f"builtin name must be a str, got {type(name).__name__}")
    key = name.removeprefix("__builtin_amdgcn_")
    try:
        return BUILTINS[key]
    except KeyError:
        close = difflib.get_close_matches(key, list(BUILTINS), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ValueError(
            f"unknown builtin {name!r}{hint} (`jwmma list` shows all {len(BUILTINS)})"
        ) from None
