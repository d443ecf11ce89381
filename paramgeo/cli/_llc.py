"""Learning-coefficient commands: ``llc exact`` and ``llc estimate`` (engine: paramgeo.llc)."""

import click
import numpy as np

from ._common import (Group, echo_json, emit, exit_if_interrupted, former_option, json_option,
                      load_point, loss_option, progress_bar, progress_enabled, progress_option,
                      resolve, seed_option, shared_json, sizes_option)

#: the losses of a model's outputs on the data's inputs (paramgeo.llc.data.OUTPUT_LOSSES) that
#: ``llc estimate`` offers besides the losses on predictors of every --loss
OUTPUT_LOSSES = ("mse", "cross-entropy")

#: llc exact's keys renamed in --json: the exact value as text beside lam, the number
EXACT_KEYS = {"exact": "lam_exact"}


@click.group("llc", cls=Group)
def llc_cmd():
    """Learning coefficients: exact (lambda, m) where theory has them, and the LLC estimated
    by localized Langevin sampling at a local minimum.

    \b
    Examples:
      paramgeo llc exact uvt -p m=5 -p n=5 -p r=3 --truth-zero
      paramgeo llc estimate deep-linear -p widths=5,3,5 --data rrr.npz --truth-zero
    """


def _true_point(param, at, zero, seed):
    if zero and at:
        raise click.UsageError("give --truth FILE or --truth-zero, not both")
    if zero:
        return np.zeros(param.n)
    return load_point(param, at, seed)


def truth_options(f):
    """``--truth FILE.npy`` / ``--truth-zero``: the true parameter (llc exact and llc
    estimate), with their former names in llc exact (``--at``, ``--zero``)."""
    f = click.option("--truth-zero", is_flag=True,
                     help="The true parameter is 0 (the true map 0).")(f)
    return click.option("--truth", "truth_path", type=click.Path(dir_okay=False),
                        help="A .npy file holding the true parameter theta* (flat).")(f)


@llc_cmd.command("exact")
@click.argument("name")
@sizes_option
@truth_options
@former_option("--at", "--truth", "truth_path", type=click.Path(dir_okay=False))
@former_option("--zero", "--truth-zero", "truth_zero", is_flag=True)
@seed_option("Seed of a random true parameter (without --truth or --truth-zero).")
@json_option
def exact_cmd(name, sizes, truth_path, truth_zero, seed, as_json):
    """The exact learning coefficient (lambda, multiplicity m) at a true parameter: the
    plugin's formula, or d/2 at a point where rank J is the generic rank.

    Prints lambda (exact and as a number), m, the case that applies, its formula and the
    reference; --json: name, sizes, n, m (the model's), lam, multiplicity, lam_exact, case,
    formula, reference.

    Example: paramgeo llc exact uvt -p m=5 -p n=5 -p r=3 --truth-zero
    """
    from ..llc import exact_learning_coefficient

    param = resolve(name, sizes)
    emit(exact_learning_coefficient(param, _true_point(param, truth_path, truth_zero, seed)),
         as_json, param=param, renames=EXACT_KEYS)


def llc_estimate(param, loss_kind, arrays, data_path, theta_star, truth=None, **options):
    """The estimate ``paramgeo llc estimate`` prints (and a sweep's ``llc`` query records):
    the loss ``loss_kind`` on ``arrays`` (read from ``data_path``) through ``param`` at the
    local minimum ``theta_star`` (None: the array ``theta_star`` of the data file), and the
    exact value at the true parameter ``truth`` (a theta, or None for none)."""
    from ..llc import estimate_llc, exact_learning_coefficient

    loss, theta_star, data = llc_loss(param, loss_kind, arrays, data_path, theta_star)
    exact = None if truth is None else exact_learning_coefficient(param, truth)
    return estimate_llc(param, loss, theta_star, data=data, **options), exact


def llc_loss(param, loss_kind, arrays, data_path, theta_star):
    """(loss, theta_star, data) for estimate_llc: a loss on predictors from the arrays, or for
    ``mse`` / ``cross-entropy`` the loss's name with data = (X, Y), the model evaluated on X
    (theta_star None: the array ``theta_star`` of the data file, else, for a model of its own
    parameters, those)."""
    from ..errors import ShapeError
    from ..losses.data import loss_from_arrays

    if loss_kind not in OUTPUT_LOSSES:
        loss = loss_from_arrays(loss_kind, arrays, param, source=data_path)
        if theta_star is None:
            theta_star = llc_theta_star(param, arrays, data_path)
        return loss, theta_star, None
    missing = [k for k in ("X", "Y") if k not in arrays]
    if missing:
        raise ShapeError(f"{data_path} has no array {', '.join(map(repr, missing))} (found: "
                         f"{', '.join(sorted(arrays)) or 'none'}); --loss {loss_kind} needs the "
                         "inputs X (N, ...) and the targets Y (N, ...) of the model")
    if theta_star is None and ("theta_star" in arrays or not hasattr(param, "theta0")):
        theta_star = llc_theta_star(param, arrays, data_path)
    return loss_kind, theta_star, (arrays["X"], arrays["Y"])


