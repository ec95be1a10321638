"""A trained transformer through the emulated matrix units (``jwmma study-net --net transformer``).

The question of `jwmma.study.network`, asked of a language model: a small decoder-only
transformer is trained in float32, then every contraction of its forward pass (the Q/K/V and
output projections, the attention scores q @ k^T (K = head dim), the attention-weighted values
p @ v (K = context length), the two MLP layers and the logits) runs through one emulated unit
after the other (`UNITS`), and one more training run has its forward and backward GEMMs
through the units.

**Data: a generated language** (`document`), so that the study needs no download and the text
is the same on every machine and Python version (numpy's ``RandomState``, whose streams numpy
keeps fixed; `corpus_digest` pins them in the tests). Document ``i`` is the byte string of
lines drawn with seed ``i``: ``let x=417`` (a variable gets a random value), ``x=417`` (the
current value of a variable set earlier: a recall over up to the whole context), ``34+58=92``
(two-digit addition) and English-like sentences from a small grammar (``the quick fox sees a
lamp near my old house.``). The digits of a recalled value or of a sum are determined by the
text before them (the answer kinds `RECALL` and `SUM`); everything else is random or nearly so.
Training documents are 0, 1, 2, ...; evaluation documents start at `EVAL_OFFSET`. Tokens are
bytes (vocabulary 256).

**Model** (`ModelConfig`, `transformer`: Flax Linen, the model `benchmarks/bench_dot_general.py`
times too): byte embedding plus a learned position embedding, ``layers`` pre-norm blocks
(LayerNorm, causal multi-head attention with a fused q/k/v ``DenseGeneral`` and an output
``DenseGeneral``, LayerNorm, MLP of two ``Dense`` with GELU), a final LayerNorm and logits
through the tied embedding. Default: 4 layers, d_model 256, 4 heads of 64, MLP 512 (2x),
context 256: 2.24 M parameters. The MLP is 2x rather than the usual 4x so that the weights,
stored as float16, stay under 5 MB (`WEIGHTS`, 4.1 MB compressed); the float32 network is the one
loaded from them (float16 values widened exactly), and every float32 number of the study is
that network's. Its contractions are injected (``dot_general=`` of every Dense layer and the
logits, ``einsum`` of the attention), so the same module runs natively (float32, precision
HIGHEST), through `jwmma.dot_general`/`jwmma.einsum` with a unit, or through a recorder of
operands. The unmodified model (native contractions) routed by the qwix provider
(`jwmma.nn.qwix`) gives the same bits as the injected units (a test checks it).

**Training** (`train`, `train_weights`): Adam (b2 0.95), gradient clipping at 1, learning rate
2e-3 with 50 warm-up steps and a cosine decay to a tenth, batches of 16 documents of 257
bytes (next-byte cross entropy on 256 positions), 1500 steps (`TRAINING`): 87 s on one H200
(the shipped weights: final training loss 0.87 nats per byte), about 40 minutes on a 2-core
CPU. `run` loads the shipped weights, or trains (and caches the weights in ``out``) when
the file is missing or ``retrain=True``.

**Units** (`UNITS`; every contraction through the unit, except where a row says otherwise):
MI300X dense fp8 (gfx942: FNUZ fp8, default model ``cdna3``), MI355X dense fp8 (gfx950: OCP
fp8, ``cdna3`` parameters), MI355X MXFP8/MXFP6/MXFP4 (``mfma_scale_f32_16x16x128_f8f6f4``,
OCP MX block scales of 32 along K, default model ``cdna4_mx``; MXFP8 also under
``mx_rocjitsu``), RDNA4 dense WMMA fp8 and bf16 (``gfx12_dot4``), CDNA4 sparse fp8 with 2:4
pruning, NVIDIA Hopper's fp8 accumulator (``nvidia_hopper`` on the MI355X fp8 operands) and
``exact`` (the MI355X fp8 operands, sums exact up to one float32 rounding per K step).
The dense and sparse fp8 units scale their operands per row (`jwmma.Unit` ``scaling="row"``:
the weight per output channel, the activation per token; for q @ k^T the key per position and
the query per position, for p @ v the value per (head, channel) and the probabilities per
query), the MX units per block of 32 along K (``"mx"``, applied by the instruction), and bf16
is a plain cast (``"none"``: bf16 has float32's range).

*The sparse row* prunes the weights of the projections, the MLP and the logits (the tied
embedding, pruned along d_model for the logits only; the lookup stays dense) 2:4 along K, one
shot, no fine-tuning. Its attention contractions (q @ k^T, p @ v) run on the same chip's dense
fp8 MFMA (the MI355X fp8 unit): 2:4 sparsity is a property given to weights offline; pruning
keys or values at run time would be a different model, not a different arithmetic.

**Measures** (`evaluate`) on `eval_docs` evaluation documents of ``context + 1`` bytes, per unit,
activations propagating through the unit's contractions (LayerNorm, softmax, GELU, residuals
in float32):

* ``nll`` (mean next-byte cross entropy, nats), ``ppl`` = exp(nll), ``bpb`` = nll / ln 2;
* ``top1_agree``: the fraction of positions whose most likely next byte is the float32
  network's; ``acc`` / ``answer_acc``: top-1 accuracy on all bytes / on answer bytes;
* ``kl``: mean over positions of KL(p_float32 || p_unit) of the next-byte distributions (nats);
* per contraction (each block's qkv, scores, pv, out, up, down, then logits), on the float32
  network's own operands of that contraction (so each error is the contraction's own, the
  same operands for every unit), normwise relative errors against the float64 product of
  those operands, ref = ||lhs64 . rhs64||_F: ``quant`` = ||exact - ref|| / ||ref|| (the unit's
  builtin under ``model="exact"`` on the same pruned, quantised operands: what quantisation
  (and pruning) costs; for the MX units, whose instruction applies the block scales and so
  has no ``exact`` model, the float64 product of the MX-quantised operands), ``accum`` = ||model - exact|| / ||ref|| (what the accumulator adds),
  ``total`` = ||model - ref|| / ||ref||, and for pruned weights ``prune`` = ||lhs64 .
  prune(rhs)64 - ref|| / ||ref||; per kind the four blocks together (root sum of squares);
* the accumulator's share as the context grows (`context_sweep`): the float32 network reads
  the first L bytes of the evaluation documents, L in ``contexts``; the p @ v contraction of
  every block (K = L) is computed by each unit's attention unit and its exact twin, on the
  queries of the second half (positions L/2..L-1, whose sums run over L/2+1..L keys: masked
  keys are exact zeros); ``share`` = accum / total (all blocks together).

**Emulated training** (`training_run`): the model is trained from the same initialisation on
the same batches twice, in float32 and with every forward contraction through ``forward_unit``
(MXFP8 by default) and both backward GEMMs of every contraction through its ``backward`` unit
(MI355X dense fp8, row scaling): ``Unit(..., backward=Unit(...))``, `jwmma.dot_general`'s
custom VJP. Both loss curves and both networks' float32 evaluation losses are reported.

Outputs of `run` (``out``): ``results.json`` (everything), ``units.csv``, ``layers.csv``,
``context.csv``, ``training.csv`` and four PNG figures (matplotlib).
"""
from __future__ import annotations

