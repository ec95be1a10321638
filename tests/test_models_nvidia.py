"""FusedDotAdd and the NVIDIA presets (issue #14): against the slow fractions oracle
(tests/oracles/fdpa.py) on random and adversarial operands for every design the presets use and
variants, the zero exponent pinned by hand-made rows, E8M13, validation messages, and the
presets as ``model=`` of AMD builtins, of jwmma.gemm and as model text."""
import ml_dtypes
import numpy as np
import pytest

import jwmma
from jwmma.models import Context, FusedDotAdd, NvidiaTensorCore
from jwmma.numerics.formats import F16, F32, FLOAT_FORMATS
from nvidia_gen import accumulators, from_codes, operands, zero_exponent_rows
from oracles.fdpa import fdpa_dot

PRESETS = {f"nvidia_{a}": NvidiaTensorCore(a) for a in ("ampere", "ada", "hopper", "blackwell", "b200_measured")}
F8 = ml_dtypes.float8_e4m3fn

# (a format, b format, c format, model): each design the presets resolve to, plus variants
CASES = [
    ("f16", "f16", "f32", FusedDotAdd(group=8, frac_bits=24, zero_exponent=-132)),             # ampere/ada
    ("bf16", "bf16", "f32", FusedDotAdd(group=16, frac_bits=25)),                               # hopper/blackwell
    ("f16", "f16", "f16", FusedDotAdd(group=16, frac_bits=25, zero_exponent=-21, output_rounding="nearest")),
    ("e4m3", "e5m2", "f32", FusedDotAdd(group=32, frac_bits=13, output_frac_bits=13)),          # hopper fp8
    ("e5m2", "e5m2", "f16", FusedDotAdd(group=32, frac_bits=13, zero_exponent=-21, output_rounding="nearest")),
    ("e4m3", "e4m3", "f32", FusedDotAdd(group=32, frac_bits=25)),                               # blackwell fp8
    ("e4m3", "e4m3", "f32", FusedDotAdd(group=32, frac_bits=25, c_alignment="after", output_rounding="nearest")),
    ("bf16", "bf16", "f32", FusedDotAdd(group=16, frac_bits=25, c_alignment="after", output_rounding="nearest")),
    ("f16", "f16", "f32", FusedDotAdd(group=None, frac_bits=12, zero_exponent=None, output_rounding="nearest", output_frac_bits=9)),
    ("e4m3fnuz", "e5m2fnuz", "f32", FusedDotAdd(group=16, frac_bits=13, output_frac_bits=13)),
]
ORACLE_NAMES = {"e4m3": "e4m3", "e5m2": "e5m2", "f16": "f16", "bf16": "bf16", "f32": "f32",
                "e4m3fnuz": "e4m3fnuz", "e5m2fnuz": "e5m2fnuz"}


def run_model(model, a, b, c, fa, fb, fc):
    d = jwmma.dot(from_codes(a, fa), from_codes(b, fb), from_codes(c, fc), model=model)
    width = np.uint32 if fc == "f32" else np.uint16
    return np.asarray(d).view(width).astype(np.int64)


# the first five (the presets' own designs) by default, the variants with -m slow
@pytest.mark.parametrize("fa,fb,fc,model", [pytest.param(*c, marks=() if i < 5 else pytest.mark.slow)
                                            for i, c in enumerate(CASES)],
                         ids=[f"{c[0]}x{c[1]}->{c[2]}-{i}" for i, c in enumerate(CASES)])
def test_against_oracle(fa, fb, fc, model):
    rng = np.random.default_rng(sum(map(ord, f"{fa}{fb}{fc}{model!r}")))
    n, k = 160, 40  # 40 = groups of 32 + 8 / 16 + 16 + 8 / 8 x 5: partial groups included
    a, b, c = operands(rng, fa, n, k), operands(rng, fb, n, k), accumulators(rng, fc, n)
    got = run_model(model, a, b, c, fa, fb, fc)
    want = [fdpa_dot(list(a[i]), list(b[i]), int(c[i]), fa, fb, fc, model.group, model.frac_bits,
                     model.c_alignment, model.zero_exponent, model.output_rounding, model.output_frac_bits)
            for i in range(n)]
    bad = np.nonzero(got != np.array(want))[0]
    assert bad.size == 0, f"{bad.size} of {n} differ, first row {bad[0]}: got {got[bad[0]]:#x}, want {want[bad[0]]:#x}"


