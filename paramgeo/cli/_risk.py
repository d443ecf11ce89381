"""``paramgeo structure``, ``paramgeo early-stopping`` and ``paramgeo spectral-filters``."""

import click

from ..errors import ShapeError
from ..dynamics.trajectory import MAX_STEPS
from ._common import (command, emit, former_option, json_option, progress_bar, progress_enabled,
                      progress_option, resolve, seed_option, sizes_option)


#: the risk commands' keys renamed in --json: the number of training samples as in pacbayes
RISK_KEYS = {"N": "sample_size"}


def _short(text, keep=40):
    return text if len(text) <= keep else f"{text[:keep]}... ({len(text)} characters)"


def parse_units(text):
    """``W:0,a:0`` -> {"W": 0, "a": 0} (block name : unit axis); None or "" -> None."""
    if not text:
        return None
    out = {}
    for part in text.split(","):
        name, sep, axis = part.strip().partition(":")
        axis = axis.strip()
        if not sep or not name or not (axis.isascii() and axis.isdigit()):
            raise ShapeError(f"units {_short(text)!r}: each entry must look like BLOCK:AXIS, "
                             "e.g. --units W:0,a:0")
        if len(axis) > 3:  # an axis of a block's shape: a small number
            raise ShapeError(f"units: the axis of block {_short(name)!r} is {_short(axis)}, "
                             "not an axis of a block (0, 1, ...); e.g. --units W:0,a:0")
        out[name] = int(axis)
    return out


def structure_report(param, units, check=True, progress=None):
    """The CLI's and the sweep's adapter: :func:`paramgeo.flows.structure.structure_matrix`."""
    from ..flows.structure import structure_matrix

    return structure_matrix(param, parse_units(units), check=check, progress=progress)


@command("structure")
@click.argument("name")
@sizes_option
@click.option("--units", default=None, metavar="BLOCK:AXIS,...",
              help="The layer: blocks and the axis that counts units, e.g. W:0,a:0 (default: "
                   "all of theta as one unit).")
@click.option("--check/--no-check", default=True, show_default=True,
              help="Compare A with finite differences of forward.")
@progress_option
@json_option
def structure_cmd(name, sizes, units, check, progress, as_json):
    """Structure matrices A(x) of a layer at zero weights: f(W; x) = f(0; x) + Tr[W W^T A(x)] + O(W^3).

    Checks that the gradient vanishes at zero and that units enter alike and separately (the
    trace form). Example: paramgeo --plugin examples/structure_layers.py structure perceptron
    --units w:0,b:0,a:0
    """
    param = resolve(name, sizes)
    with progress_bar("Hessian columns", progress_enabled(progress)) as bar:
        result = structure_report(param, units, check, bar)
    emit(result, as_json, param=param)


@command("early-stopping")
@click.option("--d", "d", type=click.IntRange(1, 100_000), default=200, show_default=True,
              help="Dimension of the inputs.")
@click.option("--sample-size", "N", type=click.IntRange(2, 1_000_000), default=50,
              show_default=True, help="Training samples N.")
@former_option("--N", "--sample-size", "N", type=click.IntRange(2, 1_000_000))
@click.option("--spectrum", type=click.Choice(["polynomial", "exponential"]),
              default="polynomial", show_default=True, help="Covariance spectrum.")
@click.option("--decay", type=click.FloatRange(min=0.0), default=1.5, show_default=True,
              help="Decay a of lambda_j = j^-a or exp(-a (j - 1)).")
@click.option("--snr", type=click.FloatRange(min=0.0, min_open=True), default=3.0,
              show_default=True, help="sqrt(mu^T Sigma^-1 mu).")
@click.option("--support", type=click.IntRange(min=1), default=10, show_default=True,
              help="Coordinates of the Bayes direction Sigma^-1 mu (equal entries).")
@click.option("--flip", type=click.FloatRange(0.0, 0.5, max_open=True), default=0.1,
              show_default=True, help="Label-flip probability.")
@click.option("--steps", type=click.IntRange(1, MAX_STEPS), default=2000, show_default=True,
              help="Gradient descent steps.")
@seed_option("Seed of the sample.")
@progress_option
@json_option
def early_stopping_cmd(d, N, spectrum, decay, snr, support, flip, steps, seed, progress,
                       as_json):
    """Exact excess 0-1 risk of logistic GD under label flips: at the oracle stop, at the end, and of the max-margin interpolator.

    Example: paramgeo early-stopping --d 400 --sample-size 100 --flip 0.1 --decay 1.5
    """
    from ..flows.risk import GaussianMixture, early_stopping

    model = GaussianMixture.from_spectrum(d, spectrum, decay, snr, flip, support)
    with progress_bar("GD records", progress_enabled(progress)) as bar:
        result = early_stopping(model, N, steps, seed=seed, progress=bar)
    emit(result, as_json, renames=RISK_KEYS)


@command("spectral-filters")
@click.option("--d", "d", type=click.IntRange(2, 100_000), default=400, show_default=True,
              help="Dimension (d > N).")
@click.option("--sample-size", "N", type=click.IntRange(2, 100_000), default=100,
              show_default=True, help="Training samples N.")
@former_option("--N", "--sample-size", "N", type=click.IntRange(2, 100_000))
@click.option("--spike", type=click.FloatRange(min=0.0), default=20.0, show_default=True,
              help="Spike strength theta (Sigma = sigma^2 I + theta e_1 e_1^T).")
@click.option("--noise", type=click.FloatRange(min=0.0), default=0.5, show_default=True,
              help="Label noise standard deviation.")
@seed_option("Seed of the sample.")
@json_option
def spectral_filters_cmd(d, N, spike, noise, seed, as_json):
    """Risk of ridge, GD and negatively shifted GD in a spike-plus-flat model, beside the Marchenko-Pastur edge and the shift that cancels the implicit penalty.

    Example: paramgeo spectral-filters --d 400 --sample-size 100
    """
    from ..flows.risk import SpikedModel, spiked_filter_risks

    emit(spiked_filter_risks(SpikedModel(d=d, spike=spike, noise=noise), N, seed), as_json,
         renames=RISK_KEYS)