import csv
import dataclasses
import functools
import hashlib
import io
import json
import math
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ..engine.sparsity import prune_2_4
from ..numerics.rounding import x64_scope
from ..quant import Unit, dot_general, einsum
from ..quant.dot_general import effective_product, einsum_dimension_numbers

__all__ = ["ModelConfig", "UnitConfig", "UNITS", "UNIT_KEYS", "TRAINING_UNIT", "CONTRACTIONS", "WEIGHTS",
           "SMALL", "document", "documents", "corpus_digest", "transformer", "model_of", "init_params",
           "train", "train_weights", "save_weights", "load_weights", "Recorder", "record", "logits_through",
           "evaluate", "exact_twin", "contraction_errors", "context_sweep", "training_run", "run", "merge", "write", "format_rows",
           "plot"]

HI = jax.lax.Precision.HIGHEST
#: the shipped weights of the default model (float16 values; `load_weights`)
WEIGHTS = Path(__file__).with_name("transformer_weights.npz")

# ------------------------------------------------------------------------------------ data
DETS = ("the", "a", "one", "every", "my", "this")
ADJS = ("red", "small", "old", "quick", "quiet", "green", "tall", "bright", "lazy", "happy")
NOUNS = ("fox", "bird", "cat", "river", "house", "tree", "robot", "child", "lamp", "ship", "stone", "dog")
VERBS = ("sees", "finds", "likes", "follows", "paints", "moves", "counts", "hears", "builds", "loses")
PREPS = ("near", "under", "behind", "above", "beside")
NAMES = "abcdefghijklmnopqrstuvwxyz"
#: the first evaluation document (training documents are numbered from 0)
EVAL_OFFSET = 1 << 30


