"""A trained network through the emulated matrix units (``jwmma study-net``).

The question: does a unit's arithmetic change a model? A multilayer perceptron is trained in
float32 on real data, then evaluated with every linear layer through `jwmma.matmul` for each
(builtin, model) pair of `CONFIGS`, and fine-tuned 2:4-sparse with the emulated forward pass.

Data: scikit-learn's handwritten digits (`sklearn.datasets.load_digits`: 1797 8x8 images of
43 writers, 10 classes, UCI "Optical Recognition of Handwritten Digits"). They ship inside the
scikit-learn wheel, so the study needs no download (the machines that run it reach package
registries only), and they are real handwriting, not synthetic data. The 8x8 images are
upsampled (bilinear) to ``upsample`` x ``upsample`` pixels so that the first layer's K is in
the hundreds or thousands; the hidden layers are ``hidden`` wide (K of the second and third
layers). Split: a seeded stratified 80/20 train/test split.

Measures (per configuration):

* ``accuracy``: test accuracy with every layer through jwmma (activations propagate through
  the emulated layers; biases and ReLU in float32);
* per layer, on the float32 network's own inputs to that layer (so that each layer's error is
  its own), normwise relative errors of the layer's product x @ w against the float64 product
  of the original (unpruned, unquantised) operands, ``ref`` = ||x64 @ w64||_F:
  ``quant`` = ||exact - ref64|| / ||ref64|| (the builtin's ``exact`` model on the same pruned,
  quantised operands: what pruning and quantisation cost), ``prune`` = ||x64 @ prune(w)64 -
  ref64|| / ||ref64|| (the pruning part of it alone, float64), ``quant_only`` = ||x_eff @
  w_eff - x64 @ prune(w)64|| / ||ref64|| (the quantisation part alone: the effective operands'
  product in float64 against the pruned float64 product), ``accum`` = ||model - exact|| /
  ||ref64|| (what the accumulator adds on the same operands), ``total`` = ||model - ref64|| /
  ||ref64||.

Fine-tuning: the trained weights are pruned 2:4 along K (accuracy drops), then trained for a
few epochs with every forward matmul through `jwmma.matmul` (fp8, row scaling, prune=True:
the 2:4 mask is recomputed from the current weights at every step) and the straight-through
backward pass (dense float32 gradients), and evaluated again through jwmma.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ..quant import matmul
from .plots import SPLIT_COLORS, curves_figure, error_split_figure, rows_figure, save_figure

__all__ = ["CONFIGS", "FINETUNE_CONFIG", "FORMAT_BUILTINS", "Config", "configs", "load_digits_data", "init_mlp", "forward", "train",
           "evaluate", "finetune_sparse", "prune_params", "run", "format_rows", "plot"]

#: input format -> (CDNA4 gfx950 SMFMAC builtin, RDNA4 gfx12 SWMMAC builtin)
FORMAT_BUILTINS = {
    "fp8": ("smfmac_f32_16x16x128_fp8_fp8", "swmmac_f32_16x16x32_fp8_fp8_w32"),
    "bf8": ("smfmac_f32_16x16x128_bf8_bf8", "swmmac_f32_16x16x32_bf8_bf8_w32"),
    "f16": ("smfmac_f32_16x16x64_f16", "swmmac_f32_16x16x32_f16_w32"),
    "bf16": ("smfmac_f32_16x16x64_bf16", "swmmac_f32_16x16x32_bf16_w32"),
}
#: models run on the CDNA4 builtin (cdna3: MMA-Sim's algorithm; fma_chain: rocjitsu's f32 chain;
#: nvidia_hopper: for comparison, another vendor's fused dot-add on the same operands) and on
#: the RDNA4 builtin (gfx12_dot4: rocjitsu's measured gfx1201 step); exact on both
CDNA4_MODELS = ("exact", "cdna3", "fma_chain", "nvidia_hopper")
RDNA4_MODELS = ("exact", "gfx12_dot4")


@dataclasses.dataclass(frozen=True)
class Config:
    """One evaluated configuration: input format, builtin, model and scaling (row for the
    8-bit formats and f16; none for bf16, whose row factors would overflow the f32
    accumulator and which has float32's range anyway)."""

    fmt: str
    builtin: str
    model: str
    scaling: str

    @property
    def label(self) -> str:
        unit = "CDNA4" if self.builtin.startswith("smfmac") else "RDNA4"
        return f"{self.fmt} {unit} {self.model}"


def configs(formats=tuple(FORMAT_BUILTINS), cdna4_models=CDNA4_MODELS, rdna4_models=RDNA4_MODELS) -> list[Config]:
    """Every (format, builtin, model) of the study, in table order."""
    out = []
    for f in formats:
        cdna4, rdna4 = FORMAT_BUILTINS[f]
        scaling = "none" if f == "bf16" else "row"
        out += [Config(f, cdna4, m, scaling) for m in cdna4_models]
        out += [Config(f, rdna4, m, scaling) for m in rdna4_models]
    return out


CONFIGS = tuple(configs())
#: the fine-tuning run's forward pass: CDNA4 fp8 under its default model
FINETUNE_CONFIG = Config("fp8", FORMAT_BUILTINS["fp8"][0], "cdna3", "row")


# ------------------------------------------------------------------------------------ data
def load_digits_data(upsample: int = 32, seed: int = 0, test_fraction: float = 0.2):
    """(x_train, y_train, x_test, y_test): images as float32 rows of upsample**2 pixels in
    [0, 1] (bilinear from 8x8), labels int32. Needs scikit-learn (extra ``network``)."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise ImportError("the network study's data ship with scikit-learn: pip install 'jwmma[network]' "
                          "(or pip install scikit-learn)") from e
    digits = load_digits()
    images = digits.images.astype(np.float32) / 16.0
    labels = digits.target.astype(np.int32)
    if upsample != 8:
        images = np.asarray(jax.image.resize(jnp.asarray(images), (len(images), upsample, upsample), "bilinear"))
    x = images.reshape(len(images), -1).astype(np.float32)
    rng = np.random.default_rng(seed)
    test = np.zeros(len(labels), bool)
    for c in range(10):  # stratified split
        idx = np.flatnonzero(labels == c)
        test[rng.choice(idx, int(round(test_fraction * len(idx))), replace=False)] = True
    return x[~test], labels[~test], x[test], labels[test]


# ------------------------------------------------------------------------------------ model
def init_mlp(key, sizes) -> list:
    """[(w (K, N) float32, b (N,) float32)] for layer sizes (in, hidden..., out): He-normal
    weights, zero biases."""
    params = []
    for k_in, k_out in zip(sizes[:-1], sizes[1:]):
        key, sub = jax.random.split(key)
        params.append((jax.random.normal(sub, (k_in, k_out), jnp.float32) * np.float32(math.sqrt(2.0 / k_in)),
                       jnp.zeros((k_out,), jnp.float32)))
    return params


def dense_matmul(x, w):
    """The float32 reference product (precision HIGHEST: no TF32 on GPUs)."""
    return jnp.dot(x, w, precision=jax.lax.Precision.HIGHEST)


def forward(params, x, mm=dense_matmul, collect: bool = False):
    """Logits of the MLP (ReLU between layers); with ``collect`` also each layer's input."""
    inputs = []
    h = x
    for i, (w, b) in enumerate(params):
        inputs.append(h)
        h = mm(h, w) + b
        if i < len(params) - 1:
            h = jax.nn.relu(h)
    return (h, inputs) if collect else h


def _loss(params, x, y, mm):
    logits = forward(params, x, mm)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


_B1, _B2 = 0.9, 0.999


def _adam_step(params, grads, state, lr, corr, b1=_B1, b2=_B2, eps=1e-8):
    """One Adam update; ``corr`` = sqrt(1 - b2**t) / (1 - b1**t), the bias correction of step t."""
    m, v = state
    m = jax.tree_util.tree_map(lambda a, g: b1 * a + (1 - b1) * g, m, grads)
    v = jax.tree_util.tree_map(lambda a, g: b2 * a + (1 - b2) * g * g, v, grads)
    params = jax.tree_util.tree_map(lambda p, a, b: p - lr * corr * a / (jnp.sqrt(b) + eps), params, m, v)
    return params, (m, v)


def train(params, x, y, *, epochs: int, batch: int = 128, lr: float = 1e-3, mm=dense_matmul, seed: int = 0,
          after_step=None, log=None):
    """Adam on the cross-entropy, mini-batches of ``batch`` (the last partial one dropped, so
    every step has one shape: one compilation). ``mm``: the product of every layer (the float32
    dot, or a jwmma matmul: its straight-through backward pass trains through the emulation).
    ``after_step(params)`` may project the weights (pruning). Returns (params, losses per epoch)."""
    step = jax.jit(lambda p, s, xb, yb, t: _train_step(p, s, xb, yb, t, lr, mm))
    state = jax.tree_util.tree_map(jnp.zeros_like, (params, params))
    rng = np.random.default_rng(seed)
    losses, t = [], 0
    for epoch in range(epochs):
        order = rng.permutation(len(x))
        total = 0.0
        n = len(x) // batch
        for i in range(n):
            sel = order[i * batch:(i + 1) * batch]
            t += 1
            corr = np.float32(math.sqrt(1 - _B2**t) / (1 - _B1**t))
            params, state, loss = step(params, state, x[sel], y[sel], corr)
            if after_step is not None:
                params = after_step(params)
            total += float(loss)
        losses.append(total / max(n, 1))
        if log:
            log(f"epoch {epoch + 1}/{epochs}: loss {losses[-1]:.4f}")
    return params, losses


def _train_step(params, state, xb, yb, corr, lr, mm):
    loss, grads = jax.value_and_grad(_loss)(params, xb, yb, mm)
    params, state = _adam_step(params, grads, state, lr, corr)
    return params, state, loss


def accuracy(params, x, y, mm=dense_matmul) -> float:
    return float(np.mean(np.argmax(np.asarray(forward(params, x, mm)), axis=1) == y))


def emulated(cfg: Config, model: str | None = None, prune: bool = True):
    """The layer product through jwmma for ``cfg`` (``model`` overrides its model)."""
    def mm(x, w):
        return matmul(x, w, builtin=cfg.builtin, model=model or cfg.model, scaling=cfg.scaling, prune=prune)
    return mm


def prune_params(params) -> list:
    """Every weight pruned 2:4 along K (the two largest magnitudes of every 4 input features per
    output), as the emulated layers prune it (`jwmma.prune_2_4` on w^T)."""
    from ..engine.sparsity import prune_2_4
    return [(jnp.swapaxes(prune_2_4(jnp.swapaxes(w, 0, 1)), 0, 1), b) for w, b in params]


# ------------------------------------------------------------------------------------ evaluation
def _rel(a, b, ref_norm):
    return float(np.linalg.norm(np.asarray(a, np.float64) - np.asarray(b, np.float64)) / ref_norm)


def _dequantised_product(cfg: Config, h, w):
    """x_eff @ w_eff in float64: the exact product of the pruned, quantised, rescaled operands
    (no accumulator at all), for the quantisation part of the error alone."""
    from ..numerics.rounding import x64_scope
    from ..quant import config

    mc = config(builtin=cfg.builtin, model="exact", scaling=cfg.scaling)
    with x64_scope():
        w_eff, x_eff = (np.asarray(v, np.float64) for v in _effective_operands(jnp.asarray(h), jnp.asarray(w), mc))
    return x_eff.T @ w_eff.T


@functools.partial(jax.jit, static_argnums=2)
def _effective_operands(h, w, mc):
    """(w_eff, x_eff): the quantised operands as the unit multiplies them, float32, in one
    program (run eagerly, their decoding compiled ~90 small programs per layer shape)."""
    from ..quant import quantise_operands
    from ..quant.scaling import effective

    qw, qx = quantise_operands(h, w, mc)
    spec = mc.spec  # A = w^T blocks along K (its last axis), B = x^T along its first
    return effective(qw, spec.a_format, axis=-1), effective(qx, spec.b_format, axis=-2)


def evaluate(params, x, y, cfgs=CONFIGS, log=None) -> list[dict]:
    """One row per configuration: accuracy and per-layer quant/accum/total errors (module doc)."""
    _, inputs = forward(params, x, collect=True)
    inputs = [np.asarray(h) for h in inputs]
    ref64 = [h.astype(np.float64) @ np.asarray(w, np.float64) for h, (w, _) in zip(inputs, params)]
    norms = [float(np.linalg.norm(r)) for r in ref64]
    pruned64 = [h.astype(np.float64) @ np.asarray(w, np.float64) for h, (w, _) in zip(inputs, prune_params(params))]
    exact_cache: dict = {}
    qonly_cache: dict = {}
    rows = []
    for cfg in cfgs:
        t0 = time.time()
        key = (cfg.builtin, cfg.scaling)
        if key not in exact_cache:
            exact_cache[key] = [np.asarray(emulated(cfg, "exact")(h, w)) for h, (w, _) in zip(inputs, params)]
        exact = exact_cache[key]
        if key not in qonly_cache:  # the quantised operands' product in float64 against the pruned one
            qonly_cache[key] = [_rel(_dequantised_product(cfg, h, w), p, n)
                                for h, (w, _), p, n in zip(inputs, params, pruned64, norms)]
        mm = emulated(cfg)
        per_layer = exact if cfg.model == "exact" else [np.asarray(mm(h, w)) for h, (w, _) in zip(inputs, params)]
        # end to end: the first layer's input is the data itself, so its product is per_layer[0]
        h = per_layer[0] + np.asarray(params[0][1])
        for w, b in params[1:]:
            h = np.asarray(mm(jax.nn.relu(h), w)) + np.asarray(b)
        acc = float(np.mean(np.argmax(h, axis=1) == y))
        row = dict(fmt=cfg.fmt, builtin=cfg.builtin, model=cfg.model, scaling=cfg.scaling, label=cfg.label,
                   accuracy=acc, seconds=round(time.time() - t0, 2), layers=[])
        for i in range(len(params)):
            row["layers"].append(dict(
                layer=i + 1, k=int(inputs[i].shape[1]), n=int(np.shape(params[i][0])[1]),
                prune=_rel(pruned64[i], ref64[i], norms[i]), quant_only=qonly_cache[key][i], quant=_rel(exact[i], ref64[i], norms[i]), accum=_rel(per_layer[i], exact[i], norms[i]),
                total=_rel(per_layer[i], ref64[i], norms[i])))
        rows.append(row)
        if log:
            log(f"{cfg.label:26s} accuracy {acc:.4f}  " + "  ".join(
                f"L{r['layer']} q {r['quant']:.2e} a {r['accum']:.2e}" for r in row["layers"]) + f"  ({row['seconds']} s)")
    return rows


def finetune_sparse(params, x, y, x_test, y_test, cfg: Config, *, epochs: int, batch: int = 128, lr: float = 2e-4,
                    seed: int = 1, log=None) -> dict:
    """2:4 sparse fine-tuning with the emulated forward pass (module doc). Returns accuracies
    (dense float32, pruned float32, pruned through jwmma before and after fine-tuning, the
    fine-tuned net pruned in float32), the loss per epoch and the fine-tuned parameters."""
    mm = emulated(cfg)
    pruned = prune_params(params)
    out = dict(config=cfg.label, epochs=epochs, lr=lr,
               dense_f32=accuracy(params, x_test, y_test),
               pruned_f32=accuracy(pruned, x_test, y_test),
               pruned_emulated=accuracy(pruned, x_test, y_test, mm))
    tuned, losses = train(pruned, x, y, epochs=epochs, batch=batch, lr=lr, mm=mm, seed=seed, log=log)
    out.update(finetuned_emulated=accuracy(tuned, x_test, y_test, mm),
               finetuned_pruned_f32=accuracy(prune_params(tuned), x_test, y_test), losses=losses)
    return out, tuned


# ------------------------------------------------------------------------------------ the run
def run(*, hidden: int = 2048, upsample: int = 32, epochs: int = 20, finetune_epochs: int = 5, seed: int = 0,
        cfgs=CONFIGS, finetune_config: Config | None = None, out=None, log=print) -> dict:
    """Train, evaluate every configuration, fine-tune; write ``results.json`` and figures to
    ``out`` (a folder) when given. Returns the results as a dict."""
    t0 = time.time()
    x_tr, y_tr, x_te, y_te = load_digits_data(upsample, seed)
    sizes = (x_tr.shape[1], hidden, hidden, 10)
    params = init_mlp(jax.random.PRNGKey(seed), sizes)
    log(f"digits: {len(x_tr)} train / {len(x_te)} test images, {upsample}x{upsample}; MLP {sizes}")
    params, losses = train(params, x_tr, y_tr, epochs=epochs, seed=seed, log=None)
    f32_acc = accuracy(params, x_te, y_te)
    log(f"float32 training: {epochs} epochs, final loss {losses[-1]:.4f}, test accuracy {f32_acc:.4f}")
    rows = evaluate(params, x_te, y_te, cfgs, log=log)
    ft_cfg = finetune_config or FINETUNE_CONFIG
    ft, _ = finetune_sparse(params, x_tr, y_tr, x_te, y_te, ft_cfg, epochs=finetune_epochs, log=None)
    log(f"2:4 fine-tuning through {ft['config']}: dense f32 {ft['dense_f32']:.4f}, pruned f32 {ft['pruned_f32']:.4f}, "
        f"pruned emulated {ft['pruned_emulated']:.4f} -> fine-tuned emulated {ft['finetuned_emulated']:.4f}")
    result = dict(data="sklearn.datasets.load_digits", upsample=upsample, sizes=list(sizes), epochs=epochs,
                  train_images=int(len(x_tr)), test_images=int(len(x_te)), seed=seed, train_losses=losses,
                  f32_accuracy=f32_acc, rows=rows, finetune=ft, seconds=round(time.time() - t0, 1),
                  versions=dict(jax=jax.__version__))
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(result, indent=1))
        plot(result, out)
    return result


