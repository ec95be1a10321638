"""Matrix values <-> element codes: the value half of the fragment codec (API.md section 3,
BUILTINS.md section 1).

Matrices hold logical element values (float16, bfloat16, ml_dtypes fp8/fp6/fp4, integers of
the type's range); registers hold packed storage (`registers`). Between the two sit element
*codes*, int32 bit patterns (integer values for i32). This module checks what users pass as
values (`check_value_input`: the exact dtype of a float type, an integer range) and converts
values to codes (`value_codes`, `to_codes`, `storage_bits`) and back (`codes_to_values`).
"""
from __future__ import annotations

import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from ..isa.types import element_type
from .validation import as_array, check_values, host_readable, is_concrete

__all__ = ["value_codes", "check_value_input", "to_codes", "storage_bits", "codes_to_values"]


# ------------------------------------------------------------------ matrix values <-> codes
def value_codes(type_name: str, x, what: str, builtin: str | None = None, *, check: bool = False,
                lohi: tuple | None = None) -> jnp.ndarray:
    """Logical matrix values -> int32 codes of the element type ``type_name``.

    Args:
        type_name: a `jwmma.isa.types` name; x: values (floats of exactly the type's dtype;
            integers of any integer dtype within the type's range); what: the argument's
            name for messages; builtin: the builtin to name in messages (whole-GEMM inputs);
            check: also check traced integer values (concrete ones always are); lohi: the
            accepted range (default: the type's).
    Returns:
        int32 codes (floats: bit patterns; integers: the values). TypeError/ValueError with
        a conversion hint on a wrong dtype or range.
    """
    return to_codes(type_name, check_value_input(type_name, x, what, builtin, check=check, lohi=lohi))


def check_value_input(type_name: str, x, what: str, builtin: str | None = None, *, check: bool = False,
                      lohi: tuple | None = None):
    """The checks of `value_codes` (dtype; integer range), without converting: ``x`` as an
    array. For callers that convert later, block by block (`jwmma.gemm`)."""
    t = element_type(type_name)
    x = as_array(x, what)
    if t.is_float:
        want = t.format.dtype
        if np.dtype(x.dtype) != want and t.bits == 64:
            where = f"a {type_name} operand" if builtin is None else f"{builtin} ({type_name} operand)"
            raise TypeError(f"{what} must hold float64 values for {where}, got {x.dtype}; {what}.astype(np.float64) "
                            f"is exact from float32/float16 (with jax_enable_x64 off JAX has no float64 arrays: pass "
                            f"a numpy array)")
        if np.dtype(x.dtype) != want:
            mod = "np" if want.name in ("float16", "float32") else "ml_dtypes"
            # a float64 source rounds twice through float32 in some ml_dtypes/XLA versions:
            # `cast` rounds once on every machine (docs/ARCHITECTURE.md, "Same bits on every device")
            if builtin is None:
                msg = (f"{what} must hold {want.name} values for a {type_name} operand, got {x.dtype}; "
                       f"convert explicitly, e.g. jwmma.numerics.cast(x, {mod}.{want.name}) (rounds to nearest "
                       f"even once, whatever the numpy/ml_dtypes version)")
            else:
                msg = (f"{what} must be {want.name} for {builtin} ({type_name} operand), got {x.dtype}; "
                       f"convert it first, e.g. jwmma.numerics.cast({what}, {mod}.{want.name}) (rounds to nearest "
                       f"even once, whatever the numpy/ml_dtypes version; {what}.astype of a float64 array rounds "
                       f"twice, through float32, in ml_dtypes < 0.7)")
            raise TypeError(msg)
        return x
    if not jnp.issubdtype(x.dtype, jnp.integer):
        where = f"a {type_name} operand" if builtin is None else f"{builtin} ({type_name} operand)"
        raise TypeError(f"{what} must hold integers for {where}, got {x.dtype}")
    lo, hi = t.range if lohi is None else lohi
    check_values(x, lo, hi, what, check)
    return x


