"""The argument checks of a unit's contractions (API.md section 11): the unit itself, the
precision, the operands' dtypes, the result dtype, and the explicit native fallback.

Nothing falls back to a native dot: operands the unit cannot take raise unless the unit says
``fallback="native"`` (then ``jax.lax.dot_general`` runs them, logged once per kind). Every
message names the unit (builtin, formats, model, scaling) and what to pass instead.

An f64 unit (`jwmma.quant.unit.is_f64`) computes in float64 from end to end, which JAX has only
with ``jax_enable_x64`` on: `check_x64` refuses its use with the flag off (a TypeError naming
the fix) instead of letting its operands or result turn float32; its result dtype is float64
unless ``preferred_element_type`` says otherwise (`unit_result_dtype`).
"""
from __future__ import annotations

import logging

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..numerics.formats import format_of
from .unit import Unit, is_f64

__all__ = ["check_unit", "check_precision", "is_float", "result_dtype", "unit_result_dtype", "check_x64",
           "operand_error", "native_fallback", "LOGGER"]

#: the logger of the explicit fallbacks (``Unit(fallback="native")``), one record per kind
LOGGER = logging.getLogger("jwmma.quant")
_LOGGED: set = set()

_FLOATS = "float32, float16, bfloat16, float64 or an ml_dtypes fp8 type"


def check_unit(unit, where: str) -> Unit:
    """``unit`` if it is a `Unit`; TypeError naming ``where`` (the entry point) otherwise, with
    how to build one from what was passed (a dict, a builtin's name)."""
    if isinstance(unit, Unit):
        return unit
    if unit is None:
        raise TypeError(f"{where} needs unit=jwmma.Unit(...) (the emulated matrix unit), got none; e.g. "
                        f"unit=jwmma.Unit('smfmac_f32_16x16x128_fp8_fp8', scaling='row')")
    hint = " (build it with jwmma.Unit(**that_dict))" if isinstance(unit, dict) else \
        " (build it with jwmma.Unit(builtin=that_name))" if isinstance(unit, str) else ""
    raise TypeError(f"{where}: unit must be a jwmma.Unit, got {type(unit).__name__}{hint}")


def _unit_words(unit: Unit) -> str:
    spec = unit.spec
    model = unit.model if unit.model is not None else spec.default_model
    return (f"{unit.builtin}: A {spec.a_type} x B {spec.b_type}, {spec.c_type} accumulator, model {model!r}, "
            f"scaling {unit.scaling!r}")


def check_precision(precision, unit: Unit) -> None:
    """None, DEFAULT and HIGHEST (and their names) are taken: they ask for nothing the unit does
    not do. HIGH, other algorithms or presets ask for an arithmetic the unit does not have."""
    if precision is None:
        return
    items = tuple(precision) if isinstance(precision, (tuple, list)) else (precision,)
    ok = (lax.Precision.DEFAULT, lax.Precision.HIGHEST)
    for p in items:
        q = p
        if isinstance(p, str):
            try:
                q = lax.Precision(p)
            except Exception:
                q = None
        preset = getattr(lax, "DotAlgorithmPreset", None)
        if p is None or q in ok or (preset is not None and p is getattr(preset, "DEFAULT", object())):
            continue
        raise ValueError(f"precision={precision!r} cannot be honoured: the unit computes in its own formats "
                         f"({_unit_words(unit)}) whatever the precision. Pass precision=None (DEFAULT and HIGHEST "
                         f"are taken and mean the same here), or run this contraction with jax.lax.dot_general")


def is_float(dtype) -> bool:
    """Whether the unit takes values of ``dtype``: float64 or a float format jwmma knows."""
    d = np.dtype(dtype)
    fmt = format_of(d)
    return d == np.float64 or (fmt is not None and fmt.is_float)


