"""Every registered plugin passes the contract; broken plugins fail it, saying which property.

Covers: ``paramgeo.contract.registry``, ``paramgeo.reports.testing``,
``paramgeo_plugins.hadamard``, ``paramgeo_plugins.uut``.
"""

import textwrap

import numpy as np
import pytest

import paramgeo
from paramgeo.contract import registry
from paramgeo.reports.testing import ContractSuite


@pytest.mark.parametrize("name", paramgeo.available())
def test_every_registered_plugin_passes_the_contract(name):
    report = paramgeo.check(paramgeo.get(name))
    assert report.passed, str(report)
    assert {"forward", "jacobian-fd", "jvp", "vjp"} <= {i.property for i in report.items}


class TestBuiltinsThroughTheSuite(ContractSuite):
    instances = [paramgeo.get("uut", d=5, r=3), paramgeo.get("hadamard", p=4)]


BROKEN_JACOBIAN = '''
import numpy as np
from paramgeo import get_class
UUT = get_class("uut")

class WrongJacobian(UUT):
    name = "wrong-jacobian"
    def jvp(self, theta, v):
        return 2.0 * super().jvp(theta, v)
    def vjp(self, theta, w):
        return super().vjp(theta, w)
    def jacobian(self, theta):
        return 1.5 * super().jacobian(theta)
'''

BROKEN_SYMMETRY = '''
import numpy as np
import autograd.numpy as anp
from paramgeo import Parameterization, ParamSpec, Size
from paramgeo.symmetry import ScalingTorus

class NotInvariant(Parameterization):
    """beta = u * v with a wrongly declared symmetry (u, v) -> (c u, c v)."""
    name = "not-invariant"
    size_params = {"p": Size("int", default=3)}
    capabilities = frozenset({"symmetry"})
    def make_spec(self):
        return ParamSpec(u=(self.p,), v=(self.p,))
    def make_predictor_shape(self):
        return (self.p,)
    def forward(self, theta):
        return theta[: self.p] * theta[self.p:]
    def symmetry(self):
        eye = np.eye(self.p, dtype=int)
        return ScalingTorus(np.hstack([eye, eye]))
'''


@pytest.mark.parametrize(
    "source,name,failing,innocent",
    [
        (BROKEN_JACOBIAN, "wrong-jacobian", {"jacobian-autograd", "jacobian-fd", "jvp"},
         {"forward", "invariance"}),
        (BROKEN_SYMMETRY, "not-invariant", {"invariance", "generators-in-kernel"},
         {"forward", "jacobian-fd", "jvp", "vjp"}),
    ],
)
def test_broken_plugins_fail_naming_the_property(tmp_path, source, name, failing, innocent):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    try:
        paramgeo.load_plugin_file(path)
        report = paramgeo.check(paramgeo.get(name))
    finally:
        registry.unregister(name)
    assert not report.passed
    failed = {item.property for item in report.failures()}
    assert failing <= failed, str(report)
    assert not innocent & failed  # the correct parts are not blamed
    worst = max(item.error for item in report.failures())
    assert np.isfinite(worst) and worst > 1e-3
    assert "FAIL" in str(report) and "error" in str(report)


def test_non_free_action_is_a_note_not_a_failure():
    """O(r) on d x r factors with r > d has a stabilizer O(r - d) at generic points: orbits
    of dimension r(r-1)/2 - (r-d)(r-d-1)/2, which the check reports without failing."""
    report = paramgeo.check(paramgeo.get("uut", d=2, r=4))
    assert report.passed, str(report)
    notes = {item.note for item in report.items if item.property == "generators-rank"}
    assert any("stabilizer of dimension 1" in n and "orbits of dimension 5" in n for n in notes)
