"""The public surface: explicit ``__all__`` everywhere, the 25 builtins listed by name and
matching the table, the names of API.md and the README, docstrings with Args/Returns on the
entry points, `import jwmma` staying light, and ``python -m jwmma``."""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import jwmma

ROOT = Path(__file__).resolve().parents[1]
SUBPACKAGES = ["numerics", "isa", "models", "engine", "tiled", "kernel", "study", "cli"]


def _all_modules():
    for info in pkgutil.walk_packages(jwmma.__path__, "jwmma."):
        if info.name != "jwmma.__main__":
            yield info.name


def _missing_extra(e: ImportError) -> bool:
    """Whether ``e`` is jwmma.nn's error for an optional extra that is not installed (flax,
    equinox, qwix): such a module or name is there, only its package is not."""
    return "pip install 'jwmma[" in str(e)


def _import(module):
    """The module, or None where it needs an optional extra that is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        if _missing_extra(e):
            return None
        raise


def _has(mod, name) -> bool:
    try:
        return hasattr(mod, name)
    except ImportError as e:  # a lazily imported submodule of an extra that is not installed
        return _missing_extra(e)


def test_the_76_builtins_are_listed_by_name_and_match_the_table():
    assert list(jwmma.BUILTIN_FUNCTIONS) == list(jwmma.BUILTINS)
    assert len(jwmma.BUILTINS) == 113
    assert list(jwmma.engine.builtins.FUNCTIONS) == list(jwmma.BUILTINS)
    src = (ROOT / "jwmma" / "__init__.py").read_text()
    imported = re.search(r"from \.engine\.builtins import \((.*?)\)", src, re.S).group(1)
    assert sorted(x.strip().rstrip(",") for x in imported.split() if x.strip()) == sorted(jwmma.BUILTINS)
    for name, spec in jwmma.BUILTINS.items():
        fn = getattr(jwmma, name)
        assert fn.__name__ == name and fn.spec is spec
        assert spec.signature() in fn.__doc__ and "Args:" in fn.__doc__ and "Returns:" in fn.__doc__
        params = list(inspect.signature(fn).parameters)
        assert params[: len(spec.convention.params)] == [p.name for p in spec.convention.params]
        assert {"model", "check", "options", "backend"} <= set(params)
        assert name in jwmma.__all__


@pytest.mark.parametrize("module", sorted(_all_modules()))
def test_every_module_declares_all_and_it_resolves(module):
    mod = _import(module)
    if mod is None:
        pytest.skip(f"{module} needs an optional extra that is not installed")
    assert hasattr(mod, "__all__"), f"{module} has no __all__"
    assert len(set(mod.__all__)) == len(mod.__all__), "duplicates in __all__"
    missing = [n for n in mod.__all__ if not _has(mod, n)]
    assert not missing, missing


def test_top_level_all_resolves_and_study_is_lazy():
    for name in jwmma.__all__:
        assert getattr(jwmma, name) is not None
    code = ("import sys, jwmma; assert 'jwmma.study' not in sys.modules, 'study imported'; "
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported'; jwmma.study.run; "
            "assert 'jwmma.study' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_api_md_and_readme_names_exist():
    """The names the contract (docs/spec/API.md) and the README promise."""
    for name in ("BUILTINS", "BuiltinSpec", "pack_a", "unpack_a", "pack_b", "unpack_b", "pack_c", "unpack_c",
                 "pack_index", "unpack_index", "prune_2_4", "compress_2_4", "decompress_2_4", "gemm", "dot",
                 "index_violations", "plot_layout", "Options", "kernel", "study", "models", "matmul", "Unit",
                 "dot_general", "einsum"):
        assert hasattr(jwmma, name), name
    for name in ("PRESETS", "Model", "Context", "Exact", "FMAChain", "FusedGroups", "CDNA3", "Gfx12Dot4",
                 "IntegerDot", "resolve"):
        assert hasattr(jwmma.models, name), name
    for name in ("Policy", "run", "check", "compare", "pack_bytes", "i32", "const_index", "metadata"):
        assert hasattr(jwmma.kernel, name), name
    for name in ("run", "emulate", "make_operands", "reference", "Remedy", "load"):
        assert hasattr(jwmma.study, name), name
    for preset in ("exact", "fma_chain", "cdna3", "gfx12_dot4", "staged_clamp"):
        assert preset in jwmma.models.PRESETS
    spec = jwmma.BUILTINS["smfmac_f32_16x16x128_fp8_fp8"]
    for attr in ("name", "arch", "wave", "m", "n", "k", "kc", "a_type", "b_type", "c_type", "a_layout", "b_layout",
                 "c_layout", "index_bit", "signature", "default_model", "default_evidence"):
        assert hasattr(spec, attr), attr


def _public_callables():
    """Entry points: the public functions and classes of every module's __all__."""
    seen = set()
    for module in _all_modules():
        mod = _import(module)
        if mod is None:  # an optional extra that is not installed
            continue
        for name in mod.__all__:
            try:
                obj = getattr(mod, name)
            except ImportError as e:
                if _missing_extra(e):
                    continue
                raise
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and getattr(obj, "__module__", "").startswith("jwmma"):
                if id(obj) not in seen:
                    seen.add(id(obj))
                    yield f"{obj.__module__}.{obj.__qualname__}", obj


