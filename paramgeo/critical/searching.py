"""Critical points of phi from random starts (:func:`search`), each classified.
"""

import dataclasses
import math

import numpy as np

from ..errors import ParamgeoError
from ..linalg.numerics import as_rng, policy_of
from ..io.progress import shows_progress
from ..results import Result, title
from .classification import classify
from .patterns import generic_values


@dataclasses.dataclass(frozen=True)
class SearchResult(Result):
    """Critical points found from random starts, classified.

    ``points``: per start, the final s_R/s_1, verdict, causes, stratum, the stratum it was
    certified close to (``near``, with distance and decay exponent), and theta for critical
    points the engine could not explain.
    """

    name: str
    sizes: dict
    generic_rank: int
    starts: int
    critical: int  # verdict critical under the tolerance policy
    near_singular: int  # regular but within the tolerance band (did not reach the tolerance)
    subnetwork: int  # critical with cause subnetwork (on the stratum or certified near it)
    near_subnetwork: int  # of those, certified near rather than exactly on it
    dependent_weights: int  # critical with cause dependent-weights
    orbit_degenerate: int
    other: int  # critical with cause other
    explained: int  # critical and explained (no cause other)
    points: tuple
    interrupted: bool = False  # Ctrl-C: ``points`` holds the len(points) < starts finished starts

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
def search(param, starts=20, seed=0, maxiter=100, policy=None, snap_max=0.1, progress="auto",
           precision=None):
    """Look for critical points of phi from ``starts`` random starts and classify each one.

    Minimises log(s_R(J(theta)) / s_1(J(theta))) over the unit sphere |theta| = 1 (theta =
    x/|x|, so the search cannot shrink theta to 0) with scipy's L-BFGS-B, R the generic rank,
    the gradient from ``param.hessian_vp``, then polishes with Newton steps on
    s_R/s_1 (:func:`_newton_polish`). Each end point is classified with the strict policy
    (:func:`classify`). The optimiser often approaches a subnetwork without reaching it
    exactly; :func:`classify` then certifies the point as near a stratum (:func:`near_stratum`,
    conditions within ``snap_max``) when the decay of s_R/s_1 towards that stratum accounts for
    its lost rank, and otherwise counts it ``other`` (its theta is returned). ``precision``:
    digits of the classification (:func:`classify`; None: float64, redone in high precision
    where float64 cannot resolve the approach to a stratum).
    ``progress``: a callable ``progress(done, total)`` called after each start (e.g. the CLI's
    display), True, False, or "auto" (the default: a display with elapsed time and ETA in an
    interactive session; ``paramgeo.io.progress``). A KeyboardInterrupt (Ctrl-C) stops the
    search between or inside starts and returns the finished starts, ``interrupted=True``.
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
    points = []
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
    return SearchResult(param.name, dict(param.sizes), int(R), int(starts), counts["critical"],
                        counts["near_singular"], counts["subnetwork"], counts["near"],
                        counts["dependent"], counts["orbit"], counts["other"],
                        counts["critical"] - counts["other"], tuple(points), interrupted)


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
