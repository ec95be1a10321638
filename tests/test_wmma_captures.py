"""gfx1201 dense WMMA hardware captures through the dense WMMA builtins themselves (issue #13).

tests/data/gfx1201_wmma_captures.json: rocjitsu's gfx1201 fixtures (ROCm/rocm-systems
`emulation/rocjitsu/tests/fixtures/float_dot/`, MIT; provenance in its ``source`` field),
transcribed as raw bits. Their operand arrays list a lane's elements in the order the capture
loaded them into registers, which in wave32 is the documented matrix K (BUILTINS_MORE.md 2.2)
with bits 2 and 3 swapped: documented k is listed element SWAP[k]. The matrices are built in
documented K order, packed with `jwmma.pack_a`/`pack_b`/`pack_c` and run through
`jwmma.wmma_*_w32_gfx12` with their default model (`gfx12_dot4`): every one of the 42 captures
(10,752 outputs) must come out bit for bit.
"""
from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import jwmma
from jwmma.models import Gfx12Dot4

CAP = json.loads((Path(__file__).parent / "data" / "gfx1201_wmma_captures.json").read_text())
SWAP = [(k & 3) | ((k & 4) << 1) | ((k & 8) >> 1) for k in range(16)]  # documented k -> listed element
DT = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32}
UINT = {2: np.uint16, 4: np.uint32}
ONE = {"f16": "wmma_f32_16x16x16_f16_w32_gfx12", "bf16": "wmma_f32_16x16x16_bf16_w32_gfx12"}
PACKED = {"f16": "wmma_f16_16x16x16_f16_w32_gfx12", "bf16": "wmma_bf16_16x16x16_bf16_w32_gfx12"}


def values(bits, fmt):
    dt = np.dtype(DT[fmt])
    return np.asarray(bits, np.int64).astype(UINT[dt.itemsize]).view(dt)


def run(name, a, b, c, model=None):
    """D bits (*batch, 16, 16) of the builtin on matrices of bits (documented K order)."""
    spec = jwmma.BUILTINS[name]
    fin, fout = spec.a_type, spec.c_type
    regs = (jwmma.pack_a(name, values(a, fin)), jwmma.pack_b(name, values(b, fin)),
            jwmma.pack_c(name, values(c, fout)))
    d = np.asarray(jwmma.unpack_c(name, getattr(jwmma, name)(*regs, model=model)))
    return d.view(UINT[d.dtype.itemsize]).astype(np.int64)


def test_the_file_is_what_the_test_expects():
    assert "MIT" in CAP["source"] and "gfx1201" in CAP["source"]
    assert "bits 2 and 3 swapped" in CAP["k_order"]
    assert [len(CAP["wmma_one_output"][f]) for f in ("f16", "bf16")] == [12, 12]
    assert [len(CAP["packed_wmma"][f]) for f in ("f16", "bf16")] == [7, 7]


@pytest.mark.parametrize("fmt", ["f16", "bf16"])
def test_one_output_captures(fmt):
    """24 captures, every output of the tile the same dot: A rows = a, B columns = b."""
    rows = CAP["wmma_one_output"][fmt]
    a = np.array([r["a"] for r in rows])[:, SWAP]  # documented K order
    b = np.array([r["b"] for r in rows])[:, SWAP]
    n = len(rows)
    A = np.broadcast_to(a[:, None, :], (n, 16, 16))
    B = np.broadcast_to(b[:, :, None], (n, 16, 16))
    C = np.broadcast_to(np.array([r["c"] for r in rows])[:, None, None], (n, 16, 16))
    got = run(ONE[fmt], A, B, C)
    want = np.array([r["expected_wave32"] for r in rows])
    assert np.array_equal(got, np.broadcast_to(want[:, None, None], got.shape)), \
        [i for i in range(n) if not (got[i] == want[i]).all()]


@pytest.mark.parametrize("fmt", ["f16", "bf16"])
def test_packed_captures(fmt):
    """14 captures of whole 16x16 matrices with a packed 16-bit accumulator (narrowed after
    every 4-product step)."""
    fx = CAP["packed_wmma"][fmt]
    a = np.array([f["a"] for f in fx]).reshape(-1, 16, 16)[:, :, SWAP]  # A[i][k] = a[16i + SWAP[k]]
    b = np.array([f["b"] for f in fx]).reshape(-1, 16, 16)[:, SWAP, :]  # B[k][j] = b[16 SWAP[k] + j]
    c = np.array([f["c"] for f in fx]).reshape(-1, 16, 16)
    want = np.array([f["expected_wave32"] for f in fx]).reshape(-1, 16, 16)
    got = run(PACKED[fmt], a, b, c)
    assert np.array_equal(got, want), [f["fixture"] for f, g, w in zip(fx, got, want) if not (g == w).all()]


def test_overflow_witnesses():
    """The 4 intermediate-overflow patterns (a, b in matrix order), f16 with and without
    MODE.FP16_OVFL and bf16: the model's fp16_ovfl parameter is the MODE bit."""
    cases = CAP["packed_overflow"]["cases"]
    for fmt, ovfl in (("f16", False), ("f16", True), ("bf16", None)):
        sel = [x for x in cases if x["fmt"] == fmt and (ovfl is None or x["fp16_ovfl"] == ovfl)]
        n = len(sel)
        A = np.broadcast_to(np.array([x["a"] for x in sel])[:, None, :], (n, 16, 16))
        B = np.broadcast_to(np.array([x["b"] for x in sel])[:, :, None], (n, 16, 16))
        C = np.broadcast_to(np.array([x["c"] for x in sel])[:, None, None], (n, 16, 16))
        got = run(PACKED[fmt], A, B, C, model=Gfx12Dot4(fp16_ovfl=bool(ovfl)))
        want = np.array([x["expected"] for x in sel])
        assert np.array_equal(got, np.broadcast_to(want[:, None, None], got.shape)), (fmt, ovfl)


def test_listed_order_would_not_reproduce_them():
    """Control: fed in the listed (register-load) order, the f16 packed fixtures other than 2
    and 5 come out different, so the K order the layouts give is what makes them match."""
    fx = CAP["packed_wmma"]["f16"]
    a = np.array([f["a"] for f in fx]).reshape(-1, 16, 16)
    b = np.array([f["b"] for f in fx]).reshape(-1, 16, 16)
    c = np.array([f["c"] for f in fx]).reshape(-1, 16, 16)
    want = np.array([f["expected_wave32"] for f in fx]).reshape(-1, 16, 16)
    got = run(PACKED["f16"], a, b, c)
    same = [f["fixture"] for f, g, w in zip(fx, got, want) if (g == w).all()]
    assert same == [2, 5]
