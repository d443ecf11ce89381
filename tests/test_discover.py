"""Automatic symmetry discovery against the declared groups and known closed forms.

Covers: ``paramgeo.contract.registry``, ``paramgeo.linalg.numerics``, ``paramgeo.symmetry``,
``paramgeo.symmetry.discovery``, ``paramgeo.symmetry.groups``, ``paramgeo_plugins.hadamard``,
``paramgeo_plugins.uut``, ``paramgeo_plugins.uvt``.
"""

import numpy as np
import pytest

import paramgeo
from paramgeo.linalg import DEFAULT_POLICY
from paramgeo.symmetry import MAX_LINEAR_DIM, LinearSymmetryGroup, discover
from paramgeo.symmetry.discovery import _name, _structure


def test_uut_finds_so2():
    found = discover(paramgeo.get("uut", d=4, r=2))
    assert found.dim == 1 and found.algebra == "so(2)" and found.orbit_dim == 1
    A = found.basis[0]
    # the generator is the skew matrix acting on the columns of U: U -> U [[0, 1], [-1, 0]]
    np.testing.assert_allclose(A, -A.T)
    assert found.kernel_residual < 1e-12 and found.invariance_error < 1e-12
    assert "flip index 0 of U axis 1" in found.discrete  # the reflections in O(2)
    assert found.finding.startswith("agrees with the declared O(2)")


def test_uut_rank_three_finds_so3():
    found = discover(paramgeo.get("uut", d=4, r=3), discrete=False)
    assert (found.dim, found.algebra, found.killing_signature) == (3, "so(3)", (0, 3, 0))


def test_uvt_finds_gl2():
    found = discover(paramgeo.get("uvt", m=4, n=3, r=2))
    assert found.dim == 4 and found.algebra == "gl(2)"
    assert (found.center_dim, found.derived_dim) == (1, 3)
    assert found.killing_signature == (2, 1, 1)  # sl(2): split, plus the centre
    assert found.scaling_dim == 2  # the diagonal of gl(2): column rescalings (c U, V / c)
    assert found.closure_residual < 1e-10


def test_hadamard_torus_exponents_and_swap():
    found = discover(paramgeo.get("hadamard", p=3))
    assert found.dim == 3 and found.algebra == "torus of rescalings (R\\{0})^3"
    eye = np.eye(3)
    np.testing.assert_array_equal(found.scaling_exponents, np.hstack([eye, -eye]))
    assert "swap u <-> v" in found.discrete


def test_discovered_group_is_a_symmetry_group(rng):
    param = paramgeo.get("uvt", m=3, n=3, r=2)
    group = discover(param, discrete=False).group()
    assert isinstance(group, LinearSymmetryGroup) and group.dim == 4
    theta = param.random_point(rng)
    moved = group.act(group.random_element(rng), theta)
    assert not np.allclose(moved, theta)
    np.testing.assert_allclose(param.forward(moved), param.forward(theta), atol=1e-10)
    J = param.jacobian(theta)
    assert np.abs(J @ group.generators(theta)).max() < 1e-10


@pytest.mark.parametrize("name", paramgeo.available())
def test_discovery_finds_at_least_the_declared_dimension(name):
    param = paramgeo.get(name)
    if not param.provides("symmetry") or param.n > MAX_LINEAR_DIM:
        pytest.skip("no declared group or too large for the linear search")
    found = discover(param, discrete=False)
    declared = param.symmetry()
    assert found.dim >= declared.dim, found.finding
    # the declared vertical space lies inside the discovered one
    theta = param.random_point(np.random.default_rng(3))
    V = declared.generators(theta)
    D = found.group().generators(theta)
    if V.shape[1]:
        coef = np.linalg.lstsq(D, V, rcond=None)[0]
        assert np.linalg.norm(D @ coef - V) <= 1e-8 * max(np.linalg.norm(V), 1.0)


