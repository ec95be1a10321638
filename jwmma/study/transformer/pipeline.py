"""The whole transformer study in one call (`run`), and one result from runs split over processes
or hosts (`merge`).

`run` finds the float32 network (given parameters, the shipped weights, the copy cached in the
output folder, or a fresh training run), evaluates every unit (`jwmma.study.transformer.evaluation`),
sweeps the context, trains through the units (`jwmma.study.transformer.training.training_run`)
and writes the files (`jwmma.study.transformer.report.write`).
"""
from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import jax
import numpy as np

from .data import EVAL_OFFSET, corpus_digest, documents
from .evaluation import context_sweep, evaluate
from .model import ModelConfig
from .report import write
from .training import TRAINING, train_weights, training_run
from .units import UNIT_KEYS, unit_configs
from .weights import WEIGHTS, load_weights, save_weights

__all__ = ["SMALL", "FULL", "run", "merge"]

#: the quick run (``jwmma study-net --net transformer --small``): the shipped model, few
#: documents, short contexts, a short training run
SMALL = dict(eval_docs=2, eval_context=64, contexts=(16, 32, 64), train_steps=3, train_batch=2, train_context=32)
#: the full study's sizes (benchmarks/STUDY.md section 7)
FULL = dict(eval_docs=16, eval_context=256, contexts=(16, 32, 64, 128, 256), train_steps=40, train_batch=8,
            train_context=64)


def _params_for(cfg, weights, retrain, out, log):
    """(params, meta): the shipped/given weights file, else the copy cached in ``out``, else trained."""
    if not retrain and weights is not None and Path(weights).exists():
        params, meta = load_weights(weights)
        return params, dict(meta, source=str(Path(weights).name))
    cache = Path(out) / "transformer_weights.npz" if out is not None else None
    if cache is not None and cache.exists() and not retrain:
        params, meta = load_weights(cache)
        return params, dict(meta, source="cached in the output folder")
    if log:
        log(f"training the float32 model ({TRAINING['steps']} steps)")
    params, meta = train_weights(cfg, log=log)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        save_weights(params, meta, cache)
        params, meta = load_weights(cache)  # the float16 values, as the shipped weights are
    return params, dict(meta, source="trained in this run")


def run(*, cfg: ModelConfig = ModelConfig(), small: bool = False, units=UNIT_KEYS, eval_docs=None, eval_context=None,
        contexts=None, train_steps=None, train_batch=None, train_context=None, weights=WEIGHTS, retrain=False,
        params=None, out=None, log=print) -> dict:
    """The whole study (module doc).

    Args:
        cfg: the model's sizes.
        small: `SMALL`'s sizes rather than `FULL`'s for the sizes left None.
        units: the keys of the rows (`jwmma.study.transformer.units.UNIT_KEYS`).
        eval_docs, eval_context, contexts, train_steps, train_batch, train_context: sizes
            (``train_steps=0``: no training run).
        weights, retrain, params: the float32 network: ``params`` when given (of ``cfg``), else
            the ``weights`` file (the shipped one for the default model), else the weights
            cached in ``out``, else trained (`train_weights`, then cached in ``out``);
            ``retrain`` skips the files.
        out: the folder for ``results.json``, the CSV files and the figures, or None.
        log: a print-like function for progress, or None.
    Returns:
        The result dict (``data``, ``model``, ``weights``, ``train_losses``, ``size``, ``f32``,
        ``rows``, ``context``, ``training``, ``seconds``, ``versions``).
    """
    log = log or (lambda *a: None)
    t0 = time.time()
    size = dict(SMALL if small else FULL)
    for k, v in dict(eval_docs=eval_docs, eval_context=eval_context, contexts=contexts, train_steps=train_steps,
                     train_batch=train_batch, train_context=train_context).items():
        if v is not None:
            size[k] = tuple(v) if k == "contexts" else v
    if max(size["contexts"]) > cfg.context or size["eval_context"] > cfg.context:
        raise ValueError(f"contexts and eval_context must be at most the model's context {cfg.context}")
    ucfgs = unit_configs(units)
    if params is not None:
        wmeta = dict(source="given", config=dataclasses.asdict(cfg))
    else:
        if cfg != ModelConfig() and weights == WEIGHTS:
            weights = None  # the shipped weights are the default model's
        params, wmeta = _params_for(cfg, weights, retrain, out, log)
    tok, answer = documents(EVAL_OFFSET, size["eval_docs"], size["eval_context"] + 1)
    log(f"transformer {dataclasses.asdict(cfg)}, weights: {wmeta['source']}; evaluation: {size['eval_docs']} "
        f"documents x {size['eval_context']} next bytes")
    f32, rows = evaluate(cfg, params, tok, answer, ucfgs, log=log)
    ctx_tok, _ = documents(EVAL_OFFSET, size["eval_docs"], max(size["contexts"]))
    ctx = context_sweep(cfg, params, ctx_tok, size["contexts"], ucfgs, log=log)
    training = None
    if size["train_steps"]:
        training = training_run(cfg, steps=size["train_steps"], batch=size["train_batch"],
                                context=size["train_context"], eval_tok=tok, log=log)
    result = dict(data=dict(generator="jwmma.study.transformer.document", eval_first=EVAL_OFFSET,
                            eval_docs=size["eval_docs"], eval_context=size["eval_context"],
                            corpus_digest=corpus_digest()),
                  model=dict(dataclasses.asdict(cfg), parameters=int(sum(np.size(x) for x in
                                                                         jax.tree_util.tree_leaves(params)))),
                  weights={k: v for k, v in wmeta.items() if k != "losses"}, train_losses=wmeta.get("losses"),
                  size={k: list(v) if isinstance(v, tuple) else v for k, v in size.items()}, f32=f32, rows=rows,
                  context=ctx, training=training, seconds=round(time.time() - t0, 1),
                  versions=dict(jax=jax.__version__, numpy=np.__version__))
    if out is not None:
        write(result, out)
    return result


