"""paramgeo: the geometry of neural-network parameterizations.

A parameterization phi: R^n -> R^m (parameters to predictors) is described by a plugin; paramgeo
computes its Jacobian and rank, symmetry group, vertical and horizontal spaces, quotient metric,
and the engines built on them.

>>> import paramgeo
>>> p = paramgeo.get("uut", d=4, r=2)
>>> paramgeo.generic_rank(p)
7
"""

from .contract import check
from .errors import (
    ContractError,
    NotProvidedError,
    NumericalDoubtWarning,
    ParamgeoError,
    PluginNotFoundError,
    ShapeError,
    SizeError,
)
from .geometry import (
    RankPolicy,
    generic_rank,
    horizontal_projection,
    kernel,
    predictor_metric,
    quotient_metric,
    rank_at,
    vertical_space,
)
from .parameterization import CAPABILITIES, Parameterization, ParamSpec, Size
from .registry import available, get, get_class, load_plugin_file, register
from .sweeps import sweep  # grids of queries on Dask (dask imported only when one runs)
from .userdefs import define, undefine  # also serves saved specs to the registry

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
]
