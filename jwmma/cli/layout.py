"""``jwmma layout``: which matrix element each (lane, VGPR, bits) holds, as a list or a grid."""
from __future__ import annotations

import json

from ..isa import view
from ..isa.table import lookup
from .common import CliError, add_target_arg, spec_of

__all__ = ["cmd_layout", "add"]

# ================================================================================ layout
def _int_list(text: str, what: str) -> list[int]:
    """'3' / '0-3,16' -> [..]"""
    out = []
    try:
        for part in text.split(","):
            if "-" in part.strip()[1:]:
                lo, hi = part.split("-", 1)
                if int(hi) < int(lo):
                    raise CliError(f"{what}: the range {part.strip()!r} is empty (write LO-HI with LO <= HI)")
                out.extend(range(int(lo), int(hi) + 1))
            else:
                out.append(int(part))
    except ValueError:
        raise CliError(f"{what} must look like 3 or 0-3,16, got {text!r}") from None
    return out


def cmd_layout(args) -> int:
    """``jwmma layout``: the layout of one operand (list, grid or JSON)."""
    spec = spec_of(args.name, args.target)  # the element types as decoded on --target
    operand = "c" if args.operand == "d" else args.operand
    if args.fmt is not None:  # a block-scaled row as laid out for one format (A and B alike)
        if not spec.scaled:
            raise CliError(f"--fmt applies to the block-scaled builtins (mfma_scale_*); {spec.name} has one format")
        try:
            spec = lookup(spec.name, spec.target, (args.fmt, args.fmt))
        except ValueError as e:
            raise CliError(str(e).replace("fmt_a", "--fmt")) from None
    if operand == "index" and spec.dense:
        raise CliError(f"{spec.name} is dense: it has no index register (operands: a, b, c/d)")
    if not 0 <= args.index_set < len(spec.index_sets):
        raise CliError(
            f"--index-set for {spec.name} must be one of {list(range(len(spec.index_sets)))} "
            f"({view.index_set_note(spec)})"
        )
    if args.opsel and not (spec.opsel and operand == "c"):
        raise CliError(f"--opsel picks the C/D half of the RDNA3 f16/bf16-output WMMA (wmma_f16_16x16x16_f16_*, "
                       f"wmma_bf16_16x16x16_bf16_* and their _tied forms); not {spec.name} operand {args.operand}")
    if args.panel < 1:
        raise CliError(f"--panel must be a positive number of columns, got {args.panel}")
    lanes = None
    if args.lane is not None:
        lanes = _int_list(args.lane, "--lane")
        bad = [x for x in lanes if not 0 <= x < spec.lanes]
        if bad:
            raise CliError(f"--lane: {spec.name} has lanes 0..{spec.lanes - 1}, got {bad[0]}")
    element = None
    if args.element is not None:
        element = _int_list(args.element, "--element")
        if len(element) != 2:
            raise CliError(f"--element takes ROW,COL, got {args.element!r}")
        try:
            view.where_is(spec, operand, *element, index_set=args.index_set, opsel=args.opsel)
        except ValueError as e:  # named after the option, as every other refusal here
            raise CliError(f"--element {args.element}: {e}") from None
    if args.json:
        rows = view.entries(spec, operand, args.index_set, args.opsel)
        rows = [r for r in rows if (lanes is None or r.lane in lanes) and (element is None or [r.row, r.col] == element)]
        print(json.dumps([r.__dict__ for r in rows]))
        return 0
    if args.grid:
        lines = view.render_grid(spec, operand, index_set=args.index_set, panel=args.panel, opsel=args.opsel)
    else:
        lines = view.render_list(spec, operand, index_set=args.index_set, lanes=lanes, element=element,
                                 opsel=args.opsel)
    print("\n".join(lines))
    return 0


def add(sub):
    """Register ``jwmma layout`` on an argparse subparsers object."""
    p = sub.add_parser(
        "layout", help="which matrix element each (lane, VGPR, bits) holds",
        description="Register layout of one operand of a builtin, in the spirit of AMD's matrix "
        "instruction calculator. A is shown in compressed coordinates A[i][c]: c//2 is the dense "
        "group q, and the dense k is 4q + the 2-bit index field.",
    )
    p.add_argument("name", help="builtin name, with or without __builtin_amdgcn_")
    p.add_argument("--operand", "-o", choices=["a", "b", "c", "d", "index"], default="a",
                   help="a (compressed), b, c (= d) or index (default a)")
    p.add_argument("--index-set", type=int, default=0, metavar="N",
                   help="index set shown by '--operand index' (default 0)")
    p.add_argument("--grid", action="store_true", help="matrix-shaped table of lane:vgpr cells")
    p.add_argument("--panel", type=int, default=16, metavar="COLS", help="grid columns per panel (16)")
    p.add_argument("--lane", metavar="LANES", help="only these lanes, e.g. 16 or 0-3,16")
    p.add_argument("--element", metavar="ROW,COL",
                   help="only this matrix element (A: i,c compressed; B: k,j; C: i,j; index: A's i,c)")
    p.add_argument("--json", action="store_true", help="machine-readable entries")
    p.add_argument("--fmt", type=int, default=None, metavar="CODE",
                   help="block-scaled builtins: the format of A and B (0 fp8 E4M3, 1 bf8 E5M2, 2 fp6 E2M3, "
                   "3 bf6 E3M2, 4 fp4 E2M1; default 0): 8-bit formats lie in 16-element chunks, 6/4-bit ones "
                   "contiguous")
    p.add_argument("--opsel", type=int, choices=[0, 1], default=0,
                   help="RDNA3 f16/bf16-output WMMA, operand c/d: the half of each VGPR (0 bits 15:0, the default; "
                   "1 bits 31:16), as the builtin's opsel")
    add_target_arg(p)
    p.set_defaults(func=cmd_layout)