def format_rows(result: dict) -> str:
    """The results as a Markdown table (accuracy; per layer quant (quantisation alone) / accum
    errors; the float32 row gives the pruning alone)."""
    n_layers = len(result["rows"][0]["layers"]) if result["rows"] else 0
    head = "| format | unit | model | scaling | accuracy | " + " | ".join(
        f"L{i + 1} quant+prune | L{i + 1} accum" for i in range(n_layers)) + " |"
    lines = [head, "|" + "---|" * (5 + 2 * n_layers)]
    first = result["rows"][0]["layers"] if result["rows"] else []
    lines.append(f"| f32 | | (jnp.dot) | | {result['f32_accuracy']:.4f} |" + "".join(
        f" prune alone {layer['prune']:.2e} | |" for layer in first))
    for r in result["rows"]:
        unit = "CDNA4" if r["builtin"].startswith("smfmac") else "RDNA4"
        cells = " | ".join(f"{layer['quant']:.2e}" + (f" ({layer['quant_only']:.1e})" if "quant_only" in layer else "")
                           + f" | {layer['accum']:.1e}" for layer in r["layers"])
        lines.append(f"| {r['fmt']} | {unit} | {r['model']} | {r['scaling']} | {r['accuracy']:.4f} | {cells} |")
    return "\n".join(lines)


