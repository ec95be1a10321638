"""The transcribed table (BUILTINS_MORE.md 1.1 and 2.1) is self-consistent and matches the
counting rules of 1.2 / 2.2 and the issue's list of names."""
import re

import pytest

from oracles.sib_table import NAMES, ROWS, SMFMAC, WMMA, vec_elem_bits, vec_len

ISSUE_13_SMFMAC = ["smfmac_f32_16x16x32_f16", "smfmac_f32_32x32x16_f16", "smfmac_f32_16x16x32_bf16",
                   "smfmac_f32_32x32x16_bf16", "smfmac_i32_16x16x64_i8", "smfmac_i32_32x32x32_i8"] + [
    f"smfmac_f32_{s}_{a}_{b}" for s in ("16x16x64", "32x32x32") for a in ("fp8", "bf8") for b in ("fp8", "bf8")]


def test_counts_and_names():
    assert len(NAMES) == 25 and len(SMFMAC) == 14 and len(WMMA) == 11
    assert sorted(SMFMAC) == sorted(ISSUE_13_SMFMAC)
    assert all(n.startswith("wmma_") and n.endswith("_w32_gfx12") for n in WMMA)


@pytest.mark.parametrize("name", NAMES)
def test_name_encodes_shape_and_types(name):
    r = ROWS[name]
    m = re.search(r"_(\d+)x(\d+)x(\d+)_", name)
    assert (int(m[1]), int(m[2]), int(m[3])) == (r.m, r.n, r.k)  # K of the name is the dense K
    assert name.split("_")[1] == r.c_type
    if r.a_type in ("fp8", "bf8"):  # `fp8_bf8` = A fp8, B bf8
        assert f"_{r.a_type}_{r.b_type}" in name


@pytest.mark.parametrize("name", SMFMAC)
def test_smfmac_row(name):
    r = ROWS[name]
    w = r.elem_bits
    assert r.args == ("a", "b", "c", "idx", "cbsz", "abid")
    assert r.targets == ("gfx942", "gfx950")
    assert r.kc == r.k // 2
    assert r.groups == 64 // r.m  # G = 64 // M
    assert (r.na, r.nb) == (64 // w, 128 // w)  # 1.2: nA = 64//w, nB = 128//w
    assert r.m * r.kc == 64 * r.na and r.k * r.n == 64 * r.nb  # every element held once
    assert r.index_bits == 2 * r.na  # "it is 2*nA bits wide"
    assert r.abid_max == 32 // r.index_bits - 1
    # vector widths: A/B vectors hold exactly the stored elements; D holds M*N/64 f32/i32
    for vec, n in ((r.a_vec, r.na), (r.b_vec, r.nb)):
        assert vec_len(vec) * vec_elem_bits(vec) == n * w
    assert vec_len(r.d_vec) == r.nc == r.m * r.n // 64 and vec_elem_bits(r.d_vec) == 32
    assert r.a_type == r.b_type or r.a_type in ("fp8", "bf8")
    assert (r.c_type == "i32") == (r.a_type == "i8")


@pytest.mark.parametrize("name", WMMA)
def test_wmma_row(name):
    r = ROWS[name]
    w = r.elem_bits
    assert r.args == (("a_sign", "a", "b_sign", "b", "c", "clamp") if r.integer else ("a", "b", "c"))
    assert r.kc is None and r.index_bits is None and r.targets == ("gfx12",)
    assert r.na == r.nb == r.k // 2  # "nA = K//2 elements per lane for A and for B"
    assert 16 * r.k == 32 * r.na
    for vec in (r.a_vec, r.b_vec):
        assert vec_len(vec) * vec_elem_bits(vec) == r.na * w
    assert vec_len(r.d_vec) == 8  # 8 accumulator elements per lane, packed or not
    assert vec_elem_bits(r.d_vec) == r.c_bits
    if r.c_type in ("f16", "bf16"):
        assert r.a_type == r.c_type and r.c_bits == 16
    # the iu4 K16 operand is a plain int (one VGPR of 8 nibbles)
    assert (r.a_vec == "int") == (name == "wmma_i32_16x16x16_iu4_w32_gfx12")
