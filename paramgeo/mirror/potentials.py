"""Mirror potentials of commuting parameterizations and the mirror flow they drive.

For a commuting parameterization (rank J = m), gradient flow from theta_0 is a mirror flow

    d/dt grad R(beta) = -grad ell(beta),   i.e.  d beta/dt = -Hess R(beta)^{-1} grad ell(beta),

for a Legendre function R fixed by theta_0 with grad R(beta_0) = 0 (Li et al. 2022, Theorem
4.8). Its convex conjugate is explicit through the flows of the commuting fields: with
psi(mu) = exp(sum_i mu_i X_i)(theta_0) (the time-one flow of the field mu . X),

    grad R*(mu) = Q(mu) = phi(psi(mu)),  Hess R*(mu) = J J^T at psi(mu),
    R*(mu) = int_0^1 <phi(psi(s mu)), mu> ds,

so grad R(beta) = Q^{-1}(beta) (a convex minimisation), R(beta) = <mu, beta> - R*(mu) and
Hess R(beta) = (J J^T)^{-1} at psi(grad R(beta)): :func:`numerical_potential`. Plugins that know
a closed form declare the ``mirror_potential`` capability (the hyperbolic entropy for Hadamard
products, Woodworth et al. 2020).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ParamgeoError
from ..linalg.numerics import decide_rank
from ..results import Result, to_jsonable
from .lie import NotCommutingError, commuting_test

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..losses.predictor import Loss
    from ..linalg.numerics import RankPolicy
    from ..contract.parameterization import Parameterization


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class Potential(Result):
    """A Legendre potential R of the mirror flow started at beta0 = phi(theta0).

    ``value``, ``grad``, ``hessian`` are callables of beta (flat, length m); grad R(beta0) = 0.
    ``conjugate_grad`` (optional) is grad R*(mu), the inverse mirror map. ``formula`` is the
    text of R where known, ``source`` "closed form" or "numerical (Li et al. 2022)".
    ``conjugate_mp`` (optional, separable potentials): mu (a list of mpmath numbers) ->
    (R*(mu), grad R*(mu), the diagonal of Hess R*(mu)) at mpmath's working precision, or None
    outside the domain; :func:`paramgeo.mirror.solve_implicit_bias` then solves the dual
    problem at ``digits`` digits (for potentials whose dual cancels digits near the boundary
    of its domain, :mod:`paramgeo.mirror.separable`). ``limit`` (optional): the
    vanishing-initialisation limit (upper, lower, time_scale), activation thresholds of
    :func:`paramgeo.flows.saddle_to_saddle` in the time t / time_scale.
    """

    formula: str
    source: str
    reference: str
    theta0: np.ndarray
    beta0: np.ndarray
    value: Callable = dataclasses.field(repr=False)
    grad: Callable = dataclasses.field(repr=False)
    hessian: Callable = dataclasses.field(repr=False)
    conjugate_grad: Optional[Callable] = dataclasses.field(default=None, repr=False)
    conjugate_mp: Optional[Callable] = dataclasses.field(default=None, repr=False)
    digits: int = 0
    limit: Optional[tuple] = dataclasses.field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {k: to_jsonable(getattr(self, k))
                for k in ("formula", "source", "reference", "theta0", "beta0")}

    def __str__(self):
        return f"Potential ({self.source}): {self.formula}\n  reference: {self.reference}"


def mirror_potential(param: Parameterization, theta0: ArrayLike, method: str = "auto",
                     check: bool = True, seed: int = 0,
                     policy: Optional[RankPolicy] = None) -> Potential:
    """The Legendre potential R of the mirror flow induced from theta0 (Li et al. 2022).

    For a commuting parameterization, gradient flow on any loss ell o phi moves beta = phi(theta)
    by the mirror flow d/dt grad R(beta) = -grad ell(beta) from beta0 = phi(theta0) (Li, Wang,
    Lee, Arora 2022, Theorem 4.8), so its limit minimises R on the set of interpolators
    (:func:`implicit_bias`). R is the plugin's closed form where it declares one, else built
    from the flows of the commuting fields (:func:`numerical_potential`).

    Args:
        param: the parameterization phi: R^n -> R^m.
        theta0: the initialisation, shape (n,).
        method: "closed" (the plugin's ``mirror_potential``), "numerical" or "auto".
        check: test that the fields commute first (:func:`commuting_test`).
        seed: seed of that test.
        policy: the tolerance policy of that test; None: the default.

    Returns:
        The :class:`Potential` (``formula``, ``value``, ``grad``, ``hessian``, ``beta0``, ...).

    Raises:
        NotCommutingError: with ``check``, the fields do not commute.
        ParamgeoError: an unknown method, or no closed form with method "closed".

    Examples:
        >>> import numpy as np, paramgeo
        >>> from paramgeo.mirror import mirror_potential
        >>> R = mirror_potential(paramgeo.get("hadamard", p=2), np.ones(4))   # phi = u * v
        >>> R.source, np.round(R.grad(R.beta0), 9)      # R is minimal at beta0 = phi(theta0)
        ('closed form', array([0., 0.]))
    """
    theta0 = param.as_theta(theta0)
    if method not in ("auto", "closed", "numerical"):
        raise ParamgeoError(f"method must be auto, closed or numerical, got {method!r}")
    if check:
        test = commuting_test(param, n_points=1, seed=seed, policy=policy, method="numeric")
        if not test.commuting:
            raise NotCommutingError(
                f"{param.name} {param.sizes}: the fields grad phi_i do not commute (largest "
                f"bracket {test.max_bracket:.3g}, relative {test.relative:.3g}); gradient flow "
                "is not a mirror flow for every loss, so there is no mirror potential")
    if method in ("auto", "closed") and param.provides("mirror_potential"):
        pot = param.mirror_potential(theta0)
        if pot is not None:
            return pot
    if method == "closed":
        raise ParamgeoError(
            f"{param.name} has no closed-form mirror potential at this theta0; use "
            "method='numerical'")
    return numerical_potential(param, theta0, policy=policy)


def commuting_flow(param: Parameterization, theta0: ArrayLike, mu: ArrayLike, *,
                   rtol: float = 1e-11, atol: float = 1e-13) -> tuple[NDArray[np.float64], float]:
    """(psi(mu), R*(mu)): the time-one flow of the field sum_i mu_i X_i from theta0 (ODE
    d theta/ds = J(theta)^T mu, DOP853) and R*(mu) = int_0^1 <phi(psi(s mu)), mu> ds, integrated
    alongside (Li et al. 2022, Section 4: grad R*(mu) = phi(psi(mu)) for commuting fields)."""
    from scipy.integrate import solve_ivp

    mu = np.asarray(mu, float)

    def rhs(_, z):
        th = z[:-1]
        return np.append(param.vjp(th, mu), np.asarray(param.forward_flat(th)) @ mu)

    sol = solve_ivp(rhs, (0.0, 1.0), np.append(theta0, 0.0), method="DOP853", rtol=rtol,
                    atol=atol)
    if not sol.success:
        raise ParamgeoError(f"flow of the commuting fields failed: {sol.message}")
    return sol.y[:-1, -1], float(sol.y[-1, -1])


def numerical_potential(param: Parameterization, theta0: ArrayLike, *, rtol: float = 1e-11,
                        atol: float = 1e-13, policy: Optional[RankPolicy] = None) -> Potential:
    """Li et al. (2022, Section 4) construction of R for a commuting parameterization.

    psi(mu) = time-one flow of the field sum_i mu_i X_i from theta0 (ODE d theta/ds =
    J(theta)^T mu); grad R*(mu) = phi(psi(mu)), Hess R*(mu) = J J^T at psi(mu),
    R*(mu) = int_0^1 <phi(psi(s mu)), mu> ds. Then grad R(beta) = argmin_mu R*(mu) - <beta, mu>
    (trust-region Newton), R(beta) = <mu, beta> - R*(mu), Hess R(beta) = (J J^T)^{-1} at psi(mu).
    Requires rank J(theta0) = m (the fields independent).
    """
    from scipy.optimize import minimize

    theta0 = param.as_theta(theta0)
    m = param.m
    rank = decide_rank(param.jacobian(theta0), policy, warn=False).rank
    if rank != m:
        raise ParamgeoError(
            f"{param.name}: the numerical mirror potential needs the m = {m} fields grad phi_i "
            f"independent at theta0, but rank J(theta0) = {rank}; choose another theta0")
    beta0 = np.asarray(param.forward_flat(theta0), float)
    cache: dict = {}

    def flow(mu):
        key = mu.tobytes()
        if key not in cache:
            th, rstar = commuting_flow(param, theta0, mu, rtol=rtol, atol=atol)
            J = param.jacobian(th)
            cache.clear() if len(cache) > 256 else None
            cache[key] = (th, rstar, np.asarray(param.forward_flat(th), float), J @ J.T)
        return cache[key]

    def dual(beta):
        beta = np.asarray(beta, float)
        try:
            with np.errstate(all="ignore"):  # mu runs off to infinity outside the domain
                mu = minimize(lambda mu: flow(mu)[1] - beta @ mu, np.zeros(m),
                              jac=lambda mu: flow(mu)[2] - beta, hess=lambda mu: flow(mu)[3],
                              method="trust-exact", options={"gtol": 1e-12, "maxiter": 500}).x
                residual = np.linalg.norm(flow(mu)[2] - beta)
        except (ValueError, np.linalg.LinAlgError):  # scipy's refusal of the overflowed mu
            mu, residual = None, np.inf
        if not residual <= 1e-7 * (1 + np.linalg.norm(beta)):
            raise ParamgeoError(
                f"beta is outside the domain of the mirror potential (no mu with "
                f"phi(psi(mu)) = beta; residual {residual:.3g}): the predictors phi reaches "
                "from theta0 do not include it (for implicit-bias: is X beta = y solvable with "
                "such a beta?)")
        return mu

    def value(beta):
        mu = dual(beta)
        return float(mu @ np.asarray(beta, float) - flow(mu)[1])

    def hessian(beta):
        return np.linalg.inv(flow(dual(beta))[3])

    return Potential(
        formula="R(beta) = <mu, beta> - R*(mu), grad R*(mu) = phi(exp(sum_i mu_i X_i)(theta0)) "
        "(no closed form; evaluated numerically)",
        source="numerical (Li et al. 2022)",
        reference="Li, Wang, Lee, Arora (2022) Implicit bias of gradient descent on reparametrized "
        "models: on equivalence to mirror descent, Theorem 4.8",
        theta0=theta0, beta0=beta0, value=value, grad=dual, hessian=hessian,
        conjugate_grad=lambda mu: flow(np.asarray(mu, float))[2])


# ====================================================================== mirror flow, verify
def mirror_flow(potential: Potential, loss: Loss, times: ArrayLike, *, rtol: float = 1e-10,
                atol: float = 1e-13, method: str = "LSODA") -> tuple[NDArray[np.float64], Any]:
    """Integrate the mirror flow d/dt grad R(beta) = -grad ell(beta) from beta0 at ``times``.

    With a closed-form potential: d beta/dt = -Hess R(beta)^{-1} grad ell(beta). With only the
    conjugate map (numerical potentials): the dual coordinates mu = grad R(beta) obey
    d mu/dt = -grad ell(grad R*(mu)), mu(0) = 0. Returns the predictors (T x m).
    """
    from scipy.integrate import solve_ivp

    times = np.asarray(times, float)
    beta0 = np.asarray(potential.beta0, float)
    if potential.conjugate_grad is not None and potential.source != "closed form":
        def dual_rhs(_, mu):
            return -loss.grad(potential.conjugate_grad(mu))

        sol = solve_ivp(dual_rhs, (0.0, times[-1]), np.zeros_like(beta0), t_eval=times,
                        method=method, rtol=rtol, atol=atol)
        return np.array([potential.conjugate_grad(mu) for mu in sol.y.T]), sol

    def rhs(_, beta):
        return -np.linalg.solve(potential.hessian(beta), loss.grad(beta))

    sol = solve_ivp(rhs, (0.0, times[-1]), beta0, t_eval=times, method=method, rtol=rtol,
                    atol=atol)
    return sol.y.T, sol
