"""The transformer study's result as files and tables: ``results.json`` (everything),
``units.csv``, ``layers.csv``, ``context.csv``, ``training.csv`` and the figures
(`jwmma.study.transformer.figures`) by `write`; Markdown tables by `format_rows`.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from .figures import plot
from .model import CONTRACTIONS

__all__ = ["write", "format_rows"]

_UNIT_COLS = ("key", "label", "builtin", "target", "model", "scaling", "formats", "prune", "nll", "ppl", "bpb",
              "acc", "answer_acc", "top1_agree", "kl", "seconds")
_LAYER_COLS = ("key", "layer", "name", "k", "ref_norm", "quant", "accum", "total", "prune")
_CTX_COLS = ("key", "label", "context", "k", "queries", "quant", "accum", "total", "share")


def _csv(path, rows, cols):
    """``rows`` (dicts) as CSV with the columns ``cols``; floats as ``repr`` (every bit kept)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in rows:
        w.writerow([repr(r[c]) if isinstance(r.get(c), float) else r.get(c, "") for c in cols])
    Path(path).write_text(buf.getvalue())


def write(result: dict, out) -> list:
    """Write the result's files into the folder ``out`` (made when missing).

    Args:
        result: `jwmma.study.transformer.pipeline.run`'s result.
        out: the folder.
    Returns:
        The figures' paths (none without matplotlib; the JSON and CSV files are written anyway).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=1))
    _csv(out / "units.csv", result["rows"], _UNIT_COLS)
    _csv(out / "layers.csv", [dict(key=r["key"], **layer) for r in result["rows"] for layer in r["layers"]],
         _LAYER_COLS)
    _csv(out / "context.csv", result["context"], _CTX_COLS)
    tr = result.get("training")
    if tr:
        _csv(out / "training.csv", [dict(step=i + 1, loss_f32=a, loss_emulated=b) for i, (a, b) in
                                    enumerate(zip(tr["losses_f32"], tr["losses_emulated"]))],
             ("step", "loss_f32", "loss_emulated"))
    try:
        return plot(result, out)
    except ImportError:
        return []


def format_rows(result: dict) -> str:
    """Markdown tables: per unit the output metrics, then per contraction kind quantisation /
    accumulator errors, then the accumulator's share of the p @ v error per context.

    Args:
        result: `jwmma.study.transformer.pipeline.run`'s result (``f32``, ``rows``, ``context``).
    Returns:
        The tables, separated by blank lines.
    """
    f = result["f32"]
    lines = ["| unit | perplexity | bits/byte | top-1 agreement | KL (nats) | answer accuracy |",
             "|---|---|---|---|---|---|",
             f"| float32 | {f['ppl']:.4f} | {f['bpb']:.4f} | 1 | 0 | {f['answer_acc']:.4f} |"]
    for r in result["rows"]:
        lines.append(f"| {r['label']} | {r['ppl']:.4f} | {r['bpb']:.4f} | {r['top1_agree']:.4f} | {r['kl']:.2e} | "
                     f"{r['answer_acc']:.4f} |")
    names = [n for n in CONTRACTIONS + ("logits",) if result["rows"] and n in result["rows"][0]["kinds"]]
    if result["rows"]:
        ks = result["rows"][0]["kinds"]
        lines += ["", "| unit (quantisation / accumulator) | " + " | ".join(f"{n} (K {ks[n]['k']})" for n in names)
                  + " |", "|---|" + "---|" * len(names)]
        for r in result["rows"]:
            cells = []
            for n in names:
                v = r["kinds"][n]
                p = f" (prune {v['prune']:.2f})" if "prune" in v else ""
                cells.append(f"{v['quant']:.1e}{p} / {v['accum']:.1e}")
            lines.append(f"| {r['label']} | " + " | ".join(cells) + " |")
    ctx = result.get("context") or []
    lengths = sorted({c["context"] for c in ctx})
    if ctx:
        lines += ["", "| unit: accumulator / total error of p @ v | " + " | ".join(f"L = {n}" for n in lengths) + " |",
                  "|---|" + "---|" * len(lengths)]
        for key in dict.fromkeys(c["key"] for c in ctx):
            cs = {c["context"]: c for c in ctx if c["key"] == key}
            label = next(c["label"] for c in ctx if c["key"] == key)
            lines.append(f"| {label} | " + " | ".join(f"{cs[n]['share']:.1e}" for n in lengths) + " |")
    return "\n".join(lines)
