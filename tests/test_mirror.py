"""The mirror engine against closed forms from the literature.

* Hadamard beta = u * v: commuting; laws u_i^2 - v_i^2; potential = hyperbolic entropy
  (Woodworth et al. 2020, Q_alpha(beta) = alpha^2 sum q(beta / alpha^2),
  q(z) = 2 - sqrt(4 + z^2) + z arcsinh(z / 2)); implicit bias argmin Q_alpha s.t. X beta = y,
  solved here independently through its dual (grad Q_alpha(beta) in range X^T, i.e.
  beta = 2 alpha^2 sinh(X^T lam)).
* UV^T: not commuting; laws U^T U - V^T V (Marcotte, Gribonval, Peyre 2023, Section 2 and
  Theorem 3.3: exactly r(r + 1) / 2 of them, so dim Lie = n - r(r + 1) / 2).
* Deep diagonal (product, balanced init): d beta/dt = -L |beta|^{2 - 2/L} grad ell
  (Arora, Cohen, Hazan 2018, Theorem 1, scalar case), so Hess R = 1 / (L |beta|^{2 - 2/L}).
* UU^T in commuting regimes (commuting A_i and seed): eigenvalues follow
  d lambda/dt = -4 lambda g, the entropy mirror flow R = 1/4 sum [l log(l / l0) - l + l0]
  (Gunasekar et al. 2017, Section 3), integrated here with scipy; its implicit-bias problem
  solved through its dual; minimum trace from linprog.

Covers: ``paramgeo.cli``, ``paramgeo.dynamics.trajectory``, ``paramgeo.linalg.numerics``,
``paramgeo.losses.predictor``, ``paramgeo.mirror.laws``, ``paramgeo.mirror.lie``,
``paramgeo_plugins.deep_diagonal``, ``paramgeo_plugins.deep_linear``,
``paramgeo_plugins.hadamard``, ``paramgeo_plugins.uut``, ``paramgeo_plugins.uvt``.
"""

import json

import numpy as np
import pytest
import sympy
from click.testing import CliRunner

import paramgeo
from paramgeo import Parameterization, ParamSpec, Size
from paramgeo import mirror as M
from paramgeo.cli import main
from paramgeo.flows import gradient_flow
from paramgeo.losses import LinearMeasurements


# ---------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def sparse():
    """A random sparse regression: N = 20 samples, p = 60 features, 5 nonzeros."""
    rng = np.random.default_rng(2023)
    X = rng.standard_normal((20, 60))
    beta = np.zeros(60)
    beta[rng.choice(60, 5, replace=False)] = rng.standard_normal(5) * 2
    return X, X @ beta


def woodworth_q(beta, alpha):
    z = beta / alpha ** 2
    return alpha ** 2 * np.sum(2 - np.sqrt(4 + z ** 2) + z * np.arcsinh(z / 2))


def argmin_hyperbolic_entropy_dual(X, y, alpha):
    """argmin Q_alpha s.t. X beta = y from KKT: beta = 2 alpha^2 sinh(X^T lam), X beta = y.

    Newton on the concave dual  max_lam <y, lam> - 2 alpha^2 sum cosh(X^T lam)  (the conjugate
    of Q_alpha is 2 alpha^2 sum cosh), with backtracking.
    """
    lam = np.zeros(X.shape[0])
    c = 2 * alpha ** 2

    def obj(l):
        with np.errstate(over="ignore"):
            return c * np.sum(np.cosh(X.T @ l)) - y @ l

    for _ in range(500):
        s = X.T @ lam
        g = X @ (c * np.sinh(s)) - y
        if np.linalg.norm(g) < 1e-13 * (1 + np.linalg.norm(y)):
            break
        H = (X * (c * np.cosh(s))) @ X.T
        step = np.linalg.solve(H, g)
        t = 1.0
        while obj(lam - t * step) > obj(lam) - 1e-4 * t * (g @ step) and t > 1e-12:
            t /= 2
        lam = lam - t * step
    return c * np.sinh(X.T @ lam)


# ---------------------------------------------------------------------- hadamard
@pytest.mark.parametrize("method", ["symbolic", "numeric"])
def test_hadamard_commuting_algebra_and_laws(method):
    par = paramgeo.get("hadamard", p=5)
    assert M.commuting_test(par, method=method).commuting
    alg = M.lie_algebra(par, method=method)
    assert (alg.dim, alg.n_laws, alg.stabilised) == (5, 5, True)
    laws = M.conservation_laws(par, method=method, algebra=alg)
    u = sympy.symbols("u_0:5", real=True)
    v = sympy.symbols("v_0:5", real=True)
    assert sorted(laws.laws) == sorted(str(a ** 2 - b ** 2) for a, b in zip(u, v))
    assert laws.laws[0] == "u_0**2 - v_0**2"
    assert laws.complete and laws.independent == 5


