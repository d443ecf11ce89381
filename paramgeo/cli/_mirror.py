"""Commands of the mirror engine: ``mirror`` and ``implicit-bias``."""


import click
import numpy as np

from ..errors import ParamgeoError, ShapeError
from ._common import (command, emit, exit_if_interrupted, json_option, progress_bar,
                      progress_enabled, progress_option, resolve, seed_option, sizes_option,
                      stiff_flow_options)
from ..results import title


@command("mirror")
@click.argument("name")
@sizes_option
@click.option("--init-scale", "alpha", type=float, default=None,
              help="Init scale alpha of the potential (the plugin's init_at_scale; default 1).")
@click.option("--degree", type=click.IntRange(1, 4), default=2, show_default=True,
              help="Largest degree of the polynomial conservation laws searched.")
@click.option("--method", type=click.Choice(["auto", "symbolic", "numeric"]), default="auto",
              show_default=True, help="Brackets exactly with sympy, or numerically.")
@click.option("--budget", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds of estimated work the Lie algebra may take; a bracket level "
                   "estimated beyond it is refused [default: 60].")
@seed_option("Seed of the test points.")
@progress_option
@json_option
def mirror_cmd(name, sizes, alpha, degree, method, budget, seed, progress, as_json):
    """Lie algebra of the fields grad phi_i, conservation laws and mirror potential.

    Commuting or not, the dimension of the generated Lie algebra, the number n - dim of
    conservation laws with the polynomial ones in closed form, and (when commuting) the
    Legendre potential of the induced mirror flow from init scale alpha.

    Example: paramgeo mirror hadamard -p p=5 --init-scale 0.1
    """
    from ..mirror import MIRROR_BUDGET, mirror

    if alpha is not None and not (np.isfinite(alpha) and alpha > 0):
        raise ParamgeoError(f"--init-scale must be a positive number, got {alpha}")
    param = resolve(name, sizes)
    with progress_bar("mirror (Lie algebra)", progress_enabled(progress)) as update:
        report = mirror(param, alpha=alpha, degree=degree, seed=seed, method=method,
                        budget=MIRROR_BUDGET if budget is None else budget, progress=update)
    emit(report, as_json, param=param)
    exit_if_interrupted(report, "during the mirror computation")


def load_regression(path):
    """(X, y) from an .npz file holding arrays ``X`` (N x p) and ``y`` (N,); ShapeError else.
    The measurements may also be named ``A``, as ``paramgeo flow`` calls them."""
    from ..io.npzfile import read_npz

    arrays = read_npz(path, "data file", "write it with np.savez(file, X=X, y=y)")
    if "X" not in arrays and "A" in arrays:
        arrays = dict(arrays, X=arrays["A"])
    missing = [k for k in ("X", "y") if k not in arrays]
    if missing:
        raise ShapeError(
            f"data file {str(path)!r} lacks the array(s) {', '.join(missing)}; it must hold "
            "X (N x p) and y (N,), e.g. np.savez(file, X=X, y=y)")
    X, y = arrays["X"], arrays["y"]
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise ShapeError(f"data file {str(path)!r}: X must be N x p and y of length N, got "
                         f"X {X.shape} and y {y.shape}")
    if X.shape[0] == 0:
        raise ShapeError(f"data file {str(path)!r} has no data rows (N = 0); the implicit-bias "
                         "problem needs at least one measurement X beta = y")
    return X.astype(float), y.astype(float)


@command("implicit-bias")
@click.argument("name")
@sizes_option
@click.option("--data", "data", required=True, type=click.Path(dir_okay=False),
              help="An .npz file with arrays X (N x p; or named A) and y (N,).")
@click.option("--init-scale", "alpha", type=float, required=True,
              help="Init scale alpha (theta0 = the plugin's init_at_scale(alpha)).")
@click.option("--t-final", type=float, default=1e9, show_default=True,
              help="Final time (horizon) of the gradient flow (it stops once the loss is "
                   "~1e-26).")
@click.option("--rtol", type=float, default=1e-10, show_default=True, help="Flow rtol.")
@click.option("--atol", type=float, default=1e-15, show_default=True,
              help="Flow atol (with --chart log ~1e-12: it then bounds relative errors).")
@stiff_flow_options
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Write a figure of the four predictors (.png, .svg or .pdf).")
@json_option
def implicit_bias_cmd(name, sizes, data, alpha, t_final, rtol, atol, chart, time_scale,
                      exact_jacobian, plot_path, as_json):
    """Compare argmin R_alpha(beta) subject to X beta = y with the gradient-flow limit.

    Solves the implicit-bias problem of the induced mirror potential, runs gradient flow from
    init scale alpha to its limit, and compares both with the minimum-l1 (linprog) and
    minimum-l2 (pseudoinverse) interpolators. From a small init of a deep network, run the
    flow with --chart log --time-scale alpha^(2-L) --exact-jacobian --atol 1e-12.

    Example: paramgeo implicit-bias hadamard -p p=60 --data sparse.npz --init-scale 0.01
    """
    from ..mirror import implicit_bias

    if not (np.isfinite(alpha) and alpha > 0):
        raise ParamgeoError(f"--init-scale must be a positive number, got {alpha}")
    if plot_path:  # before the run, not after it
        from ..io.files import check_plot_path

        check_plot_path(plot_path)
    X, y = load_regression(data)
    param = resolve(name, sizes)
    result = implicit_bias(param, X, y, alpha, t_final=t_final, rtol=rtol, atol=atol,
                           chart=chart, time_scale=time_scale, exact_jacobian=exact_jacobian)
    if plot_path:
        result.plot(plot_path, title=f"{title(param.name, param.sizes)}: implicit bias, alpha = "
                                     f"{alpha:g}")
    emit(result, as_json, param=param)
    if plot_path and not as_json:
        click.echo(f"figure written to {plot_path}")