@llc_cmd.command("estimate")
@click.argument("name")
@sizes_option
@loss_option("linear-map", OUTPUT_LOSSES,
             help="mse and cross-entropy evaluate a model of a plugin file (from_torch, "
                  "from_jax) on the inputs X against the targets Y (labels or "
                  "probabilities).")
@click.option("--data", "data_path", required=True, type=click.Path(dir_okay=False),
              help="An .npz file with the arrays the loss needs (and optionally theta_star).")
@click.option("--minimum", "minimum", type=click.Path(dir_okay=False),
              help="A .npy file holding the local minimum w* [default: theta_star of --data].")
@former_option("--at", "--minimum", "minimum", type=click.Path(dir_okay=False))
@click.option("--nbeta", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Inverse temperature times n [default: n / log n].")
@click.option("--gamma", type=click.FloatRange(min=0, min_open=True), default=1.0,
              show_default=True, help="Localization strength.")
@click.option("--lr", "lr", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Step size eps of the Langevin chains [default: automatic, lr-scale / "
                   "largest curvature].")
@former_option("--step", "--lr", "lr", type=click.FloatRange(min=0, min_open=True))
@click.option("--lr-scale", "lr_scale", type=click.FloatRange(0, 2, min_open=True,
              max_open=True), default=0.05, show_default=True,
              help="eps times the largest curvature, for the automatic step size.")
@former_option("--step-scale", "--lr-scale", "lr_scale",
               type=click.FloatRange(0, 2, min_open=True, max_open=True))
@click.option("--sampler", type=click.Choice(["mala", "sgld"]), default=None,
              help="MALA (Metropolis-adjusted, no step bias) or SGLD [default: mala on the "
                   "full batch, sgld with --batch-size].")
@click.option("--temperatures", default="0.5,2", show_default=True,
              help="Multipliers of n beta, comma-separated: the estimate is the slope of the "
                   "mean loss against 1 / (n beta) over them (one value: n beta (E[L_n] - "
                   "L_n(w*)) at that temperature).")
@click.option("--chains", type=click.IntRange(1, 1000), default=None,
              help="Chains per temperature [32 where the plugin runs them batched "
                   "(batched_vjp), else 4].")
@click.option("--steps", "steps", type=click.IntRange(4, 10_000_000), default=None,
              help="Kept steps (draws) per chain after the burn-in [1000 where the chains run "
                   "batched, else 2000].")
@former_option("--draws", "--steps", "steps", type=click.IntRange(4, 10_000_000))
@click.option("--burn", type=click.IntRange(0, 10_000_000), default=None,
              help="Burn-in steps per chain, not counted [1000 where the chains run batched, "
                   "else 1500].")
@click.option("--bias-check/--no-bias-check", default=True, show_default=True,
              help="Also run every chain at 4 x gamma: the change of the estimate is the "
                   "error bar's finite-n bias part (docs/learning-coefficients.md).")
@seed_option("Seed of the chains (the same seed repeats the run).")
@truth_options
@click.option("--batch-size", type=click.IntRange(min=1), default=None,
              help="Minibatch SGLD on batches of this many samples [default: the full "
                   "batch]; needs --sampler sgld (the default with batches).")
@click.option("--block", "blocks", multiple=True,
              help="Move only this parameter block (repeatable): the weight-refined LLC, the "
                   "other blocks fixed at w*.")
@click.option("--precision", type=click.Choice(["auto", "single", "double"]), default="auto",
              show_default=True,
              help="Arithmetic of the chains' model evaluations: float32 (single) or float64 "
                   "(double); auto: float32 for torch models on data (mse, cross-entropy), "
                   "float64 otherwise.")
@click.option("--burn-step", type=click.FloatRange(1, 20), default=8.0, show_default=True,
              help="SGLD's burn-in step as a multiple of its step (the slow directions relax "
                   "that much faster; 1: none).")
@click.option("--sweep-lr", "sweep_lr", is_flag=True,
              help="Run the estimate at 1/8, 1/4, 1/2, 1 and 2 times the automatic step size.")
@former_option("--sweep-steps", "--sweep-lr", "sweep_lr", is_flag=True)
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Write the loss traces (or the step sweep) to a figure (.png, .svg, .pdf).")
@progress_option
@json_option
def estimate_cmd(name, sizes, loss_kind, data_path, minimum, nbeta, gamma, lr, lr_scale,
                 sampler, temperatures, chains, steps, burn, bias_check, seed, truth_path,
                 truth_zero, batch_size, blocks, precision, burn_step, sweep_lr, plot_path,
                 progress, as_json):
    """Estimate the local learning coefficient at a local minimum w* by localized Langevin
    chains (MALA or SGLD): the slope of the mean loss against 1 / (n beta) over the
    temperatures, with an error bar of three parts (the sampler's, from the effective
    sample size across chains; the data set's, by the infinitesimal jackknife; the finite-n
    bias check, the change at 4 x gamma) and warnings when a chain drifts or blows up.

    Prints the estimate with its error bar, the R-hat and acceptance of the chains, the step
    size used and the warnings, and with --truth or --truth-zero the exact value there and the
    relative error; --json: name, sizes, n, m, llc, se_total and every diagnostic, exact (the
    keys of llc exact --json, or null). With --sweep-lr: one row per step size.

    Example: paramgeo llc estimate deep-linear -p widths=5,3,5 --data rrr.npz --truth-zero
    """
    from ..io.files import check_plot_path
    from ..llc import step_sweep
    from ._flow import load_data

    if plot_path:  # before the run, not after it
        check_plot_path(plot_path)
    param = resolve(name, sizes, dense=False)
    arrays = load_data(data_path)
    theta_star = None if minimum is None else load_point(param, minimum, 0)
    options = dict(nbeta=nbeta, gamma=gamma, step_scale=lr_scale, chains=chains,
                   draws=steps, burn=burn, sampler=sampler, seed=seed,
                   temperatures=parse_temperatures(temperatures), bias_check=bias_check,
                   batch_size=batch_size, block=list(blocks) or None, precision=precision,
                   burn_step=burn_step)
    if lr is not None and sweep_lr:
        raise click.UsageError("give --lr or --sweep-lr, not both")
    truth = None
    if truth_path or truth_zero:
        truth = _true_point(param, truth_path, truth_zero, 0)
    with progress_bar("llc", progress_enabled(progress)) as update:
        if sweep_lr:
            loss, theta_star, data = llc_loss(param, loss_kind, arrays, data_path, theta_star)
            result = step_sweep(param, loss, theta_star, progress=update, data=data, **options)
            exact = None
        else:
            result, exact = llc_estimate(param, loss_kind, arrays, data_path, theta_star,
                                         truth, step="auto" if lr is None else lr,
                                         progress=update, **options)
    if plot_path:
        result.plot(plot_path)
    how_far = (f"after {len(result.estimates)} of {len(result.steps)} step sizes" if sweep_lr
               else f"after {result.draws} draws")
    if as_json:
        out = result.to_dict()
        if not sweep_lr:
            out["exact"] = None if exact is None else shared_json(exact.to_dict(),
                                                                   renames=EXACT_KEYS)
        echo_json(out, param, renames={"n": "sample_size"})
        exit_if_interrupted(result, how_far)
        return
    text = str(result)
    if exact is not None:
        text += (f"\nexact at the truth: lambda = {exact.exact} ({exact.case}; {exact.reference}); "
                 f"relative error {(result.llc - exact.lam) / exact.lam:+.1%}")
    if plot_path:
        text += f"\nfigure written to {plot_path}"
    emit(result, False, text)
    exit_if_interrupted(result, how_far)


def parse_temperatures(text):
    """The multipliers of n beta from "0.5,2" (a UsageError naming the value otherwise)."""
    try:
        values = tuple(float(v) for v in str(text).split(","))
    except ValueError:
        values = ()
    if not values or not all(np.isfinite(v) and v > 0 for v in values):
        raise click.UsageError(f"--temperatures {text!r}: give positive numbers separated by "
                               "commas, e.g. 0.5,2")
    return values


def llc_theta_star(param, arrays, data_path):
    """The array ``theta_star`` of the data file as a validated theta."""
    from ..errors import ShapeError

    if "theta_star" not in arrays:
        raise ShapeError(f"{data_path} has no array 'theta_star' and no --minimum was given; "
                         "give the local minimum w* with --minimum FILE.npy or save it in the "
                         "data file as theta_star")
    return param.as_theta(np.asarray(arrays["theta_star"], float).ravel())
