"""Gradient flow and gradient descent through any parameterization.

For a loss ell on predictors and L(theta) = ell(phi(theta)):

* gradient flow        d theta / dt = -grad L(theta) = -J(theta)^T grad ell(phi(theta)),
  integrated with ``scipy.integrate.solve_ivp``;
* gradient descent     theta_{t+1} = theta_t - eta_t J(theta_t)^T grad ell(phi(theta_t)).

The gradient is always the chain rule through the plugin's VJP (``paramgeo.losses.pullback``),
never a dense Jacobian. Both return a :class:`Trajectory`.

Default integrator: LSODA. Small initialisations (theta_0 of scale alpha -> 0) make these
problems stiff in the practical sense: long plateaus where the vector field is O(alpha) followed
by fast transitions, and near a minimum the Jacobian of the vector field, -Hess L, has
eigenvalues spread over many orders of magnitude. LSODA switches automatically between a
non-stiff Adams method on plateaus and a stiff BDF method where stiffness appears, so it needs
no user tuning; pass ``method="RK45"``/``"DOP853"`` (explicit) or ``"BDF"``/``"Radau"`` (implicit)
to force one.
"""

import dataclasses

import numpy as np
from scipy.integrate import solve_ivp

from .errors import ParamgeoError
from .losses import pullback
from .results import Result


@dataclasses.dataclass(frozen=True)
class Trajectory(Result):
    """A recorded run: times, parameters (T x n), predictors (T x m), loss and |grad L|."""

    method: str
    times: np.ndarray
    thetas: np.ndarray
    predictors: np.ndarray
    losses: np.ndarray
    grad_norms: np.ndarray
    success: bool
    message: str
    n_evals: int

    @property
    def final_theta(self):
        return self.thetas[-1]

    @property
    def final_predictor(self):
        return self.predictors[-1]

    def __str__(self):
        return (
            f"Trajectory ({self.method}): {len(self.times)} records to t = {self.times[-1]:.4g}; "
            f"loss {self.losses[0]:.4g} -> {self.losses[-1]:.4g}; |grad L| final "
            f"{self.grad_norms[-1]:.3g}; {self.n_evals} gradient evaluations; {self.message}"
        )


def _record(param, loss_value, loss_grad, thetas):
    predictors = np.array([np.asarray(param.forward_flat(t)) for t in thetas])
    losses = np.array([loss_value(t) for t in thetas])
    grad_norms = np.array([np.linalg.norm(loss_grad(t)) for t in thetas])
    return predictors, losses, grad_norms


def gradient_flow(param, loss, theta0, t_final, *, method="LSODA", rtol=1e-8, atol=1e-10,
                  n_records=200, log_times=False, stop_loss=None):
    """Integrate d theta/dt = -J^T grad ell(phi(theta)) from theta0 to t_final.

    Records at ``n_records`` times, evenly spaced (or log-spaced from t_final * 1e-6 when
    ``log_times``, useful for small initialisations). ``stop_loss`` stops the integration when
    the loss falls below it (a terminal event).
    """
    theta0 = param.as_theta(theta0)
    if not (np.isfinite(t_final) and t_final > 0):
        raise ParamgeoError(f"the final time must be a positive number, got {t_final}")
    value, grad = pullback(param, loss)
    counter = {"n": 0}

    def rhs(_, theta):
        counter["n"] += 1
        return -grad(theta)

    if log_times:
        t_eval = np.concatenate([[0.0], np.geomspace(t_final * 1e-6, t_final, n_records - 1)])
    else:
        t_eval = np.linspace(0.0, t_final, n_records)
    events = None
    if stop_loss is not None:
        def below(_, theta):
            return value(theta) - stop_loss
        below.terminal = True
        events = below
    sol = solve_ivp(rhs, (0.0, t_final), theta0, method=method, t_eval=t_eval, rtol=rtol,
                    atol=atol, events=events)
    thetas = sol.y.T
    predictors, losses, grad_norms = _record(param, value, grad, thetas)
    return Trajectory(f"flow ({method})", sol.t, thetas, predictors, losses, grad_norms,
                      bool(sol.success), str(sol.message), counter["n"])


def gradient_descent(param, loss, theta0, steps, lr, *, record_every=1, stop_loss=None):
    """theta_{t+1} = theta_t - lr J^T grad ell(phi(theta_t)) for ``steps`` steps.

    ``lr`` is a float or a callable ``lr(t)`` (a schedule). Records every ``record_every``
    steps (and the last). ``stop_loss`` stops early when the loss falls below it.
    """
    theta = param.as_theta(theta0).copy()
    value, grad = pullback(param, loss)
    schedule = lr if callable(lr) else (lambda _t: lr)
    times, thetas = [0], [theta.copy()]
    message = f"completed {steps} steps"
    n_evals = 0
    for t in range(steps):
        with np.errstate(over="ignore", invalid="ignore"):
            g = grad(theta)
            theta = theta - schedule(t) * g
        n_evals += 1
        if not np.all(np.isfinite(theta)):
            raise ParamgeoError(f"gradient descent diverged at step {t + 1}; lower the step size")
        if (t + 1) % record_every == 0 or t + 1 == steps:
            times.append(t + 1)
            thetas.append(theta.copy())
        if stop_loss is not None and value(theta) < stop_loss:
            message = f"loss below {stop_loss} at step {t + 1}"
            if times[-1] != t + 1:
                times.append(t + 1)
                thetas.append(theta.copy())
            break
    thetas = np.array(thetas)
    predictors, losses, grad_norms = _record(param, value, grad, thetas)
    return Trajectory("gd", np.array(times, float), thetas, predictors, losses, grad_norms,
                      True, message, n_evals)
