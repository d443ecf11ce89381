"""The plugin registry: names -> Parameterization classes.

Sources, in order: classes registered in this process (:func:`register`), plugin files loaded by
path (:func:`load_plugin_file`, the CLI's ``--plugin FILE.py``), the entry-point group
``paramgeo.parameterizations`` read through ``importlib.metadata`` on first use and cached, and
providers added with :func:`add_provider` (the expression specs saved by ``paramgeo define``). The
built-in plugins register through that same group from paramgeo's setup.cfg; the registry knows
nothing about them. A plugin whose import fails warns and the others still load; two
distributions claiming one name warn naming both, and the first one wins.

Registration validates the declaration at once (as pluggy validates hooks at registration): the
class subclasses Parameterization, has a name, declares known capabilities, and declares exactly
the optional methods it overrides. The numerical contract check is :func:`paramgeo.check`.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import inspect
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

from ..errors import ContractError, ParamgeoError, PluginNotFoundError
from .parameterization import CAPABILITIES, Parameterization, Size

if TYPE_CHECKING:
    import os

ENTRY_POINT_GROUP = "paramgeo.parameterizations"

_registered: dict[str, type[Parameterization]] = {}  # name -> class, in this process
_sources: dict[str, str] = {}  # name -> where it came from
_entry_points = None  # name -> EntryPoint, discovered lazily
_providers: list = []  # extra sources of named classes, e.g. saved expression specs (add_provider)


def validate_declaration(cls: type) -> None:
    """Check a plugin class's static declaration; raise ContractError naming the problem."""
    if not (inspect.isclass(cls) and issubclass(cls, Parameterization)):
        raise ContractError(f"{cls!r} is not a subclass of paramgeo.Parameterization")
    label = cls.__name__
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(cls.__abstractmethods__))
        raise ContractError(f"{label} does not implement the required method(s): {missing}")
    if not isinstance(cls.name, str) or not cls.name.strip():
        raise ContractError(f"{label} must set the class attribute `name` (a non-empty string)")
    for key, decl in cls.size_params.items():
        if not isinstance(decl, Size):
            raise ContractError(f"{label}.size_params[{key!r}] must be a paramgeo.Size")
    unknown = set(cls.capabilities) - set(CAPABILITIES)
    if unknown:
        raise ContractError(
            f"{label} declares unknown capabilities {sorted(unknown)}; "
            f"known: {', '.join(CAPABILITIES)}"
        )
    for cap, method in CAPABILITIES.items():
        overridden = getattr(cls, method) is not getattr(Parameterization, method)
        declared = cap in cls.capabilities
        if overridden and not declared:
            raise ContractError(
                f"{label} overrides {method}() but does not declare {cap!r} in `capabilities`"
            )
        if declared and not overridden:
            raise ContractError(f"{label} declares {cap!r} but does not implement {method}()")


def register(cls: type[Parameterization], name: str | None = None, replace: bool = False,
             source: str = "register()") -> type[Parameterization]:
    """Register a Parameterization subclass under ``name`` (default ``cls.name``).

    The registry maps names to classes, name -> cls, so that ``get(name, **sizes)`` builds
    ``cls(**sizes)``; the declaration is validated at once, as pluggy validates hooks at
    registration. Names are unique: a name provided by an installed package (a built-in or a
    plugin package's entry point) or by a saved definition is refused to any other class (even
    with ``replace=True``), and a name registered in this process is refused to another class
    unless ``replace=True``; the error names both origins. Registering the same class again is
    allowed. The contract's numerical check is :func:`paramgeo.check`.

    Args:
        cls: the Parameterization subclass (not an instance).
        name: the registry name; default ``cls.name``.
        replace: let ``cls`` take a name registered in this process by another class.
        source: where the registration comes from, quoted in errors about the name.

    Returns:
        ``cls`` itself, so that ``register`` works as a class decorator.

    Raises:
        ContractError: ``cls`` is not a Parameterization subclass, has no name, declares an
            unknown capability or one it does not implement (or implements one it does not
            declare), or its name is taken.

    Examples:
        >>> from paramgeo import Parameterization, ParamSpec, Size, get, register
        >>> @register
        ... class Square(Parameterization):
        ...     name = "doc-square"
        ...     size_params = {"d": Size(default=3)}
        ...     def make_spec(self):
        ...         return ParamSpec(u=(self.d,))
        ...     def make_predictor_shape(self):
        ...         return (self.d,)
        ...     def forward(self, theta):
        ...         return theta ** 2
        >>> from paramgeo.contract.registry import unregister
        >>> get("doc-square").m
        3
        >>> unregister("doc-square")
    """
    validate_declaration(cls)
    name = name or cls.name
    if _registered.get(name) is cls:
        return cls
    taken = _installed_origin(name)
    if taken is not None and taken != source and not _is_entry_point_class(name, cls):
        raise ContractError(
            f"the name {name!r} of {_origin_of(cls, source)} is already registered from "
            f"{taken}; give the new one another name")
    if name in _registered and not replace:
        hint = " (or pass replace=True to override it)" if source == "register()" else ""
        raise ContractError(
            f"the name {name!r} of {_origin_of(cls, source)} is already registered from "
            f"{_sources[name]}; give one of them another name{hint}")
    _registered[name] = cls
    _sources[name] = source
    return cls


