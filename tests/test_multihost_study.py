"""Study sweeps spread over two processes (`jwmma study` with --coordinator ...).

Every run is the real CLI in fresh processes (`python -m jwmma study`), on the loopback
address, bounded in time and always cleaned up by `multihost/launch.py`. A one-process run of
the same sweep is the reference: the merged tables must hold exactly its rows (timings
aside) and its summary byte for byte.
"""
from __future__ import annotations

import json
import os

import pytest

from multihost import launch as mh_launch

# the default cases use one cheap model (compilation dominates on 2 cores); the slow ones two
SWEEP = ["--k", "128,256,512", "--seeds", "2", "--size", "16x16", "--no-plots", "--no-progress"]
MODELS = {"fast": ["--model", "fma_chain"], "slow": ["--model", "fma_chain,exact"]}
HEARTBEAT = ["--heartbeat-timeout", "5"]  # a SIGKILLed peer counts as dead after 5 s (JAX: 100)
UNITS = 3 * 2  # K x seeds


JWMMA_CLI = ["-m", "jwmma"]


def points(kind):
    return UNITS * (1 if kind == "fast" else 2)


def cli(out, *extra, kind="fast", program=JWMMA_CLI):
    return [*program, "study", *SWEEP, *MODELS[kind], *HEARTBEAT, "-o", str(out), *extra]


def flags(i, coordinator):
    return ["--coordinator", coordinator, "--num-processes", "2", "--process-id", str(i)]


def rows(out, name="points.jsonl"):
    with open(os.path.join(out, name)) as f:
        return [json.loads(line) for line in f if line.strip()]


def key(r):
    return (r["builtin"], r["format"], r["dist"], r["scaling"], r["model"], r["remedy"], r["K"], r["M"], r["N"], r["seed"])


def untimed(rs):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rs]


def check(res, what):
    assert not res.timed_out, f"{what} timed out:\n{res.tail()}"
    assert res.returncode == [0] * len(res.returncode), f"{what} failed:\n{res.tail()}"


def one_process(out, kind):
    res = mh_launch.launch(cli(out, kind=kind), num_processes=1, timeout=240, via_env=False)
    check(res, "the one-process sweep")
    return out


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """The one-process sweep (no coordinator): the reference tables."""
    return one_process(tmp_path_factory.mktemp("single"), "fast")


@pytest.fixture(scope="module")
def single_slow(tmp_path_factory):
    return one_process(tmp_path_factory.mktemp("single_slow"), "slow")


#: the python of another installed jwmma to compare with (tests/README.md); unset: skipped
REF_PYTHON = os.environ.get("JWMMA_REF_PYTHON", "")


@pytest.fixture(scope="module")
def landed(tmp_path_factory):
    """The same sweep by the landed, unpatched `jwmma study` (its points file is in
    computation order, so rows are compared as sets)."""
    if not REF_PYTHON:
        pytest.skip("JWMMA_REF_PYTHON not set (the python of the jwmma to compare with)")
    if not os.path.isfile(REF_PYTHON):
        pytest.skip(f"JWMMA_REF_PYTHON={REF_PYTHON!r} is not a file")
    out = tmp_path_factory.mktemp("landed")
    args = ["-c", "import sys; from jwmma.cli import main; sys.exit(main())", "study", *SWEEP, *MODELS["slow"],
            "-o", str(out)]
    res = mh_launch.launch(args, num_processes=1, timeout=240, via_env=False, python=REF_PYTHON, cwd=str(out),
                           extra_env={"PYTHONPATH": ""})  # the landed package, not this one
    check(res, "the landed one-process sweep")
    return out


@pytest.mark.slow
def test_one_process_tables_equal_the_landed_code(single_slow, landed):
    """The one-process study writes what the code before the restructure wrote (the same
    rows, now in canonical order; the same summary bytes)."""
    got, want = untimed(rows(single_slow)), untimed(rows(landed))
    assert sorted(map(repr, got)) == sorted(map(repr, want)) and len(got) == points("slow")
    for name in ("summary.csv", "summary.json"):
        assert (single_slow / name).read_bytes() == (landed / name).read_bytes(), name


