"""MMA-Sim as the MFMA tests call it, and the bit comparison they share (test support, no tests).

MMA-Sim 2.1.1 (``mmasim.amd.sim.MFMA(arch, name)``) takes and gives torch tensors of one
instruction's matrices (one block); these helpers convert numpy operands to tensors of the same
bits, call it per block or over K steps, and compare results bit for bit. torch and mmasim are
imported when a helper runs (`mfma` skips the calling test without them); nothing here imports
jwmma: the references stay independent of what they check.
"""
from __future__ import annotations

import numpy as np
import pytest

__all__ = ["mfma", "to_torch", "call", "per_block", "k_steps", "assert_same_bits"]

#: the unsigned view of each float width (bytes)
_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def mfma(arch: str, name: str):
    """MMA-Sim's simulator ``MFMA(arch, name)`` ('CDNA1' | 'CDNA2' | 'CDNA3', its instruction
    name); skips the calling test when torch or mmasim is not installed."""
    pytest.importorskip("torch")
    sim = pytest.importorskip("mmasim.amd.sim")
    return sim.MFMA(arch, name)


def to_torch(x):
    """A numpy float32, float64, float16 or bfloat16 array as a torch tensor of the same bits
    (16-bit values through an int16 view: numpy has no bfloat16 torch knows)."""
    import torch

    x = np.ascontiguousarray(x)
    if x.dtype in (np.float32, np.float64):
        return torch.from_numpy(x.copy())
    t = torch.from_numpy(x.view(np.int16).copy())
    return t.view(torch.float16 if x.dtype == np.float16 else torch.bfloat16)


def call(sim, a, b, c) -> np.ndarray:
    """D of one MMA-Sim call on numpy A (M, K), B (K, N), C (M, N), as numpy."""
    return sim(to_torch(a), to_torch(b), to_torch(c)).numpy()


def per_block(sim, a, b, c) -> np.ndarray:
    """D (blocks, M, N): one MMA-Sim call per block of A (blocks, M, K), B (blocks, K, N),
    C (blocks, M, N) (MMA-Sim simulates one block)."""
    return np.stack([call(sim, a[i], b[i], c[i]) for i in range(len(b))])


def k_steps(sim, a, b, c, k: int) -> np.ndarray:
    """D of a GEMM as chained MMA-Sim calls: A (M, s*k) and B (s*k, N) in s steps of ``k``
    along K, each step's D the next step's C."""
    d = to_torch(c)
    for s in range(a.shape[1] // k):
        sl = slice(s * k, (s + 1) * k)
        d = sim(to_torch(a[:, sl]), to_torch(b[sl, :]), d)
    return d.numpy()


def assert_same_bits(got, want, what="") -> None:
    """Assert equal bits, NaN by NaN-ness (a NaN's payload and sign are free). ``got`` and
    ``want`` are float arrays, or the unsigned ints of their bits (then read as float32 or
    float64 by width); ``what`` (any value) prefixes the message."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shapes {got.shape} and {want.shape}"
    width = got.dtype.itemsize
    u, f = _UINT[width], {4: np.float32, 8: np.float64}.get(width)
    g, w = got.view(u), want.view(u)
    gn = np.isnan(g.view(f)) if f else np.zeros(g.shape, bool)
    wn = np.isnan(w.view(f)) if f else np.zeros(w.shape, bool)
    bad = (gn != wn) | (~gn & ~wn & (g != w))
    assert not bad.any(), (f"{f'{what}: ' if what else ''}{int(bad.sum())} of {bad.size} outputs differ, first "
                           f"at {tuple(int(i) for i in np.argwhere(bad)[0])}: {int(g[bad][0]):#0{2 + 2 * width}x} "
                           f"vs {int(w[bad][0]):#0{2 + 2 * width}x}")
