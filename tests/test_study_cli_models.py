"""``jwmma study`` without --model runs the default models that apply to the sweep's builtins
plus the builtin's own default model (an f16-output RDNA4 builtin: gfx12_dot4, not `cdna3`, which accumulates in f32 only, NUMERICS.md); an
explicit model that cannot run is refused (exit 2) with the models that can, and nothing runs."""
from __future__ import annotations

import json

import pytest

from jwmma.cli import main

F16_OUT = "swmmac_f16_16x16x32_f16_w32"
TINY = ["--k", "32", "--seeds", "1", "--size", "16x16", "--no-plots", "--no-progress"]


def test_default_models_are_those_that_apply(capsys, tmp_path):
    rc = main(["study", "--builtin", F16_OUT, *TINY, "-o", str(tmp_path / "s"), "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    rows = json.loads(out)
    assert {r["model"] for r in rows} == {"exact", "fma_chain", "gfx12_dot4"}  # + the builtin's own default
    assert {r["builtin"] for r in rows} == {F16_OUT}
    assert "cdna3" in err and "does not apply" in err  # says what it left out


def test_explicit_model_that_cannot_run_is_refused_with_the_list(capsys, tmp_path):
    out_dir = tmp_path / "s"
    rc = main(["study", "--builtin", F16_OUT, "--model", "exact,cdna3", *TINY, "-o", str(out_dir)])
    _, err = capsys.readouterr()
    assert rc == 2
    assert f"--model cdna3 cannot run {F16_OUT}" in err and "f16 outputs" in err
    listed = err.split("Models that run on", 1)[1]
    for name in ("exact", "fma_chain", "gfx12_dot4"):
        assert name in listed
    assert "cdna3," not in listed and "without --model: exact, fma_chain, gfx12_dot4" in err
    assert not out_dir.exists()  # refused before anything ran


def test_f32_builtin_keeps_every_default_model(capsys, tmp_path):
    rc = main(["study", "--builtin", "smfmac_f32_16x16x128_fp8_fp8", *TINY, "--k", "128",
               "-o", str(tmp_path / "s"), "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert {r["model"] for r in json.loads(out)} == {"exact", "cdna3", "fma_chain"}


@pytest.mark.slow
def test_study_takes_the_older_chips_rows(capsys, tmp_path):
    """MI200's multi-block and non-1k bf16 rows (their own default models on target gfx90a) and
    RDNA3's WMMA on gfx1151: the sweep runs them with each row's model for that chip."""
    for builtin, target, model in (("mfma_f32_16x16x4f16", "gfx90a", "cdna2"),
                                   ("mfma_f32_4x4x2bf16", "gfx90a", "CDNA2(group=2)"),
                                   ("wmma_f32_16x16x16_f16_w64", "gfx1151", "gfx11_dot2")):
        rc = main(["study", "--builtin", builtin, "--target", target, *TINY, "-o", str(tmp_path / builtin), "--json"])
        out, err = capsys.readouterr()
        assert rc == 0, err
        rows = json.loads(out)
        assert model in {r["model"] for r in rows} and {r["builtin"] for r in rows} == {builtin}, (builtin, rows)