def same_tables(out, ref_out, kind="fast"):
    got, want = rows(out), rows(ref_out)
    assert len({key(r) for r in got}) == len(got), "a point appears twice in the merged table"
    assert untimed(got) == untimed(want), "merged points differ from the one-process run"
    for name in ("summary.csv", "summary.json"):
        with open(os.path.join(out, name), "rb") as a, open(os.path.join(ref_out, name), "rb") as b:
            assert a.read() == b.read(), f"{name} differs from the one-process run"
    with open(os.path.join(out, "points.csv")) as a, open(os.path.join(ref_out, "points.csv")) as b:
        ca, cb = a.read().splitlines(), b.read().splitlines()
    assert len(ca) == len(cb) == points(kind) + 1


def check_parts(out, n_points):
    """Each point is in exactly one process's part file, and units were split whole."""
    parts = [rows(out, f"parts/points-{i:05d}.jsonl") for i in range(2)]
    assert all(parts), "both processes computed points"
    assert len(parts[0]) + len(parts[1]) == n_points
    assert not {key(r) for r in parts[0]} & {key(r) for r in parts[1]}
    units = [{(r["K"], r["seed"]) for r in p} for p in parts]  # every (K, seed) on one process
    assert not units[0] & units[1] and len(units[0] | units[1]) == UNITS


def test_worker_killed_mid_sweep_then_resumed(single, tmp_path):
    """Two processes (job given by CLI flags); process 1 hangs after its first finished
    point (`multihost/stall_worker.py`, so that it cannot finish its share before the kill)
    and is SIGKILLed; process 0 (a recoverable job) finishes its own share and merges what
    exists. The rerun (job given by JAX_* variables) computes only the missing points: the
    rows written before the kill are kept as they were (same timings: not recomputed), no
    point is lost or duplicated, and the merged tables equal the one-process run's."""
    out = tmp_path / "killed"
    part1 = out / "parts" / "points-00001.jsonl"

    def first_point_written():
        return part1.exists() and part1.read_text().count("\n") >= 1

    res = mh_launch.launch(cli(out, program=["-m", "stall_worker", "1"]), num_processes=2, timeout=240,
                           via_env=False, per_process_args=flags, kill_after=(1, first_point_written))
    assert not res.timed_out, res.tail()
    assert res.returncode[1] == -9 and res.returncode[0] == 0, res.tail()
    assert "process 0 of 2" in res.output[0] and "did not finish" in res.output[0]
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["unfinished_processes"] == [1] and cfg["missing_points"] > 0, cfg
    before = {key(r): r for r in rows(out)}
    assert 0 < len(before) < points("fast")
    res2 = mh_launch.launch(cli(out), num_processes=2, timeout=240)
    check(res2, "the resumed sweep")
    cfg2 = json.loads((out / "config.json").read_text())
    assert cfg2["computed_points"] == points("fast") - len(before), (cfg2, len(before))  # only the missing
    assert cfg2["missing_points"] == 0 and cfg2["unfinished_processes"] == []
    after = {key(r): r for r in rows(out)}
    for k, r in before.items():
        assert after[k] == r, "a finished point was recomputed or changed"
    check_parts(out, points("fast"))
    same_tables(out, single)


def test_disagreeing_sweeps_fail_on_every_process(tmp_path):
    """Process 1 asks for another seed count: both processes stop with the same error,
    naming the field, before computing anything."""
    out = tmp_path / "bad"

    def args(i, coordinator):
        return flags(i, coordinator) + (["--seeds", "3"] if i == 1 else [])

    res = mh_launch.launch(cli(out), num_processes=2, timeout=120, via_env=False, per_process_args=args)
    assert not res.timed_out, res.tail()
    assert res.returncode == [2, 2], res.tail()
    for o in res.output:
        assert "the processes disagree on the study's configuration" in o and "config.seeds" in o, o[-2000:]
    assert not (out / "parts").exists() or not list((out / "parts").glob("points-*.jsonl"))


