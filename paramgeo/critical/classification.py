"""Classification of a point: regular, or critical with its causes, stratum and nearby stratum.

Causes a critical point is given (:func:`classify`):

* ``orbit-degenerate``: the orbit dimension o(theta) = rank of the symmetry generators at theta
  drops below its generic value: a continuous stabilizer appears, as for U U^T with U of rank
  k <= r - 2 (the stabilizer O(r - k) of U in O(r) has dimension (r-k)(r-k-1)/2; Massart and
  Absil 2020). A discrete stabilizer (at k = r - 1 the reflection O(1) fixing U) leaves the
  orbit dimension, so it is no cause: the rank drop there is the factor's.
* ``subnetwork``: the architecture graph shows hidden neurons that are *inactive* (all incoming
  or all outgoing weights zero) or *redundant* (two neurons of a layer with proportional
  incoming weight vectors: for a homogeneous activation they act as one neuron).
  This is the mechanism of the seed paper: Kohn, Marchetti, Shabir et al., "Singular learning
  and Occam's razor in deep monomial networks", where for large activation degree every
  critical point lies on a subnetwork.
* ``factor-rank``: for a factorization (matrix-group symmetry, no neurons), a factor loses rank
  (channels vanish up to symmetry); ``rank_drops`` names the factor and how much it lost
  ("U lost rank 1"). For U U^T at rank U = k this is the rank-k PSD stratum, of dimension
  d k - k(k-1)/2, the rank of J there.
* ``dependent-weights``: a dense layer's incoming weight matrix loses rank without two rows
  being proportional (widths 3,3,1: three incoming vectors in a plane); the layer factors
  through fewer linear forms. Not a subnetwork, and a critical point for small degree only.
* ``other``: rank lost beyond what the point's stratum explains (rank J(theta) below the generic
  rank of the stratum the point lies on), or with no structure to explain it. Before saying
  so, :func:`near_stratum` tests whether theta is critical because it is *close* to a stratum
  (s_R/s_1 decays like a power of the distance to it, and the power law accounts for the lost
  rank); if so the stratum's causes are given and the certificate is attached.

A neuron is *silent* when its incoming weights from non-silent neurons vanish (propagated layer
by layer); the weights out of a silent neuron are don't-cares, so redundancy and dependence
are read on incoming weights from non-silent neurons only.

Rank decisions use the one tolerance policy of :mod:`paramgeo.geometry.jacobian` (``RankPolicy``):
rank = #{s_i > max(atol, rtol s_1)}; a decision with a singular value within a factor ``band``
of the tolerance is flagged ``near_singular`` with the singular value and the gap
s_rank / s_{rank+1}. A weight vector counts as zero when its norm is at most
``zero_tol * |theta|`` (default ``zero_tol = policy.rtol``).
"""

from __future__ import annotations

import dataclasses
import fractions
import math
import warnings
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from ..errors import NumericalDoubtWarning
from ..geometry.jacobian import rank_at
from ..linalg.numerics import Seed, as_rng, decide_rank, policy_of
from ..results import Result, title
from .patterns import _orbit_dim, _rank, factor_rank_drops, generic_values, structure
from ._points import _point_stratum

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..linalg.numerics import RankPolicy
    from ..contract.parameterization import Parameterization


