"""Commands of the quotient engine: ``quotient align``, ``quotient barrier`` and
``quotient teleport`` (engine: paramgeo.quotient)."""

import click
import numpy as np

from ._common import (Group, emit, json_option, load_point, loss_option, resolve, seed_option,
                      sizes_option)



@click.group("quotient", cls=Group)
def quotient_cmd():
    """Moving in the quotient: align two points modulo the symmetry group, loss barriers
    along straight, aligned and geodesic paths, and teleportation along an orbit.

    \b
    Examples:
      paramgeo quotient align uut -p d=4 -p r=2 A.npy B.npy
      paramgeo quotient barrier hadamard -p p=1 A.npy B.npy --data d.npz --path aligned
      paramgeo quotient teleport uvt -p m=3 -p n=3 -p r=2 T.npy --data d.npz --mode min
    """


def _loss(param, loss_kind, data_path):
    """The loss ``loss_kind`` on the arrays of the .npz file ``data_path``."""
    from ..losses.data import loss_from_arrays
    from ..io.npzfile import read_npz

    arrays = read_npz(data_path, "data file", "write it with numpy.savez")
    return loss_from_arrays(loss_kind, arrays, param, source=f"data file {data_path!r}")


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
        _save(out, result.aligned)
    emit(result, as_json, param=param)


def _loss_options(f):
    """``--loss`` and ``--data``: the loss on predictors and the .npz of its arrays."""
    f = click.option("--data", "data_path", required=True, type=click.Path(dir_okay=False),
                     help="An .npz file with the arrays the loss needs (e.g. A and y for "
                          "squared).")(f)
    return loss_option("squared", help="The layouts of docs/flows.md.")(f)


@quotient_cmd.command("barrier")
@click.argument("name")
@click.argument("first", type=click.Path(dir_okay=False))
@click.argument("second", type=click.Path(dir_okay=False))
@sizes_option
@_loss_options
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
    from ..quotient import barrier

    param = resolve(name, sizes)
    x, y = load_point(param, first, 0), load_point(param, second, 0)
    loss = _loss(param, loss_kind, data_path)
    result = barrier(param, loss, x, y, path=path, n_points=n_points)
    if plot_path is not None:
        result.plot(plot_path)
    emit(result, as_json, param=param)


@quotient_cmd.command("teleport")
@click.argument("name")
@click.argument("point", type=click.Path(dir_okay=False))
@sizes_option
@_loss_options
@click.option("--objective", default="grad_norm", show_default=True,
              type=click.Choice(["grad_norm", "sharpness", "hessian_trace"]),
              help="What to optimise along the orbit.")
@click.option("--mode", default="max", show_default=True, type=click.Choice(["max", "min"]),
              help="Maximise or minimise the objective.")
@click.option("--radius", type=click.FloatRange(min=0, min_open=True), default=1.0,
              show_default=True, help="Bound |a_i| <= R on the Lie-algebra coordinates.")
@click.option("--starts", type=click.IntRange(1, 100), default=4, show_default=True,
              help="Searches: from the identity and from random points of the box.")
@seed_option("Seed of the random starts.")
@click.option("--out", "out", type=click.Path(dir_okay=False), default=None,
              help="Write the teleported point to this .npy file.")
@json_option
def teleport_cmd(name, point, sizes, loss_kind, data_path, objective, mode, radius, starts, seed,
                 out, as_json):
    """Move POINT along its orbit (exact group elements, phi unchanged) to maximise or minimise
    the gradient norm, the sharpness or the Hessian trace of the loss, within a bound.

    Example: paramgeo quotient teleport uvt -p m=3 -p n=3 -p r=2 T.npy --data d.npz --mode min
    """
    from ..quotient import teleport

    param = resolve(name, sizes)
    theta = load_point(param, point, 0)
    loss = _loss(param, loss_kind, data_path)
    result = teleport(param, loss, theta, objective=objective, mode=mode, radius=radius,
                      starts=starts, seed=seed)
    if out is not None:
        _save(out, result.theta)
    emit(result, as_json, param=param)


def _save(path, array):
    """Write ``array`` as .npy through paramgeo's one file writer (no links, no foreign file
    replaced; paramgeo.io.files)."""
    from ..io.files import write_file

    write_file(path, lambda fh: np.save(file=fh, arr=np.asarray(array)), what="point")