@pytest.mark.slow
def test_two_process_sweep_equals_one_process(single_slow, tmp_path):
    """An uninterrupted two-process sweep of two models: split whole units, merged tables
    equal to the one-process run's."""
    out = tmp_path / "two"
    res = mh_launch.launch(cli(out, kind="slow"), num_processes=2, timeout=240)
    check(res, "the two-process sweep")
    check_parts(out, points("slow"))
    same_tables(out, single_slow, "slow")
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["missing_points"] == 0 and cfg["unfinished_processes"] == []
    assert cfg["computed_points"] == points("slow")


@pytest.mark.slow
def test_coordinator_killed_then_resumed_with_one_process(single, tmp_path):
    """Process 0 (it hosts the coordination service) dies: process 1 is terminated by the
    runtime too. Nothing finished is lost; a one-process rerun completes the table."""
    out = tmp_path / "killed0"
    part0 = out / "parts" / "points-00000.jsonl"

    def first_point_written():
        return part0.exists() and part0.read_text().count("\n") >= 1

    res = mh_launch.launch(cli(out), num_processes=2, timeout=240, kill_after=(0, first_point_written))
    assert not res.timed_out, res.tail()
    assert res.returncode[0] == -9 and res.returncode[1] != 0, res.tail()
    before = {}
    for i in range(2):
        p = out / "parts" / f"points-{i:05d}.jsonl"
        if p.exists():
            before.update({key(r): r for r in rows(out, f"parts/points-{i:05d}.jsonl")})
    assert 0 < len(before) < points("fast")
    res2 = mh_launch.launch(cli(out), num_processes=1, timeout=240, via_env=False)
    check(res2, "the one-process rerun")
    assert json.loads((out / "config.json").read_text())["computed_points"] == points("fast") - len(before)
    same_tables(out, single)


@pytest.mark.slow
def test_shares_without_coordinator_then_merge(single_slow, tmp_path):
    """--share I/N (independent tasks, e.g. a job array): each computes its share into the
    same directory; nobody merges until --merge-only builds the tables (two models: the
    merge keeps the sweep's model order from the configuration saved with the parts)."""
    out = tmp_path / "shares"
    for i in range(2):
        res = mh_launch.launch(cli(out, "--share", f"{i}/2", kind="slow"), num_processes=1, timeout=240,
                               via_env=False)
        check(res, f"share {i}")
    assert not (out / "summary.csv").exists() and not (out / "config.json").exists()
    check_parts(out, points("slow"))
    res = mh_launch.launch(cli(out, "--merge-only", kind="slow"), num_processes=1, timeout=120, via_env=False)
    check(res, "the merge")
    same_tables(out, single_slow, "slow")


@pytest.mark.slow
def test_coordinated_run_without_output_directory_returns_every_point(tmp_path):
    """study.run(out=None) in a two-process job: every process returns all points."""
    script = tmp_path / "run.py"
    script.write_text(
        "import json, sys\n"
        "import os\n"
        "from jwmma import study\n"
        "from jwmma.tiled import processes\n"
        "processes.initialize(os.environ['JAX_COORDINATOR_ADDRESS'], int(os.environ['JAX_NUM_PROCESSES']), "
        "int(os.environ['JAX_PROCESS_ID']), timeout=60, recoverable=True)\n"
        "st = study.run(ks=[128, 256], models=['fma_chain'], seeds=2, m=16, n=16, out=None, progress=False, "
        "figures=False)\n"
        "print('POINTS', json.dumps(sorted((p['K'], p['seed']) for p in st.points)), flush=True)\n"
        "processes.leave()\n")
    res = mh_launch.launch([str(script)], num_processes=2, timeout=240)
    check(res, "run(out=None)")
    got = [json.loads(o.split("POINTS ", 1)[1].splitlines()[0]) for o in res.output]
    assert got[0] == got[1] == [[128, 0], [128, 1], [256, 0], [256, 1]]
