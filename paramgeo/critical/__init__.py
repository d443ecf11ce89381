"""Critical points of a parameterization and of a loss; strata and their poset.

A point theta is a *critical point of the parameterization* phi: R^n -> R^m when

    rank J(theta) < R,   R = generic rank of phi = max_theta rank J(theta),

the singular points of singular learning theory (Watanabe 2009, "Algebraic geometry and
statistical learning theory"). This module reads only the contract: J (``jacobian``,
``jacobian_derivative``), the symmetry generators and, where declared, the architecture graph.

Layout (every public name is re-exported here): :mod:`.patterns` (generic values, the neurons
or channels strata are made of, activity patterns), :mod:`.points` (the stratum a point lies
on), :mod:`.stratification` (the strata and
their poset, :func:`strata`), :mod:`.classification` (:func:`classify`, :func:`near_stratum`),
:mod:`.searching` (:func:`search` from random starts) and :mod:`.loss_points` (true versus
spurious critical points of ell o phi, :func:`loss_point`). Each module's docstring gives its
mathematics and references.
"""

from .classification import Classification, NearStratum, classify, near_stratum
from .group_completeness import Completeness, completeness
from .loss_points import LossPoint, loss_hessian, loss_point
from .searching import SearchResult, search
from .stratification import Strata, strata, to_dot
from .patterns import generic_values, structure

__all__ = [
    "Classification",
    "LossPoint",
    "NearStratum",
    "SearchResult",
    "Strata",
    "classify",
    "loss_point",
    "near_stratum",
    "search",
    "strata",
    "to_dot",
]
