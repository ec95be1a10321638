"""The network study (jwmma.study.network, ``jwmma study-net``) on a tiny MLP: the data, float32
training, the error split and its invariants, 2:4 fine-tuning, the command line. The full-size
numbers are in benchmarks/STUDY.md."""
from __future__ import annotations

import importlib.util
import json

import jax
import numpy as np
import pytest

if importlib.util.find_spec("sklearn") is None:  # found, not imported: collection stays 1.4 s shorter
    pytest.skip("needs scikit-learn (the digits data)", allow_module_level=True)

from jwmma.cli import main  # noqa: E402
from jwmma.study import network as nw  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return nw.load_digits_data(upsample=8, seed=0)


@pytest.fixture(scope="module")
def trained(data):
    x, y, _, _ = data
    params = nw.init_mlp(jax.random.PRNGKey(0), (64, 64, 64, 10))  # two layer shapes: few compilations
    return nw.train(params, x, y, epochs=8, batch=64, lr=3e-3)


def test_digits_split(data):
    x, y, xt, yt = data
    assert x.shape == (len(y), 64) and xt.shape == (len(yt), 64) and len(y) + len(yt) == 1797
    assert x.dtype == np.float32 and 0.0 <= x.min() and x.max() <= 1.0
    counts = np.bincount(yt, minlength=10)
    assert counts.min() >= 34 and counts.max() <= 38  # stratified: ~20% of each class
    big = nw.load_digits_data(upsample=16, seed=0)[0]
    assert big.shape == (len(y), 256)


def test_float32_training_learns(data, trained):
    params, losses = trained
    assert losses[-1] < 0.5 * losses[0]
    assert nw.accuracy(params, data[2], data[3]) > 0.85


def test_error_split_invariants(data, trained):
    """exact has no accumulator error; a model's total error lies within the triangle of its
    two parts; pruning alone is part of quantisation + pruning; accuracies are fractions."""
    params, _ = trained
    cfgs = [nw.Config("fp8", nw.FORMAT_BUILTINS["fp8"][0], m, "row") for m in ("exact", "cdna3")]
    rows = nw.evaluate(params, data[2][:64], data[3][:64], cfgs)
    assert [r["model"] for r in rows] == ["exact", "cdna3"]
    for r in rows:
        assert 0.0 <= r["accuracy"] <= 1.0 and len(r["layers"]) == 3
        for layer in r["layers"]:
            assert abs(layer["quant"] - layer["accum"]) - 1e-12 <= layer["total"] <= layer["quant"] + layer["accum"] + 1e-12
            assert 0.05 < layer["prune"] < 1 and 0.05 < layer["quant"] < 1 and 0 < layer["quant_only"] < 0.1
            tol = 1e-6  # exact's one f32 rounding per K step against the float64 product
            assert abs(layer["prune"] - layer["quant_only"]) - tol <= layer["quant"] <= layer["prune"] + layer["quant_only"] + tol
    assert all(layer["accum"] == 0 for layer in rows[0]["layers"])
    assert [layer["quant"] for layer in rows[0]["layers"]] == [layer["quant"] for layer in rows[1]["layers"]]
    table = nw.format_rows(dict(f32_accuracy=0.9, rows=rows))
    assert "| fp8 | CDNA4 | cdna3 | row |" in table


@pytest.mark.slow  # ~60 s: the emulated training step and the command line compile their own programs
def test_finetune_and_cli(data, trained, tmp_path):
    params, _ = trained
    x, y, xt, yt = data
    cfg = nw.Config("fp8", nw.FORMAT_BUILTINS["fp8"][0], "exact", "row")
    ft, tuned = nw.finetune_sparse(params, x, y, xt, yt, cfg, epochs=2, batch=256, lr=1e-3)
    assert len(ft["losses"]) == 2 and ft["losses"][1] < ft["losses"][0]
    assert ft["finetuned_emulated"] >= ft["pruned_emulated"] - 0.01
    out = tmp_path / "net"
    assert main(["study-net", "--hidden", "16", "--upsample", "8", "--epochs", "2", "--finetune-epochs", "1",
                 "--formats", "fp8", "--cdna4-models", "exact", "--rdna4-models", "", "--out", str(out)]) == 0
    result = json.loads((out / "results.json").read_text())
    assert result["sizes"] == [64, 16, 16, 10] and len(result["rows"]) == 1
    assert (out / "network_layer_errors.png").stat().st_size > 0 and (out / "network_finetune.png").exists()


def test_cli_refuses_bad_lists(capsys):
    assert main(["study-net", "--formats", "fp9"]) == 2
    assert "--formats takes" in capsys.readouterr().err
    assert main(["study-net", "--cdna4-models", "", "--rdna4-models", ""]) == 2
