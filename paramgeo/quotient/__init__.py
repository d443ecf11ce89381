"""Moving in the quotient: align two points modulo the symmetry group, orbit and quotient
distances, log, exp and geodesics where the group acts by isometries, loss barriers along
straight, aligned and geodesic paths, and symmetry teleportation along an orbit.

Public functions: :func:`align` (:class:`Alignment`, :class:`Certificate`);
:func:`distance` (:class:`Distance`), :func:`log`, :func:`exp`, :func:`geodesic`;
:func:`barrier` (:class:`Barrier`, :func:`barriers`).
"""

from .align import ALIGNABLE, Alignment, Certificate, act_element, align, is_isometric
from .barrier import PATHS, Barrier, barrier, barriers
from .metric import Distance, distance, exp, geodesic, log

__all__ = ["ALIGNABLE", "PATHS", "Alignment", "Barrier", "Certificate", "Distance",
           "act_element", "align", "barrier", "barriers", "distance", "exp", "geodesic", "is_isometric", "log"]
