"""`jwmma gemm` over two processes (--coordinator / --num-processes / --process-id).

One GEMM over a global mesh of both processes' devices; process 0 prints the report (D is
gathered for the measures: every process of this command holds the operands and the
reference anyway). Compared with the one-process report: every measure equal.
"""
from __future__ import annotations

import json
import math

import pytest

from multihost import launch as mh_launch

CLI = ["-m", "jwmma"]
TIMING = {"seconds", "first_chunk_seconds", "compiled_seconds", "macs_per_s"}
MEANS = {"mean_rel", "bias", "fro_rel", "rn_mean_rel", "mean_ulp", "mean_abs_ulp"}


def report(res):
    out = res.output[0]
    start = out.index("\n[\n") + 1 if "\n[\n" in out else out.index("[\n")
    return json.loads(out[start:out.rindex("]") + 1])


def flags(i, coordinator):
    return ["--coordinator", coordinator, "--num-processes", "2", "--process-id", str(i)]


def compare(argv):
    args = CLI + ["gemm", *argv, "--json", "--no-progress"]
    one = mh_launch.launch(args, num_processes=1, timeout=240, via_env=False)
    two = mh_launch.launch(args, num_processes=2, timeout=240, via_env=False, per_process_args=flags)
    for res, what in ((one, "one process"), (two, "two processes")):
        assert not res.timed_out and res.returncode == [0] * len(res.returncode), f"{what}:\n{res.tail()}"
    assert "[\n" not in two.output[1], "only process 0 reports"
    r1, r2 = report(one), report(two)
    assert len(r1) == len(r2) >= 1
    for a, b in zip(r1, r2):
        assert set(a) == set(b)
        for k in set(a) - TIMING:
            if k in MEANS and isinstance(a[k], float) and math.isfinite(a[k]):
                assert b[k] == pytest.approx(a[k], rel=1e-12, abs=1e-300), k
            else:
                assert a[k] == b[k], (k, a[k], b[k])
    return r1


@pytest.mark.slow  # ~20 CPU-s: the default run covers the same flags through `jwmma study`
def test_gemm_cli_two_processes_report_equals_one_process():
    rows = compare(["--format", "fp8", "-m", "64", "-n", "64", "-k", "512", "--model", "fma_chain"])
    assert rows[0]["ident"] > 0.9 and sum(rows[0]["ulp_hist"].values()) == 64 * 64


@pytest.mark.slow
def test_gemm_cli_two_processes_integer_and_cdna3():
    compare(["--builtin", "swmmac_i32_16x16x32_iu8_w32", "-m", "64", "-n", "32", "-k", "256", "--clamp"])
    compare(["--format", "fp8", "-m", "64", "-n", "48", "-k", "1024"])  # cdna3 and exact, 2 chunks of K


def test_incomplete_job_description_is_a_clear_cli_error(capsys, monkeypatch):
    for k in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "SLURM_NTASKS"):
        monkeypatch.delenv(k, raising=False)
    from jwmma.cli import main

    assert main(["gemm", "--num-processes", "2", "--process-id", "0"]) == 2
    err = capsys.readouterr().err
    assert "jwmma: error: a multi-process run needs the coordinator address (--coordinator or " \
           "JAX_COORDINATOR_ADDRESS)" in err
    assert main(["study", "--coordinator", "h:1", "--num-processes", "2", "--process-id", "2"]) == 2
    assert "the process id must be in [0, 1] for 2 processes, got 2" in capsys.readouterr().err
