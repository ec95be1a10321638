"""The transformer study (jwmma.study.transformer, ``jwmma study-net --net transformer``) in
pieces: the generated data, the model and its shipped weights, the error split and its
invariants, the command line. A tiny model keeps the default cases fast (each emulated GEMM
shape compiles once per unit); the full pipeline, the qwix route and the training through the
units are slow cases. The full-size numbers are in benchmarks/STUDY.md section 7."""
from __future__ import annotations

import dataclasses
import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("flax")

from jwmma.cli import main  # noqa: E402
from jwmma.study import transformer as tf  # noqa: E402

TINY = tf.ModelConfig(layers=1, d_model=32, heads=2, mlp=64, context=32)


@pytest.fixture(scope="module")
def tiny():
    params, losses = tf.train(TINY, tf.init_params(TINY), steps=30, batch=8, lr=3e-3, warmup=5)
    return params, losses


def test_documents_are_deterministic_and_answers_are_determined():
    a, ka = tf.document(7, 300)
    b, kb = tf.document(7, 300)
    assert a.dtype == np.uint8 and a.shape == (300,) and np.array_equal(a, b) and np.array_equal(ka, kb)
    assert not np.array_equal(a, tf.document(8, 300)[0])
    # the generator's output is pinned (numpy's RandomState streams are fixed): a change of the
    # language changes these, and the shipped weights were trained on it
    assert tf.corpus_digest() == "b438ec647f96bff4"
    assert tf.corpus_digest(tf.EVAL_OFFSET, 16, 257) == "04cf7817aaa1284c"
    tok, kinds = tf.documents(3, 1, 3000)
    text = bytes(tok[0].astype(np.uint8)).decode()
    values, pos, seen = {}, 0, {tf.RECALL: 0, tf.SUM: 0}
    for line in text.split("\n")[:-1]:  # the last line may be cut
        want = np.zeros(len(line), np.uint8)
        if m := re.fullmatch(r"let (\w)=(\d+)", line):
            values[m[1]] = m[2]
        elif m := re.fullmatch(r"(\w)=(\d+)", line):
            assert m[2] == values[m[1]]  # the value set last
            want[2:] = tf.RECALL
        elif m := re.fullmatch(r"(\d+)\+(\d+)=(\d+)", line):
            assert int(m[3]) == int(m[1]) + int(m[2])
            want[m.start(3):] = tf.SUM
        else:
            assert re.fullmatch(r"[a-z ]+\.", line), line
        assert np.array_equal(kinds[0, pos:pos + len(line) + 1], np.append(want, 0)), line
        for k in seen:
            seen[k] += int((want == k).any())
        pos += len(line) + 1
    assert seen[tf.RECALL] > 20 and seen[tf.SUM] > 10


def test_model_shapes_and_contractions(tiny):
    params, losses = tiny
    assert losses[-1] < losses[0] - 1.0  # it learns the byte statistics at least
    tok, _ = tf.documents(tf.EVAL_OFFSET, 2, TINY.context)
    logits, calls = tf.record(TINY, params, tok)
    assert logits.shape == (2, TINY.context, 256)
    assert [(layer, name) for layer, name, *_ in calls] == tf.contraction_names(TINY)
    k = {name: int(np.prod([lhs.shape[d] for d in dn[0][0]])) for _, name, lhs, _, dn in calls}
    assert k == dict(qkv=32, scores=16, pv=32, out=32, up=32, down=64, logits=32)
    native = np.asarray(tf.model_of(TINY).apply({"params": params}, jnp.asarray(tok)))
    np.testing.assert_array_equal(logits, native)  # recording does not change the float32 pass


