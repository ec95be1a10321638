"""Training the transformer: the float32 network whose weights ship, and the emulated training
run.

**Training** (`train`, `train_weights`): Adam (b2 0.95), gradient clipping at 1, learning rate
2e-3 with 50 warm-up steps and a cosine decay to a tenth, batches of 16 documents of 257 bytes
(next-byte cross entropy on 256 positions), 1500 steps (`TRAINING`): 87 s on one H200 (the
shipped weights: final training loss 0.87 nats per byte), about 40 minutes on a 2-core CPU.

**Emulated training** (`training_run`): the model is trained from the same initialisation on
the same batches twice, in float32 and with every forward contraction through ``unit``'s
forward unit (MXFP8 by default) and both backward GEMMs of every contraction through its
``backward`` unit (MI355X dense fp8, row scaling):
`jwmma.study.transformer.units.TRAINING_UNIT`, `jwmma.dot_general`'s custom VJP. Both loss
curves and both networks' float32 evaluation losses are reported.
"""
from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp

from ...quant import Unit
from .data import corpus_digest, documents
from .model import ModelConfig, init_params, model_of, nll
from .units import TRAINING_UNIT, UnitConfig, unit_model

__all__ = ["TRAINING", "train", "train_weights", "training_run"]

#: the shipped weights' training (`train_weights`)
TRAINING = dict(steps=1500, batch=16, lr=2e-3, warmup=50, seed=0)


def _loss(params, tok, model):
    """Mean next-byte cross entropy of ``model`` on tokens (b, s + 1)."""
    return jnp.mean(nll(model.apply({"params": params}, tok[:, :-1]), tok[:, 1:]))


def _rate(step, steps, lr, warmup):
    """Linear warm-up over ``warmup`` steps, then a cosine decay to a tenth of ``lr``."""
    warm = jnp.minimum(1.0, (step + 1.0) / warmup)
    return lr * warm * (0.1 + 0.45 * (1 + jnp.cos(jnp.pi * jnp.minimum(1.0, step / steps))))


def _adam(params, grads, state, step, lr, b1=0.9, b2=0.95, eps=1e-8, clip=1.0):
    """One Adam update with global-norm clipping; ``step`` counts from 0."""
    norm = jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in jax.tree_util.tree_leaves(grads)))
    grads = jax.tree_util.tree_map(lambda g: g * jnp.minimum(1.0, clip / (norm + 1e-12)), grads)
    m, v = state
    m = jax.tree_util.tree_map(lambda a, g: b1 * a + (1 - b1) * g, m, grads)
    v = jax.tree_util.tree_map(lambda a, g: b2 * a + (1 - b2) * g * g, v, grads)
    t = step + 1.0
    corr = jnp.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    params = jax.tree_util.tree_map(lambda p, a, b: p - lr * corr * a / (jnp.sqrt(b) + eps), params, m, v)
    return params, (m, v)


def train(cfg: ModelConfig, params, *, steps: int, batch: int = 16, context: int | None = None, lr: float = 2e-3,
          warmup: int = 50, first_doc: int = 0, model=None, jit: bool = True, log=None, log_every: int = 50):
    """Adam on the next-byte cross entropy (module doc). Step s reads documents
    ``first_doc + s * batch ..`` of ``context + 1`` bytes (default: the model's context).

    Args:
        cfg, params: the network to start from (float32 parameters).
        steps, batch, context, lr, warmup, first_doc: the run (module doc).
        model: the Linen model to differentiate (default `model_of(cfg)`, native float32; a
            model with unit contractions trains through the units).
        jit: compile the step (one program); False runs it op by op (the emulated training:
            each unit GEMM is then one cached program per shape instead of one compilation per
            GEMM instance inside a big program).
        log, log_every: a print-like function called every ``log_every`` steps, or None.
    Returns:
        (params, losses per step as floats).
    """
    model = model or model_of(cfg)
    context = context or cfg.context

    def step_fn(params, state, tok, step):
        loss, grads = jax.value_and_grad(_loss)(params, tok, model)
        params, state = _adam(params, grads, state, step, _rate(step, steps, lr, warmup))
        return params, state, loss

    step_fn = jax.jit(step_fn) if jit else step_fn
    state = jax.tree_util.tree_map(jnp.zeros_like, (params, params))
    losses, t0 = [], time.time()
    for s in range(steps):
        tok, _ = documents(first_doc + s * batch, batch, context + 1)
        params, state, loss = step_fn(params, state, jnp.asarray(tok), jnp.float32(s))
        losses.append(float(loss))
        if log and (s % log_every == 0 or s == steps - 1):
            log(f"  step {s + 1}/{steps}: loss {losses[-1]:.4f} ({time.time() - t0:.0f} s)")
    return params, losses


