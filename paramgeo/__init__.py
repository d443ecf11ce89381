"""paramgeo: the geometry of neural-network parameterizations.

A parameterization phi: R^n -> R^m (parameters to predictors) is described by a plugin; paramgeo
computes its Jacobian and rank, symmetry group, vertical and horizontal spaces, quotient metric,
and the engines built on them.

>>> import paramgeo
>>> p = paramgeo.get("uut", d=4, r=2)
>>> paramgeo.generic_rank(p)
7
"""

from .errors import (
    ContractError,
    NotProvidedError,
    NumericalDoubtWarning,
    ParamgeoError,
    PluginNotFoundError,
    ShapeError,
    SizeError,
)

#: public name -> the module that defines it, imported on first access (PEP 562), so that
#: ``import paramgeo`` costs little more than numpy and autograd and ``paramgeo --help`` imports
#: neither; tests/test_imports.py checks that each resolves.
_LAZY = {
    "check": "reports.contract_check",
    "RankPolicy": "linalg.numerics",
    "generic_rank": "geometry.jacobian",
    "horizontal_projection": "geometry.jacobian",
    "kernel": "geometry.jacobian",
    "predictor_metric": "geometry.jacobian",
    "quotient_metric": "geometry.jacobian",
    "rank_at": "geometry.jacobian",
    "vertical_space": "geometry.jacobian",
    "CAPABILITIES": "contract.parameterization",
    "Parameterization": "contract.parameterization",
    "ParamSpec": "contract.parameterization",
    "Size": "contract.parameterization",
    "available": "contract.registry",
    "get": "contract.registry",
    "get_class": "contract.registry",
    "load_plugin_file": "contract.registry",
    "register": "contract.registry",
    "sweep": "sweeps",  # grids of queries on Dask (dask imported only when one runs)
    "define": "expressions.userdefs",  # also serves saved specs to the registry
    "undefine": "expressions.userdefs",
    "from_torch": "adapters",  # torch imported only when a model is adapted
    "from_jax": "adapters",  # jax likewise
    "estimate_llc": "llc",  # learning coefficients: the estimator and the exact values
    "exact_learning_coefficient": "llc",
    "trusted": "contract.trust",  # the guard's checks off inside a block
}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'paramgeo' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"

__all__ = [
    "CAPABILITIES",
    "ContractError",
    "NotProvidedError",
    "NumericalDoubtWarning",
    "ParamSpec",
    "ParamgeoError",
    "Parameterization",
    "PluginNotFoundError",
    "RankPolicy",
    "ShapeError",
    "Size",
    "SizeError",
    "available",
    "check",
    "define",
    "generic_rank",
    "get",
    "get_class",
    "horizontal_projection",
    "kernel",
    "load_plugin_file",
    "predictor_metric",
    "quotient_metric",
    "rank_at",
    "register",
    "sweep",
    "undefine",
    "vertical_space",
    "from_torch",
    "from_jax",
    "estimate_llc",
    "exact_learning_coefficient",
    "trusted",
]