def to_codes(type_name: str, x) -> jnp.ndarray:
    """Values already checked by `check_value_input` -> int32 codes (floats: bit patterns;
    integers: the values; traced unchecked integers keep their low 32 bits; f64: int64 bit
    patterns, inside `x64_scope`). Floats may also
    come as their bit patterns (unsigned ints of the format's width, `storage_bits`)."""
    t = element_type(type_name)
    if t.is_float and np.dtype(x.dtype) == t.format.dtype:
        x = storage_bits(x)
    if t.bits == 64:  # f64: int64 bit patterns (inside `x64_scope`)
        x = jnp.asarray(x)
        return x if x.dtype == jnp.int64 else lax.bitcast_convert_type(x.astype(jnp.uint64), jnp.int64)
    return jnp.asarray(x).astype(jnp.int32)


def storage_bits(x):
    """A float array as the bit patterns of its elements (unsigned ints of its width; a free
    view for numpy arrays, one bit cast for JAX arrays); any other array as it is. XLA's CPU
    backend widens fp8 operands to f16 before a bit cast that reads them, so whole-GEMM inputs
    enter the compiled loop as bits."""
    d = np.dtype(x.dtype)
    if not jnp.issubdtype(d, jnp.floating):
        return x
    width = np.dtype(f"u{d.itemsize}")
    if isinstance(x, np.ndarray):
        return x.view(width)
    bits = ml_dtypes.finfo(d).bits
    if bits == 4:  # JAX holds float4 as 4-bit elements: its bit cast goes to uint4
        return lax.bitcast_convert_type(x, jnp.uint4).astype(jnp.uint8)
    if bits == 6:  # JAX has no 6-bit integer to cast a float6 array to: read it on the host
        if not is_concrete(x):
            raise TypeError(f"a traced {d.name} array cannot be read as bits inside jit (JAX has no 6-bit "
                            f"integer type); pass its codes as uint8 with the format named (fmt_a=/fmt_b=), or a "
                            f"numpy array")
        return jnp.asarray(np.asarray(x).view(width))
    if d.itemsize == 8:
        # float64 (the f64 MFMA): XLA:CPU (jaxlib 0.10) folded a GEMM's bits wrongly when the
        # operand was a transposed float64 constant (a jit's concrete argument inside another
        # jit, e.g. a closed-over cotangent): the barrier keeps the bit cast out of the folding
        x = lax.optimization_barrier(x)
    elif _in_host_memory(x):  # an eager bit cast is a program of its own for every new shape
        return np.asarray(x).view(width)
    return lax.bitcast_convert_type(x, width)


def _in_host_memory(x) -> bool:
    """Whether ``x`` is a JAX array on one CPU device (`host_readable`) not committed to it:
    placing its numpy view puts the operand where the uncommitted array would go (a committed
    array keeps its device, so it stays a JAX array)."""
    return host_readable(x) and not x.committed


def codes_to_values(type_name: str, codes, signed: bool = True) -> jnp.ndarray:
    """Inverse of `value_codes`.

    Args:
        type_name: the element type; codes: int32 codes; signed: the reading of iu8/iu4.
    Returns:
        Values of the type's value dtype (`jwmma.isa.types.ElementType.value_dtype`).
    """
    t = element_type(type_name)
    want = t.value_dtype(signed)
    if t.is_float:
        if want.itemsize == 8:  # f64: from int64 bit patterns (inside `x64_scope`)
            return lax.bitcast_convert_type(codes.astype(jnp.int64), jnp.float64)
        if want.itemsize == 4:
            return lax.bitcast_convert_type(codes.astype(jnp.int32), jnp.float32)
        bits = ml_dtypes.finfo(want).bits
        if bits == 4:  # JAX's float4 is 4 bits wide: cast from uint4
            return lax.bitcast_convert_type(codes.astype(jnp.uint4), want)
        if bits == 6:  # no 6-bit integer in JAX to cast from: the values are built on the host
            if not is_concrete(codes):
                raise TypeError(f"{want.name} values cannot be made inside jit (JAX has no 6-bit integer type); "
                                f"unpack them outside jit, or read the codes")
            return np.asarray(codes).astype(np.uint8).view(want)
        width = jnp.uint16 if want.itemsize == 2 else jnp.uint8
        return lax.bitcast_convert_type(codes.astype(width), want)
    fmt = t.int_format(signed)
    if fmt.bits == 32:
        return codes.astype(jnp.int32)
    v = codes & ((1 << fmt.bits) - 1)
    if fmt.signed:
        v = jnp.where(v >= (1 << (fmt.bits - 1)), v - (1 << fmt.bits), v)
    return v.astype(want)
