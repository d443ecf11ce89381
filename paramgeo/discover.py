"""``paramgeo.discover``: the public names of automatic symmetry discovery, implemented in
:mod:`paramgeo.symmetry.discovery` (inside the symmetry package, so that
``paramgeo.symmetry.discover`` needs no import circle). Kept so that
``from paramgeo.discover import discover`` works as before; new code imports from
:mod:`paramgeo.symmetry`.
"""

from .symmetry.discovery import (MAX_LINEAR_DIM, DiscoveredSymmetry, LinearSymmetryGroup, discover,
                                 discovered_group)

__all__ = ["MAX_LINEAR_DIM", "DiscoveredSymmetry", "LinearSymmetryGroup", "discover",
           "discovered_group"]
