"""Verification of a symmetry group against the map it claims to leave invariant.

Two independent checks at random points theta (a rule read from an architecture is refused
when either fails):

* infinitesimal: every generator X(theta) lies in ker J(theta). Checked first on one random
  combination G(theta) r of the generator columns (one product J v: a failing column makes the
  combination fail with probability 1), then column by column to name the failing ones;
  |J X| <= tol |X| sigma, with sigma = |J u| / |u| for a random u (the scale of J);
* finite: phi(g . theta) = phi(theta) for random group elements g (this also checks the
  discrete parts: permutations, sign flips), |phi(g . theta) - phi(theta)| <= tol' |phi|.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np

from ..results import Result

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..contract.parameterization import Parameterization
    from .groups import SymmetryGroup

#: relative tolerances of the infinitesimal and the finite check (float64 models)
GENERATOR_TOL = 1e-7
ACTION_TOL = 1e-7


@dataclasses.dataclass(frozen=True, kw_only=True)
class GroupVerification(Result):
    """What :func:`verify_group` measured: the largest relative |J X| over generator
    combinations (``generator_error``), the largest relative |phi(g theta) - phi(theta)|
    (``action_error``), the failing generator columns (``failing``: indices) and ``passed``."""

    generator_error: float
    action_error: float
    failing: tuple
    passed: bool

    def __str__(self):
        state = "verified" if self.passed else "REFUSED"
        return (f"group {state}: |J X| / (|J| |X|) <= {self.generator_error:.1e}, "
                f"|phi(g theta) - phi(theta)| / |phi| <= {self.action_error:.1e}")


def verify_group(param: Parameterization, group: SymmetryGroup, n_points: int = 2,
                 n_elements: int = 2, seed: int = 0, tol: float = GENERATOR_TOL,
                 action_tol: float = ACTION_TOL,
                 points: Optional[Sequence[ArrayLike]] = None) -> GroupVerification:
    """Check that ``group`` leaves ``param`` invariant: phi(g . theta) = phi(theta).

    At each point: the largest relative |J X| over generator combinations X (generators in
    ker J) and the largest relative |phi(g . theta) - phi(theta)| over random elements g (module
    docstring); for a model whose rank policy was widened by its measured round-off the
    tolerances widen alike.

    Args:
        param: the parameterization phi: R^n -> R^m.
        group: the candidate :class:`SymmetryGroup`.
        n_points: random points (``param.random_point``), unless ``points`` are given.
        n_elements: random group elements per point.
        seed: seed of the points and elements.
        tol: the tolerance of the generator error.
        action_tol: the tolerance of the action error.
        points: the points to test, each of shape (n,).

    Returns:
        The :class:`GroupVerification` (``passed``, ``generator_error``, ``action_error``,
        ``failing``); a failure is reported there, never raised.

    Examples:
    >>> import paramgeo
    >>> p = paramgeo.get("uut", d=3, r=2)
    >>> verify_group(p, p.symmetry()).passed
    True
    >>> from paramgeo.symmetry import ScalingTorus  # U -> c U is no symmetry of U U^T
    >>> verify_group(p, ScalingTorus([[1] * p.n])).passed
    False
    """
    from ..linalg.numerics import DEFAULT_POLICY, policy_of

    # a model computing below float64 (its rank policy set from the measured round-off) is
    # verified at that precision: the tolerances grow by the same factor as its rtol
    widen = max(1.0, policy_of(param).rtol / DEFAULT_POLICY.rtol)
    tol, action_tol = tol * widen, action_tol * widen
    rng = np.random.default_rng(seed)
    points = list(points) if points is not None else [param.random_point(rng)
                                                      for _ in range(n_points)]
    gen_err, act_err, failing = 0.0, 0.0, set()
    for theta in points:
        theta = np.asarray(theta, float)
        u = rng.standard_normal(theta.size)
        scale = float(np.linalg.norm(param.jvp(theta, u))) / float(np.linalg.norm(u))
        scale = max(scale, 1e-300)
        if group.dim:
            G = group.sparse_generators(theta).tocsc()
            v = G @ rng.standard_normal(G.shape[1])
            err = _rel(param, theta, v, scale)
            gen_err = max(gen_err, err)
            if err > tol:
                for k in range(G.shape[1]):
                    col = np.asarray(G[:, k].toarray()).ravel()
                    if _rel(param, theta, col, scale) > tol:
                        failing.add(k)
        base = param.forward_flat(theta)
        size = max(float(np.linalg.norm(base)), 1e-300)
        for _ in range(n_elements):
            moved = group.act(group.random_element(rng), theta)
            act_err = max(act_err, float(np.linalg.norm(param.forward_flat(moved) - base)) / size)
    passed = gen_err <= tol and act_err <= action_tol
    return GroupVerification(generator_error=gen_err, action_error=act_err,
                             failing=tuple(sorted(failing)), passed=passed)


def _rel(param, theta, v, scale):
    norm = float(np.linalg.norm(v))
    if norm == 0.0:
        return 0.0
    return float(np.linalg.norm(param.jvp(theta, v))) / (scale * norm)

