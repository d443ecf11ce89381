"""The ``online-sgd`` command: online SGD on attention-indexed data to weak recovery."""

import math

import click
import numpy as np

from ..errors import ParamgeoError
from ._common import (command, echo_json, exit_if_interrupted, former_option, json_option,
                      progress_bar, progress_enabled, progress_option, resolve, seed_option,
                      sizes_option, table)
from ..results import title

LINK_NAMES = ("linear", "quadratic", "tanh", "relu", "abs", "softmax")


def run_online(param, *, link="abs", tokens=1, noise=0.0, beta=1.0, teacher="tied",
               teacher_rank=None, centered=True, init="gaussian", scale="1/sqrt(rd)", lr=0.1,
               lr_exponent=0.0, batch=4, horizon=1.0, threshold=0.5, seed=0, progress=None):
    """The run ``paramgeo online-sgd`` computes (and a sweep's ``online-sgd`` query): a planted
    teacher (``tied`` S* = W W^T / sqrt(r* d), r* = ``teacher_rank`` or d / 2, or ``direct``;
    ``centered`` removes its mean), the start (``gaussian`` i.i.d. N(0, 1), the plugin's
    ``random`` point, or ``zero``), S = scale * phi(theta) with scale a number or "1/sqrt(rd)"
    (r and d from the plugin's sizes), then online SGD on up to horizon * d^2 log d samples,
    stopped at weak recovery (|cosine| >= threshold). One seed drives teacher, start and
    samples."""
    from ..flows.online import MAX_SAMPLES, AttentionIndexed, Teacher, _as_square, online_sgd

    d = _as_square(param, np.zeros(param.m)).shape[0]
    if d < 2:
        raise ParamgeoError("online SGD needs d >= 2 (the horizon is in units of d^2 log d)")
    if scale == "1/sqrt(rd)":
        if "r" not in param.sizes:
            raise ParamgeoError(f"the output scale '1/sqrt(rd)' needs a size r; {param.name} "
                                f"has {', '.join(param.sizes)}: give the output scale as a "
                                "number (--output-scale)")
        scale = 1.0 / math.sqrt(param.sizes["r"] * d)
    if not (math.isfinite(horizon) and horizon > 0):
        raise ParamgeoError(f"the horizon must be a positive number, got {horizon}")
    if teacher_rank is not None and not 1 <= teacher_rank <= d:
        raise ParamgeoError(f"the teacher's rank r* must lie in 1..d = 1..{d}, got "
                            f"{teacher_rank}")
    rng = np.random.default_rng(seed)
    planted = Teacher.planted(d, teacher_rank or max(d // 2, 1), rng, kind=teacher,
                              centered=centered)
    starts = {"gaussian": lambda: rng.standard_normal(param.n),
              "random": lambda: param.random_point(rng), "zero": lambda: np.zeros(param.n)}
    if init not in starts:
        raise ParamgeoError(f"unknown start {init!r}; choose gaussian, random or zero")
    samples = horizon * d * d * math.log(d)
    if samples > MAX_SAMPLES:
        raise ParamgeoError(f"the horizon {horizon:.3g} is {samples:.3g} samples (in units of "
                            f"d^2 log d = {d * d * math.log(d):.4g}), beyond the {MAX_SAMPLES:.0e} "
                            "one run of online SGD draws; give a smaller horizon")
    samples = max(1, int(round(samples)))
    return online_sgd(param, AttentionIndexed(d=d, tokens=tokens, link=link, beta=beta,
                                              noise=noise), planted,
                      starts[init](), samples, lr, lr_exponent=lr_exponent, scale=float(scale),
                      batch=batch, threshold=threshold, test_samples=0, stop_at_recovery=True,
                      seed=rng, progress=progress)


def online_summary(param, run):
    """The JSON-able summary of a run: weak recovery in samples, in t = n / d^2 and in units
    of d^2 log d, and the final order parameters."""
    d = run.model.d
    wr = run.weak_recovery
    return {"name": param.name, "sizes": param.sizes, "d": d, "samples": run.samples,
            "eta": run.eta, "weak_recovery": wr, "weak_recovery_time": run.weak_recovery_time,
            "recovered_over_d2logd": wr / (d * d * math.log(d)) if wr else None,
            "final": {k: float(v[-1]) for k, v in run.order.items()}}


def _scale(ctx, param, value):
    if value is None or value == "1/sqrt(rd)":
        return value
    try:
        return float(value)
    except ValueError:
        raise click.BadParameter(f"{value!r}: give a number or 1/sqrt(rd)") from None


@command("online-sgd")
@click.argument("name")
@sizes_option
@click.option("--link", type=click.Choice(LINK_NAMES), default="abs", show_default=True,
              help="Output function g of the indices.")
@click.option("--tokens", type=click.IntRange(min=1), default=1, show_default=True,
              help="Tokens T per sample.")
@click.option("--noise", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Label noise sigma.")
@click.option("--beta", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="Inverse temperature of the softmax link.")
@click.option("--teacher", type=click.Choice(["tied", "direct"]), default="tied",
              show_default=True, help="The planted S*: W W^T / sqrt(r* d), or symmetric Gaussian.")
@click.option("--teacher-rank", type=click.IntRange(min=1), default=None,
              help="r* of a tied teacher [default: d / 2].")
@click.option("--centered/--uncentered", default=True, show_default=True,
              help="Remove the teacher's mean Tr(S*)/d.")
@click.option("--init", type=click.Choice(["gaussian", "random", "zero"]), default="gaussian",
              show_default=True,
              help="theta0: i.i.d. N(0, 1), the plugin's random point, or 0.")
@click.option("--output-scale", "scale", default="1/sqrt(rd)", show_default=True,
              callback=_scale,
              help="S = output-scale * phi(theta): a number, or 1/sqrt(rd) from the sizes r "
                   "and d.")
@former_option("--scale", "--output-scale", "scale", callback=_scale)
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=0.1,
              show_default=True, help="Step size c; eta = c * d^(-lr-exponent).")
@click.option("--lr-exponent", type=float, default=0.0, show_default=True,
              help="eta = lr * d^(-lr-exponent) (1 for direct S, 0 for factored S).")
@click.option("--batch-size", "batch", type=click.IntRange(min=1), default=4,
              show_default=True, help="Fresh samples per step.")
@former_option("--batch", "--batch-size", "batch", type=click.IntRange(min=1))
@click.option("--horizon", type=float, default=1.0, show_default=True,
              help="Most samples, in units of d^2 log d.")
@click.option("--threshold", type=click.FloatRange(0, 1, min_open=True), default=0.5,
              show_default=True, help="Weak recovery: |cosine| >= threshold.")
@seed_option("Seed of the teacher, the start and the samples.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Write the order parameters against t (.png, .svg or .pdf).")
@progress_option
@json_option
def online_sgd_cmd(name, sizes, link, tokens, noise, beta, teacher, teacher_rank, centered, init,
                   scale, lr, lr_exponent, batch, horizon, threshold, seed, plot_path, progress,
                   as_json):
    """Online SGD on attention-indexed data to weak recovery, with order parameters.

    Fresh Gaussian tokens every step, labels from a planted teacher S*, the student
    S = scale * phi(theta) of a plugin with d x d predictors (matrix, uut, uvt); stops when the
    cosine of the traceless parts of S and S* reaches the threshold (docs/online-sgd.md).

    \b
    Example: paramgeo online-sgd uut -p d=16 -p r=8 --link abs --horizon 2
    """
    if plot_path:  # before the run, not after it
        from ..io.files import check_plot_path

        check_plot_path(plot_path)
    param = resolve(name, sizes, dense=False)  # online SGD uses forward and J^T v only
    with progress_bar("online SGD", progress_enabled(progress, quiet=as_json)) as update:
        run = run_online(param, link=link, tokens=tokens, noise=noise, beta=beta,
                         teacher=teacher, teacher_rank=teacher_rank, centered=centered,
                         init=init, scale=scale, lr=lr, lr_exponent=lr_exponent, batch=batch,
                         horizon=horizon, threshold=threshold, seed=seed, progress=update)
    if plot_path:
        run.plot(plot_path, title=f"{title(param.name, param.sizes)}: online SGD, {link} link")
    summary = online_summary(param, run)
    if as_json:
        echo_json(dict(summary, plot=plot_path), param)
        exit_if_interrupted(run, run.trajectory.message.removeprefix("interrupted "))
        return
    click.echo(str(run))
    idx = np.unique(np.linspace(0, len(run.t) - 1, min(8, len(run.t))).astype(int))
    click.echo(table([(f"{run.t[i]:.3g}", f"{run.order['mean'][i]:.4g}",
                       f"{run.order['norm'][i]:.4g}", f"{run.order['cosine'][i]:+.4f}")
                      for i in idx], ["t = n/d^2", "mean", "norm", "cosine"]))
    if plot_path:
        click.echo(f"figure written to {plot_path}")
    exit_if_interrupted(run, run.trajectory.message.removeprefix("interrupted "))