def test_hadamard_brackets_vanish_and_hessian_route():
    par = paramgeo.get("hadamard", p=4)
    theta = par.random_point(np.random.default_rng(0))
    assert np.abs(M.brackets(par, theta)).max() == 0.0


def test_hadamard_potential_is_hyperbolic_entropy(rng):
    par = paramgeo.get("hadamard", p=6)
    for alpha in (0.05, 0.3, 2.0):
        pot = M.mirror_potential(par, par.init_at_scale(alpha))
        assert pot.source == "closed form" and "arcsinh" in pot.formula
        beta = rng.standard_normal(6) * 3
        # R = Q_alpha / 2 (the flow on (u, v) runs at half the speed of Woodworth's (w+, w-))
        assert np.isclose(pot.value(beta), woodworth_q(beta, alpha) / 2, rtol=1e-12)
        assert np.allclose(pot.grad(beta), 0.5 * np.arcsinh(beta / (2 * alpha ** 2)))
        h = 1e-6 * (1 + np.abs(beta))
        fd = [(pot.grad(beta + h[i] * np.eye(6)[i]) - pot.grad(beta - h[i] * np.eye(6)[i]))
              / (2 * h[i]) for i in range(6)]
        assert np.allclose(pot.hessian(beta), np.array(fd), rtol=1e-6, atol=1e-9)


def test_numerical_potential_matches_closed_form(rng):
    """Li et al.'s construction (flows of the commuting fields) against the closed form at a
    generic theta0 (u0 != v0, beta0 != 0)."""
    par = paramgeo.get("hadamard", p=3)
    theta0 = par.random_point(rng)
    closed = par.mirror_potential(theta0)
    num = M.numerical_potential(par, theta0)
    beta = closed.beta0 + 0.4 * rng.standard_normal(3)
    assert np.allclose(num.grad(beta), closed.grad(beta), atol=1e-8)
    assert np.isclose(num.value(beta), closed.value(beta), atol=1e-9)
    assert np.allclose(num.hessian(beta), closed.hessian(beta), atol=1e-7)


def test_implicit_bias_hadamard_sparse_regression(sparse):
    X, y = sparse
    par = paramgeo.get("hadamard", p=60)
    gaps = []
    for alpha in (1e-1, 1e-2, 1e-3):
        res = M.implicit_bias(par, X, y, alpha)
        reference = argmin_hyperbolic_entropy_dual(X, y, alpha)
        assert np.abs(res.beta_flow - reference).max() < 1e-6, alpha
        assert np.abs(res.beta_potential - reference).max() < 1e-6, alpha
        assert res.deviation < 1e-6 and res.kkt < 1e-6
        assert np.abs(X @ res.beta_potential - y).max() < 1e-9
        gaps.append(res.l1_gap)
    # min-l1 optimality: the gaps are >= 0 and shrink as alpha -> 0 (Woodworth et al. Thm 2)
    assert gaps[0] > gaps[1] > gaps[2] > -1e-9
    assert gaps[2] < 0.2 * gaps[0]
    # alpha -> infinity: the minimum-l2 interpolator (kernel regime)
    big = M.implicit_bias(par, X, y, 30.0)
    assert big.l2_distance < 1e-5


def test_min_l1_and_l2_references(sparse):
    X, y = sparse
    b1 = M.min_l1(X, y)
    assert np.allclose(X @ b1, y, atol=1e-8)
    assert np.abs(b1).sum() <= np.abs(np.linalg.pinv(X) @ y).sum() + 1e-9
    assert np.allclose(M.min_l2(X, y), np.linalg.lstsq(X, y, rcond=None)[0])


def test_verify_hadamard_and_deep_diagonal(sparse):
    X, y = sparse
    loss = LinearMeasurements(X, y)
    had = paramgeo.get("hadamard", p=60)
    res = M.verify(had, had.init_at_scale(0.1), loss, t_final=300.0)
    assert res.source == "closed form" and res.deviation < 1e-6
    deep = paramgeo.get("deep-diagonal", p=60, depth=3)
    res = M.verify(deep, deep.init_at_scale(0.5), loss, t_final=100.0)
    assert res.source == "closed form" and res.deviation < 1e-6


def test_deep_diagonal_potential_closed_form(rng):
    """Hess R = 1 / (L |beta|^{2 - 2/L}) (Arora, Cohen, Hazan 2018) and grad R(beta0) = 0;
    Li et al.'s numerical construction agrees at a balanced signed theta0."""
    par = paramgeo.get("deep-diagonal", p=4, depth=3)
    theta0 = par.init_at_scale(0.7).reshape(3, 4) * np.array([[1, -1, 1, -1], [1, 1, -1, -1],
                                                               [1, 1, 1, 1]])
    pot = par.mirror_potential(theta0.ravel())
    beta = pot.beta0 * (1 + 0.5 * rng.random(4))
    assert np.allclose(np.diag(pot.hessian(beta)), 1 / (3 * np.abs(beta) ** (4 / 3)))
    assert np.allclose(pot.grad(pot.beta0), 0) and pot.value(pot.beta0) == 0
    num = M.numerical_potential(par, theta0.ravel())
    assert np.allclose(num.grad(beta), pot.grad(beta), atol=1e-8)
    assert np.isclose(num.value(beta), pot.value(beta), atol=1e-9)
    assert par.mirror_potential(par.random_point(rng)) is None  # unbalanced: no closed form


