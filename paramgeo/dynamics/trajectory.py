"""Gradient flow d theta/dt = -grad L(theta) = -J(theta)^T grad ell(phi(theta)) in Theta,
integrated with ``scipy.integrate.solve_ivp`` (:func:`gradient_flow`), and the
:class:`Trajectory` that it and gradient descent return (predictors, losses, gradient norms and
the drift of the conserved quantities along the way).

This is the integrator the engines share: :mod:`paramgeo.flows` builds descent, push-forward,
quotient and saddle-to-saddle flows on it and :mod:`paramgeo.mirror` compares its mirror flows
with it; it imports neither. The gradient is always the chain rule through the plugin's VJP
(``paramgeo.losses.pullback``), never a dense Jacobian.

Default integrator: LSODA. Small initialisations (theta_0 of scale alpha -> 0) make these
problems stiff in the practical sense: long plateaus where the vector field is O(alpha) followed
by fast transitions, and near a minimum the Jacobian of the vector field, -Hess L, has
eigenvalues spread over many orders of magnitude. LSODA switches automatically between a
non-stiff Adams method on plateaus and a stiff BDF method where stiffness appears, so it needs
no user tuning; pass ``method="RK45"``/``"DOP853"`` (explicit) or ``"BDF"``/``"Radau"`` (implicit)
to force one. The absolute tolerance must sit below the smallest coordinate scale that matters:
from an initialisation of scale alpha, coordinates of size alpha^2 decide when a mode escapes its
plateau, so pass ``atol`` well below alpha^2 (e.g. 1e-6 alpha^2).


References: Absil, Mahony, Sepulchre (2008), "Optimization algorithms on matrix manifolds";
Woodworth et al. (2020), "Kernel and rich regimes in overparametrized models".
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

import numpy as np

from ..symmetry.conserved import ConservedQuantities, conserved_quantities
from ..errors import ParamgeoError
from ..io.files import check_plot_path, save_figure
from ..losses.predictor import loss_hessian, pullback
from ..results import Result, to_jsonable

if TYPE_CHECKING:
    from os import PathLike
    from pathlib import Path

    from numpy.typing import ArrayLike

    from ..losses.predictor import Loss
    from ..contract.parameterization import Parameterization


def _progress_callback(progress, label):
    """(callback, close) for an engine's ``progress`` argument, as
    :func:`paramgeo.io.progress.reporting` takes it: a callable ``progress(done, total)`` is
    used as it is; ``True`` shows paramgeo's progress display (elapsed time and ETA on stderr),
    "auto" shows it in an interactive session; False/None shows nothing."""
    from ..io.progress import reporting

    cm = reporting(progress, label)
    return cm.__enter__(), lambda: cm.__exit__(None, None, None)


def _pyplot_figure(figsize):
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ParamgeoError(
            "plotting needs matplotlib: pip install 'paramgeo[plot]' (or pip install matplotlib)"
        ) from None
    return Figure(figsize=figsize)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Trajectory(Result):
    """A recorded run: times, parameters (T x n), predictors (T x m), loss, |grad L|, and the
    quadratic conserved quantities of the symmetry group (T x q) with their relative drift
    max_t |Q(t) - Q(0)| / max_t theta^T |S| theta (zero to integrator tolerance for gradient
    flow, O(eta) over a run of descent: O(eta^2) per step).

    The run stores only what the integrator produced (times and parameters). Predictors,
    losses, gradient norms and conserved quantities are evaluated from the recorded parameters
    the first time they are read, then kept: a run whose records are never read costs only its
    integration (one forward and one VJP per record when they are): ``predictors`` (T, m),
    ``losses`` (T,), ``grad_norms`` (T,), ``conserved`` (T, q) with ``conserved_labels``,
    ``conserved_drift``, ``conserved_scale`` and ``conserved_laws``.

    Attributes:
        method: the integrator ("LSODA", ...) or "gradient descent".
        times: the record times (step indices for descent), shape (T,).
        thetas: the recorded parameters, shape (T, n).
        success: whether the run reached its end (or a stop condition) without failing.
        message: how it ended.
        n_evals: evaluations of the field (loss gradients).
        evaluate: what evaluates the records from ``thetas`` (internal).
        interrupted: Ctrl-C stopped the run; the records are those finished.
    """

    method: str
    times: np.ndarray
    thetas: np.ndarray
    success: bool
    message: str
    n_evals: int
    evaluate: Any = dataclasses.field(default=None, repr=False, compare=False)
    interrupted: bool = False

    #: the records evaluated on first access, in the order ``to_dict`` lists them
    RECORDS = ("predictors", "losses", "grad_norms", "conserved", "conserved_labels",
               "conserved_drift", "conserved_scale", "conserved_laws")

    @functools.cached_property
    def predictors(self):
        return self.evaluate.predictors(self.thetas)

    @functools.cached_property
    def losses(self):
        return self.evaluate.losses(self.thetas)

    @functools.cached_property
    def grad_norms(self):
        return self.evaluate.grad_norms(self.thetas)

    @functools.cached_property
    def _conserved(self):
        return self.evaluate.conserved(self.thetas)

    @property
    def conserved(self):
        return self._conserved[0]

    @property
    def conserved_labels(self):
        return self._conserved[1]

    @property
    def conserved_drift(self):
        return self._conserved[2]

    @property
    def conserved_scale(self):
        return self._conserved[3]

    @property
    def conserved_laws(self):
        """One (formula, relative drift) per conservation law as a table shows it: per matrix
        law (e.g. "U^T U - V^T V", the largest drift of its entries) when the symmetry is made
        of GL(r) factors, else one per quantity."""
        return self._conserved[4]

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: to_jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)
               if f.name != "evaluate"}
        out.update({name: to_jsonable(getattr(self, name)) for name in self.RECORDS})
        return out

    @property
    def final_theta(self):
        return self.thetas[-1]

    @property
    def final_predictor(self):
        return self.predictors[-1]

    @property
    def max_conserved_drift(self):
        """The largest relative drift over the conserved quantities (nan if there are none)."""
        if self.conserved_drift is None or len(self.conserved_drift) == 0:
            return float("nan")
        return float(np.max(self.conserved_drift))

    def summary(self) -> dict[str, Any]:
        """A short JSON-able summary (no arrays of the whole trajectory)."""
        drift = self.conserved_drift if self.conserved_drift is not None else []
        return to_jsonable({
            "method": self.method, "records": len(self.times), "t_final": self.times[-1],
            "loss_initial": self._loss(0), "loss_final": self._loss(-1),
            "grad_norm_final": self._grad_norm(-1), "n_evals": self.n_evals,
            "success": self.success, "message": self.message,
            "conserved": dict(zip(self.conserved_labels, drift)),
            "conserved_laws": dict(self.conserved_laws),
        })

    def __str__(self):
        drift = ""
        if self.conserved_labels:
            drift = (f"; {len(self.conserved_labels)} conserved quantities, max relative drift "
                     f"{self.max_conserved_drift:.2e}")
        return (
            f"Trajectory ({self.method}): {len(self.times)} records to t = {self.times[-1]:.4g}; "
            f"loss {self._loss(0):.4g} -> {self._loss(-1):.4g}; |grad L| final "
            f"{self._grad_norm(-1):.3g}; {self.n_evals} gradient evaluations{drift}; "
            f"{self.message}"
        )

    def _loss(self, i):
        """The loss at record i, without evaluating every record."""
        if "losses" in self.__dict__:
            return float(self.losses[i])
        return float(self.evaluate.losses(self.thetas[[i]], rows=[i])[0])

    def _grad_norm(self, i):
        if "grad_norms" in self.__dict__:
            return float(self.grad_norms[i])
        return float(self.evaluate.grad_norms(self.thetas[[i]], rows=[i])[0])

    def plot(self, path: str | PathLike[str], *, max_coords: int = 12,
             title: Optional[str] = None) -> Path:
        """Write a figure (PNG, SVG or PDF by the suffix of ``path``): loss against time on
        log-log axes, the largest ``max_coords`` predictor coordinates against time (log time),
        and the relative drift of the conserved quantities when there are any. Needs matplotlib
        (the ``plot`` extra). Returns the path."""
        path = check_plot_path(path)
        panels = 3 if self.conserved_labels else 2
        fig = _pyplot_figure((5.0 * panels, 4.0))
        axes = fig.subplots(1, panels)
        t = np.asarray(self.times, float)
        pos = t > 0
        ax = axes[0]
        ax.loglog(t[pos], np.maximum(self.losses[pos], 1e-300), color="C0")
        ax.set_xlabel("time" if "flow" in self.method else "step")
        ax.set_ylabel("loss")
        ax.set_title("loss")
        ax.grid(True, which="major", alpha=0.3)
        ax = axes[1]
        P = np.asarray(self.predictors)
        order = np.argsort(-np.max(np.abs(P), axis=0))[:max_coords]
        for c in sorted(order):
            ax.semilogx(t[pos], P[pos, c], label=f"beta[{c}]")
        ax.set_xlabel("time" if "flow" in self.method else "step")
        ax.set_ylabel("predictor coordinate")
        shown = "" if P.shape[1] <= max_coords else f" (largest {max_coords} of {P.shape[1]})"
        ax.set_title("predictor" + shown)
        ax.grid(True, alpha=0.3)
        if len(order) <= 12:
            ax.legend(fontsize=7, ncol=2)
        if panels == 3:
            ax = axes[2]
            scale = self.conserved_scale
            dev = np.abs(self.conserved - self.conserved[0]) / np.maximum(scale, 1e-300)
            for c in range(min(dev.shape[1], 8)):
                ax.loglog(t[pos], np.maximum(dev[pos, c], 1e-17),
                          label=self.conserved_labels[c][:28])
            ax.set_xlabel("time" if "flow" in self.method else "step")
            ax.set_ylabel("|Q(t) - Q(0)| / scale")
            ax.set_title("conserved quantities: relative drift")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=6)
        if title:
            fig.suptitle(title)
        fig.tight_layout()
        save_figure(fig, path)
        return path



class _Records:
    """Evaluates a trajectory's records from its parameters: forward, loss, gradient norm and
    conserved quantities (the evaluate field of :class:`Trajectory`). ``known`` holds losses and
    gradient norms the run computed anyway (arrays over the records, nan where not known):
    those are read, the rest evaluated."""

    def __init__(self, param, value, grad, conserved, known=None):
        self.param, self.value, self.grad, self.with_conserved = param, value, grad, conserved
        self.known = known or {}

    def predictors(self, thetas):
        return np.array([np.asarray(self.param.forward_flat(t)) for t in thetas])

    def _fill(self, name, thetas, rows, evaluate):
        """Record ``name`` at ``thetas`` (the records ``rows``, default all): the known values,
        ``evaluate(theta)`` where none is known."""
        known = self.known.get(name)
        out = (np.full(len(thetas), np.nan) if known is None else
               np.array(known[slice(None) if rows is None else rows], float))
        for i in np.flatnonzero(np.isnan(out)):
            out[i] = evaluate(thetas[i])
        return out

    def losses(self, thetas, rows=None):
        return self._fill("losses", thetas, rows, self.value)

    def grad_norms(self, thetas, rows=None):
        return self._fill("grad_norms", thetas, rows, lambda t: np.linalg.norm(self.grad(t)))

    def conserved(self, thetas):
        """(values T x q, labels, relative drift, scale, laws) of the quadratic conserved
        quantities (laws: see :attr:`Trajectory.conserved_laws`)."""
        cq = conserved_quantities(self.param) if self.with_conserved else ConservedQuantities()
        values = cq.values(thetas)
        if len(cq):
            scale = np.max(cq.scales(thetas), axis=0)
            drift = np.max(np.abs(values - values[0]), axis=0) / np.maximum(scale, 1e-300)
        else:
            scale = drift = np.zeros(0)
        laws = tuple((str(law), float(np.max(drift[cols]))) for law, cols in cq.law_columns())
        return values, cq.labels, drift, scale, laws


def _finish(param, value, grad, method, times, thetas, success, message, n_evals, conserved,
            interrupted=False, known=None):
    return Trajectory(method=method, times=np.asarray(times, float),
                      thetas=np.asarray(thetas, float), success=bool(success), message=str(message),
                      n_evals=int(n_evals), evaluate=_Records(param, value, grad, conserved, known),
                      interrupted=bool(interrupted))


def _check_stops(stop_loss, stop_grad):
    """The early-stopping levels must be non-negative numbers (or None)."""
    for what, level in (("stop_loss", stop_loss), ("stop_grad", stop_grad)):
        if level is not None and not (np.isfinite(level) and level >= 0):
            raise ParamgeoError(f"{what} must be a non-negative number, got {level}")


#: solve_ivp methods that form and factor a dense n x n Jacobian (LSODA does once stiff).
IMPLICIT_METHODS = ("LSODA", "BDF", "Radau")
#: Above this n they need gigabytes per matrix (LSODA's Fortran crashes on its work array).
MAX_IMPLICIT_DIM = 10_000


#: Most recorded times of one flow (each keeps theta, phi and the conserved quantities).
MAX_RECORDS = 100_000
#: Longest horizon of a gradient flow: small initialisations of deep diagonal networks escape
#: at t ~ alpha^-(2L-2) (1e24 at alpha = 1e-4, L = 4); 1e300 is a typo, not a horizon.
MAX_T_FINAL = 1e30
#: Shortest interval [0, t_final / time_scale] the integrator is given, and smallest atol:
#: below them its steps are denormal numbers (a time scale of 1e300, an atol of 1e-300) and
#: it stalls without progress.
MIN_TAU = 1e-12
MIN_ATOL = 1e-30
#: Largest |field(theta0)| / (1 + |theta0|_inf) a flow starts from: beyond it the time scale
#: of the flow is below 1e-100 and the integrator's first steps underflow
MAX_FIELD = 1e100
#: Largest |theta0|_inf a flow starts from (phi of degree 2 or more overflows near 1e150)
MAX_START = 1e50
#: Most steps of one gradient-descent run a command or a sweep accepts (at ~1 ms a step, about
#: three hours; beyond it a request is a typo, refused before any step).
MAX_STEPS = 10_000_000


def gradient_flow(param: Parameterization, loss: Loss, theta0: ArrayLike, t_final: float, *,
                  method: str = "LSODA", rtol: float = 1e-8, atol: float = 1e-10,
                  n_records: int = 200, log_times: bool = False,
                  stop_loss: Optional[float] = None, stop_grad: Optional[float] = None,
                  t_eval: Optional[ArrayLike] = None,
                  progress: Union[bool, Callable[[int, int], None]] = False,
                  conserved: bool = True, chart: str = "theta", time_scale: float = 1.0,
                  exact_jacobian: bool = False) -> Trajectory:
    """Integrate the gradient flow d theta / dt = -J(theta)^T grad ell(phi(theta)) to t_final.

    The flow of L = ell o phi in parameter space, solved by ``scipy.integrate.solve_ivp``; the
    predictor then moves by d phi / dt = -J J^T grad ell. With ``chart="log"`` the same flow
    runs in r = log|theta| on the orthant of theta0, dr_j / dt = -(J^T grad ell)_j / theta_j,
    so that ``atol`` bounds every coordinate's relative error (small initialisations, whose
    coordinates of size alpha^L decide the plateaus; Pesme and Flammarion 2023). The charts,
    time scales and the exact field Jacobian -T (J^T Hess(ell) J + sum_i g_i Hess phi_i) are
    derived in docs/plugins/deep-diagonal.md; the methods in docs/flows.md.

    Args:
        param: the parameterization phi: R^n -> R^m.
        loss: the loss ell on predictors (a :class:`paramgeo.losses.Loss`).
        theta0: the initialisation, shape (n,) (every entry nonzero for the log chart).
        t_final: the final time (> 0).
        method: a ``solve_ivp`` method: LSODA (switches between Adams and BDF), RK45 or DOP853
            (explicit), BDF or Radau (implicit, for stiff problems).
        rtol: the integrator's relative tolerance.
        atol: its absolute tolerance (relative per coordinate in the log chart).
        n_records: records at this many evenly spaced times.
        log_times: space the records logarithmically from t_final * 1e-6 instead.
        stop_loss: stop when the loss falls below it (a terminal event).
        stop_grad: stop when |grad L| falls below it.
        t_eval: record at these times instead, shape (T,).
        progress: True for a progress bar on stderr, or progress(done, total) over 1000 parts
            of [0, t_final].
        conserved: record the quadratic conserved quantities of the symmetry group
            (:func:`conserved_quantities`).
        chart: "theta" or "log" (r = log|theta|; a coordinate reaching 0 stops the run).
        time_scale: T: integrate in tau = t / T (times are reported in t), e.g. alpha^(2-L).
        exact_jacobian: give an implicit method the exact Jacobian of the field instead of
            finite differences (about 100x fewer stiff steps from a small initialisation).

    Returns:
        The :class:`Trajectory`: ``times`` (T,), ``thetas`` (T, n), and, evaluated when read,
        ``predictors`` (T, m), ``losses``, ``grad_norms`` and the conserved quantities.

    Raises:
        ParamgeoError: a bad t_final, time scale, tolerance, chart or stop level, a start
            whose entries overflow, exact_jacobian with an explicit method, or an implicit
            method with n above MAX_IMPLICIT_DIM (each message names the fix).
        ShapeError: theta0 is not n finite numbers.

    Examples:
        >>> import numpy as np, paramgeo
        >>> from paramgeo.flows import gradient_flow
        >>> from paramgeo.losses.predictor import LinearMeasurements
        >>> p = paramgeo.get("hadamard", p=2)                   # phi(u, v) = u * v
        >>> loss = LinearMeasurements(np.eye(2), [1.0, 2.0])     # ell = |beta - (1, 2)|^2 / 4
        >>> run = gradient_flow(p, loss, np.ones(4), 20.0)
        >>> np.round(p.forward(run.thetas[-1]), 6)
        array([1., 2.])
    """
    value, grad = pullback(param, loss)
    theta0 = param.as_theta(theta0)
    hessian = None
    if exact_jacobian:
        if method not in IMPLICIT_METHODS:
            raise ParamgeoError(f"exact_jacobian is used by the implicit integrators "
                                f"{', '.join(IMPLICIT_METHODS)}, not by {method}; choose one of "
                                "them or drop exact_jacobian")
        hessian = functools.partial(loss_hessian, param, loss)
    return _flow(param, value, grad, grad, theta0, t_final, f"flow ({method})", method=method,
                 rtol=rtol, atol=atol, n_records=n_records, log_times=log_times,
                 stop_loss=stop_loss, stop_grad=stop_grad, t_eval=t_eval, progress=progress,
                 conserved=conserved, chart=chart, time_scale=time_scale, field_jacobian=hessian)


def _largest(values):
    bad = values[~np.isfinite(values)]
    return f"{bad[0]}" if bad.size else f"{np.max(np.abs(values)):.3g}"


def _chart_jacobian(theta, field, D, chart, time_scale):
    """The Jacobian of the solver's field -T f (theta chart) or -T f(theta) / theta in
    r = log|theta| (log chart) from D, the n x n Jacobian of f = ``field`` in theta: -T D, or
    -T (diag(1/theta) D diag(theta) - diag(f / theta)) (f evaluated only there)."""
    if chart == "theta":
        return -time_scale * D
    return -time_scale * (D * (theta[None, :] / theta[:, None]) - np.diag(field(theta) / theta))


def _flow(param, value, grad, field, theta0, t_final, label, *, method, rtol, atol, n_records,
          log_times, stop_loss, stop_grad, t_eval, progress, conserved, chart="theta",
          time_scale=1.0, field_jacobian=None):
    """Integrate d theta/dt = -field(theta); record value and grad (see gradient_flow for
    ``chart`` and ``time_scale``). ``field_jacobian(theta)``, the n x n Jacobian of ``field``,
    is carried to the chart and passed to the integrator (None: its finite differences)."""
    if chart not in ("theta", "log"):
        raise ParamgeoError(f"unknown chart {chart!r}; choose 'theta' or 'log'")
    if not (np.isfinite(time_scale) and time_scale > 0):
        raise ParamgeoError(f"the time scale must be a positive number, got {time_scale}")
    if time_scale > MAX_T_FINAL:
        raise ParamgeoError(f"the time scale {time_scale:.3g} is beyond {MAX_T_FINAL:.0e}, the "
                            "longest horizon of a flow: give one of the order of the dynamics' "
                            "time scale (e.g. alpha^(2-L) for a depth-L diagonal network)")
    if chart == "log" and not np.all(theta0 != 0):
        raise ParamgeoError(
            f"the log chart needs every entry of theta0 nonzero ({int(np.sum(theta0 == 0))} "
            "are 0): start off the coordinate hyperplanes or use chart='theta'")
    sign = np.sign(theta0)

    def to_theta(z):  # the solver's state -> theta
        return sign * np.exp(z) if chart == "log" else z
    if not (np.isfinite(t_final) and t_final > 0):
        raise ParamgeoError(f"the final time must be a positive number, got {t_final}")
    if t_final > MAX_T_FINAL:
        raise ParamgeoError(f"the final time {t_final:.3g} is beyond {MAX_T_FINAL:.0e}: no flow "
                            "of paramgeo needs that horizon (log-spaced records reach small "
                            "initialisations); give a smaller one")
    if t_eval is None:
        from ..contract.arguments import integer

        integer(n_records, "n_records", minimum=2, maximum=MAX_RECORDS)
    if t_final / time_scale < MIN_TAU:
        raise ParamgeoError(f"the horizon t_final / time_scale = {t_final:.3g} / "
                            f"{time_scale:.3g} is below {MIN_TAU:.0e} units of tau: the "
                            "integrator would step in denormal times; give a longer horizon "
                            f"or a shorter time scale (t_final / time_scale >= {MIN_TAU:.0e})")
    for what, tol in (("rtol", rtol), ("atol", atol)):
        if not (np.isfinite(tol) and tol > 0):
            raise ParamgeoError(f"the tolerance {what} must be a positive number, got {tol}")
    if atol < MIN_ATOL:
        raise ParamgeoError(f"the tolerance atol = {atol:.3g} is below {MIN_ATOL:.0e}: the "
                            "integrator would resolve coordinates near the bottom of the float "
                            "range and stall; give atol >= 1e-30 (with chart='log' atol is a "
                            "relative error: about 1e-12)")
    _check_stops(stop_loss, stop_grad)
    if method in IMPLICIT_METHODS and theta0.size > MAX_IMPLICIT_DIM:
        raise ParamgeoError(
            f"the {method} integrator factors an n x n Jacobian and n = {theta0.size} exceeds "
            f"{MAX_IMPLICIT_DIM} ({8e-9 * theta0.size ** 2:.3g} GB per matrix); use an explicit "
            "integrator (RK45 or DOP853) or gradient descent")
    from scipy.integrate import solve_ivp

    if np.max(np.abs(theta0), initial=0.0) > MAX_START:
        raise ParamgeoError(
            f"theta0 has an entry of {np.max(np.abs(theta0)):.3g}, beyond {MAX_START:.0e}: "
            "products of its entries (phi, the loss and its gradient) overflow and the "
            "integrator stalls; give a smaller start (init scale)")
    with np.errstate(over="ignore", invalid="ignore"):
        start = np.asarray(field(theta0), float)
    if not np.all(np.isfinite(start)) or np.max(np.abs(start), initial=0.0) > MAX_FIELD * (
            1.0 + np.max(np.abs(theta0), initial=0.0)):
        raise ParamgeoError(
            f"the field of the flow at theta0 has an entry of {_largest(start)}, beyond "
            f"{MAX_FIELD:.0e} (1 + |theta0|_inf): the loss or its gradient overflows there and "
            "the integrator's steps would underflow (data or a start with entries of 1e50 or "
            "more); rescale the data or the start")
    counter = {"n": 0, "shown": 0, "last": (0.0, theta0)}

    def rhs(tau, z):
        counter["n"] += 1
        theta = to_theta(z)
        t = tau * time_scale
        counter["last"] = (t, theta)
        done = int(1000 * min(t, t_final) / t_final)
        if report is not None and done > counter["shown"]:
            report(done, 1000)
            counter["shown"] = done
        dtheta = -time_scale * field(theta)
        return dtheta / theta if chart == "log" else dtheta

    def jac(_, z):
        theta = to_theta(z)
        return _chart_jacobian(theta, field, field_jacobian(theta), chart, time_scale)

    if t_eval is not None:
        t_eval = np.asarray(t_eval, float)
    elif log_times:
        t_eval = np.concatenate([[0.0], np.geomspace(t_final * 1e-6, t_final, n_records - 1)])
    else:
        t_eval = np.linspace(0.0, t_final, n_records)
    events, reasons = [], []
    if stop_loss is not None:
        def below(_, z):
            return value(to_theta(z)) - stop_loss
        below.terminal = True
        events.append(below)
        reasons.append(f"loss below {stop_loss:g}")
    if stop_grad is not None:
        def flat(_, z):
            return np.linalg.norm(grad(to_theta(z))) - stop_grad
        flat.terminal = True
        events.append(flat)
        reasons.append(f"gradient norm below {stop_grad:g}")
    report, close = _progress_callback(progress, f"gradient flow to t = {t_final:g}")
    try:
        with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
            # (a rejected trial step far off the log chart)
            sol = solve_ivp(rhs, (0.0, t_final / time_scale),
                            np.log(np.abs(theta0)) if chart == "log" else theta0,
                            method=method, t_eval=t_eval / time_scale, rtol=rtol, atol=atol,
                            events=events or None,
                            **({} if field_jacobian is None else {"jac": jac}))
    except ValueError as exc:
        raise ParamgeoError(f"solve_ivp refused the problem: {exc}") from None
    except KeyboardInterrupt:  # Ctrl-C: the start and the last state the integrator reached
        t_last, y_last = counter["last"]
        times, thetas = [0.0], [theta0]
        if t_last > 0:
            times, thetas = times + [t_last], thetas + [np.asarray(y_last, float)]
        return _finish(param, value, grad, label, times, thetas, False,
                       f"interrupted at t = {t_last:.4g} of {t_final:g}", counter["n"],
                       conserved, interrupted=True)
    finally:
        close()
    message = str(sol.message)
    if np.size(sol.t):
        times, thetas = sol.t * time_scale, to_theta(sol.y.T)
    else:  # the integrator failed before its first record (scipy then gives empty lists)
        times, thetas = np.zeros(1), np.asarray(theta0, float)[None]
    if sol.status == 1:  # a terminal event: record the stopping point too
        hits = [(te[0] * time_scale, to_theta(ye[0]), why)
                for te, ye, why in zip(sol.t_events, sol.y_events, reasons) if len(te)]
        t_stop, y_stop, why = min(hits, key=lambda h: h[0])
        if not len(times) or times[-1] < t_stop:
            times, thetas = np.append(times, t_stop), np.vstack([thetas, y_stop])
        message = f"{why} at t = {t_stop:.4g}"
    elif (sol.status < 0 and chart == "log" and np.size(sol.t)
          and np.max(np.abs(sol.y[:, -1])) > 700):
        message = (f"{message} (a coordinate left the log chart, |log|theta|| > 700: it tends "
                   "to 0 or infinity; use chart='theta')")
    return _finish(param, value, grad, label, times, thetas, sol.status >= 0, message,
                   counter["n"], conserved)