def test_shipped_weights():
    """The weights file: < 5 MB, float16 values, the default model's tree, and its training."""
    assert tf.WEIGHTS.stat().st_size < 5 * 2**20
    params, meta = tf.load_weights()
    want = jax.tree_util.tree_map(lambda x: x.shape, tf.init_params(tf.ModelConfig()))
    assert jax.tree_util.tree_map(lambda x: x.shape, params) == want
    assert meta["config"] == dataclasses.asdict(tf.ModelConfig()) and meta["corpus"] == tf.corpus_digest()
    assert meta["final_loss"] < 1.0 and meta["steps"] == tf.TRAINING["steps"]
    leaf = params["block_0"]["up"]["kernel"]
    assert leaf.dtype == jnp.float32 and np.array_equal(np.asarray(leaf).astype(np.float16).astype(np.float32), leaf)


def test_weights_round_trip(tiny, tmp_path):
    params, _ = tiny
    path = tf.save_weights(params, dict(note="x"), tmp_path / "w.npz")
    back, meta = tf.load_weights(path)
    assert meta == dict(note="x")
    for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(back)):
        np.testing.assert_array_equal(np.asarray(a).astype(np.float16).astype(np.float32), b)


@pytest.mark.slow  # ~12 s cold; the same invariants run by default on the network study (test_network_study.py)
def test_error_split_invariants(tiny):
    """exact has no accumulator error and its quantisation error is every unit's on the same
    operands; the total lies in the triangle of its parts; pruning shows in the sparse row."""
    params, _ = tiny
    tok, _ = tf.documents(tf.EVAL_OFFSET, 1, 16)
    _, calls = tf.record(TINY, params, tok)
    calls = [c for c in calls if c[1] in ("qkv", "pv")]  # two shapes: few compilations
    exact, fp8, sparse = tf.unit_configs(["exact", "mi355x-fp8", "mi355x-sparse-fp8"])
    cache: dict = {}
    rows = {u.key: tf.contraction_errors(calls, u, exact_cache=cache) for u in (exact, fp8, sparse)}
    for key, layers in rows.items():
        for r in layers:
            assert abs(r["quant"] - r["accum"]) - 1e-12 <= r["total"] <= r["quant"] + r["accum"] + 1e-12
            assert 1e-3 < r["quant"] < 0.1 or (key == "mi355x-sparse-fp8" and r["name"] == "qkv")
    assert all(r["accum"] == 0 for r in rows["exact"])
    assert [r["quant"] for r in rows["exact"]] == [r["quant"] for r in rows["mi355x-fp8"]]
    qkv = rows["mi355x-sparse-fp8"][0]
    assert qkv["name"] == "qkv" and 0.2 < qkv["prune"] < 0.6 and abs(qkv["quant"] - qkv["prune"]) < 0.05
    assert "prune" not in rows["mi355x-sparse-fp8"][1]  # p @ v runs on the dense unit
    assert rows["mi355x-sparse-fp8"][1]["quant"] == rows["mi355x-fp8"][1]["quant"]
    kinds = tf.by_kind(rows["mi355x-fp8"])
    assert set(kinds) == {"qkv", "pv"} and kinds["qkv"]["k"] == 32


