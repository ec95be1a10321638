"""The notebooks run top to bottom (nbclient, a fresh kernel), so they never rot.

Two ways: the tests' quick run, with ``JWMMA_NOTEBOOK_SMALL=1`` set for the kernel (the study
notebooks then shrink their sizes further), and a reader's run, as the notebook stands (no
variable), which must finish within `READER_SECONDS` on a 2-core CPU. Both are slow cases
(``pytest -m slow``): each notebook compiles its emulated GEMMs. The default suite only reads
the notebooks (no kernel). The kernel imports this checkout's jwmma (``PYTHONPATH``), whatever
jwmma is installed.

Needs the ``notebooks`` extra (nbclient, nbformat, ipykernel, matplotlib); skipped without it.
"""
from __future__ import annotations

import importlib.util
import os
import pathlib
import time

import pytest

# found at collection, imported by the tests that run (nbclient brings Jupyter's client and
# ZeroMQ into every test process otherwise)
_MISSING = [m for m in ("nbformat", "nbclient", "ipykernel", "matplotlib") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=f"needs the notebooks extra ({', '.join(_MISSING)} missing)")

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
#: a reader's run of any notebook on a 2-core CPU, kernel start included (each aims at about 2
#: minutes; the times measured are in tests/README.md)
READER_SECONDS = 180
#: what each study notebook needs beyond the base install, and the command of its full study
STUDIES = {
    "fp8_accumulation_study.ipynb": (None, "jwmma study"),
    "network_study.ipynb": ("sklearn", "jwmma study-net"),
    "transformer_study.ipynb": ("flax", "jwmma study-net --net transformer"),
}


def execute(name: str, monkeypatch, small: bool = True, timeout: int = 600):
    """Run the notebook in a fresh kernel, whatever outputs are stored.

    Args:
        name: the notebook's file name in notebooks/.
        small: the tests' quick run (``JWMMA_NOTEBOOK_SMALL=1``); False: as a reader runs it.
        timeout: seconds any one cell may take.
    Returns:
        The executed notebook (nbformat).
    """
    if small:
        monkeypatch.setenv("JWMMA_NOTEBOOK_SMALL", "1")
    else:
        monkeypatch.delenv("JWMMA_NOTEBOOK_SMALL", raising=False)
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    import nbclient
    import nbformat

    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    for cell in nb.cells:  # run from scratch, whatever outputs are stored
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
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


@pytest.mark.slow  # ~20 s, most of it JAX compiling the builtins and models it shows
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


@pytest.mark.slow  # ~1 min on 2 cores: training, six emulated configurations, fine-tuning
def test_network_study_runs(monkeypatch):
    pytest.importorskip("sklearn")
    nb = execute("network_study.ipynb", monkeypatch)
    md = outputs(nb, "text/markdown")
    assert "| fp8 | CDNA4 | cdna3 | row |" in md and "**Conclusions**" in md
    assert "fine-tuned through fp8 CDNA4 cdna3" in outputs(nb)
    assert outputs(nb, "image/png")


@pytest.mark.slow  # ~75 s on 2 cores: every emulated GEMM shape compiles once per unit (3 units, 7 shapes
#                    each, the sweep's and the training run's forward and backward shapes)
def test_transformer_study_runs(monkeypatch):
    pytest.importorskip("flax")
    nb = execute("transformer_study.ipynb", monkeypatch)
    md = outputs(nb, "text/markdown")
    assert "| MI355X fp8 |" in md and "| Hopper fp8 |" in md and "**Conclusions**" in md
    assert "through units:" in outputs(nb)
    assert outputs(nb, "image/png")


@pytest.mark.slow  # up to 3 minutes per notebook on 2 cores: a reader's run, as the notebook stands
@pytest.mark.parametrize("name", ["quickstart.ipynb", *STUDIES])
def test_a_readers_run_finishes_within_three_minutes(name, monkeypatch):
    needs = STUDIES.get(name, (None, None))[0]
    if needs:
        pytest.importorskip(needs)
    t0 = time.perf_counter()
    execute(name, monkeypatch, small=False, timeout=READER_SECONDS)
    seconds = time.perf_counter() - t0
    assert seconds < READER_SECONDS, f"{name}: a reader's run took {seconds:.0f} s"


@pytest.mark.parametrize("name", list(STUDIES))
def test_study_notebooks_say_how_to_run_the_full_study(name):
    """A reader's run is a quick version of the study (`READER_SECONDS`): a markdown cell names
    the command of the full study and where its results are. No kernel: milliseconds."""
    import nbformat

    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    text = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
    assert STUDIES[name][1] in text and "benchmarks/STUDY.md" in text
