"""Commuting regimes of a loss: mirror flows of parameterizations whose fields do not all commute.

A parameterization whose fields do not all commute (UU^T, UV^T) can still induce a mirror flow
for a particular loss and initialisation. For ell(beta) = (1/2N) sum_i (<a_i, beta> - y_i)^2
gradient flow only sees the fields Y_i = J^T a_i; :func:`commuting_regime` tests whether they
commute, finds linear coordinates lambda = C beta through which the loss factors and whose
fields commute (for square predictors with commuting symmetric measurement matrices: the joint
eigenbasis E, lambda_j = e_j^T beta e_j), freezes coordinates whose field vanishes at theta0,
and builds the potential of the others: the plugin's closed form restricted to them when it
passes Li et al.'s identity grad R(lambda(psi(mu))) = mu, else the numerical construction.
For UU^T (dQ/dt = -2 (G Q + Q G)) with commuting A_i and a seed Q0 = U0 U0^T commuting with
them, Q stays diagonal in E and d lambda_j/dt = -4 lambda_j g_j: the entropy
R(lambda) = 1/4 sum_j [lambda_j log(lambda_j / lambda0_j) - lambda_j + lambda0_j]
(Gunasekar et al. 2017, Section 3). :func:`verify_regime` and :func:`regime_implicit_bias`
check the flow and its limit in those coordinates.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import TYPE_CHECKING, Any, Optional, Sequence

import autograd.numpy as anp
import numpy as np

from ..errors import ParamgeoError, ShapeError
from ..linalg.numerics import as_rng, decide_rank, policy_of
from ..contract.parameterization import Parameterization
from ..results import Result, to_jsonable
from .bias import solve_implicit_bias
from .lie import NotCommutingError, commuting_test
from .potentials import Potential, commuting_flow, mirror_flow, numerical_potential

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..contract.parameterization import ParamSpec
    from ..losses.predictor import LinearMeasurements, Loss
    from ..linalg.numerics import RankPolicy


class LinearCoordinates(Parameterization):
    """lambda = C phi(theta): k linear coordinates of another parameterization's predictor.

    Its fields are Z_j = J^T c_j (c_j the rows of C), its Jacobian C J and the derivative of
    that Jacobian C dJ; everything is read from the base parameterization's contract. Used by
    :func:`commuting_regime` for losses that depend on phi only through lambda.
    """

    name = "linear-coordinates"
    capabilities = frozenset({"jacobian", "jvp", "vjp"})

    def __init__(self, base, C, label="coordinates"):
        self.base = base
        self.C = np.atleast_2d(np.asarray(C, dtype=float))
        if self.C.shape[1] != base.m:
            raise ShapeError(f"the coordinate matrix has {self.C.shape[1]} columns but "
                             f"{base.name} has predictors of dimension {base.m}")
        super().__init__()
        self.name = f"{base.name} ({label})"
        self.sizes = dict(base.sizes)

    def make_spec(self) -> ParamSpec:
        return self.base.spec

    def make_predictor_shape(self) -> tuple[int, ...]:
        return (self.C.shape[0],)

    def forward(self, theta: ArrayLike) -> NDArray[np.float64]:
        return anp.dot(self.C, self.base.forward_flat(theta))

    def random_point(self, rng: np.random.Generator) -> NDArray[np.float64]:
        return self.base.random_point(rng)

    def jacobian(self, theta: ArrayLike) -> NDArray[np.float64]:
        return self.C @ np.asarray(self.base.jacobian(theta), float)

    def jvp(self, theta: ArrayLike, v: ArrayLike) -> NDArray[np.float64]:
        return self.C @ np.asarray(self.base.jvp(theta, v), float)

    def vjp(self, theta: ArrayLike, w: ArrayLike) -> NDArray[np.float64]:
        return np.asarray(self.base.vjp(theta, self.C.T @ np.asarray(w, float)), float)

    def jacobian_derivative(self, theta: ArrayLike, v: ArrayLike) -> NDArray[np.float64]:
        # row j: d/dt (J^T c_j)(theta + t v) = Hess(c_j . phi)(theta) v  (k Hessian-vector
        # products instead of the m x n derivative of J)
        return np.stack([np.asarray(self.base.hessian_vp(theta, c, v), float) for c in self.C])


def _measurements(param, loss):
    """(A, y): the squared loss (1/2N) sum (<a_i, beta> - y_i)^2 as rows a_i of an N x m A."""
    from ..losses.predictor import LinearMeasurements, QuadraticMeasurements

    loss.check_dim(param)
    if isinstance(loss, QuadraticMeasurements):  # a_i = vec(x_i x_i^T)
        return np.einsum("ia,ib->iab", loss.X, loss.X).reshape(loss.N, -1), loss.y
    if isinstance(loss, LinearMeasurements):
        return np.asarray(loss.A, float), loss.y
    raise ParamgeoError(
        f"commuting regimes are decided for squared losses on linear measurements "
        f"(LinearMeasurements, QuadraticMeasurements); got {type(loss).__name__}")


def joint_eigenbasis(matrices: Sequence[ArrayLike], seed_matrix: Optional[ArrayLike] = None, *,
                     rng: Optional[np.random.Generator] = None,
                     tol: float = 1e-9) -> Optional[tuple[NDArray[np.float64], float]]:
    """(E, residual): an orthonormal E (columns e_j) with E^T S E diagonal for every S given.

    The S are symmetric and assumed to commute. E diagonalises a random combination
    sum_i c_i S_i; within clusters of (numerically) equal eigenvalues the
    compression of ``seed_matrix`` is diagonalised too (so Q0 = seed_matrix is diagonal in E
    whenever it commutes with the S_i). ``residual`` = max_i |offdiag(E^T S_i E)| / |S_i| (two
    retries with fresh combinations if it exceeds ``tol``).
    """
    S = np.asarray(matrices, float)
    rng = as_rng(rng)
    norms = np.maximum(np.linalg.norm(S, axis=(1, 2)), 1e-300)
    best = None
    for _ in range(3):
        T = np.tensordot(rng.standard_normal(len(S)) / norms, S, axes=1)
        w, V = np.linalg.eigh(T)
        cut = np.flatnonzero(np.diff(w) > 1e-7 * max(np.abs(w).max(), 1e-300)) + 1
        E = V.copy()
        if seed_matrix is not None:
            for g in np.split(np.arange(len(w)), cut):
                if len(g) > 1:
                    _, W = np.linalg.eigh(V[:, g].T @ seed_matrix @ V[:, g])
                    E[:, g] = V[:, g] @ W
        D = np.einsum("aj,iab,bk->ijk", E, S, E)
        off = D - np.einsum("ijj->ij", D)[:, :, None] * np.eye(len(w))
        residual = float((np.linalg.norm(off, axis=(1, 2)) / norms).max(initial=0.0))
        if best is None or residual < best[1]:
            best = (E, residual)
        if residual <= tol:
            break
    return best


def _relative_commutators(S):
    """max_{i<j} |S_i S_j - S_j S_i| / (|S_i| |S_j|)."""
    norms = np.maximum(np.linalg.norm(S, axis=(1, 2)), 1e-300)
    out = 0.0
    for i, j in itertools.combinations(range(len(S)), 2):
        c = S[i] @ S[j] - S[j] @ S[i]
        out = max(out, float(np.linalg.norm(c) / (norms[i] * norms[j])))
    return out


def _spectral_coordinates(param, A, beta0, rng, tol):
    """Joint spectral coordinates lambda_j = e_j^T beta e_j of square predictors, or a reason."""
    shape = param.predictor_shape
    if len(shape) != 2 or shape[0] != shape[1]:
        return None, f"predictors of shape {shape} are not square matrices", None
    d = shape[0]
    mats = A.reshape(-1, d, d)
    B0 = beta0.reshape(d, d)
    symmetric = all(np.linalg.norm(B - B.T) <= 1e-12 * (1 + np.linalg.norm(B)) for B in
                    (B0, np.reshape(param.forward_flat(param.random_point(rng)), (d, d))))
    skew = max(float(np.linalg.norm(M - M.T) / max(np.linalg.norm(M), 1e-300)) for M in mats)
    if not symmetric and skew > tol:
        return None, ("the measurement matrices are not symmetric and the predictor is not "
                      "symmetric, so there is no joint spectral basis"), None
    S = (mats + mats.transpose(0, 2, 1)) / 2  # <A_i, beta> = <S_i, beta> for symmetric beta
    u, s, vt = np.linalg.svd(S.reshape(len(S), -1), full_matrices=False)
    basis = vt[s > 1e-12 * s[0]].reshape(-1, d, d) if len(s) and s[0] > 0 else S[:0]
    commutator = _relative_commutators(basis)
    if commutator > tol:
        return None, (f"the (symmetrised) measurement matrices do not commute (largest relative "
                      f"commutator {commutator:.3g})"), commutator
    Q0 = (B0 + B0.T) / 2
    seed_comm = max([float(np.linalg.norm(Q0 @ M - M @ Q0) / max(np.linalg.norm(Q0) *
                                                                  np.linalg.norm(M), 1e-300))
                     for M in basis] + [0.0])
    seed_commutes = seed_comm <= tol
    E, residual = joint_eigenbasis(list(basis) + ([Q0] if seed_commutes else []),
                                   seed_matrix=Q0, rng=rng, tol=tol)
    if residual > 1e3 * tol:
        return None, f"no joint eigenbasis found (residual {residual:.3g})", commutator
    lam0 = np.einsum("aj,ab,bj->j", E, Q0, E)
    order = np.argsort(-lam0, kind="stable")
    E = E[:, order]
    C = np.stack([np.outer(E[:, j], E[:, j]).ravel() for j in range(d)])
    return dict(C=C, basis=E, commutator=commutator, seed_commutes=bool(seed_commutes),
                seed_commutator=seed_comm), None, commutator


def _restrict(full, Ca, beta0, lam0a, label):
    """The predictor-space potential R restricted to beta = beta0 + Ca^T (lambda - lambda0)."""
    def emb(lam):
        return beta0 + Ca.T @ (np.asarray(lam, float) - lam0a)

    return Potential(formula=f"{full.formula} [restricted to the {label}]", source=full.source,
                     reference=full.reference, theta0=full.theta0, beta0=lam0a.copy(),
                     value=lambda lam: float(full.value(emb(lam))),
                     grad=lambda lam: Ca @ np.asarray(full.grad(emb(lam)), float),
                     hessian=lambda lam: Ca @ np.asarray(full.hessian(emb(lam)), float) @ Ca.T)


def _identity_residual(sub, theta0, pot, rng, n_tests=2):
    """max over a few random mu of |grad R(lambda(psi(mu))) - mu| / |mu|, and |grad R(lambda0)|.

    Li et al. (2022, Section 4): along the flows psi(mu) = exp(sum mu_j Z_j)(theta0) of the
    commuting fields, mu = grad R(lambda(psi(mu))) characterises the potential (with
    grad R(lambda0) = 0). mu is scaled by 1 / sqrt(|K K^T|) (K = C J(theta0)), at most 0.25.
    """
    K = sub.jacobian(theta0)
    scale = max(1.0, float(np.sqrt(np.linalg.norm(K @ K.T, 2))))
    try:
        res = float(np.linalg.norm(pot.grad(pot.beta0)))
        for _ in range(n_tests):
            mu = 0.25 * rng.standard_normal(sub.m) / scale
            th, _ = commuting_flow(sub, theta0, mu)
            g = pot.grad(np.asarray(sub.forward_flat(th), float))
            res = max(res, float(np.linalg.norm(g - mu) / np.linalg.norm(mu)))
    except (ParamgeoError, np.linalg.LinAlgError, FloatingPointError):
        return float("inf")
    return res if np.isfinite(res) else float("inf")


#: a plugin's closed form is accepted in a regime's coordinates when Li et al.'s identity
#: grad R(lambda(psi(mu))) = mu holds to this relative accuracy
IDENTITY_TOL = 1e-7


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class CommutingRegime(Result):
    """Whether gradient flow of a squared loss on linear measurements is a mirror flow.

    The loss (1/2N) sum_i (<a_i, beta> - y_i)^2 depends on beta = phi(theta) only through
    linear coordinates lambda = C beta (``coordinates``: "spectral", lambda_j = e_j^T beta e_j
    in a joint orthonormal eigenbasis E of the measurement matrices, or "measurements", an
    orthonormal basis of their span), with <a_i, beta> = sum_j design[i, j] lambda_j.
    ``commuting``: the fields grad <a_i, phi> commute (Li et al. 2022, Definition 4.1;
    ``max_bracket``, ``relative_bracket``). Coordinates whose field vanishes at theta0 are
    ``frozen`` (commuting flows keep them constant); ``potential`` is the Legendre function of
    the ``active`` ones, from the plugin's closed form restricted to them when it passes the
    identity check (``identity_residual``), else by the numerical construction.
    ``seed_commutes``: Q0 = sym phi(theta0) commutes with the measurement matrices (then it is
    diagonal in E and, for UU^T, Q(t) stays diagonal: lambda are its eigenvalues).
    """

    name: str
    commuting: bool
    coordinates: Optional[str]
    reason: str
    max_bracket: float
    relative_bracket: float
    measurement_commutator: Optional[float]
    seed_commutes: Optional[bool]
    basis: Optional[np.ndarray]
    C: Optional[np.ndarray]
    lambda0: Optional[np.ndarray]
    active: tuple
    frozen: tuple
    design: Optional[np.ndarray]
    target: Optional[np.ndarray]
    identity_residual: Optional[float]
    potential: Optional[Potential] = dataclasses.field(default=None, repr=False)
    theta0: Optional[np.ndarray] = dataclasses.field(default=None, repr=False)
    param: Optional[Parameterization] = dataclasses.field(default=None, repr=False)

    @property
    def potential_formula(self):
        return None if self.potential is None else self.potential.formula

    @property
    def potential_source(self):
        return None if self.potential is None else self.potential.source

    def coordinates_param(self) -> LinearCoordinates:
        """The active coordinates lambda_a = C_a phi(theta) as a parameterization."""
        C: Any = self.C
        return LinearCoordinates(self.param, C[list(self.active)], f"{self.coordinates} "
                                 "coordinates")

    def reduced_loss(self) -> LinearMeasurements:
        """The loss as a function of the active coordinates: (1/2N) |D_a lambda_a - y'|^2 with
        y' = y - D_f lambda0_f (frozen coordinates keep their initial values)."""
        from ..losses.predictor import LinearMeasurements

        a, f = list(self.active), list(self.frozen)
        design: Any = self.design
        lambda0: Any = self.lambda0
        return LinearMeasurements(design[:, a], self.target - design[:, f] @ lambda0[f])

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: to_jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)
               if f.name not in ("potential", "theta0", "param")}
        out["potential"] = self.potential_formula
        out["potential_source"] = self.potential_source
        return out

    def __str__(self):
        lines = [f"CommutingRegime of {self.name}",
                 f"  fields grad <A_i, phi> commute: {'yes' if self.commuting else 'no'} "
                 f"(largest bracket {self.max_bracket:.3g}, relative "
                 f"{self.relative_bracket:.3g})"]
        if self.measurement_commutator is not None:
            lines.append(f"  measurement matrices: largest relative commutator "
                         f"{self.measurement_commutator:.3g}; seed commutes: "
                         f"{self.seed_commutes}")
        if self.coordinates:
            lines.append(f"  coordinates: {self.coordinates} ({len(self.active)} active, "
                         f"{len(self.frozen)} frozen)")
        if self.reason:
            lines.append(f"  note: {self.reason}")
        if self.potential is not None:
            lines.append(f"  potential ({self.potential.source}): {self.potential.formula}")
        else:
            lines.append("  potential: none")
        return "\n".join(lines)


