"""The transformer through each unit: the end-to-end metrics and the error split (`evaluate`), and
the accumulator's share as the context grows (`context_sweep`).

`evaluate` runs ``eval_docs`` evaluation documents of ``context + 1`` bytes per unit, activations
propagating through the unit's contractions (LayerNorm, softmax, GELU, residuals in float32), for
`jwmma.study.transformer.metrics`' output metrics, and measures every contraction's errors on
the float32 network's operands (`jwmma.study.transformer.errors`).

`context_sweep`: the float32 network reads the first L bytes of the evaluation documents, L in
``contexts``; the p @ v contraction of every block (K = L) is computed by each unit's attention
unit and its exact twin, on the queries of the second half (positions L/2..L-1, whose sums run
over L/2+1..L keys: masked keys are exact zeros); ``share`` = accum / total (all blocks
together).
"""
from __future__ import annotations

import time

import jax.numpy as jnp
import numpy as np

from .errors import by_kind, contraction_errors
from .metrics import output_metrics
from .model import CONTRACTIONS, ModelConfig
from .recording import record
from .units import UNITS, UnitConfig, exact_twin, unit_model

__all__ = ["logits_through", "evaluate", "context_sweep"]


def logits_through(cfg: ModelConfig, params, tok, ucfg: UnitConfig):
    """The logits with every contraction through ``ucfg``'s units, run op by op (each unit GEMM
    is one cached program per shape).

    Args:
        cfg, params: the network (float32 parameters).
        tok: int tokens (b, s).
    Returns:
        float32 numpy logits (b, s, vocab).
    """
    return np.asarray(unit_model(cfg, ucfg).apply({"params": params}, jnp.asarray(tok)))


def _exact_units(ucfg: UnitConfig) -> frozenset:
    """The exact twins whose products ``ucfg``'s contractions use."""
    return frozenset(exact_twin(ucfg.unit_for(n)) for n in CONTRACTIONS + ("logits",))


def evaluate(cfg: ModelConfig, params, tok, answer, ucfgs=UNITS, log=None) -> tuple:
    """The end-to-end metrics and per-contraction error split of every unit (module doc).

    Args:
        cfg, params: the network (float32 parameters).
        tok: int tokens (b, s + 1); answer: their answer kinds (b, s + 1)
            (`jwmma.study.transformer.data.documents`).
        ucfgs: the rows (`jwmma.study.transformer.units.UnitConfig`).
        log: a print-like function for progress, or None.
    Returns:
        ``(f32, rows)``: the float32 network's output metrics, and per unit a dict of its
        `UnitConfig.describe`, output metrics against float32, ``layers`` (per contraction,
        `contraction_errors`), ``kinds`` (`by_kind`) and ``seconds``.
    """
    inputs = tok[:, :-1]
    ref_logits, calls = record(cfg, params, inputs)
    f32 = output_metrics(ref_logits, tok, answer)
    if log:
        log(f"float32: nll {f32['nll']:.4f} (ppl {f32['ppl']:.3f}), top-1 {f32['acc']:.4f}, recalled digits "
            f"{f32['recall_acc']:.4f}, sum digits {f32['sum_acc']:.4f}")
    refs: list = []
    exact_cache: dict = {}
    rows = []
    ucfgs = list(ucfgs)
    for ucfg in ucfgs:
        t0 = time.time()
        # exact products are shared by the units with the same operands (MI355X fp8: exact, MI355X
        # fp8, Hopper and the sparse row's attention); keep those that a unit still to come uses
        needed = {_exact_units(u) for u in ucfgs[ucfgs.index(ucfg):]}
        needed = set().union(*needed)
        for key in [k for k in exact_cache if k[0] not in needed]:
            del exact_cache[key]
        layers = contraction_errors(calls, ucfg, refs=refs, exact_cache=exact_cache)
        logits = logits_through(cfg, params, inputs, ucfg)
        row = dict(ucfg.describe(), **output_metrics(logits, tok, answer, ref_logits), layers=layers,
                   kinds=by_kind(layers), seconds=round(time.time() - t0, 1))
        rows.append(row)
        if log:
            log(f"{ucfg.label:28s} ppl {row['ppl']:.3f}  top-1 agree {row['top1_agree']:.4f}  KL {row['kl']:.2e}  "
                + "  ".join(f"{n} q {v['quant']:.1e} a {v['accum']:.1e}" for n, v in row["kinds"].items())
                + f"  ({row['seconds']} s)")
    return f32, rows


def context_sweep(cfg: ModelConfig, params, tok, contexts, ucfgs=UNITS, log=None) -> list:
    """The accumulator's share of the p @ v error as the context L grows (module doc).

    Args:
        cfg, params: the network (float32 parameters).
        tok: int tokens (b, >= max(contexts)).
        contexts: the lengths L.
        ucfgs: the rows (`jwmma.study.transformer.units.UnitConfig`).
        log: a print-like function for progress, or None.
    Returns:
        One dict per (unit, L): key, label, context = k = L, queries, quant, accum, total,
        share = accum / total.
    """
    rows = []
    per_l = []
    for length in contexts:
        _, calls = record(cfg, params, tok[:, :length])
        pv = []
        for layer, name, lhs, rhs, dn in calls:
            if name == "pv":  # lhs p (b, h, q, k), rhs v (b, k, h, d): the second half of the queries
                pv.append((layer, name, lhs[:, :, length // 2:, :], rhs, dn))
        per_l.append((length, pv))
    for ucfg in ucfgs:
        for length, pv in per_l:
            errs = contraction_errors(pv, ucfg)
            agg = by_kind(errs)["pv"]
            rows.append(dict(key=ucfg.key, label=ucfg.label, context=length, k=length, queries=length - length // 2,
                             quant=agg["quant"], accum=agg["accum"], total=agg["total"],
                             share=agg["accum"] / agg["total"] if agg["total"] else 0.0))
        if log:
            log(f"{ucfg.label:28s} accumulator share of p @ v: " + "  ".join(
                f"L={r['context']} {r['share']:.1e}" for r in rows if r["key"] == ucfg.key))
    return rows
