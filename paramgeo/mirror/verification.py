"""Verification: gradient flow pushed to predictors against the mirror flow of the potential
(Li, Wang, Lee, Arora 2022, Theorem 4.8), on common times.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Optional

import numpy as np

from ..errors import ParamgeoError
from ..results import Result
from .potentials import mirror_flow, mirror_potential

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..losses.predictor import Loss
    from ..contract.parameterization import Parameterization
    from .potentials import Potential


@dataclasses.dataclass(frozen=True, kw_only=True)
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


def verify(param: Parameterization, theta0: ArrayLike, loss: Loss, t_final: float = 100.0, *,
           n_records: int = 60, log_times: bool = True, rtol: float = 1e-11, atol: float = 1e-14,
           potential: Optional[Potential] = None) -> Verification:
    """Integrate gradient flow on theta and the mirror flow of R side by side and compare them.

    For a commuting parameterization, phi(theta(t)) of gradient flow on ell o phi equals the
    mirror flow d/dt grad R(beta) = -grad ell(beta) from beta0 = phi(theta0) (Li, Wang, Lee,
    Arora 2022, Theorem 4.8); the largest deviation of the predictors along the run measures it.

    Args:
        param: a commuting parameterization phi: R^n -> R^m.
        theta0: the initialisation, shape (n,).
        loss: the loss ell on predictors.
        t_final: the final time.
        n_records: records of both flows.
        log_times: space the records logarithmically.
        rtol: the integrators' relative tolerance.
        atol: their absolute tolerance.
        potential: the mirror potential R; None: :func:`mirror_potential` at theta0.

    Returns:
        The :class:`Verification`: ``deviation`` max_t |beta_mirror(t) - phi(theta(t))|_inf,
        ``relative`` (over max |phi|), and how both runs ended.

    Raises:
        NotCommutingError: the fields grad phi_i do not commute (no potential).
        ParamgeoError: the mirror flow stopped early.

    Examples:
        >>> import numpy as np, paramgeo
        >>> from paramgeo.losses.predictor import LinearMeasurements
        >>> from paramgeo.mirror import verify
        >>> loss = LinearMeasurements(np.array([[1.0, 2.0]]), [1.0])
        >>> check = verify(paramgeo.get("hadamard", p=2), np.ones(4), loss)
        >>> bool(check.relative < 1e-8), check.source
        (True, 'closed form')
    """
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
    return Verification(deviation=dev, relative=dev / scale if scale > 0 else dev,
                        t_final=float(traj.times[-1]), n_records=len(traj.times),
                        potential=potential.formula, source=potential.source,
                        flow_success=bool(traj.success), mirror_success=bool(sol.success))