def _phrase(r) -> str:
    s = DETS[r.randint(len(DETS))]
    if r.rand() < 0.5:
        s += " " + ADJS[r.randint(len(ADJS))]
    return s + " " + NOUNS[r.randint(len(NOUNS))]


#: the answer kinds of `document`'s mask: no answer, a recalled value, a sum
NO_ANSWER, RECALL, SUM = 0, 1, 2


def document(index: int, length: int):
    """Document ``index`` of the generated language (module doc), cut to ``length`` bytes.

    Returns:
        ``(tokens, answers)``: uint8 bytes (length,) and uint8 answer kinds (length,):
        `RECALL` for the digits of a recalled value, `SUM` for the digits of a sum (both
        determined by the text before them), `NO_ANSWER` elsewhere.
    """
    r = np.random.RandomState(index)
    values: dict = {}
    text, kinds = bytearray(), []
    while len(text) < length:
        u = r.rand()
        answer, kind = "", NO_ANSWER
        if u < 0.3 or not values:
            v = NAMES[r.randint(len(NAMES))]
            values[v] = int(r.randint(1000))
            line = f"let {v}={values[v]}"
        elif u < 0.6:
            keys = sorted(values)
            v = keys[r.randint(len(keys))]
            line, answer, kind = f"{v}=", str(values[v]), RECALL
        elif u < 0.75:
            a, b = int(r.randint(100)), int(r.randint(100))
            line, answer, kind = f"{a}+{b}=", str(a + b), SUM
        else:
            line = f"{_phrase(r)} {VERBS[r.randint(len(VERBS))]} {_phrase(r)}"
            if r.rand() < 0.3:
                line += f" {PREPS[r.randint(len(PREPS))]} {_phrase(r)}"
            line += "."
        text += (line + answer + "\n").encode()
        kinds += [NO_ANSWER] * len(line) + [kind] * len(answer) + [NO_ANSWER]
    return np.frombuffer(bytes(text[:length]), np.uint8).copy(), np.asarray(kinds[:length], np.uint8)


def documents(start: int, count: int, length: int):
    """Documents ``start .. start + count - 1``: (tokens (count, length) int32, answer kinds
    (count, length) uint8)."""
    toks, kinds = zip(*(document(start + i, length) for i in range(count)))
    return np.stack(toks).astype(np.int32), np.stack(kinds)


def corpus_digest(start: int = 0, count: int = 64, length: int = 257) -> str:
    """SHA-256 (hex, first 16 digits) of documents ``start..start+count-1``: pins the generator."""
    tok, kinds = documents(start, count, length)
    return hashlib.sha256(tok.astype(np.uint8).tobytes() + kinds.tobytes()).hexdigest()[:16]


# ------------------------------------------------------------------------------------ model
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


def _native_dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, **kw):
    return jax.lax.dot_general(lhs, rhs, dimension_numbers, precision=HI, preferred_element_type=preferred_element_type)


def _native_einsum(subscripts, *operands, precision=None, **kw):
    return jnp.einsum(subscripts, *operands, precision=HI, **kw)


def model_of(cfg: ModelConfig, dot_general=None, einsum=None):
    """`transformer` of ``cfg`` (unrolled blocks, position embedding); contractions default to
    the native float32 ones (precision HIGHEST)."""
    return transformer(cfg.layers, cfg.d_model, cfg.heads, cfg.mlp, cfg.vocab, dot_general or _native_dot_general,
                       einsum or _native_einsum, context=cfg.context)


def init_params(cfg: ModelConfig, seed: int = 0):
    """Linen's default initialisation of `model_of` (``cfg``) with ``PRNGKey(seed)``."""
    tok = jnp.zeros((1, cfg.context), jnp.int32)
    return jax.jit(model_of(cfg).init)(jax.random.PRNGKey(seed), tok)["params"]