def _choose_coordinates(param, Cm, spec, why, notes, *, n_points, rng, policy):
    """Step 2 of :func:`commuting_regime`: (kind, C, basis, seed_commutes), the spectral
    coordinates ``spec`` when their fields commute, else the measurement span ``Cm``; the
    reason for falling back is appended to ``notes``."""
    if spec is None:
        notes.append(f"no spectral coordinates: {why}")
        return "measurements", Cm, None, None
    sub = LinearCoordinates(param, spec["C"], "spectral coordinates")
    if commuting_test(sub, n_points=n_points, seed=rng, policy=policy,
                      method="numeric").commuting:
        return "spectral", spec["C"], spec["basis"], spec["seed_commutes"]
    notes.append("the fields of the spectral coordinates do not commute; using the "
                 "measurement span")
    return "measurements", Cm, None, None


def _regime_potential(param, theta0, Ca, beta0, lam0a, label, notes, *, closed_form, rng,
                      policy):
    """Step 4 of :func:`commuting_regime`: (potential, identity residual) of the active
    coordinates lambda_a = Ca beta, the plugin's closed form restricted to them when it passes
    grad R(lambda(psi(mu))) = mu (IDENTITY_TOL), else the numerical construction."""
    sub = LinearCoordinates(param, Ca, label)
    residual = None
    if closed_form and param.provides("mirror_potential"):
        full = param.mirror_potential(theta0)
        if full is not None:
            cand = _restrict(full, Ca, beta0, lam0a, label)
            residual = _identity_residual(sub, theta0, cand, rng)
            if residual <= IDENTITY_TOL:
                return cand, residual
            notes.append(f"the plugin's closed form fails grad R(lambda(psi(mu))) = mu in "
                         f"these coordinates (residual {residual:.3g}); built numerically")
    return numerical_potential(sub, theta0, policy=policy), residual


