"""PAC-Bayes in parameter space versus quotient space, and the orbit-volume implicit-bias prior.

KL(Q || P) >= KL(Q_bar || P_bar) for the push-forwards through phi (chain rule of relative
entropy, Cover and Thomas 2006, Thm 2.5.3), so every PAC-Bayes certificate may use the quotient
KL. Modules: :mod:`.gaussians` (Gaussians, KLs, the chain rule), :mod:`.bounds` (McAllester,
Maurer-Seeger, Catoni), :mod:`.volumes` (Lie-algebra matrices, orbit volumes, canonical points),
:mod:`.groups` (Cartan structure and components of the group), :mod:`.orbits` (orbit integrals,
the implicit-bias density), :mod:`.bilinear` (quadrature for separable bilinear maps) and
:mod:`.engine` (quotient KLs and reports). See docs/pacbayes.md.
"""

from .bilinear import (bilinear_component_kls, bilinear_components, centred_product_logpdf, kl_1d,
                       laplace_ib_logpdf, product_logpdf)
from .bilinear import (PRIOR_CONSTRUCTIONS, bilinear_prior_kls, predictor_gaussian_logpdf,
                       section_logpdf)
from .bounds import (DEFAULT_CATONI_GRID, Certificates, catoni_bound, certificates, kl_bernoulli,
                     kl_inverse_upper, maurer_seeger_bound, mcallester_bound)
from .engine import (PacBayesReport, PriorKL, QuotientKLReport, load_posterior, pacbayes_report,
                     quotient_kls)
from .gaussians import (ChainRule, DiagonalGaussian, PacBayesInputError, gaussian_chain_rule,
                        kl_gaussian, kl_mvn)
from .groups import GroupStructure, group_structure, torus_log
from .orbits import implicit_bias_log_unnormalized, orbit_log_integral
from .volumes import (CanonicalPoint, OrbitVolume, canonical_point, lie_algebra_matrices,
                      log_omega, normal_jacobian, orbit_volume)

__all__ = [
    "bilinear_component_kls", "bilinear_components", "centred_product_logpdf", "kl_1d",
    "laplace_ib_logpdf", "product_logpdf",
    "PRIOR_CONSTRUCTIONS", "bilinear_prior_kls", "predictor_gaussian_logpdf", "section_logpdf",
    "DEFAULT_CATONI_GRID", "Certificates", "catoni_bound", "certificates", "kl_bernoulli",
    "kl_inverse_upper", "maurer_seeger_bound", "mcallester_bound",
    "PacBayesReport", "PriorKL", "QuotientKLReport", "load_posterior", "pacbayes_report",
    "quotient_kls",
    "ChainRule", "DiagonalGaussian", "PacBayesInputError", "gaussian_chain_rule", "kl_gaussian",
    "kl_mvn",
    "GroupStructure", "group_structure", "torus_log",
    "implicit_bias_log_unnormalized", "orbit_log_integral",
    "CanonicalPoint", "OrbitVolume", "canonical_point", "lie_algebra_matrices", "log_omega",
    "normal_jacobian", "orbit_volume",
]
