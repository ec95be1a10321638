"""Real NVIDIA hardware captures reproduced bit for bit through jwmma.dot (issue #14 item 3).

Data: shared/data/nvidia_captures (README there; MATLAB-tensor-core b12b5a7, BSD-2): 5000 dot
products per GPU and input format. The H100 fp8 files ran wgmma with C = 0; the others used the
``c`` array. Skipped when the folder is absent (set NVIDIA_CAPTURES to its path).

The d_fp16 arrays are damaged: the upstream text holds the f32 bit strings of the f16 results
and the conversion kept bits 15:0 of them, so only the 3 low mantissa bits of each f16 result
survive (bits 15:13 of its f32 code). `test_f16_output_low_bits` checks those 3 bits and that the
damage is still there (if the data gets re-converted it fails, and should then compare whole
f16 codes).
"""
import os
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import jwmma
from jwmma.models import FusedDotAdd

_HERE = Path(__file__).resolve().parent
# the captures travel with the tests (tests/data/nvidia_captures: a copy of
# shared/data/nvidia_captures with its BSD-2 LICENCE), so a clean clone runs them
_CANDIDATES = [os.environ.get("NVIDIA_CAPTURES", ""), _HERE / "data/nvidia_captures"]
DATA = next((Path(p) for p in _CANDIDATES if p and Path(p, "README.md").exists()), None)
DT = {"E4M3": ml_dtypes.float8_e4m3fn, "E5M2": ml_dtypes.float8_e5m2, "fp16": np.float16, "bf16": ml_dtypes.bfloat16}


def load(name):
    if DATA is None:
        pytest.fail("tests/data/nvidia_captures is missing (or set NVIDIA_CAPTURES to a copy)")
    z = np.load(DATA / f"{name}.npz")
    f = str(z["fmt"])
    a = z["a"].view(np.float32).astype(DT[f])
    b = z["b"].view(np.float32).astype(DT[f])
    # every input is exactly representable in its format (the README's promise)
    assert (a.astype(np.float32).view(np.uint32) == z["a"]).all() and (b.astype(np.float32).view(np.uint32) == z["b"]).all()
    return z, a, b, z["c"].view(np.float32)


def agree(model, name, c_zero=False):
    z, a, b, c = load(name)
    if c_zero:  # the H100 fp8 captures ran wgmma with a zero accumulator (README)
        c = np.zeros_like(c)
    d = np.asarray(jwmma.dot(a, b, c, model=model)).view(np.uint32)
    return int((d == z["d_fp32"]).sum())


@pytest.mark.parametrize("name,preset,c_zero", [
    ("H100_E4M3", "nvidia_hopper", True), ("H100_E5M2", "nvidia_hopper", True),
    ("H100_fp16", "nvidia_hopper", False), ("H100_bf16", "nvidia_hopper", False),
    ("B200_fp16", "nvidia_blackwell", False), ("B200_fp16", "nvidia_b200_measured", False),
    ("B200_E4M3", "nvidia_b200_measured", False),
])
def test_capture_reproduced(name, preset, c_zero):
    assert agree(preset, name, c_zero) == 5000


def test_b200_fp8_is_not_mmasim_tcgen05():
    """MMA-Sim's tcgen05 parameters (F=25, toward zero, C with the products, 32 products) miss
    the B200 E4M3 capture; its best single change (round to nearest: the issue's 4754) too.
    Keeping C out of the truncation, with one RNE, fixes every case (nvidia_b200_measured);
    with the rounding toward zero it does not."""
    assert agree("nvidia_blackwell", "B200_E4M3") == 3207
    assert agree(FusedDotAdd(group=32, frac_bits=25, output_rounding="nearest"), "B200_E4M3") == 4754
    assert agree(FusedDotAdd(group=32, frac_bits=25, c_alignment="after", output_rounding="toward_zero"), "B200_E4M3") < 5000
    assert agree(FusedDotAdd(group=32, frac_bits=25, c_alignment="after", output_rounding="nearest"), "B200_E4M3") == 5000


def f16_low3(h_bits):
    """Bits 15:13 of the f32 encoding of f16 values = the 3 low mantissa bits of a normal f16."""
    f = h_bits.astype(np.uint16).view(np.float16).astype(np.float32).view(np.uint32)
    return (f >> 13) & 7


@pytest.mark.parametrize("name,preset", [("H100_fp16", "nvidia_hopper"), ("B200_fp16", "nvidia_blackwell")])
def test_f16_output_low_bits(name, preset):
    """f16 inputs with an f16 accumulator, C = RN_f16(c) as the capture code used: the preset
    matches the 3 surviving bits on all 5000 (a wrong model matches about 1 in 8)."""
    z, a, b, c = load(name)
    assert (z["d_fp16"] & 0x1FFF == 0).all()  # the damage: if this fails, the data was fixed
    d = np.asarray(jwmma.dot(a, b, c.astype(np.float16), model=preset)).view(np.uint16)
    assert int((f16_low3(d) == (z["d_fp16"] >> 13)).sum()) == 5000
