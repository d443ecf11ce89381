"""Structure matrices: the leading quadratic form Tr[W W^T A(x)] of a layer at zero weights.

A layer is a set of *units* (hidden neurons, heads' columns, experts, channels): unit j owns
the p coordinates w_j of theta (its slice of every block listed in ``units``, along the given
axis), and W = [w_1 ... w_k] is p x k. For a predictor entry f_i(theta) (the output at the i-th
fixed input x_i of the plugin) and a base point theta_0 with the layer at zero,

    f_i(theta_0 + W) = f_i(theta_0) + g_i . vec(W) + (1/2) vec(W)^T H_i vec(W) + O(|W|^3),

with g_i and H_i the gradient and Hessian of f_i at theta_0 restricted to the layer. When units
enter additively and alike (f = sum_j h(w_j; x) plus terms of higher order, the symmetry under
permuting units), H_i is block-diagonal with k equal p x p blocks 2 A_i, and the quadratic
term is

    (1/2) vec(W)^T H_i vec(W) = sum_j w_j^T A_i w_j = Tr[W W^T A_i],   A_i = A(x_i),

so near zero the predictor depends on the weights only through M = W W^T. The form is the
*leading* one when the lower orders vanish: g_i = 0 (checked; ``gradient`` in the result) and
f_i(theta_0) = 0 (else a constant ``offset``, which does not move under training).
A is computed by autograd through the contract (``jacobian_derivative`` of the plugin, one
directional derivative of J per layer coordinate), and checked against central finite
differences of ``forward`` with Richardson extrapolation (:func:`structure_matrix_fd`).

Mode dynamics (:func:`mode_dynamics`): with a shared eigenbasis the gradient flow of
(1/2) sum_k c_k (m_k - m*_k)^2 on M = W W^T reduces to decoupled Lotka-Volterra (logistic)
equations dm_k/dt = lambda_k m_k (1 - m_k / m*_k), lambda_k = 4 c_k m*_k, solved in closed
form; if lambda_k ~ k^-a and c_k m*_k^2 ~ k^-b, the loss while many modes are still off decays
as t^-(b - 1)/a (:func:`power_law_fit` fits it).

Reference: the structure-matrix universality of near-zero learning and Lotka-Volterra mode
switching (Tr[W W^T A(x)] for perceptrons, attention, mixtures of experts and convolutions);
Saxe, McClelland, Ganguli (2014), "Exact solutions to the nonlinear dynamics of learning in
deep linear neural networks" (sequential mode learning).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Callable, Mapping, Optional

import numpy as np

from ..errors import ParamgeoError, ShapeError
from ..geometry.kinks import kink_report
from ..results import Result

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..contract.parameterization import Parameterization

#: relative size below which the gradient at zero, cross-unit blocks and unit differences count
#: as zero (autograd is exact up to round-off)
TOL = 1e-10


def unit_indices(param: Parameterization,
                 units: Optional[Mapping[str, int]] = None) -> NDArray[np.int_]:
    """(k, p) integer array: row j lists the coordinates of theta owned by unit j.

    ``units`` maps block names to the axis that indexes units (``{"W": 0, "a": 0}``: neuron j
    owns row j of W and row j of a); unit j's coordinates are its slice of each block in spec
    order, row-major. None: one unit holding all of theta (A is then half the Hessian)."""
    spec = param.spec
    if units is None:
        return np.arange(param.n)[None, :]
    if not units:
        raise ShapeError("structure matrix: units is empty; name the layer's blocks, e.g. "
                         "units={'W': 0, 'a': 0}")
    unknown = [b for b in units if b not in spec.blocks]
    if unknown:
        raise ShapeError(f"structure matrix: {param.name} has no block {', '.join(unknown)}; "
                         f"its blocks: {', '.join(spec.blocks)}")
    rows, k = [], None
    for name in spec.blocks:
        if name not in units:
            continue
        shape, axis = spec.blocks[name], int(units[name])
        if not 0 <= axis < len(shape):
            raise ShapeError(f"structure matrix: block {name} has shape {shape}; its unit axis "
                             f"must be in 0..{len(shape) - 1}, got {axis}")
        if k is not None and shape[axis] != k:
            raise ShapeError(f"structure matrix: block {name} has {shape[axis]} units along "
                             f"axis {axis} but the other blocks have {k}; give each block the "
                             "axis that counts the same units")
        k = shape[axis]
        idx = np.arange(math.prod(shape)).reshape(shape) + spec.slices[name].start
        rows.append(np.moveaxis(idx, axis, 0).reshape(k, -1))
    return np.concatenate(rows, axis=1)


def _layer_labels(param, idx):
    labels = param.spec.labels()
    return tuple(labels[i] for i in idx[0])


def _base_point(param, idx, theta0):
    theta = np.zeros(param.n) if theta0 is None else np.array(param.as_theta(theta0), float)
    theta[idx.ravel()] = 0.0
    return theta


@dataclasses.dataclass(frozen=True, kw_only=True)
class StructureMatrices(Result):
    """A(x_i) for every predictor entry i: f_i(theta_0 + W) = offset_i + Tr[W W^T A_i] + O(W^3).

    ``A`` has shape predictor_shape + (p, p); ``labels`` name the p coordinates of unit 1 (the
    other units' are alike); ``gradient`` is max |grad f(theta_0)| on the layer (0 for the form
    to lead), ``cross_unit`` and ``unit_spread`` the largest Hessian entry between different
    units and the largest difference between units' blocks, relative to max |H| (both 0 for
    the trace form); ``trace_form`` says all three vanish; ``fd_error`` is the relative error
    of A against finite differences of ``forward`` (None when not checked)."""

    plugin: str
    units: int
    labels: tuple
    A: np.ndarray
    offset: np.ndarray
    gradient: float
    cross_unit: float
    unit_spread: float
    trace_form: bool
    fd_error: object = None

    def __str__(self):
        A = self.A.reshape(-1, *self.A.shape[-2:])
        lines = [f"structure matrices of {self.plugin}: {A.shape[0]} predictor entries, "
                 f"{self.units} units of {len(self.labels)} coordinates "
                 f"({', '.join(self.labels)})",
                 f"  offset f(theta_0): max {np.max(np.abs(self.offset)):.3g}",
                 f"  gradient at the layer's zero: max {self.gradient:.3g}",
                 f"  cross-unit Hessian (relative): {self.cross_unit:.3g}; "
                 f"units differ by {self.unit_spread:.3g}",
                 "  f = offset + Tr[W W^T A(x)] + O(|W|^3): "
                 + ("yes" if self.trace_form else "NO (see the figures above)")]
        if self.fd_error is not None:
            lines.append(f"  A vs finite differences of forward: relative error "
                         f"{self.fd_error:.2e}")
        with np.printoptions(precision=4, suppress=True, linewidth=100):
            lines.append(f"  A(x_0) =\n{A[0]}")
        return "\n".join(lines)


def structure_matrix(param: Parameterization, units: Optional[Mapping[str, int]] = None,
                     theta0: Optional[ArrayLike] = None, check: bool = True,
                     progress: Optional[Callable[[int, int], None]] = None) -> StructureMatrices:
    """The structure matrices A(x_i) of a layer of ``param`` at zero weights.

    A_i = (1/2) d^2 f_i / dw_1 dw_1 at theta_0 (unit 1's Hessian block), with the Hessian
    H_i[a, b] = d^2 f_i / dtheta_a dtheta_b over the layer's coordinates from the plugin's
    ``jacobian_derivative`` (column b is d/dt J(theta_0 + t e_b), autograd unless the plugin
    has a closed form), and the conditions of the expansion
    f_i(theta_0 + W) = f_i(theta_0) + Tr[W W^T A_i] + O(|W|^3) checked: gradient zero on the
    layer, no cross-unit Hessian blocks, equal blocks for all units. ``units`` maps block names
    to their unit axis (:func:`unit_indices`); ``theta0`` fixes the blocks outside the layer
    (default 0); ``check`` compares A with :func:`structure_matrix_fd`. ``progress(done,
    total)`` is called per layer coordinate.
    """
    idx = unit_indices(param, units)
    k, p = idx.shape
    theta = _base_point(param, idx, theta0)
    kinks = kink_report(param, theta)
    if kinks is not None and kinks.on_kink:
        raise ParamgeoError(f"{param.name}: at the layer's zero the map is on a kink "
                            f"({kinks.kinks[0]}, {len(kinks.kinks)} in all), not twice "
                            "differentiable there: A(x) is undefined; choose a plugin with a "
                            "smooth activation")
    value = np.asarray(param.forward_flat(theta), float)
    m = value.size
    grad = np.asarray(param.jacobian(theta), float)[:, idx.ravel()]
    flat = idx.ravel()
    H = np.empty((m, flat.size, flat.size))
    e = np.zeros(param.n)
    for col, b in enumerate(flat):
        e[b] = 1.0
        H[:, :, col] = np.asarray(param.jacobian_derivative(theta, e), float)[:, flat]
        e[b] = 0.0
        if progress is not None:
            progress(col + 1, flat.size)
    if not np.all(np.isfinite(H)):
        raise ParamgeoError(f"{param.name}: the Hessian of forward at the layer's zero is not "
                            "finite; the map is not twice differentiable there (a kink, e.g. "
                            "relu at 0): choose a smooth activation")
    H = 0.5 * (H + np.swapaxes(H, 1, 2))
    H = H.reshape(m, k, p, k, p)
    scale = max(float(np.max(np.abs(H))), np.finfo(float).tiny)
    diag = np.stack([H[:, j, :, j, :] for j in range(k)], axis=1)  # (m, k, p, p)
    off = H.copy()
    for j in range(k):
        off[:, j, :, j, :] = 0.0
    cross = float(np.max(np.abs(off))) / scale
    spread = float(np.max(np.abs(diag - diag[:, :1]))) / scale
    gmax = float(np.max(np.abs(grad))) if grad.size else 0.0
    A = 0.5 * diag[:, 0]
    trace_form = gmax <= TOL * max(1.0, float(np.max(np.abs(value), initial=0.0))) \
        and cross <= TOL and spread <= TOL
    fd = None
    if check:
        A_fd = structure_matrix_fd(param, units, theta0)
        fd = float(np.max(np.abs(A_fd - A)) / max(float(np.max(np.abs(A))), 1e-300))
    shape = tuple(param.predictor_shape) + (p, p)
    return StructureMatrices(plugin=param.name, units=k, labels=_layer_labels(param, idx),
                             A=A.reshape(shape), offset=value.reshape(param.predictor_shape),
                             gradient=gmax, cross_unit=cross, unit_spread=spread,
                             trace_form=bool(trace_form), fd_error=fd)


def _quadratic_part(f, theta, direction, step):
    """(f(theta + t v) + f(theta - t v) - 2 f(theta)) / (2 t^2) extrapolated to t -> 0
    (Richardson on t and t/2: error O(t^4) plus round-off O(eps / t^2)): v^T (H / 2) v."""
    def q(t):
        return (f(theta + t * direction) + f(theta - t * direction) - 2 * f(theta)) / (2 * t * t)

    return (4.0 * q(step / 2) - q(step)) / 3.0


def structure_matrix_fd(param: Parameterization, units: Optional[Mapping[str, int]] = None,
                        theta0: Optional[ArrayLike] = None,
                        step: float = 1e-3) -> NDArray[np.float64]:
    """A_i by central finite differences of ``forward`` alone (the independent route).

    With Q_i(v) the quadratic part of t -> f_i(theta_0 + t v) (symmetric differences,
    Richardson-extrapolated), A_aa = Q(e_a) and A_ab = (Q(e_a + e_b) - Q(e_a - e_b)) / 4 for
    unit 1's coordinates a, b. Returns an array of shape (m, p, p)."""
    idx = unit_indices(param, units)
    p = idx.shape[1]
    theta = _base_point(param, idx, theta0)

    def f(t):
        return np.asarray(param.forward_flat(t), float).ravel()

    m = f(theta).size
    A = np.empty((m, p, p))
    basis = np.zeros((p, param.n))
    basis[np.arange(p), idx[0]] = 1.0
    for a in range(p):
        A[:, a, a] = _quadratic_part(f, theta, basis[a], step)
        for b in range(a):
            plus = _quadratic_part(f, theta, basis[a] + basis[b], step)
            minus = _quadratic_part(f, theta, basis[a] - basis[b], step)
            A[:, a, b] = A[:, b, a] = (plus - minus) / 4.0
    return A


# ------------------------------------------------------------------------ mode dynamics
@dataclasses.dataclass(frozen=True, kw_only=True)
class PowerLaw(Result):
    """A fitted power law L(t) ~ C t^-exponent over [t_min, t_max] (least squares in log-log,
    ``error`` the standard error of the slope), beside the ``predicted`` exponent."""

    exponent: float
    error: float
    predicted: float
    t_min: float
    t_max: float
    points: int


def power_law_fit(times: ArrayLike, values: ArrayLike, t_min: float, t_max: float,
                  predicted: float = float("nan")) -> PowerLaw:
    """Least-squares slope of log values against log times on [t_min, t_max]: values ~ t^-e.

    Returns a :class:`PowerLaw` with e and its standard error
    sqrt(sum r^2 / (n - 2) / sum (log t - mean)^2)."""
    times, values = np.asarray(times, float), np.asarray(values, float)
    keep = (times >= t_min) & (times <= t_max) & (values > 0)
    if keep.sum() < 3:
        raise ShapeError(f"power-law fit: only {int(keep.sum())} positive points in "
                         f"[{t_min:g}, {t_max:g}]; widen the window or record more times")
    x, y = np.log(times[keep]), np.log(values[keep])
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (slope * x + intercept)
    err = math.sqrt(float(resid @ resid) / (x.size - 2) / float(np.sum((x - x.mean()) ** 2)))
    return PowerLaw(exponent=float(-slope), error=err, predicted=float(predicted),
                    t_min=float(t_min), t_max=float(t_max), points=int(x.size))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModeDynamics(Result):
    """Decoupled Lotka-Volterra modes: m_k(t) on ``times``, the loss curve, switch-on times
    t_k (m_k = m*_k / 2) and the power law fitted to the loss while many modes are off."""

    times: np.ndarray
    modes: np.ndarray
    loss: np.ndarray
    switch_on: np.ndarray
    fit: PowerLaw


def mode_dynamics(targets: ArrayLike, curvatures: ArrayLike, init: float, times: ArrayLike,
                  window: Optional[tuple[float, float]] = None) -> ModeDynamics:
    """Closed-form mode dynamics of gradient flow on M = W W^T in a shared eigenbasis.

    For the loss (1/2) sum_k c_k (m_k - m*_k)^2 (c_k = ``curvatures``, m*_k = ``targets`` > 0)
    and W_0 = sqrt(m_0) E, gradient flow dW/dt = -grad gives dM/dt = -2 (G M + M G) with G the
    loss gradient, so every eigenvalue follows the logistic (Lotka-Volterra) equation
    dm_k/dt = lambda_k m_k (1 - m_k / m*_k), lambda_k = 4 c_k m*_k, with solution
    m_k(t) = m*_k / (1 + (m*_k / m_0 - 1) exp(-lambda_k t)) and switch-on time
    t_k = log(m*_k / m_0 - 1) / lambda_k. If lambda_k = C k^-a and c_k m*_k^2 = C' k^-b, the
    modes on at time t are k <~ (t / log(1/m_0))^(1/a) and the loss of the modes still off is
    L(t) ~ sum_{k > k(t)} k^-b ~ t^-(b - 1)/a: the predicted exponent, fitted on ``window``
    (default: between the 3rd and the (K/10)-th switch-on, clear of the last modes). Saxe et al. (2014) for the modes.
    """
    m_star = np.asarray(targets, float)
    c = np.asarray(curvatures, float) * np.ones_like(m_star)
    times = np.asarray(times, float)
    if np.any(m_star <= 0) or np.any(c <= 0) or not 0 < init < np.min(m_star):
        raise ShapeError("mode dynamics: targets and curvatures must be positive and the "
                         "initial eigenvalue below every target")
    lam = 4 * c * m_star
    # m*/(1 + (m*/m0 - 1) e^-lam t) in logs, exact for any m0 (1e-300 included)
    modes = m_star * np.exp(-np.logaddexp(0.0, np.log(m_star / init - 1.0)
                                          - np.outer(times, lam)))
    loss = 0.5 * np.sum(c * (modes - m_star) ** 2, axis=1)
    t_on = np.log(m_star / init - 1.0) / lam
    order = np.sort(t_on)
    if window is None:
        window = (order[2], order[max(3, m_star.size // 10)])
    k = np.arange(1, m_star.size + 1)
    a = -np.polyfit(np.log(k), np.log(lam), 1)[0]
    b = -np.polyfit(np.log(k), np.log(c * m_star ** 2), 1)[0]
    fit = power_law_fit(times, loss, *window, predicted=(b - 1) / a)  # type: ignore[misc]
    return ModeDynamics(times=times, modes=modes, loss=loss, switch_on=t_on, fit=fit)
