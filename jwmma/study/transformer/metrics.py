"""The transformer's output through a unit against the float32 network's, per evaluation:

* ``nll`` (mean next-byte cross entropy, nats), ``ppl`` = exp(nll), ``bpb`` = nll / ln 2;
* ``top1_agree``: the fraction of positions whose most likely next byte is the float32
  network's; ``acc`` / ``answer_acc``: top-1 accuracy on all bytes / on answer bytes
  (`jwmma.study.transformer.data`'s answer kinds; ``recall_acc`` / ``sum_acc`` per kind);
* ``kl``: mean over positions of KL(p_float32 || p_unit) of the next-byte distributions (nats).

All computed in float64 (numpy).
"""
from __future__ import annotations

import math

import numpy as np

from .data import RECALL, SUM

__all__ = ["output_metrics"]


def _softmax64(logits):
    x = np.asarray(logits, np.float64)
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def output_metrics(logits, tok, answers, ref_logits=None) -> dict:
    """The output metrics (module doc) of ``logits`` for the next bytes of ``tok``.

    Args:
        logits: float (b, s, vocab).
        tok: int tokens (b, s + 1); ``tok[:, 1:]`` are the targets.
        answers: answer kinds (b, s + 1) (`jwmma.study.transformer.data.documents`).
        ref_logits: the float32 network's logits (b, s, vocab), or None.
    Returns:
        {nll, ppl, bpb, acc, answer_acc, recall_acc, sum_acc} (floats; an accuracy over no
        byte is NaN), with ``ref_logits`` also ``top1_agree`` and ``kl`` (KL(p_ref || p),
        nats, mean over positions).
    """
    logits = np.asarray(logits, np.float64)
    targets = np.asarray(tok)[:, 1:]
    logp = np.log(_softmax64(logits))
    nll_v = -np.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
    hit = logits.argmax(-1) == targets
    kinds = np.asarray(answers)[:, 1:]

    def acc(sel):
        return float(hit[sel].mean()) if sel.any() else float("nan")

    m = float(nll_v.mean())
    out = dict(nll=m, ppl=math.exp(m), bpb=m / math.log(2), acc=float(hit.mean()), answer_acc=acc(kinds > 0),
               recall_acc=acc(kinds == RECALL), sum_acc=acc(kinds == SUM))
    if ref_logits is not None:
        p_ref = _softmax64(ref_logits)
        out["top1_agree"] = float((logits.argmax(-1) == np.asarray(ref_logits).argmax(-1)).mean())
        out["kl"] = float(np.mean(np.sum(p_ref * (np.log(p_ref) - logp), axis=-1)))
    return out
