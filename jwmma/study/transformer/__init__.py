"""A trained transformer through the emulated matrix units (``jwmma study-net --net transformer``).

The question of `jwmma.study.network`, asked of a language model: a small decoder-only
transformer is trained in float32, then every contraction of its forward pass (the Q/K/V and
output projections, the attention scores q @ k^T (K = head dim), the attention-weighted values
p @ v (K = context length), the two MLP layers and the logits) runs through one emulated unit
after the other (`UNITS`), and one more training run has its forward and backward GEMMs
through the units.

The modules, in the order the study uses them (each one's docstring says what it implements):

* `data`: the generated language (`document`, `documents`, `EVAL_OFFSET`);
* `model`: the Flax Linen model with injected contractions (`ModelConfig`, `transformer`,
  `model_of`);
* `weights`: the shipped float16 weights (`WEIGHTS`, `load_weights`, `save_weights`);
* `training`: the float32 training of those weights (`train`, `train_weights`) and the
  training run through the units (`training_run`);
* `units`: the rows of the study (`UNITS`, `UnitConfig`, `TRAINING_UNIT`);
* `recording`: the float32 network's contractions with their operands (`record`);
* `errors`: per contraction, quantisation vs accumulator error (`contraction_errors`, `by_kind`);
* `metrics`: perplexity, top-1 agreement and KL against float32 (`output_metrics`);
* `evaluation`: every unit end to end and the context sweep (`evaluate`, `context_sweep`);
* `pipeline`: the whole study (`run`) and the join of runs split over processes (`merge`);
* `report`: ``results.json``, the CSV files and Markdown tables (`write`, `format_rows`);
* `figures`: the PNG figures (`plot`, in `jwmma.study.plots`' layout).

Outputs of `run` (``out``): ``results.json`` (everything), ``units.csv``, ``layers.csv``,
``context.csv``, ``training.csv`` and four PNG figures (matplotlib). Every public name of the
modules is importable from here (``from jwmma.study import transformer as tf; tf.run()``).
"""
from __future__ import annotations

from .data import EVAL_OFFSET, NO_ANSWER, RECALL, SUM, corpus_digest, document, documents
from .errors import by_kind, contraction_errors
from .evaluation import context_sweep, evaluate, logits_through
from .figures import plot
from .metrics import output_metrics
from .model import (ATTENTION, CONTRACTIONS, HI, ModelConfig, init_params, model_of, native_dot_general, native_einsum,
                    nll, transformer)
from .pipeline import FULL, SMALL, merge, run
from .recording import Recorder, contraction_names, record
from .report import format_rows, write
from .training import TRAINING, train, train_weights, training_run
from .units import TRAINING_UNIT, UNIT_KEYS, UNITS, UnitConfig, exact_twin, unit_configs, unit_model
from .weights import WEIGHTS, load_weights, save_weights

__all__ = [
    # data
    "EVAL_OFFSET", "NO_ANSWER", "RECALL", "SUM", "document", "documents", "corpus_digest",
    # model and weights
    "HI", "ModelConfig", "CONTRACTIONS", "ATTENTION", "transformer", "native_dot_general", "native_einsum",
    "model_of", "init_params", "nll", "WEIGHTS", "save_weights", "load_weights",
    # training
    "TRAINING", "train", "train_weights", "training_run",
    # units
    "UnitConfig", "UNITS", "UNIT_KEYS", "TRAINING_UNIT", "unit_configs", "unit_model", "exact_twin",
    # measures
    "Recorder", "contraction_names", "record", "contraction_errors", "by_kind", "output_metrics",
    "logits_through", "evaluate", "context_sweep",
    # the whole study and its files
    "SMALL", "FULL", "run", "merge", "write", "format_rows", "plot",
]
