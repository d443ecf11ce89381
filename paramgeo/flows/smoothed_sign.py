"""The dual of smoothed sign descent on separable data: its KL recursion and rate envelope.

With the exponential loss L(w) = (1/N) sum_i exp(-z_i . w) (z_i = y_i x_i) and the loss-tied
annealing eps_k = delta L(w_k), smoothed sign descent w_{k+1} = w_k + eta s(p_k) is exactly
entropic mirror descent on the simplex (docs/flows.md, "Smoothed sign descent"):

    p_{k+1} = p_k * exp(-eta g_k) / Z_k,   g_k = grad_p F(p_k) = Z s(p_k),
    F(p) = sum_j h_delta((Z^T p)_j),  h_delta(u) = |u| - delta log(delta + |u|),
    s(p) = Z^T p / (|Z^T p| + delta),  Z_k = sum_i p_k,i exp(-eta g_k,i),

with p_k = softmax(-Z w_k). For every u in the simplex the KL divergence obeys the exact
recursion (expand log(p_k / p_{k+1}) = eta g_k + log Z_k)

    KL(u || p_{k+1}) = KL(u || p_k) + eta <g_k, u> + log Z_k,

and, by Hoeffding's lemma (log Z_k <= -eta <g_k, p_k> + eta^2 R_k^2 / 8, R_k = max g_k -
min g_k) and convexity of F (F(p_k) - F(u) <= <g_k, p_k - u>),

    KL(u || p_{k+1}) <= KL(u || p_k) - eta (F(p_k) - F(u)) + eta^2 R_k^2 / 8.

Summing over k < t gives the envelope

    min_{k < t} F(p_k) - F(u) <= KL(u || p_0) / (eta t) + eta R^2 / 8,   R = max_k R_k,

whose minimum over eta, R sqrt(KL(u || p_0) / (2 t)), decays like S_t^(-1/2) in the
cumulative step S_t = eta t at the step eta = sqrt(8 KL / (R^2 t)) (Beck and Teboulle 2003,
"Mirror descent and nonlinear projected subgradient methods for convex optimization").
|g_k,i| <= |z_i|_1 since |s|_inf < 1, so R <= 2 max_i |z_i|_1.

The endpoint limits (:func:`endpoint_limits`): the limit direction s_bar(delta) = s(p*) with
p* = argmin_simplex F solves max_s min_i <z_i, s> - delta B(s) (KKT: delta grad B(s_bar) =
Z^T p*, p*_i > 0 only on the smallest margins). As delta -> 0 its l_inf-normalised margin
tends to the l_inf max margin gamma_inf = max_{|s|_inf <= 1} min_i <z_i, s> of sign descent
(Gunasekar, Lee, Soudry, Srebro 2018), the gap shrinking like delta^1 (at an l_inf solution
with coordinates on the box, the barrier gradient 1 / (1 - |s_j|) balances O(1) multipliers,
so those coordinates move O(delta) inside and the margin O(delta) down); as delta -> infinity
s = v / (|v| + delta) = v / delta - v |v| / delta^2 + ..., so s_bar turns to the l2 max-margin
direction and 1 - cos(s_bar, w_l2) shrinks like delta^-2 (the O(1/delta) angle squared).

Fixed smoothing (:func:`fixed_epsilon`): with a constant eps instead of eps_k = delta L(w_k),
v = -grad L = L(w) Z^T p gives s = v / (|v| + eps) = u / (|u| + eps / L), u = Z^T p: the
loss-tied dynamics at the effective smoothing delta_k = eps / L(w_k), which grows as the loss
decays. While delta_k < |u_k|_inf the steps are sign-like and the loss falls exponentially;
after the crossover (delta_k > |u_k|_inf) s ~ L u / eps and the run is gradient descent on L
with step eta / eps, whose iterates w ~ w_hat log k + w_tilde (Soudry et al. 2018) give
L(w_k) ~ (1/k) (eps / eta) sum_n alpha_n = eps / (eta gamma_2^2 k) (sum_n alpha_n =
|w_hat|^2 = 1 / gamma_2^2, gamma_2 the l2 max margin): the rate crosses over from exponential
to 1/k, and the direction from the l_inf-like limit to the l2 max-margin direction.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np

from ..contract.parameterization import Parameterization, ParamSpec, Size
from ..errors import ParamgeoError, ShapeError
from ..losses.predictor import max_margin
from ..results import Result
from .online import _line_fit

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


@dataclasses.dataclass(frozen=True, kw_only=True)
class SignDualRun(Result):
    """The dual iterates p_k (k = 0..steps) of smoothed sign descent and their KL recursion
    against the reference ``u`` (default: the last iterate): ``F`` F(p_k); ``kl`` KL(u||p_k);
    ``identity_residual`` max_k |KL(u||p_{k+1}) - KL(u||p_k) - eta <g_k, u> - log Z_k|;
    ``bound_slack`` the right side minus the left side of the Hoeffding inequality per step
    (>= 0); ``envelope`` KL(u||p_0) / (eta t) + eta R^2 / 8 at t = 1..steps and ``best_gap``
    min_{k<t} F(p_k) - F(u) beside it; ``w`` the primal iterates w_k = eta sum_{j<k} s(p_j);
    ``kkt`` the complementary slackness sum_i p_k,i (<z_i, s_k> - min_j <z_j, s_k>) of the
    limit's KKT conditions (stationarity delta grad B(s_k) = Z^T p_k holds exactly for
    s_k = s(p_k), since grad B(s) = s / (1 - |s|))."""

    delta: float
    lr: float
    p: np.ndarray
    w: np.ndarray
    F: np.ndarray
    kl: np.ndarray
    identity_residual: float
    bound_slack: np.ndarray
    R: float
    envelope: np.ndarray
    best_gap: np.ndarray
    kkt: np.ndarray

    def __str__(self):
        t = len(self.envelope)
        return (f"smoothed sign descent dual, delta {self.delta:g}, eta {self.lr:g}, {t} steps: "
                f"F {self.F[0]:.6g} -> {self.F[-1]:.6g}; KL recursion residual "
                f"{self.identity_residual:.1e}; min bound slack {self.bound_slack.min():.2e}; "
                f"best gap {self.best_gap[-1]:.3e} <= envelope {self.envelope[-1]:.3e}")


def _kl(u, p):
    mask = u > 0
    return float(np.sum(u[mask] * np.log(u[mask] / p[mask])))


def sign_dual(X: ArrayLike, y: ArrayLike, delta: float, lr: float, steps: int,
              u: Optional[ArrayLike] = None) -> SignDualRun:
    """Run the dual iteration of smoothed sign descent (module docstring) from p_0 uniform
    (w_0 = 0) for ``steps`` steps and record its KL recursion, Hoeffding bound and envelope
    against ``u`` (a point of the simplex; default the last iterate). Raises ShapeError for
    mismatched shapes, ParamgeoError for delta <= 0, lr <= 0, steps < 1 or a ``u`` off the
    simplex."""
    X, y = np.asarray(X, float), np.asarray(y, float)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ShapeError(f"X must be (N, d) and y (N,), got {X.shape} and {y.shape}")
    if not (delta > 0 and lr > 0 and int(steps) >= 1):
        raise ParamgeoError(f"need delta > 0, lr > 0 and steps >= 1 (got {delta}, {lr}, "
                            f"{steps})")
    steps = int(steps)
    Z = y[:, None] * X
    N = Z.shape[0]
    p = np.full(N, 1.0 / N)
    w = np.zeros(Z.shape[1])
    P, W, G, logZ, F, kkt = [p], [w], [], [], [], []
    for _ in range(steps):
        v = Z.T @ p
        s = v / (np.abs(v) + delta)
        F.append(dual_objective(Z, p, delta))
        g = Z @ s
        kkt.append(float(p @ (g - g.min())))
        e = p * np.exp(-lr * (g - g.min()))  # shifted for range; log Z_k restored below
        logZ.append(float(np.log(e.sum()) - lr * g.min()))
        p = e / e.sum()
        w = w + lr * s
        G.append(g)
        P.append(p)
        W.append(w)
    F.append(dual_objective(Z, p, delta))
    P, W, G, F, logZ = np.array(P), np.array(W), np.array(G), np.array(F), np.array(logZ)
    u = P[-1] if u is None else np.asarray(u, float)
    if u.shape != (N,) or np.any(u < 0) or abs(u.sum() - 1) > 1e-9:
        raise ParamgeoError(f"u must be a point of the simplex in R^{N}")
    kl = np.array([_kl(u, q) for q in P])
    residual = float(np.max(np.abs(kl[1:] - kl[:-1] - lr * (G @ u) - logZ)))
    Rk = G.max(axis=1) - G.min(axis=1)
    slack = kl[:-1] - lr * (F[:-1] - dual_objective(Z, u, delta)) + lr ** 2 * Rk ** 2 / 8 - kl[1:]
    R = float(Rk.max())
    t = np.arange(1, steps + 1)
    envelope = kl[0] / (lr * t) + lr * R ** 2 / 8
    best = np.minimum.accumulate(F[:-1]) - dual_objective(Z, u, delta)
    return SignDualRun(delta=float(delta), lr=float(lr), p=P, w=W, F=F, kl=kl,
                       identity_residual=residual, bound_slack=slack, R=R, envelope=envelope,
                       best_gap=best, kkt=np.array(kkt))


def dual_objective(Z: ArrayLike, p: ArrayLike, delta: float) -> float:
    """The dual objective of smoothed sign descent (module docstring):
    F(p) = sum_j h_delta((Z^T p)_j), h_delta(u) = |u| - delta log(delta + |u|)."""
    v = np.abs(np.asarray(Z, float).T @ p)
    return float(np.sum(v - delta * np.log(delta + v)))


@dataclasses.dataclass(frozen=True, kw_only=True)
class EndpointLimits(Result):
    """s_bar(delta) per delta (rows of ``s_bar``), ``linf_gap`` gamma_inf - min_i <z_i, s_bar> /
    |s_bar|_inf and ``l2_gap`` 1 - cos(s_bar, w_l2), with the power laws fitted below and above
    the window (``linf_exponent``: linf_gap ~ delta^e as delta -> 0; ``l2_exponent``:
    l2_gap ~ delta^-e as delta -> infinity),
    each with its standard error (nan with fewer than 3 deltas on that side)."""

    deltas: np.ndarray
    s_bar: np.ndarray
    gamma_inf: float
    linf_gap: np.ndarray
    l2_gap: np.ndarray
    linf_exponent: float
    linf_error: float
    l2_exponent: float
    l2_error: float

    def __str__(self):
        rows = [f"l_inf max margin {self.gamma_inf:.6g}"]
        rows += [f"  delta {d:<8.3g} l_inf gap {a:.3e}   1 - cos to l2 max margin {b:.3e}"
                 for d, a, b in zip(self.deltas, self.linf_gap, self.l2_gap)]
        rows.append(f"  l_inf gap ~ delta^({self.linf_exponent:.3f} +- {self.linf_error:.3f}); "
                    f"l2 gap ~ delta^-({self.l2_exponent:.3f} +- {self.l2_error:.3f})")
        return "\n".join(rows)


def endpoint_limits(X: ArrayLike, y: ArrayLike, deltas: Sequence[float],
                    window: tuple[float, float] = (0.1, 5.0)) -> EndpointLimits:
    """The limit direction s_bar(delta) of smoothed sign descent for each delta, from the dual
    min_{p in simplex} F(p) (SLSQP), against both endpoints: the l_inf max margin gamma_inf
    (linear program max t s.t. Z s >= t, |s|_inf <= 1, scipy's linprog) as delta -> 0 and the
    l2 max-margin direction (:func:`paramgeo.losses.max_margin`) as delta -> infinity (module
    docstring). The power laws are fitted on delta < window[0] and delta > window[1].
    ShapeError for non-separable data; ParamgeoError for a delta <= 0."""
    from scipy.optimize import linprog, minimize

    X, y = np.asarray(X, float), np.asarray(y, float)
    deltas = np.sort(np.asarray(deltas, float).ravel())
    if deltas.size == 0 or np.any(deltas <= 0):
        raise ParamgeoError("deltas must be positive")
    w_l2 = max_margin(X, y).direction  # ShapeError when not separable
    Z = y[:, None] * X
    N, d = Z.shape
    lp = linprog(np.r_[np.zeros(d), -1.0], A_ub=np.c_[-Z, np.ones(N)], b_ub=np.zeros(N),
                 bounds=[(-1, 1)] * d + [(None, None)])
    gamma_inf = -float(lp.fun)
    S = []
    for delta in deltas:
        def grad(p, delta=delta):
            v = Z.T @ p
            return Z @ (v / (np.abs(v) + delta))
        res = minimize(lambda p, delta=delta: dual_objective(Z, p, delta), np.full(N, 1.0 / N),
                       jac=grad, method="SLSQP", bounds=[(0, 1)] * N,
                       constraints=[{"type": "eq", "fun": lambda p: p.sum() - 1,
                                     "jac": lambda p: np.ones(N)}],
                       options={"ftol": 1e-15, "maxiter": 1000})
        v = Z.T @ res.x
        S.append(v / (np.abs(v) + delta))
    S = np.array(S)
    linf = gamma_inf - np.min(S @ Z.T, axis=1) / np.max(np.abs(S), axis=1)
    l2 = 1.0 - (S @ w_l2) / np.linalg.norm(S, axis=1)

    def fit(mask, values, sign):
        if mask.sum() < 3 or np.any(values[mask] <= 0):
            return math.nan, math.nan
        slope, err, _ = _line_fit(np.log(deltas[mask]), np.log(values[mask]))
        return sign * slope, err

    e_inf, err_inf = fit(deltas < window[0], linf, 1.0)
    e_l2, err_l2 = fit(deltas > window[1], l2, -1.0)
    return EndpointLimits(deltas=deltas, s_bar=S, gamma_inf=gamma_inf, linf_gap=linf, l2_gap=l2,
                          linf_exponent=e_inf, linf_error=err_inf, l2_exponent=e_l2,
                          l2_error=err_l2)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FixedEpsilonRun(Result):
    """Smoothed sign descent with constant eps on the exponential loss: ``losses`` L(w_k),
    ``effective_delta`` eps / L(w_k), ``u_inf`` |Z^T p_k|_inf, ``crossover`` the first k with
    eps / L(w_k) > |u_k|_inf (-1: none), ``tail`` k L(w_k) at the last step against
    ``predicted_tail`` eps / (eta gamma_2^2), and ``cosine`` cos(w_k, w_l2) per step."""

    eps: float
    lr: float
    losses: np.ndarray
    effective_delta: np.ndarray
    u_inf: np.ndarray
    crossover: int
    tail: float
    predicted_tail: float
    cosine: np.ndarray

    def __str__(self):
        return (f"smoothed sign descent, fixed eps {self.eps:g}, eta {self.lr:g}: crossover to "
                f"gradient descent at k = {self.crossover}; k L(w_k) = {self.tail:.5g} at the "
                f"end against eps / (eta gamma_2^2) = {self.predicted_tail:.5g}; cos to the l2 "
                f"max margin {self.cosine[-1]:.4f}")


class _LinearPredictor(Parameterization):
    """phi(w) = w in R^d: the linear predictor's own weights, the map smoothed sign descent
    acts on (J = I; JVP v -> v, VJP g -> g)."""

    name = "linear-predictor"
    size_params = {"d": Size("int", minimum=1, help="number of weights")}
    capabilities = frozenset({"jvp", "vjp", "jacobian"})

    def make_spec(self):
        return ParamSpec(w=(self.d,))

    def make_predictor_shape(self):
        return (self.d,)

    def forward(self, theta):
        return theta

    def random_point(self, rng):
        return rng.standard_normal(self.d)

    def jvp(self, theta, v):
        return v.copy()

    def vjp(self, theta, w):
        return w.copy()

    def jacobian(self, theta):
        return np.eye(self.d)


def fixed_epsilon(X: ArrayLike, y: ArrayLike, eps: float, lr: float, steps: int) -> FixedEpsilonRun:
    """Run smoothed sign descent with constant ``eps`` (``SmoothedSignDescent(eps,
    anneal="constant")`` through :func:`paramgeo.flows.gradient_descent` on the linear
    predictor) on the exponential loss from w_0 = 0 and record the crossover from sign-like to
    gradient-descent steps (module docstring): the effective smoothing eps / L(w_k) against
    |Z^T p_k|_inf, and the 1/k loss tail k L(w_k) against its closed form eps / (eta gamma_2^2).
    ShapeError for non-separable data; ParamgeoError for eps <= 0, lr <= 0 or steps < 1."""
    from ..losses.predictor import Exponential
    from ..dynamics.optimizers import SmoothedSignDescent
    from .descent import gradient_descent

    X, y = np.asarray(X, float), np.asarray(y, float)
    if not (eps > 0 and lr > 0 and int(steps) >= 1):
        raise ParamgeoError(f"need eps > 0, lr > 0 and steps >= 1 (got {eps}, {lr}, {steps})")
    mm = max_margin(X, y)
    Z = y[:, None] * X
    d = Z.shape[1]
    traj = gradient_descent(_LinearPredictor(d=d), Exponential(X, y),
                            np.zeros(d), int(steps), lr, record_every=1, conserved=False,
                            optimizer=SmoothedSignDescent(eps=eps, anneal="constant"))
    W, L = np.asarray(traj.thetas), np.asarray(traj.losses, float)
    logits = -W @ Z.T
    P = np.exp(logits - logits.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    u_inf = np.max(np.abs(P @ Z), axis=1)
    delta = eps / L
    crossed = np.flatnonzero(delta > u_inf)
    norms = np.linalg.norm(W, axis=1)
    cosine = np.where(norms > 0, (W @ mm.direction) / np.where(norms > 0, norms, 1.0), 0.0)
    k = len(L) - 1
    return FixedEpsilonRun(eps=float(eps), lr=float(lr), losses=L, effective_delta=delta,
                           u_inf=u_inf, crossover=int(crossed[0]) if crossed.size else -1,
                           tail=float(k * L[-1]), predicted_tail=float(eps / (lr * mm.margin ** 2)),
                           cosine=cosine)
