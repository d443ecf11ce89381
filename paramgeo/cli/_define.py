"""Commands for user-defined parameterizations and derived structure: define, undefine,
discover, exact."""

import dataclasses

import click

from ..results import Result
from ._common import (command, emit, exit_if_interrupted, json_option, progress_bar,
                      progress_enabled, progress_option, resolve, seed_option, sizes_option)

#: The most rational points `paramgeo exact` evaluates (each is an exact rank over Q; two
#: already give the generic rank with high probability, Schwartz-Zippel).
MAX_EXACT_POINTS = 1000


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Defined(Result):
    name: str
    path: str
    blocks: dict
    sizes: dict
    param_dim: int
    predictor_shape: tuple


@command("define")
@click.argument("spec_file", type=click.Path(dir_okay=False))
@click.option("--replace", is_flag=True, help="Overwrite an existing definition of that name.")
@json_option
def define_cmd(spec_file, replace, as_json):
    """Define a parameterization from an expression spec (TOML) and save it for later use.

    The spec names parameter blocks with shapes and writes the predictor as expressions in
    them (parsed safely: numbers, declared symbols, + - * / ** @, exp, log, sin, cos, tanh,
    sqrt, ...). It is checked before it is saved, so a bad spec leaves nothing behind. The
    definition lives in $PARAMGEO_HOME/definitions (default ~/.local/share/paramgeo).

    Example: paramgeo define hadamard3.toml && paramgeo describe hadamard3
    """
    from ..expressions.userdefs import define

    cls = define(spec_file, replace=replace)
    param = cls()
    result = _Defined(name=cls.name, path=cls.spec_path,
                      blocks={k: list(v) for k, v in param.spec.blocks.items()},
                      sizes=dict(param.sizes), param_dim=param.n,
                      predictor_shape=param.predictor_shape)
    shape = "x".join(map(str, param.predictor_shape)) or "scalar"
    emit(result, as_json, f"defined {cls.name}: n = {param.n} parameters -> predictor {shape} "
                          f"(saved in {cls.spec_path})")


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Undefined(Result):
    name: str
    path: str


@command("undefine")
@click.argument("name")
@json_option
def undefine_cmd(name, as_json):
    """Remove a parameterization saved by `paramgeo define`.

    Example: paramgeo undefine hadamard3
    """
    from ..expressions.userdefs import undefine

    path = undefine(name)
    emit(_Undefined(name=name, path=str(path)), as_json, f"removed {name} ({path})")


@command("discover")
@click.argument("name")
@sizes_option
@seed_option()
@click.option("--no-discrete", is_flag=True, help="Skip the search for discrete symmetries.")
@click.option("--max-dim", type=click.IntRange(min=1), default=None,
              help="Largest n for the linear search (n^2 unknowns); default 40.")
@progress_option
@json_option
def discover_cmd(name, sizes, seed, no_discrete, max_dim, progress, as_json):
    """Discover symmetries: linear (Lie algebra of A with J(theta) A theta = 0), scaling, discrete.

    Prints the dimension and a recognisable name of the Lie algebra (so(r), gl(r), a torus of
    rescalings, hyperbolic rotations, ...), the scaling exponents, the discrete sign flips and
    permutations that leave phi invariant, and the comparison with the declared group.

    Example: paramgeo discover uvt -p m=4 -p n=3 -p r=2
    """
    from ..symmetry import MAX_LINEAR_DIM, discover

    param = resolve(name, sizes)
    with progress_bar("discover (linear search)", progress_enabled(progress)) as update:
        result = discover(param, seed=seed, discrete=not no_discrete,
                          max_linear_dim=MAX_LINEAR_DIM if max_dim is None else max_dim,
                          progress=update)
    emit(result, as_json, param=param)
    exit_if_interrupted(result, f"{result.note.removeprefix('interrupted ')} of the linear "
                                "search (the scaling symmetries above are complete)")


@command("exact")
@click.argument("name")
@sizes_option
@seed_option("Seed of the random rational points.")
@click.option("--points", type=click.IntRange(1, MAX_EXACT_POINTS), default=2,
              show_default=True, help="Number of random rational points (Ctrl-C stops and "
                                      "prints the finished ones).")
@progress_option
@json_option
def exact_cmd(name, sizes, seed, points, progress, as_json):
    """Exact (sympy) ranks: rank of J over Q at random rational points and over Q(theta).

    Needs a plugin with symbolic() (built-ins that declare it, and every `paramgeo define`d
    parameterization). No floating-point tolerance is involved when phi is rational in theta.

    Example: paramgeo exact uut -p d=4 -p r=2
    """
    from ..expressions.symbolic import exact_analysis

    param = resolve(name, sizes)
    with progress_bar("exact", progress_enabled(progress)) as update:
        result = exact_analysis(param, n_points=points, seed=seed, progress=update)
    emit(result, as_json, param=param)
    exit_if_interrupted(result, f"after {len(result.rational_ranks)} of {points} rational points")