@dataclasses.dataclass(frozen=True, kw_only=True)
class NearStratum(Result):
    """Certificate that a critical theta is critical *because* it is close to a stratum S.

    theta_s is theta with the nearly-satisfied conditions made exact (``conditions``); S is its
    stratum, and rank J(theta_s) = ``snapped_rank`` = the generic rank of S < R. Along the ray
    theta(t) = theta_s + t (theta - theta_s) the relevant ratio rho(t) = s_R/s_1 of J(theta(t))
    vanishes at t = 0 like c t^q; ``probe`` holds (t, rho(t)) at t = T, 2T, 4T, ``exponent`` the
    fitted q and ``predicted_ratio`` = rho(T) T^(-q), the value the power law predicts at theta
    (t = 1), ``order`` the nearest integer to q. The certificate holds when the two measured
    exponents agree and the prediction is below the rank tolerance: proximity to S alone
    accounts for the lost rank. ``precision``: the digits the ratios were measured with (None:
    float64, whose round-off hides ratios below ``precision.FLOAT64_FLOOR``).
    """

    stratum: str
    causes: tuple  # the causes S names ("subnetwork", "dependent-weights")
    conditions: tuple  # e.g. ("h1_0 in-zero (1.3e-02)",), sizes relative to |theta|
    distance: float  # |theta - theta_s| / |theta|
    snapped_rank: int
    exponent: float
    predicted_ratio: float
    probe: tuple
    order: int = 0  # the integer order q of the decay: round(exponent)
    #: significant digits of the singular values measured (None: float64)
    precision: object = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Classification(Result):
    """Verdict on a point theta: regular or critical, with causes and the evidence.

    Attributes:
        name: the plugin's name.
        sizes: its sizes.
        verdict: "regular", "critical" (rank < generic_rank) or "kink" (phi not differentiable
            at theta: no rank decision).
        causes: among "orbit-degenerate", "subnetwork", "factor-rank", "dependent-weights",
            "other".
        rank: rank J(theta) under the tolerance policy.
        generic_rank: R, the generic rank of phi.
        kernel_dim: n - rank.
        orbit_dim: the rank of the symmetry generators at theta.
        generic_orbit_dim: the orbit dimension at a random point.
        near_singular: a singular value lies within the policy's band of the tolerance.
        tol: the rank tolerance.
        gap: s_rank / s_{rank+1}.
        relevant_ratio: s_R / s_1 (0 at a critical point).
        singular_values: the singular values of J(theta), descending.
        structure: "network" (architecture graph), "factor" (matrix-group symmetry) or "none"
            (no strata: the stratum fields are None).
        inactive: ((neuron, state), ...) of a network's inactive neurons.
        redundant: groups of neurons with proportional incoming weights.
        dependent: dense layers whose incoming weight matrix loses rank (dicts).
        stratum: the label of the stratum theta lies on ("full" if none proper).
        on_proper_stratum: whether that stratum is a proper one.
        stratum_generic_rank: the generic rank on that stratum.
        rank_equals_stratum_generic: rank == stratum_generic_rank.
        subnetwork_distance: the relative distance to the nearest subnetwork condition.
        near: the :class:`NearStratum` certificate of a critical point close to a stratum.
        explanation: the verdict in words.
        kinks: the ``paramgeo.geometry.kinks.KinkReport`` of a piecewise-smooth phi.
        rank_drops: (block, rank, generic rank) of each factor that lost rank.
        precision: significant digits of the singular values decided on (None: float64).
        rank_route: the route of the rank decision (:func:`paramgeo.geometry.rank_at`).
        rank_certificate: that route's certificate.
    """

    name: str
    sizes: dict
    verdict: str
    causes: tuple
    rank: int
    generic_rank: int
    kernel_dim: int
    orbit_dim: int
    generic_orbit_dim: int
    near_singular: bool
    tol: float
    gap: float
    relevant_ratio: float
    singular_values: np.ndarray
    structure: str
    inactive: tuple
    redundant: tuple
    dependent: tuple
    stratum: Optional[str]
    on_proper_stratum: bool
    stratum_generic_rank: Optional[int]
    rank_equals_stratum_generic: Optional[bool]
    subnetwork_distance: Optional[float]
    near: Optional[NearStratum]
    explanation: str
    kinks: Any = None
    rank_drops: tuple = ()
    precision: Optional[int] = None
    rank_route: str = "dense"
    rank_certificate: Any = None

    def __str__(self):
        head = f"{title(self.name, self.sizes)}: {self.verdict}"
        if self.causes:
            head += f" ({', '.join(self.causes)})"
        if self.near_singular:
            head += " - NEAR-SINGULAR: a singular value is within the tolerance band"
        lines = [
            head,
            f"  rank {self.rank} / generic {self.generic_rank}; kernel dim {self.kernel_dim}; "
            f"orbit dim {self.orbit_dim} (generic {self.generic_orbit_dim})",
            f"  tol {self.tol:.3g}; gap {self.gap:.3g}; s_R/s_1 {self.relevant_ratio:.3g}"
            + (f" ({self.precision} digits, route {self.rank_route})" if self.precision else ""),
        ]
        if self.stratum is None:
            lines.append("  stratum: none (no architecture graph and no matrix-group symmetry, "
                         "so no strata are defined)")
        else:
            lines.append(f"  stratum: {self.stratum} (generic rank {self.stratum_generic_rank}, "
                         + ("equal to" if self.rank_equals_stratum_generic else "above")
                         + " the rank here)")
        if self.rank_drops:
            lines.append("  rank drops: " + ", ".join(
                f"{b} lost rank {g - k} (rank {k} of {g})" for b, k, g in self.rank_drops))
        if self.inactive:
            lines.append("  inactive: " + ", ".join(f"{n} ({s})" for n, s in self.inactive))
        if self.redundant:
            lines.append("  redundant: " + "; ".join("{" + ",".join(g) + "}"
                                                      for g in self.redundant))
        for d in self.dependent:
            lines.append(f"  dependent incoming weights in layer {d['layer']}: rank {d['rank']} "
                         f"of {d['of']} (s_min/s_max {d['ratio']:.1e})")
        if self.near is not None:
            digits = (f", {self.near.precision} digits" if self.near.precision else "")
            lines.append(f"  near stratum: {self.near.stratum} at distance "
                         f"{self.near.distance:.1e} ({'; '.join(self.near.conditions)}); "
                         f"s_R/s_1 ~ t^{self.near.exponent:.2f} (order {self.near.order}"
                         f"{digits}) along the ray to it, predicting "
                         f"{self.near.predicted_ratio:.1e} here")
        lines.append("  " + self.explanation)
        return "\n".join(lines)


