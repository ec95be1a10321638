"""Aggregation over seeds: means with 95% Student-t intervals, and the summary table."""
from __future__ import annotations

import io
import math

import numpy as np

__all__ = ["METRICS", "KEY", "SUMMARY_KEY", "t975", "mean_ci", "aggregate", "percent", "format_table"]

METRICS = ("max_rel", "mean_rel", "bias", "fro_rel", "ident", "mean_ulp", "mean_abs_ulp", "max_abs_ulp",
           "nonfinite", "rn_mean_rel")


KEY = ("builtin", "format", "dist", "scaling", "model", "remedy", "K", "M", "N", "seed")
SUMMARY_KEY = KEY[:-1]

# two-sided 95% quantiles of Student's t, df = 1..30
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
         2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
         2.052, 2.048, 2.045, 2.042)


def t975(df: int) -> float:
    """The two-sided 95% quantile of Student's t with ``df`` degrees of freedom."""
    return _T975[df - 1] if df <= 30 else 1.96 + 2.5 / df


def mean_ci(values) -> tuple[float, float, float]:
    """(mean, lo, hi): 95% Student-t interval of the mean (lo = hi = mean for one value)."""
    v = np.asarray(values, np.float64)
    mean = float(v.mean())
    if v.size < 2 or not np.all(np.isfinite(v)):
        return mean, mean, mean
    half = t975(v.size - 1) * float(v.std(ddof=1)) / math.sqrt(v.size)
    return mean, mean - half, mean + half


def aggregate(points: list[dict]) -> list[dict]:
    """One row per point without its seed: mean and 95% interval of every metric over seeds,
    ``seeds`` = how many, ``ulp_hist`` summed."""
    groups: dict = {}
    for p in points:
        groups.setdefault(tuple(p[k] for k in SUMMARY_KEY), []).append(p)
    out = []
    for key, rows in groups.items():
        row = dict(zip(SUMMARY_KEY, key))
        row["steps"] = rows[0]["steps"]
        row["seeds"] = len(rows)
        for mname in METRICS:
            mean, lo, hi = mean_ci([r[mname] for r in rows])
            row[mname], row[f"{mname}_lo"], row[f"{mname}_hi"] = mean, lo, hi
        hist: dict = {}
        for r in rows:
            for b, c in r["ulp_hist"].items():
                hist[b] = hist.get(b, 0) + c
        row["ulp_hist"] = dict(sorted(hist.items(), key=lambda kv: int(kv[0])))
        out.append(row)
    return out


def percent(v: float) -> str:
    """A fraction as a percentage that never reads as a neighbour: "100%" and "0%" only when
    exact, otherwise as many digits as it takes to differ from them (99.98%, 0.024%)."""
    if v == 1.0:
        return "100%"
    if v == 0.0:
        return "0%"
    for digits in range(1, 10):
        text = f"{100 * v:.{digits}f}"
        if float(text) not in (0.0, 100.0):
            return text + "%"
    return f"{100 * v:.3g}%"


def format_table(summary: list[dict], metrics=("mean_rel", "max_rel", "bias", "ident", "mean_abs_ulp")) -> str:
    """Summary rows as aligned text: one line per (dist, format, model, remedy, K)."""
    head = ["dist", "format", "model", "remedy", "K", "seeds"] + list(metrics)
    lines = []
    for r in summary:
        cells = [r["dist"], r["format"], r["model"], r["remedy"], str(r["K"]), str(r["seeds"])]
        for mname in metrics:
            v = r[mname]
            if mname == "ident":
                cells.append(percent(v))
            elif mname in ("max_abs_ulp", "nonfinite"):
                cells.append(f"{v:.0f}")
            else:
                cells.append(f"{v:.3g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.2e}")
        lines.append(cells)
    widths = [max(len(h), *(len(c[i]) for c in lines)) if lines else len(h) for i, h in enumerate(head)]
    buf = io.StringIO()
    buf.write("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip() + "\n")
    for c in lines:
        buf.write("  ".join(x.ljust(w) for x, w in zip(c, widths)).rstrip() + "\n")
    return buf.getvalue()