ENTRY_POINTS = ["jwmma.tiled.gemm", "jwmma.engine.dot.dot", "jwmma.kernel.runner.run", "jwmma.kernel.runner.check",
                "jwmma.study.sweep.run", "jwmma.study.sweep.emulate", "jwmma.engine.fragments.pack_a",
                "jwmma.engine.fragments.unpack_b", "jwmma.engine.fragments.unpack_c", "jwmma.engine.index.index_violations",
                "jwmma.engine.options.resolve", "jwmma.isa.table.lookup", "jwmma.models.presets.resolve",
                "jwmma.kernel.diff.compare", "jwmma.isa.plot.plot_layout", "jwmma.engine.sparsity.prune_2_4",
                "jwmma.engine.sparsity.compress_2_4", "jwmma.engine.sparsity.decompress_2_4",
                "jwmma.engine.fragments.unpack_a", "jwmma.engine.fragments.pack_b", "jwmma.engine.fragments.pack_c",
                "jwmma.engine.fragments.pack_index", "jwmma.engine.fragments.unpack_index", "jwmma.isa.table.BuiltinSpec.index_bit",
                "jwmma.models.base.Model.accumulate", "jwmma.models.base.Model.instruction",
                "jwmma.models.base.Model.working_set", "jwmma.kernel.policy.Policy.call_mma",
                "jwmma.kernel.policy.as_policy", "jwmma.kernel.policy.metadata", "jwmma.isa.conventions.hip_args",
                "jwmma.tiled.plan.plan_gemm", "jwmma.cli.main", "jwmma.quant.matmul.matmul", "jwmma.quant.unit.Unit",
                "jwmma.quant.dot_general.dot_general", "jwmma.quant.dot_general.einsum",
                "jwmma.quant.dot_general.contract", "jwmma.quant.dot_general.check_dimension_numbers"]


def test_everything_public_has_a_docstring():
    undocumented = [name for name, obj in _public_callables() if not (obj.__doc__ or "").strip()]
    assert not undocumented, undocumented


def _resolve(path):
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(path)


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_entry_points_document_args_and_returns(path):
    obj = _resolve(path)
    doc = obj.__doc__ or ""
    assert "Args:" in doc and "Returns:" in doc, path


def test_records_are_documented():
    """The records users meet (the table row, operands, models with parameters)."""
    from jwmma.isa.table import IndexRule, Operand

    for cls in (jwmma.BuiltinSpec, Operand, IndexRule, jwmma.Options, jwmma.models.FMAChain,
                jwmma.models.IntegerDot, jwmma.models.FusedGroups, jwmma.models.Gfx12Dot4, jwmma.kernel.Policy):
        assert len((cls.__doc__ or "").split()) >= 8, cls


def test_python_m_jwmma_list():
    """``python -m jwmma`` is the ``jwmma`` command."""
    proc = subprocess.run([sys.executable, "-m", "jwmma", "list", "--json"], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    import json

    rows = json.loads(proc.stdout)
    assert [r["name"] for r in rows] == list(jwmma.BUILTINS)
    proc = subprocess.run([sys.executable, "-m", "jwmma", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.strip() == f"jwmma {jwmma.__version__}"


def test_model_text_is_accepted_wherever_a_model_is():
    """The builtins, gemm and dot take the model texts of the command line: the text gives the
    same object as parsing it, hence the same compiled program and bits."""
    import ml_dtypes
    import numpy as np

    assert jwmma.models.parse_model("CDNA3(group=8)") == jwmma.models.CDNA3(group=8)
    rng = np.random.default_rng(4)
    a = rng.standard_normal((4, 64)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((4, 64)).astype(ml_dtypes.float8_e4m3fn)
    c = np.zeros(4, np.float32)
    got = np.asarray(jwmma.dot(a, b, c, model="CDNA3(group=8)"))
    assert np.array_equal(got, np.asarray(jwmma.dot(a, b, c, model=jwmma.models.CDNA3(group=8))))
    name = "smfmac_f32_16x16x128_fp8_fp8"
    (values, pos) = jwmma.compress_2_4(jwmma.prune_2_4(rng.standard_normal((16, 128)).astype(ml_dtypes.float8_e4m3fn)))
    regs = (jwmma.pack_a(name, values), jwmma.pack_b(name, rng.standard_normal((128, 16)).astype(ml_dtypes.float8_e4m3fn)),
            jwmma.pack_c(name, np.zeros((16, 16), np.float32)), jwmma.pack_index(name, pos))
    by_text = np.asarray(jwmma.smfmac_f32_16x16x128_fp8_fp8(*regs, model="CDNA3()"))
    assert np.array_equal(by_text, np.asarray(jwmma.smfmac_f32_16x16x128_fp8_fp8(*regs)))  # the cdna3 preset
    with pytest.raises(ValueError, match="expected a preset name"):
        jwmma.smfmac_f32_16x16x128_fp8_fp8(*regs, model="Model()")
