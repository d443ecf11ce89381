"""Learning coefficients: exact values where theory has them, an SGLD estimator everywhere else.

See docs/learning-coefficients.md. ``exact`` holds the formulas (Aoyagi-Watanabe reduced-rank
regression, Aoyagi deep linear networks, regular points, smooth fibres, normal crossings,
weight-refined blocks); ``estimate`` the localized Langevin (MALA or SGLD) estimator of the
local learning coefficient (Lau et al. 2023) with its error bars; ``diagnostics`` its checks
before sampling (curvature against the localization, mixing) and after; ``data`` the loss as
batches (a model on data, minibatches); ``steps`` its step-size sweep; ``sampler`` the chains'
kernels. See also docs/learning-coefficients-data.md.
"""

from .diagnostics import localization_check
from .exact import (LearningCoefficient, aoyagi_watanabe_piecewise, block_learning_coefficient,
                    deep_linear_at, deep_linear_network, exact_learning_coefficient, monomial,
                    normal_crossing_sum, reduced_rank_regression, regular)
from .estimate import LLCEstimate, LLCWarning, auto_step, estimate_llc
from .steps import StepSweep, step_sweep

__all__ = ["LearningCoefficient", "aoyagi_watanabe_piecewise", "block_learning_coefficient",
           "deep_linear_at", "deep_linear_network",
           "exact_learning_coefficient", "monomial", "normal_crossing_sum",
           "reduced_rank_regression", "regular", "LLCEstimate", "LLCWarning", "StepSweep",
           "auto_step", "estimate_llc", "localization_check",
           "step_sweep"]
