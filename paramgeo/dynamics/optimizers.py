"""Optimizers beyond gradient descent, each a steepest descent in a stated geometry.

An :class:`Optimizer` turns the gradient g_t = grad L(theta_t) into an update direction
D_t(g_t); ``paramgeo.flows.gradient_descent(..., optimizer=opt)`` then runs
theta_{t+1} = theta_t - lr_t D_t(g_t) with everything gradient descent has (schedules, minibatches,
recording, stopping rules, a ``Trajectory``).

* :class:`SignDescent`: D(g) = sign(g), the steepest descent direction for the l_inf norm,
  argmin_{|d|_inf <= 1} <g, d> = -sign(g) (Boyd, Vandenberghe 2004, Sec. 9.4; signSGD: Bernstein,
  Wang, Azizzadenesheli, Anandkumar 2018).
* :class:`SmoothedSignDescent`: D_t(g) = g / (|g| + eps_t) elementwise with eps_t annealed to 0;
  the gradient of the smoothed l_1 norm sum_j h_eps(u_j) with h_eps(u) = |u| - eps log(eps +
  |u|), since h_eps'(u) = u / (|u| + eps). On separable data with the exponential loss and
  eps_t = delta L(theta_t) (``anneal="loss"``) it is exactly entropic mirror descent on the dual
  and its normalised iterates theta_t / (lr t) converge to the minimiser of a Burg-type barrier
  over a margin slice (derivation in docs/flows.md, "Smoothed sign descent";
  ``examples/smoothed_sign.py`` checks it).
* :class:`Adam`: D_t(g) = m_hat_t / (sqrt(v_hat_t) + eps), bias-corrected exponential averages
  m_t = b1 m_{t-1} + (1 - b1) g_t, v_t = b2 v_{t-1} + (1 - b2) g_t^2 (Kingma, Ba 2015): steepest
  descent in the diagonal metric diag(sqrt(v_hat_t) + eps), a running estimate of the
  coordinatewise gradient scale; with b1 = b2 = 0 and eps = 0 it is sign descent (Balles,
  Hennig 2018, "Dissecting Adam: the sign, magnitude and variance of stochastic gradients").
"""

from __future__ import annotations

import abc
from typing import Any, Callable, Optional

import numpy as np

from ..errors import ParamgeoError

#: the direction function of one run: direction(t, theta, g) -> the update D_t(g)
Direction = Callable[[int, Any, Any], Any]


class Optimizer(abc.ABC):
    """An update rule D_t(g) for ``gradient_descent``; ``start`` gives a fresh (stateful)
    direction function for one run."""

    name = ""

    @abc.abstractmethod
    def start(self, value: Optional[Callable[[Any], float]], n: int) -> Direction:
        """A callable ``direction(t, theta, g)`` for a run on n parameters; ``value`` is the
        training loss theta -> L(theta) (for rules that read it)."""


class SignDescent(Optimizer):
    """D(g) = sign(g): steepest descent for the l_inf norm (the module docstring)."""

    name = "sign"

    def start(self, value: Optional[Callable[[Any], float]], n: int) -> Direction:
        return lambda t, theta, g: np.sign(g)


#: annealing schedules of SmoothedSignDescent: k -> eps_k given eps and L(theta_k)
ANNEALING = {
    "loss": lambda eps, k, loss: eps * loss,
    "inverse": lambda eps, k, loss: eps / (1.0 + k),
    "constant": lambda eps, k, loss: eps,
}


class SmoothedSignDescent(Optimizer):
    """D_k(g) = g / (|g| + eps_k) elementwise, eps_k annealed to 0 (module docstring).

    ``anneal``: ``"loss"`` (eps_k = eps L(theta_k), the schedule of the Burg-barrier limit: for
    the exponential loss the effective smoothing eps_k / L(theta_k) = eps stays fixed while
    eps_k -> 0 with the loss), ``"inverse"`` (eps / (1 + k)), ``"constant"``, or a callable
    k -> eps_k.
    """

    name = "smoothed-sign"

    def __init__(self, eps=1.0, anneal="loss"):
        if not (np.isfinite(eps) and eps > 0):
            raise ParamgeoError(f"the stability constant eps must be positive, got {eps}")
        if not callable(anneal) and anneal not in ANNEALING:
            raise ParamgeoError(f"unknown annealing {anneal!r}; choose one of "
                                f"{', '.join(ANNEALING)} or pass a callable k -> eps_k")
        self.eps, self.anneal = float(eps), anneal

    def epsilon(self, k: int, loss: float) -> float:
        """eps_k of step k at training loss ``loss``."""
        if callable(self.anneal):
            return float(self.anneal(k))
        return ANNEALING[self.anneal](self.eps, k, loss)

    def start(self, value: Optional[Callable[[Any], float]], n: int) -> Direction:
        needs_loss = self.anneal == "loss"

        def direction(t, theta, g):
            eps = self.epsilon(t, value(theta) if needs_loss else None)
            if eps == 0.0:  # the eps -> 0 limit (e.g. an underflowed loss): sign descent
                return np.sign(g)
            return g / (np.abs(g) + eps)

        return direction


class Adam(Optimizer):
    """Adam (Kingma, Ba 2015): bias-corrected first and second moments, D_t = m_hat / (sqrt(
    v_hat) + eps); diagonal preconditioning (module docstring)."""

    name = "adam"

    def __init__(self, beta1=0.9, beta2=0.999, eps=1e-8):
        for label, b in (("beta1", beta1), ("beta2", beta2)):
            if not 0.0 <= b < 1.0:
                raise ParamgeoError(f"Adam: {label} must lie in [0, 1), got {b}")
        if eps < 0:
            raise ParamgeoError(f"Adam: eps must be non-negative, got {eps}")
        self.beta1, self.beta2, self.eps = float(beta1), float(beta2), float(eps)

    def start(self, value: Optional[Callable[[Any], float]], n: int) -> Direction:
        m, v = np.zeros(n), np.zeros(n)
        b1, b2 = self.beta1, self.beta2

        def direction(t, theta, g):
            m[:] = b1 * m + (1 - b1) * g
            v[:] = b2 * v + (1 - b2) * g * g
            m_hat = m / (1 - b1 ** (t + 1))
            v_hat = v / (1 - b2 ** (t + 1))
            with np.errstate(invalid="ignore", divide="ignore"):
                out = m_hat / (np.sqrt(v_hat) + self.eps)
            return np.where(v_hat == 0, 0.0, out)

        return direction
