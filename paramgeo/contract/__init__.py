"""The parameterization contract: the base class and its spec, the plugin registry, the guarded
call layer between engines and a plugin, the argument checks, and the test that forward is a
function of theta. The contract *check* (does a plugin keep these promises?) is an engine above
geometry, in :mod:`paramgeo.reports`."""

from .trust import trusted
from .parameterization import CAPABILITIES, Parameterization, ParamSpec, Size
from .registry import available, get, get_class, load_plugin_file, register

__all__ = ["CAPABILITIES", "ParamSpec", "Parameterization", "Size", "available", "get",
           "get_class", "load_plugin_file", "register", "trusted"]