def nll(logits, targets):
    """Per-position next-token cross entropy (nats) of logits (..., vocab) and int targets."""
    logp = jax.nn.log_softmax(jnp.asarray(logits, jnp.float32), axis=-1)
    return -jnp.take_along_axis(logp, jnp.asarray(targets)[..., None], axis=-1)[..., 0]


# ------------------------------------------------------------------------------------ training
def _loss(params, tok, model):
    return jnp.mean(nll(model.apply({"params": params}, tok[:, :-1]), tok[:, 1:]))


def _rate(step, steps, lr, warmup):
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
        model: the Linen model to differentiate (default `model_of(cfg)`, native float32; a
            model with unit contractions trains through the units).
        jit: compile the step (one program); False runs it op by op (the emulated training:
            each unit GEMM is then one cached program per shape instead of one compilation per
            GEMM instance inside a big program).
    Returns:
        (params, losses per step).
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


#: the shipped weights' training (`train_weights`)
TRAINING = dict(steps=1500, batch=16, lr=2e-3, warmup=50, seed=0)


def train_weights(cfg: ModelConfig = ModelConfig(), *, steps=TRAINING["steps"], batch=TRAINING["batch"],
                  lr=TRAINING["lr"], warmup=TRAINING["warmup"], seed=TRAINING["seed"], log=None):
    """Train the float32 model from ``init_params(cfg, seed)``; returns (params, meta)."""
    t0 = time.time()
    params, losses = train(cfg, init_params(cfg, seed), steps=steps, batch=batch, lr=lr, warmup=warmup, log=log)
    meta = dict(config=dataclasses.asdict(cfg), steps=steps, batch=batch, lr=lr, warmup=warmup, seed=seed,
                first_loss=losses[0], final_loss=losses[-1], losses=[round(x, 5) for x in losses],
                seconds=round(time.time() - t0, 1), jax=jax.__version__, corpus=corpus_digest())
    return params, meta


def _flat(params, prefix=""):
    out = {}
    for k, v in params.items():
        name = f"{prefix}/{k}" if prefix else k
        out.update(_flat(v, name) if isinstance(v, dict) else {name: v})
    return out


def save_weights(params, meta: dict, path) -> Path:
    """``params`` as float16 arrays in an ``.npz`` (names ``block_0/qkv/kernel``...) with
    ``meta`` as JSON; ValueError if a value does not fit float16's range."""
    arrays = {}
    for name, v in _flat(jax.device_get(params)).items():
        v = np.asarray(v, np.float32)
        if np.max(np.abs(v)) >= 65504:
            raise ValueError(f"{name} exceeds float16's range")
        arrays[name] = v.astype(np.float16)
    arrays["__meta__"] = np.frombuffer(json.dumps(meta, sort_keys=True).encode(), np.uint8)
    path = Path(path)
    with open(path, "wb") as fh:
        np.savez_compressed(fh, **arrays)
    return path


def load_weights(path=WEIGHTS):
    """(params (float32, nested dicts), meta) from `save_weights`' file."""
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(bytes(z["__meta__"]).decode())
        params: dict = {}
        for name in z.files:
            if name == "__meta__":
                continue
            node = params
            *parents, leaf = name.split("/")
            for p in parents:
                node = node.setdefault(p, {})
            node[leaf] = jnp.asarray(z[name].astype(np.float32))
    return params, meta


# ------------------------------------------------------------------------------------ units
@dataclasses.dataclass(frozen=True)
class UnitConfig:
    """One row of the study: a key, a label, the unit of the weight contractions and the unit
    of the attention contractions (the same unit except for the sparse row)."""

    key: str
    label: str
    unit: Unit
    attention: Unit | None = None

    @property
    def attention_unit(self) -> Unit:
        return self.attention or self.unit

    def unit_for(self, name: str) -> Unit:
        return self.attention_unit if name in ATTENTION else self.unit

    def exact(self) -> "UnitConfig":
        """The same builtins and operands under ``model="exact"`` (`exact_twin`)."""
        return UnitConfig(self.key + ":exact", self.label + " (exact)", exact_twin(self.unit),
                          None if self.attention is None else exact_twin(self.attention))

    def describe(self) -> dict:
        def one(u):
            return dict(builtin=u.builtin, target=u.target or u.spec.target, model=u.model or u.spec.default_model,
                        scaling=u.scaling, formats=f"{u.spec.a_type}x{u.spec.b_type}", prune=bool(u.prune))
        d = dict(key=self.key, label=self.label, **one(self.unit))
        if self.attention is not None:
            d["attention"] = one(self.attention)
        return d


