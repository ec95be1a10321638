"""Shape buckets: eager GEMMs of many shapes sharing a few compiled programs (API.md section 5,
"compile cost"; benchmarks/RESULTS.md, issue 35).

Every new shape is a new XLA program, and compiling one costs 0.5-2 CPU seconds, more than a
small GEMM's run. So an eager `jwmma.gemm` (and a `jwmma.Unit`'s eager contraction) of a small
GEMM on the XLA path on one device runs in its *bucket*: M and N rounded up to 512 * 4**j
(`MIN_MN`, `GROWTH`), K to 4096 * 4**j (`MIN_K`), the batch kept. The operands are
zero-padded on the host, on their bits (no XLA program per shape, no float copy), and the
bucket's program runs only the blocks of rows and columns and the K steps of the GEMM's own
extent (`blocks.run_extent`, `paths.gemm_path`'s ``extent``): the padding is never computed
on, so D has the bits of the unbucketed GEMM. One program serves every shape of its bucket;
a sweep over M, N up to 512 and K up to 4096 compiles one (two once it is called often enough
for 'auto' compile effort to tier up: `jwmma.engine.effort`).

Opt-in (``Options(shape_buckets=True)``): a call pays for its bucket's size, little for a GEMM
(host padding: a repeated 16 x 128 x 16 gemm 13-19 CPU ms instead of 1) but much for a unit,
whose quantisation runs over the whole bucket (a 32 x 64 x 32 contraction 86 ms instead of
0.9), and a first call compiles a larger program (+0.3-0.4 CPU s); benchmarks/RESULTS.md
"Shape buckets". What stays per shape with it: a GEMM whose bucket holds more than
`MAX_ELEMENTS` operand and result elements (its run outweighs a compile); traced operands (inside the user's jit every shape is
the user's program anyway, and a gradient traces); several devices; the Pallas kernels; the
f64 MFMA. Bucketing changes no bit (`tests/test_buckets.py`).
"""
from __future__ import annotations

import numpy as np

from ..engine.validation import is_concrete

__all__ = ["MIN_MN", "MIN_K", "GROWTH", "MAX_ELEMENTS", "size", "capacity", "fits", "pad_inputs", "pad_bits", "pad_positions"]

#: the smallest bucket of M and N, and of K; buckets grow by `GROWTH` (a bucket's program runs
#: only its extent's blocks and steps, so a large bucket costs host padding and memory, not
#: arithmetic: few, large buckets keep a sweep to one or two programs)
MIN_MN, MIN_K, GROWTH = 512, 4096, 4
#: operand and result elements of a bucket (batch x (M K + K N + M N)) beyond which a GEMM keeps
#: its own shape
MAX_ELEMENTS = 2**26


def size(x: int, floor: int) -> int:
    """The bucket of a dimension: the least floor * GROWTH**j >= x."""
    out = floor
    while out < x:
        out *= GROWTH
    return out


def capacity(spec, m: int, n: int, k: int) -> tuple[int, int, int]:
    """(M, N, K) of the bucket of an (m, n, k) GEMM of ``spec``: powers of two, so whole tiles
    and whole K steps of every builtin (their tile sizes and K are powers of two)."""
    out = size(m, MIN_MN), size(n, MIN_MN), size(k, MIN_K)
    if out[0] % spec.m or out[1] % spec.n or out[2] % spec.k:
        raise ValueError(f"bucket {out} is not whole tiles of {spec.name}")  # jwmma's own tables
    return out


def fits(batch: int, bm: int, bn: int, bk: int) -> bool:
    """Whether a bucket's operands and result stay within `MAX_ELEMENTS`."""
    return batch * (bm * bk + bk * bn + bm * bn) <= MAX_ELEMENTS


def pad_inputs(spec, options, a, b, c):
    """A GEMM's operands as the user gave them, padded to their bucket on the host when it runs
    in one (module doc), with its extent; None when it does not (and for anything the GEMM's
    checks will refuse: those run on the operands as given).

    Args:
        spec: the builtin's row; options: resolved `jwmma.Options`; a: (*batch, M, K) array or
            a (values, positions) pair of (*batch, M, K/2) arrays; b: (*batch, K, N); c:
            (*batch, M, N) or None.
    Returns:
        ``(a, b, c, extent)``: numpy arrays of the bucket's M, N, K (a pair stays a pair, its
        padding groups at positions (2, 3)) and the int32 (3,) array (M, N, K) of the GEMM;
        or None.
    """
    if not options.shape_buckets or spec.c_type == "f64":
        return None
    pair = isinstance(a, tuple)
    if pair and len(a) != 2:
        return None
    arrays = (*a, b, c) if pair else (a, b, c)
    if not all(x is None or (hasattr(x, "shape") and hasattr(x, "dtype") and is_concrete(x)) for x in arrays):
        return None
    values = a[0] if pair else a
    if values.ndim < 2 or b.ndim < 2 or (c is not None and c.ndim < 2) or (pair and a[1].shape != values.shape):
        return None
    m, n = values.shape[-2], b.shape[-1]
    k = 2 * values.shape[-1] if pair else values.shape[-1]
    if b.shape[-2] != k or (c is not None and tuple(c.shape[-2:]) != (m, n)) or min(m, n, k) <= 0:
        return None
    try:
        batch = np.broadcast_shapes(*(x.shape[:-2] for x in (values, b) + ((c,) if c is not None else ())))
    except ValueError:
        return None
    bm, bn, bk = capacity(spec, m, n, k)
    if 0 in batch or not fits(int(np.prod(batch, dtype=np.int64)), bm, bn, bk):
        return None
    if pair:
        a = (pad_bits(a[0], {-2: bm, -1: bk // 2}), pad_positions(a[1], bm, bk // 2))
    else:
        a = pad_bits(a, {-2: bm, -1: bk})
    return a, pad_bits(b, {-2: bk, -1: bn}), pad_bits(c, {-2: bm, -1: bn}), np.asarray([m, n, k], np.int32)


def _uint(dtype):
    return {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]


def pad_bits(x, sizes: dict):
    """``x`` (any array) as a numpy array zero-padded at the end of the given axes (negative
    axis -> size) on its bits: a zero code in every format (no float copy, which may not keep
    bits). None stays None."""
    if x is None:
        return None
    x = np.asarray(x)
    pads = [(0, 0)] * x.ndim
    for ax, s in sizes.items():
        pads[ax] = (0, s - x.shape[ax])
    if x.dtype == np.bool_ or np.dtype(x.dtype).kind in "iu":
        return np.pad(x, pads)
    return np.pad(x.view(_uint(x.dtype)), pads).view(x.dtype)


def pad_positions(pos, rows: int, cols: int):
    """2:4 positions (..., M, Kc) padded to (..., rows, cols) on the host: the padding groups
    at positions (2, 3), as `jwmma.tiled.operands.pad_a` pads them."""
    pos = np.asarray(pos)
    out = np.empty(pos.shape[:-2] + (rows, cols), pos.dtype)
    out[...] = np.tile(np.asarray([2, 3], pos.dtype), -(-cols // 2))[:cols]
    out[..., : pos.shape[-2], : pos.shape[-1]] = pos
    return out
