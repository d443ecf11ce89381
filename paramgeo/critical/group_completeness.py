"""How much of the Jacobian's kernel a symmetry group explains.

At a point theta, ker J(theta) contains the vertical space V(theta) (the tangent of the orbit)
whenever G leaves phi invariant; the group explains all of the redundancy when the two have the
same dimension, n - rank J = dim V. The directions of ker J orthogonal to V are what no declared
symmetry accounts for: a symmetry the group misses, or a degeneracy of the point or of the
probe batch (a ReLU unit active on every probe input acts linearly there). They are listed by
the blocks of theta they move.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from ..results import Result

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..contract.parameterization import Parameterization
    from ..linalg.numerics import RankPolicy
    from ..symmetry.groups import SymmetryGroup

#: above this n the kernel is not computed densely: only the dimensions are compared
MAX_DENSE_N = 4000


@dataclasses.dataclass(frozen=True, kw_only=True)
class Completeness(Result):
    """``kernel_dim`` = n - rank J at the point, ``explained`` = dim of the vertical space
    inside it, ``unexplained`` = a tuple of directions, each a dict block -> share of the
    direction's squared norm in that block (largest first; None when n > MAX_DENSE_N)."""

    kernel_dim: int
    explained: int
    unexplained: object
    capped: bool = False  # rank J = m: the predictors bound the rank, not a missing symmetry
    #: how much larger the kernel is here than at generic points (rank J(theta) below the
    #: generic rank R given to :func:`completeness`): the point's own degeneracy
    excess: int = 0

    @property
    def complete(self):
        return self.explained >= self.kernel_dim

    def __str__(self):
        head = (f"the declared group explains {self.explained} of the {self.kernel_dim} "
                "kernel dimensions")
        if self.complete:
            return head + " (every kernel dimension)"
        missing = self.kernel_dim - self.explained
        if self.excess and missing <= self.excess:
            return (head + f"; the {missing} unexplained lie within the {self.excess} by which "
                    "the kernel here exceeds its generic dimension (this point is critical: "
                    "a ReLU unit active or inactive on every probe input acts linearly, for "
                    "example), so the group explains every generic kernel dimension")
        if self.capped:
            return (head + f"; the rank equals the predictor dimension, so {missing} kernel "
                    "dimensions are the predictors' limit, not missing symmetries (a larger "
                    "probe batch raises it)")
        if not self.unexplained:
            return head + f"; {missing} unexplained"
        parts = []
        for direction in self.unexplained[:5]:
            parts.append(", ".join(f"{b} {share:.0%}" for b, share in
                                   list(direction.items())[:3]))
        more = f" (and {missing - 5} more)" if missing > 5 else ""
        return head + f"; {missing} unexplained, moving: " + "; ".join(parts) + more


def completeness(param: Parameterization, theta: Optional[ArrayLike] = None,
                 group: Optional[SymmetryGroup] = None, policy: Optional[RankPolicy] = None,
                 seed: int = 0, generic_rank: Optional[int] = None) -> Completeness:
    """Compare n - rank J(theta) with the orbit dimension of ``group`` (default: the declared
    symmetry) at ``theta`` (default: a random point), and list the kernel directions the group
    does not explain, by block (see the module docstring). The rank decision uses the policy of
    :mod:`paramgeo.geometry.jacobian`. With ``generic_rank`` R, a kernel larger than n - R is reported
    as the point's own excess (``excess``).

    >>> import paramgeo
    >>> str(completeness(paramgeo.get("uvt", m=3, n=3, r=2)))
    'the declared group explains 4 of the 4 kernel dimensions (every kernel dimension)'
    """
    from ..geometry.jacobian import orbit_dim, rank_at
    from ..linalg.numerics import decide_rank, policy_of

    policy = policy_of(param, policy)
    if theta is None:
        theta = param.random_point(np.random.default_rng(seed))
    theta = param.as_theta(theta)
    if group is None:
        group = param.symmetry() if param.provides("symmetry") else None
    if param.n > MAX_DENSE_N:
        kernel = param.n - rank_at(param, theta, policy, warn=False).rank
        explained = orbit_dim(param, theta, policy) if group is not None else 0
        return Completeness(kernel_dim=int(kernel), explained=int(min(explained, kernel)),
                            unexplained=None, capped=param.n - kernel >= param.m)
    J = np.asarray(param.jacobian(theta), float)
    _, s, vt = np.linalg.svd(J, full_matrices=True)
    rank = decide_rank(np.concatenate([s, np.zeros(max(0, param.n - len(s)))]), policy,
                       warn=False).rank
    K = vt[rank:].T  # an orthonormal basis of ker J
    if group is not None and group.dim:
        G = np.asarray(group.generators(theta), float)
        u, sg, _ = np.linalg.svd(G, full_matrices=False)
        Q = u[:, sg > max(sg[0] * 1e-9, 1e-300)] if sg.size else np.zeros((param.n, 0))
    else:
        Q = np.zeros((param.n, 0))
    R = K - Q @ (Q.T @ K)
    ur: Any
    ur, sr, _ = np.linalg.svd(R, full_matrices=False) if R.size else (None, np.zeros(0), None)
    keep = sr > 0.5  # directions of ker J at an angle of more than 30 degrees from V
    missing = int(keep.sum())
    directions: list[dict[str, float]] = []
    for k in np.flatnonzero(keep):
        shares = {name: float(np.sum(ur[sl, k] ** 2)) for name, sl in param.spec.slices.items()}
        directions.append(dict(sorted(((b, v) for b, v in shares.items() if v > 0.01),
                                      key=lambda kv: -kv[1])))
    kernel = param.n - rank
    excess = max(0, int(generic_rank) - rank) if generic_rank is not None else 0
    return Completeness(kernel_dim=int(kernel), explained=int(kernel - missing),
                        unexplained=tuple(directions), capped=rank >= param.m, excess=excess)
