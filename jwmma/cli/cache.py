"""JAX's persistent compilation cache for the ``jwmma`` command (README "Command line").

A CLI run compiles a few dozen programs (2-7 s each on a 2-core CPU) and repeated runs
compile the same ones again; with the cache a second run loads them. Only the ``jwmma``
entry point (`jwmma.cli.entry`, ``python -m jwmma``) turns it on: importing jwmma, or calling
`jwmma.cli.main` in-process, leaves JAX's configuration as the user set it. The cache changes
no result: a loaded program is the compiled program.
"""
from __future__ import annotations

import os

__all__ = ["cache_dir", "enable"]


def cache_dir(environ=None) -> str:
    """``$XDG_CACHE_HOME/jwmma``, or ``~/.cache/jwmma`` when XDG_CACHE_HOME is unset or empty."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jwmma")


def enable(path: str | None = None) -> str | None:
    """Point JAX's persistent compilation cache at ``path`` (default `cache_dir()`), caching
    every program however small or quick to compile (`jwmma.enable_compilation_cache`).
    Returns the folder, or None when it cannot be created (the run then compiles as without
    the cache)."""
    from ..engine.effort import enable_compilation_cache

    try:
        return enable_compilation_cache(path or cache_dir())
    except ValueError:
        return None
