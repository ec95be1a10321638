"""Large integer GEMMs against exact host arithmetic: the crosscheck's GEMMs are small (two tiles
and four K steps), and the integer rows at scale take XLA's int8 matrix products (integer
tensor cores on GPUs), whose results the crosscheck cannot vouch for at other shapes
(RESULTS.md "The whole grid on an H100": an XLA:GPU int8 product wrong at one padded shape).

    python benchmarks/int_rows_bits.py --shapes 4096 2048x4096x1024 --rows int8_cdna4 mfma_int8_942

Each row (an integer row of `rows.ROWS` or an integer builtin, under a wrapping model: `exact`
without clamp) runs ``jwmma.gemm`` on the default device on `rows.operands`' random int8 data.
The reference is D = C + A @ B mod 2**32 from float64 matrix products on the host: every
product of int8 values is below 2**14 and every sum below 2**14 * K, so for K < 2**39 each
float64 sum is exact in any order. Prints, per row and shape, how many outputs are equal.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rows import operands, row_of  # noqa: E402  (this folder: the shared rows)

import jwmma  # noqa: E402


def dense_a(a) -> np.ndarray:
    """A as a dense (M, K) int64 matrix: itself, or a sparse row's (values, positions) pair with
    each value at 4 * group + position."""
    if not isinstance(a, tuple):
        return np.asarray(a).astype(np.int64)
    values, pos = (np.asarray(x) for x in a)
    m, kc = values.shape
    out = np.zeros((m, 2 * kc), np.int64)
    cols = 4 * (np.arange(kc) // 2)[None, :] + pos.astype(np.int64)
    np.add.at(out, (np.arange(m)[:, None].repeat(kc, 1), cols), values.astype(np.int64))
    return out


def reference(a, b, c) -> np.ndarray:
    """C + A @ B wrapped to int32, exact (module doc)."""
    s = dense_a(a).astype(np.float64) @ np.asarray(b).astype(np.float64)
    d = np.asarray(c).astype(np.int64) + s.astype(np.int64)
    return ((d + 2**31) % 2**32 - 2**31).astype(np.int32)


def parse_shape(text: str) -> tuple:
    dims = [int(x) for x in text.split("x")]
    return tuple(dims * 3) if len(dims) == 1 else tuple(dims)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", nargs="+", default=["4096", "4096x2048x4096"], help="N (square) or MxNxK")
    ap.add_argument("--rows", nargs="+", default=["int8_cdna4", "mfma_int8_942", "mfma_i32_32x32x16_i8"])
    args = ap.parse_args()
    import jax

    print(f"# {jax.devices()[0].device_kind}, JAX {jax.__version__}", flush=True)
    for label in args.rows:
        row = row_of(label)
        if not row.spec.integer or row.clamp or row.model_name not in ("exact",):
            raise SystemExit(f"{label}: an integer row under the wrapping 'exact' model is needed, "
                             f"got model {row.model_name!r}, clamp={row.clamp}")
        for text in args.shapes:
            m, n, k = parse_shape(text)
            a, b, c, kw = operands(row, m, n, k)
            t0 = time.perf_counter()
            d = np.asarray(jwmma.gemm(a, b, c, builtin=row.builtin, model=row.model, **kw))
            t1 = time.perf_counter()
            want = reference(a, b, c)
            same = int((d.view(np.uint32) == want.view(np.uint32)).sum())
            print(f"{label:22s} {m}x{n}x{k}: {same}/{want.size} equal  (gemm {t1 - t0:.2f} s with its compile)",
                  flush=True)


if __name__ == "__main__":
    main()
