"""Critical-point commands: critical, strata, search (engine: paramgeo.critical)."""


import click

from ._common import (command, echo_json, emit, exit_if_interrupted, json_option, load_point,
                      point_options, precision_option, progress_bar, progress_enabled,
                      progress_option, resolve, seed_option, sizes_option, table)
from ..results import title

#: the output formats of ``strata`` besides text and --json
STRATA_FORMATS = ("text", "graphml", "dot")

#: The most starts `paramgeo search` runs in one call (each is an optimisation with SVDs;
#: more belong in a sweep over seeds, `paramgeo sweep`).
MAX_STARTS = 100_000


@command("critical")
@click.argument("name")
@sizes_option
@point_options
@precision_option
@progress_option
@json_option
def critical_cmd(name, sizes, at, seed, precision, progress, as_json):
    """Classify a point: regular, critical with its causes (orbit-degenerate, subnetwork,
    factor-rank, dependent-weights, other) or on a kink; the rank against the generic rank and
    the stratum the point lies on.

    Example: paramgeo critical uut -p d=4 -p r=2 --at U.npy --precision 50 --json
    """
    from ..critical import classify

    param = resolve(name, sizes, dense="auto")
    theta = load_point(param, at, seed)
    with progress_bar("critical", progress_enabled(progress)) as update:
        result = classify(param, theta, precision=precision, progress=update)
    emit(result, as_json, param=param)


@command("strata")
@click.argument("name")
@sizes_option
@click.option("--format", "fmt", type=click.Choice([*STRATA_FORMATS, "json"]),
              default="text", show_default=True,
              help="Output format of the poset (text, graphml or dot; --json for JSON, as in "
                   "every command; --format json is its deprecated former spelling).")
@click.option("--kinds", type=click.Choice(["deleted", "all"]), default="deleted",
              show_default=True,
              help="deleted: units active or removed; all: also in-zero / out-zero sides.")
@seed_option()
@progress_option
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Draw the poset into a figure (.png, .svg or .pdf).")
@json_option
def strata_cmd(name, sizes, fmt, kinds, seed, progress, plot_path, as_json):
    """The strata of a network (sub-architectures) or a factorization (factor rank) with their
    generic ranks, as a poset (edges from a stratum to the strata in its closure).

    Example: paramgeo strata monomial -p widths=2,2,1 -p degree=4 --json
    """
    from ..critical import strata

    if fmt == "json":
        click.echo("Warning: --format json is deprecated and goes in the next release; use "
                   "--json", err=True)
        fmt, as_json = "text", True
    if as_json and fmt != "text":
        raise click.UsageError(f"give --json or --format {fmt}, not both")

    if plot_path:  # before the work, not after it
        from ..io.files import check_plot_path

        check_plot_path(plot_path)
    param = resolve(name, sizes)
    with progress_bar("strata", progress_enabled(progress)) as update:
        result = strata(param, kinds=kinds, seed=seed, progress=update)
    if plot_path:
        result.plot(plot_path)
    if as_json:
        echo_json(result.to_dict(), param)
    elif fmt == "graphml":
        click.echo(result.graphml(), nl=False)
    elif fmt == "dot":
        click.echo(result.dot(), nl=False)
    else:
        click.echo(f"{title(result.name, result.sizes)}: {result.graph.number_of_nodes()} strata "
                   f"({result.kind}, {result.kinds}); generic rank {result.generic_rank}; "
                   f"top: {result.top}")
        click.echo(table(result.rows(), ["stratum", "generic rank", "zeroed params",
                                         "covers"]))
        if plot_path:
            click.echo(f"figure written to {plot_path}")


@command("search")
@click.argument("name")
@sizes_option
@click.option("--starts", type=click.IntRange(1, MAX_STARTS), default=20, show_default=True,
              help="Number of random starts (Ctrl-C stops and prints the finished ones).")
@seed_option("Seed of the starts.")
@click.option("--maxiter", type=click.IntRange(min=1), default=100, show_default=True,
              help="L-BFGS-B iterations per start.")
@precision_option
@progress_option
@json_option
def search_cmd(name, sizes, starts, seed, maxiter, precision, progress, as_json):
    """Search for critical points (drive s_R/s_1 of J to 0 on |theta| = 1 from random starts)
    and classify each one: how many lie on subnetworks, how many the engine cannot explain.

    Example: paramgeo search monomial -p widths=2,2,1 -p degree=4 --starts 20 --json
    """
    from ..critical import search

    param = resolve(name, sizes)
    with progress_bar("search", progress_enabled(progress)) as update:
        result = search(param, starts=starts, seed=seed, maxiter=maxiter, progress=update,
                        precision=precision)
    emit(result, as_json, param=param)
    exit_if_interrupted(result, f"after {len(result.points)} of {starts} starts")
