"""Layers whose matmul is `jwmma.matmul` (API.md section 9), for Flax and Equinox.

``jwmma.nn.flax``: `Linear` (a `flax.nnx.Linear` with jwmma's matmul, same parameters),
`emulate` / `emulated` (switch every `nnx.Linear` of a model over, in place or for a `with`
block) and `intercept_dense` (a context in which every `flax.linen.Dense` runs through jwmma).
``jwmma.nn.equinox``: `Linear` (the fields of `equinox.nn.Linear`), `emulate` (a tree transform
replacing every `equinox.nn.Linear`) and `restore`.

Flax and Equinox are an optional extra (``pip install -e '.[nn]'``): this package imports
them only when its submodules are first used, so ``import jwmma`` never needs them.
"""
from __future__ import annotations

import importlib

__all__ = ["flax", "equinox"]

#: submodule -> (the package it needs, its pip requirement)
NEEDS = {"flax": ("flax", "flax>=0.11"), "equinox": ("equinox", "equinox>=0.11")}


def __getattr__(name: str):
    if name in NEEDS:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(NEEDS))


def require(package: str):
    """Import ``package`` (flax or equinox) or raise an ImportError that says how to install it."""
    try:
        return importlib.import_module(package)
    except ImportError as e:
        req = dict(NEEDS.values())[package]
        raise ImportError(f"jwmma.nn.{package} needs {package} ({req}), which is not installed: "
                          f"pip install 'jwmma[nn]' (or pip install '{req}')") from e
