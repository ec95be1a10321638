"""Text views of the register layouts, in the spirit of AMD's matrix instruction calculator.

Everything here is read off the instruction table (`jwmma.isa.table.BUILTINS`): the layout arrays
say which matrix element each (lane, vector element) holds; BUILTINS.md section 1 says where
vector element ``e`` of a ``w``-bit operand sits: VGPR ``(e*w)//32``, bits
``[(e*w)%32 + w-1 : (e*w)%32]`` (little-endian packing). The index register holds the 2-bit
position of A element ``e`` in bits ``[s+2e+1 : s+2e]``, ``s`` being the index set's offset.

Two views: `entries`/`render_list` (one line per element, like the calculator's
``--get-register``/``--register-layout`` output) and `render_grid` (a matrix-shaped table,
like the seed pages' figures).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .table import BuiltinSpec

__all__ = ["OPERANDS", "Entry", "index_set_note", "matrix_of", "operand_note", "entries", "describe",
           "render_list", "header", "render_grid", "where_is"]

OPERANDS = ("a", "b", "c", "index")


@dataclass(frozen=True)
class Entry:
    """One element's place: ``lane``, vector element ``e``, VGPR ``vgpr`` bits ``[hi:lo]``
    (for the index view: bits of idx[lane]) and its matrix coordinates ``(row, col)``:
    A (i, compressed c), B (dense k, j), C (i, j); index entries use A's coordinates."""

    operand: str
    lane: int
    e: int
    vgpr: int
    hi: int
    lo: int
    row: int
    col: int


# ---------------------------------------------------------------------------- facts
def index_set_note(spec: BuiltinSpec) -> str:
    """How the builtin picks the index set (BUILTINS.md 2.2, 4.2): `BuiltinSpec.index_note`."""
    return spec.index_note()


def matrix_of(spec: BuiltinSpec, operand: str) -> tuple[str, tuple[int, int], str]:
    """(letter, shape, what) of the matrix the registers of ``operand`` ('a', 'b', 'c' or
    'index') hold, e.g. ('A', (16, 16), 'compressed 16x16 (M x K/2)'). A multi-block row's
    matrices stack its blocks along the rows (row b*M + i of A and C, b*K + k of B)."""
    if spec.blocks > 1 and operand in ("a", "b", "c"):
        letter, shape = operand.upper(), {"a": spec.a_shape, "b": spec.b_shape, "c": spec.c_shape}[operand]
        per = {"a": "M x K", "b": "K x N", "c": "M x N"}[operand]
        return letter, shape, (f"{spec.blocks} blocks of {per} stacked along the rows ({shape[0]}x{shape[1]}; "
                               f"row b*{shape[0] // spec.blocks} + i is row i of block b)")
    if operand == "a" and spec.dense:
        return "A", (spec.m, spec.k), f"dense {spec.m}x{spec.k} (M x K)"
    if operand in ("a", "index"):
        if spec.dense:
            raise ValueError(f"{spec.name} is dense: it has no index register (operands: a, b, c)")
        return "A", (spec.m, spec.kc), f"compressed {spec.m}x{spec.kc} (M x K/2)"
    if operand == "b":
        return "B", (spec.k, spec.n), f"dense {spec.k}x{spec.n} (K x N)"
    return "C", (spec.m, spec.n), f"{spec.m}x{spec.n} (M x N; D has the same layout)"


def _elem_type(spec: BuiltinSpec, operand: str) -> str:
    return {"a": spec.a_type, "b": spec.b_type, "c": spec.c_type}[operand]