def origin(name: str) -> Optional[str]:
    """Where the name comes from: the source of its registration in this process, else its
    entry point or provider; None for an unknown name."""
    return _sources[name] if name in _registered else _installed_origin(name)


def _origin_of(cls, source):
    return f"{cls.__qualname__} from {source}"


def _installed_origin(name):
    """Where ``name`` comes from outside this process's registrations (an entry point or a
    provider, e.g. a saved definition), or None."""
    ep = _discover().get(name)
    if ep is not None:
        return f"entry point {ep.value} in {getattr(ep.dist, 'name', 'an installed package')}"
    provider = _provided().get(name)
    if provider is not None:
        return provider.origin(name)
    return None


def _is_entry_point_class(name, cls):
    ep = _discover().get(name)
    return ep is not None and ep.value == f"{cls.__module__}:{cls.__qualname__}"


def unregister(name: str) -> None:
    """Remove a name registered in this process (entry points are unaffected)."""
    _registered.pop(name, None)
    _sources.pop(name, None)


def _discover(refresh=False):
    global _entry_points
    if _entry_points is not None and not refresh:
        return _entry_points
    found = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in found:
            first = getattr(found[ep.name].dist, "name", "?")
            second = getattr(ep.dist, "name", "?")
            if ep.value != found[ep.name].value:
                warnings.warn(
                    f"parameterization {ep.name!r} is provided by both {first} and {second}; "
                    f"using the one from {first}",
                    stacklevel=3,
                )
            continue
        found[ep.name] = ep
    _entry_points = found
    return found


def refresh() -> None:
    """Forget the cached entry-point listing (after installing a plugin package)."""
    _discover(refresh=True)


def add_provider(provider: Any) -> None:
    """Add a source of parameterizations: an object with ``names()`` (an iterable of names),
    ``load(name)`` -> ``(cls, source)`` and ``origin(name)`` -> that source, without loading.
    Providers are asked after this process's registrations and the entry points; what they
    load is registered like any plugin. paramgeo's own provider serves the expression specs
    saved by ``paramgeo define`` (paramgeo.expressions.userdefs)."""
    if provider not in _providers:
        _providers.append(provider)


#: modules whose import adds paramgeo's own providers (the saved ``paramgeo define`` specs),
#: imported when the providers are first asked, so ``import paramgeo`` does not load them
BUILTIN_PROVIDERS = ("paramgeo.expressions.userdefs",)


def _provided():
    import importlib

    for module in BUILTIN_PROVIDERS:
        importlib.import_module(module)
    return {name: provider for provider in _providers for name in provider.names()}


def available() -> list[str]:
    """Sorted names of every parameterization that can be loaded.

    The union of the names registered in this process, the installed entry points of the group
    ``paramgeo.parameterizations`` and the saved definitions (see :func:`register`).

    Returns:
        The names, sorted (a plugin package that fails to import warns and is left out).

    Examples:
        >>> import paramgeo
        >>> {"uut", "uvt", "deep-linear"} <= set(paramgeo.available())
        True
    """
    return sorted(set(_registered) | set(_discover()) | set(_provided()))


