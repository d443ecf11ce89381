"""The push-forward of gradient flow to predictors (metric J J^T), the quotient flow, the
predictor mirror flow and their comparison with gradient flow."""

import dataclasses

import numpy as np

from ..losses.predictor import pullback
from ..results import Result
from ..dynamics.trajectory import _flow, gradient_flow


def predictor_velocity(param, theta, loss):
    """d beta/dt = -J J^T grad ell(beta) at beta = phi(theta): the push-forward of the gradient
    flow (two matrix-free products: the plugin's VJP, then its JVP)."""
    theta = param.as_theta(theta)
    beta = np.asarray(param.forward_flat(theta))
    return -param.jvp(theta, param.vjp(theta, loss.grad(beta)))


@dataclasses.dataclass(frozen=True)
class PredictorPath(Result):
    """A predictor-space trajectory beta(t) (T x m) integrated on its own."""

    method: str
    times: np.ndarray
    predictors: np.ndarray
    n_evals: int


def predictor_flow(param, loss, theta0, t_final, *, metric=None, t_eval=None, n_records=50,
                   method="LSODA", rtol=1e-10, atol=1e-12):
    """Integrate the predictor flow d beta/dt = -M grad ell(beta) from beta_0 = phi(theta_0).

    With ``metric(beta, w)`` (a closed form of M w, e.g. 2 (Q W + W Q) for Q = U U^T and
    symmetric W, or sqrt(4 beta^2 + c^2) w for u * v with the conserved c = u^2 - v^2) the state
    is beta alone: an ODE on predictors that never looks at theta. Without it, M = J J^T at a
    fiber point carried along by the minimum-norm horizontal lift theta' = J^+ beta'
    (``geometry.horizontal_lift``: the pseudo-inverse of a dense J under the rank policy, an
    independent route from the VJP), and the state is (beta, theta): beta is integrated as its
    own variable, so comparing it with phi(theta_gf(t)) from :func:`gradient_flow` tests the
    push-forward identity
    d phi(theta)/dt = J theta' = -J J^T grad ell.
    """
    from scipy.integrate import solve_ivp

    from ..geometry.jacobian import horizontal_lift

    theta0 = param.as_theta(theta0)
    beta0 = np.asarray(param.forward_flat(theta0), float)
    counter = {"n": 0}
    m = param.m
    if metric is not None:
        def rhs(_, beta):
            counter["n"] += 1
            return -np.asarray(metric(beta, loss.grad(beta)), float).ravel()
        y0 = beta0
    else:
        def rhs(_, state):
            counter["n"] += 1
            beta, theta = state[:m], state[m:]
            J = param.jacobian(theta)
            dbeta = -J @ (J.T @ loss.grad(beta))
            return np.concatenate([dbeta, horizontal_lift(param, theta, dbeta)])
        y0 = np.concatenate([beta0, theta0])
    if t_eval is None:
        t_eval = np.linspace(0.0, t_final, n_records)
    sol = solve_ivp(rhs, (0.0, t_final), y0, method=method, t_eval=t_eval, rtol=rtol,
                    atol=atol)
    label = "predictor flow (closed-form metric)" if metric is not None else \
        "predictor flow (J J^T, horizontal lift)"
    return PredictorPath(label, sol.t, sol.y[:m].T, counter["n"])


def quotient_flow(param, loss, theta0, t_final, *, generic=False, method="LSODA", rtol=1e-8,
                  atol=1e-10, n_records=200, t_eval=None, conserved=False):
    """The quotient Riemannian gradient flow, lifted horizontally:
    d theta/dt = -h(grad L(theta)), h = ``geometry.horizontal_projection`` (the plugin's closed
    form, or the generic V V^T route with ``generic=True``).

    On the quotient Theta / G with the quotient metric, the Riemannian gradient of the induced
    loss lifts to the horizontal part of grad L (Absil, Mahony, Sepulchre 2008, Section 3.6.2).
    Since grad L = J^T grad ell is already horizontal, the result equals :func:`gradient_flow`:
    a test of the projection and of the statement (see :func:`compare_flows`)."""
    from ..geometry.jacobian import horizontal_projection

    theta0 = param.as_theta(theta0)
    value, grad = pullback(param, loss)

    def field(theta):
        return horizontal_projection(param, theta, grad(theta), generic=generic)

    return _flow(param, value, grad, field, theta0, t_final, f"quotient flow ({method})",
                 method=method, rtol=rtol, atol=atol, n_records=n_records, log_times=False,
                 stop_loss=None, stop_grad=None, t_eval=t_eval, progress=False,
                 conserved=conserved)


