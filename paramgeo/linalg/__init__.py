"""Numerical linear algebra shared by every engine: the one rank tolerance policy and the bases
decided under it, the route (dense, sparse, matrix-free) a rank is decided on, and the
matrix-free Jacobian operator with its rank certificates."""

from .matfree import RankCertificate, certify_rank, jacobian_operator
from .numerics import (DEFAULT_POLICY, RankDecision, RankPolicy, as_rng, decide_rank, null_basis,
                       policy_of, range_basis, rational_rref)
from .routes import choose_route, route_prices

__all__ = ["DEFAULT_POLICY", "RankCertificate", "RankDecision", "RankPolicy", "as_rng",
           "certify_rank", "choose_route", "decide_rank", "jacobian_operator", "null_basis",
           "policy_of", "range_basis", "rational_rref", "route_prices"]