def test_deep_diagonal_signed_numerical_potential_verifies(rng):
    """u^3 - v^3 commutes; its law u^{-1} + v^{-1} is not polynomial (Woodworth et al. 2020,
    Section 5), so the polynomial search reports an incomplete set; the closed-form potential
    (paramgeo.mirror.separable) and Li et al.'s numerical construction both reproduce the
    flow."""
    par = paramgeo.get("deep-diagonal", p=2, depth=3, variant="signed")
    report = M.mirror(par, alpha=0.5)
    assert report.commuting and report.n_laws == 2 and not report.laws_complete
    X = rng.standard_normal((1, 2))
    loss = LinearMeasurements(X, X @ np.ones(2))
    theta0 = par.init_at_scale(0.5)
    res = M.verify(par, theta0, loss, t_final=3.0, n_records=20)
    assert res.source == "closed form" and res.deviation < 1e-8
    res = M.verify(par, theta0, loss, t_final=3.0, n_records=20,
                   potential=M.numerical_potential(par, theta0))
    assert res.source.startswith("numerical") and res.deviation < 1e-6


# ---------------------------------------------------------------------- UV^T
def uvt_expected_laws(m, n, r):
    U = sympy.Matrix(m, r, lambda a, k: sympy.Symbol(f"U_{a}_{k}", real=True))
    V = sympy.Matrix(n, r, lambda a, k: sympy.Symbol(f"V_{a}_{k}", real=True))
    D = U.T * U - V.T * V
    return {str(sympy.expand(D[k, l])) for k in range(r) for l in range(k, r)}


def test_uvt_not_commuting_with_laws_UtU_minus_VtV():
    par = paramgeo.get("uvt", m=3, n=3, r=2)
    test = M.commuting_test(par)
    assert not test.commuting and test.relative > 1e-3
    alg = M.lie_algebra(par)
    assert alg.dim == 12 - 3 and alg.n_laws == 3  # r(r+1)/2 laws
    laws = M.conservation_laws(par, algebra=alg)
    assert uvt_expected_laws(3, 3, 2) <= set(laws.laws)
    assert laws.complete
    with pytest.raises(M.NotCommutingError, match="do not commute"):
        M.mirror_potential(par, par.random_point(np.random.default_rng(0)))


def test_uvt_numeric_route_agrees_with_exact_brackets(rng):
    par = paramgeo.get("uvt", m=2, n=2, r=1)
    theta = par.random_point(rng)
    B = M.brackets(par, theta)
    symbols, _ = paramgeo.expressions.symbolic.symbolic_form(par)
    for (i, j), expr in M.symbolic_brackets(par).items():
        exact = np.array([float(e.xreplace(dict(zip(symbols, theta)))) for e in expr])
        assert np.allclose(B[i, j], exact, atol=1e-12)
        assert np.allclose(B[j, i], -exact, atol=1e-12)
    num, sym = M.lie_algebra(par, method="numeric"), M.lie_algebra(par, method="symbolic")
    assert num.dim == sym.dim == 4 - 1
    laws = M.conservation_laws(par, method="numeric", algebra=num)
    assert uvt_expected_laws(2, 2, 1) <= set(laws.laws)


_TANH_INPUTS = np.random.default_rng(3).standard_normal((40, 2))


class _TanhMLP(Parameterization):
    """x -> W2 tanh(W1 x + b1) + b2 (widths 2, 3, 1) on 40 fixed inputs: n = 13 = rank J, so
    the algebra of the fields is all of R^13 and there is no conservation law at all (its
    symmetries, the sign flips and permutations of hidden neurons, are discrete)."""

    name = "test-tanh-mlp-laws"

    def make_spec(self):
        return ParamSpec(W1=(3, 2), b1=(3,), W2=(1, 3), b2=(1,))

    def make_predictor_shape(self):
        return (40,)

    def forward(self, theta):
        import autograd.numpy as anp

        W1, b1, W2, b2 = self.spec.unpack(theta).values()
        return anp.reshape(anp.dot(anp.tanh(anp.dot(_TANH_INPUTS, W1.T) + b1), W2.T) + b2, -1)


def test_numeric_laws_of_a_full_rank_tanh_mlp_are_none():
    # m = 40 rows per point, but each point constrains grad h only through rank J = 13 of
    # them: sampling 2 * 104 monomials / m + 3 = 9 points left every quadratic h whose Hessian
    # vanishes on the 8 point differences (a space of dimension 5 * 6 / 2 = 15) as a "law"
    par = _TanhMLP()
    alg = M.lie_algebra(par, method="numeric")
    assert (alg.dim, alg.n_laws) == (13, 0)
    laws = M.conservation_laws(par, method="numeric", algebra=alg)
    assert laws.laws == () and laws.independent == 0 and laws.complete


