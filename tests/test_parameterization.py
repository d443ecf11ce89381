"""The contract's building blocks: ParamSpec, Size, derived derivatives.

Covers: ``paramgeo.reports.contract_check``.
"""

import autograd.numpy as anp
import numpy as np
import pytest

import paramgeo
from paramgeo import Parameterization, ParamSpec, Size
from paramgeo.reports.contract_check import finite_difference_jacobian


class Cubic(Parameterization):
    """phi(a, B) = (a^3 + sum B, B @ B), forward only: everything else is derived."""

    name = "cubic-test"
    size_params = {"k": Size("int", default=2, minimum=1)}

    def make_spec(self):
        return ParamSpec(a=(1,), B=(self.k, self.k))

    def make_predictor_shape(self):
        return (1 + self.k * self.k,)

    def forward(self, theta):
        parts = self.spec.unpack(theta)
        a, B = parts["a"], parts["B"]
        return anp.concatenate([a ** 3 + anp.sum(B), anp.reshape(anp.dot(B, B), (-1,))])


def test_spec_pack_unpack_roundtrip(rng):
    spec = ParamSpec(U=(3, 2), v=4)
    assert spec.size == 10
    U, v = rng.standard_normal((3, 2)), rng.standard_normal(4)
    theta = spec.pack(U, v)
    parts = spec.unpack(theta)
    np.testing.assert_array_equal(parts["U"], U)
    np.testing.assert_array_equal(parts["v"], v)
    np.testing.assert_array_equal(spec.pack(v=v, U=U), theta)
    np.testing.assert_array_equal(spec.pack(parts), theta)  # unpack's mapping packs back
    with pytest.raises(paramgeo.ShapeError, match="missing"):
        spec.pack({"U": U})
    assert spec.labels()[:2] == ["U[0,0]", "U[0,1]"]
    with pytest.raises(paramgeo.ShapeError, match="block 'U' must have shape"):
        spec.pack(U.T, v)


@pytest.mark.parametrize(
    "kind,value,expected",
    [("int", "4", 4), ("ints", "2,3,1", (2, 3, 1)), ("bool", "yes", True), ("float", "0.5", 0.5)],
)
def test_size_parses_strings(kind, value, expected):
    assert Size(kind).parse("x", value) == expected


@pytest.mark.parametrize(
    "decl,value,message",
    [
        (Size("int"), "abc", "expected an integer"),
        (Size("int", minimum=1), "0", "must be >= 1"),
        (Size("choice", choices=("a", "b")), "c", "choose one of a, b"),
        (Size("ints"), "2,x", "comma-separated integers"),
        (Size("float"), "nan", "expected a number"),
    ],
)
def test_size_rejects_bad_values(decl, value, message):
    with pytest.raises(paramgeo.SizeError, match=message):
        decl.parse("x", value)


def test_unknown_and_missing_sizes():
    with pytest.raises(paramgeo.SizeError, match="unknown size q; its sizes are: k"):
        Cubic(q=3)

    class NoDefault(Cubic):
        size_params = {"k": Size("int")}

    with pytest.raises(paramgeo.SizeError, match="missing size 'k'"):
        NoDefault()


def test_forward_only_plugin_gets_autograd_derivatives(rng):
    p = Cubic(k=3)
    theta = p.random_point(rng)
    J = p.jacobian(theta)
    np.testing.assert_allclose(J, finite_difference_jacobian(p, theta), rtol=1e-6, atol=1e-7)
    v, w = rng.standard_normal(p.n), rng.standard_normal(p.m)
    np.testing.assert_allclose(p.jvp(theta, v), J @ v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(p.vjp(theta, w), J.T @ w, rtol=1e-12, atol=1e-12)
    # second derivative along v against finite differences of the Jacobian
    h = 1e-6
    fd = (p.jacobian(theta + h * v) - p.jacobian(theta - h * v)) / (2 * h)
    np.testing.assert_allclose(p.jacobian_derivative(theta, v), fd, rtol=1e-6, atol=1e-6)


def test_optional_methods_name_the_missing_capability():
    with pytest.raises(paramgeo.NotProvidedError, match="Cubic does not provide symmetry"):
        Cubic().symmetry()


def test_as_theta_rejects_wrong_shape_and_nan():
    p = Cubic(k=2)
    with pytest.raises(paramgeo.ShapeError, match="must have 5 entries"):
        p.as_theta(np.zeros(4))
    bad = np.zeros(5)
    bad[2] = np.nan
    with pytest.raises(paramgeo.ShapeError, match=r"non-finite value at B\[0,1\]"):
        p.as_theta(bad)


def test_hessian_vp_matches_jacobian_derivative(rng):
    p = Cubic(k=3)
    theta, v, w = p.random_point(rng), rng.standard_normal(p.n), rng.standard_normal(p.m)
    np.testing.assert_allclose(p.hessian_vp(theta, w, v), p.jacobian_derivative(theta, v).T @ w,
                               rtol=1e-10, atol=1e-12)