_FP8 = "mfma_f32_16x16x32_fp8_fp8"
_MX = "mfma_scale_f32_16x16x128_f8f6f4"
_MI355X_FP8 = Unit(_FP8, target="gfx950", scaling="row")

UNITS = (
    UnitConfig("exact", "exact (MI355X fp8 operands)", _MI355X_FP8.replace(model="exact")),
    UnitConfig("mi300x-fp8", "MI300X fp8 (FNUZ)", Unit(_FP8, scaling="row")),
    UnitConfig("mi355x-fp8", "MI355X fp8", _MI355X_FP8),
    UnitConfig("mi355x-mxfp8", "MI355X MXFP8", Unit(_MX, scaling="mx", formats=("fp8", "fp8"))),
    UnitConfig("mi355x-mxfp8-rocjitsu", "MI355X MXFP8 (mx_rocjitsu)",
               Unit(_MX, scaling="mx", formats=("fp8", "fp8"), model="mx_rocjitsu")),
    UnitConfig("mi355x-mxfp6", "MI355X MXFP6", Unit(_MX, scaling="mx", formats=("fp6", "fp6"))),
    UnitConfig("mi355x-mxfp4", "MI355X MXFP4", Unit(_MX, scaling="mx", formats=("fp4", "fp4"))),
    UnitConfig("rdna4-fp8", "RDNA4 fp8", Unit("wmma_f32_16x16x16_fp8_fp8_w32_gfx12", scaling="row")),
    UnitConfig("rdna4-bf16", "RDNA4 bf16", Unit("wmma_f32_16x16x16_bf16_w32_gfx12", scaling="none")),
    UnitConfig("mi355x-sparse-fp8", "MI355X sparse fp8 2:4", Unit("smfmac_f32_16x16x128_fp8_fp8", scaling="row"),
               attention=_MI355X_FP8),
    UnitConfig("hopper-fp8", "Hopper fp8", _MI355X_FP8.replace(model="nvidia_hopper")),
)
UNIT_KEYS = tuple(u.key for u in UNITS)
#: the emulated training run's unit: MXFP8 forward, MI355X dense fp8 (row scaling) backward
TRAINING_UNIT = Unit(_MX, scaling="mx", formats=("fp8", "fp8"), backward=_MI355X_FP8)


def unit_configs(keys=UNIT_KEYS) -> list:
    """The `UNITS` rows named by ``keys``, in their order; ValueError for an unknown key."""
    by_key = {u.key: u for u in UNITS}
    bad = [k for k in keys if k not in by_key]
    if bad:
        raise ValueError(f"unknown unit(s) {bad}; the units are {', '.join(UNIT_KEYS)}")
    return [by_key[k] for k in keys]


def unit_model(cfg: ModelConfig, ucfg: UnitConfig):
    """`model_of` with every contraction through ``ucfg``'s units."""
    return model_of(cfg, functools.partial(dot_general, unit=ucfg.unit),
                    functools.partial(einsum, unit=ucfg.attention_unit))


# ------------------------------------------------------------------------------------ recording
class Recorder:
    """Native float32 contractions (precision HIGHEST) that keep each one's operands, as
    ``(lhs, rhs, dimension_numbers)`` in call order (an einsum as the `jwmma.dot_general` that
    `jwmma.einsum` runs: same operands, same K order). Needs concrete values (no jit)."""

    def __init__(self):
        self.calls: list = []

    def dot_general(self, lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, **kw):
        self.calls.append((np.asarray(lhs), np.asarray(rhs), dimension_numbers))
        return _native_dot_general(lhs, rhs, dimension_numbers, preferred_element_type=preferred_element_type)

    def einsum(self, subscripts, lhs, rhs, precision=None, **kw):
        dn, _ = einsum_dimension_numbers(subscripts, lhs, rhs)
        self.calls.append((np.asarray(lhs), np.asarray(rhs), dn))
        return _native_einsum(subscripts, lhs, rhs)


def contraction_names(cfg: ModelConfig) -> list:
    """(layer, name) of every contraction in forward order: (i, "qkv") .. (i, "down") for each
    block i, then (layers, "logits")."""
    return [(i, n) for i in range(cfg.layers) for n in CONTRACTIONS] + [(cfg.layers, "logits")]