def _snap(struct, theta, point, conditions):
    """theta with the given nearly-met conditions made exact: a side zeroed, a neuron's live
    incoming weights projected on another's line, a dense layer's incoming matrix truncated to
    one rank less (SVD)."""
    units = {u.name: u for u in struct.units}
    out = theta.copy()
    for kind, data in conditions:
        if kind == "zero":
            name, side = data
            out[list(point.live_in[name] if side == "in" else units[name].sides["out"])] = 0.0
        elif kind == "merge":
            a, b = (units[n] for n in data)
            keys = [k for k in a.preds if k in b.preds]
            ia, ib = [a.preds[k] for k in keys], [b.preds[k] for k in keys]
            wa = out[ia]
            if wa @ wa > 0:
                out[ib] = wa * (wa @ out[ib]) / (wa @ wa)
        else:
            idx = np.array([[units[r].preds[c] for c in data["cols"]] for r in data["rows"]])
            U, s, Vt = np.linalg.svd(out[idx], full_matrices=False)
            s[data["of"] - 1:] = 0.0
            out[idx] = (U * s) @ Vt
    return out


def _describe(struct, conditions_with_sizes):
    names = {"zero": lambda d: f"{d[0]} {d[1]}-zero", "merge": lambda d: f"{d[0]}~{d[1]}",
             "rank": lambda d: f"layer {d['layer']} rank {d['of'] - 1}"}
    return tuple(f"{names[k](d)} ({v:.1e})" for v, k, d in conditions_with_sizes)


