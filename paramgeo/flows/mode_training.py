"""The many-mode power law of structure-matrix learning under other training methods (noisy SGD,
Adam) and at finite initial scale, and the fitted exponent's dependence on the fit window.

Setting (:func:`paramgeo.flows.structure.mode_dynamics`): K modes in a shared eigenbasis, one weight
w_k per mode, m_k = w_k^2, loss L = (1/2) sum_k c_k (m_k - m*_k)^2 with gradient
dL/dw_k = 2 c_k (m_k - m*_k) w_k. Gradient flow gives the logistic equation
m_k' = lambda_k m_k (1 - m_k / m*_k), lambda_k = 4 c_k m*_k, switch-on times
t_k = log(m*_k / m_0 - 1) / lambda_k, and with lambda_k ~ k^-a, c_k m*_k^2 ~ k^-b the loss
of the modes still off decays like t^-(b - 1)/a.

Finite initial scale (:func:`local_exponent`). With m*_k ~ k^-beta the switch-on time is
t_k = (log(1/m_0) - beta log k + const) / lambda_k, so d log t_k / d log k =
a - beta / log(m*_k / m_0) and, as L(t_k) ~ k^(1 - b),

    d log L / d log t = -(b - 1) / (a - beta / log(m*_k / m_0))

at the modes k switching on: steeper than (b - 1)/a, by a factor that tends to 1 only when
log(1/m_0) >> beta log k; with K modes the sum of those still off stops at K, a second factor
1 / (1 - (k / K)^(b - 1)) that steepens late windows. The exponent fitted over a window of times is this local exponent
averaged over the modes switching on in the window (:func:`window_exponents` tabulates it).

Other methods (:func:`train_modes`): discrete GD, SGD with Gaussian gradient noise of scale
``noise`` (w <- w - eta (grad + noise xi)), and Adam (:class:`paramgeo.dynamics.optimizers.Adam`),
from w_k = sqrt(m_0), with the switch-on steps (first step with m_k >= m*_k / 2) and the power
law fitted between the 3rd and the (K/10)-th switch-on, as for the flow.

Reference: the structure-matrix universality of near-zero learning and Lotka-Volterra mode
switching (the power law across training methods); Saxe, McClelland, Ganguli (2014).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Optional, Sequence

import numpy as np

from ..errors import ShapeError
from ..dynamics.optimizers import Adam
from ..results import Result
from .structure import PowerLaw, mode_dynamics, power_law_fit

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..dynamics.optimizers import Optimizer

METHODS = ("gd", "sgd", "adam")


def _decay(values):
    k = np.arange(1, values.size + 1)
    return -np.polyfit(np.log(k), np.log(values), 1)[0]


def local_exponent(targets: ArrayLike, curvatures: ArrayLike, init: float, k: int) -> Any:
    """(b - 1) / ((1 - (k / K)^(b - 1)) (a - beta / log(m*_k / m_0))): the local decay exponent
    of the loss at the switch-on of mode k (1-based, scalar or array) of K modes, with a, b,
    beta the fitted decay exponents of lambda_k = 4 c_k m*_k, c_k m*_k^2 and m*_k over k (the
    first factor: the sum of the modes still off stops at K)."""
    m_star = np.asarray(targets, float)
    c = np.asarray(curvatures, float) * np.ones_like(m_star)
    a, b, beta = _decay(4 * c * m_star), _decay(c * m_star ** 2), _decay(m_star)
    k = np.asarray(k, int)
    mk = m_star[k - 1]
    return (b - 1) / ((1 - (k / m_star.size) ** (b - 1)) * (a - beta / np.log(mk / init)))


@dataclasses.dataclass(frozen=True, kw_only=True)
class WindowExponents(Result):
    """The exponent fitted to the closed-form loss over each window of switch-on indices
    (``windows``: pairs (i, j), fit between the i-th and j-th switch-on) for each initial scale
    in ``inits`` (``fitted``, shape (inits, windows)), beside the local exponent at the
    geometric middle mode of the window (``local``) and the m_0 -> 0 limit (``limit``)."""

    inits: np.ndarray
    windows: tuple
    fitted: np.ndarray
    local: np.ndarray
    limit: float

    def __str__(self):
        head = "".join(f"{f'{i}..{j}':>18}" for i, j in self.windows)
        lines = [f"{'m_0':>8}{head}   (fitted / local; limit {self.limit:.4f})"]
        for m0, row, loc in zip(self.inits, self.fitted, self.local):
            lines.append(f"{m0:8.0e}" + "".join(f"{f:9.4f}/{q:.4f}" for f, q in zip(row, loc)))
        return "\n".join(lines)


def window_exponents(targets: ArrayLike, curvatures: ArrayLike, inits: Sequence[float],
                     windows: Sequence[tuple[int, int]], times: ArrayLike) -> WindowExponents:
    """Fit the closed-form loss (:func:`paramgeo.flows.structure.mode_dynamics`) on each window of
    switch-on indices for each initial scale, beside :func:`local_exponent`."""
    m_star = np.asarray(targets, float)
    fitted, local = [], []
    for m0 in inits:
        row, loc = [], []
        t_on = np.sort(np.log(m_star / m0 - 1.0) / (4 * np.asarray(curvatures) * m_star))
        for i, j in windows:
            res = mode_dynamics(m_star, curvatures, m0, times, window=(t_on[i], t_on[j]))
            row.append(res.fit.exponent)
            loc.append(float(local_exponent(m_star, curvatures, m0,
                                            round(math.sqrt((i + 1) * (j + 1))))))
        fitted.append(row)
        local.append(loc)
    c = np.asarray(curvatures, float) * np.ones_like(m_star)
    lim = (_decay(c * m_star ** 2) - 1) / _decay(4 * c * m_star)
    return WindowExponents(inits=np.asarray(inits, float), windows=tuple(windows), fitted=np.array(fitted),
                           local=np.array(local), limit=float(lim))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModeTraining(Result):
    """One training run on the K modes: the loss at recorded times (time = step x lr), the
    switch-on times (first recorded time with m_k >= m*_k / 2; inf if never), ``order`` the
    Spearman correlation of switch-on time with k over the modes switched on (1: sequential,
    largest target first), and the power law fitted between the 3rd and the (K/10)-th
    switch-on beside the m_0 -> 0 prediction (None where that window holds under 3 records:
    the modes switched on together)."""

    method: str
    times: np.ndarray
    loss: np.ndarray
    switch_on: np.ndarray
    order: float
    fit: object

    def __str__(self):
        f = self.fit
        head = f"{self.method}: switch-on order correlation with k {self.order:+.3f}; "
        if f is None:
            return head + "no power-law window (the modes switched on together)"
        return head + (f"loss ~ t^-{f.exponent:.4f} (+- {f.error:.4f}) over t in "
                       f"[{f.t_min:.3g}, {f.t_max:.3g}] ({f.points} points; m_0 -> 0 "
                       f"prediction {f.predicted:.4f})")


def train_modes(targets: ArrayLike, curvatures: ArrayLike, init: float, steps: int, lr: float,
                method: str = "gd", noise: float = 0.0, seed: int = 0, records: int = 400,
                optimizer: Optional[Optimizer] = None) -> ModeTraining:
    """Train w_k (m_k = w_k^2) from sqrt(init) for ``steps`` steps of size ``lr`` with
    ``method``: "gd", "sgd" (gradient plus ``noise`` times a standard normal per step and mode)
    or "adam" (``optimizer`` an :class:`paramgeo.dynamics.optimizers.Adam`, default Adam()); records
    the loss on log-spaced steps and fits the power law (module docstring)."""
    if method not in METHODS:
        raise ShapeError(f"train modes: method {method!r} is unknown; choose one of "
                         f"{', '.join(METHODS)}")
    m_star = np.asarray(targets, float)
    c = np.asarray(curvatures, float) * np.ones_like(m_star)
    if np.any(m_star <= 0) or not 0 < init < m_star.min():
        raise ShapeError("train modes: targets must be positive and the initial eigenvalue "
                         "below every target")
    rng = np.random.default_rng(seed)
    w = np.full(m_star.size, math.sqrt(init))
    direction = (optimizer or Adam()).start(None, m_star.size) if method == "adam" else None
    record = np.unique(np.round(np.geomspace(1, steps, records)).astype(int))
    on = np.full(m_star.size, np.inf)
    times, loss, at = [], [], 0
    for step in range(1, int(steps) + 1):
        g = 2 * c * (w * w - m_star) * w
        if method == "sgd":
            g = g + noise * rng.standard_normal(w.size)
        w = w - lr * (direction(step - 1, w, g) if direction is not None else g)
        if step == record[at]:
            m = w * w
            on[(m >= m_star / 2) & np.isinf(on)] = step * lr
            times.append(step * lr)
            loss.append(0.5 * float(np.sum(c * (m - m_star) ** 2)))
            at += 1
            if not np.all(np.isfinite(w)):
                raise ShapeError(f"train modes: {method} diverged at step {step}; give a "
                                 "smaller lr")
    done = np.isfinite(on)
    sorted_on = np.sort(on)
    hi = max(3, m_star.size // 10)
    if not np.isfinite(sorted_on[hi]):
        raise ShapeError(f"train modes: only {int(done.sum())} modes switched on in "
                         f"{steps} steps; the fit needs {hi + 1}: run longer")
    predicted = (_decay(c * m_star ** 2) - 1) / _decay(4 * c * m_star)
    times, loss = np.array(times), np.array(loss)
    inside = (times >= sorted_on[2]) & (times <= sorted_on[hi])
    fit = power_law_fit(times, loss, sorted_on[2], sorted_on[hi], predicted) \
        if inside.sum() >= 3 else None
    ranks = np.argsort(np.argsort(on[done], kind="stable")).astype(float)
    order = float(np.corrcoef(ranks, np.arange(done.sum(), dtype=float))[0, 1])
    return ModeTraining(method=method, times=times, loss=loss, switch_on=on, order=order, fit=fit)