def record(cfg: ModelConfig, params, tok):
    """The float32 logits of ``tok`` and every contraction's operands: (logits, [(layer,
    name, lhs, rhs, dimension_numbers)])."""
    rec = Recorder()
    logits = model_of(cfg, rec.dot_general, rec.einsum).apply({"params": params}, jnp.asarray(tok))
    names = contraction_names(cfg)
    assert len(rec.calls) == len(names), (len(rec.calls), len(names))
    return np.asarray(logits), [(i, n) + call for (i, n), call in zip(names, rec.calls)]


def logits_through(cfg: ModelConfig, params, tok, ucfg: UnitConfig):
    """The logits with every contraction through ``ucfg``'s units (run op by op: each unit GEMM
    is one cached program per shape)."""
    return np.asarray(unit_model(cfg, ucfg).apply({"params": params}, jnp.asarray(tok)))


# ------------------------------------------------------------------------------------ measures
def _f64(lhs, rhs, dn):
    with x64_scope():
        return np.asarray(jax.lax.dot_general(jnp.asarray(lhs, jnp.float64), jnp.asarray(rhs, jnp.float64), dn,
                                              precision=HI))


def _pruned_rhs(rhs, dn):
    """``rhs`` 2:4-pruned along its contracting dims as a unit prunes its A (float32, K in the
    order of ``dn``, groups of four)."""
    rc = tuple(dn[0][1])
    rb = tuple(dn[1][1])
    free = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    perm = list(rb) + free + list(rc)
    moved = np.transpose(np.asarray(rhs, np.float32), perm)
    k = math.prod(rhs.shape[d] for d in rc)
    flat = moved.reshape(-1, k)
    pad = -k % 4
    pruned = np.asarray(prune_2_4(jnp.asarray(np.pad(flat, ((0, 0), (0, pad))))))[:, :k]
    return np.transpose(pruned.reshape(moved.shape), np.argsort(perm))


def _norm(x):
    return float(np.linalg.norm(np.asarray(x, np.float64).ravel()))


def _unit_product(lhs, rhs, dn, unit):
    return np.asarray(dot_general(lhs, rhs, dn, unit=unit))


def exact_twin(unit: Unit) -> Unit:
    """The unit whose products are ``unit``'s exact twin (`contraction_errors`): ``unit`` under
    ``model="exact"``; a block-scaled unit (``scaling="mx"``) under its default model, which
    stands for the float64 product of its effective operands (`jwmma.quant.effective_product`)."""
    return unit.replace(model=None) if unit.scaling == "mx" else unit.replace(model="exact")


def _is_exact(unit: Unit) -> bool:
    return unit.scaling != "mx" and unit == exact_twin(unit)


def _exact_product(lhs, rhs, dn, unit):
    """The exact twin's product: ``unit`` under ``model="exact"`` (sums exact up to one float32
    rounding per K step), or for a block-scaled unit `jwmma.quant.effective_product`."""
    if unit.scaling == "mx":
        return effective_product(lhs, rhs, dn, unit=unit)
    return _unit_product(lhs, rhs, dn, exact_twin(unit))


def contraction_errors(calls, ucfg: UnitConfig, *, refs=None, exact_cache=None) -> list:
    """Per recorded contraction (`record`), ``ucfg``'s errors (module doc: ``quant``,
    ``accum``, ``total``, ``prune`` for pruned weights, ``ref_norm``, ``k``).

    Args:
        refs: optional list to fill/reuse with the float64 products (one per call).
        exact_cache: optional dict {exact unit: list of its products} shared between units.
    """
    rows = []
    for idx, (layer, name, lhs, rhs, dn) in enumerate(calls):
        unit = ucfg.unit_for(name)
        exact_unit = exact_twin(unit)
        if refs is not None and len(refs) > idx:
            ref = refs[idx]
        else:
            ref = _f64(lhs, rhs, dn)
            if refs is not None:
                refs.append(ref)
        key = (exact_unit, idx)
        if exact_cache is not None and key in exact_cache:
            ex = exact_cache[key]
        else:
            ex = _exact_product(lhs, rhs, dn, unit)
            if exact_cache is not None:
                exact_cache[key] = ex
        mo = ex if _is_exact(unit) else _unit_product(lhs, rhs, dn, unit)
        rn = _norm(ref)
        row = dict(layer=layer, name=name, k=int(math.prod(lhs.shape[d] for d in dn[0][0])), ref_norm=rn,
                   quant=_norm(ex - ref) / rn, accum=_norm(mo - ex) / rn, total=_norm(mo - ref) / rn)
        if unit.prune:
            row["prune"] = _norm(_f64(lhs, _pruned_rhs(rhs, dn), dn) - ref) / rn
        rows.append(row)
    return rows