def near_stratum(param: Parameterization, theta: ArrayLike, policy: Optional[RankPolicy] = None,
                 zero_tol: Optional[float] = None, snap_max: float = 0.1, n_points: int = 2,
                 seed: Seed = 0, max_tries: int = 6, floor: Optional[float] = None,
                 precision: Optional[int] = None) -> Optional[NearStratum]:
    """Certify that a critical theta is critical because it lies close to a stratum S.

    Candidates: the conditions of the architecture graph that theta nearly meets (a side of a
    neuron of relative norm <= ``snap_max``, two incoming vectors with sine <= ``snap_max``, a
    dense layer's incoming matrix with s_min/s_max <= ``snap_max``), tried one at a time in
    order of size, then the two and three smallest together (at most ``max_tries``). Each gives
    theta_s on a stratum S; it must be explained: rank J(theta_s) = generic rank of S < R, where
    R is the generic rank of the stratum theta itself lies on (the generic rank of phi when it
    lies on none), and R indexes the singular value s_R below.

    The test (why a power law): on the ray theta(t) = theta_s + t (theta - theta_s), J(theta(t))
    is analytic (polynomial for polynomial maps) in t, so by Rellich's theorem its singular
    values are analytic in t up to sign and those vanishing at t = 0 vanish like c t^q with an
    integer order q. The order depends on the condition and the architecture, so it is measured,
    not assumed: for a one-hidden-layer monomial net of degree k, scaling a neuron's incoming
    weights by eps gives rho ~ eps^(k-1) (its J columns are a (w.x)^(k-1) x_i), scaling its
    outgoing weight gives eps^1, a nearly proportional pair of sine delta gives delta^3 for
    two inputs; through a second hidden layer the orders grow (widths 2,2,2,1 at k = 3: an
    in-zero neuron scaled by eps = 0.1 already gives rho ~ 3e-15). rho(t) = s_R/s_1 is
    measured at t = T, 2T, 4T, T the first of 2, 4, 8, ... with rho(T) >= ``floor`` (above
    round-off; T stops at max(64, snap_max / distance), so the ray stays within about
    ``snap_max`` of theta); q1, q2 are the two slopes of log2 rho. The certificate holds when
    |q1 - q2| <= 0.5 and q1 >= 0.75 (a power law of order >= 1, not a crossing at t = 1, where
    rho ~ |t - 1| gives slopes log2 3 and log2 7/3, nor a ray that stays critical) and
    rho(T) T^(-q1), the value the law predicts at theta, is below the
    rank tolerance tol / s_1: then proximity to S alone accounts for the lost rank. A critical
    point that exists for another reason has rho(t) ~ c |t - 1| and fails one of the two tests.

    Precision: in float64 ``floor`` is ``precision.FLOAT64_FLOOR`` (1e-12), so an approach of
    high order (widths 2,2,2,1, k = 4: rho ~ t^12 from a neuron at relative norm 4e-3, rho(1) ~
    4e-30) leaves the ray's first 5 doublings below round-off and T reaches the far end of the
    ray, where the power law no longer holds. ``precision=D`` measures rho with singular values
    of D digits (:mod:`paramgeo.geometry.precision`: an exact rational J on the exact ray points where
    the plugin declares ``symbolic``), with ``floor`` 10^(10 - D): the probe starts at T = 2
    and approaches of any order are fitted; where that fit fails it is repeated between
    theta_s and theta (T = 1/4: t = 1/4, 1/2, 1), closer to the stratum, where the leading
    term of the expansion dominates (widths 2,2,2,1, k = 3, a pair of h1 neurons at sine 5e-3:
    slopes 4.5, 3.9 on t = 2..8, 4.93, 4.86 on t = 1/4..1, order 5). The certificate records the digits and the integer
    order. ``precision=None``: float64, and where that certifies nothing and s_R/s_1 at theta
    is below ``precision.FLOAT64_FLOOR``, again in ``precision.DEFAULT_DIGITS`` digits (when
    m n <= ``precision.AUTO_MAX_ENTRIES``); ``precision=0``: float64 only.

    Beyond ``snap_max`` the decision is the order of approach alone: every single condition
    of size in (``snap_max``, 1) (at most ``max_tries``, in order of size) is snapped and
    probed only between theta_s and theta (t = 1/4, 1/2, 1, so no point farther from S than
    theta is used), and certifies when the two slopes agree within 0.25 on an integer order q
    (Rellich: an analytic approach has an integer order), q >= 0.75 and the law's value at
    theta, which is measured there, is below tol / s_1. Widths 2,2,2,1, k = 5, h1_0's
    incoming weights at relative norm 0.109: s_R/s_1 ~ t^15 (q = 3k) towards
    `layer 1: 1 in-zero; redundant {h2_0,h2_1}`, 6.7e-13 at theta, certified although the
    condition is above the cut-off 0.1.

    Returns a :class:`NearStratum`, or None (no candidate, or none certified). Networks only
    (architecture graph); None otherwise.
    """
    policy = policy_of(param, policy)
    zero_tol = policy.rtol if zero_tol is None else float(zero_tol)
    theta = param.as_theta(theta)
    struct = structure(param)
    if struct is None or struct.kind != "network":
        return None
    rng = as_rng(seed)
    R, _ = generic_values(param, policy)
    if precision:
        from ..geometry.precision import as_rationals, singular_values

        floor = 10.0 ** (10 - precision) if floor is None else floor
        decision = rank_at(param, theta, policy, warn=False, digits=precision)
    else:
        from ..geometry.precision import FLOAT64_FLOOR

        floor = FLOAT64_FLOOR if floor is None else floor
        decision = decide_rank(param.jacobian(theta), policy, warn=False)
    s1 = float(decision.singular_values[0])
    if decision.rank >= R or s1 <= 0:
        return None
    own = _point_stratum(param, struct, theta, R, zero_tol, policy, n_points, rng)
    R = own.generic_rank  # the drop to explain is below the generic rank of theta's stratum
    if decision.rank >= R:
        return None
    threshold = decision.tol / s1
    point = own.network
    cands = [c for c in point.near if c[0] <= snap_max]
    tries = [[c] for c in cands] + [cands[:j] for j in (2, 3) if len(cands) >= j]
    # within snap_max: probed outwards (and inwards in high precision); beyond it: single
    # conditions, probed inwards only, decided by the order of approach
    tries = ([(c, (2.0, 0.25) if precision else (2.0,), False) for c in tries[:max_tries]]
             + [([c], (0.25,), True) for c in point.near if snap_max < c[0] < 1][:max_tries])
    scale = float(np.linalg.norm(theta))

    def rho(t, theta_s):
        if precision:  # the ray point in exact rational arithmetic
            a, b = as_rationals(theta_s), as_rationals(theta)
            t = fractions.Fraction(t)
            s = singular_values(param, [x + t * (y - x) for x, y in zip(a, b)], precision)[0]
        else:
            s = np.linalg.svd(param.jacobian(theta_s + t * (theta - theta_s)), compute_uv=False)
        return float(s[R - 1] / s[0]) if s[0] > 0 else 0.0

    for chosen, starts, beyond in tries:
        theta_s = _snap(struct, theta, point, [(k, d) for _, k, d in chosen])
        st = _point_stratum(param, struct, theta_s, R, zero_tol, policy, n_points, rng)
        if not st.proper or st.generic_rank >= R or _rank(param, theta_s, policy) != \
                st.generic_rank:
            continue
        dist = float(np.linalg.norm(theta_s - theta)) / scale
        T_max = 0.25 if beyond else max(64.0, snap_max / max(dist, 1e-300))
        for T in starts:
            while rho(T, theta_s) < floor and T < T_max:
                T *= 2
            probe = tuple((t, rho(t, theta_s)) for t in (T, 2 * T, 4 * T))
            if probe[0][1] < floor:
                break  # the ray stays critical up to round-off: no decay to fit
            q1, q2 = (math.log2(probe[i + 1][1] / probe[i][1]) for i in (0, 1))
            predicted = probe[0][1] * T ** (-q1)
            if beyond and (abs(q1 - q2) > 0.25 or abs(q1 - round(q1)) > 0.25):
                continue  # beyond snap_max only a clean integer order certifies
            if abs(q1 - q2) <= 0.5 and q1 >= 0.75 and predicted <= threshold:
                return NearStratum(stratum=st.label, causes=tuple(st.causes),
                                   conditions=_describe(struct, chosen), distance=dist,
                                   snapped_rank=int(st.generic_rank), exponent=float(q1),
                                   predicted_ratio=float(predicted), probe=probe,
                                   order=int(round(q1)), precision=precision or None)
    from ..geometry import precision as hp

    ratio = float(decision.singular_values[R - 1]) / s1
    if precision is None and ratio < hp.FLOAT64_FLOOR and hp.escalates(param):
        try:  # float64 cannot see the approach: measure it in high precision
            return near_stratum(param, theta, policy, zero_tol, snap_max, n_points, rng,
                                max_tries, None, hp.DEFAULT_DIGITS)
        except hp.PrecisionError:
            return None
    return None


