"""Shared set-up of the edge-case suite (README "Edge cases") (kept small; the references are in edges_oracles.py).

* hypothesis profiles: ``edges`` (default: modest example counts, about a minute of CPU for
  test_properties.py once compiled) and ``slow`` (``--hypothesis-profile=slow``: many more
  examples, all 25 builtins, more shapes and models);
* JAX's persistent compilation cache: the whole suite's (tests/conftest.py, $JWMMA_TEST_JAX_CACHE);
* ``--hypothesis-profile=wide``: the draws of ``slow`` (all builtins, shapes, models) with 30
  examples per property, no shrinking.
"""
import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, settings

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

# default: no shrinking and the first bug only: a failing example costs new XLA compilations
# (8-20 s each for a float builtin), and these tests are meant to fail until item N is fixed
settings.register_profile(
    "edges", max_examples=6, deadline=None, derandomize=True, print_blob=True,
    phases=[Phase.explicit, Phase.reuse, Phase.generate], report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
settings.register_profile(
    "slow", max_examples=300, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
settings.register_profile(   # all builtins and shapes like slow, few examples: a quick sweep
    "wide", max_examples=30, deadline=None, print_blob=True,
    phases=[Phase.explicit, Phase.reuse, Phase.generate], report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
settings.load_profile("edges")


def pytest_configure(config):
    import edges_profile

    profile = config.getoption("hypothesis_profile", default=None) or os.environ.get("HYPOTHESIS_PROFILE")
    if profile:
        settings.load_profile(profile)
    edges_profile.WIDE = profile in ("slow", "wide")


@pytest.fixture
def rng(request):
    """A numpy Generator seeded from the test's node id: reproducible and distinct per test."""
    seed = sum(ord(ch) * (i + 1) for i, ch in enumerate(request.node.nodeid)) % (2**32)
    return np.random.default_rng(seed)
