"""Equivariance of a parameterization under a group acting on its *inputs*.

The symmetries found by :mod:`paramgeo.symmetry` act on the parameters: phi(g . theta) =
phi(theta). Some properties of a model are statements about its inputs instead: a rotary
attention head's logits depend on the positions of two tokens only through their offset, so
moving every position by k leaves them unchanged; a linear model on data points permutes its
outputs when the data points are permuted. Such a plugin's predictor depends on fixed inputs z_0
(tokens, positions, data), phi(theta) = f(theta; z_0), and it may declare the capability
``input_action``: its method ``input_action()`` returns an :class:`InputAction` holding

* ``forward(theta, g)``: f(theta; g . z_0), the predictor on the transformed inputs (shape
  ``predictor_shape``);
* ``elements``: (label, g) pairs of group elements to test, and the ``identity`` element;
* ``output_action(g, y)``: how the predictor is expected to move, rho(g) y (default: not at all,
  rho(g) = id, i.e. invariance).

The predictor is *equivariant* under the action when

    f(theta; g . z_0) = rho(g) f(theta; z_0)   for every theta and every tested g,

which :func:`input_equivariance` tests at random theta (relative error below ``tol``). The
declaration carries no claim: equivariance is a discovered property and may fail (an absolute
position encoding is not shift-invariant). The contract check verifies the declaration is wired
to the same map: ``forward(theta, identity) = phi(theta)``.

References: Cohen, Welling (2016), "Group equivariant convolutional networks" (equivariance
f(g . x) = rho(g) f(x)); Su, Lu, Pan, Murtadha, Wen, Liu (2021), "RoFormer: enhanced
transformer with rotary position embedding" (logits that depend on relative positions only).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ContractError
from ..results import Result

if TYPE_CHECKING:
    from ..contract.parameterization import Parameterization

#: relative tolerance of the equivariance test (exact identities up to round-off)
EQUIVARIANCE_TOL = 1e-9


class InputAction:
    """A group acting on a plugin's fixed inputs, declared through ``input_action()``.

    ``name`` describes the action (e.g. "shifts of all positions p -> p + k"); ``forward(theta,
    g)`` is the predictor on the inputs moved by g; ``elements`` a sequence of (label, g) pairs
    tested by :func:`input_equivariance`; ``identity`` the neutral element; ``output_action(g,
    y)`` the expected transformation rho(g) of the predictor (None: invariance, rho(g) = id).
    """

    def __init__(self, name, forward, elements, identity, output_action=None):
        self.name = str(name)
        self.forward = forward
        self.elements = tuple((str(label), g) for label, g in elements)
        self.identity = identity
        self.output_action = output_action

    def expected(self, g: Any, y: Any) -> Any:
        """rho(g) y, the predictor y moved as the declaration says (identity by default)."""
        return y if self.output_action is None else self.output_action(g, y)


@dataclasses.dataclass(frozen=True, kw_only=True)
class InputEquivariance(Result):
    """Outcome of :func:`input_equivariance`: ``equivariant`` iff every tested element's worst
    relative error max_theta |f(theta; g . z_0) - rho(g) f(theta; z_0)| / max(|f|, 1) is within
    ``tolerance``; ``errors`` maps each element's label to that error."""

    action: str
    equivariant: bool
    errors: dict
    tolerance: float
    points: int
    invariance: bool  # rho(g) = id: the predictor is unchanged (a pure invariance)

    def __str__(self):
        kind = "invariant" if self.invariance else "equivariant"
        if not self.errors:
            return f"input action ({self.action}): no elements to test"
        worst = max(self.errors.values())
        verdict = kind if self.equivariant else f"NOT {kind}"
        return (f"input action ({self.action}): {verdict} (worst relative error {worst:.1e} "
                f"over {len(self.errors)} elements x {self.points} points, tol {self.tolerance:.0e})")


def _rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape:
        return float("inf")
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1.0))


def declared_action(param: Parameterization) -> InputAction:
    """The plugin's :class:`InputAction`, validated (ContractError naming the plugin otherwise)."""
    action = param.input_action()
    if not isinstance(action, InputAction):
        raise ContractError(
            f"{param.name}: input_action() returned {type(action).__name__}; it must return a "
            "paramgeo.symmetry.equivariance.InputAction")
    return action


def input_equivariance(param: Parameterization, seed: int = 0, points: int = 3,
                       tol: float = EQUIVARIANCE_TOL) -> InputEquivariance:
    """Test f(theta; g . z_0) = rho(g) f(theta; z_0) for the plugin's declared input action
    (capability ``input_action``) at ``points`` random theta from ``random_point`` (seeded);
    returns an :class:`InputEquivariance` (module docstring for the definitions)."""
    action = declared_action(param)
    rng = np.random.default_rng(seed)
    thetas = [np.asarray(param.random_point(rng), float) for _ in range(points)]
    errors = {}
    for label, g in action.elements:
        worst = 0.0
        for theta in thetas:
            base = np.asarray(param.forward(theta), float)
            moved = np.asarray(action.forward(theta, g), float)
            worst = max(worst, _rel(moved, action.expected(g, base)))
        errors[label] = worst
    return InputEquivariance(action=action.name,
                             equivariant=bool(errors) and max(errors.values()) <= tol,
                             errors=errors, tolerance=tol, points=points,
                             invariance=action.output_action is None)