#: the stages :func:`classify` reports to its ``progress``
CLASSIFY_STAGES = 5


def classify(param: Parameterization, theta: ArrayLike, policy: Optional[RankPolicy] = None,
             zero_tol: Optional[float] = None, n_points: int = 2, seed: Seed = 0,
             snap_max: float = 0.1, precision: Optional[int] = None,
             progress: Optional[Callable[[int, int], None]] = None) -> Classification:
    """Classify theta as a regular or a critical point of phi and name the causes.

    theta is critical iff rank J(theta) < R, the generic rank; kernel_dim = n - rank and
    orbit_dim = the rank of the symmetry generators at theta. Causes: ``orbit-degenerate``
    (orbit_dim below its generic value: the continuous isotropy grows), ``subnetwork`` (a
    stratum of inactive or redundant neurons), ``factor-rank`` (a factor of a matrix-group
    factorization loses rank: "U lost rank 1"), ``dependent-weights`` (a dense layer's incoming
    weights lose rank), ``other`` (below the generic rank of the point's own stratum, or
    unexplained; a network's ``other`` point is then tested for proximity to a stratum,
    :func:`near_stratum`). On a kink of a piecewise-smooth phi the verdict is ``kink``: J
    there is one one-sided Jacobian. The strata and their ranks: docs/critical.md.

    Args:
        param: the parameterization phi: R^n -> R^m.
        theta: the point, shape (n,).
        policy: the tolerance policy of the rank decisions; None: the plugin's or the default.
        zero_tol: a neuron's weights count as zero below zero_tol * |theta| (and rows as
            proportional below that sine); None: ``policy.rtol``.
        n_points: random points of the point's stratum for its generic rank (>= 1).
        seed: seed of those points.
        snap_max: the largest scale-free distance to a stratum :func:`near_stratum` certifies
            (0 disables it).
        precision: digits of the rank decisions (:mod:`paramgeo.geometry.precision`): None
            decides in float64 and redoes what float64 cannot resolve in ``DEFAULT_DIGITS``
            digits (small J only); D > 0 decides with D digits throughout; 0 keeps float64 only.
        progress: called as progress(done, CLASSIFY_STAGES) after each stage (the rank at
            theta, the generic rank and orbit dimension, the orbit dimension at theta, the
            stratum, the causes).

    Returns:
        The :class:`Classification`: ``verdict``, ``causes``, ``rank``, ``generic_rank``,
        ``kernel_dim``, ``orbit_dim``, the stratum and the evidence (singular values, gap).

    Raises:
        ShapeError: theta is not n finite numbers.
        ArgumentError: a bad n_points, seed, snap_max or precision.

    Examples:
        >>> import paramgeo
        >>> from paramgeo.critical import classify
        >>> c = classify(paramgeo.get("uut", d=3, r=2), [1.0, 1.0, 0.0, 0.0, 0.0, 0.0])
        >>> c.verdict, c.causes, c.rank, c.generic_rank     # U of rank 1
        ('critical', ('factor-rank',), 3, 5)
    """
    from ..geometry import precision as hp

    def stage(k):
        if progress is not None:
            progress(k, CLASSIFY_STAGES)

    policy = policy_of(param, policy)
    zero_tol = policy.rtol if zero_tol is None else float(zero_tol)
    theta = param.as_theta(theta)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalDoubtWarning)  # kinks are reported below
        decision = rank_at(param, theta, policy, warn=False, digits=precision)
    stage(1)
    digits = (decision.certificate.digits
              if isinstance(decision.certificate, hp.PrecisionCertificate) else None)
    rank, s = decision.rank, decision.singular_values
    R, o_gen = generic_values(param, policy)
    stage(2)
    o = _orbit_dim(param, theta, policy)
    stage(3)
    cert = decision.certificate
    if cert is not None and digits is None:  # matrix-free: the margin sigma_min / sigma_max
        ratio = float(cert.sigma_min / cert.sigma_max) if cert.sigma_max > 0 else 0.0
    else:
        ratio = float(s[R - 1] / s[0]) if R > 0 and len(s) >= R and s[0] > 0 else 0.0
    struct: Any = structure(param)  # not None where the network states are read
    rng = as_rng(seed)
    st = (None if struct is None else
          _point_stratum(param, struct, theta, R, zero_tol, policy, n_points, rng))
    stage(4)
    if st is not None and st.proper and rank > st.generic_rank:
        # theta lies on its stratum, so its rank bounds the stratum's generic rank from below
        # (random draws of a ReLU network may switch units off on every probe input)
        st.generic_rank = rank
    kinks = decision.kinks  # rank_at's kink report (None for a smooth phi)
    on_kink = kinks is not None and kinks.on_kink
    critical = rank < R and not on_kink
    causes, near = [], None
    if critical:
        if o < o_gen:
            causes.append("orbit-degenerate")
        if st is not None and st.proper:
            causes += st.causes
        if st is None or rank < st.generic_rank or not causes:
            causes.append("other")
        if "other" in causes and snap_max > 0 and st is not None:
            near = near_stratum(param, theta, policy, zero_tol, snap_max, n_points, rng,
                                precision=digits or 0)  # classify escalates below, whole
            if near is not None:
                causes = [c for c in causes if c != "other"]
                causes += [c for c in near.causes if c not in causes]
    if ("other" in causes and precision is None and digits is None and snap_max > 0
            and st is not None and st.network is not None  # near_stratum reads networks
            and ratio < hp.FLOAT64_FLOOR and hp.escalates(param)):
        try:  # float64 cannot see how s_R/s_1 approaches 0 here: measure it in high precision
            return classify(param, theta, policy, zero_tol, n_points, rng, snap_max,
                            precision=hp.DEFAULT_DIGITS)
        except hp.PrecisionError:
            pass  # forward not evaluable in high precision: the float64 verdict stands
    drops = (factor_rank_drops(param, struct, theta, policy, seed)
             if struct is not None and struct.kind == "factor" else ())
    explanation = _explain(critical, causes, rank, R, st, near, o, o_gen)
    stage(CLASSIFY_STAGES)
    if critical and drops:
        explanation += "; " + ", ".join(f"{b} lost rank {g - k} (rank {k} of {g})"
                                        for b, k, g in drops)
    if on_kink:
        explanation = (f"no rank decision: theta is {kinks}; J here is one one-sided Jacobian "
                       f"(of rank {rank}; generic rank {R})")
    if decision.doubtful:
        explanation += (f"; NEAR-SINGULAR: singular value {decision.closest:.3g} vs tol "
                        f"{decision.tol:.3g} (gap {decision.gap:.3g})")
    net = st.network if st is not None else None
    inactive = tuple((u.name, struct.state_name(net.states[u.name])) for u in struct.units
                     if net.states[u.name]) if net else ()
    dist = (min([0.0] * bool(inactive or net.groups or net.dependent)
                + [c[0] for c in net.near if c[1] != "rank"], default=float("inf"))
            if net else None)
    return Classification(
        name=param.name, sizes=dict(param.sizes),
        verdict="kink" if on_kink else "critical" if critical else "regular", causes=tuple(causes),
        rank=rank, generic_rank=R, kernel_dim=param.n - rank, orbit_dim=o,
        generic_orbit_dim=o_gen, near_singular=bool(decision.doubtful), tol=float(decision.tol),
        gap=float(decision.gap), relevant_ratio=ratio, singular_values=s,
        structure=struct.kind if struct else "none", inactive=inactive,
        redundant=tuple(net.groups) if net else (),
        dependent=tuple({k: v for k, v in d.items() if k not in ("rows", "cols")}
                        | {"neurons": d["rows"]} for d in net.dependent) if net else (),
        stratum=st.label if st else None, on_proper_stratum=bool(st and st.proper),
        stratum_generic_rank=int(st.generic_rank) if st else None,
        rank_equals_stratum_generic=(rank == st.generic_rank) if st else None,
        subnetwork_distance=dist, near=near, explanation=explanation, kinks=kinks,
        rank_drops=drops, precision=digits, rank_route=decision.route,
        rank_certificate=decision.certificate)


