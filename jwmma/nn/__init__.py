"""Layers whose matmul is `jwmma.matmul` (API.md section 9), for Flax and Equinox, and a qwix
provider that routes every contraction of a Flax model through a `jwmma.Unit` (API.md 11).

``jwmma.nn.flax``: `Linear` (a `flax.nnx.Linear` with jwmma's matmul, same parameters),
`emulate` / `emulated` (switch every `nnx.Linear` of a model over, in place or for a `with`
block) and `intercept_dense` (a context in which every `flax.linen.Dense` runs through jwmma).
``jwmma.nn.equinox``: `Linear` (the fields of `equinox.nn.Linear`), `emulate` (a tree transform
replacing every `equinox.nn.Linear`) and `restore`. Each takes a `jwmma.Unit` (``unit=``) or
matmul's keywords.
``jwmma.nn.qwix``: `provider` and `Rule`, for ``qwix.quantize_model`` (every ``lax.dot_general``,
``jnp.einsum``, ``jnp.dot`` and ``jnp.matmul`` of an unmodified Linen or NNX model through the
unit its module's rule names).

Flax and Equinox are an optional extra (``pip install -e '.[nn]'``), qwix another
(``'.[qwix]'``): this package imports them only when its submodules are first used, so
``import jwmma`` never needs them.
"""
from __future__ import annotations

import importlib

__all__ = ["flax", "equinox", "qwix", "require", "unit_of", "NEEDS", "MATMUL_DEFAULTS"]

#: submodule -> (the package it needs, its pip requirement, jwmma's extra that installs it)
NEEDS = {"flax": ("flax", "flax>=0.11", "nn"), "equinox": ("equinox", "equinox>=0.11", "nn"),
         "qwix": ("qwix", "qwix>=0.1.8", "qwix")}


def __getattr__(name: str):
    if name in NEEDS:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(NEEDS))


def require(package: str):
    """Import ``package`` (flax, equinox or qwix) or raise an ImportError that says how to install it."""
    try:
        return importlib.import_module(package)
    except ImportError as e:
        _, req, extra = next(v for v in NEEDS.values() if v[0] == package)
        raise ImportError(f"jwmma.nn.{package} needs {package} ({req}), which is not installed: "
                          f"pip install 'jwmma[{extra}]' (or pip install '{req}')") from e


#: matmul's keywords and their defaults (a layer or transform takes these or ``unit=``)
MATMUL_DEFAULTS = dict(builtin="smfmac_f32_16x16x128_fp8_fp8", model=None, scaling=None, prune=None, target=None,
                       backend=None, options=None, devices=None, mesh=None, mesh_axes=None, formats=None)


def _is_default(name, value) -> bool:
    default = MATMUL_DEFAULTS.get(name, object())
    return value is default or (type(value) is type(default) and value == default)


def unit_of(unit, matmul_keywords: dict, where: str):
    """The `jwmma.Unit` a layer or transform was given: ``unit`` itself, or the unit of
    `jwmma.matmul`'s keywords (`jwmma.quant.config`), never both.

    Args:
        unit: a `jwmma.Unit` or None; matmul_keywords: matmul's keywords as the caller got
            them (those still at their defaults do not count as given); where: the caller,
            for the message.
    Returns:
        The `jwmma.Unit`.
    """
    from ..quant import Unit, config

    if unit is None:
        return config(**matmul_keywords)
    matmul_keywords = {k: v for k, v in matmul_keywords.items() if not _is_default(k, v)}
    if not isinstance(unit, Unit):
        raise TypeError(f"{where}: unit must be a jwmma.Unit, got {type(unit).__name__}")
    if matmul_keywords:
        raise TypeError(f"{where}: give either unit= or matmul's keywords, not both (got unit and "
                        f"{sorted(matmul_keywords)}); put them into the unit: unit.replace(...)")
    return unit