def commuting_regime(param: Parameterization, loss: Loss, theta0: ArrayLike, *,
                     policy: Optional[RankPolicy] = None, seed: int = 0, n_points: int = 2,
                     closed_form: bool = True) -> CommutingRegime:
    """Decide whether gradient flow of ``loss`` from theta0 is a mirror flow, and build it.

    For ell(beta) = (1/2N) sum_i (<a_i, beta> - y_i)^2 gradient flow only sees the fields
    Y_i = grad <a_i, phi> = J^T a_i (grad L = sum_i r_i Y_i / N). Steps:

    1. commuting test of the Y_i (:func:`commuting_test` on the coordinates of the measurement
       span, at random points): if they do not commute, no mirror map is claimed;
    2. coordinates lambda = C beta through which the loss factors: for square predictors with
       symmetric (or, for symmetric phi, symmetrised) commuting measurement matrices S_i, the
       joint eigenbasis E (:func:`joint_eigenbasis`, refined by Q0 = sym phi(theta0)) and
       lambda_j = e_j^T beta e_j, so <A_i, beta> = sum_j (e_j^T S_i e_j) lambda_j; kept if the
       fields grad lambda_j commute too (a larger commuting family than the Y_i); otherwise an
       orthonormal basis of the measurement span;
    3. coordinates whose field J^T c_j vanishes at theta0 are frozen (a field commuting with
       the others stays zero along their flows), the others must be independent at theta0;
    4. the potential of the active coordinates: the plugin's ``mirror_potential(theta0)``
       restricted to beta = beta0 + C_a^T (lambda - lambda0), accepted when it satisfies
       grad R(lambda(psi(mu))) = mu at random mu (IDENTITY_TOL), else
       :func:`numerical_potential` of the coordinates (Li et al. 2022, Theorem 4.8).

    For UU^T with commuting A_i and U0 = alpha E[:, :r] this is the entropy
    R(lambda) = 1/4 sum_j [lambda_j log(lambda_j / alpha^2) - lambda_j + alpha^2] on the first
    r spectral coordinates (d/dt log lambda_j = -4 g_j), the others frozen at 0 (Gunasekar et
    al. 2017, Section 3; see docs/mirror.md). Returns a :class:`CommutingRegime`.
    """
    policy = policy_of(param, policy)
    rng = as_rng(seed)
    theta0 = param.as_theta(theta0)
    A, y = _measurements(param, loss)
    beta0 = np.asarray(param.forward_flat(theta0), float)
    tol = max(policy.rtol, 1e-12)
    u, s, vt = np.linalg.svd(A, full_matrices=False)
    Cm = vt[: decide_rank(s, policy, warn=False).rank]
    if len(Cm) == 0:
        raise ParamgeoError("all measurements are zero; the loss does not depend on theta")
    test = commuting_test(LinearCoordinates(param, Cm, "measurements"), n_points=n_points,
                          seed=rng, policy=policy, method="numeric")
    common: dict[str, Any] = dict(name=param.name, max_bracket=test.max_bracket,
                                  relative_bracket=test.relative, theta0=theta0, param=param)
    spec, why, meas_comm = _spectral_coordinates(param, A, beta0, rng, tol)
    if not test.commuting:
        return CommutingRegime(commuting=False, coordinates=None, reason=(
            "the fields grad <A_i, phi> do not commute, so gradient flow of this loss is not a "
            "mirror flow (no potential claimed)" + (f"; {why}" if why else "")),
            measurement_commutator=meas_comm, seed_commutes=None, basis=None, C=None,
            lambda0=None, active=(), frozen=(), design=None, target=None,
            identity_residual=None, **common)
    notes: list[str] = []
    kind, C, basis, seed_commutes = _choose_coordinates(param, Cm, spec, why, notes,
                                                        n_points=n_points, rng=rng, policy=policy)
    design = A @ C.T
    lam0 = C @ beta0
    Z = C @ np.asarray(param.jacobian(theta0), float)
    znorm = np.linalg.norm(Z, axis=1)
    if znorm.max(initial=0.0) == 0:
        raise ParamgeoError(f"{param.name}: every coordinate field vanishes at theta0, so "
                            "gradient flow does not move; choose a theta0 with J(theta0) != 0")
    frozen = znorm <= max(policy.atol, 1e-9 * znorm.max())
    active = np.flatnonzero(~frozen)
    out = dict(commuting=True, coordinates=kind, measurement_commutator=meas_comm,
               seed_commutes=seed_commutes, basis=basis, C=C, lambda0=lam0,
               active=tuple(int(i) for i in active),
               frozen=tuple(int(i) for i in np.flatnonzero(frozen)), design=design, target=y,
               **common)
    rank = decide_rank(Z[active], policy, warn=False).rank
    if rank < len(active):
        notes.append(f"the fields of the {len(active)} active coordinates have rank {rank} at "
                     "theta0, so no mirror potential in these coordinates")
        return CommutingRegime(reason="; ".join(notes), identity_residual=None, **out)
    pot, residual = _regime_potential(param, theta0, C[active], beta0, lam0[active],
                                      f"{kind} coordinates", notes, closed_form=closed_form,
                                      rng=rng, policy=policy)
    return CommutingRegime(reason="; ".join(notes), identity_residual=residual, potential=pot,
                           **out)