def _explain(critical, causes, rank, R, st, near, o, o_gen):
    if st is None:
        if not critical:
            return f"regular: rank equals the generic rank {R}"
        if "orbit-degenerate" in causes:
            return (f"critical: rank {rank} < {R}; the isotropy group grows: orbit dim {o} "
                    f"(generic {o_gen}); without strata the engine cannot tell whether that "
                    "accounts for the whole drop, hence also 'other'")
        return f"critical: rank {rank} < {R}, and without strata nothing explains it"
    if not critical:
        return (f"regular: rank equals the generic rank {R}"
                + (f", although theta lies on the proper stratum '{st.label}' (whose generic "
                   f"rank is {st.generic_rank})" if st.proper else ""))
    if near is not None:
        digits = f", measured with {near.precision} digits" if near.precision else ""
        text = (f"critical: within {near.distance:.1e} of the stratum '{near.stratum}' (generic "
                f"rank {near.snapped_rank}); s_R/s_1 decays like t^{near.exponent:.2f} (order "
                f"{near.order}{digits}) towards it, which predicts {near.predicted_ratio:.1e} "
                "here, below the tolerance")
    elif "other" in causes:
        text = (f"critical: rank {rank} is below the generic rank {st.generic_rank} of its "
                f"stratum '{st.label}', and no nearby stratum accounts for it: the engine names "
                "no cause for the remaining drop")
    else:
        text = (f"critical: theta lies on the stratum '{st.label}', whose generic rank "
                f"{st.generic_rank} equals the rank here")
    if "dependent-weights" in causes and near is None:
        text += ("; a layer's incoming weights are linearly dependent with no two "
                 "proportional: the layer factors through fewer linear forms, which is not a "
                 "subnetwork")
    if "orbit-degenerate" in causes:
        text += f"; the isotropy group grows: orbit dim {o} (generic {o_gen})"
    return text