def test_block_scaled_units_have_a_float64_exact_twin(tiny):
    """An MX unit has no ``model="exact"`` (its instruction applies the scales): its exact twin
    is the float64 product of its MX-quantised operands, checked here against that product
    built from the spec (OCP MX: per 32 elements along K, scale 2**(floor(log2 amax) -
    emax_elem), elements rounded to nearest even with saturation)."""
    params, _ = tiny
    tok, _ = tf.documents(tf.EVAL_OFFSET, 1, 16)
    _, calls = tf.record(TINY, params, tok)
    layer, name, lhs, rhs, dn = next(c for c in calls if c[1] == "up")  # x (1, 16, 32) . w (32, 64)
    mx8 = tf.unit_configs(["mi355x-mxfp8"])[0]
    assert tf.exact_twin(mx8.unit).model is None and tf.exact_twin(tf.UNITS[1].unit).model == "exact"
    row = tf.contraction_errors([(layer, name, lhs, rhs, dn)], mx8)[0]
    assert 0 < row["accum"] < 1e-6 and 1e-3 < row["quant"] < 0.1

    import ml_dtypes

    def mx(x, axis):  # x float32, blocks of 32 along axis (K = 32: one block)
        x = np.asarray(x, np.float64)
        amax = np.max(np.abs(x), axis=axis, keepdims=True)
        e = np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - 8  # E4M3's largest exponent: 8
        q = np.clip(x / 2.0 ** e, -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
        return q * 2.0 ** e

    want = np.einsum("bsk,kn->bsn", mx(lhs, -1), mx(rhs, 0))
    ref = np.einsum("bsk,kn->bsn", np.asarray(lhs, np.float64), np.asarray(rhs, np.float64))
    assert row["quant"] == pytest.approx(np.linalg.norm(want - ref) / np.linalg.norm(ref), rel=1e-12)


def test_merge_joins_parts_and_refuses_mismatches():
    def part(keys, train_steps, **extra):
        nan = float("nan")
        return dict(data=dict(eval_docs=1), model=dict(layers=1), f32=dict(nll=1.0, answer_acc=nan),
                    size=dict(eval_docs=1, eval_context=16, contexts=[8], train_steps=train_steps, train_batch=1,
                              train_context=8),
                    rows=[dict(key=k) for k in keys], context=[dict(key=k, context=8) for k in keys],
                    training=dict(steps=train_steps) if train_steps else None, seconds=1.0, **extra)

    a, b, c = part(["hopper-fp8", "exact"], 0), part([], 3), part(["mi300x-fp8"], 0)
    m = tf.merge([b, a, c])
    assert [r["key"] for r in m["rows"]] == ["exact", "mi300x-fp8", "hopper-fp8"]  # the order of UNITS
    assert [x["key"] for x in m["context"]] == ["exact", "mi300x-fp8", "hopper-fp8"]
    assert m["training"] == dict(steps=3) and m["size"]["train_steps"] == 3 and m["parts"] == 3
    with pytest.raises(ValueError, match="more than one part"):
        tf.merge([a, a])
    with pytest.raises(ValueError, match="more than one part has a training run"):
        tf.merge([b, b])
    with pytest.raises(ValueError, match="differ in their sizes"):
        tf.merge([a, dict(c, size=dict(c["size"], eval_docs=2))])
    with pytest.raises(ValueError, match="differ in 'f32'"):
        tf.merge([a, dict(c, f32=dict(nll=2.0))])


def test_output_metrics():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 5, 256))
    tok = rng.integers(0, 256, size=(2, 6))
    answer = np.zeros((2, 6), bool)
    answer[:, 3] = True
    m = tf.output_metrics(logits, tok, answer, logits)
    assert m["kl"] == pytest.approx(0, abs=1e-12) and m["top1_agree"] == 1.0
    assert m["ppl"] == pytest.approx(np.exp(m["nll"])) and 0 <= m["answer_acc"] <= 1
    other = tf.output_metrics(logits + rng.normal(size=logits.shape), tok, answer, logits)
    assert other["kl"] > 0 and other["top1_agree"] < 1


def test_units_are_the_documented_ones():
    by = {u.key: u for u in tf.UNITS}
    assert by["mi300x-fp8"].unit.spec.a_type == "fp8_fnuz" and by["mi355x-fp8"].unit.spec.a_type == "fp8"
    assert by["hopper-fp8"].unit == by["mi355x-fp8"].unit.replace(model="nvidia_hopper")
    assert by["exact"].unit == by["mi355x-fp8"].unit.replace(model="exact")
    assert [by[f"mi355x-mxfp{n}"].unit.spec.a_type for n in (8, 6, 4)] == ["fp8", "fp6", "fp4"]
    sparse = by["mi355x-sparse-fp8"]
    assert sparse.unit.prune and not sparse.attention_unit.prune and sparse.unit_for("pv") == by["mi355x-fp8"].unit
    assert tf.TRAINING_UNIT.backward == by["mi355x-fp8"].unit
    with pytest.raises(ValueError, match="unknown unit"):
        tf.unit_configs(["mi400"])


