"""align over the field groups (batch normalisation in eval mode) and shear groups (a dense
layer reading a layer norm) that from_torch reads from a model's layers: planted pairs, the
field solver against a derivative-free search over the same coefficients, and the shear solver
recovering the planted element.

Covers: ``paramgeo.quotient.alignment``, ``paramgeo.quotient._factors``, ``paramgeo.symmetry.actions``.
"""

import warnings

import numpy as np
import pytest

import paramgeo
from paramgeo.quotient import align
from paramgeo.quotient._factors import _fields
from paramgeo.symmetry import FieldGroup, ShearGroup

torch = pytest.importorskip("torch")


def _bn_model():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(),
                              torch.nn.Linear(4, 2))
    net[1].running_mean.copy_(0.2 * torch.randn(4))
    net[1].running_var.copy_(torch.rand(4) + 0.5)
    net.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return paramgeo.from_torch(net, torch.randn(30, 3), name="test-bn-align")


def test_batchnorm_model_planted_pair_aligns_to_zero():
    m = _bn_model()
    G = m.symmetry()
    assert any(isinstance(f, FieldGroup) for f in G.factors)
    rng = np.random.default_rng(0)
    t1 = m.random_point(rng)
    t2 = G.act(G.random_element(rng), t1)
    a = align(m, t1, t2)
    assert a.skipped == () and a.naive_distance > 1.0
    assert a.distance < 1e-10 and a.certificate.exact  # met the lower bound 0
    assert a.invariance_error < 1e-12


def test_field_solver_against_a_derivative_free_search():
    """min_t |x - exp(t . X) z| over the 8 batch-norm field coefficients alone: the solver's
    value is no worse than Nelder-Mead from two starts on the same objective."""
    from scipy.optimize import minimize

    m = _bn_model()
    F = next(f for f in m.symmetry().factors if isinstance(f, FieldGroup))
    rng = np.random.default_rng(1)
    x, z = m.random_point(rng), m.random_point(rng)
    t, moved, exact, _ = _fields(F, x, z)
    assert not exact and np.allclose(moved, F.act(t, z))
    ours = np.linalg.norm(x - moved)

    from scipy.linalg import expm

    from paramgeo.quotient._factors import _augmented

    mats = [A.toarray() for A in _augmented(F)]
    zt = np.append(z, 1.0)

    def cost(s):  # the group's exponential as a dense matrix exponential
        return np.linalg.norm(x - (expm(np.tensordot(s, mats, axes=1)) @ zt)[:-1])

    assert abs(cost(t) - ours) < 1e-10  # the dense route agrees with F.act

    best = min(minimize(cost, s0, method="Nelder-Mead",
                        options=dict(maxfev=1500, xatol=1e-9, fatol=1e-12)).fun
               for s0 in (np.zeros(F.dim), rng.uniform(-1, 1, F.dim)))
    assert ours <= best + 1e-6 and ours < np.linalg.norm(x - z)


def _ln_model(name):
    """Linear(3, 5)-LayerNorm(5)-Linear(5, 2) read by from_torch."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.LayerNorm(5),
                              torch.nn.Linear(5, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return paramgeo.from_torch(net, torch.randn(40, 3), name=name)


def test_layer_norm_shear_recovers_the_planted_element():
    m = _ln_model("test-ln-align")
    G = m.symmetry()
    k = next(i for i, f in enumerate(G.factors) if isinstance(f, ShearGroup))
    S = G.factors[k]
    rng = np.random.default_rng(2)
    t1 = m.random_point(rng)
    planted = rng.uniform(-2, 2, S.dim)
    a = align(m, t1, S.act(planted, t1), factors=[k])
    assert a.distance < 1e-12 and a.certificate.exact and a.invariance_error < 1e-12
    # the element taking theta1 + F t to theta1 is -t (F is constant along the orbit)
    assert np.allclose(a.g, -planted, atol=1e-10)


def test_layer_norm_model_planted_pair_aligns_over_all_its_continuous_factors():
    """Linear-LayerNorm-Linear: two field groups, the shears and the signed rescalings share
    entries; refined together after the block-coordinate descent, and retried with the sign
    of a rescaling that collapsed, planted pairs (which the descent alone left at 5e-3 and
    0.24) align to rounding and meet the lower bound."""
    m = _ln_model("test-ln-planted")
    G = m.symmetry()
    assert {type(f).__name__ for f in G.factors} >= {"FieldGroup", "ShearGroup", "ScalingTorus"}
    rng = np.random.default_rng(1)
    t1 = m.random_point(rng)
    t2 = G.act(G.random_element(rng), t1)
    a = align(m, t1, t2, group=G)
    assert a.naive_distance > 100 and a.distance < 1e-10 and a.certificate.exact
    assert "jointly" in a.certificate.method and a.invariance_error < 1e-12
    # a pair whose descent picks a wrong sign for a layer-norm rescaling (the refinement then
    # shrinks it towards 0, stopping at 0.22): restarted with that sign flipped, it aligns
    rng = np.random.default_rng(0)
    t1 = m.random_point(rng)
    t2 = G.act(G.random_element(rng), t1)
    a = align(m, t1, t2, group=G)
    assert a.naive_distance > 20 and a.distance < 1e-10 and a.certificate.exact
    assert "with the sign of rescaling 0" in a.certificate.method
    assert a.invariance_error < 1e-12


def test_field_solver_dense_and_sparse_routes_agree(monkeypatch):
    """The field solver's two routes to exp(M) z~ and its Jacobian, dense (expm, expm_frechet)
    and sparse (expm_multiply on [[M, A~_k], [0, M]]), give the same coefficients and point."""
    import paramgeo.quotient._factors as factors

    m = _bn_model()
    F = next(f for f in m.symmetry().factors if isinstance(f, FieldGroup))
    rng = np.random.default_rng(3)
    x, z = m.random_point(rng), m.random_point(rng)
    monkeypatch.setattr(factors, "MAX_DENSE_FIELDS", 10 ** 6)
    t_dense, moved_dense, _, _ = _fields(F, x, z)
    monkeypatch.setattr(factors, "MAX_DENSE_FIELDS", 0)
    t_sparse, moved_sparse, _, _ = _fields(F, x, z)
    assert np.linalg.norm(x - moved_dense) < np.linalg.norm(x - z)
    assert np.allclose(t_dense, t_sparse, atol=1e-7)
    assert np.allclose(moved_dense, moved_sparse, atol=1e-9)
