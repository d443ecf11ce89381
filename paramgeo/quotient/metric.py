"""Distances, log, exp and geodesics in the quotient theta / G.

When G acts on the parameter space R^n by Euclidean isometries (O(r) on the factor of
U -> U U^T, permutations of units, sign flips), the quotient carries the distance

    d([theta1], [theta2]) = min_{g in G} |theta1 - g . theta2|,

which on the regular part is the geodesic distance of the quotient Riemannian metric
(the Euclidean metric restricted to horizontal vectors). With g* the minimiser (:func:`align`),
the horizontal lift of the Riemannian log at [theta1] is v = g* . theta2 - theta1 (the first
order condition makes it orthogonal to the orbit of theta1), the exponential of a horizontal
v is [theta1 + v], and the geodesic is t -> [theta1 + t v], t in [0, 1] (horizontal straight
lines of R^n project to geodesics of the quotient; Gallot, Hulin, Lafontaine 2004,
"Riemannian geometry", 2.28). For U -> U U^T this is the Bures-Wasserstein geometry of PSD
matrices: with A = U1 U1^T, B = U2 U2^T,

    d^2 = |U1|^2 + |U2|^2 - 2 |U2^T U1|_* = tr A + tr B - 2 tr((A^1/2 B A^1/2)^1/2)

(|.|_* the nuclear norm; Bhatia, Jain, Lim 2019, "On the Bures-Wasserstein distance between
positive definite matrices"; Massart and Absil 2020, "Quotient geometry with simple geodesics
for the manifold of fixed-rank positive-semidefinite matrices").

Where G does not act by isometries (GL(r) on U V^T, the rescaling tori of Hadamard, diagonal
and ReLU networks) the orbit distance inf_g |theta1 - g . theta2| is still defined but is
not the distance of any quotient metric: :func:`distance` says so, and :func:`log`,
:func:`exp` and :func:`geodesic` refuse.
"""

import dataclasses

import numpy as np

from ..contract.arguments import parameterization
from ..errors import ArgumentError
from ..results import Result
from .align import align, is_isometric


@dataclasses.dataclass(frozen=True)
class Distance(Result):
    """d(theta1, theta2) modulo the group: ``kind`` is "quotient distance" for groups of
    isometries, "orbit distance" otherwise (not a geodesic distance); ``exact`` and
    ``lower_bound`` come from the alignment's certificate."""

    value: float
    kind: str
    group: str
    exact: bool
    lower_bound: float


def distance(param, theta1, theta2):
    """The distance of theta1 and theta2 modulo G = ``param.symmetry()``:
    min_g |theta1 - g . theta2|, the quotient distance when G acts by isometries and the orbit
    distance (named so) otherwise. See the module docstring for the formulas and references."""
    a = align(param, theta1, theta2)
    return Distance(value=a.distance,
                    kind="quotient distance" if a.isometric else "orbit distance",
                    group=a.group, exact=a.certificate.exact,
                    lower_bound=a.certificate.lower_bound)


def _isometric_group(param, what):
    parameterization(param)
    group = param.symmetry()
    if not is_isometric(group):
        raise ArgumentError(
            f"{what}: the group {group.name} of {param.name} does not act by isometries of the "
            "parameter metric, so the orbit distance is not a quotient geodesic distance and "
            "there is no quotient log/exp/geodesic; use paramgeo.quotient.align for the orbit "
            "distance")
    return group


def log(param, theta1, theta2):
    """Horizontal lift at theta1 of the quotient log: v = g* . theta2 - theta1 with g* the
    optimal alignment (|v| is the quotient distance; v is orthogonal to the orbit of theta1).
    Only for groups of isometries (ArgumentError otherwise)."""
    _isometric_group(param, "log")
    a = align(param, theta1, theta2)
    return a.aligned - param.as_theta(theta1)


def exp(param, theta, v):
    """A representative of the quotient exponential of v at the orbit of theta: theta + v_h,
    with v_h the horizontal part of v (the component orthogonal to the orbit; a horizontal
    straight line projects to a quotient geodesic). Only for groups of isometries."""
    from ..geometry.jacobian import horizontal_projection

    _isometric_group(param, "exp")
    theta = param.as_theta(theta)
    v = param.as_theta(v)
    return theta + horizontal_projection(param, theta, v)


def geodesic(param, theta1, theta2, t):
    """Representatives theta1 + t (g* . theta2 - theta1) of the quotient geodesic from
    [theta1] (t = 0) to [theta2] (t = 1) at the times ``t`` (a number or a 1-D array): rows of
    an array (len(t), n). Only for groups of isometries."""
    _isometric_group(param, "geodesic")
    v = log(param, theta1, theta2)
    t = np.atleast_1d(np.asarray(t, float))
    if t.ndim != 1 or not np.all(np.isfinite(t)):
        raise ArgumentError(f"geodesic: t must be a finite number or 1-D array, got {t!r}")
    return param.as_theta(theta1)[None, :] + t[:, None] * v[None, :]
