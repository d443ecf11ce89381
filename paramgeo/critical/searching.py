"""Critical points of phi from random starts (:func:`search`), each classified.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Callable, Optional, Union

import numpy as np

from ..errors import ParamgeoError
from ..linalg.numerics import as_rng, policy_of
from ..io.progress import shows_progress
from ..results import Result, title
from .classification import classify
from .patterns import generic_values

if TYPE_CHECKING:
    from ..linalg.numerics import RankPolicy
    from ..contract.parameterization import Parameterization


@dataclasses.dataclass(frozen=True, kw_only=True)
class SearchResult(Result):
    """Critical points found from random starts, classified.

    Attributes:
        name: the plugin's name.
        sizes: its sizes.
        generic_rank: R, the generic rank of phi.
        starts: the number of random starts.
        critical: end points critical under the tolerance policy.
        near_singular: end points regular but within the tolerance band.
        subnetwork: critical with cause subnetwork (on the stratum or certified near it).
        near_subnetwork: of those, certified near rather than exactly on it.
        dependent_weights: critical with cause dependent-weights.
        orbit_degenerate: critical with cause orbit-degenerate.
        other: critical with cause other.
        explained: critical and explained (no cause other).
        points: per start: the final s_R/s_1, verdict, causes, stratum, the stratum certified
            close to (``near``, with distance and decay exponent), and theta of critical points
            left unexplained.
        interrupted: Ctrl-C stopped the search; ``points`` holds the finished starts.
    """

    name: str
    sizes: dict
    generic_rank: int
    starts: int
    critical: int
    near_singular: int
    subnetwork: int
    near_subnetwork: int
    dependent_weights: int
    orbit_degenerate: int
    other: int
    explained: int
    points: tuple
    interrupted: bool = False

    def __str__(self):
        done = (f"INTERRUPTED after {len(self.points)} of {self.starts} starts" if
                self.interrupted else f"{self.starts} starts")
        lines = [f"{title(self.name, self.sizes)}: {done}, generic rank {self.generic_rank}",
                 f"  critical {self.critical} (subnetwork {self.subnetwork}, of which near "
                 f"{self.near_subnetwork}; dependent-weights {self.dependent_weights}; "
                 f"orbit-degenerate {self.orbit_degenerate}; other {self.other}); "
                 f"near-singular only {self.near_singular}"]
        for i, p in enumerate(self.points):
            digits = f", {p['precision']} digits" if p.get("precision") else ""
            near = (f" (near {p['near']} at {p['near_distance']:.1e}, t^{p['exponent']:.1f}"
                    f"{digits})" if p["near"] else "")
            lines.append(f"  #{i:<3} s_R/s_1 {p['ratio']:.2e}  {p['verdict']:<8} "
                         f"{','.join(p['causes']) or '-':<28} {p['stratum']}{near}")
        return "\n".join(lines)


def _objective(param, R):
    """f(x) = log(s_R / s_1) of J at theta = x/|x|, with its gradient.

    d s_i = u_i^T dJ v_i, so grad_theta s_i = (d/dt J(theta + t v_i))^T u_i
    = ``param.hessian_vp(theta, u_i, v_i)`` (the contract's Hessian-vector product of
    <u_i, phi>); the chain rule through x -> x/|x| projects out x.
    """

    def f(x):
        nx_ = float(np.linalg.norm(x))
        theta = x / nx_
        U, s, Vt = np.linalg.svd(param.jacobian(theta), full_matrices=False)
        if s[0] <= 0 or s[R - 1] <= 0:
            return -745.0, np.zeros_like(x)
        g = np.zeros_like(x)
        for i, w in ((R - 1, 1.0), (0, -1.0)):
            gi = param.hessian_vp(theta, U[:, i], Vt[i])
            g += w * gi / s[i]
        g = (g - theta * (theta @ g)) / nx_
        return float(np.log(s[R - 1] / s[0])), g

    return f


def _newton_polish(f, x, steps=40, target=1e-15):
    """Newton's method for the root of r(theta) = s_R/s_1 on the sphere: theta <- theta -
    r grad r / |grad r|^2 (then normalised), halving the step until r decreases. L-BFGS on
    log r stalls near the minimum (log r -> -inf has an unbounded gradient); r itself vanishes
    like a distance to the critical set, so Newton converges there quickly."""
    x = x / np.linalg.norm(x)
    val, g = f(x)
    for _ in range(steps):
        r = math.exp(val)
        gr = r * g
        if r < target or not np.any(gr):
            break
        step = r * gr / (gr @ gr)
        for _ in range(30):
            xn = x - step
            xn /= np.linalg.norm(xn)
            vn, gn = f(xn)
            if vn < val:
                break
            step = step / 2
        else:
            break
        x, val, g = xn, vn, gn
    return x


@shows_progress("search (starts)")
def search(param: Parameterization, starts: int = 20, seed: int = 0, maxiter: int = 100,
           policy: Optional[RankPolicy] = None, snap_max: float = 0.1,
           progress: Union[bool, str, Callable[[int, int], None], None] = "auto",
           precision: Optional[int] = None) -> SearchResult:
    """Look for critical points of phi from ``starts`` random starts and classify each one.

    Minimises log(s_R(J(theta)) / s_1(J(theta))) over the unit sphere |theta| = 1 (theta =
    x/|x|, so the search cannot shrink theta to 0) with scipy's L-BFGS-B, R the generic rank,
    the gradient from ``param.hessian_vp``, then polishes with Newton steps on s_R/s_1. Each
    end point is classified with the strict policy (:func:`classify`), which certifies a point
    the optimiser left near a subnetwork as near that stratum (:func:`near_stratum`) when the
    decay of s_R/s_1 accounts for its lost rank, and otherwise counts it ``other``.

    Args:
        param: the parameterization phi: R^n -> R^m (generic rank >= 1).
        starts: the number of random starts (>= 1).
        seed: seed of the starts.
        maxiter: L-BFGS-B iterations per start.
        policy: the tolerance policy; None: the plugin's or the default.
        snap_max: the largest distance to a stratum :func:`near_stratum` certifies.
        progress: a callable progress(done, total) called after each start, True, False, or
            "auto" (a display with elapsed time and ETA in an interactive session;
            :mod:`paramgeo.io.progress`).
        precision: digits of the classification (:func:`classify`; None: float64, redone in
            high precision where float64 cannot resolve the approach to a stratum).

    Returns:
        The :class:`SearchResult`: counts by verdict and cause, and one record per start
        (``points``). A Ctrl-C returns the finished starts with ``interrupted=True``.

    Raises:
        ParamgeoError: generic rank 0 (nothing to search) or a bad number of starts.

    Examples:
        >>> import paramgeo
        >>> from paramgeo.critical import search
        >>> found = search(paramgeo.get("hadamard", p=2), starts=2, seed=0)   # phi = u * v
        >>> found.critical, found.explained, found.points[0]["causes"]
        (2, 2, ['orbit-degenerate', 'subnetwork'])
    """
    from ..contract.arguments import integer, parameterization

    parameterization(param)
    integer(starts, "starts", minimum=1)
    integer(maxiter, "maxiter", minimum=1)  # 0 iterations would report the starts themselves
    policy = policy_of(param, policy)
    rng = as_rng(seed)
    R, _ = generic_values(param, policy)
    if R == 0:
        raise ParamgeoError(f"{param.name} {param.sizes} has generic rank 0: nothing to search")
    if starts < 1:
        raise ParamgeoError(f"starts must be a positive integer, got {starts}")
    f = _objective(param, R)
    points: list = []
    try:
        _search_starts(param, f, starts, maxiter, policy, rng, snap_max, points, progress,
                       precision)
        interrupted = False
    except KeyboardInterrupt:
        interrupted = True
    critical = [p for p in points if p["verdict"] == "critical"]
    counts = {"critical": len(critical),
              "near_singular": sum(p["verdict"] != "critical" and p["near_singular"]
                                   for p in points),
              "subnetwork": sum("subnetwork" in p["causes"] for p in critical),
              "near": sum("subnetwork" in p["causes"] and p["near"] is not None
                          for p in critical),
              "dependent": sum("dependent-weights" in p["causes"] for p in critical),
              "orbit": sum("orbit-degenerate" in p["causes"] for p in critical),
              "other": sum("other" in p["causes"] for p in critical)}
    return SearchResult(name=param.name, sizes=dict(param.sizes), generic_rank=int(R),
                        starts=int(starts), critical=counts["critical"],
                        near_singular=counts["near_singular"], subnetwork=counts["subnetwork"],
                        near_subnetwork=counts["near"], dependent_weights=counts["dependent"],
                        orbit_degenerate=counts["orbit"], other=counts["other"],
                        explained=counts["critical"] - counts["other"], points=tuple(points),
                        interrupted=interrupted)


def _search_starts(param, f, starts, maxiter, policy, rng, snap_max, points, progress,
                   precision):
    """Run the starts of :func:`search`, appending each finished one to ``points`` (so an
    interruption leaves exactly the finished ones)."""
    from scipy.optimize import minimize

    for i in range(starts):
        x0 = param.random_point(rng)
        with np.errstate(all="ignore"):
            res = minimize(f, x0, jac=True, method="L-BFGS-B",
                           options={"maxiter": maxiter, "ftol": 1e-15, "gtol": 1e-12})
            theta = _newton_polish(f, res.x)
        c = classify(param, theta, policy, seed=rng, snap_max=snap_max, precision=precision)
        point = {"ratio": c.relevant_ratio, "verdict": c.verdict, "rank": c.rank,
                 "causes": list(c.causes), "stratum": c.stratum,
                 "stratum_generic_rank": c.stratum_generic_rank,
                 "near": c.near.stratum if c.near else None,
                 "near_distance": c.near.distance if c.near else None,
                 "exponent": c.near.exponent if c.near else None,
                 "order": c.near.order if c.near else None, "precision": c.precision,
                 "subnetwork_distance": c.subnetwork_distance, "near_singular": c.near_singular,
                 "iterations": int(res.nit)}
        if c.verdict == "critical" and "other" in c.causes:
            point["theta"] = theta.tolist()
        points.append(point)
        if progress is not None:
            progress(i + 1, starts)
