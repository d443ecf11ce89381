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

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from ..contract.arguments import parameterization
from ..errors import ArgumentError
from ..results import Result
from .alignment import align, is_isometric

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..contract.parameterization import Parameterization


@dataclasses.dataclass(frozen=True, kw_only=True)
class Distance(Result):
    """d(theta1, theta2) modulo the group: ``kind`` is "quotient distance" for groups of
    isometries, "orbit distance" otherwise (not a geodesic distance); ``exact`` and
    ``lower_bound`` come from the alignment's certificate."""

    value: float
    kind: str
    group: str
    exact: bool
    lower_bound: float


def distance(param: Parameterization, theta1: ArrayLike, theta2: ArrayLike) -> Distance:
    """The distance of theta1 and theta2 modulo G = ``param.symmetry()``.

    d_G(theta1, theta2) = min_g |theta1 - g . theta2|: the quotient distance when G acts by
    isometries (O(r), permutations, sign flips), the orbit distance (named so) otherwise; the
    minimiser and its certificate are those of :func:`align` (formulas and references in the
    module docstring and docs/quotient.md).

    Args:
        param: a parameterization that declares a symmetry group.
        theta1: a point, shape (n,).
        theta2: a point, shape (n,).

    Returns:
        The :class:`Distance`: ``value``, ``kind``, ``group``, ``exact`` and ``lower_bound``.

    Raises:
        NotProvidedError: ``param`` declares no symmetry.
        ShapeError: theta1 or theta2 is not n finite numbers.

    Examples:
        >>> import numpy as np, paramgeo
        >>> from paramgeo.quotient import distance
        >>> p = paramgeo.get("uut", d=3, r=2)                  # G = O(2) acting on U
        >>> U = np.arange(1.0, 7.0).reshape(3, 2)
        >>> R = np.array([[0.0, -1.0], [1.0, 0.0]])             # a rotation
        >>> d = distance(p, U.ravel(), (U @ R).ravel())
        >>> d.kind, round(d.value, 9)
        ('quotient distance', 0.0)
    """
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


def log(param: Parameterization, theta1: ArrayLike, theta2: ArrayLike) -> NDArray[np.float64]:
    """Horizontal lift at theta1 of the quotient log: v = g* . theta2 - theta1.

    g* is the optimal alignment (:func:`align`): |v| is the quotient distance and v is
    orthogonal to the orbit of theta1.

    Args:
        param: a parameterization whose declared group acts by isometries.
        theta1: the base point, shape (n,).
        theta2: the other point, shape (n,).

    Returns:
        v, shape (n,).

    Raises:
        ArgumentError: the group does not act by isometries.
        NotProvidedError: ``param`` declares no symmetry.

    Examples:
        >>> import numpy as np, paramgeo
        >>> from paramgeo.quotient import log
        >>> p = paramgeo.get("uut", d=3, r=2)
        >>> U = np.arange(1.0, 7.0).reshape(3, 2)
        >>> v = log(p, U.ravel(), (2 * U).ravel())             # the same orbit direction
        >>> bool(np.allclose(v, U.ravel()))
        True
    """
    _isometric_group(param, "log")
    a = align(param, theta1, theta2)
    return a.aligned - param.as_theta(theta1)


def exp(param: Parameterization, theta: ArrayLike, v: ArrayLike) -> NDArray[np.float64]:
    """A representative of the quotient exponential of v at the orbit of theta: theta + v_h.

    v_h is the horizontal part of v, orthogonal to the orbit
    (:func:`paramgeo.horizontal_projection`): a horizontal straight line projects to a quotient
    geodesic.

    Args:
        param: a parameterization whose declared group acts by isometries.
        theta: the base point, shape (n,).
        v: the tangent vector, shape (n,).

    Returns:
        theta + v_h, shape (n,).

    Raises:
        ArgumentError: the group does not act by isometries.
        NotProvidedError: ``param`` declares no symmetry.

    Examples:
        >>> import numpy as np, paramgeo
        >>> from paramgeo.quotient import exp
        >>> p = paramgeo.get("uut", d=3, r=2)
        >>> U = np.arange(1.0, 7.0).reshape(3, 2)
        >>> vertical = (U @ [[0.0, -1.0], [1.0, 0.0]]).ravel()   # along the O(2) orbit
        >>> bool(np.allclose(exp(p, U.ravel(), vertical), U.ravel()))
        True
    """
    from ..geometry.jacobian import horizontal_projection

    _isometric_group(param, "exp")
    theta = param.as_theta(theta)
    v = param.as_theta(v)
    return theta + horizontal_projection(param, theta, v)


def geodesic(param: Parameterization, theta1: ArrayLike, theta2: ArrayLike,
             t: ArrayLike) -> NDArray[np.float64]:
    """Representatives theta1 + t (g* . theta2 - theta1) of the quotient geodesic.

    From [theta1] (t = 0) to [theta2] (t = 1), g* the optimal alignment of theta2 to theta1
    (:func:`align`): the straight line to the aligned point is horizontal, so it projects to a
    geodesic of the quotient.

    Args:
        param: a parameterization whose declared group acts by isometries.
        theta1: the start, shape (n,).
        theta2: the end, shape (n,).
        t: a number or a 1-D array of times.

    Returns:
        The points, shape (len(t), n).

    Raises:
        ArgumentError: the group does not act by isometries, or t is not a finite number or
            1-D array.
        NotProvidedError: ``param`` declares no symmetry.

    Examples:
        >>> import numpy as np, paramgeo
        >>> from paramgeo.quotient import geodesic
        >>> p = paramgeo.get("uut", d=3, r=2)
        >>> U = np.arange(1.0, 7.0).ravel()
        >>> geodesic(p, U, 2 * U, [0.0, 0.5, 1.0]).shape
        (3, 6)
    """
    _isometric_group(param, "geodesic")
    v = log(param, theta1, theta2)
    t = np.atleast_1d(np.asarray(t, float))
    if t.ndim != 1 or not np.all(np.isfinite(t)):
        raise ArgumentError(f"geodesic: t must be a finite number or 1-D array, got {t!r}")
    return param.as_theta(theta1)[None, :] + t[:, None] * v[None, :]
