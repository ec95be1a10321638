"""The float32 network's contractions with their operands: what the per-contraction errors
(`jwmma.study.transformer.errors`) are measured on, so that each error is the contraction's own
and every unit gets the same operands.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ...quant.dot_general import einsum_dimension_numbers
from .model import CONTRACTIONS, ModelConfig, model_of, native_dot_general, native_einsum

__all__ = ["Recorder", "contraction_names", "record"]


class Recorder:
    """Native float32 contractions (precision HIGHEST) that keep each one's operands, as
    ``(lhs, rhs, dimension_numbers)`` in call order (an einsum as the `jwmma.dot_general` that
    `jwmma.einsum` runs: same operands, same K order). Needs concrete values (no jit)."""

    def __init__(self):
        self.calls: list = []

    def dot_general(self, lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, **kw):
        """`jwmma.study.transformer.model.native_dot_general`, keeping the operands."""
        self.calls.append((np.asarray(lhs), np.asarray(rhs), dimension_numbers))
        return native_dot_general(lhs, rhs, dimension_numbers, preferred_element_type=preferred_element_type)

    def einsum(self, subscripts, lhs, rhs, precision=None, **kw):
        """`jwmma.study.transformer.model.native_einsum`, keeping the operands."""
        dn, _ = einsum_dimension_numbers(subscripts, lhs, rhs)
        self.calls.append((np.asarray(lhs), np.asarray(rhs), dn))
        return native_einsum(subscripts, lhs, rhs)


def contraction_names(cfg: ModelConfig) -> list:
    """(layer, name) of every contraction in forward order: (i, "qkv") .. (i, "down") for each
    block i, then (layers, "logits")."""
    return [(i, n) for i in range(cfg.layers) for n in CONTRACTIONS] + [(cfg.layers, "logits")]


def record(cfg: ModelConfig, params, tok):
    """The float32 forward pass of ``tok``, keeping every contraction's operands.

    Args:
        cfg, params: the network (float32 parameters).
        tok: int tokens (b, s).
    Returns:
        ``(logits, calls)``: float32 logits (b, s, vocab) and one ``(layer, name, lhs, rhs,
        dimension_numbers)`` per contraction (`contraction_names`' order; float32 numpy operands).
    """
    rec = Recorder()
    logits = model_of(cfg, rec.dot_general, rec.einsum).apply({"params": params}, jnp.asarray(tok))
    names = contraction_names(cfg)
    assert len(rec.calls) == len(names), (len(rec.calls), len(names))
    return np.asarray(logits), [(i, n) + call for (i, n), call in zip(names, rec.calls)]
