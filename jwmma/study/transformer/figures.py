"""The transformer study's figures (PNG, matplotlib), in `jwmma.study.plots`' layout for a trained
network through the units: the per-contraction error split per unit, the output metrics per
unit, the accumulator's share against the context, and the training curves.
"""
from __future__ import annotations

from pathlib import Path

from ..plots import SPLIT_COLORS, curves_figure, error_split_figure, require_matplotlib, rows_figure, save_figure
from .model import CONTRACTIONS

__all__ = ["plot"]


def _layer_errors(rows):
    names = [n for n in CONTRACTIONS + ("logits",) if n in rows[0]["kinds"]]
    panels = [(f"{n} (K = {rows[0]['kinds'][n]['k']})",
               [("quantisation (+ 2:4 pruning)", SPLIT_COLORS["quant"], [r["kinds"][n]["quant"] for r in rows]),
                ("accumulator (model vs exact)", SPLIT_COLORS["accum"], [r["kinds"][n]["accum"] for r in rows])])
              for n in names]
    return error_split_figure([r["label"] for r in rows], panels, xlim=(1e-10, 3), panel_width=2.9,
                              title="Per-contraction error of the transformer through each unit (||error||_F / "
                                    "||float64||_F, float32 network's operands, all blocks)")


def _outputs(rows, f32):
    fig, axes = rows_figure([r["label"] for r in rows], 3, width=13)
    ypos = range(len(rows))
    axes[0].barh(ypos, [r["ppl"] for r in rows], color="#55a868")
    axes[0].axvline(f32["ppl"], color="k", ls="--", lw=1, label=f"float32 {f32['ppl']:.3f}")
    axes[0].set_xlabel("perplexity (per byte)")
    axes[0].set_xscale("log")
    axes[0].legend(fontsize=8)
    axes[1].barh(ypos, [100 * (1 - r["top1_agree"]) for r in rows], color="#c44e52")
    axes[1].set_xlabel("top-1 disagreement with float32 (%)")
    axes[2].barh(ypos, [max(r["kl"], 1e-12) for r in rows], color="#8172b3")
    axes[2].set_xscale("log")
    axes[2].set_xlabel("KL(float32 || unit), nats per byte")
    return fig


def _context(ctx):
    plt = require_matplotlib()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for key in dict.fromkeys(c["key"] for c in ctx):
        cs = sorted((c for c in ctx if c["key"] == key), key=lambda c: c["context"])
        if all(c["accum"] == 0 for c in cs):  # nothing to draw on a log axis (the exact unit)
            continue
        x = [c["context"] for c in cs]
        line, = axes[0].plot(x, [c["share"] for c in cs], "o-", label=cs[0]["label"])
        axes[1].plot(x, [c["accum"] for c in cs], "o-", color=line.get_color())
        axes[1].plot(x, [c["quant"] for c in cs], ":", color=line.get_color())
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("context length L (K of p @ v)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accumulator / total error of p @ v")
    axes[1].set_ylabel("relative error: accumulator (solid), quantisation (dotted)")
    if axes[0].get_legend_handles_labels()[0]:  # every unit with a nonzero accumulator error
        axes[0].legend(fontsize=7)
    return fig


def _training(tr):
    back = tr["backward"]
    emulated = (f"forward {tr['forward']['builtin']} ({tr['forward']['scaling']}), "
                f"backward {back['builtin'] + ' (' + back['scaling'] + ')' if back else 'float32'}")
    return curves_figure([("float32", tr["losses_f32"], "-"), (emulated, tr["losses_emulated"], "-")],
                         xlabel="training step", ylabel="training loss (nats per byte)")


def plot(result: dict, out) -> list:
    """Write the figures of `jwmma.study.transformer.pipeline.run`'s result (those it has data for).

    Args:
        result: the study's result dict (``rows``, ``f32``, ``context``, ``training``).
        out: the folder to write into.
    Returns:
        The paths written: transformer_layer_errors.png, transformer_outputs.png,
        transformer_context.png, transformer_training.png.
    """
    out = Path(out)
    rows = result["rows"]
    paths = []
    if rows:
        paths.append(save_figure(_layer_errors(rows), out / "transformer_layer_errors.png"))
        paths.append(save_figure(_outputs(rows, result["f32"]), out / "transformer_outputs.png"))
    if result.get("context"):
        paths.append(save_figure(_context(result["context"]), out / "transformer_context.png"))
    if result.get("training"):
        paths.append(save_figure(_training(result["training"]), out / "transformer_training.png"))
    return paths
