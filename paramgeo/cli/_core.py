"""Core commands: list, describe, rank, check."""

import dataclasses
import json

import click

from ..results import Result
from ._common import (command, emit, json_option, load_point, point_options, precision_option,
                      progress_bar, progress_enabled, progress_option, resolve, seed_option,
                      shared_json, sizes_option, table)


route_option = click.option(
    "--route", type=click.Choice(["auto", "dense", "closed-form", "sparse", "matrix-free",
                                  "exact", "high-precision"]),
    default="auto", show_default=True,
    help="How ranks are decided: auto picks the plugin's closed form, the dense SVD while m x n "
         "is small, else the sparse or matrix-free certificate (Lanczos on jvp/vjp); exact and "
         "high-precision decide on mpmath singular values (see --precision).")


@command("list")
@json_option
def list_cmd(as_json):
    """List the registered parameterizations with their sizes.

    Example: paramgeo list
    """
    rows = []
    for name, cls in _loadable().items():
        sizes = {k: s.default for k, s in cls.size_params.items()}
        doc = (cls.__doc__ or "").strip().splitlines()
        rows.append({"name": name, "sizes": sizes, "summary": doc[0] if doc else ""})
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    click.echo(table(
        [(r["name"], _primary_sizes(r["name"], r["sizes"]), r["summary"])
         for r in rows],
        ["name", "sizes (defaults)", "summary"],
    ))


def _loadable(failed=None):
    """name -> class for every plugin that loads; a broken one is skipped with a warning line
    (one bad third-party plugin must not hide the others), or with an ``Error:`` line and its
    name added to the list ``failed``."""
    from ..errors import ParamgeoError
    from ..contract.registry import available, get_class

    out = {}
    for name in available():
        try:
            out[name] = get_class(name)
        except ParamgeoError as exc:
            if failed is None:
                click.echo(f"Warning: skipping {name}: {exc}", err=True)
            else:
                click.echo(f"Error: {exc}", err=True)
                failed.append(name)
    return out


def _describe_all(seed, route):
    """describe() of every plugin at its default sizes, a failing one reported in one
    ``Error:`` line and skipped; (results, names of the failed plugins)."""
    from ..reports.description import describe
    from ..errors import ParamgeoError

    failed, results = [], []
    for name, cls in _loadable(failed).items():
        try:
            results.append(describe(cls(), seed=seed, route=route))
        except ParamgeoError as exc:
            text = str(exc)
            click.echo(f"Error: {text if name in text else f'{name}: {text}'}", err=True)
            failed.append(name)
    return results, failed


def _fail_some(failed, done):
    """Exit code 2 after the table when some plugins failed (each named above)."""
    if failed:
        from . import UserError

        raise UserError(f"{len(failed)} of {len(failed) + done} plugins failed "
                        f"({', '.join(failed)}; their errors are above); the others are shown")


def _primary_sizes(name, sizes):
    from ..contract.registry import get_class

    decls = get_class(name).size_params
    return " ".join(f"{k}={_fmt(v)}" for k, v in sizes.items()
                    if k not in decls or decls[k].primary)


def _fmt(v):
    return ",".join(map(str, v)) if isinstance(v, (tuple, list)) else str(v)


@command("describe")
@click.argument("name", required=False)
@sizes_option
@click.option("--all", "all_", is_flag=True, help="Describe every plugin at its default sizes.")
@seed_option()
@route_option
@progress_option
@json_option
def describe_cmd(name, sizes, all_, seed, route, progress, as_json):
    """Dimensions, generic rank, symmetry group and quotient dimension of a parameterization.

    Prints the blocks, n parameters, the predictor shape and its m entries, the generic rank
    (with its route and certificate), the declared symmetry group and its orbit dimension, the
    quotient dimension n - dim(orbit) and whether the rank equals it, the capabilities and the
    references; --json carries the same under name, sizes, n, m, blocks, predictor_shape,
    generic_rank, symmetry, quotient_dim, rank_is_quotient_dim, ....

    Example: paramgeo describe uut -p d=4 -p r=2 --json
    """
    from ..reports.description import describe

    if all_ and (name or sizes):
        raise click.UsageError("--all describes every plugin at its default sizes; give either "
                               "--all or a NAME with its -p sizes, not both")
    if all_:
        results, failed = _describe_all(seed, route)
        if as_json:
            click.echo(json.dumps([shared_json(r.to_dict()) for r in results], indent=2))
            _fail_some(failed, len(results))
            return
        click.echo(table(
            [(r.name, _primary_sizes(r.name, r.sizes), r.param_dim,
              r.predictor_dim, r.generic_rank,
              f"{r.symmetry['name']} ({r.symmetry['dim']})" if r.symmetry else "-",
              r.quotient_dim, _rank_vs_quotient(r))
             for r in results],
            ["name", "sizes", "params", "predictor dim", "generic rank", "symmetry (dim)",
             "quotient dim", "rank = quotient dim"],
        ))
        click.echo(DESCRIBE_LEGEND)
        _fail_some(failed, len(results))
        return
    if not name:
        raise click.UsageError("give a parameterization NAME or --all")
    param = resolve(name, sizes, dense="auto" if route != "dense" else True)
    with progress_bar("describe", progress_enabled(progress)) as update:
        result = describe(param, seed=seed, route=route, progress=update)
    emit(result, as_json, param=param)


#: what the columns of ``describe --all`` mean (printed under the table)
DESCRIBE_LEGEND = """
params: number of parameters; predictor dim: dimension of the predictor space; quotient dim:
params - dim(orbit of the symmetry group). rank = quotient dim: "yes" when the symmetry explains
every flat direction of the map (generic rank of J = quotient dim); "no: capped by predictor
dim" when the quotient has more dimensions than the predictors, so the rank stops at the
predictor dim and the fibres are larger than the orbits (the map fills an open set of
predictors); a plain "no": a rank below both."""


