"""Symmetry groups of parameterizations, phi(g . theta) = phi(theta), and their discovery.

:mod:`paramgeo.symmetry.groups` holds the groups a plugin declares (orthogonal, general linear,
scaling tori, signed permutations, products); :mod:`paramgeo.symmetry.projectors` their
vertical projectors (P_V without dense bases);
:mod:`paramgeo.symmetry.discovery` finds the symmetries of a parameterization that declares
none (:func:`discover`). Both are re-exported here, the public place to import them from.
"""

from .discovery import MAX_LINEAR_DIM, DiscoveredSymmetry, LinearSymmetryGroup, discover
# every public name of groups, as when symmetry was one module (groups added there need no edit here)
from .groups import *  # noqa: F401,F403
