"""The LLC estimator: a Gaussian posterior known in closed form, seeds, the effective sample
size, diagnostics, a user model, the regression loss, the CLI, the sweep query and check.

Covers: ``paramgeo.cli``, ``paramgeo.llc.estimate``, ``paramgeo.llc.exact``,
``paramgeo.llc.steps``, ``paramgeo.losses.data``, ``paramgeo.losses.predictor``,
``paramgeo.reports.contract_check``, ``paramgeo.sweeps.queries``, ``paramgeo_plugins.deep_linear``,
``paramgeo_plugins.hadamard``, ``paramgeo_plugins.uvt``.
"""

import contextlib
import json
import math
import re
import warnings

import autograd.numpy as anp
import numpy as np
import pytest
from click.testing import CliRunner

import paramgeo
from paramgeo import Parameterization, ParamSpec, Size
from paramgeo.cli import main
from paramgeo.errors import ParamgeoError
from paramgeo.llc import LLCWarning, estimate_llc, step_sweep
from paramgeo.llc.estimate import effective_sample_size, slope_weights
from paramgeo.losses.data import loss_from_arrays
from paramgeo.losses import LinearMeasurements, Regression


@contextlib.contextmanager
def short_chains(match=None):
    """Chains kept short for speed provoke LLCWarnings on purpose (R-hat, drift, a localization-
    or mixing-bound estimate): assert that they come, and that one says ``match``."""
    with pytest.warns(LLCWarning) as record:
        yield record
    said = [str(w.message) for w in record if issubclass(w.category, LLCWarning)]
    assert match is None or any(re.search(match, s) for s in said), said


class Identity(Parameterization):
    """A user model: phi(theta) = theta (regular everywhere, lambda = p / 2)."""

    name = "test-identity"
    size_params = {"p": Size("int", default=3, minimum=1)}

    def make_spec(self):
        return ParamSpec(w=(self.p,))

    def make_predictor_shape(self):
        return (self.p,)

    def forward(self, theta):
        return theta * anp.ones(self.p)


def _gaussian_case(seed=0, N=50, p=3):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((N, p))
    y = rng.standard_normal(N)
    w_star = np.linalg.lstsq(A, y, rcond=None)[0]
    return Identity(p=p), LinearMeasurements(A, y), w_star, A.T @ A / N


def _gaussian_mean_loss(H, nbeta, gamma):
    """E[L - L*] under the Gaussian localized posterior of precision n beta H + gamma I."""
    return 0.5 * np.trace(H @ np.linalg.inv(nbeta * H + gamma * np.eye(len(H))))


def _rrr_case(rng, n):
    """Reduced-rank regression (M, H, N) = (3, 2, 2) with true map 0: the deep-linear plugin,
    the regression loss on n samples and its rank-2 least-squares minimiser w*."""
    X, Y = rng.standard_normal((n, 3)), rng.standard_normal((n, 2))
    param, loss = paramgeo.get("deep-linear", widths=(3, 2, 2)), Regression(X, Y)
    W1, W2 = loss.reduced_rank_minimiser(2)
    return param, loss, np.concatenate([W1.ravel(), W2.ravel()])