def train_weights(cfg: ModelConfig = ModelConfig(), *, steps=TRAINING["steps"], batch=TRAINING["batch"],
                  lr=TRAINING["lr"], warmup=TRAINING["warmup"], seed=TRAINING["seed"], log=None):
    """Train the float32 model from ``init_params(cfg, seed)`` (`TRAINING`'s run by default).

    Returns:
        ``(params, meta)``: float32 parameters and the facts `jwmma.study.transformer.weights`
        stores with them (sizes, run, losses, seconds, JAX version, corpus digest).
    """
    t0 = time.time()
    params, losses = train(cfg, init_params(cfg, seed), steps=steps, batch=batch, lr=lr, warmup=warmup, log=log)
    meta = dict(config=dataclasses.asdict(cfg), steps=steps, batch=batch, lr=lr, warmup=warmup, seed=seed,
                first_loss=losses[0], final_loss=losses[-1], losses=[round(x, 5) for x in losses],
                seconds=round(time.time() - t0, 1), jax=jax.__version__, corpus=corpus_digest())
    return params, meta


def training_run(cfg: ModelConfig, *, unit: Unit = TRAINING_UNIT, steps: int = 40, batch: int = 8,
                 context: int = 64, lr: float = 2e-3, warmup: int = 10, seed: int = 0, eval_tok=None, log=None) -> dict:
    """Train from ``init_params(cfg, seed)`` twice on the same batches (documents from 0):
    float32, and with every contraction through ``unit`` (forward) and ``unit.backward``
    (both backward GEMMs).

    Args:
        eval_tok: int tokens (b, >= context + 1) to evaluate both final networks on in float32
            (cut to ``context + 1``), or None.
    Returns:
        A dict: the units (``forward``, ``backward``), the run's sizes, both loss curves
        (``losses_f32``, ``losses_emulated``), their times and with ``eval_tok``
        ``eval_nll_f32`` / ``eval_nll_emulated``.
    """
    init = init_params(cfg, seed)
    kw = dict(steps=steps, batch=batch, context=context, lr=lr, warmup=warmup)
    t0 = time.time()
    p32, l32 = train(cfg, init, **kw)
    t32 = time.time() - t0
    ucfg = UnitConfig("train", "training", unit)
    t0 = time.time()
    pem, lem = train(cfg, init, model=unit_model(cfg, ucfg), jit=False, log=log, log_every=10, **kw)
    tem = time.time() - t0
    out = dict(forward=ucfg.describe(), backward=UnitConfig("b", "b", unit.backward).describe() if unit.backward else None,
               steps=steps, batch=batch, context=context, lr=lr, warmup=warmup, seed=seed, losses_f32=l32,
               losses_emulated=lem, seconds_f32=round(t32, 1), seconds_emulated=round(tem, 1))
    if eval_tok is not None:
        ev = jnp.asarray(eval_tok[:, :context + 1])
        out["eval_nll_f32"] = float(_loss(p32, ev, model_of(cfg)))
        out["eval_nll_emulated"] = float(_loss(pem, ev, model_of(cfg)))
    if log:
        log(f"training {steps} steps x {batch} x {context} bytes: float32 loss {l32[0]:.3f} -> {l32[-1]:.3f}, "
            f"through the units {lem[0]:.3f} -> {lem[-1]:.3f} ({tem:.0f} s)")
    return out