def by_kind(layer_rows) -> dict:
    """{name: {quant, accum, total[, prune]}} over the blocks together: root sum of squares of
    the errors over root sum of squares of the references."""
    out: dict = {}
    for name in CONTRACTIONS + ("logits",):
        rows = [r for r in layer_rows if r["name"] == name]
        if not rows:
            continue
        den = math.sqrt(sum(r["ref_norm"] ** 2 for r in rows))
        out[name] = {m: math.sqrt(sum((r[m] * r["ref_norm"]) ** 2 for r in rows)) / den
                     for m in ("quant", "accum", "total", "prune") if all(m in r for r in rows)}
        out[name]["k"] = rows[0]["k"]
    return out


def _softmax64(logits):
    x = np.asarray(logits, np.float64)
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def output_metrics(logits, tok, answers, ref_logits=None) -> dict:
    """nll, ppl, bpb and top-1 accuracies (``acc`` on every byte, ``answer_acc`` on the answer
    bytes, ``recall_acc`` / ``sum_acc`` on each kind) of ``logits`` (b, s, vocab) for the next
    bytes of ``tok`` (b, s + 1) with answer kinds ``answers`` (`documents`); with ``ref_logits``
    also ``top1_agree`` and ``kl`` (KL(p_ref || p), nats, mean over positions)."""
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


def evaluate(cfg: ModelConfig, params, tok, answer, ucfgs=UNITS, log=None) -> tuple:
    """(float32 metrics, [one row per unit]) on ``tok`` (b, s + 1) and its answer kinds (module
    doc: end-to-end metrics through each unit and the per-contraction error split)."""
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


def _exact_units(ucfg: UnitConfig) -> frozenset:
    return frozenset(exact_twin(ucfg.unit_for(n)) for n in CONTRACTIONS + ("logits",))


def context_sweep(cfg: ModelConfig, params, tok, contexts, ucfgs=UNITS, log=None) -> list:
    """The accumulator's share of the p @ v error as the context L grows (module doc). One row
    per (unit, L): quant, accum, total, share = accum / total, k = L."""
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


def training_run(cfg: ModelConfig, *, unit: Unit = TRAINING_UNIT, steps: int = 40, batch: int = 8,
                 context: int = 64, lr: float = 2e-3, warmup: int = 10, seed: int = 0, eval_tok=None, log=None) -> dict:
    """Train from ``init_params(cfg, seed)`` twice on the same batches (documents from 0):
    float32, and with every contraction through ``unit`` (forward) and ``unit.backward``
    (both backward GEMMs). Returns both loss curves, the final networks' float32 evaluation
    loss on ``eval_tok`` (cut to ``context + 1``) and the times."""
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


# ------------------------------------------------------------------------------------ the run
#: the quick run (``--small``, the notebook under JWMMA_NOTEBOOK_SMALL=1): the shipped model,
#: few documents, short contexts, a short training run
SMALL = dict(eval_docs=2, eval_context=64, contexts=(16, 32, 64), train_steps=3, train_batch=2, train_context=32)
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
        params, meta = load_weights(cache)
    return params, dict(meta, source="trained in this run")


