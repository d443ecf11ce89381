"""Learning coefficients: exact values where theory has them, an SGLD estimator everywhere else.

See docs/learning-coefficients.md. ``exact`` holds the formulas (Aoyagi-Watanabe reduced-rank
regression, Aoyagi deep linear networks, regular points, normal crossings); ``estimate`` the
localized SGLD estimator of the local learning coefficient (Lau et al. 2023) with its
diagnostics.
"""

from .exact import (LearningCoefficient, aoyagi_watanabe_piecewise, deep_linear_network,
                    exact_learning_coefficient, monomial, normal_crossing_sum,
                    reduced_rank_regression, regular)
from .estimate import LLCEstimate, LLCWarning, StepSweep, auto_step, estimate_llc, step_sweep

__all__ = ["LearningCoefficient", "aoyagi_watanabe_piecewise", "deep_linear_network",
           "exact_learning_coefficient", "monomial", "normal_crossing_sum",
           "reduced_rank_regression", "regular", "LLCEstimate", "LLCWarning", "StepSweep",
           "auto_step", "estimate_llc",
           "step_sweep"]
