"""The queries a sweep can run: one small adapter per CLI command, in an open registry.

A :class:`Query` names its options (each with a default and a converter that validates a value
from the sweep file) and a function ``run(param, **options)`` that calls the same engine the
CLI command calls and returns its result (a :class:`~paramgeo.results.Result` or a JSON-able
dict). ``register_query`` adds one; a third party can add its own the same way.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Union

from ..cli._critical import MAX_STARTS
from ..cli._define import MAX_EXACT_POINTS
from ..errors import ParamgeoError
from ..dynamics.trajectory import MAX_RECORDS, MAX_STEPS, MAX_T_FINAL

if TYPE_CHECKING:
    from ..contract.parameterization import Parameterization

#: A required option (no default).
REQUIRED = object()


@dataclasses.dataclass(frozen=True, kw_only=True)
class Option:
    """One option of a query: its default (or REQUIRED), a converter ``convert(value)`` that
    returns the normalised value or raises ValueError/ParamgeoError, and whether the value is a
    file path (resolved against the sweep file's folder, hashed by content)."""

    default: object
    convert: object
    help: str = ""
    path: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class Query:
    """A sweepable query: ``run(param, **options)`` -> result; ``dense`` says whether it forms
    the dense Jacobian (the size guard of :func:`paramgeo.cli._common.resolve`); ``renamed``
    maps a former option name, still accepted for one release with a warning, to its name."""

    name: str
    run: Callable[..., Any]
    options: dict
    dense: bool = True
    help: str = ""
    renamed: dict = dataclasses.field(default_factory=dict)


#: query name -> Query; extend with :func:`register_query`.
QUERIES: dict[str, Query] = {}


def register_query(
        name: str, options: Mapping[str, Option], dense: bool = True,
        renamed: Optional[Mapping[str, str]] = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: register ``run(param, **options)`` as the sweep query ``name`` (``renamed``:
    former option name -> current name, accepted with a warning)."""

    def deco(run):
        QUERIES[name] = Query(name=name, run=run, options=dict(options), dense=dense,
                              help=(run.__doc__ or "").strip().splitlines()[0],
                              renamed=dict(renamed or {}))
        return run

    return deco


# ------------------------------------------------------------------------------- converters

def integer(minimum: Optional[int] = None, maximum: Optional[int] = None,
            optional: bool = False) -> Callable[[Any], Any]:
    def convert(value):
        if optional and value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or isinstance(value, float) and not value.is_integer():
            raise ValueError(f"must be an integer, got {_short_repr(value)}")
        value = int(value)
        if minimum is not None and value < minimum or maximum is not None and value > maximum:
            bounds = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
            raise ValueError(f"must be an integer {bounds}, got {_short_repr(value)}")
        return value
    return convert


def number(positive: bool = False, optional: bool = False, open_unit: bool = False,
           maximum: Optional[float] = None) -> Callable[[Any], Any]:
    def convert(value):
        if optional and value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or isinstance(value, int) and abs(value) > 1e300 \
                or not math.isfinite(value):
            raise ValueError(f"must be a finite number, got {_short_repr(value)}")
        value = float(value)
        if positive and value <= 0:
            raise ValueError(f"must be a positive number, got {value}")
        if open_unit and not 0 < value < 1:
            raise ValueError(f"must lie in (0, 1), got {value}")
        if maximum is not None and value > maximum:
            raise ValueError(f"must be at most {maximum:.3g}, got {value:.3g}")
        return value
    return convert


def _short_repr(value):
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def positive_list(value: Any) -> list[float]:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ValueError("must be a positive number or a non-empty list of them")
    return [number(positive=True)(v) for v in values]


def choice(*values: Any) -> Callable[[Any], Any]:
    def convert(value):
        if value not in values:
            raise ValueError(f"must be one of {', '.join(map(str, values))}, got {value!r}")
        return value
    return convert


def flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false, got {value!r}")
    return value


def path(optional: bool = False) -> Callable[[Any], Any]:
    def convert(value):
        if optional and value is None:
            return None
        if not isinstance(value, str) or not value:
            raise ValueError(f"must be a file path (a string), got {value!r}")
        return value
    return convert


def _seed(help="seed of the random points"):
    return Option(default=0, convert=integer(0), help=help)


def _point():
    return {"seed": _seed("seed of the random point (ignored with at)"),
            "at": Option(default=None, convert=path(optional=True),
                         help="a .npy file holding theta", path=True)}


# ------------------------------------------------------------------------------ the queries

@register_query("describe", {"seed": _seed()})
def describe_query(param: Parameterization, seed: int) -> Any:
    """Dimensions, generic rank, symmetry and quotient dimension (paramgeo describe)."""
    from ..reports.description import describe

    return describe(param, seed=seed)


@register_query("rank", _point())
def rank_query(param: Parameterization, seed: int, at: Optional[str]) -> Any:
    """Rank of J at a point, the generic rank and the singular values (paramgeo rank)."""
    from ..cli._common import load_point
    from ..cli._core import rank_report

    return rank_report(param, load_point(param, at, seed))


@register_query("check", {"seed": _seed()})
def check_query(param: Parameterization, seed: int) -> Any:
    """The contract check (paramgeo check)."""
    from ..reports.contract_check import check

    return check(param, seed=seed)


@register_query("critical", _point())
def critical_query(param: Parameterization, seed: int, at: Optional[str]) -> Any:
    """Classify a point: regular or critical with its causes (paramgeo critical)."""
    from ..cli._common import load_point
    from ..critical import classify

    return classify(param, load_point(param, at, seed))


@register_query("strata", {"kinds": Option(default="deleted", convert=choice("deleted", "all")),
                           "seed": _seed()})
def strata_query(param: Parameterization, kinds: str, seed: int) -> Any:
    """The poset of strata with their generic ranks (paramgeo strata)."""
    from ..critical import strata

    return strata(param, kinds=kinds, seed=seed)


@register_query("search", {"starts": Option(default=20, convert=integer(1, MAX_STARTS),
                                            help="number of random starts"),
                           "seed": _seed("seed of the starts"),
                           "maxiter": Option(default=100, convert=integer(1),
                                             help="L-BFGS-B iterations per start")})
def search_query(param: Parameterization, starts: int, seed: int, maxiter: int) -> Any:
    """Critical points from random starts, classified (paramgeo search)."""
    from ..critical import search

    return search(param, starts=starts, seed=seed, maxiter=maxiter)


@register_query("mirror", {"init_scale": Option(default=None,
                                                convert=number(positive=True, optional=True)),
                           "degree": Option(default=2, convert=integer(1, 4)),
                           "method": Option(default="auto",
                                            convert=choice("auto", "symbolic", "numeric")),
                           "seed": _seed("seed of the test points")})
def mirror_query(param: Parameterization, init_scale: Optional[float], degree: int, method: str,
                 seed: int) -> Any:
    """Lie algebra of the fields grad phi_i, conservation laws, potential (paramgeo mirror)."""
    from ..mirror import mirror

    return mirror(param, alpha=init_scale, degree=degree, seed=seed, method=method)


#: The options of a gradient flow's coordinates, time and Jacobian (the CLI's --chart,
#: --time-scale, --exact-jacobian; paramgeo.flows.gradient_flow).
STIFF_FLOW = {"chart": Option(default="theta", convert=choice("theta", "log"),
                              help="theta, or log|theta|"),
              "time_scale": Option(default=1.0, convert=number(positive=True),
                                   help="integrate in t / time_scale"),
              "exact_jacobian": Option(default=False, convert=flag,
                                       help="the loss Hessian as the implicit integrator's "
                                       "Jacobian")}


@register_query("implicit-bias", {
    "data": Option(default=REQUIRED, convert=path(), help="an .npz file with X (N x p) and y (N,)",
                   path=True),
    "init_scale": Option(default=REQUIRED, convert=number(positive=True)),
    "t_final": Option(default=1e9, convert=number(positive=True, maximum=MAX_T_FINAL)),
    "rtol": Option(default=1e-10, convert=number(positive=True)),
    "atol": Option(default=1e-15, convert=number(positive=True)),
    **STIFF_FLOW})
def implicit_bias_query(param: Parameterization, data: str, init_scale: float,
                        t_final: float, rtol: float, atol: float, chart: str,
                        time_scale: float, exact_jacobian: bool) -> Any:
    """argmin R_alpha(beta) s.t. X beta = y against the gradient-flow limit
    (paramgeo implicit-bias)."""
    from ..cli._mirror import load_regression
    from ..mirror import implicit_bias

    X, y = load_regression(data)
    return implicit_bias(param, X, y, init_scale, t_final=t_final, rtol=rtol, atol=atol,
                         chart=chart, time_scale=time_scale, exact_jacobian=exact_jacobian)


@register_query("flow", {
    "loss": Option(default="squared",
                   convert=choice("squared", "quadratic", "logistic", "exponential")),
    "data": Option(default=REQUIRED, convert=path(),
                   help="an .npz file with the arrays the loss needs", path=True),
    "method": Option(default="gd", convert=choice("gd", "flow")),
    "steps": Option(default=None, convert=integer(1, MAX_STEPS, optional=True),
                    help="descent steps (gd) [1000]"),
    "t_final": Option(default=None,
                      convert=number(positive=True, optional=True, maximum=MAX_T_FINAL),
                      help="final time (flow) [10]"),
    "lr": Option(default=1e-2, convert=number(positive=True)),
    "schedule": Option(default="constant", convert=choice("constant", "inverse", "cosine", "step")),
    "batch_size": Option(default=None, convert=integer(1, optional=True)),
    "integrator": Option(default="LSODA",
                         convert=choice("LSODA", "RK45", "DOP853", "BDF", "Radau")),
    "rtol": Option(default=1e-8, convert=number(positive=True)),
    "atol": Option(default=1e-10, convert=number(positive=True)),
    "log_times": Option(default=False, convert=flag),
    **STIFF_FLOW,
    "records": Option(default=200, convert=integer(2, MAX_RECORDS)),
    "stop_loss": Option(default=None, convert=number(optional=True)),
    "stop_grad": Option(default=None, convert=number(optional=True)),
    "init_scale": Option(default=None, convert=number(positive=True, optional=True)),
    "teleport_every": Option(default=None, convert=integer(1, optional=True),
                             help="teleport to the largest gradient norm every K steps (gd)"),
    "teleport_radius": Option(default=1.0, convert=number(positive=True)),
    "seed": _seed("seed of the random start and of the minibatches")}, dense=False,
    renamed={"time": "t_final"})
def flow_query(param: Parameterization, loss: str, data: str, method: str, steps: Optional[int],
               t_final: Optional[float], lr: float, schedule: str, batch_size: Optional[int],
               integrator: str, rtol: float, atol: float, log_times: bool, chart: str,
               time_scale: float, exact_jacobian: bool, records: int, stop_loss: Optional[float],
               stop_grad: Optional[float], init_scale: Optional[float],
               teleport_every: Optional[int], teleport_radius: float, seed: int) -> Any:
    """Gradient descent or gradient flow of a loss through phi (paramgeo flow); the options
    of the other method are unused."""
    from ..cli._flow import load_data, train

    traj = train(param, loss, load_data(data), data, method=method, steps=steps, t_final=t_final,
                 lr=lr, schedule_kind=schedule, batch_size=batch_size, integrator=integrator,
                 rtol=rtol, atol=atol, log_times=log_times, chart=chart,
                 time_scale=time_scale, exact_jacobian=exact_jacobian, records=records,
                 stop_loss=stop_loss, stop_grad=stop_grad, alpha=init_scale, seed=seed,
                 teleport_every=teleport_every, teleport_radius=teleport_radius)
    return dict(traj.summary(), final_predictor=traj.final_predictor)


@register_query("pacbayes", {
    "posterior": Option(default=REQUIRED, convert=path(),
                        help="an .npz file with mean, std, empirical_risk", path=True),
    "prior_scale": Option(default=REQUIRED, convert=positive_list,
                          help="a scale or a list (union bound)"),
    "sample_size": Option(default=REQUIRED, convert=integer(1),
                          help="number of training samples N"),
    "delta": Option(default=REQUIRED, convert=number(open_unit=True)),
    "method": Option(default="auto", convert=choice("auto", "quadrature", "montecarlo")),
    "samples": Option(default=200, convert=integer(2)),
    "seed": _seed("Monte Carlo seed")}, renamed={"n": "sample_size"})
def pacbayes_query(param: Parameterization, posterior: str, prior_scale: list[float],
                   sample_size: int, delta: float, method: str, samples: int, seed: int) -> Any:
    """Parameter and quotient KL, both priors, three certificates (paramgeo pacbayes)."""
    from ..pacbayes import load_posterior, pacbayes_report

    post, risk = load_posterior(param, posterior)
    return pacbayes_report(param, post, prior_scale, sample_size, delta, risk, method=method,
                           samples=samples, seed=seed)


@register_query("discover", {"seed": _seed(), "discrete": Option(default=True, convert=flag),
                             "max_dim": Option(default=None, convert=integer(1, optional=True))})
def discover_query(param: Parameterization, seed: int, discrete: bool,
                   max_dim: Optional[int]) -> Any:
    """Symmetries found from the map alone (paramgeo discover)."""
    from ..symmetry import MAX_LINEAR_DIM, discover

    return discover(param, seed=seed, discrete=discrete,
                    max_linear_dim=MAX_LINEAR_DIM if max_dim is None else max_dim)


@register_query("exact", {"seed": _seed("seed of the random rational points"),
                          "points": Option(default=2, convert=integer(1, MAX_EXACT_POINTS))})
def exact_query(param: Parameterization, seed: int, points: int) -> Any:
    """Exact (sympy) ranks over Q and Q(theta) (paramgeo exact)."""
    from ..expressions.symbolic import exact_analysis

    return exact_analysis(param, n_points=points, seed=seed)


def _units(value):
    if not isinstance(value, str):
        raise ValueError(f"must be a string like \"W:0,a:0\", got {value!r}")
    from ..cli._risk import parse_units

    parse_units(value)
    return value


@register_query("structure", {"units": Option(default=None, convert=_units,
                                              help="BLOCK:AXIS,... (the layer's units)"),
                              "check": Option(default=True, convert=flag)})
def structure_query(param: Parameterization, units: Any, check: bool) -> Any:
    """Structure matrices A(x) of a layer at zero weights (paramgeo structure)."""
    from ..cli._risk import structure_report

    return structure_report(param, units, check)


@register_query("early-stopping", {
    "sample_size": Option(default=REQUIRED, convert=integer(2), help="training samples N"),
    "spectrum": Option(default="polynomial", convert=choice("polynomial", "exponential")),
    "decay": Option(default=1.5, convert=number(positive=True)),
    "snr": Option(default=3.0, convert=number(positive=True)),
    "support": Option(default=10, convert=integer(1), help="coordinates of the Bayes direction"),
    "flip": Option(default=0.1, convert=number()),
    "steps": Option(default=2000, convert=integer(1, MAX_STEPS)),
    "seed": _seed("seed of the sample")}, dense=False, renamed={"N": "sample_size"})
def early_stopping_query(param: Parameterization, sample_size: int, spectrum: str, decay: float,
                         snr: float, support: int, flip: float, steps: int, seed: int) -> Any:
    """Logistic GD through phi (predictor = weight vector of length d) on a label-flip
    Gaussian mixture: exact excess 0-1 risk at the oracle stop and of the max-margin
    interpolator."""
    from ..flows.risk import GaussianMixture, early_stopping

    model = GaussianMixture.from_spectrum(param.m, spectrum, decay, snr, flip, support)
    res = early_stopping(model, sample_size, steps, seed=seed, param=param)
    return {"oracle_step": res.oracle_step, "oracle_excess": res.oracle_excess,
            "final_excess": res.final_excess, "max_margin_excess": res.max_margin_excess,
            "bayes_risk": res.bayes_risk}


def non_negative(value: Any) -> float:
    """A finite number >= 0."""
    value = number()(value)
    if value < 0:
        raise ValueError(f"must be a non-negative number, got {value}")
    return value


@register_query("spectral-filters", {
    "sample_size": Option(default=REQUIRED, convert=integer(2),
                          help="training samples N (d > N, d the predictor's length)"),
    "spike": Option(default=20.0, convert=non_negative, help="spike strength theta"),
    "noise": Option(default=0.5, convert=non_negative, help="label noise standard deviation"),
    "steps": Option(default=4000, convert=integer(1, MAX_STEPS),
                    help="GD steps scanned for the stopping time"),
    "seed": _seed("seed of the sample")}, dense=False, renamed={"N": "sample_size"})
def spectral_filters_query(param: Parameterization, sample_size: int, spike: float, noise: float,
                           steps: int, seed: int) -> Any:
    """Risk of ridge, GD and negatively shifted GD in a spike-plus-flat model of dimension d =
    the plugin's predictor length (paramgeo spectral-filters)."""
    from ..flows.risk import SpikedModel, spiked_filter_risks

    res = spiked_filter_risks(SpikedModel(d=param.m, spike=spike, noise=noise), sample_size,
                              seed, steps)
    return {f.name: getattr(res, f.name) for f in dataclasses.fields(res)}


def scale_value(value: Any) -> Union[float, str]:
    """A float, or the string "1/sqrt(rd)" (1 / sqrt(r d) from the plugin's sizes r and d)."""
    if value == "1/sqrt(rd)":
        return value
    return number()(value)


@register_query("online-sgd", {
    "link": Option(default="abs",
                   convert=choice("linear", "quadratic", "tanh", "relu", "abs", "softmax")),
    "tokens": Option(default=1, convert=integer(1)),
    "noise": Option(default=0.0, convert=number()),
    "beta": Option(default=1.0, convert=number(positive=True),
                   help="inverse temperature of the softmax link"),
    "teacher": Option(default="tied", convert=choice("tied", "direct"), help="the planted S*"),
    "teacher_rank": Option(default=None, convert=integer(1, optional=True),
                           help="r* of a tied teacher [d / 2]"),
    "centered": Option(default=True, convert=flag, help="remove the teacher's mean Tr(S*)/d"),
    "init": Option(default="gaussian", convert=choice("gaussian", "random", "zero"),
                   help="theta0: i.i.d. N(0, 1), the plugin's random_point, or 0"),
    "output_scale": Option(default="1/sqrt(rd)", convert=scale_value,
                           help="S = output_scale * phi(theta)"),
    "lr": Option(default=0.1, convert=number(positive=True)),
    "lr_exponent": Option(default=0.0, convert=number(), help="eta = lr * d^(-lr_exponent)"),
    "batch_size": Option(default=4, convert=integer(1), help="fresh samples per step"),
    "horizon": Option(default=1.0, convert=number(positive=True),
                      help="samples, in units of d^2 log d"),
    "threshold": Option(default=0.5, convert=number(open_unit=True),
                        help="weak recovery: |cosine| >= threshold"),
    "seed": _seed("seed of the teacher, the start and the samples")}, dense=False,
    renamed={"scale": "output_scale", "batch": "batch_size"})
def online_sgd_query(param: Parameterization, output_scale: Any, batch_size: int,
                     **options: Any) -> Any:
    """Online SGD on attention-indexed data to weak recovery, n up to horizon * d^2 log d
    (paramgeo online-sgd)."""
    from ..cli._online import online_summary, run_online

    return online_summary(param, run_online(param, scale=output_scale, batch=batch_size,
                                            **options))


@register_query("llc", {
    "loss": Option(default="linear-map", convert=choice("linear-map", "squared", "quadratic",
                                                        "logistic", "exponential", "regression")),
    "data": Option(default=REQUIRED, convert=path(),
                   help="an .npz file with the loss's arrays (and theta_star)", path=True),
    "minimum": Option(default=None, convert=path(optional=True),
                      help="a .npy file holding the local minimum w* [theta_star of data]",
                      path=True),
    "nbeta": Option(default=None, convert=number(positive=True, optional=True),
                    help="n beta [n / log n]"),
    "gamma": Option(default=1.0, convert=number(positive=True)),
    "lr": Option(default=None, convert=number(positive=True, optional=True),
                 help="Langevin step size [automatic]"),
    "lr_scale": Option(default=0.05, convert=number(positive=True),
                       help="the automatic step as a multiple of 1 / the largest curvature"),
    "sampler": Option(default="mala", convert=choice("mala", "sgld")),
    "chains": Option(default=None, convert=integer(1, optional=True),
                     help="chains per temperature [32 where they run batched, else 4]"),
    "steps": Option(default=None, convert=integer(4, optional=True),
                    help="kept steps per chain [1000 where the chains run batched, else 2000]"),
    "burn": Option(default=None, convert=integer(0, optional=True),
                   help="burn-in steps per chain [1000 where the chains run batched, else 1500]"),
    "bias_check": Option(default=True, convert=flag,
                         help="also run the chains at 4 gamma (the bias check)"),
    "truth_zero": Option(default=False, convert=flag,
                         help="record the exact value at the true parameter 0"),
    "seed": _seed("seed of the chains")}, dense=False,
    renamed={"at": "minimum", "step": "lr", "step_scale": "lr_scale", "draws": "steps"})
def llc_query(param: Parameterization, loss: str, data: str, minimum: Optional[str],
              nbeta: Optional[float], gamma: float, lr: Optional[float], lr_scale: float,
              sampler: str, chains: Optional[int], steps: Optional[int], burn: Optional[int],
              bias_check: bool, truth_zero: bool, seed: int) -> Any:
    """The local learning coefficient by localized Langevin sampling (the slope over the
    default temperatures), with the exact value where known (paramgeo llc estimate)."""
    from ..cli._common import load_point
    from ..cli._flow import load_data
    import numpy as np

    from ..cli._llc import llc_estimate

    result, exact = llc_estimate(
        param, loss, load_data(data), data,
        None if minimum is None else load_point(param, minimum, 0),
        np.zeros(param.n) if truth_zero else None, nbeta=nbeta, gamma=gamma,
        step="auto" if lr is None else lr, step_scale=lr_scale, sampler=sampler, chains=chains,
        draws=steps, burn=burn, bias_check=bias_check, seed=seed)
    out = result.to_dict()
    out["exact"] = None if exact is None else exact.lam
    return out


def get_query(name: str) -> Query:
    """The registered query ``name``; ParamgeoError listing the available ones otherwise."""
    if name not in QUERIES:
        raise ParamgeoError(f"unknown query {name!r}; available: {', '.join(sorted(QUERIES))}")
    return QUERIES[name]
