"""The ``flow`` command: gradient descent or gradient flow of a loss through a parameterization."""

import click
import numpy as np

from ..errors import ParamgeoError, ShapeError
from ..dynamics.trajectory import MAX_RECORDS, MAX_STEPS
from ._common import (command, echo_json, exit_if_interrupted, finishing, former_option,
                      json_option, loss_option, progress_bar, progress_enabled, progress_option,
                      resolve, seed_option, sizes_option, stiff_flow_options, table)
from ..results import title


def load_data(path):
    """The arrays of an ``.npz`` file as a dict (readable errors for missing/corrupt files)."""
    from ..io.npzfile import read_npz

    return read_npz(path, "data file", "write it with numpy.savez")


@command("flow")
@click.argument("name")
@sizes_option
@loss_option("squared", help="See docs/flows.md for the data layout of each.")
@click.option("--data", "data_path", required=True, type=click.Path(dir_okay=False),
              help="An .npz file with the arrays the loss needs (see --loss; the measurements "
                   "A may also be named X); optional theta0.")
@click.option("--method", type=click.Choice(["gd", "flow"]), default="gd", show_default=True,
              help="Gradient descent (steps) or gradient flow (solve_ivp).")
@click.option("--steps", type=click.IntRange(1, MAX_STEPS), default=None,
              help="Descent steps [default: 1000].")
@click.option("--t-final", "t_final", type=float, default=None,
              help="Final time (horizon) of the flow [default: 10].")
@former_option("--time", "--t-final", "t_final", type=float)
@click.option("--lr", type=float, default=1e-2, show_default=True, help="Descent step size.")
@click.option("--schedule", "schedule_kind", default="constant", show_default=True,
              type=click.Choice(["constant", "inverse", "cosine", "step"]),
              help="Step-size schedule of descent.")
@click.option("--batch-size", type=int, default=None,
              help="Minibatch size for stochastic gradients (descent only).")
@click.option("--integrator", default="LSODA", show_default=True,
              type=click.Choice(["LSODA", "RK45", "DOP853", "BDF", "Radau"]),
              help="solve_ivp method of the flow (LSODA switches to BDF when stiff).")
@click.option("--rtol", type=float, default=1e-8, show_default=True, help="Flow rtol.")
@click.option("--atol", type=float, default=1e-10, show_default=True,
              help="Flow atol (keep it well below alpha^2 for an init of scale alpha).")
@click.option("--log-times", is_flag=True, help="Record the flow at log-spaced times.")
@stiff_flow_options
@click.option("--records", type=click.IntRange(2, MAX_RECORDS), default=200, show_default=True,
              help="Number of recorded times of the flow.")
@click.option("--stop-loss", type=float, default=None, help="Stop when the loss falls below.")
@click.option("--stop-grad", type=float, default=None,
              help="Stop when |grad L| falls below.")
@click.option("--init-scale", "alpha", type=float, default=None,
              help="Start at the plugin's init_at_scale(ALPHA), as mirror and implicit-bias do "
                   "(overrides theta0 of the data file).")
@click.option("--teleport-every", "teleport_every", type=click.IntRange(min=1), default=None,
              help="Teleport theta along its orbit to the largest gradient norm after every K "
                   "descent steps (paramgeo.quotient.Teleporter; gd only).")
@click.option("--teleport-radius", "teleport_radius", type=click.FloatRange(min=0, min_open=True),
              default=1.0, show_default=True,
              help="Bound |a_i| <= R on the Lie-algebra coordinates of each teleportation.")
