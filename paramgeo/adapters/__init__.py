"""Models from PyTorch and JAX as parameterizations: :func:`from_torch`, :func:`from_jax`.

theta is the model's parameters in float64 (named blocks), the predictor its outputs on a fixed
probe batch; forward, JVP, VJP, Hessian-vector products and derivatives of J come from the
framework, and ``forward`` is an autograd primitive, so every engine works on these models as
on the built-ins. The frameworks are imported when an adapter is built (extras
``paramgeo[torch]``, ``paramgeo[jax]``), never by ``import paramgeo``.
"""

from ._jax import from_jax
from ._model import FrameworkModel
from ._torch import from_torch

__all__ = ["FrameworkModel", "from_jax", "from_torch"]
