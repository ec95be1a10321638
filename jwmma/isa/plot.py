"""`jwmma.plot_layout`: a builtin's register layout drawn as a matrix-shaped grid, like the
figures of the RDNA4/CDNA4 builtin reference pages: every cell is one matrix element,
labelled with the lane and VGPR that hold it and coloured by lane group (lanes 0-15, 16-31,
...). matplotlib is an optional dependency (``pip install 'jwmma[plot]'``).
"""
from __future__ import annotations

import numpy as np

from ..keywords import strict_keywords
from . import view
from .table import lookup

__all__ = ["plot_layout", "require_matplotlib", "GROUP_COLOURS"]

#: one colour per lane group of 16 lanes (teal, rose, grey, gold: the reference pages use
#: teal/rose and grey)
GROUP_COLOURS = ("#7fc7bd", "#eba9b5", "#c9c9c9", "#f1d48a")


def require_matplotlib():
    """The pyplot module, with the non-interactive Agg backend unless one is already chosen
    (by the user, a matplotlibrc, MPLBACKEND, or a notebook, which picks its inline backend).

    Returns:
        ``matplotlib.pyplot``; raises ImportError with the install hint when matplotlib is
        missing.
    """
    try:
        import matplotlib
    except ImportError:
        raise ImportError(
            "jwmma's plots need matplotlib, an optional dependency: pip install 'jwmma[plot]' "
            "(or pip install matplotlib)"
        ) from None
    import sys

    if "matplotlib.pyplot" not in sys.modules and "ipykernel" not in sys.modules and not _backend_chosen(matplotlib):
        matplotlib.use("Agg")  # no GUI backend needed for drawing into files
    import matplotlib.pyplot as plt

    return plt


def _backend_chosen(matplotlib) -> bool:
    """Whether a backend was chosen before pyplot (MPLBACKEND, matplotlibrc, matplotlib.use)."""
    try:
        return matplotlib.get_backend(auto_select=False) is not None  # matplotlib >= 3.10
    except TypeError:
        return matplotlib.rcParams._get_backend_or_none() is not None  # older matplotlib


@strict_keywords
def plot_layout(name: str, operand: str = "a", *, index_set: int = 0, ax=None, labels: bool | None = None,
                group_size: int = 16, cell: float | None = None, fontsize: float | None = None):
    """Draw where each matrix element of ``operand`` lives in the registers of ``name``.

    Each cell reads ``L<lane>`` over ``v<vgpr>`` (index: ``b<bit>``); the colour is the lane
    group ``lane // group_size``.

    Args:
        name: the builtin.
        operand: 'a' (the compressed M x K/2 A matrix), 'b' (K x N), 'c' (or 'd': M x N) or
            'index' (A's 2-bit positions: cells show lane and bit offset in idx[lane]).
        index_set: the index set shown for 'a' and 'index'.
        ax: a matplotlib Axes to draw into (default: a new figure).
        labels: write the text in the cells (default: when the cells are big enough).
        group_size: lanes per colour; cell: inches per cell; fontsize: of the labels.
    Returns:
        The matplotlib Figure (matplotlib is optional: ImportError with the install hint).
    """
    plt = require_matplotlib()
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    spec = lookup(name)
    op = operand.lower()
    op = "c" if op == "d" else op
    if op not in view.OPERANDS:
        raise ValueError(f"operand must be one of a, b, c, d, index; got {operand!r}")
    letter, (nr, nc), what = view.matrix_of(spec, op)
    lane = np.full((nr, nc), -1)
    reg = np.full((nr, nc), -1)
    for en in view.entries(spec, op, index_set):
        lane[en.row, en.col] = en.lane
        reg[en.row, en.col] = en.lo if op == "index" else en.vgpr
    groups = -(-spec.lanes // group_size)
    colours = [GROUP_COLOURS[g % len(GROUP_COLOURS)] for g in range(groups)]

    if cell is None:  # inches per cell: readable, but the figure stays within ~16 x 16 in
        cell = min(0.5, 15.0 / max(nc, 1), 15.0 / max(nr, 1) * 1.4)
    if labels is None:
        labels = cell >= 0.3
    if fontsize is None:
        fontsize = max(3.5, min(8.0, cell * 15))
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(7.0, nc * cell + 1.5), max(2.5, nr * cell / 1.4 + 1.6)))
    else:
        fig = ax.figure
    ax.imshow(lane // group_size, cmap=ListedColormap(colours), vmin=-0.5, vmax=groups - 0.5,
              aspect="auto", interpolation="nearest")
    ax.set_xticks(np.arange(-0.5, nc, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, nr, 1), minor=True)
    ax.grid(which="minor", color="white", lw=0.6)
    ax.tick_params(which="minor", length=0)
    step_c = 1 if nc <= 32 else (4 if nc <= 128 else 8)
    step_r = 1 if nr <= 32 else (4 if nr <= 128 else 8)
    ax.set_xticks(np.arange(0, nc, step_c))
    ax.set_yticks(np.arange(0, nr, step_r))
    ax.tick_params(labelsize=7)
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    row_name, col_name = {"A": ("row i", "compressed column c (dense k = 4*(c//2) + index field)"),
                          "B": ("dense k", "column j"), "C": ("row i", "column j")}[letter]
    ax.set_ylabel(row_name)
    ax.set_xlabel(col_name, fontsize=8)
    if labels:
        second = "b" if op == "index" else "v"
        for r in range(nr):
            for c in range(nc):
                ax.text(c, r, f"L{lane[r, c]}\n{second}{reg[r, c]}", ha="center", va="center",
                        fontsize=fontsize, linespacing=0.9)
    kind = "index bits" if op == "index" else f"{op.upper()} operand"
    ax.set_title(f"{spec.name} ({spec.arch}, wave{spec.wave}): {kind}, {what}\n"
                 f"cell = lane L / {'bit offset b in idx[lane]' if op == 'index' else 'VGPR v of the operand'}",
                 fontsize=9)
    handles = [Patch(color=colours[g], label=f"lanes {g * group_size}-{min(spec.lanes, (g + 1) * group_size) - 1}")
               for g in range(groups)]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    fig.tight_layout()
    return fig