@seed_option("Seed of the random start and of the minibatches.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Write a figure (.png, .svg or .pdf).")
@progress_option
@json_option
def flow_cmd(name, sizes, loss_kind, data_path, method, steps, t_final, lr,
             schedule_kind, batch_size, integrator, rtol, atol, log_times, chart, time_scale,
             exact_jacobian, records, stop_loss, stop_grad, alpha, teleport_every,
             teleport_radius, seed, plot_path, progress, as_json):
    """Train a parameterization on a loss of its predictors: gradient descent or flow.

    Prints the loss, gradient norm and the drift of the conserved quantities of the symmetry
    group along the trajectory; --plot writes loss and predictor coordinates against time.

    \b
    Example: paramgeo flow hadamard -p p=10 --loss squared --data s2s.npz --method flow --t-final 30 --plot s2s.png
    """
    if plot_path:  # before the run, not after it
        from ..io.files import check_plot_path

        check_plot_path(plot_path)
    param = resolve(name, sizes, dense=False)  # descent and flow use J^T v only
    arrays = load_data(data_path)
    enabled = progress_enabled(progress, quiet=as_json)
    ctx = click.get_current_context()
    other = "flow" if method == "gd" else "gd"
    only_other = (("integrator", "rtol", "atol", "log_times", "chart", "time_scale",
                   "exact_jacobian") if method == "gd" else
                  ("lr", "schedule_kind", "teleport_every", "teleport_radius"))
    ignored = [p for p in only_other
               if ctx.get_parameter_source(p) == click.core.ParameterSource.COMMANDLINE]
    if ignored:
        names = ", ".join("--" + p.replace("_kind", "").replace("_", "-") for p in ignored)
        raise click.UsageError(f"{names}: only for --method {other}; this run is "
                               f"--method {method}")
    if method == "gd":
        if t_final is not None:
            raise click.UsageError("--t-final is for --method flow; use --steps with gd")
        label = f"gradient descent, {1000 if steps is None else steps} steps"
    else:
        if steps is not None:
            raise click.UsageError("--steps is for --method gd; use --t-final with flow")
        if batch_size is not None:
            raise click.UsageError("--batch-size is for --method gd (stochastic descent)")
        label = f"gradient flow to t = {10.0 if t_final is None else t_final:g}"
    with progress_bar(label, enabled) as update:
        traj = train(param, loss_kind, arrays, data_path, method=method, steps=steps,
                     t_final=t_final, lr=lr, schedule_kind=schedule_kind, batch_size=batch_size,
                     integrator=integrator, rtol=rtol, atol=atol, log_times=log_times,
                     chart=chart, time_scale=time_scale, exact_jacobian=exact_jacobian,
                     records=records, stop_loss=stop_loss, stop_grad=stop_grad, alpha=alpha,
                     seed=seed, progress=update, teleport_every=teleport_every,
                     teleport_radius=teleport_radius)
    how_far = traj.message.removeprefix("interrupted ")
    with finishing(traj, how_far):
        if plot_path:
            traj.plot(plot_path,
                      title=f"{title(param.name, param.sizes)}: {traj.method}, {loss_kind} loss")
        summary = traj.summary()
        summary.update(loss=loss_kind, final_predictor=traj.final_predictor.tolist(),
                       plot=plot_path)
        if as_json:
            echo_json(summary, param)
            exit_if_interrupted(traj, how_far)
            return
        click.echo(str(traj))
        idx = np.unique(np.linspace(0, len(traj.times) - 1, min(8, len(traj.times))).astype(int))
        click.echo(table([(f"{traj.times[i]:.4g}", f"{traj.losses[i]:.6g}",
                           f"{traj.grad_norms[i]:.3g}") for i in idx],
                         ["time", "loss", "|grad L|"]))
        if traj.conserved_laws:
            click.echo(table([(lab, f"{d:.2e}") for lab, d in traj.conserved_laws],
                             ["conserved quantity", "relative drift"]))
        if plot_path:
            click.echo(f"figure written to {plot_path}")
        exit_if_interrupted(traj, how_far)


def train(param, loss_kind, arrays, data_path, *, method="gd", steps=None, t_final=None, lr=1e-2,
          schedule_kind="constant", batch_size=None, integrator="LSODA", rtol=1e-8, atol=1e-10,
          log_times=False, chart="theta", time_scale=1.0, exact_jacobian=False, records=200,
          stop_loss=None, stop_grad=None, alpha=None, seed=0, progress=None,
          teleport_every=None, teleport_radius=1.0):
    """The trajectory ``paramgeo flow`` computes (and a sweep's ``flow`` query): the loss
    ``loss_kind`` on ``arrays`` (read from ``data_path``), the start (the plugin's
    ``init_at_scale(alpha)``, else theta0 of the data, else a random point of ``seed``), then
    gradient descent
    (``steps``, default 1000) or gradient flow (to ``t_final``, default 10; ``chart``,
    ``time_scale`` and ``exact_jacobian`` as in :func:`paramgeo.flows.gradient_flow`, which
    refuses a bad combination); ``teleport_every`` K teleports the descent to the largest
    gradient norm of the orbit within ``teleport_radius`` after every K steps
    (:class:`paramgeo.quotient.Teleporter`)."""
    from ..flows import gradient_descent, gradient_flow, schedule
    from ..losses.data import loss_from_arrays

    loss = loss_from_arrays(loss_kind, arrays, param, source=f"data file {data_path!r}")
    if alpha is not None:
        if not (np.isfinite(alpha) and alpha > 0):
            raise ParamgeoError(f"--init-scale must be a positive number, got {alpha}")
        theta0 = param.as_theta(param.init_at_scale(alpha))
    elif "theta0" in arrays:
        theta0 = np.asarray(arrays["theta0"], float)
        if theta0.size != param.n:
            raise ShapeError(f"data file {data_path!r}: array 'theta0' has {theta0.size} "
                             f"entries; {title(param.name, param.sizes)} needs {param.n}")
        theta0 = param.as_theta(theta0.ravel())
    else:
        theta0 = param.random_point(np.random.default_rng(seed))
    if method == "gd":
        steps = 1000 if steps is None else steps
        callback = None
        if teleport_every is not None:
            from ..quotient import Teleporter

            callback = Teleporter(param, loss, teleport_every, radius=teleport_radius)
        return gradient_descent(param, loss, theta0, steps, schedule(schedule_kind, lr, steps),
                                record_every=max(1, steps // records), stop_loss=stop_loss,
                                stop_grad=stop_grad, batch_size=batch_size, seed=seed,
                                progress=progress, callback=callback)
    if teleport_every is not None:
        raise ParamgeoError("teleport_every is for gradient descent (method gd), not the flow")
    return gradient_flow(param, loss, theta0, 10.0 if t_final is None else t_final,
                         method=integrator, rtol=rtol, atol=atol, n_records=records,
                         log_times=log_times, stop_loss=stop_loss, stop_grad=stop_grad,
                         progress=progress, chart=chart, time_scale=time_scale,
                         exact_jacobian=exact_jacobian)