def test_gaussian_posterior_in_closed_form():
    # L(w) - L(w*) = (w - w*)^T H (w - w*) / 2: the localized posterior is Gaussian with
    # precision n beta H + gamma I, so E[n beta (L - L*)] = (n beta / 2) tr(H (n beta H +
    # gamma I)^-1) exactly; MALA samples it without step bias
    param, loss, w_star, H = _gaussian_case()
    nbeta, gamma = 200.0, 5.0
    exact = nbeta * _gaussian_mean_loss(H, nbeta, gamma)
    est = estimate_llc(param, loss, w_star, nbeta=nbeta, gamma=gamma, sampler="mala",
                       chains=2, draws=800, burn=200, seed=1, temperatures=(1,))
    assert abs(est.llc - exact) < 3 * est.se and est.se < 0.1 * exact
    sgld = estimate_llc(param, loss, w_star, nbeta=nbeta, gamma=gamma, sampler="sgld",
                        chains=2, draws=800, burn=200, seed=1, temperatures=(1,))
    assert abs(sgld.llc - exact) < 3 * sgld.se + 0.05 * exact  # step bias O(step_scale)
    # the slope over n beta / 2 and 2 n beta: (y_1 - y_2) / (x_1 - x_2), y = E[L - L*],
    # x = 1 / (n beta_k), from the closed form (gamma makes it differ from p / 2 = 1.5)
    y1, y2 = (_gaussian_mean_loss(H, t * nbeta, gamma) for t in (0.5, 2.0))
    slope = (y1 - y2) / (1 / (0.5 * nbeta) - 1 / (2 * nbeta))
    est = estimate_llc(param, loss, w_star, nbeta=nbeta, gamma=gamma, chains=2, draws=800,
                       burn=200, seed=1)
    assert est.temperatures == (0.5, 2.0) and abs(slope - 1.5) > 0.05
    assert abs(est.llc - slope) < 3 * est.se and est.se < 0.15 * slope
    for level, t in zip(est.levels, (0.5, 2.0)):
        exact = t * nbeta * _gaussian_mean_loss(H, t * nbeta, gamma)
        assert level["nbeta"] == t * nbeta and abs(level["llc"] - exact) < 3 * level["se"]


def test_data_set_error_against_the_gaussian_closed_form():
    # the infinitesimal jackknife of the slope from posterior draws against its closed form:
    # for L - L* = (w - w*)^T H (w - w*) / 2 the slope is sum_k c_k n beta_k tr(H P_k^-1) / 2,
    # P_k = n beta_k H + gamma I, whose derivative in H is sum_k c_k n beta_k gamma P_k^-2 / 2
    # and H = (1/N) sum_i omega_i a_i a_i^T: psi_i = a_i^T G a_i / N; the draws are exact
    # (i.i.d. from the Gaussian posteriors), so only the covariance identity is tested
    from paramgeo.llc.estimate import data_set_se

    param, loss, w_star, H = _gaussian_case(seed=1, N=40, p=2)
    gamma, nbs = 2.0, [5.0, 20.0]
    c = slope_weights(nbs)
    G = sum(ck * nb * gamma * np.linalg.matrix_power(np.linalg.inv(nb * H + gamma * np.eye(2)),
                                                      2) / 2 for ck, nb in zip(c, nbs))
    psi = np.einsum("ij,jk,ik->i", loss.A, G, loss.A) / loss.N
    exact = math.sqrt(np.sum((psi - psi.mean()) ** 2))
    rng = np.random.default_rng(0)
    states, losses = np.empty((2, 2, 25000, 2)), np.empty((2, 2, 25000))
    for k, nb in enumerate(nbs):
        cov = np.linalg.inv(nb * H + gamma * np.eye(2))
        states[k] = w_star + rng.multivariate_normal(np.zeros(2), cov, size=(2, 25000))
        d = states[k] - w_star
        losses[k] = loss.value(w_star) + 0.5 * np.einsum("cdi,ij,cdj->cd", d, H, d)
    f_star = loss.sample_features(w_star[None])[0]
    assert data_set_se(param, loss, states, losses, nbs, c, f_star) == pytest.approx(exact,
                                                                                     rel=0.1)