def test_spurious_laws_of_too_few_points_have_the_predicted_dimension():
    # the count behind the sampling rule: at k <= n points of a full-rank field, the sampled
    # system's null space is {b + H theta_j = 0 for all j}, of dimension s (s + 1) / 2 with
    # s = n + 1 - k (symmetric H vanishing on the k - 1 differences theta_j - theta_1)
    from paramgeo.mirror.laws import _exponents, _monomial_grads, _null_rows

    par, rng = _TanhMLP(), np.random.default_rng(5)
    exps = _exponents(par.n, 2)
    for k in (11,):
        blocks = []
        for _ in range(k):
            th = par.random_point(rng)
            blocks.append(M.vector_fields(par, th) @ _monomial_grads(exps, th).T)
        s = par.n + 1 - k
        assert _null_rows(blocks, None).shape[0] == s * (s + 1) // 2


def test_numeric_laws_of_deep_linear_span_the_balancedness_entries(rng):
    # widths 2, 3, 2, 2: the laws are the entries of W1 W1^T - W2^T W2 (3 x 3 symmetric: 6)
    # and W2 W2^T - W3^T W3 (2 x 2: 3), Arora, Cohen, Hazan (2018); Marcotte et al. (2023)
    par = paramgeo.get("deep-linear", widths="2,3,2,2")
    alg = M.lie_algebra(par, bound=par.n - 9, partial=True)
    laws = M.conservation_laws(par, method="numeric", algebra=alg)
    assert len(laws.laws) == 9 and laws.independent == 9
    symbols = [sympy.Symbol(lab.replace("[", "_").replace("]", "").replace(",", "_"), real=True)
               for lab in par.spec.labels()]
    found = [sympy.lambdify(symbols, sympy.sympify(law, locals=dict(
        (str(x), x) for x in symbols))) for law in laws.laws]
    points = [par.random_point(rng) for _ in range(30)]

    def exact(theta):
        W1, W2, W3 = par.spec.unpack(theta).values()
        A, B = W1 @ W1.T - W2.T @ W2, W2 @ W2.T - W3.T @ W3
        return np.concatenate([A[np.triu_indices(3)], B[np.triu_indices(2)]])

    F = np.array([[f(*theta) for f in found] for theta in points])  # 30 x 9
    E = np.array([exact(theta) for theta in points])  # 30 x 9
    assert np.linalg.matrix_rank(F) == np.linalg.matrix_rank(E) == 9
    assert np.linalg.matrix_rank(np.hstack([F, E])) == 9  # the same space of functions


def test_laws_are_conserved_along_gradient_flow(rng):
    """Independent of the algebra: the laws found stay constant along an actual flow."""
    par = paramgeo.get("uvt", m=3, n=3, r=2)
    A = rng.standard_normal((4, 3, 3))
    loss = LinearMeasurements(A, rng.standard_normal(4))
    traj = gradient_flow(par, loss, par.random_point(rng), 2.0, n_records=5)
    for theta in traj.thetas:
        U, V = (b for b in par.spec.unpack(theta).values())
        assert np.allclose(U.T @ U - V.T @ V, _uvt_first(traj, par), atol=1e-6)


def _uvt_first(traj, par):
    U, V = (b for b in par.spec.unpack(traj.thetas[0]).values())
    return U.T @ U - V.T @ V


class NoSymbolicHadamard(Parameterization):
    """beta = u * v with nothing but forward: exercises every numeric route."""

    name = "test-hadamard-numeric"
    size_params = {"p": Size("int", default=3, minimum=1)}

    def make_spec(self):
        return ParamSpec(u=(self.p,), v=(self.p,))

    def make_predictor_shape(self):
        return (self.p,)

    def forward(self, theta):
        return theta[: self.p] * theta[self.p:]


def test_numeric_routes_without_symbolic(rng):
    par = NoSymbolicHadamard(p=3)
    report = M.mirror(par)
    assert report.method == "numeric" and report.commuting and report.algebra_dim == 3
    assert set(report.laws) == {f"u_{i}**2 - v_{i}**2" for i in range(3)}
    assert report.potential_source.startswith("numerical")


def test_uut_generic_measurements_not_commuting():
    par = paramgeo.get("uut", d=3, r=1)
    assert not M.commuting_test(par, method="numeric").commuting


# ---------------------------------------------------------------------- CLI
def run(*args):
    return CliRunner().invoke(main, list(args))


