"""The oracle-stopped rate under label flips, route by route, and the sample counts of the
oracle stop and the interpolator (Gaussian mixtures of :class:`paramgeo.flows.risk.GaussianMixture`).

Rate decomposition (:func:`rate_decomposition`). On one sample (X, y) per (N, seed) four
estimators share the data: ridge regression of t = 2 y on x at the penalty the deterministic
equivalent finds best (the equivalent's own Monte Carlo check), ridge at the per-sample oracle
penalty, gradient flow on the same squares stopped at the per-sample oracle time (filter
1 - exp(-tau s) in place of ridge's s / (s + lambda)), and logistic GD at its oracle step
(:func:`paramgeo.flows.risk.early_stopping`). With S = X^T X / N = V diag(s) V^T and
b = V^T X^T (2 y) / N, ridge is V (b / (s + lambda)) and the flow V ((1 - e^(-tau s)) b / s).
Each column's mean over seeds is fitted to N^-rate; the gaps between neighbouring columns split
the distance between the predicted rate (:func:`paramgeo.flows.label_flips.oracle_rate_theory`)
and the measured one into the equivalent's error, the per-sample oracle, the filter and the
loss.

Sample counts (:func:`sample_counts`). For targets eps, N(eps) is the smallest N of the grid
(log-log interpolated between grid points) at which the mean excess is <= eps: for the
oracle stop, and for the max-margin interpolator while the samples are separable (beyond the
separability threshold there is no interpolator). N_GD(eps) is fitted to eps^-k.

References: Buna, Liu, Rebeschini, early stopping of logistic GD under label-flip noise; Wu,
Bartlett, Telgarsky, Yu (2025), "Benefits of early stopping in gradient descent for
overparameterized logistic regression"; Hastie, Montanari, Rosset, Tibshirani (2022).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Optional, Sequence

import numpy as np

from ..errors import ShapeError
from ..losses.predictor import max_margin
from ..results import Result
from .label_flips import oracle_rate_theory
from .risk import early_stopping
from .structure import PowerLaw, power_law_fit

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from .risk import GaussianMixture

ROUTES = ("theory", "ridge_at_theory", "ridge_oracle", "flow_oracle", "logistic_oracle")


def square_loss_estimators(X: ArrayLike, y: ArrayLike, ridges: ArrayLike,
                           times: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Ridge and gradient-flow estimators of the least squares of t = 2 y on x.

    With S = X^T X / N = V diag(s) V^T and c = V^T X^T (2 y) / N: ridge lambda is
    V (c / (s + lambda)) and gradient flow on (1 / 2N) |X w - 2 y|^2 from 0 at time tau is
    V ((1 - exp(-tau s)) c / s) (-> tau c on s = 0). Returns (ridge weights of shape
    (len(ridges), d), flow weights of shape (len(times), d))."""
    X, y = np.asarray(X, float), np.asarray(y, float)
    N = X.shape[0]
    s, V = np.linalg.eigh(X.T @ X / N)
    s = np.maximum(s, 0.0)
    c = V.T @ (X.T @ (2.0 * y)) / N
    lam = np.asarray(ridges, float)[:, None]
    tau = np.asarray(times, float)[:, None]
    ridge = (c / (s + lam)) @ V.T
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = np.where(s > 0, -np.expm1(-tau * s) / np.where(s > 0, s, 1.0), tau)
    return ridge, (gain * c) @ V.T


@dataclasses.dataclass(frozen=True, kw_only=True)
class RateDecomposition(Result):
    """Mean excess 0-1 risk per N (``means[route]``, standard errors ``errors[route]`` over
    ``seeds``; routes in :data:`ROUTES`, ``theory`` without error), the power law fitted to each
    over ``sizes`` (``rates[route]``), the local slopes of the theory and ``capped``, the number
    of logistic runs whose oracle step is their last (the run was too short)."""

    sizes: np.ndarray
    seeds: int
    means: dict
    errors: dict
    rates: dict
    theory_local: np.ndarray
    capped: int

    def __str__(self):
        head = "".join(f" {r:>21}" for r in ROUTES)
        lines = [f"{'N':>6}{head}"]
        for k, n in enumerate(self.sizes):
            cells = []
            for r in ROUTES:
                e = self.errors.get(r)
                cells.append(f"{self.means[r][k]:12.3e}" + (f" +-{e[k]:7.1e}" if e is not None
                                                            else " " * 9))
            lines.append(f"{int(n):6d}" + "".join(f" {c:>21}" for c in cells))
        lines.append("rate" + "".join(f"   {self.rates[r].exponent:8.3f} +- "
                                      f"{self.rates[r].error:5.3f}  " for r in ROUTES))
        return "\n".join(lines)


def rate_decomposition(model: GaussianMixture, sizes: Sequence[int],
                       seeds: Sequence[int] = tuple(range(8)), steps: int = 2000,
                       ridges: Optional[ArrayLike] = None,
                       times: Optional[ArrayLike] = None) -> RateDecomposition:
    """Oracle-stopped excess 0-1 risk over N by five routes on shared samples (module
    docstring): the deterministic equivalent's minimum over ``ridges`` (default 1e-9..1e4, 200
    points), ridge on the samples at the equivalent's best penalty, ridge and gradient flow on
    squares at the per-sample oracle (``times`` default 1e-2..1e9, 200 points) and logistic GD
    at its oracle step (``steps`` log-spaced records). Fits excess ~ N^-rate to each mean."""
    sizes = np.asarray(sorted(int(n) for n in sizes))
    if len(seeds) < 2:
        raise ShapeError("rate decomposition: give at least 2 seeds (the error bars)")
    ridges = np.geomspace(1e-9, 1e4, 200) if ridges is None else np.asarray(ridges, float)
    times = np.geomspace(1e-2, 1e9, 200) if times is None else np.asarray(times, float)
    theory = oracle_rate_theory(model, sizes, ridges)
    rows: dict[str, list[Any]] = {r: [] for r in ROUTES[1:]}
    capped = 0
    for n, lam in zip(sizes, theory.best_ridge):
        per: dict[str, list[float]] = {r: [] for r in ROUTES[1:]}
        for seed in seeds:
            X, y = model.sample(n, np.random.default_rng(seed))
            ridge, flow = square_loss_estimators(X, y, np.append(ridges, lam), times)
            er = model.excess_risk(ridge)
            per["ridge_at_theory"].append(float(er[-1]))
            per["ridge_oracle"].append(float(np.min(er[:-1])))
            per["flow_oracle"].append(float(np.min(model.excess_risk(flow))))
            run = early_stopping(model, n, steps, seed=seed, interpolator=False)
            per["logistic_oracle"].append(run.oracle_excess)
            capped += run.oracle_step >= int(run.steps[-1])
        for r in ROUTES[1:]:
            rows[r].append(per[r])
    means = {"theory": theory.predicted}
    errors = {}
    for r in ROUTES[1:]:
        a = np.array(rows[r])
        means[r] = a.mean(1)
        errors[r] = a.std(1, ddof=1) / np.sqrt(a.shape[1])
    rates = {r: power_law_fit(sizes, means[r], sizes[0], sizes[-1]) for r in ROUTES}
    return RateDecomposition(sizes=sizes, seeds=len(seeds), means=means, errors=errors,
                             rates=rates, theory_local=theory.local_rates, capped=capped)
