"""Child processes of the benchmarks (``python -c``) import the jwmma their parent would.

A ``python -c`` child puts its working directory first on ``sys.path``, so from a checkout's
root it imports that checkout's jwmma whatever PYTHONPATH says. `ab_trees.py`, which picks a
code tree by PYTHONPATH, then timed the working tree twice when `bench_first_call.py` ran from
the repository root. `child_command` hands the child the folder of the jwmma that its parent
resolves (PYTHONPATH, then the installed package), and the child puts it first.
"""
from __future__ import annotations

import importlib.util
import os
import sys

__all__ = ["jwmma_root", "child_command"]


def jwmma_root() -> str:
    """The folder holding the ``jwmma`` package this process would import (found, not
    imported), or else the checkout this file lies in."""
    spec = importlib.util.find_spec("jwmma")
    if spec is not None and spec.origin:
        return os.path.dirname(os.path.dirname(os.path.abspath(spec.origin)))
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child_command(code: str, *args: str) -> list:
    """``[python, -c, code, *args]`` whose code first puts `jwmma_root` at the front of
    ``sys.path``; the code sees its own arguments at ``sys.argv[1:]`` as before."""
    first = "import sys as _sys; _sys.path.insert(0, _sys.argv.pop(1))\n"
    return [sys.executable, "-c", first + code, jwmma_root(), *args]