def result_dtype(lhs_dtype, rhs_dtype, preferred_element_type=None):
    """The result dtype of a unit's contraction: ``preferred_element_type`` or the operands'
    promoted dtype, as ``jax.lax.dot_general`` gives it (canonicalised: float64 only with
    ``jax_enable_x64``).

    Args:
        lhs_dtype, rhs_dtype: the operands' dtypes; preferred_element_type: None or a float dtype.
    Returns:
        A numpy float dtype (ValueError for a non-float ``preferred_element_type``).
    """
    if preferred_element_type is None:
        out = jnp.result_type(lhs_dtype, rhs_dtype)
    else:
        try:
            out = np.dtype(preferred_element_type)
        except TypeError:
            raise TypeError(f"preferred_element_type must be a dtype or None, got {preferred_element_type!r}") from None
        if not is_float(out):
            raise ValueError(f"preferred_element_type={out}: the unit's result is floating-point (its accumulator, "
                             f"factors undone in float32, rounded once into the result type); pass None or one of "
                             f"{_FLOATS}")
    return np.dtype(jax.dtypes.canonicalize_dtype(out))


def unit_result_dtype(unit: Unit, lhs_dtype, rhs_dtype, preferred_element_type=None):
    """`result_dtype` for ``unit``: an f64 unit's result is float64 (its accumulator's type,
    whatever the operands' dtypes) unless ``preferred_element_type`` names another float dtype,
    into which the float64 result is rounded once.

    Args:
        unit: the `Unit`; lhs_dtype, rhs_dtype, preferred_element_type: as `result_dtype`.
    Returns:
        A numpy float dtype.
    """
    if is_f64(unit.spec) and preferred_element_type is None:
        return np.dtype(jax.dtypes.canonicalize_dtype(np.float64))
    return result_dtype(lhs_dtype, rhs_dtype, preferred_element_type)


def check_x64(unit: Unit, where: str) -> None:
    """TypeError when ``unit`` is an f64 unit and ``jax_enable_x64`` is off: JAX then has no
    float64 arrays, so its float64 operands and result would silently become float32. A unit
    whose ``backward`` unit is an f64 unit is refused too, before its forward pass runs."""
    if jax.config.jax_enable_x64:
        return
    role = "unit"
    while unit is not None and not is_f64(unit.spec):
        unit, role = unit.backward, "backward unit"
    if unit is None:
        return
    raise TypeError(f"{where} with the f64 {role} {unit.builtin!r} needs jax_enable_x64 on: the unit takes and gives "
                    f"float64 values, and with the flag off JAX holds them as float32 (their bits would be lost). "
                    f"Turn it on before creating the arrays (jax.config.update('jax_enable_x64', True), or the "
                    f"`with jax.enable_x64(True):` context), or call jwmma.gemm(a, b, builtin={unit.builtin!r}) on "
                    f"numpy float64 arrays, which gives a numpy float64 array with the flag off")


def operand_error(name: str, dtype, unit: Unit) -> ValueError:
    """The error for an operand ``name`` of a ``dtype`` the unit cannot take (not raised here)."""
    if is_f64(unit.spec):
        return ValueError(f"{name} has dtype {np.dtype(dtype)}, which the unit ({_unit_words(unit)}) cannot take: it "
                          f"takes floating-point operands ({_FLOATS}), converted exactly to float64. Convert it, "
                          f"e.g. {name}.astype(jnp.float64), or build the unit with fallback='native' to run such "
                          f"contractions as jax.lax.dot_general (logged once)")
    return ValueError(f"{name} has dtype {np.dtype(dtype)}, which the unit ({_unit_words(unit)}) cannot take: it "
                      f"quantises floating-point operands ({_FLOATS}) into its input formats. Convert it, e.g. "
                      f"{name}.astype(jnp.float32) (jwmma.numerics.cast rounds float64 once into any format), or "
                      f"build the unit with fallback='native' to run such contractions as jax.lax.dot_general "
                      f"(logged once)")


def native_fallback(unit: Unit, lhs, rhs, dn, precision, preferred_element_type):
    """``jax.lax.dot_general`` of the operands, as ``fallback="native"`` asks; the first call
    of each unit and pair of dtypes logs a warning on `LOGGER`."""
    key = (unit, str(np.dtype(lhs.dtype)), str(np.dtype(rhs.dtype)))
    if key not in _LOGGED:
        _LOGGED.add(key)
        LOGGER.warning("jwmma: a contraction of %s x %s operands runs natively (jax.lax.dot_general), as "
                       "fallback='native' of the unit %s asks", np.dtype(lhs.dtype), np.dtype(rhs.dtype), unit.builtin)
    return lax.dot_general(lhs, rhs, dn, precision=precision, preferred_element_type=preferred_element_type)