def test_cli_refuses_bad_values(capsys):
    assert main(["study-net", "--net", "transformer", "--units", "mi400"]) == 2
    assert "--units takes" in capsys.readouterr().err
    assert main(["study-net", "--net", "transformer", "--contexts", "16,x"]) == 2
    assert "--contexts takes" in capsys.readouterr().err
    assert main(["study-net", "--net", "transformer", "--contexts", "512"]) == 2
    assert "at most the model's context" in capsys.readouterr().err


@pytest.mark.slow  # ~1 min: the shipped model's 7 contraction shapes compile for the exact unit
def test_cli_small(tmp_path):
    out = tmp_path / "tf"
    assert main(["study-net", "--net", "transformer", "--small", "--units", "exact", "--contexts", "16",
                 "--train-steps", "0", "--eval-docs", "1", "--out", str(out)]) == 0
    result = json.loads((out / "results.json").read_text())
    assert [r["key"] for r in result["rows"]] == ["exact"] and result["training"] is None
    # one document of 64 bytes: less context to recall from than the full study's 256 (ppl 2.26);
    # a model that learned nothing would have 256
    assert result["f32"]["ppl"] < 4 and result["rows"][0]["top1_agree"] > 0.8
    assert (out / "units.csv").read_text().startswith("key,label,") and (out / "transformer_layer_errors.png").exists()


@pytest.mark.slow  # several minutes: two units end to end, the sweep and a training run on the tiny model
def test_full_pipeline_tiny(tiny, tmp_path):
    params, _ = tiny
    result = tf.run(cfg=TINY, params=params, units=("exact", "hopper-fp8"), eval_docs=2, eval_context=32,
                    contexts=(8, 32), train_steps=3, train_batch=2, train_context=16, out=tmp_path, log=None)
    rows = {r["key"]: r for r in result["rows"]}
    assert rows["exact"]["kinds"]["up"]["accum"] == 0 and rows["hopper-fp8"]["kinds"]["up"]["accum"] > 0
    assert len(result["context"]) == 4 and all(0 <= c["share"] <= 1 + 1e-9 for c in result["context"])
    tr = result["training"]
    assert len(tr["losses_emulated"]) == 3 and tr["losses_emulated"] != tr["losses_f32"]
    assert abs(tr["losses_emulated"][0] - tr["losses_f32"][0]) < 0.05  # same initial network, fp8 forward
    table = tf.format_rows(result)
    assert "| Hopper fp8 |" in table and "L = 32" in table
    for name in ("results.json", "units.csv", "layers.csv", "context.csv", "training.csv",
                 "transformer_outputs.png", "transformer_context.png", "transformer_training.png"):
        assert (tmp_path / name).exists(), name


@pytest.mark.slow  # the qwix provider's route compiles the unit's GEMMs again (new call sites)
def test_qwix_route_gives_the_same_bits(tiny):
    """The unmodified model under the qwix provider (rules by operation) gives the bits of the
    injected contractions that the study uses."""
    qwix = pytest.importorskip("qwix")
    from jwmma.nn import qwix as jq

    params, _ = tiny
    ucfg = tf.unit_configs(["mi355x-sparse-fp8"])[0]
    tok = jnp.asarray(tf.documents(tf.EVAL_OFFSET, 1, 16)[0])
    provider = jq.provider([jq.Rule(".*", ucfg.unit, op_names=("dot_general",)),
                            jq.Rule(".*", ucfg.attention_unit, op_names=("einsum",))])
    qmodel = qwix.quantize_model(tf.model_of(TINY), provider)
    provider.reset_counts()
    via_qwix = np.asarray(qmodel.apply({"params": params}, tok))
    assert provider.counts == {("dot_general", "unit"): 5, ("einsum", "unit"): 2}  # 4 Dense, the logits
    np.testing.assert_array_equal(via_qwix, tf.logits_through(TINY, params, tok, ucfg))
