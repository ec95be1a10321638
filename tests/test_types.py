"""The element-type registry (jwmma.isa.types) against the specs: every type of the table is
registered once, with the widths, formats and integer ranges BUILTINS.md section 1 and
NUMERICS.md section 3 give (the oracle's own statement of them), and the register dtypes of
API.md section 1."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import jwmma
from jwmma.isa.types import TYPES, element_type
from oracles import formats as F
from oracles.reference import ELEM_BITS, TABLE
from oracles import mx as MX

#: the dense MFMA's formats, as the MX oracle states them (xf32: the 19-bit cut of float32)
MX_FMTS = {"fp6": MX.FP6_E2M3, "bf6": MX.BF6_E3M2, "fp4": MX.FP4_E2M1,
           "xf32": F.Fmt("xf32", 8, 10, 127, "ieee", np.float32)}

#: BUILTINS.md section 1 / 2.1 / 4.1: integer element ranges (iu: either signedness)
RANGES = {"iu8": (-128, 255), "i8": (-128, 127), "iu4": (-8, 15), "i32": (-(2**31), 2**31 - 1)}


def test_every_table_type_is_registered():
    used = {t for row in TABLE.values() for t in row[3:6]}
    used |= {"fp8_fnuz", "bf8_fnuz"}  # the gfx942 SMFMAC's fp8/bf8 (BUILTINS_MORE.md 1.1, tests/test_siblings.py)
    used |= {"xf32", "fp6", "bf6", "fp4"}  # the dense MFMA's (BUILTINS_DENSE.md; tests/test_mfma_dense.py)
    used |= {"f64"}  # the f64 MFMA's (BUILTINS_DENSE.md 11; tests/test_mfma_f64.py)
    assert used == set(TYPES)
    specs = list(jwmma.BUILTINS.values())
    specs += [jwmma.isa.table.lookup(s.name, None, (f, f)) for s in specs if s.scaled for f in range(5)]
    assert {getattr(s, f"{w}_type") for s in specs for w in "abc"} == set(TYPES)
    for spec in specs:
        for which in "abc":
            t = element_type(getattr(spec, f"{which}_type"))
            assert getattr(spec, which).elem_bits == t.bits


@pytest.mark.parametrize("name", sorted(TYPES))
def test_facts_agree_with_the_specs(name):
    t = element_type(name)
    if name in ELEM_BITS:
        assert t.bits == ELEM_BITS[name]
    if t.is_float and name in MX_FMTS:  # OCP MX formats and xf32: their own oracle (tests/oracles/mx.py)
        ref = MX_FMTS[name]
        fmt = t.format
        assert (fmt.ebits, fmt.mbits, fmt.bias, fmt.bits) == (ref.ebits, ref.mbits, ref.bias, ref.bits)
        assert fmt.nan == ref.nan and t.value_dtype() == np.dtype(ref.dtype)
    elif t.is_float:
        ref = F.F64 if name == "f64" else F.FMTS[name]
        fmt = t.format
        assert (fmt.ebits, fmt.mbits, fmt.bias, fmt.bits) == (ref.ebits, ref.mbits, ref.bias, ref.bits)
        assert fmt.qnan == F.qnan(ref) and fmt.dtype == np.dtype(ref.dtype)
        assert t.value_dtype() == np.dtype(ref.dtype)
    else:
        assert t.range == RANGES[name]
        assert t.int_format(True).signed and t.int_format(True).lo == RANGES[name][0]
        if name.startswith("iu"):
            assert not t.int_format(False).signed and t.int_format(False).hi == RANGES[name][1]
    assert t.accumulator == (name in ("f32", "f16", "bf16", "i32", "f64"))


def test_register_dtypes_follow_api_md():
    """RDNA4 bf16 is `short` (int16, bfloat16 also accepted); CDNA4 __bf16 is bfloat16
    (int16/uint16 also accepted); 8/4-bit data are int32 words."""
    r4 = jwmma.BUILTINS["swmmac_f32_16x16x32_bf16_w32"].a.storage
    c4 = jwmma.BUILTINS["smfmac_f32_16x16x64_bf16"].a.storage
    assert r4.dtype == np.int16 and r4.accepts(ml_dtypes.bfloat16) and r4.hip == "short"
    assert c4.dtype == ml_dtypes.bfloat16 and c4.accepts(np.int16) and c4.accepts(np.uint16) and c4.hip == "bf16"
    packed = jwmma.BUILTINS["smfmac_f32_16x16x128_fp8_fp8"].a.storage
    assert packed.dtype == np.int32 and packed.accepts(np.uint32) and not packed.accepts(np.float32)
    assert not jwmma.BUILTINS["swmmac_f32_16x16x32_f16_w32"].a.storage.accepts(np.int16)
    with pytest.raises(ValueError, match="unknown element type"):
        element_type("fp5")
    long = jwmma.BUILTINS["mfma_i32_16x16x32_i8"].a  # a 64-bit `long`: two int32 words
    assert long.n == 2 and long.storage.hip == "long" and long.storage.dtype == np.int32
    double = jwmma.BUILTINS["mfma_f64_16x16x4f64"].c  # v4double: two uint32 words a double, low word first
    assert double.n == 8 and double.storage.hip == "double" and double.dtype == np.uint32
    assert double.storage.accepts(np.int32) and not double.storage.accepts(np.float64)
    scaled = jwmma.BUILTINS["mfma_scale_f32_16x16x128_f8f6f4"].a  # v8i32 whatever the format
    assert scaled.n == 8 and scaled.dtype == np.int32
