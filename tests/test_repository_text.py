"""The tracked text speaks of the project alone (issue-free, machine-free): no absolute path of
the machine a file was written on, no issue numbers a reader of the package cannot look up, no
words about who did the work. Reads `git ls-files`; skipped outside a git checkout."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Built from pieces so that this file does not match itself.
_HOMES = "|".join(["wo" + "rk", "ro" + "ot", "ho" + "me", "Us" + "ers", "mn" + "t"])
#: an absolute path under a machine's home/work folders (not part of a longer word or of a URL)
ABSOLUTE = re.compile(r"(?<![\w.$~:/-])/(?:%s)/" % _HOMES)
#: "#12", "(#10)", "issue #9's": an issue number of this project, not "owner/repo#N" or a colour
ISSUE = re.compile(r"(?<![\w/.&])#\d+\b")
#: an external reference, allowed: "llvm/llvm-project PR #1", "iree-org/iree PRs #2-3"
EXTERNAL = re.compile(r"[\w.-]+/[\w.-]+ (?:PRs?|issues?) $")
#: words about the people or tools that did the work
WORKER = re.compile(
    r"\b(?:helper W\d+|W\d{1,2}'s|sessions?|lent|device tool|workers?|agents?|worktrees?|the lead|"
    r"lead's)\b|\(lead[,)]", re.IGNORECASE)

TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".cfg", ".ini", ".json", ".csv", ".log", ".sh", ".ipynb",
                 ".yml", ".yaml", ".h", ".c", ""}


def tracked() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    res = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    if res.returncode:
        pytest.skip(f"git ls-files failed: {res.stderr.decode(errors='replace').strip()}")
    return [p for p in res.stdout.decode().split("\0") if p]


def text_of(path: str) -> str | None:
    p = ROOT / path
    if p.suffix not in TEXT_SUFFIXES or not p.is_file():
        return None
    data = p.read_bytes()
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def hits(paths, pattern, allow=None):
    out = []
    for path in paths:
        text = text_of(path)
        if text is None:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if line.lstrip().startswith('"image/png"'):
                continue  # a notebook's embedded figure
            for m in pattern.finditer(line):
                if allow is None or not allow(line[: m.start()]):
                    out.append(f"{path}:{n}: {line.strip()[:160]}")
                    break
    return out


def documentation(paths):
    return [p for p in paths if p == "README.md" or (p.endswith(".md") and p.split("/")[0] in ("docs", "benchmarks",
                                                                                                "tests"))]


def test_no_absolute_machine_paths():
    found = hits(tracked(), ABSOLUTE)
    assert not found, ("absolute paths of a machine in tracked files (make them relative, or an option with a "
                       "documented default):\n" + "\n".join(found))


def test_no_issue_numbers_in_library_readme_docs_benchmarks():
    paths = [p for p in tracked()
             if p == "README.md" or p.split("/")[0] in ("jwmma", "docs", "benchmarks", "notebooks")]
    found = hits(paths, ISSUE, allow=lambda before: bool(EXTERNAL.search(before)))
    assert not found, ("issue-number citations a reader of the package cannot look up (say what is meant, or "
                       "point to a RESULTS.md / NUMERICS.md section):\n" + "\n".join(found))


def test_no_words_about_who_did_the_work():
    found = hits(documentation(tracked()), WORKER)
    assert not found, ("words about workers or tools rather than the work (name machines by what they are):\n"
                       + "\n".join(found))


@pytest.mark.parametrize("line, bad", [
    ("REF = '/" + "work/ref/.venv/bin/python'", True),
    ("see /" + "home/someone/x", True),
    ("https://example.org/" + "home/x", False),
    ("relative/" + "work/dir", False),
])
def test_absolute_pattern(line, bad):
    assert bool(ABSOLUTE.search(line)) == bad


@pytest.mark.parametrize("line, bad", [
    ("(issue #12)", True), ("(#10)", True), ("#9's table", True), ("Issues #9-#16", True),
    ("ROCm/rocm-systems#12056", False), ("llvm/llvm-project PR #193541", False),
    ("iree-org/iree PRs #23514-23516", False), ('"#7fc7bd"', False), ("f'{v:#010x}'", False),
])
def test_issue_pattern(line, bad):
    found = any(not EXTERNAL.search(line[: m.start()]) for m in ISSUE.finditer(line))
    assert found == bad


@pytest.mark.parametrize("line, bad", [
    ("(issue #11, helper W11, 2026-12-01)", True), ("this session's 2-core machine", True),
    ("(lent `device` tool)", True), ("## Final run (lead, 2026-12-01)", True), ("shared with other workers", True),
    ("max(lead(C), lead(p0))", False), ("the leading bit", False), ("2:4 helpers", False),
])
def test_worker_pattern(line, bad):
    assert bool(WORKER.search(line)) == bad
