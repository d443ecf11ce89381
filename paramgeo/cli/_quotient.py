"""Commands of the quotient engine: ``quotient align`` and ``quotient barrier``
(engine: paramgeo.quotient)."""

import click
import numpy as np

from ._common import emit, json_option, load_point, resolve, sizes_option

#: the loss kinds ``quotient barrier`` accepts (paramgeo.loss_data.LOSS_KINDS)
LOSSES = ("squared", "quadratic", "logistic", "exponential", "regression")


@click.group("quotient")
def quotient_cmd():
    """Moving in the quotient: align two points modulo the symmetry group, and loss barriers
    along straight, aligned and geodesic paths.

    \b
    Examples:
      paramgeo quotient align uut -p d=4 -p r=2 A.npy B.npy
      paramgeo quotient barrier hadamard -p p=1 A.npy B.npy --data d.npz --path aligned
    """


@quotient_cmd.command("align")
@click.argument("name")
@click.argument("first", type=click.Path(dir_okay=False))
@click.argument("second", type=click.Path(dir_okay=False))
@sizes_option
@click.option("--out", "out", type=click.Path(dir_okay=False), default=None,
              help="Write the aligned point g . theta2 to this .npy file.")
@json_option
def align_cmd(name, first, second, sizes, out, as_json):
    """Align SECOND to FIRST modulo the declared group: the element g, the orbit (or
    quotient) distance |theta1 - g . theta2| and its certificate.

    Example: paramgeo quotient align uut -p d=4 -p r=2 A.npy B.npy --out B_aligned.npy
    """
    from ..quotient import align

    param = resolve(name, sizes)
    x, y = load_point(param, first, 0), load_point(param, second, 0)
    result = align(param, x, y)
    if out is not None:
        np.save(out, result.aligned)
    emit(result, as_json)


@quotient_cmd.command("barrier")
@click.argument("name")
@click.argument("first", type=click.Path(dir_okay=False))
@click.argument("second", type=click.Path(dir_okay=False))
@sizes_option
@click.option("--loss", "loss_kind", default="squared", show_default=True,
              type=click.Choice(LOSSES), help="Loss on predictors (the layouts of docs/flows.md).")
@click.option("--data", "data_path", required=True, type=click.Path(dir_okay=False),
              help="An .npz file with the arrays the loss needs (e.g. A and y for squared).")
@click.option("--path", "path", default="linear", show_default=True,
              type=click.Choice(["linear", "aligned", "geodesic"]),
              help="The path from FIRST to SECOND (geodesic: groups of isometries only).")
@click.option("--points", "n_points", type=click.IntRange(2, 10001), default=25,
              show_default=True, help="Number of equally spaced lambda in [0, 1].")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Save a plot of the loss along the path (needs matplotlib).")
@json_option
def barrier_cmd(name, first, second, sizes, loss_kind, data_path, path, n_points, plot_path,
                as_json):
    """Loss barrier between FIRST and SECOND along a path, by both definitions (Ainsworth et
    al. 2023: max L - mean end loss; Entezari et al. 2022: max of L - interpolated end loss).

    Example: paramgeo quotient barrier hadamard -p p=1 A.npy B.npy --data d.npz --path aligned
    """
    from ..loss_data import loss_from_arrays
    from ..npzfile import read_npz
    from ..quotient import barrier

    param = resolve(name, sizes)
    x, y = load_point(param, first, 0), load_point(param, second, 0)
    arrays = read_npz(data_path, "data file", "write it with numpy.savez")
    loss = loss_from_arrays(loss_kind, arrays, param, source=f"data file {data_path!r}")
    result = barrier(param, loss, x, y, path=path, n_points=n_points)
    if plot_path is not None:
        result.plot(plot_path)
    emit(result, as_json)
