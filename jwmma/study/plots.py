"""Figures of the studies (matplotlib, an optional dependency: ``pip install 'jwmma[plot]'``).

A `jwmma.study` sweep: every ``plot_*`` function takes the study's summary rows
(`Study.summary`, or the rows of summary.json) and returns a matplotlib Figure; `save_figures`
writes the standard set as PNGs.

A trained network through the units (`jwmma.study.network`, `jwmma.study.transformer`): one
layout for both, one row per unit (or configuration) from top to bottom. `error_split_figure`
draws each row's error parts (quantisation, accumulator) as horizontal bars on a log axis, one
panel per layer or contraction; `rows_figure` gives the panels of per-row metrics;
`curves_figure` draws loss curves; `save_figure` writes a PNG.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..isa.plot import require_matplotlib
from .measures import U32

__all__ = ["plot_error_vs_k", "plot_bias_vs_k", "plot_ident_vs_k", "plot_ulp_hist", "save_figures",
           "require_matplotlib", "SPLIT_COLORS", "error_split_figure", "rows_figure", "curves_figure", "save_figure"]


def _series(rows, by=("model", "remedy")):
    """{label: rows sorted by K} grouping by the fields ``by`` (the remedy is left out of the
    label when every row has none)."""
    remedies = {r["remedy"] for r in rows}
    out: dict = {}
    for r in rows:
        parts = []
        for f in by:
            if f == "remedy" and remedies == {"none"}:
                continue
            parts.append(str(r[f]))
        out.setdefault(" / ".join(parts) or "all", []).append(r)
    return {k: sorted(v, key=lambda r: r["K"]) for k, v in out.items()}


def _panels(rows, panel_by=("dist", "format")):
    keys = []
    for r in rows:
        key = tuple(r[f] for f in panel_by)
        if key not in keys:
            keys.append(key)
    return keys


def _grid(plt, n, width=6.0, height=4.2):
    cols = min(n, 2)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    return fig, axes.ravel()


def _panel_axes(plt, rows, panel_by, ax=None, width=6.0):
    """(figure, [(axes, panel key, rows of the panel)]): one panel per value of ``panel_by``,
    or only the first one drawn into ``ax`` when given."""
    keys = _panels(rows, panel_by)
    if ax is not None:
        fig, axes = ax.figure, [ax]
        keys = keys[:1]
    else:
        fig, axes = _grid(plt, max(1, len(keys)), width=width)
    return fig, [(axx, key, [r for r in rows if tuple(r[f] for f in panel_by) == key])
                 for axx, key in zip(axes, keys)]


def plot_error_vs_k(summary, metric: str = "mean_rel", by=("model", "remedy"), panel_by=("dist", "format"),
                    ax=None, floor: float | None = None, title: str | None = None):
    """``metric`` (mean over seeds, shaded 95% interval) against K on log-log axes, one line
    per model (and remedy), one panel per (distribution, format). Zeros are drawn at
    ``floor`` (default: a decade below the smallest positive value) as down-pointing
    triangles, explained in the legend; a NaN (undefined) value is left out, never shown
    at the floor. The interval is shaded where its lower end is positive (a log axis cannot
    show 0: the shade stops there instead of dropping to the floor)."""
    plt = require_matplotlib()
    rows = [r for r in summary]
    fig, panels = _panel_axes(plt, rows, panel_by, ax)
    pos = [r[metric] for r in rows if r[metric] > 0 and np.isfinite(r[metric])]
    lo_val = floor if floor is not None else (min(pos) / 10 if pos else U32 / 10)
    for axx, key, sub in panels:
        any_zero = False
        for label, ser in _series(sub, by).items():
            k = np.array([r["K"] for r in ser], float)
            y = np.array([r[metric] for r in ser], float)
            lo = np.array([r.get(f"{metric}_lo", r[metric]) for r in ser], float)
            hi = np.array([r.get(f"{metric}_hi", r[metric]) for r in ser], float)
            yy = np.where(y > 0, y, np.where(y <= 0, lo_val, np.nan))  # NaN > 0 and NaN <= 0 are False
            line, = axx.plot(k, yy, "o-", label=label, ms=4)
            # a band whose lower end is 0 cannot be drawn on a log axis: shade only where it is
            # positive (no spurious drop to the floor)
            axx.fill_between(k, np.maximum(lo, lo_val), np.maximum(hi, lo_val), where=lo > 0, interpolate=False,
                             color=line.get_color(), alpha=0.13)
            zero = y <= 0
            if zero.any():
                axx.plot(k[zero], yy[zero], "v", color=line.get_color(), ms=7)
                any_zero = True
        if metric == "mean_rel" and all("rn_mean_rel" in r for r in sub):
            ks = sorted({r["K"] for r in sub})
            floor_y = [np.mean([r["rn_mean_rel"] for r in sub if r["K"] == kk]) for kk in ks]
            axx.plot(ks, floor_y, "k--", lw=1, label="correctly rounded f32 (floor)")
        if any_zero:  # what the triangles mean (a legend entry without data)
            axx.plot([], [], "v", color="grey", ms=7, label=f"0 (drawn at {lo_val:.0e})")
        axx.axhline(U32, color="grey", ls=":", lw=1)
        axx.text(min(r["K"] for r in sub), U32, " u = 2^-24", va="bottom",
                 fontsize=8, color="grey")
        axx.set_xscale("log", base=2)
        axx.set_yscale("log")
        axx.set_xlabel("K (dense GEMM depth)")
        axx.set_ylabel(_METRIC_LABEL.get(metric, metric))
        axx.set_title(title or f"{_METRIC_TITLE.get(metric, metric)} vs K: " + ", ".join(str(x) for x in key),
                      fontsize=10)
        axx.grid(True, which="major", alpha=0.3)
        _legend(axx)
    fig.tight_layout()
    return fig


def _legend(axx):
    """The legend inside the axes for a few series, outside (right of them) for many, so that
    it never covers the data."""
    n = len(axx.get_legend_handles_labels()[0])
    if n > 4:  # a column per 20 entries keeps a long legend within the figure's height
        axx.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, ncol=-(-n // 20))
    else:
        axx.legend(fontsize=8, loc="best")


_METRIC_TITLE = {  # every metric of `stats.METRICS`, in words
    "mean_rel": "mean relative error",
    "max_rel": "max relative error",
    "fro_rel": "normwise relative error",
    "bias": "bias",
    "mean_abs_ulp": "mean |ulp error|",
    "mean_ulp": "mean signed ulp error",
    "max_abs_ulp": "max |ulp error|",
    "ident": "bit-identical fraction",
    "nonfinite": "non-finite fraction",
    "rn_mean_rel": "mean relative error of the correctly rounded result",
}

_METRIC_LABEL = {
    "mean_rel": "mean |d - ref| / sum|a*b|",
    "max_rel": "max |d - ref| / sum|a*b|",
    "fro_rel": "||D - ref||_F / ||ref||_F",
    "bias": "mean (d - ref) / sum|a*b|",
    "mean_abs_ulp": "mean |ulp error| (ulps of D's format)",
    "ident": "fraction bit-identical",
    "mean_ulp": "mean (d - ref) in ulps of D's format",
    "max_abs_ulp": "max |d - ref| in ulps of D's format",
    "nonfinite": "fraction of outputs NaN or Inf",
    "rn_mean_rel": "mean |rn(ref) - ref| / sum|a*b|",
}


def plot_bias_vs_k(summary, by=("model", "remedy"), panel_by=("dist", "format"), ax=None, units: str = "u"):
    """Mean signed relative error (bias) against K (log x), with 95% intervals; y in units
    of u = 2**-24 (``units='u'``) or plain ('rel'), on a symmetric-log axis."""
    plt = require_matplotlib()
    rows = list(summary)
    fig, panels = _panel_axes(plt, rows, panel_by, ax)
    div = U32 if units == "u" else 1.0
    for axx, key, sub in panels:
        for label, ser in _series(sub, by).items():
            k = np.array([r["K"] for r in ser], float)
            y = np.array([r["bias"] for r in ser]) / div
            lo = np.array([r["bias_lo"] for r in ser]) / div
            hi = np.array([r["bias_hi"] for r in ser]) / div
            line, = axx.plot(k, y, "o-", label=label, ms=4)
            axx.fill_between(k, lo, hi, color=line.get_color(), alpha=0.13)
        axx.axhline(0, color="grey", lw=1)
        axx.set_xscale("log", base=2)
        axx.set_yscale("symlog", linthresh=1e-3 if units == "u" else 1e-10)
        axx.set_xlabel("K (dense GEMM depth)")
        axx.set_ylabel("bias: mean (d - ref) / sum|a*b|" + (" [units of u = 2^-24]" if units == "u" else ""))
        axx.set_title("bias vs K: " + ", ".join(str(x) for x in key), fontsize=10)
        axx.grid(True, alpha=0.3)
        _legend(axx)
    fig.tight_layout()
    return fig


def plot_ident_vs_k(summary, by=("model", "remedy"), panel_by=("dist", "format"), ax=None):
    """Percentage of outputs bit-identical to the correctly rounded f32 result against K (log x),
    with 95% intervals, one line per model (and remedy), one panel per (distribution, format)."""
    plt = require_matplotlib()
    rows = list(summary)
    fig, panels = _panel_axes(plt, rows, panel_by, ax)
    for axx, key, sub in panels:
        for label, ser in _series(sub, by).items():
            k = np.array([r["K"] for r in ser], float)
            y = 100 * np.array([r["ident"] for r in ser])
            line, = axx.plot(k, y, "o-", label=label, ms=4)
            # a fraction's interval stays within 0..100%
            axx.fill_between(k, np.clip(100 * np.array([r["ident_lo"] for r in ser]), 0, 100),
                             np.clip(100 * np.array([r["ident_hi"] for r in ser]), 0, 100),
                             color=line.get_color(), alpha=0.13)
        axx.set_xscale("log", base=2)
        axx.set_xlabel("K (dense GEMM depth)")
        axx.set_ylabel("% outputs = correctly rounded result")
        axx.set_title("bit-identical outputs vs K: " + ", ".join(str(x) for x in key), fontsize=10)
        axx.grid(True, alpha=0.3)
        _legend(axx)
    fig.tight_layout()
    return fig


def _bin_label(b: int) -> str:
    if b == 0:
        return "0"
    lo = 1 << (abs(b) - 1)
    return ("-" if b < 0 else "") + (f"{lo}" if abs(b) == 1 else f"{lo}..{2 * lo - 1}")


def plot_ulp_hist(summary, k=None, by=("model", "remedy"), panel_by=("dist", "format"), ax=None):
    """Histogram of the signed f32 ulp error (log2 bins: 0, +-1, +-2..3, +-4..7, ...) of
    every output at depth ``k`` (default: the largest K), summed over seeds; one group of bars
    per model (and remedy), fraction of outputs on the y axis."""
    plt = require_matplotlib()
    rows = list(summary)
    if k is None:
        k = max(r["K"] for r in rows)
    rows = [r for r in rows if r["K"] == k]
    if not rows:
        raise ValueError(f"no summary row has K={k}")
    fig, panels = _panel_axes(plt, rows, panel_by, ax, width=7.0)
    for axx, key, sub in panels:
        series = {lab: ser[0] for lab, ser in _series(sub, by).items()}
        bins = sorted({int(b) for r in series.values() for b in r["ulp_hist"]})
        if not bins:
            continue
        bins = list(range(min(bins), max(bins) + 1))
        width = 0.8 / max(1, len(series))
        x = np.arange(len(bins))
        for i, (label, r) in enumerate(series.items()):
            total = sum(r["ulp_hist"].values()) or 1
            h = np.array([r["ulp_hist"].get(str(b), 0) for b in bins], float) / total
            axx.bar(x + (i - (len(series) - 1) / 2) * width, h, width, label=label)
        axx.set_xticks(x)
        axx.set_xticklabels([_bin_label(b) for b in bins], rotation=60, fontsize=7)
        axx.set_xlabel("d - ref in ulps of D's format (log2 bins)")
        axx.set_yscale("log")
        axx.set_ylabel("fraction of outputs (log)")
        axx.set_title(f"ulp error at K={k}: " + ", ".join(str(x) for x in key), fontsize=10)
        _legend(axx)
        axx.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def save_figures(summary, out_dir: str, prefix: str = "", dpi: int = 110) -> list[str]:
    """error_vs_k.png, max_error_vs_k.png, bias_vs_k.png, ident_vs_k.png, ulp_hist.png under
    ``out_dir``; returns their paths."""
    plt = require_matplotlib()
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for name, fig in (
        ("error_vs_k", plot_error_vs_k(summary, "mean_rel")),
        ("max_error_vs_k", plot_error_vs_k(summary, "max_rel")),
        ("bias_vs_k", plot_bias_vs_k(summary)),
        ("ident_vs_k", plot_ident_vs_k(summary)),
        ("ulp_hist", plot_ulp_hist(summary)),
    ):
        path = os.path.join(out_dir, f"{prefix}{name}.png")
        fig.savefig(path, dpi=dpi)
        plt.close(fig)
        written.append(path)
    return written


# ---------------------------------------------------------- a trained network through the units
#: the colours of the error split: quantisation (and pruning), quantisation alone, accumulator
SPLIT_COLORS = dict(quant="#4c72b0", quant_only="#8172b3", accum="#dd8452")
#: where a zero error is drawn on a log axis (left of every axis range the figures use)
_ZERO = 1e-12


def rows_figure(labels, panels: int = 1, width: float = 7.0):
    """A figure of ``panels`` panels side by side sharing the y axis, one row per label, the
    first on top; every panel has a light grid along x.

    Args:
        labels: the rows' names (units or configurations).
        panels: how many panels.
        width: the figure's width in inches (the height grows with the rows).
    Returns:
        ``(figure, axes)``: the Figure and a list of ``panels`` Axes; row i is at y = i.
    """
    plt = require_matplotlib()
    fig, axes = plt.subplots(1, panels, figsize=(width, 0.3 * len(labels) + 1.8), sharey=True, squeeze=False)
    axes = list(axes[0])
    axes[0].set_yticks(np.arange(len(labels)), labels)
    axes[0].invert_yaxis()  # an axis stays inverted when later bars rescale it
    for ax in axes:
        ax.grid(axis="x", alpha=0.3)
    return fig, axes


def error_split_figure(labels, panels, *, title: str, xlim, xlabel: str | None = None, panel_width: float = 4.2):
    """Each row's error parts side by side as horizontal bars on a log axis, one panel per layer
    or contraction.

    Args:
        labels: the rows' names (units or configurations), drawn top to bottom.
        panels: one ``(panel title, bars)`` per panel; ``bars``: ``[(legend label, colour,
            values)]`` with one float >= 0 per row (a zero is drawn at 1e-12, left of ``xlim``:
            a log axis has no 0).
        title: the figure's title.
        xlim: the log x axis' range ``(lo, hi)``.
        xlabel: every panel's x label, or None.
        panel_width: inches per panel.
    Returns:
        The Figure (the legend in the last panel).
    """
    fig, axes = rows_figure(labels, len(panels), panel_width * len(panels))
    ypos = np.arange(len(labels))
    for ax, (panel_title, bars) in zip(axes, panels):
        height = 0.8 / len(bars)
        for i, (label, color, values) in enumerate(bars):
            ax.barh(ypos + (i - (len(bars) - 1) / 2) * height, np.maximum(np.asarray(values, float), _ZERO), height,
                    color=color, label=label)
        ax.set_xscale("log")
        ax.set_xlim(*xlim)
        ax.set_title(panel_title, fontsize=10)
        if xlabel:
            ax.set_xlabel(xlabel)
    axes[-1].legend(loc="lower right", fontsize=7)
    fig.suptitle(title, fontsize=10)
    return fig


def curves_figure(curves, *, xlabel: str, ylabel: str, title: str | None = None):
    """Curves against 1, 2, ... (training steps or epochs).

    Args:
        curves: ``[(legend label or None, values, matplotlib format string)]``.
        xlabel, ylabel, title: the axes' words (a legend only when some curve has a label).
    Returns:
        The Figure.
    """
    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for label, values, fmt in curves:
        ax.plot(np.arange(1, len(values) + 1), values, fmt, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    if any(label for label, _, _ in curves):
        ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig


def save_figure(fig, path, dpi: int = 110) -> Path:
    """Lay ``fig`` out, write it as a PNG and close it.

    Returns:
        ``path`` as a Path.
    """
    plt = require_matplotlib()
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return Path(path)
