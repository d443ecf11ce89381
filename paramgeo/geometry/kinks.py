"""Kinks: where a piecewise-smooth parameterization is not differentiable.

Some maps are smooth only off a finite union of hypersurfaces of Theta. For a two-layer ReLU
network on a fixed input set, phi(theta)_i = sum_j a_j relu(w_j . x_i + b_j) is polynomial on
each *activation region* and not differentiable where a pre-activation w_j . x_i + b_j
vanishes (with a_j != 0). A plugin of this kind declares the capability ``kinks`` and
implements ``kinks(theta)`` -> ``(labels, distances)``: one label and one scale-free distance
per nonsmooth condition, the distance being 0 exactly on its kink (for ReLU:
|w_j . x_i + b_j| / (|w_j| |x_i| + |b_j|), invariant under the neuron rescalings).

On a kink, J(theta) as computed (autograd differentiates max(z, 0) with some convention at
z = 0; a closed form picks a side) is one of several one-sided Jacobians (Clarke's generalized
Jacobian is their convex hull: Clarke 1983, "Optimization and nonsmooth analysis"), so its rank
is not a property of phi at theta. The engines therefore *report the kink instead of a rank
decision*: :func:`paramgeo.geometry.rank_at` attaches the :class:`KinkReport` to its
``RankDecision`` and warns, and :func:`paramgeo.critical.classify` returns the verdict
``"kink"`` with the kinks named.

Tolerance: a condition counts as met when its distance is at most ``KINK_TOL = 1e-8``. A
pre-activation computed in double precision carries a relative error of about d * 1e-16, and a
point constructed on a kink (b = -w . x) lands within that of it, so 1e-8 separates "on the
kink up to round-off" from "off it" with seven orders of margin; points closer than ~1e-8 are
also where central finite differences (step 1e-6) straddle the kink.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Optional

import numpy as np

from ..errors import ContractError
from ..results import Result

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..contract.parameterization import Parameterization

#: A nonsmooth condition is met (theta is on that kink) when its distance is <= KINK_TOL.
KINK_TOL = 1e-8


@dataclasses.dataclass(frozen=True, kw_only=True)
class KinkReport(Result):
    """The kinks theta lies on (distance <= tol) and the closest one."""

    on_kink: bool
    kinks: tuple  # labels of the conditions met, e.g. "neuron 2 at input 5"
    closest: float  # the smallest distance (inf without conditions)
    closest_label: str
    tol: float
    conditions: int  # number of nonsmooth conditions the plugin declares at theta

    def __str__(self):
        if not self.on_kink:
            return (f"off the kinks: closest {self.closest_label} at distance "
                    f"{self.closest:.2e} (tol {self.tol:.0e})")
        shown = ", ".join(self.kinks[:5]) + (", ..." if len(self.kinks) > 5 else "")
        return (f"ON A KINK: {len(self.kinks)} of {self.conditions} nonsmooth conditions met "
                f"({shown}); phi is not differentiable here")


def kink_report(param: Parameterization, theta: ArrayLike,
                tol: float = KINK_TOL) -> Optional[KinkReport]:
    """The :class:`KinkReport` of theta, or None if ``param`` declares no kinks (smooth phi).

    Met conditions: distance_k(theta) <= tol, with ``(labels, distances) = param.kinks(theta)``.
    Raises ContractError if the plugin returns malformed distances.
    """
    if not param.provides("kinks"):
        return None
    labels, dist = param.kinks(theta)
    dist = np.asarray(dist, dtype=float).ravel()
    labels = tuple(str(label) for label in labels)
    if len(labels) != dist.size or not np.all(dist >= 0):  # NaN fails >= 0
        raise ContractError(
            f"{param.name}.kinks(theta) must return (labels, distances) of equal length with "
            f"distances >= 0; got {len(labels)} labels and distances {dist[:3]}...")
    met = np.flatnonzero(dist <= tol)
    k = int(np.argmin(dist)) if dist.size else -1
    return KinkReport(on_kink=bool(met.size), kinks=tuple(labels[i] for i in met),
                      closest=float(dist[k]) if dist.size else float("inf"),
                      closest_label=labels[k] if dist.size else "", tol=float(tol),
                      conditions=int(dist.size))
