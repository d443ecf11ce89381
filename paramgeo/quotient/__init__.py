"""Moving in the quotient: align two points modulo the symmetry group, orbit and quotient
distances, log, exp and geodesics where the group acts by isometries, loss barriers along
straight, aligned and geodesic paths, and symmetry teleportation along an orbit.

Public functions: :func:`align` (:class:`Alignment`, :class:`Certificate`);
:func:`distance` (:class:`Distance`), :func:`log`, :func:`exp`, :func:`geodesic`;
:func:`barrier` (:class:`Barrier`, :func:`barriers`); :func:`teleport` (:class:`Teleport`), and
:class:`Teleporter`, teleportation every k steps of gradient descent.
"""

from .alignment import ALIGNABLE, Alignment, Certificate, act_element, align, is_isometric
from .loss_barriers import PATHS, Barrier, barrier, barriers
from .metric import Distance, distance, exp, geodesic, log
from .teleportation import OBJECTIVES, Teleport, Teleporter, teleport

__all__ = ["ALIGNABLE", "OBJECTIVES", "PATHS", "Alignment", "Barrier", "Certificate", "Distance",
           "Teleport", "Teleporter", "act_element", "align", "barrier", "barriers", "distance", "exp",
           "geodesic", "is_isometric", "log", "teleport"]
