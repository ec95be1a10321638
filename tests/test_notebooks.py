"""The notebooks run top to bottom (nbclient, a fresh kernel, small sizes), so they never rot.

``JWMMA_NOTEBOOK_SMALL=1`` is set for the kernel: the study notebook then shrinks its sweep.
Needs the ``notebooks`` extra (nbclient, nbformat, ipykernel, matplotlib); skipped without it.
The notebooks are marked slow (``pytest -m slow``): each compiles its emulated GEMMs.
"""
from __future__ import annotations

import pathlib

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")

NOTEBOOKS = pathlib.Path(__file__).resolve().parent.parent / "notebooks"


def execute(name: str, monkeypatch):
    monkeypatch.setenv("JWMMA_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    for cell in nb.cells:  # run from scratch, whatever outputs are stored
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    return nb


def outputs(nb, kind="stream"):
    text = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if kind == "stream" and out.get("output_type") == "stream":
                text.append(out["text"])
            elif kind in out.get("data", {}):
                text.append(out["data"][kind])
    return "\n".join(text)


@pytest.mark.slow  # ~50 s, most of it JAX compiling the builtins and models it shows
def test_quickstart_runs(monkeypatch):
    nb = execute("quickstart.ipynb", monkeypatch)
    text = outputs(nb)
    assert "bit-identical to the once-rounded reference: True" in text
    assert "identical bits: True" in text
    assert outputs(nb, "image/png")  # the layout figures were drawn


@pytest.mark.slow
def test_fp8_study_runs(monkeypatch):
    nb = execute("fp8_accumulation_study.ipynb", monkeypatch)
    md = outputs(nb, "text/markdown")
    assert "**Conclusions** (16x16 outputs x 2 seeds per point" in md
    assert outputs(nb, "image/png")


@pytest.mark.slow  # ~2 min on 2 cores: training, six emulated configurations, fine-tuning
def test_network_study_runs(monkeypatch):
    pytest.importorskip("sklearn")
    nb = execute("network_study.ipynb", monkeypatch)
    md = outputs(nb, "text/markdown")
    assert "| fp8 | CDNA4 | cdna3 | row |" in md and "**Conclusions**" in md
    assert "fine-tuned through fp8 CDNA4 cdna3" in outputs(nb)
    assert outputs(nb, "image/png")


@pytest.mark.slow  # ~3 min on 2 cores: every emulated GEMM shape compiles once per unit (4 units, 7 shapes
#                    each, the sweep's and the training run's forward and backward shapes), ~2 s apiece
def test_transformer_study_runs(monkeypatch):
    pytest.importorskip("flax")
    nb = execute("transformer_study.ipynb", monkeypatch)
    md = outputs(nb, "text/markdown")
    assert "| MI355X fp8 |" in md and "| Hopper fp8 |" in md and "**Conclusions**" in md
    assert "through units:" in outputs(nb)
    assert outputs(nb, "image/png")
