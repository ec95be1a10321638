"""The package's layers, read from the source (ast): every import points down the layer order,
no module imports another module's private (``_name``) names, the instruction layer has no
JAX, nothing reads the environment, and the oracles never import jwmma.

    numerics -> isa, models -> engine -> backends -> tiled (gemm) -> quant (matmul) -> kernel, study, nn -> cli
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "jwmma"

#: layer of each subpackage / top-level module; a module may import from lower layers and from
#: its own subpackage only (same-layer siblings do not import each other)
LAYERS = {"version": 0, "keywords": 0, "varying": 0, "numerics": 1, "isa": 2, "models": 2, "engine": 3, "backends": 3.5, "tiled": 4, "quant": 4.5, "kernel": 5, "study": 5, "nn": 5,
          "cli": 6, "__init__": 7, "__main__": 7}


def _modules():
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        is_pkg = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_pkg else parts)
        yield path, name, is_pkg


def _resolve(node: ast.ImportFrom, name: str, is_pkg: bool) -> str:
    """The absolute module an ImportFrom names (relative levels resolved)."""
    if not node.level:
        return node.module or ""
    base = name.split(".")
    base = base if is_pkg else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(path, name, is_pkg):
    """(target module, imported names or None, line) of every import of the file."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            yield _resolve(node, name, is_pkg), [a.name for a in node.names], node.lineno


def _layer(module: str):
    parts = module.split(".")
    if parts[0] != "jwmma":
        return None, None
    if len(parts) == 1:
        return LAYERS["__init__"], "__init__"
    return LAYERS[parts[1]], parts[1]


def test_every_subpackage_has_a_layer():
    tops = {p.name if p.is_dir() else p.stem for p in PKG.iterdir() if not p.name.startswith((".", "__pycache__"))}
    tops.discard("__pycache__")
    assert tops <= set(LAYERS), sorted(tops - set(LAYERS))


def test_imports_point_down_the_layers():
    bad = []
    for path, name, is_pkg in _modules():
        own_layer, own_top = _layer(name)
        for target, names, line in _imports(path, name, is_pkg):
            layer, top = _layer(target)
            if layer is None:
                continue
            if top == "__init__" and names is not None and own_top != "__init__":
                # `from jwmma import x` inside the package: x is a subpackage, judge that one
                sub = [n for n in names if n in LAYERS]
                if not sub or any(LAYERS[n] >= own_layer and n != own_top for n in sub):
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports jwmma's top level ({names})")
                continue
            if top == own_top:
                continue
            if layer >= own_layer:
                bad.append(f"{path.relative_to(ROOT)}:{line} ({own_top}, layer {own_layer}) imports {target} "
                           f"({top}, layer {layer})")
    assert not bad, "imports against the layer order:\n" + "\n".join(bad)


def test_no_private_names_across_modules():
    bad = []
    for path, name, is_pkg in _modules():
        tree = ast.parse(path.read_text())
        modules = set()  # local names bound to jwmma modules
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = _resolve(node, name, is_pkg)
                if target.split(".")[0] != "jwmma":
                    continue
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        bad.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {a.name} from {target}")
                    modules.add(a.asname or a.name)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "jwmma":
                        modules.add((a.asname or a.name).split(".")[0])
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert not bad, "private names used across modules:\n" + "\n".join(bad)


def test_isa_is_numpy_only():
    bad = []
    for path, name, is_pkg in _modules():
        if not name.startswith("jwmma.isa"):
            continue
        for target, _, line in _imports(path, name, is_pkg):
            if target.split(".")[0] in ("jax", "jaxlib"):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not bad, "\n".join(bad)


#: the modules that may read the environment, both at the CLI's start-up, before anything is
#: traced: the start-up of a multi-process job (JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES /
#: JAX_PROCESS_ID, SLURM detection) and the compilation cache's folder (XDG_CACHE_HOME)
ENV_READERS = {PKG / "cli" / "processes.py", PKG / "cli" / "cache.py"}


@pytest.mark.parametrize("word", ["os.environ", "os.getenv", "environ.get", "getenv("])
def test_no_environment_reads(word):
    """Execution choices are `jwmma.Options` values passed as static arguments, never
    environment variables read while tracing."""
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in PKG.rglob("*.py") if p not in ENV_READERS
            for i, line in enumerate(p.read_text().splitlines(), 1) if word in line]
    assert not hits, hits


def test_oracles_never_import_jwmma():
    bad = []
    for path in sorted((ROOT / "tests" / "oracles").glob("*.py")) + [ROOT / "tests" / "edges" / "edges_oracles.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "jwmma" for a in node.names):
                bad.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "jwmma":
                bad.append(f"{path.name}:{node.lineno}")
    assert not bad, bad


def test_tests_do_not_import_each_other():
    """Shared test code lives in tests/oracles/ (or conftest), not in another test module."""
    bad = []
    for path in sorted((ROOT / "tests").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            bad += [f"{path.name}:{node.lineno} imports {n}" for n in names if n.startswith(("test_", "sharding_cases"))]
    assert not bad, bad


def test_the_checks_see_a_violation(tmp_path):
    """The import walk resolves relative imports (so the layering test can fail)."""
    src = tmp_path / "mod.py"
    src.write_text("from ..cli import main\nfrom . import _hidden\n")
    got = list(_imports(src, "jwmma.engine.mod", False))
    assert ("jwmma.cli", ["main"], 1) in got and ("jwmma.engine", ["_hidden"], 2) in got
    assert _layer("jwmma.cli")[0] > _layer("jwmma.engine.mod")[0]
