"""``jwmma models``: every arithmetic-model preset with its class and parameters, what it rests
on, and, for the presets that choose their design from the formats (the NVIDIA tensor cores),
the design per operand width and accumulator."""
from __future__ import annotations

import dataclasses
import json

from ..models import EVIDENCE, PRESETS, NvidiaTensorCore
from ..models.nvidia import designs

__all__ = ["record", "cmd_models", "add"]


def _full(model) -> str:
    """ClassName(every field=value): the parameters spelled out (a valid model text)."""
    fields = ", ".join(f"{f.name}={getattr(model, f.name)!r}" for f in dataclasses.fields(model))
    return f"{type(model).__name__}({fields})"


def record(name: str) -> dict:
    """The JSON record of one preset (``jwmma models --json``)."""
    f, i, description = PRESETS[name]
    out = {"name": name, "float_model": None if f is None else _full(f),
           "integer_model": None if i is None else _full(i), "description": description,
           "evidence": EVIDENCE.get(name, "")}
    if isinstance(f, NvidiaTensorCore):
        out["designs"] = {label: (d if isinstance(d, str) else _full(d)) for label, d in designs(f.arch)}
    return out


def cmd_models(args) -> int:
    """``jwmma models``: the presets as text or JSON."""
    recs = [record(n) for n in PRESETS if args.name in (None, n)]
    if args.json:
        print(json.dumps(recs, indent=2))
        return 0
    for r in recs:
        models = " | ".join(x for x in (r["float_model"], r["integer_model"] and f"integer: {r['integer_model']}") if x)
        print(f"{r['name']:<22} {models}")
        print(f"{'':<22} {r['description']}")
        print(f"{'':<22} evidence: {r['evidence']}")
        for label, d in r.get("designs", {}).items():
            print(f"{'':<22}   {label:<14} {d}")
    return 0


def add(subparsers) -> None:
    """Register ``jwmma models`` on an argparse subparsers object."""
    p = subparsers.add_parser("models", help="the arithmetic-model presets: parameters and evidence",
                              description="Every model preset (usable as model= / --model) with its class and "
                              "parameters, its description and the evidence it rests on; the NVIDIA presets "
                              "also show the design they pick per operand width and accumulator.")
    p.add_argument("name", nargs="?", help="show only this preset")
    p.add_argument("--json", action="store_true", help="print the records as JSON")
    p.set_defaults(func=cmd_models)
