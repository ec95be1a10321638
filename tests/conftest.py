"""Shared fixtures for the core builtin tests (keep small)."""
import os
import shutil
import tempfile

import numpy as np
import pytest


def pytest_configure(config):
    """No tiering (`jwmma.engine.effort.TIER_UP_CALLS`): a test that calls one small program
    more than three times would compile it a second time at 'full', which only costs time
    (about a fifth of `test_builtins.py` and `test_gemm.py`'s cold run). 'full' keeps its own
    checks (`test_effort.py`, `test_bf16_value_alignment.py`), and `test_effort.py` checks the
    tiering itself with its constant restored. ``JWMMA_TEST_TIER_UP=1`` keeps the tiering."""
    if os.environ.get("JWMMA_TEST_TIER_UP") != "1":
        from jwmma.engine import effort

        effort.TIER_UP_CALLS = 2**62
    _compilation_cache(config)


def _compilation_cache(config):
    """JAX's persistent compilation cache for the run's processes (tests/README.md): the
    pytest-xdist processes each compile what the other already has otherwise. The folder is
    new for every run (made by the first process, which the others inherit it from through
    the environment, and removed at its end), so a run starts cold as on a fresh clone;
    $JWMMA_TEST_JAX_CACHE names a folder to keep between runs instead, and ``0`` turns the
    cache off. The cache changes no result: a loaded program is the compiled program."""
    cache = os.environ.get("JWMMA_TEST_JAX_CACHE", "")
    if cache == "0":
        return
    if not cache:
        cache = os.environ["JWMMA_TEST_JAX_CACHE"] = tempfile.mkdtemp(prefix="jwmma-test-jax-cache-")
        config._jwmma_made_cache = cache
    import jax

    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(os.environ.get("JWMMA_TEST_JAX_CACHE_MIN_S", 0.2)))


def pytest_unconfigure(config):
    made = getattr(config, "_jwmma_made_cache", None)
    if made:
        os.environ.pop("JWMMA_TEST_JAX_CACHE", None)
        shutil.rmtree(made, ignore_errors=True)


@pytest.fixture
def rng(request):
    """A numpy Generator seeded from the test's node id: reproducible and distinct per test."""
    seed = sum(ord(ch) * (i + 1) for i, ch in enumerate(request.node.nodeid)) % (2**32)
    return np.random.default_rng(seed)


# Parametrised grids whose every case runs with -m slow, of which the default run (CI: 2 cores,
# 15 minutes for the whole suite) keeps every n-th case, spread over the grid. One table, so
# that what the default run leaves out is visible in one place; the grids' own files stay
# plain. Measured on the 2-core machine: these cases took 450 s of a 23-minute default run.
DEFAULT_EVERY = {
    "test_builtins.py::test_rounding_by_hand": 4,
    "test_builtins.py::test_rdna4_integer_builtin": 3,
    "test_fragments.py::test_pack_matches_scalar_packing_and_round_trips": 3,
    "test_cli.py::test_view_agrees_with_pack": 4,
    "test_kernel.py::test_cdna4_seed_policy_matches_gemm": 2,
    "test_kernel.py::test_rdna4_policy_matches_gemm": 2,
    "test_gemm.py::test_gemm_equals_stepwise_builtin_calls": 2,
    "test_pallas.py::test_bits_core": 2,
    "test_models_exact.py::test_exact_dot_mixed_scenarios": 2,
    "test_models_cdna3.py::test_cdna3_dot_hypothesis": 2,
    "test_fused_paths.py::test_float_and_integer_alignment_agree": 3,
    "test_siblings.py::*": 2,
    "test_fused_paths.py::test_matrix_product_group_sums_agree": 2,
    "test_models_cdna3.py::test_fused_family": 2,
    "test_models_cdna3.py::test_cdna3_dot_mixed_scenarios": 2,
    "test_gfx12.py::test_reference_adversarial": 2,
    "test_models_fma_chain.py::test_fma_chain_dot_mixed_scenarios": 2,
    "test_models_fma_chain.py::test_fma_chain_builtin": 2,
    "test_siblings_gemm.py::test_register_path_equals_matrix_path": 2,
    "test_integer_clamp_hardware.py::test_dense_wmma_digests": 3,
    "test_jax_versions.py::test_odd_k_bf16_subnormals_survive_padding_and_pruning": 2,
    # builtin calls on the kernels: every family's kernel bits have default GEMM cases
    # (test_pallas.py), and the calls' own plumbing (clamped tiles, waves as grid rows) is the
    # same for every family
    "test_pallas_calls.py::test_call_on_kernel_bits": 2,
    # per-key repeats of one mechanism (a stored digest, a crosscheck key, a loop against its
    # unrolled twin): half of each grid by default
    "test_stored_digests.py::test_stored_bits": 2,
    "test_crosscheck.py::test_subset_same_bits_as_xla_matrix": 2,
    "test_fused_paths.py::test_loop_and_unrolled_instructions_agree": 2,
}
# Whole tests that run only with -m slow (a cheaper default test covers the same code):
# wave blocks at every size (test_builtins' 4096-wave test runs blocks by default), the
# RDNA4 kernel policy (the CDNA4 one runs), overflow witnesses of the captures (the captures
# run), a bias study point and a several-model CLI table (one-model ones run).
DEFAULT_SKIP = {
    "test_fast_paths.py::test_wave_blocks_any_size_same_bits",
    "test_kernel.py::test_rdna4_policy_matches_gemm",
    "test_wmma_captures.py::test_overflow_witnesses",
    "test_study.py::test_truncation_bias_on_positive_data",
    "test_gemm_cli.py::test_cli_table_several_models",
}