def test_e8m13_truncation_and_subnormal_grid():
    # one product 1.75 * (1 + 2**-3) = 1.96875 plus C = 2**-20: E8M13 keeps 13 fraction bits
    a = np.array([[1.75]], np.float32).astype(F8)
    b = np.array([[1.125]]).astype(a.dtype)
    d = jwmma.dot(a, b, np.array([2.0 ** -20], np.float32), model=PRESETS["nvidia_hopper"])
    assert float(np.asarray(d)[0]) == 1.96875  # 2**-20 lies below the E8M13 (and F=13) grid
    # the tiniest result: 2**-9 * 2**-9 * ... stays exact; a subnormal f32 result on the 2**-139 grid
    m = FusedDotAdd(group=32, frac_bits=13, output_frac_bits=13)
    c = np.array([np.float32(2.0 ** -127 + 2.0 ** -140)], np.float32)
    z = np.zeros((1, 1), a.dtype)
    out = np.asarray(jwmma.dot(z, z, c, model=m)).view(np.uint32)[0]
    assert out == np.float32(2.0 ** -127).view(np.uint32)  # 2**-140 truncated off the 2**-139 grid


def test_validation_messages():
    with pytest.raises(ValueError, match="c_alignment"):
        FusedDotAdd(c_alignment="before")
    with pytest.raises(ValueError, match="frac_bits"):
        FusedDotAdd(frac_bits=0)
    with pytest.raises(ValueError, match="output_rounding"):
        FusedDotAdd(output_rounding="up")
    x = np.ones((1, 4), ml_dtypes.bfloat16)
    with pytest.raises(ValueError, match="no bf16 accumulator"):
        jwmma.dot(x, x, np.zeros(1, ml_dtypes.bfloat16), model=PRESETS["nvidia_hopper"])
    y = np.ones((1, 4), ml_dtypes.float8_e4m3fn)
    with pytest.raises(ValueError, match="no 8-bit"):
        jwmma.dot(y, y, np.zeros(1, np.float32), model=PRESETS["nvidia_ampere"])


# ---- the zero exponent: a zero product takes part in the group maximum (MMA-Sim e_zero)
DESIGNS = [("ampere", "bf16"), ("ampere", "f16"), ("hopper", "bf16"), ("hopper", "f16"), ("blackwell", "f16")]


@pytest.mark.parametrize("arch,fmt", DESIGNS)
def test_zero_product_sets_group_maximum(arch, fmt):
    fa = FLOAT_FORMATS[fmt]
    fc = F32 if fmt == "bf16" else F16
    model = PRESETS[f"nvidia_{arch}"]
    d = model.resolved(Context(fa, fa, fc))
    a, b, c, want = zero_exponent_rows(fmt, d.zero_exponent, d.frac_bits)
    width = np.uint32 if fc.bits == 32 else np.uint16
    got = np.asarray(jwmma.dot(a, b, c, model=model)).view(width).astype(int).tolist()
    assert got == want
    # and the oracle agrees; without the zero's exponent the pins survive
    codes = lambda x: x.view(np.uint16).astype(int)
    fo = {"bf16": "bf16", "f16": "f16"}[fmt]
    for i in range(2):
        o = fdpa_dot(list(codes(a[i])), list(codes(b[i])), 0, fo, fo, fc.name, d.group, d.frac_bits,
                     "with_products", d.zero_exponent, d.output_rounding, d.output_frac_bits)
        assert o == want[i]
    none = np.asarray(jwmma.dot(a, b, c, model=FusedDotAdd(**{**d.__dict__, "zero_exponent": None}))).view(width)
    assert none.astype(int).tolist() == ([0x1, 0x1] if fmt == "bf16" else [0x1, 0x1])


# ---- the presets as model= of AMD builtins and of jwmma.gemm