def mirror_flow(param, loss, theta0, t_eval, *, rtol=1e-10, atol=1e-12):
    """The predictor path (T, m) of the mirror flow d/dt grad R(beta) = -grad ell(beta) from
    beta0 = phi(theta0): a shorthand for ``paramgeo.mirror.mirror_flow(
    paramgeo.mirror.mirror_potential(param, theta0), loss, t_eval)`` (the mirror engine owns
    the potential and the integration, including the conjugate-map route of numerical
    potentials; Li, Wang, Lee, Arora 2022). For commuting parameterizations it equals the
    pushed-forward gradient flow (:func:`compare_flows` with ``mirror=True``)."""
    from .. import mirror

    path, _ = mirror.mirror_flow(mirror.mirror_potential(param, theta0), loss,
                                 np.asarray(t_eval, float), rtol=rtol, atol=atol)
    return path


@dataclasses.dataclass(frozen=True)
class FlowComparison(Result):
    """Gradient flow against its push-forward and the quotient flow, on common times.

    Deviations are max_t |a(t) - b(t)| / max_t |b(t)| on predictors; ``vertical_fraction`` is
    max_t |grad L - h(grad L)| / |grad L| along the gradient flow (zero: the gradient is
    horizontal)."""

    times: np.ndarray
    predictor_flow_deviation: float
    quotient_flow_deviation: float
    vertical_fraction: float
    mirror_flow_deviation: float
    notes: str


def compare_flows(param, loss, theta0, t_final, *, metric=None, n_records=40, rtol=1e-10,
                  atol=1e-12, mirror=None):
    """Integrate gradient flow, the predictor flow (:func:`predictor_flow`, with ``metric`` if
    given) and the quotient flow (:func:`quotient_flow`) from theta0, and report how far the
    pushed-forward parameter trajectory phi(theta(t)) is from each. ``mirror`` adds the
    predictor mirror flow: True integrates the one of ``paramgeo.mirror`` (its potential from
    theta0, :func:`mirror_flow`); a callable (times, beta0) -> (T, m) predictor path is
    compared as it is."""
    from ..geometry.jacobian import horizontal_projection

    t_eval = np.linspace(0.0, t_final, n_records)
    gf = gradient_flow(param, loss, theta0, t_final, t_eval=t_eval, rtol=rtol, atol=atol,
                       conserved=False)
    ref = gf.predictors
    scale = max(float(np.max(np.abs(ref))), 1e-300)
    pf = predictor_flow(param, loss, theta0, t_final, metric=metric, t_eval=t_eval, rtol=rtol,
                        atol=atol)
    qf = quotient_flow(param, loss, theta0, t_final, t_eval=t_eval, rtol=rtol, atol=atol)
    vertical = 0.0
    _, grad = pullback(param, loss)
    for theta in gf.thetas:
        g = grad(theta)
        gn = np.linalg.norm(g)
        if gn > 0:
            h = horizontal_projection(param, theta, g, generic=True)
            vertical = max(vertical, float(np.linalg.norm(g - h) / gn))
    mirror_dev, notes = float("nan"), "no mirror flow given"
    if mirror is True:
        def mirror(times, _beta0):
            return mirror_flow(param, loss, theta0, times, rtol=rtol, atol=atol)
    if mirror is not None and mirror is not False:
        path = np.asarray(mirror(t_eval, ref[0]))
        mirror_dev = float(np.max(np.abs(path - ref)) / scale)
        notes = "mirror flow compared"
    return FlowComparison(
        t_eval,
        float(np.max(np.abs(pf.predictors - ref)) / scale),
        float(np.max(np.abs(qf.predictors - ref)) / scale),
        vertical, mirror_dev, notes)
