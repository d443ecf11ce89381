"""``paramgeo pacbayes``: parameter- and quotient-space KL, both priors, three certificates."""


import click

from ._common import (command, echo_json, exit_if_interrupted, former_option, json_option,
                      progress_bar, progress_enabled, progress_option, resolve, seed_option,
                      sizes_option, table)


@command("pacbayes")
@click.argument("name")
@sizes_option
@click.option("--posterior", "posterior_file", required=True, type=click.Path(dir_okay=False),
              help="A .npz file with arrays mean (n,), std (n,) or scalar, empirical_risk.")
@click.option("--prior-scale", "scales", required=True, multiple=True, type=str,
              help="Standard deviation s of the neutral prior N(0, s^2 I); repeat for a grid "
                   "(union bound over the grid).")
@click.option("--sample-size", "n", type=str, default=None,
              help="Number of training samples N (required).")
@former_option("--n", "--sample-size", "n", type=str)
@click.option("--delta", required=True, type=str, help="Confidence parameter in (0, 1).")
@click.option("--method", type=click.Choice(["auto", "quadrature", "montecarlo"]),
              default="auto", show_default=True, help="Estimator of the quotient KL.")
@click.option("--samples", type=click.IntRange(min=2), default=200, show_default=True,
              help="Monte Carlo samples (method montecarlo).")
@seed_option("Monte Carlo seed.")
@progress_option
@json_option
def pacbayes_cmd(name, sizes, posterior_file, scales, n, delta, method, samples, seed, progress,
                 as_json):
    """KL(Q||P) and KL(Q_bar||P_bar) for the neutral prior N(0, s^2 I) and the orbit-volume
    implicit-bias prior, with McAllester, Maurer-Seeger and Catoni certificates.

    The posterior is read from an .npz file holding ``mean`` (n,), ``std`` (n,) or a scalar
    (a diagonal Gaussian on theta) and ``empirical_risk`` (the Gibbs empirical risk of a loss in
    [0, 1]). With several --prior-scale values the certificates use delta / (number of scales).

    Example: paramgeo pacbayes hadamard --posterior q.npz --prior-scale 1 --sample-size 1000
    --delta 0.05
    """
    from ..pacbayes import load_posterior, pacbayes_report
    from ..pacbayes.bounds import _check_cert_inputs
    from ..pacbayes.gaussians import _positive

    if n is None:
        raise click.UsageError("Missing option '--sample-size' (the number of training "
                               "samples)")
    param = resolve(name, sizes)
    scales = [_positive(s, "prior scale", bounded=True) for s in scales]
    _check_cert_inputs(0.0, 0.0, _int(n), _float(delta, "delta"))
    posterior, risk = load_posterior(param, posterior_file)
    with progress_bar("orbit integrals", progress_enabled(progress, as_json)) as bar:
        report = pacbayes_report(param, posterior, scales, _int(n), float(delta), risk,
                                 method=method, samples=samples, seed=seed, progress=bar)
    if as_json:
        echo_json(report.to_dict(), param, renames={"n": "sample_size"})
        return
    click.echo(f"{report.name}: method {report.method}, N = {report.n}, delta = {report.delta}, "
               f"empirical risk {report.empirical_risk:.6g}, union bound over "
               f"{len(report.scales)} prior scale(s)")
    click.echo(f"quotient KL: {report.detail}")
    click.echo(table(
        [(pk.prior, f"{pk.scale:g}", f"{pk.kl_param:.6g}", f"{pk.kl_quotient:.6g}",
          f"{pk.stderr:.2g}" if pk.stderr else "-")
         for pk in report.priors],
        ["prior", "scale", "KL param", "KL quotient", "stderr"],
    ))
    click.echo("")
    click.echo(table(
        [(prior, f"{scale:g}", f"{c.kl:.6g}", f"{c.mcallester:.6g}", f"{c.maurer_seeger:.6g}",
          f"{c.catoni:.6g}") for prior, scale, c in report.certificates],
        ["prior", "scale", "KL used", "McAllester", "Maurer-Seeger", "Catoni"],
    ))
    exit_if_interrupted(report, "during the orbit integrals")


def _int(value):
    from ..pacbayes import PacBayesInputError

    try:
        f = float(value)
    except (TypeError, ValueError):
        raise PacBayesInputError(f"--sample-size must be a positive integer, got {value!r}") \
            from None
    if not f.is_integer() or f < 1:
        raise PacBayesInputError(f"--sample-size must be a positive integer (the number of "
                                 f"training samples), got {value!r}")
    return int(f)


def _float(value, what):
    from ..pacbayes import PacBayesInputError

    try:
        return float(value)
    except (TypeError, ValueError):
        raise PacBayesInputError(f"{what} must be a number, got {value!r}") from None
