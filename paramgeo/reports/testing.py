"""Test helpers for plugin authors: the contract suite, reusable from any test runner.

    from paramgeo.reports.testing import ContractSuite

    class TestMyPlugin(ContractSuite):
        instances = [MyParam(k=2), MyParam(k=3)]

Each test method runs over every instance. :func:`assert_contract` is the same check as a
plain function for other runners.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .contract_check import check

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..contract.parameterization import Parameterization
    from .contract_check import CheckReport


def assert_contract(param: Parameterization, seed: int = 0, **kwargs: Any) -> CheckReport:
    """Raise AssertionError with the full report if ``param`` fails the contract check."""
    report = check(param, seed=seed, **kwargs)
    if not report.passed:
        raise AssertionError(str(report))
    return report


def assert_closed_forms(param: Parameterization, theta: ArrayLike, rng: np.random.Generator,
                        atol: float = 1e-12,
                        fd_atol: float = 1e-7) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Assert that the closed-form J, J v and J^T w at theta agree with autograd (the
    contract's defaults) and J with central finite differences; v, w drawn from ``rng``."""
    from .contract_check import finite_difference_jacobian
    from ..contract.parameterization import Parameterization

    J = param.jacobian(theta)
    np.testing.assert_allclose(J, Parameterization.jacobian(param, theta), atol=atol)
    np.testing.assert_allclose(J, finite_difference_jacobian(param, theta), atol=fd_atol)
    v, w = rng.standard_normal(param.n), rng.standard_normal(param.m)
    np.testing.assert_allclose(param.jvp(theta, v), Parameterization.jvp(param, theta, v),
                               atol=atol)
    np.testing.assert_allclose(param.vjp(theta, w), Parameterization.vjp(param, theta, w),
                               atol=atol)
    return v, w


class ContractSuite:
    """Subclass with ``instances = [...]`` (parameterization objects) to test them all."""

    instances: Sequence[Any] = ()

    def test_contract_check_passes(self) -> None:
        assert self.instances, "set `instances` to the parameterizations under test"
        for param in self.instances:
            assert_contract(param)

    def test_random_point_is_reproducible(self) -> None:
        for param in self.instances:
            a = param.random_point(np.random.default_rng(7))
            b = param.random_point(np.random.default_rng(7))
            np.testing.assert_array_equal(a, b)
            assert a.shape == (param.n,)

    def test_jacobian_shape(self) -> None:
        for param in self.instances:
            theta = param.random_point(np.random.default_rng(0))
            assert param.jacobian(theta).shape == (param.m, param.n)
