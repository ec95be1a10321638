"""A failed jwmma check inside a user's own `jax.jit` fails every process of a multi-process
job at once, with the same message (2 processes x 2 forced CPU devices, gloo).

The worker (`multihost/check_in_jit.py`) puts a group of four non-zeros in a row of A that
only process 1 holds and calls its jitted `jwmma.gemm`. The job runs with JAX's default
heartbeat timeout (100 s): a process that did not see the failure would go on into its next
collective and wait for that long (or be aborted when the failing process exits). Here both
processes must report the same ValueError text within seconds of each other, and the same
compiled program must still run on valid data afterwards (nobody is left in a collective).
The same for a check inside the user's `jax.shard_map`, where each device sees its own block.
"""
from __future__ import annotations

import json
import os

import pytest

from multihost import launch as mh_launch

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "multihost", "check_in_jit.py")
HEARTBEAT_S = 100  # JAX's default: what the others would wait for
SECONDS_APART = 10  # both failures within this of each other (a loaded 2-core runner)


def _job(tmp_path, mode):
    res = mh_launch.launch([WORKER], num_processes=2, devices=2, timeout=300,
                           extra_env={"MH_OUT": str(tmp_path), "MH_MODE": mode,
                                      "JWMMA_HEARTBEAT_TIMEOUT": str(HEARTBEAT_S)})
    got = []
    for i in range(2):
        path = tmp_path / f"check-{i}.json"
        got.append(json.loads(path.read_text()) if path.exists() else None)
    return res, got


def _check(res, got, error_type):
    tail = res.tail(3000)
    assert not res.timed_out and res.returncode == [0, 0], tail
    assert all(g is not None and "crash" not in g for g in got), f"{got}\n{tail}"
    assert [g["holds_row_50"] for g in got] == [False, True], got  # the bad row is process 1's alone
    for g in got:
        assert g["valid_before"] == "passed" and g["valid_after"] == "passed", g
        assert g["bad"]["error"] == error_type, g["bad"]
    messages = [g["bad"]["message"] for g in got]
    assert messages[0] == messages[1], messages
    assert messages[0].startswith("a is not 2:4 sparse: row 50 group 2 (elements 8..11) has 4 non-zeros "
                                  "(1 such group(s))"), messages[0]
    apart = abs(got[0]["bad"]["time"] - got[1]["bad"]["time"])
    assert apart < SECONDS_APART, (apart, tail)
    # shard_map: the first failing device's block (device 3 holds rows 48..63: row 50 is its row 2)
    for g in got:
        assert g["shard_map_bad"]["error"] == error_type and g["shard_map_valid_after"] == "passed", g
    messages = [g["shard_map_bad"]["message"] for g in got]
    assert messages[0] == messages[1], messages
    assert messages[0].startswith("a24 is not 2:4 sparse: row 2 group 2 (elements 8..11) has 4 non-zeros "
                                  "(1 such group(s))"), messages[0]
    assert abs(got[0]["shard_map_bad"]["time"] - got[1]["shard_map_bad"]["time"]) < SECONDS_APART
    assert res.seconds < HEARTBEAT_S, res.seconds  # nothing waited for a heartbeat timeout


def test_violation_in_one_process_shard_fails_every_process_inside_jit(tmp_path):
    res, got = _job(tmp_path, "jit")
    _check(res, got, "JaxRuntimeError")  # JAX wraps the callback's ValueError, message included


@pytest.mark.slow
def test_violation_in_one_process_shard_fails_every_process_under_checked(tmp_path):
    res, got = _job(tmp_path, "checked")
    _check(res, got, "ValueError")
