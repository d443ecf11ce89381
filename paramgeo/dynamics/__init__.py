"""The integrators every engine runs: gradient flow d theta/dt = -grad L(theta) with its records
(:mod:`.trajectory`), and optimizers beyond gradient descent, each a steepest descent in a
stated geometry (:mod:`.optimizers`). The studies of these dynamics are in
:mod:`paramgeo.flows`."""

from .optimizers import Adam, Optimizer, SignDescent, SmoothedSignDescent
from .trajectory import Trajectory, gradient_flow

__all__ = ["Adam", "Optimizer", "SignDescent", "SmoothedSignDescent", "Trajectory",
           "gradient_flow"]
