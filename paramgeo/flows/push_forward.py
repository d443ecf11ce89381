"""The push-forward of gradient flow to predictors (metric J J^T), the quotient flow, the
predictor mirror flow and their comparison with gradient flow."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable, Optional, Union

import numpy as np

from ..losses.predictor import pullback
from ..results import Result
from ..dynamics.trajectory import _flow, gradient_flow

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..losses.predictor import Loss
    from ..contract.parameterization import Parameterization
    from ..dynamics.trajectory import Trajectory


def predictor_velocity(param: Parameterization, theta: ArrayLike,
                       loss: Loss) -> NDArray[np.float64]:
    """d beta/dt = -J J^T grad ell(beta) at beta = phi(theta): the push-forward of the gradient
    flow (two matrix-free products: the plugin's VJP, then its JVP)."""
    theta = param.as_theta(theta)
    beta = np.asarray(param.forward_flat(theta))
    return -param.jvp(theta, param.vjp(theta, loss.grad(beta)))


@dataclasses.dataclass(frozen=True, kw_only=True)
class PredictorPath(Result):
    """A predictor-space trajectory beta(t) (T x m) integrated on its own."""

    method: str
    times: np.ndarray
    predictors: np.ndarray
    n_evals: int


def predictor_flow(
        param: Parameterization, loss: Loss, theta0: ArrayLike, t_final: float, *,
        metric: Optional[Callable[[NDArray[np.float64], NDArray[np.float64]], ArrayLike]] = None,
        t_eval: Optional[ArrayLike] = None, n_records: int = 50, method: str = "LSODA",
        rtol: float = 1e-10, atol: float = 1e-12
) -> PredictorPath:
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
    return PredictorPath(method=label, times=sol.t, predictors=sol.y[:m].T, n_evals=counter["n"])


def quotient_flow(param: Parameterization, loss: Loss, theta0: ArrayLike, t_final: float, *,
                  generic: bool = False, method: str = "LSODA", rtol: float = 1e-8,
                  atol: float = 1e-10, n_records: int = 200, t_eval: Optional[ArrayLike] = None,
                  conserved: bool = False) -> Trajectory:
    """The quotient Riemannian gradient flow, lifted horizontally: theta' = -h(grad L(theta)).

    h is the horizontal projection (:func:`paramgeo.horizontal_projection`: the plugin's closed
    form, or the generic V V^T route with ``generic=True``). On the quotient Theta / G with the
    quotient metric, the Riemannian gradient of the induced loss lifts to the horizontal part of
    grad L (Absil, Mahony, Sepulchre 2008, Section 3.6.2). Since grad L = J^T grad ell is
    already horizontal, the result equals :func:`gradient_flow`: a test of the projection and of
    the statement (see :func:`compare_flows`).

    Args:
        param: a parameterization with a declared symmetry group.
        loss: the loss ell on predictors.
        theta0: the initialisation, shape (n,).
        t_final: the final time.
        generic: project with the dense generator basis (the test oracle).
        method: a ``solve_ivp`` method.
        rtol: the integrator's relative tolerance.
        atol: its absolute tolerance.
        n_records: records at this many times.
        t_eval: record at these times instead.
        conserved: record the conserved quantities.

    Returns:
        The :class:`paramgeo.dynamics.trajectory.Trajectory`.

    Raises:
        ParamgeoError: bad integrator options.
        ShapeError: theta0 is not n finite numbers.

    Examples:
        >>> import numpy as np, paramgeo
        >>> from paramgeo.flows import gradient_flow, quotient_flow
        >>> from paramgeo.losses.predictor import LinearMeasurements
        >>> p, loss = paramgeo.get("hadamard", p=2), LinearMeasurements(np.eye(2), [1.0, 2.0])
        >>> q = quotient_flow(p, loss, np.ones(4), 5.0)
        >>> bool(np.allclose(q.thetas, gradient_flow(p, loss, np.ones(4), 5.0).thetas))
        True
    """
    from ..geometry.jacobian import horizontal_projection

    theta0 = param.as_theta(theta0)
    value, grad = pullback(param, loss)

    def field(theta):
        return horizontal_projection(param, theta, grad(theta), generic=generic)

    return _flow(param, value, grad, field, theta0, t_final, f"quotient flow ({method})",
                 method=method, rtol=rtol, atol=atol, n_records=n_records, log_times=False,
                 stop_loss=None, stop_grad=None, t_eval=t_eval, progress=False,
                 conserved=conserved)


def mirror_flow(param: Parameterization, loss: Loss, theta0: ArrayLike, t_eval: ArrayLike, *,
                rtol: float = 1e-10, atol: float = 1e-12) -> NDArray[np.float64]:
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


@dataclasses.dataclass(frozen=True, kw_only=True)
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


def compare_flows(
        param: Parameterization, loss: Loss, theta0: ArrayLike, t_final: float, *,
        metric: Optional[Callable[[NDArray[np.float64], NDArray[np.float64]], ArrayLike]] = None,
        n_records: int = 40, rtol: float = 1e-10, atol: float = 1e-12,
        mirror: Union[bool, Callable[[NDArray[np.float64], NDArray[np.float64]], ArrayLike],
                      None] = None
) -> FlowComparison:
    """Three routes to the same predictor path, against phi(theta(t)) of gradient flow.

    Gradient flow theta' = -J^T grad ell pushes forward to beta' = -J J^T grad ell (the
    predictor flow, :func:`predictor_flow`) and equals the quotient flow lifted horizontally
    (:func:`quotient_flow`); for a commuting phi it is also the mirror flow of R (Li et al.
    2022). Each deviation is max_t |beta_route(t) - phi(theta(t))| over max |phi|.

    Args:
        param: the parameterization phi: R^n -> R^m.
        loss: the loss ell on predictors.
        theta0: the initialisation, shape (n,).
        t_final: the final time.
        metric: a closed form metric(beta, w) of J J^T w on predictors, for the predictor flow.
        n_records: records of every route.
        rtol: the integrators' relative tolerance.
        atol: their absolute tolerance.
        mirror: True adds the mirror flow of :func:`paramgeo.mirror.mirror_potential`; a
            callable (times, beta0) -> (T, m) path is compared as it is.

    Returns:
        The :class:`FlowComparison` of the deviations (and the vertical fraction of grad L).

    Raises:
        ParamgeoError: an integrator fails, or bad integrator options.
        NotCommutingError: ``mirror=True`` for a non-commuting phi.

    Examples:
        >>> import numpy as np, paramgeo
        >>> from paramgeo.flows import compare_flows
        >>> from paramgeo.losses.predictor import LinearMeasurements
        >>> p = paramgeo.get("hadamard", p=2)
        >>> c = compare_flows(p, LinearMeasurements(np.eye(2), [1.0, 2.0]), np.ones(4), 5.0)
        >>> bool(c.predictor_flow_deviation < 1e-8), bool(c.quotient_flow_deviation < 1e-8)
        (True, True)
    """
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
        times=t_eval, predictor_flow_deviation=float(np.max(np.abs(pf.predictors - ref)) / scale),
        quotient_flow_deviation=float(np.max(np.abs(qf.predictors - ref)) / scale),
        vertical_fraction=vertical, mirror_flow_deviation=mirror_dev, notes=notes)
