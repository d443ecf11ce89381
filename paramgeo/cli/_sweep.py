"""``paramgeo sweep``: a grid of queries from one TOML file on Dask (engine: paramgeo.sweeps)."""

import json

import click

from ._common import (command, json_option, progress_bar, progress_enabled, progress_option,
                      raise_interrupted)


@command("sweep")
@click.argument("spec_file", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The table: .parquet, .csv or .jsonl (one row per cell).")
@click.option("--workers", type=click.IntRange(min=0), default=None,
              help="Workers of the local Dask cluster; 0 runs the cells in this process "
                   "without Dask [default: this process when the first cell prices the grid "
                   "below a cluster's start-up, else one worker per core; the summary says "
                   "which and why].")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Run on an existing Dask cluster (e.g. tcp://127.0.0.1:8786, started with "
                   "dask-scheduler and dask-worker).")
@click.option("--resume", is_flag=True,
              help="Skip the cells already in OUTPUT (or in the journal of an interrupted "
                   "run); failed cells run again.")
@click.option("--overwrite", is_flag=True, help="Replace an existing OUTPUT.")
@click.option("--cell-time-limit", "cell_time_limit", type=click.FloatRange(min=0, min_open=True),
              default=3600.0, show_default=True, metavar="SECONDS",
              help="A cell running longer stops and records an error (inf: no limit).")
@progress_option
@json_option
def sweep_cmd(spec_file, output, workers, scheduler, resume, overwrite, cell_time_limit, progress,
              as_json):
    """Run a grid of queries (describe, rank, search, mirror, pacbayes, ...) from a TOML sweep
    file, one Dask task per cell, into a tidy table; a failing cell records its error and the
    sweep goes on. Rows stream to OUTPUT.partial.jsonl, so --resume continues a killed sweep.

    \b
    Example: paramgeo sweep examples/sweeps/monomial_defective.toml -o out.parquet
             paramgeo sweep grid.toml -o out.csv --workers 2 --resume
             paramgeo sweep grid.toml -o out.parquet --scheduler tcp://127.0.0.1:8786
    """
    from ..sweeps import sweep
    from ..sweeps.spec import SweepSpecError

    if workers is not None and scheduler is not None:
        raise SweepSpecError("give --workers (a local cluster) or --scheduler (an existing "
                             "one), not both")
    if resume and overwrite:
        raise SweepSpecError("--resume keeps the finished cells and --overwrite discards "
                             "them; give one")
    with progress_bar("cells", progress_enabled(progress, quiet=as_json)) as update:
        try:
            summary = sweep(spec_file, output, workers=workers, scheduler=scheduler,
                            resume=resume, overwrite=overwrite, progress=update,
                            cell_time_limit=cell_time_limit)
        except KeyboardInterrupt:
            raise_interrupted(f"interrupted: the finished cells are in {output}.partial.jsonl; "
                              "continue with --resume")
    if as_json:
        click.echo(json.dumps(summary.to_dict(), indent=2))
    else:
        click.echo(str(summary))