@pytest.mark.parametrize("preset", ["nvidia_hopper", pytest.param("nvidia_b200_measured", marks=pytest.mark.slow)])
def test_builtin_equals_dot_on_compressed_products(preset):
    name = "smfmac_f32_16x16x128_fp8_fp8"
    spec = jwmma.BUILTINS[name]
    rng = np.random.default_rng(3)
    A = (rng.standard_normal((16, spec.kc)) * 4).astype(F8)
    B = (rng.standard_normal((spec.k, 16)) * 4).astype(F8)
    pos = np.tile(np.array([0, 2] * (spec.kc // 2)), (16, 1)).astype(np.int32)
    C = (rng.standard_normal((16, 16)) * 100).astype(np.float32)
    args = (jwmma.pack_a(name, A), jwmma.pack_b(name, B), jwmma.pack_c(name, C), jwmma.pack_index(name, pos))
    ks = 4 * (np.arange(spec.kc) // 2) + pos[0]
    d = np.asarray(jwmma.unpack_c(name, jwmma.smfmac_f32_16x16x128_fp8_fp8(*args, model=PRESETS[preset])))
    ref = np.asarray(jwmma.dot(np.repeat(A[:, None, :], 16, 1), B[ks].T[None], C, model=PRESETS[preset]))
    assert (d.view(np.uint32) == ref.view(np.uint32)).all(), preset


def test_gemm_with_hopper_accumulator():
    rng = np.random.default_rng(4)
    a = (rng.standard_normal((32, 256)) * 2).astype(F8)
    a = np.where((np.arange(256) % 4 < 2)[None], a, F8(0)).astype(F8)  # 2:4 sparse
    b = (rng.standard_normal((256, 16)) * 2).astype(F8)
    d = np.asarray(jwmma.gemm(a, b, builtin="smfmac_f32_16x16x128_fp8_fp8", model=PRESETS["nvidia_hopper"]))
    exact = a.astype(np.float64) @ b.astype(np.float64)
    # E8M13 toward zero per group of 32 products: relative error bounded by a few 2**-13
    err = np.abs(d - exact) / np.maximum(np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)), 1e-30)
    assert err.max() < 8 * 2.0 ** -13 and err.max() > 2.0 ** -20  # truncation visible, bounded
    # E8M13 outputs: the low 10 mantissa bits are zero
    assert ((d.view(np.uint32) & 0x3FF) == 0).all()


def test_bf16_accumulator_refused():
    name = "swmmac_bf16_16x16x32_bf16_w32"
    spec = jwmma.BUILTINS[name]
    z = np.zeros((16, spec.kc), ml_dtypes.bfloat16)
    args = (jwmma.pack_a(name, z), jwmma.pack_b(name, np.zeros((spec.k, 16), ml_dtypes.bfloat16)),
            jwmma.pack_c(name, np.zeros((16, 16), ml_dtypes.bfloat16)),
            jwmma.pack_index(name, np.tile(np.arange(spec.kc) % 2, (16, 1)).astype(np.int32)))
    with pytest.raises(ValueError, match="no bf16 accumulator"):
        jwmma.swmmac_bf16_16x16x32_bf16_w32(*args, model=PRESETS["nvidia_hopper"])


def test_presets_by_name_and_text():
    x = np.ones((2, 40), F8)
    c = np.zeros(2, np.float32)
    by_name = np.asarray(jwmma.dot(x, x, c, model="nvidia_hopper"))
    by_text = np.asarray(jwmma.dot(x, x, c, model='NvidiaTensorCore(arch="hopper")'))
    by_fields = np.asarray(jwmma.dot(x, x, c, model="FusedDotAdd(group=32, frac_bits=13, output_frac_bits=13)"))
    assert (by_name == by_text).all() and (by_name == by_fields).all() and float(by_name[0]) == 40.0
    m = FusedDotAdd(group=32, frac_bits=25, c_alignment="after", output_rounding="nearest")
    assert jwmma.models.parse_model(jwmma.models.model_label(m)) == m
    assert jwmma.models.resolve("nvidia_blackwell", Context(FLOAT_FORMATS["fp8"], FLOAT_FORMATS["fp8"], F32), "exact") == NvidiaTensorCore("blackwell")
    with pytest.raises(ValueError, match="arch must be one of"):
        NvidiaTensorCore("volta")


def test_jwmma_models_command(capsys):
    """``jwmma models`` lists every preset with its parameters and evidence; the NVIDIA ones
    with their design per operand width and accumulator, as model texts that parse back."""
    from jwmma.cli import main
    import json
    assert main(["models", "--json"]) == 0
    recs = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(recs) == set(jwmma.models.PRESETS)
    hop = recs["nvidia_hopper"]
    assert "H100" in hop["evidence"] and "5000/5000" in hop["evidence"]
    assert jwmma.models.parse_model(hop["designs"]["8-bit -> f32"]) == FusedDotAdd(group=32, frac_bits=13, output_frac_bits=13)
    assert "no model reproduces" in recs["nvidia_b200_measured"]["designs"]["8-bit -> f16"]
    assert jwmma.models.parse_model(recs["fma_chain"]["float_model"]) == jwmma.models.PRESETS["fma_chain"][0]
    assert main(["models", "fma_chain_k"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("fma_chain_k") and "nvidia" not in out
