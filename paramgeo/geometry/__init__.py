"""Geometry of a parameterization at a point and generically: the rank of J and its kernel,
vertical and horizontal spaces, the quotient metric (:mod:`.jacobian`); ranks beyond float64
(:mod:`.precision`); kinks of piecewise-smooth maps (:mod:`.kinks`); closed-form spectra of the
factor products (:mod:`.factor_spectra`). The rank tolerance policy lives in
:mod:`paramgeo.linalg` and is named here too, where the ranks are decided."""

from ..linalg.numerics import DEFAULT_POLICY, RankDecision, RankPolicy, decide_rank
from .jacobian import (fiber_bundle, generic_rank, generic_rank_decision, horizontal_lift,
                       horizontal_projection, kernel, orbit_dim, predictor_metric,
                       quotient_metric, quotient_metric_geomstats, rank_at, solve_sylvester_psd,
                       vertical_projector, vertical_space)
from .kinks import KinkReport, kink_report

__all__ = ["DEFAULT_POLICY", "KinkReport", "RankDecision", "RankPolicy", "decide_rank",
           "fiber_bundle", "generic_rank", "generic_rank_decision", "horizontal_lift",
           "horizontal_projection", "kernel", "kink_report", "orbit_dim", "predictor_metric",
           "quotient_metric", "quotient_metric_geomstats", "rank_at", "solve_sylvester_psd",
           "vertical_projector", "vertical_space"]
