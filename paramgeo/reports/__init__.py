"""Whole-model reports above the engines: the contract check (does a plugin keep the contract's
promises?), the one-screen description of a parameterization, and the test helpers plugin
authors reuse in their own suites (:mod:`.testing`)."""

from .contract_check import CheckReport, check, finite_difference_jacobian
from .description import Description, describe

__all__ = ["CheckReport", "Description", "check", "describe", "finite_difference_jacobian"]