def test_error_bars_say_what_they_cover():
    from paramgeo.losses import Logistic

    rng = np.random.default_rng(1)
    param, loss, theta = _rrr_case(rng, 500)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LLCWarning)
        est = estimate_llc(param, loss, theta, draws=300, burn=300, seed=0)
    assert est.chains == 32 and est.se_data >= 0  # batched: 32 chains by default
    assert est.gamma_check == 4 * est.gamma and est.se_bias == abs(est.llc - est.llc_check)
    assert est.se_total == pytest.approx(math.sqrt(est.se ** 2 + est.se_data ** 2
                                                   + est.se_bias ** 2))
    assert "of the data set" in str(est) and est.to_dict()["se_data"] == est.se_data
    assert "bias check" in str(est) and est.to_dict()["se_bias"] == est.se_bias
    A, y = rng.standard_normal((60, 3)), np.sign(rng.standard_normal(60))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LLCWarning)
        est = estimate_llc(Identity(p=3), Logistic(A, y), np.zeros(3), n=60, draws=100,
                           burn=50, seed=0)
    assert est.chains == 4 and math.isnan(est.se_data)
    assert est.se_total == pytest.approx(math.hypot(est.se, est.se_bias))
    assert "no data-set part" in str(est)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LLCWarning)
        est = estimate_llc(Identity(p=3), Logistic(A, y), np.zeros(3), n=60, draws=100,
                           burn=50, seed=0, bias_check=False)
    assert math.isnan(est.se_bias) and math.isnan(est.llc_check) and est.se_total == est.se
    assert "bias check" not in str(est)


def test_slope_weights_are_the_least_squares_slope():
    nbetas = np.array([100.0, 250.0, 900.0])
    lams = np.array([3.1, 2.7, 2.2])
    slope = np.polyfit(1 / nbetas, lams / nbetas, 1)[0]
    assert float(np.dot(slope_weights(nbetas), lams)) == pytest.approx(slope, rel=1e-10)
    assert slope_weights([7.0]) == (1.0,)


def test_singular_posterior_by_quadrature():
    # hadamard p = 1 on one noiseless measurement direction: L = c (u v)^2 / 2, c = mean a^2,
    # a singular model (lambda = 1/2, m = 2 at 0). Integrating v in closed form,
    # E[(u v)^2] = int e^{-g u^2/2} (b u^2 + g)^{-1/2} u^2 / (b u^2 + g) du / int e^{-g u^2/2}
    # (b u^2 + g)^{-1/2} du with b = n beta c: the localized posterior's exact means
    from scipy.integrate import quad

    rng = np.random.default_rng(3)
    A = rng.standard_normal((30, 1))
    c = float(np.mean(A[:, 0] ** 2))
    param, loss = paramgeo.get("hadamard", p=1), LinearMeasurements(A, np.zeros(30))
    nbeta, gamma = 400.0, 4.0  # gamma = 1 gives long arms along u = 0 and v = 0: slow mixing

    def mean_loss(nb, g=gamma):
        b = nb * c
        w = lambda u: math.exp(-g * u * u / 2) / math.sqrt(b * u * u + g)  # noqa: E731
        opts = dict(limit=400, epsabs=0, epsrel=1e-10)
        num = quad(lambda u: w(u) * u * u / (b * u * u + g), 0, np.inf, **opts)[0]
        return 0.5 * c * num / quad(w, 0, np.inf, **opts)[0]

    def slope(g):
        return (mean_loss(nbeta / 2, g) - mean_loss(2 * nbeta, g)) / (2 / nbeta - 0.5 / nbeta)

    est = estimate_llc(param, loss, np.zeros(2), nbeta=nbeta, gamma=gamma, chains=8,
                       draws=1500, burn=500, seed=0)
    for level in est.levels:
        exact = level["nbeta"] * mean_loss(level["nbeta"])
        assert abs(level["llc"] - exact) < 4 * level["se"] < exact, (level, exact)
    assert slope(gamma) < 0.45  # far below lambda = 1/2 at this n beta
    assert abs(est.llc - slope(gamma)) < 4 * est.se and est.se < 0.1 * slope(gamma)
    # the bias check: the same chains at 4 gamma against the exact slope there
    assert est.gamma_check == 4 * gamma
    assert abs(est.llc_check - slope(4 * gamma)) < 4 * est.se + 0.01
    # the stronger localization moves the estimate further from lambda; with m = 2 the bias
    # decays like 1 / log(n beta), and the change (0.15) is smaller than the bias (0.23)
    assert slope(4 * gamma) < slope(gamma) < 0.5
    assert 0.5 * abs(slope(gamma) - 0.5) < abs(slope(gamma) - slope(4 * gamma))


