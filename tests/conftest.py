import numpy as np
import pytest


@pytest.fixture
def rng():
    """An explicit generator per test (no global seeds)."""
    return np.random.default_rng(12345)
