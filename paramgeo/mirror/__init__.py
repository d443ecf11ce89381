"""Induced mirror maps and conservation laws of gradient flow through a parameterization.

Gradient flow on theta for L = ell o phi moves the predictor beta = phi(theta) along

    d beta / dt = -J(theta) J(theta)^T grad ell(beta).

Everything here is generic: it reads only the contract (jacobian, jacobian_derivative,
forward, ``symbolic()`` when declared, ``mirror_potential`` when declared, ``init_at_scale``).

Layout (every public name is re-exported here): :mod:`.lie` (brackets, the commuting test, the
generated Lie algebra), :mod:`.laws` (polynomial conservation laws), :mod:`.potentials`
(Legendre potentials and their mirror flow), :mod:`.separable` (power-law mirror maps of deep
diagonal networks), :mod:`.verification` (mirror flow against gradient
flow), :mod:`.bias` (the implicit-bias problem), :mod:`.regimes` (commuting regimes of a loss for
non-commuting parameterizations) and :mod:`.report` (the summary :func:`mirror`). Each module's
docstring gives its mathematics and references.
"""

from .bias import ImplicitBias, implicit_bias, min_l1, min_l2, solve_implicit_bias
from .laws import LAWS_MAX_UNKNOWNS, ConservationLaws, conservation_laws
from .lie import (
    FULL_BRACKETS_MAX_M,
    MIRROR_BUDGET,
    SYMBOLIC_MAX_WORK,
    CommutingTest,
    LieAlgebra,
    NotCommutingError,
    brackets,
    commuting_test,
    lie_algebra,
    symbolic_brackets,
    symbolic_fields,
    vector_fields,
)
from .potentials import (
    Potential,
    commuting_flow,
    mirror_flow,
    mirror_potential,
    numerical_potential,
)
from .regimes import (
    IDENTITY_TOL,
    CommutingRegime,
    LinearCoordinates,
    RegimeImplicitBias,
    RegimeVerification,
    commuting_regime,
    joint_eigenbasis,
    regime_implicit_bias,
    verify_regime,
)
from .report import MirrorReport, mirror
from .separable import PowerMirrorMap
from .verification import Verification, verify
