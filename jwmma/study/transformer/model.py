"""The transformer study's model: a decoder-only Flax Linen transformer whose contractions are
injected (the model `benchmarks/bench_dot_general.py` times too).

Byte embedding plus a learned position embedding, ``layers`` pre-norm blocks (LayerNorm, causal
multi-head attention with a fused q/k/v ``DenseGeneral`` and an output ``DenseGeneral``,
LayerNorm, MLP of two ``Dense`` with GELU), a final LayerNorm and logits through the tied
embedding. Default (`ModelConfig`): 4 layers, d_model 256, 4 heads of 64, MLP 512 (2x), context
256: 2.24 M parameters. The MLP is 2x rather than the usual 4x so that the weights, stored as
float16, stay under 5 MB (`jwmma.study.transformer.weights`).

The contractions are injected (``dot_general=`` of every Dense layer and the logits, ``einsum``
of the attention), so the same module runs natively (float32, precision HIGHEST: `model_of`'s
default), through `jwmma.dot_general`/`jwmma.einsum` with a unit
(`jwmma.study.transformer.units.unit_model`), or through a recorder of operands
(`jwmma.study.transformer.recording`). The unmodified model (native contractions) routed by
the qwix provider (`jwmma.nn.qwix`) gives the same bits as the injected units (a test checks it).
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["HI", "ModelConfig", "CONTRACTIONS", "ATTENTION", "transformer", "native_dot_general", "native_einsum",
           "model_of", "init_params", "nll"]

#: the precision of every float32 contraction of the study (no bf16 passes on any device)
HI = jax.lax.Precision.HIGHEST


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The transformer's sizes (module doc): blocks, width, heads, MLP width, byte vocabulary,
    context (the position embedding's length)."""

    layers: int = 4
    d_model: int = 256
    heads: int = 4
    mlp: int = 512
    vocab: int = 256
    context: int = 256


#: the contractions of one block, in the order the forward pass runs them, then the logits
CONTRACTIONS = ("qkv", "scores", "pv", "out", "up", "down")
#: the contractions of the attention (activation x activation; the others have a weight)
ATTENTION = ("scores", "pv")


def transformer(layers, d_model, heads, mlp, vocab, dot_general, einsum, *, context=None, scan=False):
    """The decoder-only Linen model with the given contractions (module doc).

    Args:
        layers, d_model, heads, mlp, vocab: sizes (``d_model`` divisible by ``heads``).
        dot_general: the contraction of every Dense layer and of the tied logits
            (``jax.lax.dot_general``'s signature); einsum: the attention's (``jnp.einsum``'s).
        context: the length of a learned position embedding (None: no position embedding,
            as `benchmarks/bench_dot_general.py` times it).
        scan: the blocks as one ``linen.scan`` (parameters stacked under ``blocks``) rather
            than ``block_0 .. block_{layers-1}``.
    Returns:
        A Linen module: ``apply({"params": p}, tokens (b, s) int)`` -> logits (b, s, vocab).
    """
    from flax import linen

    hd = d_model // heads

    class Block(linen.Module):
        @linen.compact
        def __call__(self, x, _=None):
            h = linen.LayerNorm()(x)
            qkv = linen.DenseGeneral((3, heads, hd), dot_general=dot_general, name="qkv")(h)
            q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
            s = einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(hd).astype(np.float32)
            causal = jnp.tril(jnp.ones((x.shape[1], x.shape[1]), bool))
            a = jax.nn.softmax(jnp.where(causal, s, -1e30), axis=-1)
            o = einsum("bhqk,bkhd->bqhd", a, v)
            x = x + linen.DenseGeneral(d_model, axis=(-2, -1), dot_general=dot_general, name="out")(o)
            h = linen.LayerNorm()(x)
            h = linen.gelu(linen.Dense(mlp, dot_general=dot_general, name="up")(h))
            return x + linen.Dense(d_model, dot_general=dot_general, name="down")(h), None

    class LM(linen.Module):
        @linen.compact
        def __call__(self, tok):
            embed = linen.Embed(vocab, d_model)
            x = embed(tok)
            if context is not None:
                x = x + linen.Embed(context, d_model, name="position")(jnp.arange(tok.shape[1]))
            if scan:
                blocks = linen.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True}, length=layers)
                x, _ = blocks(name="blocks")(x, None)
            else:
                for i in range(layers):
                    x, _ = Block(name=f"block_{i}")(x)
            x = linen.LayerNorm()(x)
            return dot_general(x, embed.embedding, (((2,), (1,)), ((), ())))  # tied logits (b, s, vocab)

    return LM()


def native_dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, **kw):
    """``jax.lax.dot_general`` at precision HIGHEST whatever ``precision`` a layer asks for (the
    float32 network's contraction; Flax's other keywords are ignored)."""
    return jax.lax.dot_general(lhs, rhs, dimension_numbers, precision=HI, preferred_element_type=preferred_element_type)


def native_einsum(subscripts, *operands, precision=None, **kw):
    """``jnp.einsum`` at precision HIGHEST (the float32 network's attention contraction)."""
    return jnp.einsum(subscripts, *operands, precision=HI, **kw)


def model_of(cfg: ModelConfig, dot_general=None, einsum=None):
    """`transformer` of ``cfg`` (unrolled blocks, position embedding).

    Args:
        cfg: the sizes.
        dot_general, einsum: the contractions (default: `native_dot_general` and
            `native_einsum`, float32 at precision HIGHEST).
    Returns:
        The Linen module (`transformer`).
    """
    return transformer(cfg.layers, cfg.d_model, cfg.heads, cfg.mlp, cfg.vocab, dot_general or native_dot_general,
                       einsum or native_einsum, context=cfg.context)


def init_params(cfg: ModelConfig, seed: int = 0):
    """Linen's default initialisation of `model_of` (``cfg``) with ``PRNGKey(seed)``: the
    parameters as nested dicts of float32 arrays."""
    tok = jnp.zeros((1, cfg.context), jnp.int32)
    return jax.jit(model_of(cfg).init)(jax.random.PRNGKey(seed), tok)["params"]


def nll(logits, targets):
    """Per-position next-token cross entropy (nats).

    Args:
        logits: (..., vocab), any float dtype (taken as float32).
        targets: int (...).
    Returns:
        float32 (...).
    """
    logp = jax.nn.log_softmax(jnp.asarray(logits, jnp.float32), axis=-1)
    return -jnp.take_along_axis(logp, jnp.asarray(targets)[..., None], axis=-1)[..., 0]
