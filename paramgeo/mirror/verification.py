"""Verification: gradient flow pushed to predictors against the mirror flow of the potential
(Li, Wang, Lee, Arora 2022, Theorem 4.8), on common times.
"""

import dataclasses

import numpy as np

from ..errors import ParamgeoError
from ..results import Result
from .potentials import mirror_flow, mirror_potential


@dataclasses.dataclass(frozen=True)
class Verification(Result):
    """Parameter gradient flow pushed to predictors vs the predicted mirror flow.

    ``deviation`` = max_t |phi(theta(t)) - beta_mirror(t)|_inf along the recorded times;
    ``relative`` divides by max_t |beta(t)|_inf.
    """

    deviation: float
    relative: float
    t_final: float
    n_records: int
    potential: str
    source: str
    flow_success: bool
    mirror_success: bool


def verify(param, theta0, loss, t_final=100.0, *, n_records=60, log_times=True, rtol=1e-11,
           atol=1e-14, potential=None):
    """Integrate gradient flow on theta and the mirror flow of R side by side; report the
    largest deviation of the predictors along the trajectory (Li et al. 2022, Theorem 4.8:
    they coincide for commuting parameterizations)."""
    from ..dynamics.trajectory import gradient_flow

    theta0 = param.as_theta(theta0)
    potential = potential or mirror_potential(param, theta0)
    traj = gradient_flow(param, loss, theta0, t_final, rtol=rtol, atol=atol,
                         n_records=n_records, log_times=log_times)
    betas, sol = mirror_flow(potential, loss, traj.times, rtol=rtol, atol=atol)
    if betas.shape != traj.predictors.shape:
        raise ParamgeoError(f"the mirror flow stopped early: {sol.message}")
    dev = float(np.abs(betas - traj.predictors).max())
    scale = float(np.abs(traj.predictors).max())
    return Verification(dev, dev / scale if scale > 0 else dev, float(traj.times[-1]),
                        len(traj.times), potential.formula, potential.source,
                        bool(traj.success), bool(sol.success))
