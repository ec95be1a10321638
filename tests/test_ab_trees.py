"""`benchmarks/ab_trees.py`: alternating processes under two code trees, ratios within pairs.

Two stand-in trees (each a ``jwmma/`` package holding one number) and a stand-in benchmark
that prints that number as a JSON row: the tool must run each tree under its own PYTHONPATH,
in A, B order, and report B / A per pair.
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

BENCH = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"


def _tree(root: pathlib.Path, value: float) -> pathlib.Path:
    (root / "jwmma").mkdir(parents=True)
    (root / "jwmma" / "__init__.py").write_text(f"VALUE = {value}\n")
    return root


def test_pairs_alternate_and_ratios_are_within_pairs(tmp_path):
    a, b = _tree(tmp_path / "a", 2.0), _tree(tmp_path / "b", 3.0)
    log = tmp_path / "order.txt"
    script = tmp_path / "bench.py"
    script.write_text(
        "import json, jwmma\n"
        f"open({str(log)!r}, 'a').write(str(jwmma.VALUE) + '\\n')\n"
        "print(json.dumps(dict(row='r', speed=jwmma.VALUE, other=1)))\n")
    proc = subprocess.run([sys.executable, str(BENCH / "ab_trees.py"), "--a", str(a), "--b", str(b), "--pairs", "2",
                           "--metric", "speed", "--", str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert log.read_text().split() == ["2.0", "3.0", "2.0", "3.0"]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("r speed:")]
    assert line == ["r speed: A 2 2 | B 3 3 | B/A 1.500 1.500 (median 1.500)"], proc.stdout


def test_a_folder_without_the_package_is_refused(tmp_path):
    proc = subprocess.run([sys.executable, str(BENCH / "ab_trees.py"), "--a", str(tmp_path), "--b", str(tmp_path),
                           "--", "bench_calls.py"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "holding a jwmma/ package" in proc.stderr, proc.stderr


def test_a_python_c_child_imports_the_tree_not_the_working_directory(tmp_path):
    """`bench_first_call.py` times each row in a ``python -c`` child, which puts its working
    directory first on sys.path: run from a checkout's root, it imported that checkout's jwmma
    under both trees. Children made by `children.child_command` import the tree's."""
    a, b = _tree(tmp_path / "a", 2.0), _tree(tmp_path / "b", 3.0)
    checkout = _tree(tmp_path / "checkout", 9.0)  # the working directory, holding a jwmma of its own
    script = tmp_path / "bench.py"
    script.write_text(
        "import subprocess, sys\n"
        f"sys.path.insert(0, {str(BENCH)!r})\n"
        "from children import child_command\n"
        "code = 'import json, sys, jwmma; print(json.dumps(dict(row=sys.argv[1], speed=jwmma.VALUE)))'\n"
        "print(subprocess.run(child_command(code, 'r'), capture_output=True, text=True, check=True).stdout)\n")
    proc = subprocess.run([sys.executable, str(BENCH / "ab_trees.py"), "--a", str(a), "--b", str(b), "--pairs", "1",
                           "--metric", "speed", "--", str(script)], capture_output=True, text=True, timeout=120,
                          cwd=checkout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("r speed:")]
    assert line == ["r speed: A 2 | B 3 | B/A 1.500 (median 1.500)"], proc.stdout
