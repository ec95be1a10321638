"""The 25 sibling builtins, transcribed from BUILTINS_MORE.md 1.1 (CDNA3 SMFMAC table) and
2.1 (RDNA4 dense WMMA table). Plain Python; never imports jwmma.

Every row records what the spec's table says (argument order, HIP vector types and widths,
element types, M=N, dense K, compressed K, lane groups, per-lane element counts, index-set
width and ABID range) plus the targets the builtin exists on (1.1: gfx942 with FNUZ, gfx950
with OCP; 2.1: gfx12). Derived counts (e.g. nA = 64 // w) are checked against the table by
the tests, not used to build it."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    name: str  # without __builtin_amdgcn_
    family: str  # 'smfmac_cdna3' | 'wmma_gfx12'
    args: tuple  # HIP argument order
    d_vec: str  # HIP type of D (= C)
    a_vec: str
    b_vec: str
    a_type: str  # element type of A: f16 bf16 fp8 bf8 i8 iu8 iu4
    b_type: str
    c_type: str  # f32 i32 f16 bf16
    m: int  # = n
    k: int  # dense K of the name
    kc: int | None  # compressed K (SMFMAC only)
    groups: int  # lane groups G (SMFMAC) / lane halves (WMMA)
    na: int  # stored A elements per lane
    nb: int  # B elements per lane
    index_bits: int | None  # width of one index set (SMFMAC)
    abid_max: int | None  # largest accepted ABID with CBSZ = 0
    targets: tuple

    @property
    def n(self):
        return self.m

    @property
    def wave(self):
        return 64 if self.family == "smfmac_cdna3" else 32

    @property
    def sparse(self):
        return self.family == "smfmac_cdna3"

    @property
    def integer(self):
        return self.c_type == "i32"

    @property
    def elem_bits(self):
        return {"f16": 16, "bf16": 16, "fp8": 8, "bf8": 8, "i8": 8, "iu8": 8, "iu4": 4}[self.a_type]

    @property
    def nc(self):  # accumulator elements per lane
        return self.m * self.n // self.wave

    @property
    def c_bits(self):  # 16 for the packed f16/bf16 accumulators
        return 16 if self.c_type in ("f16", "bf16") else 32


ROWS: dict[str, Row] = {}


def _add(*a, **kw):
    r = Row(*a, **kw)
    ROWS[r.name] = r


# ---- BUILTINS_MORE.md 1.1 (14 rows, table order). All (A, B, C, idx, cbsz, abid).
_SM_ARGS = ("a", "b", "c", "idx", "cbsz", "abid")
_SM_T = ("gfx942", "gfx950")
for _t, _av, _bv in (("f16", "v4 _Float16", "v8 _Float16"), ("bf16", "v4 short", "v8 short")):
    _add(f"smfmac_f32_16x16x32_{_t}", "smfmac_cdna3", _SM_ARGS, "v4f32", _av, _bv, _t, _t, "f32",
         16, 32, 16, 4, 4, 8, 8, 3, _SM_T)
    _add(f"smfmac_f32_32x32x16_{_t}", "smfmac_cdna3", _SM_ARGS, "v16f32", _av, _bv, _t, _t, "f32",
         32, 16, 8, 2, 4, 8, 8, 3, _SM_T)
_add("smfmac_i32_16x16x64_i8", "smfmac_cdna3", _SM_ARGS, "v4i32", "v2i32", "v4i32", "i8", "i8", "i32",
     16, 64, 32, 4, 8, 16, 16, 1, _SM_T)
_add("smfmac_i32_32x32x32_i8", "smfmac_cdna3", _SM_ARGS, "v16i32", "v2i32", "v4i32", "i8", "i8", "i32",
     32, 32, 16, 2, 8, 16, 16, 1, _SM_T)
for _fa in ("fp8", "bf8"):
    for _fb in ("fp8", "bf8"):
        _add(f"smfmac_f32_16x16x64_{_fa}_{_fb}", "smfmac_cdna3", _SM_ARGS, "v4f32", "v2i32", "v4i32",
             _fa, _fb, "f32", 16, 64, 32, 4, 8, 16, 16, 1, _SM_T)
for _fa in ("fp8", "bf8"):
    for _fb in ("fp8", "bf8"):
        _add(f"smfmac_f32_32x32x32_{_fa}_{_fb}", "smfmac_cdna3", _SM_ARGS, "v16f32", "v2i32", "v4i32",
             _fa, _fb, "f32", 32, 32, 16, 2, 8, 16, 16, 1, _SM_T)

# ---- BUILTINS_MORE.md 2.1 (11 rows, table order)
_W = ("a", "b", "c")
_WI = ("a_sign", "a", "b_sign", "b", "c", "clamp")
_G12 = ("gfx12",)
_add("wmma_f32_16x16x16_f16_w32_gfx12", "wmma_gfx12", _W, "v8f32", "v8 _Float16", "v8 _Float16",
     "f16", "f16", "f32", 16, 16, None, 2, 8, 8, None, None, _G12)
_add("wmma_f32_16x16x16_bf16_w32_gfx12", "wmma_gfx12", _W, "v8f32", "v8 short", "v8 short",
     "bf16", "bf16", "f32", 16, 16, None, 2, 8, 8, None, None, _G12)
_add("wmma_f16_16x16x16_f16_w32_gfx12", "wmma_gfx12", _W, "v8 _Float16", "v8 _Float16", "v8 _Float16",
     "f16", "f16", "f16", 16, 16, None, 2, 8, 8, None, None, _G12)
_add("wmma_bf16_16x16x16_bf16_w32_gfx12", "wmma_gfx12", _W, "v8 short", "v8 short", "v8 short",
     "bf16", "bf16", "bf16", 16, 16, None, 2, 8, 8, None, None, _G12)
_add("wmma_i32_16x16x16_iu8_w32_gfx12", "wmma_gfx12", _WI, "v8i32", "v2i32", "v2i32",
     "iu8", "iu8", "i32", 16, 16, None, 2, 8, 8, None, None, _G12)
_add("wmma_i32_16x16x16_iu4_w32_gfx12", "wmma_gfx12", _WI, "v8i32", "int", "int",
     "iu4", "iu4", "i32", 16, 16, None, 2, 8, 8, None, None, _G12)
_add("wmma_i32_16x16x32_iu4_w32_gfx12", "wmma_gfx12", _WI, "v8i32", "v2i32", "v2i32",
     "iu4", "iu4", "i32", 16, 32, None, 2, 16, 16, None, None, _G12)
for _fa in ("fp8", "bf8"):
    for _fb in ("fp8", "bf8"):
        _add(f"wmma_f32_16x16x16_{_fa}_{_fb}_w32_gfx12", "wmma_gfx12", _W, "v8f32", "v2i32", "v2i32",
             _fa, _fb, "f32", 16, 16, None, 2, 8, 8, None, None, _G12)

NAMES = list(ROWS)
SMFMAC = [n for n in NAMES if ROWS[n].sparse]
WMMA = [n for n in NAMES if not ROWS[n].sparse]


def vec_len(vec: str) -> int:
    """Element count of a HIP vector type string of the tables: 'v4f32' 4, 'v8 short' 8, 'int' 1."""
    if vec == "int":
        return 1
    digits = ""
    for ch in vec[1:]:
        if not ch.isdigit():
            break
        digits += ch
    return int(digits)


def vec_elem_bits(vec: str) -> int:
    """Bits of one entry of the HIP vector type: v2i32/v4i32/int/v8f32 -> 32, f16/short -> 16."""
    if vec == "int" or vec.endswith("32"):
        return 32
    return 16