def test_the_estimate_depends_on_n_beta_over_gamma_squared():
    # K = c (u v)^2 / 2 is homogeneous of degree 4: w = z / sqrt(gamma) maps the posterior at
    # (b, gamma) to the one at (b / gamma^2, 1), so b E_{b, gamma}[K] (and the slope) depends
    # on b / gamma^2 alone (module docstring of paramgeo.llc.estimate); by quadrature
    from scipy.integrate import quad

    def b_mean(b, g):  # b E[(u v)^2 / 2] under exp(-b (u v)^2 / 2 - g (u^2 + v^2) / 2)
        w = lambda u: math.exp(-g * u * u / 2) / math.sqrt(b * u * u + g)  # noqa: E731
        opts = dict(limit=400, epsabs=0, epsrel=1e-11)
        num = quad(lambda u: w(u) * u * u / (b * u * u + g), 0, np.inf, **opts)[0]
        return 0.5 * b * num / quad(w, 0, np.inf, **opts)[0]

    for b, g in ((50.0, 0.5), (400.0, 4.0), (1e4, 0.1)):
        assert b_mean(b, g) == pytest.approx(b_mean(b / g ** 2, 1.0), rel=1e-7)
    assert abs(b_mean(400.0, 4.0) - b_mean(400.0, 1.0)) > 0.05  # gamma does matter


def test_seeds_repeat_and_differ():
    param, loss, w_star, _ = _gaussian_case()
    with short_chains("chains disagree"):
        a = estimate_llc(param, loss, w_star, chains=2, draws=100, burn=10, seed=3)
        b = estimate_llc(param, loss, w_star, chains=2, draws=100, burn=10, seed=3)
        c = estimate_llc(param, loss, w_star, chains=2, draws=100, burn=10, seed=4)
    assert np.array_equal(a.traces, b.traces) and a.llc == b.llc
    assert a.llc != c.llc
    assert a.traces.shape == (2, 2, 110) and a.n == 50
    assert a.nbeta == pytest.approx(50 / math.log(50))


def test_effective_sample_size_of_known_chains():
    rng = np.random.default_rng(0)
    iid = rng.standard_normal((4, 4000))
    ess, rhat = effective_sample_size(iid)
    assert 0.85 * 16000 < ess < 1.15 * 16000 and abs(rhat - 1) < 0.01
    rho = 0.9  # AR(1): ESS = m n (1 - rho) / (1 + rho)
    x = np.zeros((4, 20000))
    for t in range(1, x.shape[1]):
        x[:, t] = rho * x[:, t - 1] + rng.standard_normal(4)
    ess, _ = effective_sample_size(x)
    expected = 80000 * (1 - rho) / (1 + rho)
    assert 0.75 * expected < ess < 1.25 * expected
    shifted = iid + np.array([[0.0], [0.0], [0.0], [3.0]])  # one chain elsewhere
    assert effective_sample_size(shifted)[1] > 1.1


def test_blow_up_drift_and_bad_settings_are_reported():
    param, loss, w_star, _ = _gaussian_case()
    with pytest.raises(ParamgeoError, match="every chain blew up"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LLCWarning)
            estimate_llc(param, loss, w_star, step=10.0, chains=2, draws=400, burn=0,
                         sampler="sgld")
    with short_chains("not a local minimum"):
        est = estimate_llc(param, loss, w_star + 1.0, chains=2, draws=200, burn=0)
    assert min(level["llc"] for level in est.levels) < 0 and est.warnings
    with short_chains(r"MALA accepted under 20% of proposals in 4 of 4"):
        estimate_llc(param, loss, w_star, step=2.0, chains=4, draws=100, burn=0,
                     bias_check=False)  # no burn-in: the step cannot adapt
    for bad in (dict(chains=0), dict(draws=2), dict(gamma=-1.0), dict(step=0.0),
                dict(sampler="hmc"), dict(nbeta=float("nan")), dict(temperatures=()),
                dict(temperatures=(1.0, 1.0)), dict(temperatures=(0.5, -2.0)),
                dict(bias_check="yes"), dict(burn=-1)):
        with pytest.raises(ParamgeoError):
            estimate_llc(param, loss, w_star, **bad)


