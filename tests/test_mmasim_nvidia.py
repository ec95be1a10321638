"""Bit-identity with MMA-Sim 2.1.1's NVIDIA tables (mmasim.nv_ptx: MMA, WGMMA, TCGen05MMA, which
instantiate MMA_T_FDPA): every preset x input format x accumulator that MMA-Sim models, on
random and adversarial vectors longer than one group (NaN bits included: both write
0x7FFFFFFF / 0x7FFF), and the hand-made zero-exponent rows. Skipped without torch/mmasim
(run it with a python that has both, e.g.
``PYTHONPATH=$PWD $JWMMA_MMASIM_PYTHON -m pytest tests/test_mmasim_nvidia.py``; tests/README.md)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
nv = pytest.importorskip("mmasim.nv_ptx")

import jwmma
from jwmma.models import Context, NvidiaTensorCore
from jwmma.numerics.formats import FLOAT_FORMATS
from nvidia_gen import accumulators, from_codes, near_zero_exponent, operands, zero_exponent_rows

PRESETS = {f"nvidia_{a}": NvidiaTensorCore(a) for a in ("ampere", "ada", "hopper", "blackwell")}

TORCH = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "f16": torch.float16, "bf16": torch.bfloat16}
PTX = {"e4m3": "e4m3", "e5m2": "e5m2", "f16": "f16", "bf16": "bf16"}


def mmasim_op(arch, fa, fb, fc):
    """MMA-Sim's instruction object for arch/formats (its own tables pick F, L_max, e_zero, rho)."""
    d = {"f32": "f32", "f16": "f16"}[fc]
    if arch in ("ampere", "ada"):
        name = {"ampere": "Ampere", "ada": "Ada Lovelace"}[arch]
        if fa in ("e4m3", "e5m2"):
            return nv.MMA(name, f"m16n8k32.{d}.{PTX[fa]}.{PTX[fb]}.{d}")
        return nv.MMA(name, f"m16n8k16.{d}.{fa}.{fb}.{d}")
    if arch == "hopper":
        k = 32 if fa in ("e4m3", "e5m2") else 16
        return nv.WGMMA("Hopper", f"m64n8k{k}.{d}.{PTX[fa]}.{PTX[fb]}")
    kind, k = ("f8f6f4", 32) if fa in ("e4m3", "e5m2") else ("f16", 16)
    return nv.TCGen05MMA("Blackwell", f"m64n8k{k}.kind::{kind}.{d}.{PTX[fa]}.{PTX[fb]}")


# what MMA-Sim's tables accept: Ampere mma f16 out only for f16 inputs; no fp8 before Ada;
# Hopper/Blackwell f16 out for f16 and fp8 inputs (not bf16)
COMBOS = [
    ("ampere", "f16", "f16", "f32"), ("ampere", "bf16", "bf16", "f32"), ("ampere", "f16", "f16", "f16"),
    ("ada", "bf16", "bf16", "f32"), ("ada", "e4m3", "e5m2", "f32"), ("ada", "e5m2", "e5m2", "f16"),
    ("hopper", "f16", "f16", "f32"), ("hopper", "bf16", "bf16", "f32"), ("hopper", "f16", "f16", "f16"),
    ("hopper", "e4m3", "e4m3", "f32"), ("hopper", "e5m2", "e4m3", "f32"), ("hopper", "e4m3", "e4m3", "f16"),
    ("blackwell", "f16", "f16", "f32"), ("blackwell", "bf16", "bf16", "f32"), ("blackwell", "f16", "f16", "f16"),
    ("blackwell", "e4m3", "e4m3", "f32"), ("blackwell", "e5m2", "e5m2", "f32"), ("blackwell", "e4m3", "e5m2", "f16"),
]


