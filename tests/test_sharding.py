"""Sharded GEMM emulation (jwmma.sharding) on 8 forced CPU devices.

The cases live in `sharding_cases.py`: forcing 8 host devices needs XLA_FLAGS before JAX
starts, which a shared pytest process cannot promise, so this module runs them once in a
subprocess (with JUnit XML) and reports each case function here as its own test.
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CASES = HERE / "sharding_cases.py"
FLAG = "--xla_force_host_platform_device_count=8"


def _all_params_slow(decorator) -> bool:
    """Whether ``decorator`` is a parametrize whose every parameter is marked slow."""
    if not (isinstance(decorator, ast.Call) and ast.unparse(decorator.func).endswith("parametrize")
            and len(decorator.args) > 1 and isinstance(decorator.args[1], (ast.List, ast.Tuple))):
        return False
    params = decorator.args[1].elts
    return bool(params) and all("pytest.mark.slow" in ast.unparse(p) for p in params)


def _case_names() -> list[str]:
    """The cases of sharding_cases.py, slow where the case itself is (marked slow, or every one
    of its parameters is): a case with some default parameters runs by default (the subprocess
    runs those parameters only), so that no default parameter is run and then ignored."""
    tree = ast.parse(CASES.read_text())
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            slow = any(ast.unparse(d) == "pytest.mark.slow" or _all_params_slow(d) for d in node.decorator_list)
            out.append(pytest.param(node.name, marks=pytest.mark.slow) if slow else node.name)
    return out


@pytest.fixture(scope="module")
def results(request, tmp_path_factory):
    """{case name: [(status, message)]} from one subprocess run of sharding_cases.py."""
    xml = tmp_path_factory.mktemp("sharding") / "cases.xml"
    markexpr = request.config.getoption("-m") or ""
    env = dict(os.environ)
    flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "", env.get("XLA_FLAGS", ""))
    env["XLA_FLAGS"] = (flags + " " + FLAG).strip()
    env["JAX_PLATFORMS"] = "cpu"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", markexpr,
           f"--junitxml={xml}", str(CASES)]
    proc = subprocess.run(cmd, cwd=HERE.parent, env=env, capture_output=True, text=True, timeout=1500)
    tail = (proc.stdout + proc.stderr)[-6000:]
    if not xml.exists():
        pytest.fail(f"the sharding cases did not run (exit {proc.returncode}):\n{tail}")
    out: dict = {}
    for tc in ET.parse(xml).getroot().iter("testcase"):
        name = tc.get("name", "").split("[")[0]
        status, msg = "passed", ""
        for child in tc:
            if child.tag in ("failure", "error"):
                status, msg = "failed", (child.get("message", "") + "\n" + (child.text or ""))[-4000:]
            elif child.tag == "skipped":
                status, msg = "skipped", child.get("message", "")
        out.setdefault(name, []).append((status, msg))
    out["__tail__"] = tail
    return out


@pytest.mark.parametrize("case", _case_names())
def test_case(results, case):
    got = results.get(case)
    if not got:
        pytest.fail(f"{case} did not run in the subprocess:\n{results['__tail__']}")
    failed = [m for s, m in got if s == "failed"]
    if failed:
        pytest.fail(f"{case} failed on 8 CPU devices:\n" + "\n".join(failed))
    if all(s == "skipped" for s, _ in got):
        pytest.skip(got[0][1])