def run(*, cfg: ModelConfig = ModelConfig(), small: bool = False, units=UNIT_KEYS, eval_docs=None, eval_context=None,
        contexts=None, train_steps=None, train_batch=None, train_context=None, weights=WEIGHTS, retrain=False,
        params=None, out=None, log=print) -> dict:
    """The whole study (module doc); ``None`` sizes take `FULL` (or `SMALL` with ``small``).

    The float32 network: ``params`` when given (of ``cfg``), else the ``weights`` file (the
    shipped one for the default model), else the weights cached in ``out``, else trained
    (`train_weights`, then cached in ``out``); ``retrain`` skips the files. Writes
    ``results.json``, CSV files and figures to ``out`` when given; returns the results."""
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
    process or host, ``units=(key,)``, and one with ``units=()`` for the training run): the
    rows and context sweeps in the order of `UNITS`, the training run of the part that has one.
    ValueError if the parts differ in their network, weights, data or sizes."""
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


# ------------------------------------------------------------------------------------ output
_UNIT_COLS = ("key", "label", "builtin", "target", "model", "scaling", "formats", "prune", "nll", "ppl", "bpb",
              "acc", "answer_acc", "top1_agree", "kl", "seconds")
_LAYER_COLS = ("key", "layer", "name", "k", "ref_norm", "quant", "accum", "total", "prune")
_CTX_COLS = ("key", "label", "context", "k", "queries", "quant", "accum", "total", "share")


def _csv(path, rows, cols):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in rows:
        w.writerow([repr(r[c]) if isinstance(r.get(c), float) else r.get(c, "") for c in cols])
    Path(path).write_text(buf.getvalue())


def write(result: dict, out) -> list:
    """results.json, units.csv, layers.csv, context.csv, training.csv and the figures."""
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
    accumulator errors, then the accumulator's share of the p @ v error per context."""
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


def plot(result: dict, out) -> list:
    """PNG figures: per-contraction error split per unit, output metrics per unit, the
    accumulator's share against the context, the training curves. Returns the paths."""
    from ..isa.plot import require_matplotlib

    plt = require_matplotlib()
    out = Path(out)
    rows = result["rows"]
    paths = []
    if rows:
        names = [n for n in CONTRACTIONS + ("logits",) if n in rows[0]["kinds"]]
        labels = [r["label"] for r in rows]
        ypos = np.arange(len(rows))
        fig, axes = plt.subplots(1, len(names), figsize=(2.9 * len(names), 0.3 * len(rows) + 1.8), sharey=True)
        for ax, n in zip(np.atleast_1d(axes), names):
            ax.barh(ypos - 0.2, [r["kinds"][n]["quant"] for r in rows], 0.4, color="#4c72b0",
                    label="quantisation (+ 2:4 pruning)")
            ax.barh(ypos + 0.2, [max(r["kinds"][n]["accum"], 1e-12) for r in rows], 0.4, color="#dd8452",
                    label="accumulator (model vs exact)")
            ax.set_xscale("log")
            ax.set_xlim(1e-10, 3)
            ax.set_title(f"{n} (K = {rows[0]['kinds'][n]['k']})", fontsize=10)
            ax.grid(axis="x", alpha=0.3)
        axes = np.atleast_1d(axes)
        axes[0].set_yticks(ypos, labels)
        axes[0].invert_yaxis()
        axes[-1].legend(loc="lower right", fontsize=7)
        fig.suptitle("Per-contraction error of the transformer through each unit (||error||_F / ||float64||_F, "
                     "float32 network's operands, all blocks)", fontsize=10)
        fig.tight_layout()
        paths.append(out / "transformer_layer_errors.png")
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)

        fig, axes = plt.subplots(1, 3, figsize=(13, 0.3 * len(rows) + 1.8), sharey=True)
        f32 = result["f32"]
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
        for ax in axes:
            ax.grid(axis="x", alpha=0.3)
        axes[0].set_yticks(ypos, labels)
        axes[0].invert_yaxis()
        fig.tight_layout()
        paths.append(out / "transformer_outputs.png")
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)

    ctx = result.get("context") or []
    if ctx:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for key in dict.fromkeys(c["key"] for c in ctx):
            cs = sorted((c for c in ctx if c["key"] == key), key=lambda c: c["context"])
            if all(c["accum"] == 0 for c in cs):
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
        fig.tight_layout()
        paths.append(out / "transformer_context.png")
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)

    tr = result.get("training")
    if tr:
        fig, ax = plt.subplots(figsize=(6, 3.6))
        x = np.arange(1, len(tr["losses_f32"]) + 1)
        ax.plot(x, tr["losses_f32"], label="float32")
        back = tr["backward"]
        ax.plot(x, tr["losses_emulated"], label=f"forward {tr['forward']['builtin']} ({tr['forward']['scaling']}), "
                f"backward {back['builtin'] + ' (' + back['scaling'] + ')' if back else 'float32'}")
        ax.set_xlabel("training step")
        ax.set_ylabel("training loss (nats per byte)")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        paths.append(out / "transformer_training.png")
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)
    return paths