def test_cli_mirror_hadamard_json():
    res = run("mirror", "hadamard", "-p", "p=5", "--init-scale", "0.1", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["commuting"] and out["algebra_dim"] == 5 and out["n_laws"] == 5
    assert out["laws"][0] == "u_0**2 - v_0**2" and "arcsinh" in out["potential"]


def test_cli_mirror_uvt_text():
    res = run("mirror", "uvt", "-p", "m=3", "-p", "n=3", "-p", "r=2")
    assert res.exit_code == 0, res.output
    assert "commuting: no" in res.output and "dimension 9" in res.output
    assert "mirror potential: none" in res.output


def test_cli_implicit_bias(tmp_path, sparse):
    X, y = sparse
    np.savez(tmp_path / "d.npz", X=X, y=y)
    res = run("implicit-bias", "hadamard", "-p", "p=60", "--data", str(tmp_path / "d.npz"),
              "--init-scale", "0.01", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["deviation"] < 1e-6 and out["l1_gap"] > 0 and len(out["beta_flow"]) == 60


@pytest.mark.parametrize("content,fragment", [
    ("missing", "does not exist"),
    ("noy", "lacks the array(s) y"),
    ("junk", "is not an .npz archive"),
    ("shape", "has predictors of dimension 5"),
])
def test_cli_implicit_bias_bad_data(tmp_path, content, fragment):
    path = tmp_path / "d.npz"
    if content == "noy":
        np.savez(path, X=np.ones((2, 5)))
    elif content == "junk":
        path.write_text("not an archive")
    elif content == "shape":
        np.savez(path, X=np.ones((2, 7)), y=np.ones(2))
    res = run("implicit-bias", "hadamard", "-p", "p=5", "--data", str(path), "--init-scale",
              "0.1")
    assert res.exit_code == 2, res.output
    assert fragment in res.output and len(res.output.strip().splitlines()) == 1


# ---------------------------------------------------------------------- UU^T commuting regimes
# Independent route: with G = grad ell(Q) symmetric, gradient flow on U gives
# dQ/dt = -2 (G Q + Q G); for A_i = E diag(a_i) E^T and Q0 = E diag(lambda0) E^T the flow stays
# diagonal in E with d lambda_j/dt = -4 lambda_j g_j, g = a^T (a lambda - y) / N, i.e. the
# mirror flow of the entropy R = 1/4 sum [lambda log(lambda / lambda0) - lambda + lambda0]
# (Gunasekar et al. 2017, Section 3). These tests integrate that ODE with scipy and solve the
# entropy's implicit-bias problem through its dual, not through the engine.
def commuting_sensing(rng, d, N, lam_true):
    E, _ = np.linalg.qr(rng.standard_normal((d, d)))
    a = np.abs(rng.standard_normal((N, d))) + 0.2
    A = np.einsum("aj,ij,bj->iab", E, a, E)
    return E, a, A, a @ lam_true


def entropy_flow(lam0, a, y, times):
    from scipy.integrate import solve_ivp

    def rhs(_, lam):
        return -4 * lam * (a.T @ (a @ lam - y) / len(y))

    sol = solve_ivp(rhs, (0, times[-1]), lam0, t_eval=times, method="LSODA", rtol=1e-12,
                    atol=1e-15)
    return sol.y.T


def entropy_dual(nu, a, y, lam0):
    return y @ nu - 0.25 * lam0 @ np.exp(4 * a.T @ nu)


def argmin_entropy_dual(a, y, lam0):
    """argmin 1/4 sum [l log(l / l0) - l + l0] s.t. a l = y: KKT l = l0 exp(4 a^T nu);
    Newton on the concave dual <y, nu> - 1/4 sum l0 exp(4 a^T nu)."""
    nu = np.zeros(len(y))
    for _ in range(200):
        lam = lam0 * np.exp(4 * a.T @ nu)
        g = y - a @ lam
        if np.linalg.norm(g) < 1e-14 * (1 + np.linalg.norm(y)):
            break
        step = np.linalg.solve((a * (4 * lam)) @ a.T, g)
        t = 1.0
        with np.errstate(over="ignore"):
            while (entropy_dual(nu + t * step, a, y, lam0) < entropy_dual(nu, a, y, lam0)
                   + 1e-4 * t * (g @ step) and t > 1e-12):
                t /= 2
        nu = nu + t * step
    return lam0 * np.exp(4 * a.T @ nu)


def test_uut_commuting_regime_eigenvalues_follow_entropy_mirror_flow(rng):
    d, r = 4, 2
    E, a, A, y = commuting_sensing(rng, d, 2, np.array([1.0, 0.5, 0.0, 0.0]))
    par = paramgeo.get("uut", d=d, r=r)
    alpha = 0.3
    theta0 = (alpha * E[:, :r]).ravel()  # Q0 = alpha^2 E_r E_r^T commutes with every A_i
    loss = LinearMeasurements(A, y)
    reg = M.commuting_regime(par, loss, theta0)
    assert reg.commuting and reg.coordinates == "spectral" and reg.seed_commutes
    assert reg.potential.source == "closed form" and reg.identity_residual < 1e-9
    assert len(reg.active) == r and len(reg.frozen) == d - r
    # the basis is E up to order and signs: |E^T basis| is a permutation matrix
    assert np.allclose(np.sort(np.abs(E.T @ reg.basis), axis=0)[-1], 1, atol=1e-9)
    # the potential is the entropy with lambda0 = alpha^2 (closed form, not engine output)
    lam = np.array([0.7, 0.05])
    assert np.allclose(reg.potential.grad(lam), 0.25 * np.log(lam / alpha ** 2))
    assert np.isclose(reg.potential.value(lam),
                      0.25 * np.sum(lam * np.log(lam / alpha ** 2) - lam + alpha ** 2))
    assert np.allclose(reg.potential.hessian(lam), np.diag(1 / (4 * lam)))
    # (1) eigenvalues of Q(t) from gradient flow on U vs the entropy mirror flow (scipy)
    times = np.linspace(0, 20, 30)
    traj = gradient_flow(par, loss, theta0, 20.0, t_eval=times, rtol=1e-12, atol=1e-14,
                         conserved=False)
    lam0 = np.where(np.arange(d) < r, alpha ** 2, 0.0)
    predicted = entropy_flow(lam0, a, y, times)
    eig = np.array([np.linalg.eigvalsh(q.reshape(d, d)) for q in traj.predictors])
    assert np.abs(np.sort(predicted, axis=1) - eig).max() < 1e-6
    assert np.abs(predicted[-1] - predicted[0]).max() > 0.1  # the flow really moved
    # the engine's own side-by-side integration agrees too
    ver = M.verify_regime(par, theta0, loss, 20.0, regime=reg)
    assert ver.deviation < 1e-6 and ver.frozen_drift < 1e-12 and ver.off_diagonal < 1e-9


def test_uut_commuting_regime_limit_is_entropy_argmin_and_min_trace(rng):
    """(2) The limit solves argmin R(lambda) s.t. the data (dual solve above); from
    U0 = alpha E it approaches the minimum-trace PSD solution as alpha -> 0 (Gunasekar et al.
    2017, Theorem 1), which linprog gives over lambda >= 0."""
    from scipy.optimize import linprog

    d = 5
    E, a, A, y = commuting_sensing(rng, d, 2, np.array([2.0, 0.0, 0.0, 1.0, 0.0]))
    par = paramgeo.get("uut", d=d, r=d)
    loss = LinearMeasurements(A, y)
    lp = linprog(np.ones(d), A_eq=a, b_eq=y, bounds=(0, None), method="highs")
    gaps = []
    for alpha in (1e-1, 1e-2, 1e-4):
        theta0 = (alpha * E).ravel()
        res = M.regime_implicit_bias(par, theta0, loss)
        reference = argmin_entropy_dual(a, y, np.full(d, alpha ** 2))
        # order the engine's coordinates by matching the eigenvectors to E's columns
        reg = M.commuting_regime(par, loss, theta0)
        perm = np.argmax(np.abs(E.T @ reg.basis), axis=0)
        assert np.abs(res.lambda_flow - reference[perm]).max() < 1e-6, alpha
        assert np.abs(res.lambda_potential - reference[perm]).max() < 1e-6, alpha
        Q = res.beta_flow.reshape(d, d)
        assert np.allclose(np.sort(np.linalg.eigvalsh(Q)), np.sort(reference), atol=1e-6)
        assert res.predictor_deviation < 1e-6
        gaps.append(np.trace(Q) - lp.fun)
    assert gaps[0] > gaps[1] > gaps[2] > -1e-9 and gaps[2] < 0.3 * gaps[0]


def test_uut_non_commuting_measurements_claim_no_potential(rng):
    """(3) Generic symmetric A_i do not commute: no regime, no potential."""
    par = paramgeo.get("uut", d=3, r=2)
    B = rng.standard_normal((3, 3, 3))
    loss = LinearMeasurements(B + B.transpose(0, 2, 1), rng.standard_normal(3))
    theta0 = par.init_at_scale(0.5)
    reg = M.commuting_regime(par, loss, theta0)
    assert not reg.commuting and reg.potential is None and reg.relative_bracket > 1e-3
    assert reg.measurement_commutator > 1e-2 and "do not commute" in reg.reason
    with pytest.raises(M.NotCommutingError, match="do not commute"):
        M.verify_regime(par, theta0, loss, 1.0, regime=reg)
    with pytest.raises(M.NotCommutingError):
        M.mirror_potential(par, theta0)  # UU^T as a whole never commutes


def test_uut_non_commuting_seed_uses_numerical_potential(rng):
    """Commuting A_i but a seed Q0 that does not commute with them: lambda_j = e_j^T Q e_j
    still obeys d lambda_j/dt = -4 lambda_j g_j (each row v_j of E^T U is only rescaled:
    dv_j/dt = -2 g_j v_j), so R is the entropy with lambda0 = diag(E^T Q0 E); the von Neumann
    closed form does not apply there and the engine rejects it (identity check) and builds R
    numerically, which must match that entropy."""
    d, r = 3, 2
    E, a, A, y = commuting_sensing(rng, d, 2, np.array([1.0, 0.3, 0.0]))
    par = paramgeo.get("uut", d=d, r=r)
    theta0 = 0.6 * rng.standard_normal(d * r)
    loss = LinearMeasurements(A, y)
    reg = M.commuting_regime(par, loss, theta0)
    assert reg.commuting and reg.coordinates == "spectral" and reg.seed_commutes is False
    assert reg.identity_residual > 1e-3 and reg.potential.source.startswith("numerical")
    U0 = theta0.reshape(d, r)
    lam0 = np.einsum("aj,ab,bj->j", reg.basis, U0 @ U0.T, reg.basis)
    lam = lam0 * np.exp(rng.uniform(-0.5, 0.5, d))
    assert np.allclose(reg.potential.grad(lam), 0.25 * np.log(lam / lam0), atol=1e-8)
    ver = M.verify_regime(par, theta0, loss, 5.0, regime=reg, n_records=15)
    assert ver.deviation < 1e-6 and ver.off_diagonal > 1e-3  # Q(t) is not diagonal in E


def test_commuting_regime_is_generic_uvt(rng):
    """The engine is not tied to UU^T: UV^T with the same commuting symmetric measurements is
    commuting in the spectral coordinates lambda_j = <E^T U e_j-row, E^T V e_j-row>; no closed
    form there, so the numerical construction; the flow reproduces it."""
    d = 3
    _, _, A, y = commuting_sensing(rng, d, 2, np.array([1.0, 0.3, 0.0]))
    par = paramgeo.get("uvt", m=d, n=d, r=2)
    theta0 = 0.7 * rng.standard_normal(par.n)
    loss = LinearMeasurements(A, y)
    reg = M.commuting_regime(par, loss, theta0)
    assert reg.commuting and reg.coordinates == "spectral"
    assert reg.potential.source.startswith("numerical")
    assert M.verify_regime(par, theta0, loss, 3.0, regime=reg, n_records=15).deviation < 1e-6


def test_positive_quadratic_network_orthogonal_inputs(rng):
    """f_U(x) = x^T U U^T x on inputs along orthogonal directions (A_i = x_i x_i^T commute):
    QuadraticMeasurements is recognised as the same regime, with closed form."""
    d = 3
    E, _ = np.linalg.qr(rng.standard_normal((d, d)))
    X = np.array([1.5 * E[:, 0], -0.7 * E[:, 1], 0.9 * E[:, 0]])
    from paramgeo.losses import QuadraticMeasurements

    loss = QuadraticMeasurements(X, np.array([2.0, 0.4, 0.8]))
    par = paramgeo.get("uut", d=d, r=d)
    reg = M.commuting_regime(par, loss, par.init_at_scale(0.2))
    assert reg.commuting and reg.potential.source == "closed form"
    assert M.verify_regime(par, par.init_at_scale(0.2), loss, 10.0, regime=reg).deviation < 1e-6


def test_uut_von_neumann_potential_against_logm_and_finite_differences(rng):
    from scipy.linalg import logm

    par = paramgeo.get("uut", d=3, r=3)
    theta0 = rng.standard_normal(9)
    pot = par.mirror_potential(theta0)
    U0 = theta0.reshape(3, 3)
    Q0 = U0 @ U0.T
    W = rng.standard_normal((3, 3))
    Q = W @ W.T + 0.2 * np.eye(3)
    expected = 0.25 * np.trace(Q @ logm(Q) - Q @ logm(Q0) - Q + Q0).real
    assert np.isclose(pot.value(Q.ravel()), expected, rtol=1e-10)
    assert pot.value(pot.beta0) == pytest.approx(0, abs=1e-12)
    assert np.allclose(pot.grad(pot.beta0), 0, atol=1e-12)
    H = rng.standard_normal((3, 3)).ravel()
    h = 1e-6
    fd = (pot.value(Q.ravel() + h * H) - pot.value(Q.ravel() - h * H)) / (2 * h)
    assert np.isclose(fd, pot.grad(Q.ravel()) @ H, rtol=1e-7)
    fd = (pot.grad(Q.ravel() + h * H) - pot.grad(Q.ravel() - h * H)) / (2 * h)
    assert np.allclose(pot.hessian(Q.ravel()) @ H, fd, atol=1e-7)
    # rank-deficient seed: +inf off range Q0, None for U0 = 0
    low = paramgeo.get("uut", d=3, r=1)
    pot1 = low.mirror_potential(np.array([1.0, 0.0, 0.0]))
    assert np.isinf(pot1.value(np.eye(3).ravel())) and np.isfinite(
        pot1.value(np.diag([2.0, 0, 0]).ravel()))
    assert low.mirror_potential(np.zeros(3)) is None


def test_commuting_regime_falls_back_to_measurement_coordinates(rng):
    """Non-square predictors (Hadamard): coordinates = an orthonormal basis of the measurement
    span; the restricted hyperbolic entropy is not the potential of those coordinates (the flow
    leaves the affine slice), so the identity check rejects it and the numerical construction
    is used; the flow of z = C beta is reproduced."""
    par = paramgeo.get("hadamard", p=4)
    X = rng.standard_normal((2, 4))
    loss = LinearMeasurements(X, X @ np.array([1.0, 0.0, -0.5, 0.0]))
    theta0 = par.init_at_scale(0.5)
    reg = M.commuting_regime(par, loss, theta0)
    assert reg.commuting and reg.coordinates == "measurements" and reg.basis is None
    assert "not square" in reg.reason and reg.identity_residual > 100 * M.IDENTITY_TOL
    assert np.allclose(reg.C @ reg.C.T, np.eye(2)) and np.allclose(reg.design @ reg.C, X)
    assert M.verify_regime(par, theta0, loss, 3.0, regime=reg, n_records=12).deviation < 1e-6


@pytest.mark.parametrize("name,sizes", [("uvt", dict(m=3, n=3, r=2)), ("uut", dict(d=4, r=2)),
                                        ("qk-attention", dict(d=3, r=2, heads=1, tied=True))])
def test_linear_field_fast_path_matches_symbolic_brackets(name, sizes):
    """Quadratic maps have linear fields X_i = M_i theta, whose brackets are matrix
    commutators; the fast numeric path must agree with sympy's exact brackets level by level."""
    from paramgeo.mirror import lie_algebra

    p = paramgeo.get(name, **sizes)
    exact, fast = lie_algebra(p, method="symbolic"), lie_algebra(p, method="numeric")
    assert fast.method == "numeric (linear fields)"
    assert (fast.dim, fast.levels) == (exact.dim, exact.levels)


def test_nonlinear_fields_keep_the_nested_route():
    from paramgeo.mirror import lie_algebra

    p = paramgeo.get("deep-diagonal", p=2, depth=3)
    assert lie_algebra(p, method="numeric").method == "numeric"


def test_hadamard_l1_gap_falls_like_a_power_of_alpha(sparse):
    """The l1 gap of argmin Q_alpha is C alpha^(2 (1 - rho)), rho the largest off-support
    |t_i| of the scaled dual t = grad R / log(1/alpha) (beta_i = 2 alpha^2 sinh(2 mu_i), so
    |beta_i| ~ alpha^(2 - 2 |t_i|)); not 1 / log(1/alpha), which would fall 1.3x per decade.
    Route 1: the log-log slope of the gap; route 2: rho extrapolated linearly in
    1 / log(1/alpha) to alpha -> 0."""
    X, y = sparse
    par = paramgeo.get("hadamard", p=60)
    b1 = M.min_l1(X, y)
    off = np.abs(b1) < 1e-9
    alphas = 10.0 ** -np.arange(2, 9)
    gaps, rho = [], []
    for a in alphas:
        b, _ = M.solve_implicit_bias(M.mirror_potential(par, par.init_at_scale(a)), X, y)
        gaps.append(np.abs(b).sum() - np.abs(b1).sum())
        rho.append(np.abs(0.5 * np.arcsinh(b / (2 * a * a)) / np.log(1 / a))[off].max())
    slope, _ = np.polyfit(np.log10(alphas), np.log10(gaps), 1)
    assert 0.49 < slope < 0.53  # 3.3x per decade
    local = np.diff(np.log10(gaps)) / np.diff(np.log10(alphas))
    x = 1 / np.log(1 / alphas[-3:])
    rho_star = np.polyval(np.polyfit(x, rho[-3:], 1), 0.0)
    assert abs(2 * (1 - rho_star) - local[-1]) < 0.02


def test_independent_fields_chosen_in_order_by_blocks_as_one_at_a_time():
    from paramgeo.linalg import DEFAULT_POLICY
    from paramgeo.mirror.lie import _select_independent

    rng = np.random.default_rng(0)
    base = rng.standard_normal((5, 40))
    rows = [base[0], 2 * base[0], base[1], base[0] - base[1], base[2], base[3], base[4],
            base[2] + base[4], rng.standard_normal(40)]
    # the reference: one candidate at a time, kept when independent of those kept before
    kept, ref = [], []
    for k, r in enumerate(rows):
        if np.linalg.matrix_rank(np.array(kept + [r]), tol=1e-9) > len(kept):
            kept.append(r)
            ref.append(k)
    assert ref == [0, 2, 4, 5, 6, 8]
    for chunk in (1, 3, 256):
        assert _select_independent(rows, [], DEFAULT_POLICY, chunk=chunk) == ref
    assert _select_independent(rows, [base[0]], DEFAULT_POLICY) == [2, 4, 5, 6, 8]


def test_an_explicit_symbolic_route_too_large_is_refused_before_sympy_starts():
    import time

    from paramgeo.errors import BudgetError
    from paramgeo.mirror import commuting_test

    tic = time.process_time()
    with pytest.raises(BudgetError, match="use --method numeric"):
        commuting_test(paramgeo.get("uvt", m=30, n=30, r=30), method="symbolic")
    assert time.process_time() - tic < 5