def _regime(param, loss, theta0, regime):
    regime = regime or commuting_regime(param, loss, theta0)
    if regime.potential is None:
        raise NotCommutingError(f"{param.name}: {regime.reason}")
    return regime


@dataclasses.dataclass(frozen=True, kw_only=True)
class RegimeVerification(Result):
    """Gradient flow against the mirror flow of a commuting regime, in its coordinates.

    ``deviation`` = max_t |C_a phi(theta(t)) - lambda_mirror(t)|_inf, ``relative`` divides by
    max_t |lambda(t)|_inf; ``frozen_drift`` = max_t |lambda_f(t) - lambda_f(0)|;
    ``off_diagonal`` (spectral coordinates) = max_t |offdiag(E^T beta(t) E)| / max_t |beta(t)|
    (zero when the predictor stays diagonal in E, i.e. lambda are its eigenvalues).
    """

    deviation: float
    relative: float
    frozen_drift: float
    off_diagonal: Optional[float]
    t_final: float
    n_records: int
    potential: str
    source: str
    flow_success: bool
    mirror_success: bool


def verify_regime(param: Parameterization, theta0: ArrayLike, loss: Loss, t_final: float = 50.0, *,
                  regime: Optional[CommutingRegime] = None, n_records: int = 40,
                  log_times: bool = True, rtol: float = 1e-11,
                  atol: float = 1e-14) -> RegimeVerification:
    """Integrate gradient flow on theta (``paramgeo.flows``) and the mirror flow of the regime's
    potential on the reduced loss (:func:`mirror_flow`) at the same times; report the largest
    deviation of the active coordinates (Li et al. 2022, Theorem 4.8)."""
    from ..dynamics.trajectory import gradient_flow

    theta0 = param.as_theta(theta0)
    regime = _regime(param, loss, theta0, regime)
    traj = gradient_flow(param, loss, theta0, t_final, rtol=rtol, atol=atol,
                         n_records=n_records, log_times=log_times, conserved=False)
    lam = np.asarray(traj.predictors) @ regime.C.T
    a, f = list(regime.active), list(regime.frozen)
    mirror_path, sol = mirror_flow(regime.potential, regime.reduced_loss(), traj.times,
                                   rtol=rtol, atol=atol)
    if mirror_path.shape != lam[:, a].shape:
        raise ParamgeoError(f"the mirror flow stopped early: {sol.message}")
    dev = float(np.abs(mirror_path - lam[:, a]).max())
    scale = float(np.abs(lam[:, a]).max())
    drift = float(np.abs(lam[:, f] - regime.lambda0[f]).max()) if f else 0.0
    off = None
    if regime.basis is not None:
        E, d = regime.basis, regime.basis.shape[0]
        Ms = np.einsum("aj,tab,bk->tjk", E, np.asarray(traj.predictors).reshape(-1, d, d), E)
        offd = Ms - np.einsum("tjj->tj", Ms)[:, :, None] * np.eye(d)
        off = float(np.abs(offd).max() / max(np.abs(traj.predictors).max(), 1e-300))
    return RegimeVerification(deviation=dev, relative=dev / scale if scale > 0 else dev,
                              frozen_drift=drift, off_diagonal=off, t_final=float(traj.times[-1]),
                              n_records=len(traj.times), potential=regime.potential.formula,
                              source=regime.potential.source, flow_success=bool(traj.success),
                              mirror_success=bool(sol.success))


