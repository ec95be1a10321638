"""float64 helpers for the kernels: `jwmma.rounding`'s TwoSum / round-to-odd (reused as they
are: plain jnp ops) and `round_f64` rebuilt on `kernel_lib.round_to_format` (int64 clz does
not lower to Triton)."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from ...numerics.formats import FloatFormat
from ...numerics.rounding import fields_to_f64, round_to_odd, two_sum  # noqa: F401

from . import kernel_lib as kl

__all__ = ["f64_of_fields", "round_f64", "round_to_odd", "two_sum"]


def f64_of_fields(d: kl.Dec, mbits: int):
    """Exact float64 value of decoded fields, Inf and NaN included (fma_chain's `_to_f64`)."""
    v = fields_to_f64(d.sign, d.sig, jnp.where(d.nan | d.inf, 0, d.exp), mbits)
    v = jnp.where(d.inf, jnp.where(d.sign == 1, -np.inf, np.inf), v)
    return jnp.where(d.nan, np.nan, v)


def round_f64(x, fmt: FloatFormat):
    """Bits of float64 ``x`` rounded to ``fmt`` (as `jwmma.rounding.round_f64`)."""
    b = lax.bitcast_convert_type(x, jnp.int64)
    sign = ((b >> 63) & 1).astype(jnp.int32)
    ef = (b >> 52) & 0x7FF
    m = b & ((jnp.int64(1) << 52) - 1)
    mag = jnp.where(ef == 0, 0, m | (jnp.int64(1) << 52))
    bits = kl.round_to_format(sign, mag, ef - 1075, fmt)
    inf_bits = ((1 << fmt.ebits) - 1) << fmt.mbits if fmt.inf else fmt.qnan
    bits = jnp.where((ef == 0x7FF) & (m == 0), inf_bits | (sign << (fmt.bits - 1)), bits)
    return jnp.where((ef == 0x7FF) & (m != 0), fmt.qnan, bits)
