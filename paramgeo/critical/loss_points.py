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

import dataclasses
import warnings

import numpy as np

from ..geometry.jacobian import vertical_space

from ..linalg.numerics import decide_rank, null_basis, policy_of
from ..losses.predictor import loss_hessian
from ..results import Result


@dataclasses.dataclass(frozen=True)
class LossPoint(Result):
    """First- and second-order information of L = ell o phi at theta."""

    name: str
    grad_norm: float  # |J^T grad ell|
    loss_grad_norm: float  # |grad ell(phi(theta))|
    kind: str  # "true critical", "spurious critical" or "not critical"
    signature: tuple  # (positive, negative, zero) eigenvalues of H on the horizontal space
    verdict: str  # "minimum", "strict saddle", "degenerate" (or "not critical")
    horizontal_dim: int
    eigenvalues: np.ndarray
    value: float
    tol: float = 0.0  # eigenvalues with |lambda| <= tol count as zero (the rank policy)
    near_degenerate: bool = False  # some |lambda| within the policy's band of tol
    closest: float = float("nan")  # the |lambda| closest to tol (log scale)

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


def loss_point(param, loss, theta, gtol=1e-8, policy=None):
    """Critical-point analysis of L = ell o phi at theta.

    grad L = J^T g with g = grad ell(phi(theta)). theta is critical when |grad L| <= gtol;
    *true* when also |g| <= gtol, *spurious* otherwise (the parameterization created it).
    The Hessian H (:func:`loss_hessian`) is restricted to the horizontal space
    Q = (vertical space)^perp, H_Q = Q^T H Q; its eigenvalues are counted zero when
    |lambda| <= max(atol, rtol max|lambda|): the rank of H_Q decided by the one tolerance
    policy (:func:`paramgeo.geometry.decide_rank` on |lambda|). No negative and no zero
    eigenvalue -> minimum (strict on the quotient), a negative one -> strict saddle, else
    degenerate. When some |lambda| lies within the policy's band of the tolerance the
    signature is doubtful: ``near_degenerate`` is set, the text says so, and a
    NumericalDoubtWarning names the figures.
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
    return LossPoint(param.name, gn, ln, kind, (pos, neg, zero), verdict, int(Q.shape[1]), lam,
                     float(value(theta)), float(tol), bool(decision.doubtful),
                     float(decision.closest))