def operand_note(spec: BuiltinSpec, operand: str, opsel: int = 0) -> str:
    """One line: the matrix an operand holds and how its elements fill the VGPRs (an opsel
    row's C: the half ``opsel`` picks)."""
    letter, _, what = matrix_of(spec, operand)
    if operand == "index":
        return f"index: idx[lane] (one int per lane) holds the 2-bit positions (0..3) of A {what}"
    op = {"a": spec.a, "b": spec.b, "c": spec.c}[operand]
    if operand == "c" and spec.opsel:
        n = spec.c_layout.shape[1]
        other = "C's" if spec.tied else "unspecified (jwmma: zero)"
        return (f"{letter}: {what}; {n} {spec.c_type} values per lane, one in each of {n} VGPRs, in the half opsel "
                f"picks (showing opsel={opsel}: bits {16 * opsel + 15}:{16 * opsel}, elements {opsel}, {opsel + 2}, "
                f"...); D's other half: {other}")
    vgprs = max(1, op.elems * op.elem_bits // 32)
    per = 32 // op.elem_bits
    pack = "one per VGPR" if per == 1 else f"{per} per VGPR" if 32 % op.elem_bits == 0 else \
        f"{op.elem_bits}-bit fields of one little-endian bit string"
    return (
        f"{letter}: {what}; {op.elems} {_elem_type(spec, operand)} elements per lane in "
        f"{vgprs} VGPR{'s' if vgprs > 1 else ''} ({pack}, low bits first)"
    )


def entries(spec: BuiltinSpec, operand: str, index_set: int = 0, opsel: int = 0) -> list[Entry]:
    """Every element of ``operand`` ('a', 'b', 'c' or 'index'), ordered by lane then e (an
    opsel row's C: the elements of half ``opsel``, 2t + opsel)."""
    operand = operand.lower()
    if operand not in OPERANDS:
        raise ValueError(f"operand must be one of {', '.join(OPERANDS)}, got {operand!r}")
    if operand == "index":
        matrix_of(spec, operand)  # refuses dense builtins
        s = spec.index_offset(index_set)
        layout, w, base = spec.a_layout, 2, s
    else:
        op = {"a": spec.a, "b": spec.b, "c": spec.c}[operand]
        layout = {"a": spec.a_layout, "b": spec.b_layout, "c": spec.c_layout}[operand]
        w, base = op.elem_bits, 0
    if opsel not in (0, 1) or (opsel and not (operand == "c" and spec.opsel)):
        raise ValueError(f"opsel picks the C/D half of the RDNA3 f16/bf16-output WMMA (0 or 1); got {opsel!r} "
                         f"for {spec.name} operand {operand}")
    elem = spec.c_elements(opsel) if operand == "c" else np.arange(layout.shape[1])
    out = []
    lanes, n, _ = layout.shape
    for lane in range(lanes):
        for t in range(n):
            e = int(elem[t]) if operand != "index" else t
            bit = base + e * w
            vgpr = 0 if operand == "index" else bit // 32
            lo = bit if operand == "index" else bit % 32
            out.append(Entry(operand, lane, e, vgpr, lo + w - 1, lo, int(layout[lane, t, 0]), int(layout[lane, t, 1])))
    return out


# ---------------------------------------------------------------------------- list view
def describe(spec: BuiltinSpec, en: Entry, index_set: int = 0) -> str:
    """One line: where the element sits and which matrix element it is (A lines name the
    index field of ``index_set``)."""
    where = f"lane {en.lane:2d}  elem {en.e:2d}"
    q = en.col // 2
    if en.operand == "index":
        bits = f"idx bits [{en.hi}:{en.lo}]"
        target = f"A[{en.row}][{en.col}]"
        return f"{where}  {bits:<17} -> position of {target:<9} (group q = {q}: dense k = {4 * q} + field)"
    letter = en.operand.upper()
    bits = f"v[{en.vgpr}] bits [{en.hi}:{en.lo}]"
    if en.hi > 31:  # a 6-bit element straddling two VGPRs (BUILTINS_DENSE.md 5.2)
        bits = f"v[{en.vgpr}] [31:{en.lo}] + v[{en.vgpr + 1}] [{en.hi - 32}:0]"
    target = f"{letter}[{en.row}][{en.col}]"
    if spec.blocks > 1:  # the stacked row as (block, row of the block)
        blk, r = divmod(en.row, spec.k if en.operand == "b" else spec.m)
        target = f"block {blk} {letter}[{r}][{en.col}]"
    line = f"{where}  {bits:<19} -> {target}"
    if en.operand == "a" and not spec.dense:
        s = spec.index_offset(index_set) + 2 * en.e
        line = (
            f"{where}  {bits:<19} -> {target:<9} (compressed; dense group q = {q}: "
            f"dense k = {4 * q} + idx[{en.lane}] bits [{s + 1}:{s}])"
        )
    return line


def render_list(spec: BuiltinSpec, operand: str, *, index_set: int = 0, lanes=None, element=None,
                opsel: int = 0) -> list[str]:
    """Header plus one line per element, optionally only some lanes or one matrix element (an
    opsel row's C in half ``opsel``)."""
    rows = entries(spec, operand, index_set, opsel)
    if lanes is not None:
        keep = set(lanes)
        rows = [r for r in rows if r.lane in keep]
    if element is not None:
        rows = [r for r in rows if (r.row, r.col) == tuple(element)]
    out = header(spec, operand, index_set, opsel)
    out.append("  elem = element of the HIP vector (for index: of the A vector); v[r] = r-th VGPR of the operand")
    out += [describe(spec, r, index_set) for r in rows]
    if not rows:
        out.append("(no element matches)")
    return out


def header(spec: BuiltinSpec, operand: str, index_set: int = 0, opsel: int = 0) -> list[str]:
    """The heading lines of a layout view: the builtin, its prototype, the operand."""
    holds = f"dense: A holds all K = {spec.k}" if spec.dense else f"K is the dense K; A holds K/2 = {spec.kc}"
    lines = [
        f"{spec.name}: {spec.arch}, wave{spec.wave}, {spec.m}x{spec.n}x{spec.k} ({holds} per row)",
        f"  {spec.signature()}",
        f"  {operand_note(spec, operand, opsel)}",
    ]
    if operand in ("a", "index") and len(spec.index_sets) > 1:
        s = spec.index_offset(index_set)
        lines.append(
            f"  {index_set_note(spec)}; showing set {index_set} (bits {s + 32 // spec.n_sets - 1}:{s}), "
            "--index-set picks"
        )
    elif operand in ("a", "index"):
        lines.append(f"  {index_set_note(spec)}")
    if operand == "index":
        lines.append("  the dense k of A[i][c] is 4*(c//2) + its 2-bit field")
    return lines


# ---------------------------------------------------------------------------- grid view
def render_grid(spec: BuiltinSpec, operand: str, *, index_set: int = 0, panel: int = 16, opsel: int = 0) -> list[str]:
    """A matrix-shaped table: each cell is 'lane:vgpr' (index view: 'lane:bit', the low bit
    of the 2-bit field in idx[lane]). Wide matrices are split into panels of ``panel``
    columns."""
    letter, (nr, nc), what = matrix_of(spec, operand)
    cells = np.empty((nr, nc), dtype=object)
    for en in entries(spec, operand, index_set, opsel):
        if cells[en.row, en.col] is None:  # a replicated A/B (RDNA3 WMMA): the copy read, lanes 0-15
            cells[en.row, en.col] = f"{en.lane}:{en.lo if operand == 'index' else en.vgpr}"
    row_name, col_name = {"A": ("i", "c"), "B": ("k", "j"), "C": ("i", "j")}[letter]
    if operand == "index":
        legend = f"cell = lane:bit, i.e. bits [bit+1:bit] of idx[lane] hold the position of A[{row_name}][{col_name}]"
    else:
        legend = f"cell = lane:vgpr holding {letter}[{row_name}][{col_name}] (the list view gives the bits)"
        if operand != "c" and spec.wave * (spec.a.elems if operand == "a" else spec.b.elems) > nr * nc:
            legend += f"; every 16-lane group holds a copy (lane + 16g), the emulator reads lanes 0-15"
    out = header(spec, operand, index_set, opsel) + [f"  {legend}"]
    width = max(5, max(len(str(x)) for x in cells.ravel())) + 1
    label = max(len(row_name) + len(str(nr - 1)) + 1, 4)
    for start in range(0, nc, panel):
        cols = range(start, min(nc, start + panel))
        out.append("")
        corner = row_name + "\\" + col_name
        out.append(f"{corner:>{label}}" + "".join(f"{c:>{width}}" for c in cols))
        for r in range(nr):
            out.append(f"{row_name}{r:<{label - len(row_name)}}" + "".join(f"{cells[r, c]:>{width}}" for c in cols))
    return out


def where_is(spec: BuiltinSpec, operand: str, row: int, col: int, index_set: int = 0, opsel: int = 0) -> Entry:
    """The entry holding matrix element (row, col) of ``operand`` (an opsel row's C in half ``opsel``)."""
    letter, (nr, nc), _ = matrix_of(spec, operand)
    if not (0 <= row < nr and 0 <= col < nc):
        raise ValueError(f"{letter} is {nr}x{nc}; element ({row}, {col}) is outside it")
    for en in entries(spec, operand, index_set, opsel):
        if (en.row, en.col) == (row, col):
            return en
    raise AssertionError("layout does not cover the matrix")  # pragma: no cover
