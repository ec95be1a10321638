"""Differential test: the CDNA3 dense MFMA builtins (default model ``cdna3``) against MMA-Sim
2.x's own CDNA3 MFMA simulator (``mmasim.amd.sim.MFMA("CDNA3", suffix)``), registers in and
registers out (docs/spec/BUILTINS_DENSE.md 6, NUMERICS.md 9.1).

Data: random values, and adversarial ones (every code of the 8-bit formats; f16/bf16/f32 with
subnormals, the largest values, exact cancellations, NaN/Inf; C with subnormals, -0, Inf, NaN).
Compared: f32 bits, NaN by NaN-ness (MMA-Sim gives torch's NaN payloads). One known, intended
difference is excluded and counted, as in tests/test_mmasim_diff.py: on the fp8 path an Inf/NaN
accumulator far below the next group's products disappears in MMA-Sim's C-drop rule (``gtr_fdpa``
reads a non-finite C's exponent with frexp, -1), whether it is the input C or the result of an
earlier group of 16 that held a NaN/Inf product; jwmma decides special values first, so it
returns the NaN/Inf. The module is skipped without torch and mmasim (``pip install mmasim``; ``pip install
torch==2.13.0`` takes the CPU build); the project never needs them at run time.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
sim = pytest.importorskip("mmasim.amd.sim")

import ml_dtypes  # noqa: E402

import jwmma  # noqa: E402

#: jwmma row -> MMA-Sim's CDNA3 suffix
ROWS = {
    "mfma_f32_32x32x2f32": "f32_32x32x2_f32", "mfma_f32_16x16x4f32": "f32_16x16x4_f32",
    "mfma_f32_32x32x4_xf32": "f32_32x32x4_xf32", "mfma_f32_16x16x8_xf32": "f32_16x16x8_xf32",
    "mfma_f32_32x32x8f16": "f32_32x32x8_f16", "mfma_f32_16x16x16f16": "f32_16x16x16_f16",
    "mfma_f32_32x32x8bf16_1k": "f32_32x32x8_bf16", "mfma_f32_16x16x16bf16_1k": "f32_16x16x16_bf16",
    **{f"mfma_f32_{mk}_{fa}_{fb}": f"f32_{mk}_{fa}_{fb}" for mk in ("32x32x16", "16x16x32")
       for fa in ("fp8", "bf8") for fb in ("fp8", "bf8")},
}
TORCH = {np.dtype(np.float32): torch.float32, np.dtype(np.float16): torch.float16,
         np.dtype(ml_dtypes.bfloat16): torch.bfloat16, np.dtype(ml_dtypes.float8_e4m3fnuz): torch.float8_e4m3fnuz,
         np.dtype(ml_dtypes.float8_e5m2fnuz): torch.float8_e5m2fnuz}
UINT = {4: np.uint32, 2: np.uint16, 1: np.uint8}


def _to_torch(x):
    x = np.ascontiguousarray(x)
    u = x.view(UINT[x.itemsize])
    wide = {4: torch.int32, 2: torch.int16, 1: torch.uint8}[x.itemsize]
    t = torch.from_numpy(u.astype({4: np.int32, 2: np.int16, 1: np.uint8}[x.itemsize]))
    return t.view(TORCH[x.dtype]) if wide != TORCH[x.dtype] else t


def _operand(rng, dtype, shape, adversarial):
    dtype = np.dtype(dtype)
    u = UINT[dtype.itemsize]
    if not adversarial:
        x = rng.standard_normal(shape) * 2.0 ** rng.integers(-6, 7, shape)
        return np.asarray(jwmma.numerics.cast(x, dtype))
    if dtype.itemsize == 1:  # every code
        return rng.integers(0, 256, shape).astype(np.uint8).view(dtype)
    x = np.asarray(jwmma.numerics.cast(rng.standard_normal(shape) * 2.0 ** rng.integers(-20, 21, shape), dtype))
    bits = x.view(u).copy()
    pick = rng.random(shape)
    info = ml_dtypes.finfo(dtype) if dtype != np.float32 else np.finfo(np.float32)
    mant = int(info.nmant)
    bits[pick < 0.08] = rng.integers(1, 1 << mant, int((pick < 0.08).sum())).astype(u)  # subnormals
    big = np.array(info.max, dtype).view(u)
    bits[(pick >= 0.08) & (pick < 0.12)] = big  # the largest value
    inf = np.array(np.inf, dtype).view(u)
    bits[(pick >= 0.12) & (pick < 0.13)] = inf
    bits[(pick >= 0.13) & (pick < 0.135)] = np.array(np.nan, dtype).view(u)
    sign = (rng.random(shape) < 0.5).astype(u) << (8 * dtype.itemsize - 1)
    return (bits | sign).view(dtype)


def _c(rng, m, n, adversarial):
    c = (rng.standard_normal((m, n)) * 4).astype(np.float32)
    if adversarial:
        bits = c.view(np.uint32)
        pick = rng.random((m, n))
        bits[pick < 0.05] = rng.integers(1, 1 << 23, int((pick < 0.05).sum())).astype(np.uint32)
        bits[(pick >= 0.05) & (pick < 0.08)] = 0x80000000
        bits[(pick >= 0.08) & (pick < 0.09)] = 0x7F800000
        bits[(pick >= 0.09) & (pick < 0.095)] = 0x7FC00000
    return c


@pytest.mark.parametrize("name", sorted(ROWS))
@pytest.mark.parametrize("adversarial", [False, True])
def test_builtin_equals_mmasim(rng, name, adversarial):
    spec = jwmma.BUILTINS[name]
    mfma = sim.MFMA("CDNA3", ROWS[name])
    dta, dtb = spec.a_format.dtype, spec.b_format.dtype
    a = _operand(rng, dta, (spec.m, spec.k), adversarial)
    b = _operand(rng, dtb, (spec.k, spec.n), adversarial)
    c = _c(rng, spec.m, spec.n, adversarial)
    regs = getattr(jwmma, name)(jwmma.pack_a(name, a), jwmma.pack_b(name, b), jwmma.pack_c(name, c))
    got = np.asarray(jwmma.unpack_c(name, regs)).view(np.uint32)
    want = mfma(_to_torch(a), _to_torch(b), _to_torch(c)).numpy().view(np.uint32)
    gnan, wnan = np.isnan(got.view(np.float32)), np.isnan(want.view(np.float32))
    excluded = np.zeros(got.shape, bool)
    if spec.a_format.bits == 8:  # MMA-Sim drops an Inf/NaN accumulator below the products (module doc)
        with np.errstate(invalid="ignore", over="ignore"):
            prods = a.astype(np.float64)[:, :, None] * b.astype(np.float64)[None, :, :]
        special = ~np.isfinite(c) | (~np.isfinite(prods)).any(axis=1)
        excluded = special & ~np.isfinite(got.view(np.float32)) & np.isfinite(want.view(np.float32))
    bad = ((gnan != wnan) | (~gnan & ~wnan & (got != want))) & ~excluded
    assert not bad.any(), (f"{int(bad.sum())} of {bad.size} outputs differ, first at {tuple(np.argwhere(bad)[0])}: "
                           f"{int(got[bad][0]):#x} vs MMA-Sim {int(want[bad][0]):#x}")
    assert excluded.sum() <= max(4, bad.size // 8), int(excluded.sum())