def get_class(name: str) -> type[Parameterization]:
    """The Parameterization class registered under ``name`` (loading its entry point).

    Args:
        name: a registered name.

    Returns:
        The class; ``get_class(name)(**sizes)`` is :func:`get`.

    Raises:
        PluginNotFoundError: no plugin has that name.
        ContractError: the plugin's package failed to import.

    Examples:
        >>> import paramgeo
        >>> paramgeo.get_class("uut").__name__
        'UUT'
    """
    if name in _registered:
        return _registered[name]
    eps = _discover()
    if name not in eps:
        provider = _provided().get(name)
        if provider is None:
            raise PluginNotFoundError(name, available())
        cls, source = provider.load(name)
        return register(cls, name=name, source=source)
    ep = eps[name]
    try:
        cls = ep.load()
    # a broken third-party plugin must not take the others down, nor exit for paramgeo
    except (Exception, SystemExit, KeyboardInterrupt) as exc:
        raise ContractError(f"plugin {name!r} ({ep.value}) failed to import: "
                            f"{_import_fault(exc)}") from exc
    return register(cls, name=name, source=_installed_origin(name))


def _import_fault(exc):
    """What a plugin raised at import, as text: SystemExit and KeyboardInterrupt raised by its
    code are its faults too (a stray ``sys.exit()``, an ``input()`` or a wait at import)."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, SystemExit):
        return (f"{text} (it calls sys.exit() or exit() when imported; put that under "
                "if __name__ == '__main__':)")
    if isinstance(exc, KeyboardInterrupt):
        return f"{text} (interrupted while its module ran)"
    return text


def get(name: str, /, **sizes: object) -> Parameterization:
    """An instance of the parameterization registered as ``name``, built with ``sizes``.

    phi = cls(**sizes), cls the class registered under ``name`` (see :func:`register` for the
    sources, in order: this process, plugin files, installed entry points, saved definitions).

    Args:
        name: a registered name (``paramgeo.available()`` lists them), e.g. ``"uut"``.
        **sizes: the plugin's sizes (its ``size_params``), ints or strings such as ``"4"``.

    Returns:
        The Parameterization phi: R^n -> R^m, with ``n``, ``m`` and ``spec`` set.

    Raises:
        PluginNotFoundError: no plugin has that name (the message lists the names and the
            closest ones).
        SizeError: a size is unknown, missing or out of its range.
        ContractError: the plugin's package failed to import.

    Examples:
        >>> import paramgeo
        >>> p = paramgeo.get("uut", d=4, r=2)
        >>> p.n, p.m
        (8, 16)
    """
    return get_class(name)(**sizes)


def load_plugin_file(path: Union[str, os.PathLike]) -> list[str]:
    """Import a Python file and register the parameterizations it defines.

    Every concrete Parameterization subclass the file defines is registered, and the class of
    every Parameterization instance made in it (the models of ``paramgeo.from_torch`` /
    ``paramgeo.from_jax``, whose classes rebuild the model with no sizes): the CLI's
    ``--plugin FILE.py``. Reloading a file replaces its own classes.

    Args:
        path: the .py file.

    Returns:
        The registered names.

    Raises:
        ParamgeoError: the file is missing, not a .py file, fails to import, or defines no
            parameterization.
        ContractError: a class's declaration is invalid, or its name is taken.
    """
    path = Path(path)
    if not path.is_file():
        raise ParamgeoError(f"plugin file {str(path)!r} does not exist")
    if path.suffix != ".py":
        raise ParamgeoError(f"plugin file {str(path)!r} is not a Python file; give a .py file "
                            "that defines a Parameterization subclass")
    mod_name = f"paramgeo_user_plugin_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    assert spec is not None and spec.loader is not None  # a .py path always has a loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except ParamgeoError:
        raise
    except (Exception, SystemExit, KeyboardInterrupt) as exc:  # the file's, not paramgeo's
        sys.modules.pop(mod_name, None)
        raise ParamgeoError(
            f"plugin file {str(path)!r} failed to import: {_import_fault(exc)}") from exc
    names = []
    for obj in vars(module).values():
        if isinstance(obj, Parameterization):
            # a model built in the file (``model = paramgeo.from_torch(...)``): its class was
            # made there for it, and rebuilds it with no sizes
            obj = type(obj)
        if (
            inspect.isclass(obj)
            and issubclass(obj, Parameterization)
            and obj.__module__ == mod_name
            and not inspect.isabstract(obj)
        ):
            # the same file loaded again replaces its own classes; a name taken elsewhere is
            # refused
            register(obj, replace=_sources.get(obj.name) == str(path), source=str(path))
            if obj.name not in names:
                names.append(obj.name)
    if not names:
        raise ParamgeoError(f"plugin file {str(path)!r} defines no Parameterization subclass")
    return names