# The modules of the longest total time, longest first (their seconds in two cold default runs
# of 53ee216 and 0fc3e8b on the 2-core EPYC, averaged: 64, 49, 29, 28, 27, 26, 25, 25, 24, 22, 22,
# 22, 22, 22, 21, 21, 21, 20, 19, 18, 17, 17, 16, 15, 15, 15, 14, 14, 14, 13, 13, 13, 12, 12);
# the others follow in pytest's order (each under 12 s). pyproject.toml's addopts hand whole
# modules to the xdist processes in this order (`--dist loadfile --no-loadscope-reorder`): each
# module's programs are traced and compiled in one process, and the longest go first so that
# neither process ends the run alone on a long one (at 0fc3e8b, with the list of f5822e6, a 22 s
# module that had grown past it ran last: one process ended 18 s after the other).
LONG_FIRST = ("test_pallas.py", "test_sharding.py", "test_readme.py", "test_builtins.py", "test_mfma_dense.py",
              "test_matmul.py", "test_bf16_value_alignment.py", "test_edges_properties.py", "test_multihost_study.py",
              "test_effort.py", "test_edges_regressions.py", "test_transformer_study.py", "test_dot_general.py",
              "test_buckets.py", "test_network_study.py", "test_models_exact.py", "test_nn.py", "test_gemm.py",
              "test_models_cdna3.py", "test_vmap_messages.py", "test_gfx12.py", "test_nn_plugs.py",
              "test_host_sparsity.py", "test_kernel.py", "test_pallas_mosaic.py", "test_fused_paths.py", "test_study.py",
              "test_mx_scaling.py", "test_multihost_gemm.py", "test_host_codec.py", "test_rdna3_wmma.py",
              "test_study_plots.py", "test_multihost_checks.py", "test_pallas_calls.py")


def pytest_collection_modifyitems(config, items):
    _long_modules_first(items)
    seen: dict = {}
    for item in items:
        path = _module_file(item)
        func = item.originalname if hasattr(item, "originalname") else item.name.split("[")[0]
        key = f"{path}::{func}"
        if key in DEFAULT_SKIP:
            item.add_marker(pytest.mark.slow)
            continue
        every = DEFAULT_EVERY.get(key, DEFAULT_EVERY.get(f"{path}::*"))
        if every is None or item.get_closest_marker("slow"):
            continue
        i = seen[key] = seen.get(key, -1) + 1
        if i % every:
            item.add_marker(pytest.mark.slow)


def _module_file(item) -> str:
    """The file name of a test's module ("test_gemm.py")."""
    return item.nodeid.split("::")[0].rsplit("/", 1)[-1]


def _long_modules_first(items):
    """`LONG_FIRST`'s modules at the front, in their order; every module stays in one piece (its
    module-scoped fixtures set up once)."""
    def rank(item):
        name = _module_file(item)
        return LONG_FIRST.index(name) if name in LONG_FIRST else len(LONG_FIRST)

    items[:] = sorted(items, key=rank)  # stable: the other modules keep pytest's order


@pytest.fixture(autouse=True, scope="session")
def _cli_cache_in_tmp(tmp_path_factory):
    """The `jwmma` command keeps compiled programs in $XDG_CACHE_HOME/jwmma: a test that runs
    it in a subprocess writes into a temporary folder, never the user's own cache."""
    import os

    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg_cache"))
    yield
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


def _memory_maps() -> tuple[int, int] | None:
    """(mappings this process holds, the kernel's limit vm.max_map_count), or None where
    /proc does not say (not Linux)."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            limit = int(f.read())
        with open("/proc/self/maps", "rb") as f:
            return sum(1 for _ in f), limit
    except (OSError, ValueError):
        return None


_MAP_CHECK_EVERY = 8  # tests between two counts (a count reads /proc/self/maps: milliseconds)
_map_check = {"n": 0}


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item):
    """Every XLA:CPU executable keeps its JIT code in memory mappings of its own, and JAX's
    caches keep the executables alive, so a long test process (a slow run of one file) climbs
    towards Linux's per-process limit of mappings (vm.max_map_count, 65530 by default). At
    the limit the JIT cannot map the next program, XLA raises, and the C++ exception's unwinding
    segfaults (a core held 65499 mappings: benchmarks/RESULTS.md). Past 60 % of the limit the
    process drops JAX's caches: their programs compile again when needed (the test run's
    persistent cache has most of them)."""
    _map_check["n"] += 1
    if _map_check["n"] % _MAP_CHECK_EVERY:
        return
    maps = _memory_maps()
    if maps is not None and maps[0] > 0.6 * maps[1]:
        import gc

        import jax

        jax.clear_caches()
        gc.collect()