def test_regression_loss_against_the_samples_and_autograd():
    rng = np.random.default_rng(2)
    X, Y = rng.standard_normal((40, 3)), rng.standard_normal((40, 2))
    loss = Regression(X, Y)
    B = rng.standard_normal((2, 3))
    assert loss.value(B.ravel()) == pytest.approx(0.5 * np.sum((Y - X @ B.T) ** 2) / 40)
    from paramgeo.losses import Loss

    assert np.allclose(loss.grad(B.ravel()), Loss.grad(loss, B.ravel()))
    assert np.allclose(loss.hessian(B.ravel()), Loss.hessian(loss, B.ravel()))
    param = paramgeo.get("uvt", m=2, n=3, r=1)
    assert loss_from_arrays("linear-map", {"X": X, "Y": Y}, param).N == 40
    from paramgeo.losses import pullback, value_and_grad

    theta = rng.standard_normal(param.n)
    value, grad = pullback(param, loss)
    both = value_and_grad(param, loss)(theta)
    assert both[0] == value(theta) and np.array_equal(both[1], grad(theta))
    with pytest.raises(paramgeo.ShapeError, match="2 x 3 predictors"):
        loss_from_arrays("linear-map", {"X": X, "Y": Y}, paramgeo.get("uvt", m=3, n=3, r=1))
    with pytest.raises(paramgeo.ShapeError, match="no array 'Y'"):
        loss_from_arrays("linear-map", {"X": X}, param)


def _without_batch(param):
    """The same parameterization without the batched_vjp capability (the row-by-row route)."""
    cls = type(param)
    plain = type("NoBatch", (cls,), {"capabilities": cls.capabilities - {"batched_vjp"}})
    return plain(**param.sizes)


@pytest.mark.parametrize("name, sizes", [("deep-linear", dict(widths=(3, 2, 4, 2))),
                                         ("uvt", dict(m=2, n=3, r=2)),
                                         ("lora", dict(m=2, n=3, r=1))])
def test_batched_losses_and_gradients_match_the_rows(name, sizes):
    # one batched pass (batched_vjp, value_grad_batch) against value_and_grad row by row, and
    # against the finite differences of the loss
    from paramgeo.losses import Loss, batched_value_and_grad, value_and_grad

    rng = np.random.default_rng(7)
    param = paramgeo.get(name, **sizes)
    out, inp = param.predictor_shape
    X, Y = rng.standard_normal((30, inp)), rng.standard_normal((30, out))
    thetas = rng.standard_normal((5, param.n))
    for loss in (Regression(X, Y), LinearMeasurements(rng.standard_normal((20, param.m)),
                                                      rng.standard_normal(20))):
        betas = rng.standard_normal((4, param.m))
        values, grads = loss.value_grad_batch(betas)
        base_v, base_g = Loss.value_grad_batch(loss, betas)  # the generic loop
        assert np.allclose(values, base_v, rtol=1e-12) and np.allclose(grads, base_g)
        assert param.provides("batched_vjp")
        values, grads = batched_value_and_grad(param, loss)(thetas)
        single = value_and_grad(param, loss)
        for theta, v, g in zip(thetas, values, grads):
            v0, g0 = single(theta)
            assert v == pytest.approx(v0, rel=1e-12) and np.allclose(g, g0, rtol=1e-10)
        e, h = np.eye(param.n)[0], 1e-6
        fd = (single(thetas[0] + h * e)[0] - single(thetas[0] - h * e)[0]) / (2 * h)
        assert grads[0, 0] == pytest.approx(fd, rel=1e-6, abs=1e-8)
        plain = _without_batch(param)
        rows_v, rows_g = batched_value_and_grad(plain, loss)(thetas)  # the per-row route
        assert np.allclose(rows_v, values, rtol=1e-12) and np.allclose(rows_g, grads)


