"""True and spurious critical points of a loss L = ell o phi.

Critical points of a loss (:func:`loss_point`): for L = ell o phi,
grad L = J^T grad ell(phi(theta)); a critical point is *true* when grad ell(phi(theta)) = 0 and
*spurious* when only J^T grad ell = 0 (created by the parameterization). The Hessian

    H = J^T Hess(ell) J + sum_i (grad ell)_i Hess(phi_i),
    (sum_i g_i Hess phi_i) v = (d/dt J(theta + t v))^T g,

is restricted to the horizontal space Q (orthonormal complement of the vertical space, which
lies in ker H at a critical point since L is constant on orbits) and its signature decides
minimum / strict saddle / degenerate (Ge, Jin, Zheng 2017, "No spurious local minima in
nonconvex low rank problems"; Levin, Kileel, Boumal 2022, "The effect of smooth
parametrizations on nonconvex optimization landscapes").
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import TYPE_CHECKING, Optional

import numpy as np

from ..geometry.jacobian import vertical_space

from ..linalg.numerics import decide_rank, null_basis, policy_of
from ..losses.predictor import loss_hessian
from ..results import Result

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..losses.predictor import Loss
    from ..linalg.numerics import RankPolicy
    from ..contract.parameterization import Parameterization


@dataclasses.dataclass(frozen=True, kw_only=True)
class LossPoint(Result):
    """First- and second-order information of L = ell o phi at theta.

    Attributes:
        name: the plugin's name.
        grad_norm: |grad L| = |J^T grad ell|.
        loss_grad_norm: |grad ell(phi(theta))|.
        kind: "true critical", "spurious critical" or "not critical".
        signature: (positive, negative, zero) eigenvalue counts of H on the horizontal space.
        verdict: "minimum", "strict saddle", "degenerate" (or "not critical").
        horizontal_dim: the dimension of the horizontal space.
        eigenvalues: the eigenvalues of H_Q = Q^T H Q, ascending.
        value: L(theta).
        tol: eigenvalues with |lambda| <= tol count as zero (the rank policy).
        near_degenerate: some |lambda| lies within the policy's band of tol.
        closest: the |lambda| closest to tol on a log scale.
    """

    name: str
    grad_norm: float
    loss_grad_norm: float
    kind: str
    signature: tuple
    verdict: str
    horizontal_dim: int
    eigenvalues: np.ndarray
    value: float
    tol: float = 0.0
    near_degenerate: bool = False
    closest: float = float("nan")

    def __str__(self):
        p, n, z = self.signature
        text = (f"{self.name}: {self.kind}; {self.verdict}\n"
                f"  L = {self.value:.6g}, |grad L| = {self.grad_norm:.3g}, "
                f"|grad ell| = {self.loss_grad_norm:.3g}\n"
                f"  Hessian on the horizontal space (dim {self.horizontal_dim}): "
                f"{p} positive, {n} negative, {z} zero")
        if self.near_degenerate:
            text += (f"\n  NEAR-DEGENERATE: eigenvalue {self.closest:.3g} vs tol {self.tol:.3g}; "
                     "the signature is decided near the tolerance")
        return text


def loss_point(param: Parameterization, loss: Loss, theta: ArrayLike, gtol: float = 1e-8,
               policy: Optional[RankPolicy] = None) -> LossPoint:
    """Critical-point analysis of the loss L = ell o phi at theta.

    grad L = J^T g with g = grad ell(phi(theta)). theta is critical when |grad L| <= gtol;
    *true* when also |g| <= gtol, *spurious* otherwise (the parameterization created it).
    The Hessian H (:func:`loss_hessian`) is restricted to the horizontal space
    Q = (vertical space)^perp, H_Q = Q^T H Q; its eigenvalues count as zero when
    |lambda| <= max(atol, rtol max|lambda|), the one tolerance policy. No negative and no zero
    eigenvalue: minimum (strict on the quotient); a negative one: strict saddle; else
    degenerate. An eigenvalue within the policy's band of the tolerance sets
    ``near_degenerate`` and warns (NumericalDoubtWarning).

    Args:
        param: the parameterization phi: R^n -> R^m.
        loss: the loss ell on predictors.
        theta: the point, shape (n,).
        gtol: the gradient norm below which theta is critical.
        policy: the tolerance policy of the zero eigenvalues; None: the default.

    Returns:
        The :class:`LossPoint`.

    Raises:
        ShapeError: theta is not n finite numbers.

    Examples:
        >>> import numpy as np, paramgeo
        >>> from paramgeo.critical import loss_point
        >>> from paramgeo.losses.predictor import LinearMeasurements
        >>> p = paramgeo.get("hadamard", p=2)                   # phi(u, v) = u * v
        >>> loss = LinearMeasurements(np.eye(2), [1.0, 2.0])
        >>> at_zero = loss_point(p, loss, np.zeros(4))           # grad L = 0, grad ell != 0
        >>> at_zero.kind, at_zero.verdict
        ('spurious critical', 'strict saddle')
    """
    from ..losses.predictor import pullback

    policy = policy_of(param, policy)
    theta = param.as_theta(theta)
    value, grad = pullback(param, loss)
    gL = np.asarray(grad(theta))
    g = np.asarray(loss.grad(np.asarray(param.forward_flat(theta))))
    gn, ln = float(np.linalg.norm(gL)), float(np.linalg.norm(g))
    if gn <= gtol:
        kind = "true critical" if ln <= gtol else "spurious critical"
    else:
        kind = "not critical"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        V = vertical_space(param, theta, policy)
    Q = null_basis(V.T, policy, warn=False)[0] if V.shape[1] else np.eye(param.n)
    HQ = Q.T @ loss_hessian(param, loss, theta) @ Q
    lam = np.linalg.eigvalsh(0.5 * (HQ + HQ.T))
    decision = decide_rank(np.abs(lam), policy, what="the Hessian on the horizontal space")
    tol = decision.tol
    pos, neg = int(np.sum(lam > tol)), int(np.sum(lam < -tol))
    zero = int(lam.size - pos - neg)
    if kind == "not critical":
        verdict = "not critical"
    elif neg:
        verdict = "strict saddle"
    elif zero:
        verdict = "degenerate"
    else:
        verdict = "minimum"
    return LossPoint(name=param.name, grad_norm=gn, loss_grad_norm=ln, kind=kind,
                     signature=(pos, neg, zero), verdict=verdict, horizontal_dim=int(Q.shape[1]),
                     eigenvalues=lam, value=float(value(theta)), tol=float(tol),
                     near_degenerate=bool(decision.doubtful), closest=float(decision.closest))
