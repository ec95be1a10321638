"""The study figures say what the data say (issue #10 item 13): zero-error points stay visible on
log axes (drawn at a floor, marked, explained), confidence bands with a zero lower end do not
run down to the floor (the spurious vertical line), legends of many series sit outside the axes
(never over data), and titles are words, not variable names.

Tested through the matplotlib Figure objects (Agg backend) on summary rows built by the study's
own `aggregate` from synthetic points: no emulation, so the file runs in a few seconds.
"""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from jwmma.study import plots, stats

# matplotlib is imported where a test draws, not at collection in each test process
# (`jwmma.study.plots` imports it itself when it draws)
pytestmark = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib")

KS = (128, 256, 512, 1024, 2048)


@pytest.fixture(autouse=True)
def _close_figures():
    import matplotlib

    matplotlib.use("Agg")  # before this file's figures are drawn
    import matplotlib.pyplot as plt

    yield
    plt.close("all")


def points(models=("exact", "cdna3"), dists=("normal",), seeds=3, value=None):
    """Synthetic study points; ``value(model, dist, K, seed) -> float`` sets every metric
    (default: distinct positive values)."""
    out = []
    for d in dists:
        for mi, m in enumerate(models):
            for K in KS:
                for s in range(seeds):
                    v = value(m, d, K, s) if value else (1 + mi) * 1e-7 * (1 + 0.1 * s) * K / 128
                    p = dict(builtin="smfmac_f32_16x16x128_fp8_fp8", format="fp8", dist=d, scaling="row",
                             model=m, remedy="none", K=K, M=16, N=16, seed=s, steps=K // 128)
                    for name in stats.METRICS:
                        p[name] = v
                    p["ident"] = 0.5
                    p["ulp_hist"] = {"0": 10, "1": 3, "-1": 2, "3": 1}
                    out.append(p)
    return out


def line_of(ax, label):
    (line,) = [ln for ln in ax.get_lines() if ln.get_label() == label]
    return line


# ------------------------------------------------------------------- zeros on log axes
def test_zero_error_points_stay_visible_at_a_marked_floor():
    def value(m, d, K, s):
        return 0.0 if (m == "exact" and K in (128, 256)) else 1e-7 * K / 128

    rows = stats.aggregate(points(value=value))
    fig = plots.plot_error_vs_k(rows, "mean_rel")
    (ax,) = fig.axes
    assert ax.get_yscale() == "log" and ax.get_xscale() == "log"
    exact = line_of(ax, "exact")
    x, y = (np.asarray(v, float) for v in exact.get_data())
    assert list(x) == list(KS)  # every K is drawn, the zeros too
    positive = min(r["mean_rel"] for r in rows if r["mean_rel"] > 0)
    floor = y[0]
    assert y[1] == floor and 0 < floor < positive  # both zeros at one floor, below every value
    assert np.all(y[2:] > floor)
    # the zeros are marked (triangles in the series' colour) and the legend says what they are
    marks = [ln for ln in ax.get_lines() if ln.get_marker() == "v" and len(ln.get_xdata())]
    assert len(marks) == 1 and list(marks[0].get_xdata()) == [128, 256]
    assert marks[0].get_color() == exact.get_color()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("0 (drawn at") for t in labels), labels
    # the floor is inside the visible y range
    lo, hi = ax.get_ylim()
    assert lo < floor < hi


def test_explicit_floor_and_nan_values():
    """floor= is where zeros go; a NaN value is not a zero: it is left out, not put at the floor."""
    def value(m, d, K, s):
        if K == 128:
            return 0.0
        return float("nan") if K == 512 else 1e-6

    rows = stats.aggregate(points(models=("cdna3",), value=value))
    ax = plots.plot_error_vs_k(rows, "max_rel", floor=1e-9).axes[0]
    y = np.asarray(line_of(ax, "cdna3").get_ydata(), float)
    assert y[0] == 1e-9 and np.isnan(y[2]) and np.all(y[[1, 3, 4]] == 1e-6)


def test_no_zero_no_zero_legend_entry():
    ax = plots.plot_error_vs_k(stats.aggregate(points())).axes[0]
    assert not any(t.get_text().startswith("0 (") for t in ax.get_legend().get_texts())


# ------------------------------------------------------------------- confidence bands
def _band_vertices(ax):
    from matplotlib.collections import PolyCollection

    polys = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert polys
    return np.concatenate([p.vertices for c in polys for p in c.get_paths()])


def test_band_with_a_zero_lower_end_does_not_run_to_the_floor():
    """Seeds 0 at one K make the interval's lower end <= 0 there: no shade at that K (no
    vertical line down to the floor), the shade elsewhere as computed."""
    def value(m, d, K, s):
        if K == 512:  # mean > 0 but a wide interval reaching below 0
            return [0.0, 0.0, 3e-6][s]
        return 1e-6 * (1 + 0.1 * s)

    rows = stats.aggregate(points(models=("cdna3",), value=value))
    r512 = next(r for r in rows if r["K"] == 512)
    assert r512["mean_rel"] > 0 and r512["mean_rel_lo"] < 0  # the case of the fix
    fig = plots.plot_error_vs_k(rows)
    ax = fig.axes[0]
    floor = np.asarray(line_of(ax, "cdna3").get_ydata(), float)  # no zeros: all the data
    assert np.all(floor > 0)
    v = _band_vertices(ax)
    lowest_lo = min(r["mean_rel_lo"] for r in rows if r["mean_rel_lo"] > 0)
    assert v[:, 1].min() >= lowest_lo * (1 - 1e-12)  # nothing below the lowest positive end
    assert 512 not in set(v[:, 0])  # no shade at the K whose interval reaches 0
    for k in (128, 256, 1024, 2048):  # shaded where the interval is positive
        assert k in set(v[:, 0])
    # each shaded K spans exactly its interval
    for r in rows:
        if r["K"] != 512:
            ys = v[v[:, 0] == r["K"], 1]
            assert np.isclose(ys.min(), r["mean_rel_lo"]) and np.isclose(ys.max(), r["mean_rel_hi"])