def mmasim_bits(op, a, b, c, fa, fb, fc):
    ta = torch.from_numpy(from_codes(a, fa).astype(np.float32)).to(TORCH[fa])
    tb = torch.from_numpy(from_codes(b, fb).astype(np.float32)).to(TORCH[fb])
    cf = from_codes(c, fc)
    tc = torch.from_numpy(cf.view(np.int32 if fc == "f32" else np.int16).copy()).view(torch.float32 if fc == "f32" else torch.float16)
    d = op.dpa(ta, tb, tc)
    return d.view(torch.int32 if fc == "f32" else torch.int16).numpy().astype(np.int64) & (0xFFFFFFFF if fc == "f32" else 0xFFFF)


def jwmma_bits(model, a, b, c, fa, fb, fc):
    d = jwmma.dot(from_codes(a, fa), from_codes(b, fb), from_codes(c, fc), model=model)
    return np.asarray(d).view(np.uint32 if fc == "f32" else np.uint16).astype(np.int64)


@pytest.mark.parametrize("arch,fa,fb,fc", COMBOS, ids=["-".join(c) for c in COMBOS])
def test_bit_identical_to_mmasim(arch, fa, fb, fc):
    op = mmasim_op(arch, fa, fb, fc)
    model = PRESETS[f"nvidia_{arch}"]
    rng = np.random.default_rng(sum(map(ord, arch + fa + fb + fc)))
    n, k = 400, 2 * op.arithmetic_op.L_max + op.arithmetic_op.L_max // 2  # 2.5 groups
    a, b, c = operands(rng, fa, n, k), operands(rng, fb, n, k), accumulators(rng, fc, n)
    za, zb, zc = near_zero_exponent(rng, fa, fb, fc, n // 2, k, op.arithmetic_op.e_zero)
    a, b, c = np.concatenate([a, za]), np.concatenate([b, zb]), np.concatenate([c, zc])
    n = len(c)
    want = mmasim_bits(op, a, b, c, fa, fb, fc)
    got = jwmma_bits(model, a, b, c, fa, fb, fc)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, f"{bad.size}/{n} differ; row {bad[0]}: jwmma {got[bad[0]]:#x}, MMA-Sim {want[bad[0]]:#x}"
    # the preset resolves to exactly MMA-Sim's parameters
    d = model.resolved(Context(*(FLOAT_FORMATS[{"e4m3": "fp8", "e5m2": "bf8"}.get(x, x)] for x in (fa, fb, fc))))
    p = op.arithmetic_op
    assert (d.frac_bits, d.group, d.zero_exponent) == (p.F, p.L_max, p.e_zero)


@pytest.mark.parametrize("arch,fmt", [("ampere", "bf16"), ("ampere", "f16"), ("hopper", "bf16"), ("hopper", "f16"), ("blackwell", "bf16"), ("blackwell", "f16")])
def test_zero_exponent_rows_match_mmasim(arch, fmt):
    """The hand-made rows that pin e_zero give the same bits in MMA-Sim (so the tables' e_zero
    values are exercised, which random data almost never does)."""
    fc = "f32" if fmt == "bf16" else "f16"
    op = mmasim_op(arch, fmt, fmt, fc)
    a, b, c, want = zero_exponent_rows(fmt, op.arithmetic_op.e_zero, op.arithmetic_op.F)
    ta = torch.from_numpy(a.astype(np.float32)).to(TORCH[fmt])
    tb = torch.from_numpy(b.astype(np.float32)).to(TORCH[fmt])
    d = op.dpa(ta, tb, torch.from_numpy(c))
    got = (d.view(torch.int32 if fc == "f32" else torch.int16).numpy().astype(np.int64) & 0xFFFFFFFF).tolist()
    assert got == want
    assert jwmma_bits(PRESETS[f"nvidia_{arch}"], np.asarray(a).view(np.uint16).astype(np.int64),
                      np.asarray(b).view(np.uint16).astype(np.int64),
                      np.asarray(c).view(np.uint32 if fc == "f32" else np.uint16).astype(np.int64), fmt, fmt, fc).tolist() == want
