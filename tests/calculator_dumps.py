"""The CDNA MFMA dumps of AMD's matrix instruction calculator in ``tests/data`` (every row's
operand layout entries), read once per test process, when a test first needs them (not at
collection, which every process pays). Imports no jwmma: they are what jwmma is checked against.
"""
from __future__ import annotations

import functools
import json
import pathlib

DATA = pathlib.Path(__file__).parent / "data"
#: the dumps of each chip (their instruction keys and builtins are disjoint)
FILES = {"gfx908": ("cdna1_mfma_calculator.json",), "gfx90a": ("cdna2_mfma_calculator.json",),
         "gfx942": ("cdna3_mfma_calculator.json", "cdna3_mfma_more_calculator.json")}


@functools.cache
def instructions(target: str) -> dict:
    """{instruction key: entry} of every dump of ``target`` ('gfx950' reads gfx942's: the
    calculator has no gfx950 dump of these rows)."""
    files = FILES["gfx942" if target == "gfx950" else target]
    return {k: v for f in files for k, v in json.loads((DATA / f).read_text())["instructions"].items()}
