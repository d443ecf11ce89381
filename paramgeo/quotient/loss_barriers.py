"""Loss barriers between two parameter vectors, along straight, aligned and geodesic paths.

With L(theta) = ell(phi(theta)) and a path theta(lambda), lambda in [0, 1], from theta1 to
theta2 (or to an aligned g . theta2), two definitions are in use:

* Ainsworth, Hayase, Srinivasa (2023), "Git Re-Basin":
      B_mean = max_lambda L(theta(lambda)) - (L(theta1) + L(theta2)) / 2;
* Entezari, Sedghi, Saukh, Neyshabur (2022), "The role of permutation invariance in linear
  mode connectivity of neural networks":
      B_interp = sup_lambda [L(theta(lambda)) - ((1 - lambda) L(theta1) + lambda L(theta2))].

Paths: "linear" theta1 + lambda (theta2 - theta1); "aligned" theta1 + lambda (g . theta2 -
theta1) with g from :func:`paramgeo.quotient.align` (L(g . theta2) = L(theta2) since phi is
invariant); "geodesic" the quotient geodesic, defined where the group acts by isometries, whose
representatives are exactly the aligned straight path (:func:`paramgeo.quotient.geodesic`).
The maximum is taken over ``n_points`` equally spaced lambda (both ends included).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from ..contract.arguments import integer, parameterization
from ..errors import ArgumentError
from ..losses.predictor import pullback
from ..results import Result
from .alignment import align
from .metric import geodesic

if TYPE_CHECKING:
    from os import PathLike

    from numpy.typing import ArrayLike

    from ..losses.predictor import Loss
    from ..contract.parameterization import Parameterization
    from .alignment import Alignment

#: the paths :func:`barrier` knows
PATHS = ("linear", "aligned", "geodesic")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Barrier(Result):
    """Loss along a path and both barriers.

    Attributes:
        path: "linear", "aligned" or "geodesic".
        lambdas: the sampled lambda in [0, 1], shape (n_points,).
        losses: L(theta(lambda)) at each, shape (n_points,).
        ainsworth: max L - the mean of the end losses (Ainsworth et al. 2023).
        entezari: max of L minus the linear interpolation of the end losses (Entezari et al.
            2022).
        end_losses: (L(theta(0)), L(theta(1))).
        distance: the length |theta(1) - theta(0)|.
    """

    path: str
    lambdas: np.ndarray
    losses: np.ndarray
    ainsworth: float
    entezari: float
    end_losses: tuple
    distance: float

    def __str__(self):
        return (f"loss barrier along the {self.path} path (length {self.distance:.6g}):\n"
                f"  Ainsworth et al. 2023 (max L - mean of end losses)          "
                f"{self.ainsworth:.6g}\n"
                f"  Entezari et al. 2022 (max of L - interpolated end losses)  "
                f"{self.entezari:.6g}\n"
                f"  end losses  {self.end_losses[0]:.6g}, {self.end_losses[1]:.6g}")

    def plot(self, path: Optional[str | PathLike[str]] = None, ax: Any = None) -> Any:
        """Plot L(theta(lambda)) and the interpolated end losses (matplotlib, the ``plot``
        extra); save to ``path`` when given. Returns the axes."""
        try:
            import matplotlib

            if path is not None and ax is None:
                matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise ArgumentError("plotting needs matplotlib: pip install 'paramgeo[plot]'") \
                from None
        if ax is None:
            _, ax = plt.subplots(figsize=(5, 3.5))
        ax.plot(self.lambdas, self.losses, label=f"{self.path} path")
        l0, l1 = self.end_losses
        ax.plot([0, 1], [l0, l1], "k--", lw=0.8, label="interpolated end losses")
        ax.set_xlabel("lambda")
        ax.set_ylabel("loss")
        ax.legend()
        if path is not None:
            from ..io.files import save_figure

            ax.figure.tight_layout()  # type: ignore[union-attr]
            save_figure(ax.figure, path)
        return ax


def barriers(lambdas: ArrayLike, losses: ArrayLike) -> tuple[float, float]:
    """(B_mean, B_interp) of sampled losses L(lambda_i), lambda_0 = 0, lambda_last = 1:
    max L - (L(0) + L(1)) / 2 (Ainsworth et al. 2023) and max [L - (1 - lambda) L(0) -
    lambda L(1)] (Entezari et al. 2022)."""
    lambdas, losses = np.asarray(lambdas, float), np.asarray(losses, float)
    l0, l1 = losses[0], losses[-1]
    return (float(np.max(losses) - 0.5 * (l0 + l1)),
            float(np.max(losses - ((1 - lambdas) * l0 + lambdas * l1))))


def barrier(param: Parameterization, loss: Loss, theta1: ArrayLike, theta2: ArrayLike,
            path: str = "linear", n_points: int = 25,
            alignment: Optional[Alignment] = None) -> Barrier:
    """The loss barrier between theta1 and theta2 along a path (Ainsworth et al. 2023).

    B = max_lambda L(theta(lambda)) - (L(theta1) + L(theta2)) / 2 (``ainsworth``), and
    max_lambda [L(theta(lambda)) - ((1 - lambda) L(theta1) + lambda L(theta2))] (``entezari``,
    Entezari et al. 2022), sampled along the path (the paths: module docstring and
    docs/quotient.md).

    Args:
        param: the parameterization phi: R^n -> R^m.
        loss: a :class:`paramgeo.losses.Loss` on the predictors.
        theta1: one end, shape (n,).
        theta2: the other end, shape (n,).
        path: "linear", "aligned" (to g . theta2 after :func:`align`) or "geodesic".
        n_points: samples of lambda in [0, 1] (>= 2).
        alignment: an :class:`Alignment` of the same pair to reuse (the aligned path).

    Returns:
        The :class:`Barrier`.

    Raises:
        ArgumentError: an unknown path or too few points.
        NotProvidedError: an aligned or geodesic path without a declared symmetry.

    Examples:
        >>> import numpy as np, paramgeo
        >>> from paramgeo.losses.predictor import LinearMeasurements
        >>> from paramgeo.quotient import barrier
        >>> p = paramgeo.get("uut", d=3, r=2)
        >>> loss = LinearMeasurements(np.eye(9), np.eye(3).ravel())
        >>> U = np.arange(1.0, 7.0).reshape(3, 2)
        >>> R = np.array([[0.0, -1.0], [1.0, 0.0]])              # the same U U^T
        >>> round(barrier(p, loss, U.ravel(), (U @ R).ravel(), path="aligned").ainsworth, 9)
        0.0
    """
    parameterization(param)
    if path not in PATHS:
        raise ArgumentError(f"path must be one of {', '.join(PATHS)}, got {path!r}")
    n_points = integer(n_points, "n_points", minimum=2)
    x, y = param.as_theta(theta1), param.as_theta(theta2)
    value, _ = pullback(param, loss)
    lambdas = np.linspace(0.0, 1.0, n_points)
    if path == "linear":
        end = y
        points = x[None, :] + lambdas[:, None] * (end - x)[None, :]
    elif path == "aligned":
        end = (alignment or align(param, x, y)).aligned
        points = x[None, :] + lambdas[:, None] * (end - x)[None, :]
    else:
        points = geodesic(param, x, y, lambdas)
        end = points[-1]
    losses = np.array([value(t) for t in points])
    b_mean, b_interp = barriers(lambdas, losses)
    return Barrier(path=path, lambdas=lambdas, losses=losses, ainsworth=b_mean,
                   entezari=b_interp, end_losses=(float(losses[0]), float(losses[-1])),
                   distance=float(np.linalg.norm(end - x)))
