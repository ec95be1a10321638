"""Shared fixtures for the core builtin tests (keep small)."""
import numpy as np
import pytest


@pytest.fixture
def rng(request):
    """A numpy Generator seeded from the test's node id: reproducible and distinct per test."""
    seed = sum(ord(ch) * (i + 1) for i, ch in enumerate(request.node.nodeid)) % (2**32)
    return np.random.default_rng(seed)
