"""The guard's fixed-arity wrappers (paramgeo.contract.guard.guarded): once an instance has cached its
shapes, a positional call of forward, jacobian, jvp or vjp takes the fast path; it must
return what the plugin returns and report every fault the general path reports (the
plugin's exception, a non-finite or misshapen result, the caller's wrong argument).

Covers: ``paramgeo.contract.guard``.
"""

import numpy as np
import pytest

from paramgeo import Parameterization, ParamSpec, Size
from paramgeo.errors import PluginError, ShapeError


class _Squares(Parameterization):
    """phi(theta) = theta^2 elementwise, J = diag(2 theta), with closed forms that go wrong on
    purpose at marked points: theta_0 = 7 raises, theta_0 = 8 returns nan, theta_0 = 9 returns
    one entry too few."""

    name = "test-squares"
    size_params = {"k": Size("int", default=4, minimum=1)}
    capabilities = frozenset({"jvp", "vjp", "jacobian"})

    def make_spec(self):
        return ParamSpec(x=(self.k,))

    def make_predictor_shape(self):
        return (self.k,)

    def forward(self, theta):
        return theta ** 2

    def _fault(self, theta, out):
        if theta[0] == 7:
            raise ZeroDivisionError("marked point")
        if theta[0] == 8:
            out = out.copy()
            out.flat[0] = np.nan
        if theta[0] == 9:
            out = out[:-1]
        return out

    def jacobian(self, theta):
        return self._fault(theta, np.diag(2.0 * theta))

    def jvp(self, theta, v):
        return self._fault(theta, 2.0 * theta * v)

    def vjp(self, theta, w):
        return self._fault(theta, 2.0 * theta * w)


@pytest.fixture
def warm():
    """An instance whose every array method has run once (its shapes cached), with the
    results checked against finite differences of phi."""
    p = _Squares(k=4)
    rng = np.random.default_rng(0)
    theta, v = rng.standard_normal(4), rng.standard_normal(4)
    h = 1e-6
    fd = (p.forward(theta + h * v) - p.forward(theta - h * v)) / (2 * h)
    np.testing.assert_allclose(p.jvp(theta, v), fd, rtol=1e-8)
    np.testing.assert_allclose(p.jacobian(theta) @ v, fd, rtol=1e-8)
    np.testing.assert_allclose(p.vjp(theta, v) @ v, fd @ v, rtol=1e-8)  # <J^T v, v> = <v, J v>
    assert all(f"_guard_shapes_{m}" in p.__dict__ for m in ("forward", "jacobian", "jvp", "vjp"))
    return p, rng


@pytest.mark.parametrize("method", ["jvp", "vjp", "jacobian"])
@pytest.mark.parametrize("mark, message", [(7, "raised ZeroDivisionError: marked point"),
                                           (8, "returned nan"), (9, "returned shape")])
def test_a_warm_instance_reports_each_fault_of_the_plugin(warm, method, mark, message):
    p, rng = warm
    theta = rng.standard_normal(4)
    theta[0] = mark
    args = (theta,) if method == "jacobian" else (theta, rng.standard_normal(4))
    with pytest.raises(PluginError, match=message) as info:
        getattr(p, method)(*args)
    assert "test-squares" in str(info.value)


def test_a_warm_instance_refuses_the_callers_wrong_arguments(warm):
    p, _ = warm
    for call in (lambda: p.jvp(np.ones(5), np.ones(4)), lambda: p.vjp(np.ones(4), np.ones(3)),
                 lambda: p.jacobian(np.ones((2, 2))), lambda: p.forward(np.ones(3))):
        with pytest.raises(ShapeError, match="argument"):
            call()


def test_other_calls_of_a_warm_instance_take_the_general_path(warm):
    """Lists, integer and float32 arrays are converted as on the first call; a keyword
    argument reaches the plugin by its own name; every result is the closed form 2 theta v."""
    p, rng = warm
    theta, v = rng.standard_normal(4), rng.standard_normal(4)
    expected = 2.0 * theta * v
    np.testing.assert_allclose(p.jvp(list(theta), list(v)), expected, rtol=1e-15)
    np.testing.assert_allclose(p.jvp(theta, v=v), expected, rtol=1e-15)
    np.testing.assert_array_equal(p.jvp(np.arange(4), np.ones(4, dtype=np.float32)),
                                  2.0 * np.arange(4))
    np.testing.assert_array_equal(p.forward(np.arange(4)), np.arange(4.0) ** 2)
