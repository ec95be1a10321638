"""A study directory survives a kill at any moment (issue #15): finished points are never
rewritten in place, so a run killed while it writes loses at most the points in flight.

Regression: `PointStore` used to rewrite points.jsonl in place at start-up (``open("w")``, then
every row again): a kill between the truncation and the last row lost every finished point.
"""
from __future__ import annotations

import json
import pathlib
import os

import pytest

from jwmma import study
from jwmma.study import parts, store

SWEEP = dict(ks=[128, 256], models=["fma_chain"], seeds=2, m=16, n=16, progress=False, figures=False)


class Killed(BaseException):
    """What a SIGKILL looks like to the code under test: nothing after it runs."""


def keys(out):
    return set(store.read_all(out))


def untimed(rows):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("files") / "done")
    return study.run(**SWEEP, out=out)


def _kill_at_write(monkeypatch, n):
    """Make the n-th file opened for writing (by the study's storage code) 'kill' the run
    right after it was opened: a truncating open has truncated, an append has not appended."""
    real_open = open
    count = [0]

    def fake(path, mode="r", *a, **k):
        f = real_open(path, mode, *a, **k)
        if any(c in mode for c in "wa+"):
            count[0] += 1
            if count[0] == n:
                f.close()
                raise Killed(f"killed after opening {os.path.basename(str(path))} ({mode})")
        return f

    for mod in (parts, store):
        monkeypatch.setattr(mod, "open", fake, raising=False)


def test_a_kill_at_any_write_loses_no_finished_point(finished, tmp_path, monkeypatch):
    out = str(tmp_path / "s")
    os.makedirs(out)
    lines = pathlib.Path(os.path.join(finished.out, "points.jsonl")).read_text().splitlines()
    assert len(lines) == 4
    # an interrupted run: the last point lost, and a torn line
    with open(os.path.join(out, "points.jsonl"), "w") as f:
        f.write("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    have = keys(out)
    assert len(have) == 3
    for n in range(1, 40):
        with monkeypatch.context() as mp:
            _kill_at_write(mp, n)
            try:
                st = study.run(**SWEEP, out=out)
            except Killed:
                now = keys(out)
                assert now >= have, f"a kill at write {n} lost finished points: {sorted(have - now)}"
                have = now
                continue
        break
    else:
        pytest.fail("the run never completed")
    assert n > 3  # the kills hit the start-up, the append and the final tables
    assert untimed(st.points) == untimed(finished.points)
    assert untimed(study.load(out).points) == untimed(finished.points)
    for name in ("summary.csv", "summary.json"):
        assert pathlib.Path(os.path.join(out, name)).read_text() == pathlib.Path(os.path.join(finished.out, name)).read_text(), name


def test_start_up_never_truncates_the_points_file(finished, tmp_path, monkeypatch):
    """The start-up of a resumed run opens points.jsonl only to append (after cutting a torn
    tail); whole rewrites go to a temporary file that is renamed over it."""
    out = str(tmp_path / "r")
    os.makedirs(out)
    src = pathlib.Path(os.path.join(finished.out, "points.jsonl")).read_text()
    with open(os.path.join(out, "points.jsonl"), "w") as f:
        f.write(src)
    opened = []
    real_open = open

    def spy(path, mode="r", *a, **k):
        opened.append((os.path.basename(str(path)), mode))
        return real_open(path, mode, *a, **k)

    for mod in (parts, store):
        monkeypatch.setattr(mod, "open", spy, raising=False)
    st = study.run(**SWEEP, out=out)
    assert json.loads(pathlib.Path(os.path.join(out, "config.json")).read_text())["computed_points"] == 0
    assert ("points.jsonl", "w") not in opened and all(not (n == "points.jsonl" and "w" in m) for n, m in opened)
    assert untimed(st.points) == untimed(finished.points)
