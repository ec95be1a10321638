"""In-process unit tests (no JAX job): point assignment, part files, start-up resolution,
and the launcher's clean-up. Fast; they run in the pytest process."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from jwmma.cli import processes as multihost
from jwmma.study import parts as study_store
from jwmma.study import share as study_share
from multihost import launch as mh_launch


# ------------------------------------------------------------------------- assignment
def units(ks=(128, 256, 512, 1024, 2048, 4096, 8192, 16384), seeds=4, m=64, n=64):
    return [("smfmac_f32_16x16x128_fp8_fp8", "fp8", "normal", "row", k, m, n, s) for k in ks for s in range(seeds)]


def test_assignment_is_deterministic_total_and_balanced():
    u = units()
    for count in (1, 2, 3, 5, 8):
        owner = study_share.assign(u, count, points_per_unit=3)
        assert set(owner) == set(u) and set(owner.values()) <= set(range(count))
        # the same on every process: whatever order the units are listed in
        assert study_share.assign(list(reversed(u)), count, 3) == owner
        shares = study_share.balance(owner, count, 3)
        assert abs(sum(shares) - 1) < 1e-12
        if count <= 8:  # 32 units, largest 1/4 of all work per K: LPT splits seeds of every K
            assert max(shares) - min(shares) < 0.05, (count, shares)
    owner2 = study_share.assign(u, 2)
    for k in (16384, 128):  # two processes: each gets seeds of every K
        assert {owner2[x] for x in u if x[4] == k} == {0, 1}


def test_assignment_ignores_progress_and_rejects_bad_counts():
    u = units(seeds=2)
    # nothing about what is done enters: a resumed run assigns like the first one
    assert study_share.assign(u, 3) == study_share.assign(u[:], 3)
    with pytest.raises(ValueError, match="positive int"):
        study_share.assign(u, 0)
    with pytest.raises(ValueError, match=r"0 <= index < count"):
        study_share.resolve_share((2, 2))
    assert study_share.resolve_share(("1", "4")) == (1, 4)


# ------------------------------------------------------------------------- part files
def test_torn_tail_is_cut_before_appending(tmp_path):
    p = tmp_path / "parts" / "points-00001.jsonl"
    p.parent.mkdir()
    p.write_text('{"a": 1}\n{"a": 2}\n{"a": 3, "tor')  # a writer killed mid-line
    w = study_store.PartWriter(str(p))
    w.write([{"a": 4}])
    w.close()
    lines = p.read_text().splitlines()
    assert [json.loads(x)["a"] for x in lines] == [1, 2, 4]
    assert study_store.cut_torn_tail(str(p)) == 0
    p.write_text('{"x": 1')  # no complete line at all
    assert study_store.cut_torn_tail(str(p)) == 7 and p.read_text() == ""


def _row(seed, value, seconds=1.0, model="exact"):
    return dict(builtin="b", format="fp8", dist="normal", scaling="row", model=model, remedy="none", K=128,
                M=16, N=16, seed=seed, mean_rel=value, seconds=seconds)


def _read(path):
    return [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip() and x.strip().endswith("}")]


def _key(r):
    return (r["model"], r["K"], r["seed"])


def test_read_rows_merges_every_file_once_and_reports_conflicts(tmp_path):
    out = tmp_path
    (out / "parts").mkdir()
    with open(out / "points.jsonl", "w") as f:
        f.write(json.dumps(_row(0, 0.5)) + "\n")
    with open(out / "parts" / "points-00000.jsonl", "w") as f:
        f.write(json.dumps(_row(0, 0.5, seconds=9.0)) + "\n")  # a duplicate (timing aside): kept once
        f.write(json.dumps(_row(1, 0.25)) + "\n")
    with open(out / "parts" / "points-00001.jsonl", "w") as f:
        f.write(json.dumps(_row(2, 0.125)) + "\n" + '{"torn": ')
    rows, conflicts = study_store.read_rows(str(out), _read, _key)
    assert sorted(k[2] for k in rows) == [0, 1, 2] and conflicts == []
    assert rows[("exact", 128, 0)]["seconds"] == 1.0  # the merged table's row comes first
    with open(out / "parts" / "points-00001.jsonl", "a") as f:
        f.write("\n" + json.dumps(_row(1, 0.3)) + "\n")  # same key, other value
    rows, conflicts = study_store.read_rows(str(out), _read, _key)
    assert len(conflicts) == 1 and conflicts[0][0] == ("exact", 128, 1)


def test_canonical_order_follows_the_sweep_models():
    rs = [_row(1, 0, model="b"), _row(0, 0, model="a"), _row(0, 0, model="b")]
    got = study_store.canonical_order(rs, ["b", "a"])
    assert [(r["model"], r["seed"]) for r in got] == [("b", 0), ("b", 1), ("a", 0)]


# ------------------------------------------------------------------------- start-up
@pytest.fixture
def clean_env(monkeypatch):
    for k in list(os.environ):
        if k.startswith(("SLURM_", "OMPI_", "JAX_COORDINATOR", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")):
            monkeypatch.delenv(k)
    return monkeypatch


def test_resolve_precedence_and_errors(clean_env):
    assert multihost.resolve() is None  # nothing says several processes: no coordination
    assert multihost.resolve(num_processes=1) is None
    clean_env.setenv("JAX_COORDINATOR_ADDRESS", "10.0.0.1:1234")
    clean_env.setenv("JAX_NUM_PROCESSES", "4")
    clean_env.setenv("JAX_PROCESS_ID", "3")
    assert multihost.resolve() == dict(coordinator="10.0.0.1:1234", num_processes=4, process_id=3)
    # arguments beat the environment
    assert multihost.resolve("h:1", 2, 0) == dict(coordinator="h:1", num_processes=2, process_id=0)
    with pytest.raises(ValueError, match=r"process id must be in \[0, 1\] for 2 processes, got 3"):
        multihost.resolve(num_processes=2)
    with pytest.raises(ValueError, match="HOST:PORT"):
        multihost.resolve("10.0.0.1")
    clean_env.delenv("JAX_PROCESS_ID")
    with pytest.raises(ValueError, match=r"this process's id \(--process-id or JAX_PROCESS_ID\)"):
        multihost.resolve()
    clean_env.setenv("JAX_PROCESS_ID", "x")
    with pytest.raises(ValueError, match="JAX_PROCESS_ID must be an integer"):
        multihost.resolve()


def test_slurm_is_left_to_jax_detection(clean_env):
    for k, v in dict(SLURM_JOB_ID="4242", SLURM_STEP_NODELIST="node[003-004]", SLURM_NTASKS="2",
                     SLURM_PROCID="1", SLURM_LOCALID="0").items():
        clean_env.setenv(k, v)
    assert multihost.detected_cluster() == "slurm"
    assert multihost.resolve() == {}  # jax.distributed.initialize() with no arguments detects it
    # an explicit coordinator overrides JAX's job-id port; count and id still come from SLURM
    assert multihost.resolve("node003:5555") == dict(coordinator="node003:5555", num_processes=None, process_id=None)
    clean_env.setenv("SLURM_NTASKS", "1")
    assert multihost.detected_cluster() is None and multihost.resolve() is None


def test_slurm_coordinator_address_as_jax_derives_it(clean_env):
    """What JAX 0.10.2's SlurmCluster computes (the README quotes it): first node of the
    step, port 61440 + job id % 4096 unless JAX_COORDINATOR_PORT."""
    from jax._src.clusters.slurm_cluster import SlurmCluster

    for k, v in dict(SLURM_JOB_ID="4242", SLURM_STEP_NODELIST="node[003-004],gpu7", SLURM_NTASKS="3",
                     SLURM_PROCID="2", SLURM_LOCALID="0").items():
        clean_env.setenv(k, v)
    assert SlurmCluster.is_env_present()
    assert SlurmCluster.get_coordinator_address(None, None) == f"node003:{61440 + 4242 % 4096}"
    assert SlurmCluster.get_coordinator_address(None, "7777") == "node003:7777"
    assert (SlurmCluster.get_process_count(), SlurmCluster.get_process_id()) == (3, 2)


# ------------------------------------------------------------------------- the launcher
def test_launcher_bounds_time_and_kills_the_whole_group(tmp_path):
    """A worker that never ends and has started a child of its own: after the timeout both
    are gone (the process group is killed), and the result says it timed out."""
    pidfile = tmp_path / "child.pid"
    script = tmp_path / "hang.py"
    script.write_text(
        "import subprocess, sys, time\n"
        f"c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(c.pid))\n"
        "time.sleep(600)\n")
    t0 = time.monotonic()
    res = mh_launch.launch([str(script)], num_processes=2, timeout=3, via_env=False)
    assert res.timed_out and time.monotonic() - t0 < 20
    deadline = time.monotonic() + 5
    child = int(pidfile.read_text())
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        try:  # reaped by init only; a zombie counts as gone
            if Path(f"/proc/{child}/stat").read_text().split()[2] == "Z":
                break
        except FileNotFoundError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the worker's child {child} survived the clean-up")


def test_free_port_is_bindable():
    import socket

    port = mh_launch.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
    assert 1024 < port < 65536 and sys.platform.startswith("linux")


def test_merge_refuses_parts_of_different_sweeps(tmp_path):
    from jwmma import study

    for i, seeds in enumerate(([0, 1], [0, 1, 2])):
        study_store.write_json_atomic(study_store.part_config_path(str(tmp_path), i), dict(seeds=seeds))
    with pytest.raises(ValueError, match="come from different sweeps"):
        study.store.merge(str(tmp_path))
