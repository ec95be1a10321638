"""The fused-group model's two implementations of truncating alignment give the same bits:
integer shifts of the significand product, and (for f32-exact products: fp8, bf8, f16) a
multiply of the f32 product by 2**(F - E_T) with a conversion toward zero."""
import jax
import ml_dtypes
import numpy as np
import pytest

import jwmma
from jwmma.models.fused import FusedGroups

FORMATS = [np.float16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2]


def _operands(dtype, rng, n=1500, k=48):
    # every bit pattern of the narrow formats is likely to appear; wide exponent spreads
    bits = 16 if np.dtype(dtype).itemsize == 2 else 8
    raw = rng.integers(0, 1 << bits, (2, n, k)).astype(np.uint16 if bits == 16 else np.uint8)
    a, b = raw[0].view(dtype), raw[1].view(dtype)
    # keep NaN/Inf rare so that most rows take the fast path
    fin = np.isfinite(a.astype(np.float32)) & np.isfinite(b.astype(np.float32))
    keep = rng.random((n, k)) < 0.999
    a = np.where(fin | ~keep, a, np.zeros((), dtype)).astype(dtype)
    b = np.where(fin | ~keep, b, np.zeros((), dtype)).astype(dtype)
    c = (rng.standard_normal(n) * 10.0 ** rng.integers(-45, 38, n)).astype(np.float32)
    return a, b, c


@pytest.mark.parametrize("dtype", FORMATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("model", [
    "cdna3",
    pytest.param(FusedGroups(group=4, frac_bits=12), marks=pytest.mark.slow),
    pytest.param(FusedGroups(zero_exponent=-126, renormalize=False), marks=pytest.mark.slow),
], ids=["cdna3", "g4f12", "c785138"])
def test_float_and_integer_alignment_agree(dtype, model, monkeypatch):
    rng = np.random.default_rng(7)
    a, b, c = _operands(dtype, rng)
    fast = np.asarray(jwmma.dot(a, b, c, model=model)).view(np.uint32)
    monkeypatch.setattr(FusedGroups, "float_alignment", False)
    jax.clear_caches()  # the jitted dot was traced with the fast path
    slow = np.asarray(jwmma.dot(a, b, c, model=model)).view(np.uint32)
    nan = np.isnan(fast.view(np.float32)) & np.isnan(slow.view(np.float32))
    assert ((fast == slow) | nan).all()