def _rank_vs_quotient(description):
    """The last cell of ``describe --all``: yes, "no: capped by predictor dim" or "no"
    (DESCRIBE_LEGEND)."""
    d = description
    if d.rank_is_quotient_dim:
        return "yes"
    if d.generic_rank == d.predictor_dim < d.quotient_dim:
        return "no: capped by predictor dim"
    return "no"


@dataclasses.dataclass(frozen=True, kw_only=True)
class _RankReport(Result):
    name: str
    rank: int
    generic_rank: int
    singular_values: list
    tol: float
    gap: float
    doubtful: bool
    route: str
    certificate: object
    kinks: object = None  # paramgeo.geometry.kinks.KinkReport for a piecewise-smooth phi


def rank_report(param, theta, route="auto", max_deficiency=None, precision=None,
                progress=None):
    """The rank of J at ``theta`` (the one tolerance policy, on the chosen route), the generic
    rank and the singular values: what ``paramgeo rank`` prints and a sweep's ``rank`` query
    records. ``progress(done, total)``: after each random point of the generic rank, then
    after the rank at ``theta``."""
    from ..geometry.jacobian import generic_rank_decision, rank_at

    state = {"total": 1}

    def generic_step(done, total):
        state["total"] = total + 1
        progress(done, total + 1)

    generic = generic_rank_decision(param, route=route,
                                    progress=None if progress is None else generic_step)
    decision = rank_at(param, theta, route=route, max_deficiency=max_deficiency,
                       digits=precision)
    if progress is not None:
        progress(state["total"], state["total"])
    return _RankReport(name=param.name, rank=decision.rank, generic_rank=generic.rank,
                       singular_values=decision.singular_values, tol=decision.tol, gap=decision.gap,
                       doubtful=decision.doubtful, route=decision.route,
                       certificate=decision.certificate, kinks=decision.kinks)


@command("rank")
@click.argument("name")
@sizes_option
@point_options
@route_option
@click.option("--max-deficiency", type=click.IntRange(0, 100_000), default=64, show_default=True,
              help="Matrix-free route: the most rank drops beyond the symmetry it counts (each "
                   "keeps one length-n vector) before it refuses.")
@precision_option
@progress_option
@json_option
def rank_cmd(name, sizes, at, seed, route, max_deficiency, precision, progress, as_json):
    """Rank of the Jacobian at a point, the generic rank and the singular values.

    Prints the rank at theta and the generic rank, the tolerance and gap of the decision, the
    route, NEAR-SINGULAR when a singular value lies near the tolerance, the kinks of a
    piecewise-smooth map, the singular values and the route's certificate; --json: name, sizes,
    n, m, rank, generic_rank, singular_values, tol, gap, near_singular, route, certificate,
    kinks. At large sizes the rank is certified matrix-free (the singular values listed are then
    sigma_max and the smallest ones Lanczos computed). Example: paramgeo rank uut -p d=4 -p r=2
    --at U.npy --json; beyond float64: --precision 50.
    """
    param = resolve(name, sizes, dense="auto" if route != "dense" else True)
    theta = load_point(param, at, seed)
    with progress_bar("rank", progress_enabled(progress)) as update:
        report = rank_report(param, theta, route, max_deficiency, precision, update)
    text = (f"{param.name}: rank {report.rank} (generic rank {report.generic_rank}); "
            f"tol {report.tol:.2e}, gap {report.gap:.3g}; route {report.route}"
            + ("; NEAR-SINGULAR: a singular value is near the tolerance" if report.doubtful
               else "")
            + (f"\n{report.kinks}" if report.kinks is not None else "")
            + "\nsingular values: " + " ".join(f"{s:.4g}" for s in report.singular_values)
            + (f"\ncertificate: {_certificate_line(report.certificate)}"
               if report.certificate is not None else ""))
    emit(report, as_json, text, param=param)


def _certificate_line(c):
    from ..geometry.precision import PrecisionCertificate

    if isinstance(c, PrecisionCertificate):
        exact = f"; rank over Q {c.exact_rank}" if c.exact_rank is not None else ""
        return (f"{c.route}, {c.digits} digits: singular values within {c.error_bound:.2g}"
                f"{exact}; {c.note}; {c.seconds:.2f} s")
    return (f"{c.operator}: {c.deficiency} singular values <= tol beyond the symmetry "
            f"(expected rank {c.expected}); smallest above tol {c.sigma_min:.4g} "
            f"+- {c.error_bound:.2g}, sigma_max {c.sigma_max:.4g}; {c.matvecs} products, "
            f"{c.seconds:.2f} s")


@command("check")
@click.argument("name")
@sizes_option
@seed_option()
@progress_option
@json_option
def check_cmd(name, sizes, seed, progress, as_json):
    """Run the contract check on a plugin (by name or .py file); exit 1 if a property fails.

    Example: paramgeo check hadamard -p p=3
    """
    from ..reports.contract_check import check, construction_failure
    from ..errors import PluginError
    from ._common import parse_sizes

    try:
        param = resolve(name, sizes)
    except PluginError as exc:  # the plugin cannot even be built: that is a failed property
        param, report = None, construction_failure(exc.plugin, parse_sizes(sizes), exc)
    else:
        with progress_bar("check", progress_enabled(progress)) as update:
            report = check(param, seed=seed, progress=update)
    emit(report, as_json, param=param)
    if not report.passed:
        failed = sorted({item.property for item in report.failures()})
        raise click.exceptions.Exit(1) if as_json else click.ClickException(
            f"{report.name} fails the contract: {', '.join(failed)}"
        )