@dataclasses.dataclass(frozen=True, kw_only=True)
class RegimeImplicitBias(Result):
    """The gradient-flow limit against argmin R(lambda) s.t. the data, in a regime's coordinates.

    ``deviation`` = |lambda_flow - lambda_R|_inf over the active coordinates;
    ``predictor_deviation`` = |phi(theta_flow) - phi(psi(grad R(lambda_R)))|_inf: the limit
    predictor predicted by the commuting flows (theta(t) = psi(mu(t)), Li et al. 2022).
    """

    potential: str
    deviation: float
    predictor_deviation: float
    kkt: float
    flow_time: float
    flow_loss: float
    lambda_flow: np.ndarray
    lambda_potential: np.ndarray
    beta_flow: np.ndarray
    beta_predicted: np.ndarray


def regime_implicit_bias(param: Parameterization, theta0: ArrayLike, loss: Loss, *,
                         regime: Optional[CommutingRegime] = None, t_final: float = 1e9,
                         stop_loss: Optional[float] = None, rtol: float = 1e-10,
                         atol: float = 1e-15) -> RegimeImplicitBias:
    """Solve argmin R(lambda_a) s.t. D_a lambda_a = y' (:func:`solve_implicit_bias`, the dual
    route when the least-change start leaves the domain) and compare with the limit of gradient
    flow, in the active coordinates of :func:`commuting_regime` (Gunasekar et al. 2018;
    Li et al. 2022, Theorem 4.10). The predicted limit predictor is phi(psi(mu)) with
    mu = grad R(lambda_R) (:func:`commuting_flow`)."""
    from ..dynamics.trajectory import gradient_flow

    theta0 = param.as_theta(theta0)
    regime = _regime(param, loss, theta0, regime)
    red = regime.reduced_loss()
    lam_R, kkt = solve_implicit_bias(regime.potential, red.A, red.y)
    th_pred, _ = commuting_flow(regime.coordinates_param(), theta0,
                                regime.potential.grad(lam_R))
    beta_pred = np.asarray(param.forward_flat(th_pred), float)
    _, y = _measurements(param, loss)
    stop = stop_loss if stop_loss is not None else 1e-26 * (1 + y @ y / len(y))
    traj = gradient_flow(param, loss, theta0, t_final, rtol=rtol, atol=atol, n_records=40,
                         log_times=True, stop_loss=stop, conserved=False)
    beta_flow = np.asarray(traj.final_predictor, float)
    lam_flow = regime.C[list(regime.active)] @ beta_flow
    return RegimeImplicitBias(potential=regime.potential.formula,
                              deviation=float(np.abs(lam_flow - lam_R).max()),
                              predictor_deviation=float(np.abs(beta_flow - beta_pred).max()),
                              kkt=kkt, flow_time=float(traj.times[-1]),
                              flow_loss=float(traj.losses[-1]), lambda_flow=lam_flow,
                              lambda_potential=lam_R, beta_flow=beta_flow, beta_predicted=beta_pred)