def merge(parts) -> dict:
    """One result from `run` results of the same network and sizes run apart (e.g. one unit per
    process or host, ``units=(key,)``, and one with ``units=()`` for the training run).

    Args:
        parts: `run` results.
    Returns:
        The rows and context sweeps in the order of `jwmma.study.transformer.units.UNITS`, the
        training run of the part that has one, the seconds summed and ``parts``. ValueError if
        the parts differ in their network, weights, data or sizes.
    """
    parts = list(parts)
    if not parts:
        raise ValueError("merge needs at least one result")
    first = parts[0]

    def same(x, y):  # as JSON (a NaN accuracy equals itself)
        return json.dumps(x, sort_keys=True) == json.dumps(y, sort_keys=True)

    for key in ("data", "model", "f32"):
        for p in parts[1:]:
            if not same(p[key], first[key]):
                raise ValueError(f"the parts differ in {key!r}: {p[key]} != {first[key]}")

    def evaluation(size):  # the sizes every part shares (the training run's are its own)
        return {k: v for k, v in size.items() if not k.startswith("train_")}

    for p in parts[1:]:
        if not same(evaluation(p["size"]), evaluation(first["size"])):
            raise ValueError(f"the parts differ in their sizes: {p['size']} != {first['size']}")
    order = {k: i for i, k in enumerate(UNIT_KEYS)}
    rows = sorted((r for p in parts for r in p["rows"]), key=lambda r: order.get(r["key"], len(order)))
    keys = [r["key"] for r in rows]
    if len(set(keys)) != len(keys):
        raise ValueError(f"a unit appears in more than one part: {keys}")
    ctx = sorted((c for p in parts for c in p["context"]), key=lambda c: (order.get(c["key"], len(order)),
                                                                        c["context"]))
    trainings = [p["training"] for p in parts if p.get("training")]
    if len(trainings) > 1:
        raise ValueError("more than one part has a training run")
    trained = next((p for p in parts if p.get("training")), first)
    return dict(first, rows=rows, context=ctx, training=trainings[0] if trainings else None,
                size=dict(evaluation(first["size"]), **{k: v for k, v in trained["size"].items()
                                                         if k.startswith("train_")}),
                seconds=round(sum(p["seconds"] for p in parts), 1), parts=len(parts))