def test_per_sample_features_give_each_sample_its_loss():
    # ell_i(beta) = c_i + <Phi_i, f(beta)>: the pairing of f(beta) with every Phi_i is each
    # sample's own loss less its constant, from the samples themselves
    rng = np.random.default_rng(8)
    X, Y = rng.standard_normal((25, 3)), rng.standard_normal((25, 2))
    A, y = rng.standard_normal((25, 4)), rng.standard_normal(25)
    B, b = rng.standard_normal((2, 3)), rng.standard_normal(4)
    for loss, beta, per, const in (
            (Regression(X, Y), B.ravel(), 0.5 * np.sum((Y - X @ B.T) ** 2, axis=1),
             0.5 * np.sum(Y ** 2, axis=1)),
            (LinearMeasurements(A, y), b, 0.5 * (A @ b - y) ** 2, 0.5 * y ** 2)):
        f = loss.sample_features(beta[None])
        assert f.shape[0] == 1
        assert np.allclose(loss.sample_pairing(f[0]) + const, per, rtol=1e-12, atol=1e-12)
    assert LinearMeasurements(np.ones((3, 65)), np.ones(3)).sample_features(np.ones((1, 65))) \
        is None  # m + m^2 features only up to FEATURE_LIMIT


def test_batched_and_row_by_row_chains_agree():
    # the estimator's chains through the batched route and through the per-chain route are
    # the same Markov chains (the same draws), up to rounding
    param, loss, theta = _rrr_case(np.random.default_rng(4), 300)
    options = dict(chains=3, draws=60, burn=40, seed=2, step=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LLCWarning)
        fast = estimate_llc(param, loss, theta, **options)
        slow = estimate_llc(_without_batch(param), loss, theta, **options)
    assert np.allclose(fast.traces, slow.traces, rtol=1e-8, atol=1e-10)
    assert fast.llc == pytest.approx(slow.llc, rel=1e-8)


def test_regular_uvt_point_gives_half_the_local_dimension():
    # a true matrix of full rank H: regular, lambda = H (M + N - H) / 2 = 3 for M = N = 2, H = 1
    rng = np.random.default_rng(5)
    n = 20000
    X = rng.standard_normal((n, 2))
    B0 = np.array([[2.0, 1.0], [-1.0, 3.0]])
    u, s, vt = np.linalg.svd(B0)
    B0 = s[0] * np.outer(u[:, 0], vt[0])
    Y = X @ B0.T + rng.standard_normal((n, 2))
    param = paramgeo.get("uvt", m=2, n=2, r=1)
    loss = Regression(X, Y)
    theta = np.concatenate([u[:, 0] * np.sqrt(s[0]), vt[0] * np.sqrt(s[0])])
    from scipy.optimize import minimize

    from paramgeo.losses import pullback

    value, grad = pullback(param, loss)
    theta = minimize(value, theta, jac=grad, method="BFGS", options={"gtol": 1e-12}).x
    est = estimate_llc(param, loss, theta, sampler="mala", chains=2, draws=600, burn=200)
    assert abs(est.llc - 1.5) < max(3 * est.se, 0.05 * 1.5)  # d = rank J = 3: lambda = 3/2


