"""Moving in the quotient: align two points modulo the symmetry group, orbit and quotient
distances, log, exp and geodesics where the group acts by isometries, loss barriers along
straight, aligned and geodesic paths, and symmetry teleportation along an orbit.

Public functions: :func:`align` (:class:`Alignment`, :class:`Certificate`).
"""

from .align import ALIGNABLE, Alignment, Certificate, act_element, align, is_isometric

__all__ = ["ALIGNABLE", "Alignment", "Certificate", "act_element", "align", "is_isometric"]