def plot(result: dict, out) -> list:
    """Figures (PNG, matplotlib, in `jwmma.study.plots`' layout for a trained network): per-layer
    error split (quantisation + pruning, quantisation alone, accumulator) and accuracy per
    configuration; the fine-tuning curve.

    Args:
        result: `run`'s result (``rows``, ``f32_accuracy``, ``finetune``).
        out: the folder to write into.
    Returns:
        The paths written: network_layer_errors.png, network_accuracy.png and, with a
        fine-tuning run, network_finetune.png.
    """
    out = Path(out)
    rows = result["rows"]
    labels = [r["label"] for r in rows]
    paths = []
    panels = []
    for i, layer in enumerate(rows[0]["layers"]):
        bars = [("quantisation + 2:4 pruning", SPLIT_COLORS["quant"], [r["layers"][i]["quant"] for r in rows])]
        if all("quant_only" in r["layers"][i] for r in rows):
            bars.append(("quantisation alone", SPLIT_COLORS["quant_only"], [r["layers"][i]["quant_only"] for r in rows]))
        bars.append(("accumulator (model vs exact)", SPLIT_COLORS["accum"], [r["layers"][i]["accum"] for r in rows]))
        panels.append((f"layer {i + 1}: K = {layer['k']}, N = {layer['n']}", bars))
    fig = error_split_figure(labels, panels, xlim=(1e-9, 2), xlabel="||error||_F / ||x @ w (float64)||_F",
                             title="Per-layer output error of the digits MLP through jwmma (test set)")
    paths.append(save_figure(fig, out / "network_layer_errors.png"))

    fig, (ax,) = rows_figure(labels)
    acc = [100 * r["accuracy"] for r in rows]
    ax.barh(range(len(rows)), acc, color="#55a868")
    ax.axvline(100 * result["f32_accuracy"], color="k", ls="--", lw=1, label="float32 (dense)")
    ft = result.get("finetune")
    if ft:
        ax.axvline(100 * ft["pruned_f32"], color="#c44e52", ls=":", lw=1, label="float32, 2:4 pruned")
    lo = min(acc + [100 * result["f32_accuracy"]]) - 3
    ax.set_xlim(max(0, lo), 100)
    ax.set_xlabel("test accuracy (%), every layer 2:4 pruned and through jwmma")
    ax.legend(loc="lower left", fontsize=8)
    paths.append(save_figure(fig, out / "network_accuracy.png"))

    if ft:
        fig = curves_figure([(None, ft["losses"], "o-")],
                            xlabel="fine-tuning epoch (2:4, emulated forward, STE backward)", ylabel="training loss",
                            title=f"{ft['config']}: accuracy {100 * ft['pruned_emulated']:.1f}% -> "
                                  f"{100 * ft['finetuned_emulated']:.1f}%")
        paths.append(save_figure(fig, out / "network_finetune.png"))
    return paths