def test_names_from_structure():
    # so(1,1) acting on (u_i, v_i): symmetric, abelian
    hyp = np.array([[[0.0, 1.0], [1.0, 0.0]]]) / np.sqrt(2)
    assert _name(hyp, _structure(hyp, DEFAULT_POLICY)) == "so(1,1) (hyperbolic rotations)"
    # gl(2) acting on one 2 x 2 block by right multiplication, orthonormal basis
    basis = []
    for i in range(2):
        for j in range(2):
            X = np.zeros((2, 2))
            X[i, j] = 1.0
            basis.append(np.kron(np.eye(2), X.T))  # vec(U X) for row-major U (2 x 2)
    basis = np.array(basis) / np.sqrt(2)
    assert _name(basis, _structure(basis, DEFAULT_POLICY)) == "gl(2)"
    # sl(2): drop the identity direction
    traceless = np.array([basis[1], basis[2], (basis[0] - basis[3]) / np.sqrt(2)])
    assert _name(traceless, _structure(traceless, DEFAULT_POLICY)) == "sl(2)"


def test_large_n_skips_linear_search_but_finds_scalings():
    param = paramgeo.get("hadamard", p=25)
    found = discover(param, max_linear_dim=40, discrete=False)
    assert found.dim is None and "n = 50 > 40" in found.note
    assert found.scaling_dim == 25
    with pytest.raises(paramgeo.ParamgeoError):
        found.group()


def test_check_reports_declared_vs_discovered_and_fails_too_large_declaration(tmp_path):
    report = paramgeo.check(paramgeo.get("uut", d=3, r=2))
    item = [i for i in report.items if i.property == "declared-vs-discovered"][0]
    assert item.passed
    path = tmp_path / "too_big.py"
    path.write_text(
        "from paramgeo import get_class\n"
        "from paramgeo.symmetry import GeneralLinearGroup, blocks_of\n"
        "class TooBig(get_class('uut')):\n"
        "    name = 'uut-declares-gl'\n"
        "    def symmetry(self):\n"
        "        return GeneralLinearGroup(self.r, right=blocks_of(self.spec, 'U'))\n"
    )
    from paramgeo.contract import registry

    try:
        (name,) = paramgeo.load_plugin_file(path)
        report = paramgeo.check(paramgeo.get(name, d=3, r=2))
    finally:
        registry.unregister("uut-declares-gl")
    failed = {i.property for i in report.failures()}
    assert {"invariance", "generators-in-kernel", "declared-vs-discovered"} <= failed
    line = [ln for ln in str(report).splitlines() if "declared-vs-discovered" in ln][0]
    assert "GL(2) has dimension 4 but only so(2) (dimension 1)" in line
    inv = [ln for ln in str(report).splitlines() if "FAIL  invariance" in ln][0]
    assert "theta=[" in inv and "error" in inv


def test_discovered_larger_than_declared_is_a_finding():
    # declare only the rescaling of the first coordinate: discovery finds all three
    from paramgeo.symmetry import ScalingTorus

    base = paramgeo.get_class("hadamard")

    class Half(base):
        name = "hadamard-half-declared"

        def symmetry(self):
            eye = np.eye(self.p, dtype=int)[:1]
            return ScalingTorus(np.hstack([eye, -eye]), signed=True)

    report = paramgeo.check(Half(p=3))
    item = [i for i in report.items if i.property == "declared-vs-discovered"][0]
    assert item.passed and item.note.startswith("finding: discovered torus of rescalings")
    assert "finding" in str(report)


def test_scaling_directions_read_per_block_and_unsearched_discrete_parts_say_so():
    from paramgeo.symmetry.discovery import _exponent_label

    labels = [f"W[{i},{j}]" for i in range(2) for j in range(3)] + ["a[0]", "a[1]"]
    row = np.array([1, 1, 1, 0, 0, 0, -1, 0])  # neuron 0: its incoming row and outgoing weight
    assert _exponent_label(row, labels) == "theta -> c^E theta: W[0, 0:3] x c, a[0] x c^-1"
    found = discover(paramgeo.get("hadamard", p=2), discrete=False)
    assert found.discrete is None and "discrete: not searched" in str(found)