def test_step_sweep_and_plots(tmp_path):
    param, loss, w_star, _ = _gaussian_case()
    sweep = step_sweep(param, loss, w_star, chains=1, draws=40, burn=10)
    assert len(sweep.estimates) == 5 and sweep.steps[0] < sweep.steps[-1]
    assert "R-hat" in str(sweep)
    sweep.plot(tmp_path / "sweep.png")
    sweep.estimates[0].plot(tmp_path / "trace.png")
    assert (tmp_path / "sweep.png").stat().st_size > 0 and (tmp_path / "trace.png").exists()
    json.dumps(sweep.to_dict())


def _rrr_file(tmp_path, n=400):
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((n, 3)), rng.standard_normal((n, 2))
    path = tmp_path / "rrr.npz"
    np.savez(path, X=X, Y=Y, theta_star=np.zeros(2 * 2 + 3 * 2))  # deep-linear 3,2,2
    return path


def test_cli_exact_and_estimate(tmp_path):
    runner = CliRunner()
    out = runner.invoke(main, ["llc", "exact", "uvt", "-p", "m=5", "-p", "n=5", "-p", "r=3",
                               "--truth-zero", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["lam_exact"] == "13/2"
    path = _rrr_file(tmp_path)
    out = runner.invoke(main, ["llc", "estimate", "deep-linear", "-p", "widths=3,2,2",
                               "--data", str(path), "--steps", "100", "--burn", "20",
                               "--chains", "2", "--truth-zero", "--json"])
    assert out.exit_code == 0, out.output
    assert "Warning: LLC estimator: " in out.stderr  # 2 chains of 100 steps, on purpose
    data = json.loads(out.stdout)
    assert data["exact"]["lam_exact"] == "2" and data["chains"] == 2
    assert "traces" not in data
    assert [lv["temperature"] for lv in data["levels"]] == [0.5, 2.0]
    assert data["gamma_check"] == 4.0
    assert data["se_bias"] == abs(data["llc"] - data["llc_check"])
    out = runner.invoke(main, ["llc", "estimate", "deep-linear", "-p", "widths=3,2,2",
                               "--data", str(path), "--steps", "100", "--burn", "20",
                               "--chains", "2", "--no-bias-check", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["se_bias"] == "nan" and data["llc_check"] == "nan"  # JSON has no NaN
    assert data["se_total"] == pytest.approx(math.hypot(data["se"], data["se_data"]))
    out = runner.invoke(main, ["llc", "estimate", "deep-linear", "-p", "widths=3,2,2",
                               "--data", str(path), "--steps", "20", "--burn", "0",
                               "--chains", "1", "--temperatures", "1", "--json"])
    assert out.exit_code == 0 and len(json.loads(out.stdout)["levels"]) == 1, out.output
    out = runner.invoke(main, ["llc", "estimate", "deep-linear", "-p", "widths=3,2,2",
                               "--data", str(path), "--temperatures", "0.5,x"])
    assert out.exit_code == 2 and "--temperatures" in out.output
    assert "Traceback" not in out.output
    out = runner.invoke(main, ["llc", "estimate", "deep-linear", "-p", "widths=3,2,2",
                               "--data", str(path), "--steps", "50", "--burn", "0",
                               "--chains", "1", "--truth-zero", "--plot",
                               str(tmp_path / "t.png")])
    assert out.exit_code == 0, out.output
    assert "exact at the truth: lambda = 2" in out.output
    np.savez(tmp_path / "bad.npz", X=np.ones((5, 3)), Y=np.ones((5, 2)))
    out = runner.invoke(main, ["llc", "estimate", "deep-linear", "-p", "widths=3,2,2",
                               "--data", str(tmp_path / "bad.npz")])
    assert out.exit_code == 2 and out.output.startswith("Error:") and "theta_star" in out.output
    assert "--minimum" in out.output
    assert "Traceback" not in out.output


def test_sweep_query_runs_the_estimator(tmp_path):
    from paramgeo.sweeps.queries import get_query

    query = get_query("llc")
    path = _rrr_file(tmp_path)
    with short_chains():  # one chain of 50 steps
        out = query.run(paramgeo.get("deep-linear", widths=(3, 2, 2)),
                        **dict({k: o.default for k, o in query.options.items()}, data=str(path),
                               steps=50, burn=0, chains=1, truth_zero=True))
        assert out["exact"] == 2.0 and math.isfinite(out["llc"])  # Aoyagi-Watanabe (3, 2, 2)
        assert query.options["bias_check"].default is True and math.isfinite(out["se_bias"])
        out = query.run(paramgeo.get("deep-linear", widths=(3, 2, 2)),
                        **dict({k: o.default for k, o in query.options.items()}, data=str(path),
                               steps=50, burn=0, chains=1, bias_check=False))
    assert out["se_bias"] == "nan"


def test_check_compares_the_declared_coefficient():
    from paramgeo.reports.contract_check import check

    report = check(paramgeo.get("uvt", m=2, n=1, r=1), n_points=1)
    item = next(i for i in report.items if i.property == "learning-coefficient")
    assert item.passed and "declared lambda" in item.note

    class Wrong(paramgeo.contract.registry.get_class("hadamard")):
        name = "test-wrong-lc"

        def learning_coefficient(self, theta):
            from paramgeo.llc import LearningCoefficient

            return LearningCoefficient(lam=10.0, multiplicity=1, exact="10", case="wrong",
                                       formula="wrong", reference="none")

    report = check(Wrong(p=1), n_points=1)
    item = next(i for i in report.items if i.property == "learning-coefficient")
    assert not item.passed and "test-wrong-lc" in item.hint


def test_check_tests_a_declared_batched_vjp():
    from paramgeo.reports.contract_check import check

    item = next(i for i in check(paramgeo.get("deep-linear", widths=(2, 3, 2)), n_points=1).items
                if i.property == "batched-vjp")
    assert item.passed and item.error < 1e-12

    class Wrong(paramgeo.contract.registry.get_class("uvt")):
        name = "test-wrong-batch"

        def batched_vjp(self, thetas):  # the VJP of U V^T without its V half
            phis, vjp = super().batched_vjp(thetas)
            return phis, lambda G: vjp(G) * (np.arange(self.n) < self.rows * self.r)

    item = next(i for i in check(Wrong(m=2, n=2, r=1), n_points=1).items
                if i.property == "batched-vjp")
    assert not item.passed and "batched_vjp" in item.hint


def test_an_interrupted_estimate_uses_the_draws_made():
    # all chains advance together: Ctrl-C after the burn-in keeps every chain's draws so far
    param, loss, w_star, _ = _gaussian_case()
    options = dict(chains=3, draws=190, burn=10, seed=3, temperatures=(0.5, 2),
                   bias_check=False)
    calls = []

    def interrupt(done, total):  # 6 rows: progress every 33 steps (198 chain steps)
        calls.append((done, total))
        if done >= 6 * 66:
            raise KeyboardInterrupt

    def too_early(done, total):  # Ctrl-C in the burn-in: nothing to estimate from
        raise KeyboardInterrupt

    with short_chains("chains disagree"):
        full = estimate_llc(param, loss, w_star, **options)
    assert full.draws == 190 and full.traces.shape == (2, 3, 200)
    with short_chains(), pytest.warns(UserWarning, match="interrupted"):
        part = estimate_llc(param, loss, w_star, progress=interrupt, **options)
    assert calls == [(6 * 33, 6 * 200), (6 * 66, 6 * 200)]
    assert part.interrupted and not full.interrupted and part.chains == 3 and part.draws == 56
    assert np.array_equal(part.traces, full.traces[:, :, :66])  # the same run, cut short
    post = full.traces[:, :, 10:66]
    weights = slope_weights([lv["nbeta"] for lv in full.levels])
    assert part.llc == pytest.approx(sum(w * p.mean() for w, p in zip(weights, post)))
    with pytest.raises(KeyboardInterrupt), short_chains():
        estimate_llc(param, loss, w_star, progress=too_early, **{**options, "burn": 100})
