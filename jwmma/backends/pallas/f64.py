"""float64 helpers for the kernels: `jwmma.rounding`'s TwoSum / round-to-odd (reused as they
are: plain jnp ops) and `round_f64` rebuilt on `kernel_lib.round_to_format` (int64 clz does
not lower to Triton)."""
from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from ...numerics.formats import FloatFormat
from ...numerics.rounding import round_to_odd, two_sum, value_f64  # noqa: F401

from . import kernel_lib as kl

__all__ = ["f64_of_fields", "round_f64", "round_to_odd", "two_sum"]


def f64_of_fields(d: kl.Dec, mbits: int):
    """Exact float64 value of decoded fields, Inf and NaN included (`jwmma.numerics.rounding.value_f64`:
    plain jnp ops, which lower to Triton)."""
    return value_f64(d, mbits)


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
