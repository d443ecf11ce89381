"""Symmetry groups of parameterizations, phi(g . theta) = phi(theta), and their discovery.

:mod:`paramgeo.symmetry.groups` holds the groups a plugin declares (orthogonal, general linear,
scaling tori, signed permutations, products) and their vertical projectors;
:mod:`paramgeo.symmetry.discovery` finds the symmetries of a parameterization that declares
none (:func:`discover`). Both are re-exported here, the public place to import them from.
"""

from .discovery import MAX_LINEAR_DIM, DiscoveredSymmetry, LinearSymmetryGroup, discover
from .groups import (
    SPARSE_ACTION_MIN_N,
    GeneralLinearGroup,
    MatrixGroupAction,
    OrthogonalGroup,
    ProductGroup,
    ScalingTorus,
    SignedPermutationGroup,
    SymmetryGroup,
    VerticalProjector,
    blocks_of,
    linear_action_matrices,
    sparse_projector,
)
