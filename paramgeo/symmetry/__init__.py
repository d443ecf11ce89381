"""Symmetry groups of parameterizations, phi(g . theta) = phi(theta), and their discovery.

:mod:`paramgeo.symmetry.groups` holds the groups a plugin declares (orthogonal, general linear,
scaling tori, signed permutations, products); :mod:`paramgeo.symmetry.projectors` their
vertical projectors (P_V without dense bases);
:mod:`paramgeo.symmetry.discovery` finds the symmetries of a parameterization that declares
none (:func:`discover`; :func:`discovered_group` declares what it finds);
:mod:`paramgeo.symmetry.architecture` reads the group of a layered network from its
architecture graph (:func:`from_architecture`). All are re-exported here, the public place to
import them from.
"""

from .actions import FieldGroup, ShearGroup, UnitPermutationGroup
from .architecture import ACTIVATIONS, from_architecture
from .discovery import (MAX_LINEAR_DIM, DiscoveredSymmetry, LinearSymmetryGroup, discover,
                        discovered_group)
# every public name of groups, as when symmetry was one module (groups added there need no edit here)
from .groups import *  # noqa: F401,F403
from .verify import GroupVerification, verify_group
