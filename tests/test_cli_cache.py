"""The `jwmma` command (and only it: not `import jwmma`, not `jwmma.cli.main` in-process) uses
JAX's persistent compilation cache in $XDG_CACHE_HOME/jwmma (default ~/.cache/jwmma);
--no-cache, before or after the subcommand, leaves it alone (README "Command line"). A library
user opts in with `jwmma.enable_compilation_cache(path)`."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jax
import pytest

import jwmma
from jwmma.cli import build_parser, cache, main

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["demo", "--builtin", "swmmac_i32_16x16x32_iu8_w32", "--waves", "8", "--no-gemm"]


def test_cache_dir_follows_xdg(monkeypatch, tmp_path):
    assert cache.cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == os.path.join(str(tmp_path), "jwmma")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    want = os.path.join(str(tmp_path / "home"), ".cache", "jwmma")
    assert cache.cache_dir({}) == want and cache.cache_dir({"XDG_CACHE_HOME": ""}) == want


@pytest.mark.parametrize("argv, off", [
    (["list"], False), (["--no-cache", "list"], True), (["list", "--no-cache"], True),
    (["--no-cache", "gemm", "--no-cache"], True), (["study", "--k", "64"], False),
])
def test_no_cache_before_or_after_the_command(argv, off):
    assert build_parser().parse_args(argv).no_cache is off


def test_help_names_the_location():
    text = build_parser().format_help()
    assert "$XDG_CACHE_HOME/jwmma" in text and "~/.cache/jwmma" in text and "--no-cache" in text


def test_in_process_main_leaves_jax_config_alone(capsys):
    before = jax.config.jax_compilation_cache_dir
    assert main(["list"]) == 0
    capsys.readouterr()
    assert jax.config.jax_compilation_cache_dir == before


def run_cli(args, xdg):
    env = dict(os.environ, XDG_CACHE_HOME=str(xdg), JAX_PLATFORMS="cpu")
    return subprocess.run([sys.executable, "-m", "jwmma", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)


def files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()] if path.exists() else []


def test_the_command_fills_the_cache_and_no_cache_does_not(tmp_path):
    with_cache, without = tmp_path / "on", tmp_path / "off"
    res = run_cli(SMALL, with_cache)
    assert res.returncode == 0, res.stderr
    assert files_under(with_cache / "jwmma"), "no compiled program was cached"
    res = run_cli([*SMALL, "--no-cache"], without)
    assert res.returncode == 0, res.stderr
    assert not files_under(without)


LIBRARY_RUN = """
import sys, numpy as np, jwmma
folder = jwmma.enable_compilation_cache(sys.argv[1])
name = "smfmac_i32_16x16x128_i8"
spec = jwmma.BUILTINS[name]
a = np.ones((16, 128), np.int8)
values, pos = jwmma.compress_2_4(jwmma.prune_2_4(a))
d = jwmma.unpack_c(name, getattr(jwmma, name)(jwmma.pack_a(name, values), jwmma.pack_b(name, a.T.copy()),
                                               jwmma.pack_c(name, np.zeros((16, 16), np.int32)),
                                               jwmma.pack_index(name, pos)))
print(folder, int(np.asarray(d)[0, 0]))
"""


def test_library_users_opt_in_to_the_cache(tmp_path):
    """`jwmma.enable_compilation_cache(path)`: a library user's process keeps its programs in
    ``path`` (made if missing) and gives the same result as without; importing jwmma alone
    caches nothing (test above)."""
    folder = tmp_path / "cache" / "jwmma"
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    res = subprocess.run([sys.executable, "-c", LIBRARY_RUN, str(folder)], capture_output=True, text=True,
                         cwd=ROOT, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == [str(folder), "64"]  # 64 kept products of ones (two of every four of 128)
    assert files_under(folder), "no compiled program was cached"


@pytest.mark.parametrize("bad, error", [(None, TypeError), (3, TypeError), ("", TypeError)])
def test_the_cache_folder_is_checked(bad, error):
    with pytest.raises(error, match="path must be a folder name"):
        jwmma.enable_compilation_cache(bad)
