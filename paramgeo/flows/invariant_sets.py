"""The flow-invariant coordinate subspaces of deep diagonal networks and the trajectory's visits
to them, beside Algorithm 1's steps.

For the depth-L diagonal network (``deep-diagonal``; signed beta = u^L - v^L, or product
beta = w_1 * ... * w_L) the gradient of L(theta) = ell(beta(theta)) in a parameter c of
coordinate i is (d beta_i / d c) d ell / d beta_i, and d beta_i / d c carries the factor
c^(L-1) (signed: d beta_i / d u_i = L u_i^(L-1)) or the product of the other layers' weights
(product). So for L >= 2 every coordinate subspace

    M_(P, N) = {u_i = 0 for i not in P, v_i = 0 for i not in N}     (signed)

(for the product variant: w_(l,i) = 0 in at least two layers l for each i outside the support
S, so that every partial derivative, the product of the other layers, vanishes; one zero layer
is not enough) is invariant under gradient flow, for every loss: these are the structural invariant manifolds (SIMs), one per
signed support. :func:`invariant_residual` measures the field's components across M at a point
of M (exactly 0).

From init_at_scale(alpha) no coordinate is exactly zero, but in the time tau = t / alpha^(2-L)
the flow passes close to a sequence of these manifolds: a parameter that has not switched on
keeps its size of order alpha, a switched-on one is of order 1. :func:`sim_visits` integrates
the flow (log chart, exact Jacobian, as in ``paramgeo.mirror.implicit_bias``), labels each
recorded point by the signed support of beta (sign(beta_i) where |beta_i| > alpha^(L/2), the
geometric middle between alpha^L and 1), merges equal consecutive labels into visits (which manifold, entered
and left when, in tau) and sets them beside Algorithm 1's steps
(:func:`paramgeo.flows.vanishing_init_limit`: the supports of its saddles and its jump times).

Reference: Zhao, Wang, Yang, Bai, Zhang (2026), diagonal linear networks under infinitesimal
initialisation (Algorithm 1 and the structural invariant manifolds); Pesme, Flammarion (2023),
"Saddle-to-saddle dynamics in diagonal linear networks".
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from ..errors import ShapeError
from ..losses.predictor import LinearMeasurements, pullback
from ..results import Result

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..contract.parameterization import Parameterization


def _degree(param, theta):
    """The degree L of homogeneity of phi, phi(c theta) = c^L phi(theta) (read at theta and
    2 theta, checked at 3 theta); ShapeError unless L is an integer >= 2."""
    phi1, phi2, phi3 = (np.ravel(param.forward(c * theta)) for c in (1.0, 2.0, 3.0))
    size = float(np.max(np.abs(phi1)))
    if size == 0.0:
        raise ShapeError("invariant subspaces: phi vanishes at the point where its degree "
                         "of homogeneity is read")
    L = round(float(np.log2(np.max(np.abs(phi2)) / size)))
    if L < 2 or not np.allclose(phi3, 3.0 ** L * phi1, rtol=1e-8, atol=1e-12 * size * 3.0 ** L):
        raise ShapeError(
            f"invariant subspaces: {getattr(param, 'name', '') or type(param).__name__} is not "
            "homogeneous of an integer degree L >= 2 (phi(c theta) = c^L phi(theta)); the "
            "vanishing-initialisation time scale alpha^(2-L) needs it, as a deep diagonal "
            "network has it (paramgeo.get('deep-diagonal', p=..., depth=L))")
    return L


def invariant_residual(param: Parameterization, X: ArrayLike, y: ArrayLike, theta: ArrayLike,
                       off: Any) -> float:
    """max |grad L| over the parameters listed in ``off`` (flat indices, each zero in
    ``theta``) divided by max |grad L|, for L(theta) = |X beta - y|^2 / (2N): 0 when the
    coordinate subspace {theta_j = 0, j in off} is invariant under gradient flow."""
    theta = np.array(param.as_theta(theta), float)
    off = np.asarray(off, int)
    if np.any(theta[off] != 0):
        raise ShapeError("invariant residual: the parameters in `off` must be zero in theta "
                         "(the point must lie on the subspace)")
    grad = pullback(param, LinearMeasurements(X, y))[1](theta)
    return float(np.max(np.abs(grad[off])) / max(float(np.max(np.abs(grad))), 1e-300))


def _label(beta, level):
    """The signed support of beta: sign(beta_i) where |beta_i| > level, else 0."""
    return tuple(int(s) for s in np.sign(beta) * (np.abs(beta) > level))


@dataclasses.dataclass(frozen=True, kw_only=True)
class SIMVisits(Result):
    """The invariant manifolds the flow passes near, in order: ``visits`` a list of
    (signed support, tau entered, tau left) with the support as a tuple of +1 / -1 / 0 per
    coordinate; ``algorithm`` Algorithm 1's steps as (signed support, jump time); ``steps``
    for each of Algorithm 1's steps the index of the visit with its support (visits found in
    order; the others are transits: a coordinate switching off takes a time that shrinks with
    alpha, so the flow passes the manifold of both supports between two steps); ``matched``
    True when every step was found; ``entry_times`` the flow's time of leaving the previous
    step's manifold (the start of the jump) per step, and ``entry_error`` the largest
    |entry / jump - 1| after the first step."""

    alpha: float
    depth: int
    visits: list
    algorithm: list
    steps: list
    matched: bool
    entry_times: list
    entry_error: float

    def __str__(self):
        def name(s):
            return "{" + ", ".join(f"{'+' if v > 0 else '-'}{i}" for i, v in enumerate(s)
                                   if v) + "}"
        step_of = {v: k for k, v in enumerate(self.steps)}
        lines = [f"depth {self.depth}, alpha {self.alpha:g}: invariant manifolds visited "
                 "(tau = t / alpha^(2-L))",
                 f"{'support':>22} {'flow enters':>12} {'leaves':>10} {'Algorithm 1 jump':>17}"]
        for i, (s, t0, t1) in enumerate(self.visits):
            k = step_of.get(i)
            alg = "transit" if k is None else f"{self.algorithm[k][1]:.4g}"
            lines.append(f"{name(s):>22} {t0:12.4g} {t1:10.4g} {alg:>17}")
        lines.append(("Algorithm 1's supports visited in order, jumps started within "
                      f"{self.entry_error:.2%} of its times") if self.matched else
                     "Algorithm 1's supports not all visited in order: "
                     + " -> ".join(name(s) for s, _ in self.algorithm))
        return "\n".join(lines)


def sim_visits(param: Parameterization, X: ArrayLike, y: ArrayLike, alpha: float,
               records: int = 600, t_final: Optional[float] = None,
               atol: float = 1e-12) -> SIMVisits:
    """Integrate gradient flow from ``param.init_at_scale(alpha)`` on |X beta - y|^2 / (2N)
    and list the invariant manifolds it visits (module docstring) beside Algorithm 1.

    Read through the contract only: ``param`` is any diagonal network whose mirror potential
    declares its vanishing-initialisation limit (``Potential.limit``, which Algorithm 1 needs)
    and whose phi = beta is homogeneous of an integer degree L >= 2 (read from phi(2 theta) =
    2^L phi(theta); the time scale is alpha^(2-L)). The deep-diagonal plugin at depth >= 3 is
    one."""
    from ..dynamics.trajectory import gradient_flow
    from .saddle import vanishing_init_limit

    X, y = np.asarray(X, float), np.asarray(y, float)
    limit = vanishing_init_limit(param, X, y, alpha)
    L = _degree(param, param.random_point(np.random.default_rng(0)))
    scale = alpha ** (2 - L)
    seq = limit.sequence
    t_end = (t_final if t_final is not None else 2.0 * float(seq.times[-1]) + 1.0) * scale
    taus = np.geomspace(1e-3 * max(float(seq.times[1]) if seq.times.size > 1 else 1.0, 1e-6),
                        t_end / scale, int(records))
    traj = gradient_flow(param, LinearMeasurements(X, y), param.init_at_scale(alpha), t_end,
                         atol=atol, rtol=1e-10, t_eval=taus * scale, chart="log",
                         time_scale=scale, exact_jacobian=True, conserved=False)
    level = alpha ** (L / 2)
    labels = [_label(np.ravel(param.forward(th)), level) for th in traj.thetas]
    times = np.asarray(traj.times) / scale
    visits: list = []
    for lab, t in zip(labels, times):
        if visits and visits[-1][0] == lab:
            visits[-1][2] = float(t)
        else:
            visits.append([lab, float(t), float(t)])
    visits = [tuple(v) for v in visits]
    algorithm = [(tuple(int(v) for v in np.sign(np.where(np.abs(b) > 1e-12, b, 0.0))),
                  float(t)) for b, t in zip(seq.saddles, seq.times)]
    steps, at = [], 0
    for support, _ in algorithm:  # Algorithm 1's supports as a subsequence of the visits
        while at < len(visits) and visits[at][0] != support:
            at += 1
        if at == len(visits):
            break
        steps.append(at)
        at += 1
    matched = len(steps) == len(algorithm)
    entries = [visits[steps[0]][1]] + [visits[i + 1][1] for i in steps[:-1]]
    errors = [abs(e / a[1] - 1) for e, a in zip(entries[1:], algorithm[1:])]
    return SIMVisits(alpha=float(alpha), depth=L, visits=visits, algorithm=algorithm, steps=steps, matched=matched, entry_times=entries,
                     entry_error=float(max(errors)) if matched and errors else float("nan"))
