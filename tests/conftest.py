import numpy as np
import pytest


@pytest.fixture
def rng():
    """An explicit generator per test (no global seeds)."""
    return np.random.default_rng(12345)


# Property tests draw from hypothesis' search, derandomized so CI is reproducible: a failure
# seen once is seen every time, and a green run stays green.
from hypothesis import settings as _settings

_settings.register_profile("paramgeo", derandomize=True, deadline=None)
_settings.load_profile("paramgeo")
