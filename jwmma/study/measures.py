"""Error measures of one study point against its exact reference (definitions: the module
docstring of `jwmma.study`): relative errors scaled by sum |a*b|, bias, normwise error, and
float32 ulp distances with their signed log2 histogram.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from .exact_product import Reference

__all__ = ["U32", "HIST_BINS", "ordered", "ulp_diff", "ulp_bins", "ulp_histogram", "metrics"]

#: u = 2**-24, the unit roundoff of float32 (a float, exact)
U32 = float(np.ldexp(1.0, -24))
HIST_BINS = 33  # signed log2 bins -33..33 cover every int32 difference


def ordered(x: np.ndarray, dtype=np.float32) -> np.ndarray:
    """float32 (or float16/bfloat16: ``dtype``) -> int64 order index: adjacent floats of that
    format differ by 1, +0 and -0 are both 0."""
    dtype = np.dtype(dtype)
    width = dtype.itemsize * 8
    bits = np.asarray(x).astype(dtype).view(np.dtype(f"int{width}")).astype(np.int64)
    return np.where(bits < 0, -(bits & ((1 << (width - 1)) - 1)), bits)


def ulp_diff(d: np.ndarray, ref: np.ndarray, dtype=np.float32) -> np.ndarray:
    """Signed number of ``dtype`` steps (float32 by default) from ref to d."""
    return ordered(d, dtype) - ordered(ref, dtype)


def ulp_bins(u: np.ndarray) -> np.ndarray:
    """Signed log2 bin of each ulp difference: 0 -> 0, +-[2**(b-1), 2**b) -> +-b."""
    mag = np.abs(u)
    b = np.where(mag > 0, np.floor(np.log2(np.maximum(mag, 1))).astype(np.int64) + 1, 0)
    return np.sign(u) * np.minimum(b, HIST_BINS)


def ulp_histogram(u: np.ndarray) -> dict:
    """{bin (str): count} of the signed log2 bins (`ulp_bins`) of the ulp differences ``u``."""
    bins, counts = np.unique(ulp_bins(u.ravel()), return_counts=True)
    return {str(int(b)): int(c) for b, c in zip(bins, counts)}


def metrics(d: np.ndarray, ref: Reference) -> dict:
    """Error measures of one point (see the module docstring). Compared in the destination
    format: a float16/bfloat16 ``d`` is "identical" when it equals the correctly rounded
    float16/bfloat16 exact result, and its ulps are float16/bfloat16 ulps."""
    d = np.asarray(d)
    dest = d.dtype if d.dtype in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)) else np.dtype(np.float32)
    want = ref.rounded(dest)
    d = d.astype(np.float32)
    fin = np.isfinite(d)
    dd = np.where(fin, d, 0).astype(np.float64)
    err = dd - ref.exact
    s = ref.scale
    rel = np.where(s > 0, np.abs(err) / np.where(s > 0, s, 1.0), np.where(err == 0, 0.0, np.inf))
    rel = np.where(fin, rel, np.inf)
    signed = np.where(s > 0, err / np.where(s > 0, s, 1.0), 0.0)
    u = ulp_diff(d, want, dest)[fin]
    rn = np.abs(want.astype(np.float64) - ref.exact) / np.where(s > 0, s, 1.0)
    nref = float(np.sqrt(np.sum(ref.exact**2)))
    nerr = float(np.sqrt(np.sum(err**2))) if fin.all() else math.inf
    return {
        "max_rel": float(rel.max()),
        "mean_rel": float(rel.mean()),
        "bias": float(signed[fin].mean()) if fin.any() else math.nan,
        "fro_rel": nerr / nref if nref > 0 else (0.0 if nerr == 0 else math.inf),
        "ident": float(np.mean(u == 0)) if u.size else 0.0,
        "mean_ulp": float(u.mean()) if u.size else math.nan,
        "mean_abs_ulp": float(np.abs(u).mean()) if u.size else math.nan,
        "max_abs_ulp": int(np.abs(u).max()) if u.size else -1,
        "nonfinite": int((~fin).sum()),
        "rn_mean_rel": float(rn.mean()),
        "ulp_hist": ulp_histogram(u),
    }