def test_ident_band_stays_within_0_and_100_percent():
    pts = points(models=("cdna3",))
    for p in pts:
        p["ident"] = [0.0, 0.0, 0.9][p["seed"]] if p["K"] == 256 else [0.97, 1.0, 1.0][p["seed"]]
    rows = stats.aggregate(pts)
    assert any(r["ident_lo"] < 0 for r in rows) and any(r["ident_hi"] > 1 for r in rows)
    v = _band_vertices(plots.plot_ident_vs_k(rows).axes[0])
    assert v[:, 1].min() >= 0 and v[:, 1].max() <= 100


# ------------------------------------------------------------------- legends
MANY = tuple(f"FusedGroups(group={g})" for g in (2, 4, 8, 16, 32, 64)) + ("exact",)


def _legend_boxes(fig):
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    axes = [a for a in fig.axes if a.get_visible()]
    return axes, [(a, a.get_legend().get_window_extent(renderer)) for a in axes if a.get_legend()]


@pytest.mark.parametrize("draw", [plots.plot_error_vs_k, plots.plot_bias_vs_k, plots.plot_ident_vs_k,
                                  plots.plot_ulp_hist])
def test_many_series_legend_is_outside_every_axes(draw):
    rows = stats.aggregate(points(models=MANY, dists=("normal", "uniform"), seeds=2))
    fig = draw(rows)  # two panels side by side: the left one's legend must not cover the right one
    axes, boxes = _legend_boxes(fig)
    assert len(boxes) == 2
    fig_box = fig.bbox
    for ax, box in boxes:
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert labels[:len(MANY)] == list(MANY)  # (then the error figure's rounding floor)
        for other in axes:  # covers no panel's data area, its own or a neighbour's
            assert not box.overlaps(other.bbox), (ax.get_title(), other.get_title())
        # and is not cut off by the figure's edge
        assert box.x0 >= fig_box.x0 - 1 and box.x1 <= fig_box.x1 + 1
        assert box.y0 >= fig_box.y0 - 1 and box.y1 <= fig_box.y1 + 1


def test_few_series_legend_stays_inside_the_axes():
    fig = plots.plot_error_vs_k(stats.aggregate(points(models=("exact", "cdna3"))))
    (ax,), ((_, box),) = _legend_boxes(fig)
    assert ax.bbox.x0 <= box.x0 and box.x1 <= ax.bbox.x1 and ax.bbox.y0 <= box.y0 and box.y1 <= ax.bbox.y1


# ------------------------------------------------------------------- titles
@pytest.mark.parametrize("metric", stats.METRICS)
def test_error_titles_and_labels_are_words(metric):
    rows = stats.aggregate(points(dists=("student_t",)))
    ax = plots.plot_error_vs_k(rows, metric).axes[0]
    title = ax.get_title()
    words = title.split(" vs K")[0]
    assert words != metric or metric == "bias", title  # 'ident' -> 'bit-identical fraction'...
    if "_" in metric:  # an identifier such as mean_rel is in neither the title nor the y label
        assert metric not in title and metric not in ax.get_ylabel(), (title, ax.get_ylabel())
    assert title.endswith("vs K: student_t, fp8")  # the panel's values, named after the words
    assert plots.plot_error_vs_k(rows, metric, title="my title").axes[0].get_title() == "my title"


def test_other_figures_titles_are_words():
    rows = stats.aggregate(points())
    titles = [plots.plot_bias_vs_k(rows).axes[0].get_title(), plots.plot_ident_vs_k(rows).axes[0].get_title(),
              plots.plot_ulp_hist(rows).axes[0].get_title()]
    assert titles == ["bias vs K: normal, fp8", "bit-identical outputs vs K: normal, fp8",
                      "ulp error at K=2048: normal, fp8"]
    for draw in (plots.plot_bias_vs_k, plots.plot_ident_vs_k, plots.plot_ulp_hist):
        for ax in draw(rows).axes:
            for text in (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()):
                assert not any(name in text for name in stats.METRICS + ("ulp_hist",) if "_" in name), text


def test_save_figures_writes_every_figure(tmp_path):
    rows = stats.aggregate(points(seeds=2))
    paths = plots.save_figures(rows, str(tmp_path))
    assert [p.rsplit("/", 1)[1] for p in paths] == ["error_vs_k.png", "max_error_vs_k.png", "bias_vs_k.png",
                                                    "ident_vs_k.png", "ulp_hist.png"]
    assert all((tmp_path / p.rsplit("/", 1)[1]).stat().st_size > 5000 for p in paths)
