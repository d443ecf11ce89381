"""The local learning coefficient (LLC) estimated by localized Langevin sampling.

For a loss L_n (an average negative log-likelihood of n samples) and a local minimum w* of it,
the localized, tempered posterior at inverse temperature beta is

    p_beta(w) ~ exp(-n beta L_n(w) - gamma / 2 |w - w*|^2),

and Watanabe's expansion E_beta[n L_n] = n L_n(w0) + lambda / beta + O_p(sqrt(lambda / beta))
(Watanabe 2013, "A widely applicable Bayesian information criterion", JMLR 14, Theorem 4) gives
lambda as the slope of ``E_beta[L_n] - L_n(w*)`` against 1 / (n beta) over two temperatures or
more, or ``lambda_1 = n beta (E_beta[L_n] - L_n(w*))`` at one (Lau, Furman, Wang, Murfet, Wei
2023, "The local learning coefficient: a singularity-aware complexity measure", Definition 1).
The expectations are sampled by MALA (Roberts and Tweedie 1996) or SGLD (Welling and Teh 2011):

    w_{t+1} = w_t - (eps / 2) (n beta grad L_n(w_t) + gamma (w_t - w*)) + sqrt(eps) xi_t,

all chains of all temperatures advanced together as one array. The derivation of both
estimators, the error bars (``se`` from the effective sample size, ``se_data`` by the
infinitesimal jackknife, ``se_bias`` from the bias check at 4 gamma) and what each covers, and
the automatic step are in docs/learning-coefficients.md; data, minibatches (with the loss and
gradient control variates), SGLD's burn-in at ``burn_step`` times the step, float32 chains of
framework models, the pre-check and the weight-refined LLC of one block in
docs/learning-coefficients-data.md.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Sequence, Union

import numpy as np

from ..errors import ParamgeoError
from ..io.files import save_figure
from ..results import Result
from ..io.progress import shows_progress
from .data import batch_picker, control_variates, make_batches
from .diagnostics import (chain_notes, data_set_se, effective_sample_size, localization_check,
                          mixing_check, slope_weights)
from ._sampler import auto_step_size, sample_chains

if TYPE_CHECKING:
    from os import PathLike

    from numpy.typing import ArrayLike, NDArray

    from ..losses.predictor import Loss
    from ..contract.parameterization import Parameterization


class LLCWarning(UserWarning):
    """A chain of the LLC estimator drifted, blew up or did not mix (the estimate is doubtful)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class LLCEstimate(Result):
    """The local learning coefficient lambda_hat with its error bars and diagnostics.

    lambda_hat is the least-squares slope of ``E_k[L_n] - L_n(w*)`` against 1 / (n beta_k) over
    n beta_k = t_k n beta, or ``n beta (E[L_n] - L_n(w*))`` at one temperature.

    Attributes:
        llc: lambda_hat.
        se: its Monte Carlo standard error (per temperature sqrt(var / ESS), through the
            slope's weights).
        ess: the smallest effective sample size over the temperatures.
        rhat: the largest split R-hat over the temperatures.
        chain_llc: the estimate of each chain (chain j at every temperature).
        n: the number of samples of L_n.
        nbeta: n beta, the base inverse temperature times n.
        gamma: the localization strength.
        step: the median step eps at the base temperature.
        chains: chains per temperature.
        draws: kept draws per chain (those made before a Ctrl-C).
        burn: burn-in steps per chain.
        sampler: "mala" or "sgld".
        seed: the seed of the run.
        loss_star: L_n(w*).
        seconds: the wall time of the run.
        warnings: what the diagnostics found (drift, blow-up, poor mixing, the pre-check).
        temperatures: the multipliers t_k of n beta.
        levels: per temperature: n beta_k, lambda_k = n beta_k (E_k[L_n] - L_n(w*)), its s.e.,
            effective sample size, split R-hat and step.
        traces: n beta_k (L_n(w_t) - L_n(w*)), shape (temperatures, chains, burn + draws),
            burn-in first.
        interrupted: Ctrl-C stopped the run after the burn-in.
        se_data: the data-set standard error (infinitesimal jackknife over samples,
            :func:`data_set_se`; nan where the loss has no per-sample features).
        se_total: sqrt(se^2 + se_data^2 + se_bias^2) over the parts that are not nan.
        llc_check: the same estimate at the localization gamma_check (nan without the check).
        gamma_check: BIAS_CHECK gamma, the localization of the bias check.
        se_bias: |llc - llc_check|, the scale of the estimator's finite-n bias.
        curvature: the pre-check (:func:`localization_check`): n beta times the largest and
            smallest curvature of L_n at w*, the quadratic prediction and the suggested gamma.
        batches: the number of minibatches (1: the full loss at every step).
        block: the blocks the chains moved (None: all; else the weight-refined LLC).
    """

    llc: float
    se: float
    ess: float
    rhat: float
    chain_llc: tuple
    n: int
    nbeta: float
    gamma: float
    step: float
    chains: int
    draws: int
    burn: int
    sampler: str
    seed: int
    loss_star: float
    seconds: float
    warnings: tuple
    temperatures: tuple
    levels: tuple
    traces: np.ndarray = dataclasses.field(repr=False)
    interrupted: bool = False
    se_data: float = math.nan
    se_total: float = math.nan
    llc_check: float = math.nan
    gamma_check: float = math.nan
    se_bias: float = math.nan
    curvature: dict = dataclasses.field(default_factory=dict)
    batches: int = 1
    block: Optional[tuple] = None

    def to_dict(self, traces: bool = False) -> dict[str, Any]:
        out = super().to_dict()
        if not traces:
            out.pop("traces")
        return out

    def __str__(self):
        kind = ("slope over n beta = " + ", ".join(f"{lv['nbeta']:.4g}" for lv in self.levels)
                if len(self.levels) > 1 else f"n beta = {self.nbeta:.5g}")
        cover = (f"s.e. of the sampler {self.se:.2g} and of the data set {self.se_data:.2g}"
                 if math.isfinite(self.se_data) else "s.e. of the sampler (no data-set part "
                 "for this loss)")
        if math.isfinite(self.se_bias):
            cover += (f", bias check {self.se_bias:.2g} (estimate {self.llc_check:.4g} at "
                      f"gamma = {self.gamma_check:g})")
        lines = [f"LLC estimate {self.llc:.4g} +- {self.se_total:.2g} ({cover}; {kind}; "
                 f"{self.chains} chains x {self.draws} draws, smallest ESS {self.ess:.0f}, "
                 f"largest R-hat {self.rhat:.3f})",
                 f"  per chain: {', '.join(f'{c:.4g}' for c in self.chain_llc)}"]
        if len(self.levels) > 1:
            lines += [f"  at n beta = {lv['nbeta']:.5g}: n beta (E[L_n] - L_n(w*)) = "
                      f"{lv['llc']:.4g} +- {lv['se']:.2g} (ESS {lv['ess']:.0f}, R-hat "
                      f"{lv['rhat']:.3f}, step {lv['step']:.3g})" for lv in self.levels]
        lines.append(f"  n = {self.n}, gamma = {self.gamma:g}, step {self.step:.3g} at n beta = "
                     f"{self.nbeta:.5g} ({self.sampler}"
                     + (f", {self.batches} minibatches" if self.batches > 1 else "")
                     + f"), burn-in {self.burn}, seed {self.seed}, {self.seconds:.2f} s"
                     + (f", blocks {', '.join(self.block)} only" if self.block else ""))
        c = self.curvature
        if c:
            lines.append(f"  before sampling: n beta h from {c['bottom']:.3g} to {c['top']:.3g} "
                         f"against gamma = {c['gamma']:g}; {c['curved']:.0f} curved and "
                         f"{c['flat']:.0f} flat directions; quadratic prediction "
                         f"{c['quadratic']:.4g} of {c['unlocalized']:.4g}")
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def plot(self, path: Optional[str | PathLike[str]] = None, ax: Any = None) -> Any:
        """Loss traces n beta_k (L_n(w_t) - L_n(w*)) of every chain with their running means
        after burn-in, one panel per temperature (on ``ax``: the first temperature only),
        written to ``path`` (.png, .svg, .pdf). Returns the matplotlib figure."""
        import matplotlib

        from ..io.files import check_plot_path

        if path is not None:  # a bad path is one clear error, before any drawing
            path = check_plot_path(path)
        if ax is None:
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            fig, axes = plt.subplots(1, len(self.levels), figsize=(6 * len(self.levels), 3.6),
                                     squeeze=False)
            axes = list(axes[0])
        else:
            fig, axes = ax.figure, [ax]
        steps = np.arange(self.traces.shape[2])
        for ax_, level, traces in zip(axes, self.levels, self.traces):
            for k, trace in enumerate(traces):
                line, = ax_.plot(steps, trace, lw=0.4, alpha=0.5)
                post = trace[self.burn:]
                ax_.plot(steps[self.burn:], np.cumsum(post) / np.arange(1, post.size + 1),
                         color=line.get_color(), lw=1.5, label=f"chain {k} running mean")
            ax_.axvline(self.burn, color="0.5", ls=":", lw=1)
            lo, hi = level["llc"] - 2 * level["se"], level["llc"] + 2 * level["se"]
            ax_.axhspan(lo, hi, color="k", alpha=0.12,
                        label=f"n beta (E[L_n] - L_n(w*)) {level['llc']:.3g} +- 2 s.e.")
            ax_.set_title(f"n beta = {level['nbeta']:.4g}", fontsize=9)
            ax_.set_xlabel("step (burn-in left of the dotted line)")
            ax_.set_ylabel("n beta (L_n(w) - L_n(w*))")
            ax_.legend(fontsize=7, loc="upper right")
        if len(self.levels) > 1:
            fig.suptitle(f"LLC estimate (slope) {self.llc:.3g} +- {self.se:.2g}", fontsize=10)
        if path is not None:
            fig.tight_layout()
            save_figure(fig, path)
        return fig


SAMPLERS = ("mala", "sgld")

#: states kept per chain after burn-in for the data-set error bar, and the most numbers kept
KEPT_STATES, STATE_BUDGET = 250, 8_000_000

#: the default multipliers t_k of n beta (see the module docstring)
TEMPERATURES = (0.5, 2.0)

#: (chains, burn, draws) by default, where the chains run one by one and batched
DEFAULT_RUNS = {False: (4, 1500, 2000), True: (32, 1000, 1000)}

#: MALA's acceptance below which a chain's step did not adapt (the target is 0.574); the
#: estimator warns when over a quarter of the chains, or one below 5%, accept less
LOW_ACCEPTANCE = 0.2

#: the arithmetic of the chains' losses and gradients (see :func:`estimate_llc`)
PRECISIONS = ("auto", "single", "double")

#: SGLD's burn-in step as a multiple of its sampling step (see :func:`estimate_llc`)
SGLD_BURN_STEP = 8.0

#: the bias check's localization, as a multiple of gamma (see the module docstring)
BIAS_CHECK = 4.0


def _setup(param, batches, theta_star, n, nbeta, gamma):
    value, _ = batches.full()
    _, grad = batches.value_grads()[0]  # the step and the curvature from batch 0
    if theta_star is None:
        if not hasattr(param, "theta0"):
            raise ParamgeoError(f"estimate_llc: give the local minimum theta_star ({param.name} "
                                "has no parameters of its own)")
        theta_star = param.theta0
    w_star = param.as_theta(theta_star).copy()
    n = batches.n if n is None else n
    if n is None:
        raise ParamgeoError(f"estimate_llc: {type(batches.losses[0]).__name__} is not built "
                            "from samples; give the number of samples n")
    n = int(n)
    if n < 2:
        raise ParamgeoError(f"estimate_llc: n={n!r} samples; n / log n needs n >= 2")
    nbeta = float(n / math.log(n)) if nbeta is None else nbeta
    for name, v in (("nbeta", nbeta), ("gamma", gamma)):
        if isinstance(v, bool) or not (isinstance(v, (int, float)) and math.isfinite(v)
                                       and v > 0):
            raise ParamgeoError(f"estimate_llc: {name}={v!r} must be a positive number")
    L_star = value(w_star)
    if not math.isfinite(L_star):
        raise ParamgeoError(f"estimate_llc: the loss at theta_star is {L_star}; give a point "
                            "where the loss is finite")

    return value, grad, w_star, n, float(nbeta), float(L_star)


def _potential_gradient(grad, w_star, nbeta, gamma, mask=None):
    """grad U for U(w) = n beta L_n(w) + gamma |w - w*|^2 / 2 (zero off ``mask``)."""

    def grad_U(w):
        g = nbeta * grad(w) + gamma * (w - w_star)
        return g if mask is None else g * mask

    return grad_U


def auto_step(param: Parameterization, loss: Union[str, Loss],
              theta_star: Optional[ArrayLike] = None, n: Optional[int] = None,
              nbeta: Optional[float] = None, gamma: float = 1.0, step_scale: float = 0.05,
              seed: int = 0, data: Union[tuple[ArrayLike, ArrayLike], Iterable, None] = None,
              batch_size: Optional[int] = None,
              block: Union[str, Sequence[str], None] = None) -> float:
    """The automatic SGLD step eps = step_scale / h of :func:`estimate_llc` (h the largest
    curvature of the potential n beta L_n + gamma |w - w*|^2 / 2 seen near w*; with
    minibatches, of the first batch's loss)."""
    batches = make_batches(param, loss, data, batch_size, seed)
    _, grad, w_star, _, nbeta, _ = _setup(param, batches, theta_star, n, nbeta, gamma)
    mask = block_mask(param, block)
    grad_U = _potential_gradient(grad, w_star, nbeta, gamma, mask)
    return auto_step_size(grad_U, w_star, step_scale,
                          np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0]),
                          mask=mask)


def block_mask(param: Parameterization,
               block: Union[None, str, Sequence[str]]) -> Optional[NDArray[np.bool_]]:
    """The 0/1 vector of the coordinates of the named blocks of ``param.spec`` (a name or a
    list of names; None: every coordinate, returned as None)."""
    if block is None:
        return None
    names = [block] if isinstance(block, str) else list(block)
    blocks = param.spec.slices
    unknown = [b for b in names if b not in blocks]
    if not names or unknown:
        raise ParamgeoError(f"estimate_llc: block={block!r}: {param.name} has no block "
                            f"{', '.join(map(repr, unknown)) or '(none given)'}; its blocks are "
                            f"{', '.join(map(repr, blocks))}")
    mask = np.zeros(param.n)
    mask[np.concatenate([np.arange(param.n)[blocks[b]] for b in names])] = 1.0
    return mask


@shows_progress("llc estimate")  # a frame: its warnings name the caller with stacklevel 3
def estimate_llc(param: Parameterization, loss: Union[str, Loss],
                 theta_star: Optional[ArrayLike] = None, n: Optional[int] = None,
                 nbeta: Optional[float] = None, gamma: float = 1.0,
                 step: Union[float, str] = "auto", step_scale: float = 0.05,
                 chains: Optional[int] = None, draws: Optional[int] = None,
                 burn: Optional[int] = None, sampler: Optional[str] = None, seed: int = 0,
                 temperatures: Sequence[float] = TEMPERATURES, bias_check: bool = True,
                 progress: Union[bool, str, Callable[[int, int], None], None] = "auto",
                 data: Union[tuple[ArrayLike, ArrayLike], Iterable, None] = None,
                 batch_size: Optional[int] = None, block: Union[str, Sequence[str], None] = None,
                 precheck: bool = True, burn_step: float = SGLD_BURN_STEP,
                 precision: str = "auto") -> LLCEstimate:
    """The local learning coefficient of ``loss`` through ``param`` at a local minimum.

    ``chains`` localized chains of ``burn + draws`` steps sample ``p_k(w) ~ exp(-n beta_k
    L_n(w) - gamma / 2 |w - w*|^2)`` at each n beta_k = t_k n beta, t_k in ``temperatures``;
    lambda_hat is the least-squares slope of ``E_k[L_n] - L_n(w*)`` against 1 / (n beta_k)
    (Watanabe 2013, Theorem 4), or ``n beta (E[L_n] - L_n(w*))`` at one temperature (Lau et
    al. 2023). All chains advance together, one batched loss and gradient per step. Details:
    docs/learning-coefficients.md; data and minibatches: docs/learning-coefficients-data.md.

    Args:
        param: the parameterization phi: R^n -> R^m (a model from :func:`paramgeo.from_torch`
            or :func:`paramgeo.from_jax` for a loss on ``data``).
        loss: a :class:`paramgeo.losses.Loss` on predictors (its own data), or "mse" (the
            Gaussian negative log-likelihood (1 / 2n) sum_i |y_i - f(x_i)|^2) or
            "cross-entropy" (-(1/n) sum_i log softmax(f(x_i))_{y_i}) with ``data``.
        theta_star: w*, shape (n,); default the model's own parameters ``param.theta0``.
        n: the number of samples; default ``loss.N``.
        nbeta: n beta; default n / log n.
        gamma: the localization strength (> 0).
        step: the step eps at the base temperature (eps / t_k at t_k), or "auto": step_scale
            over the largest curvature of each temperature's potential.
        step_scale: the automatic step's fraction of the stability limit, in (0, 2).
        chains: chains per temperature; default 32 where the plugin declares ``batched_vjp``
            (32 x (1000 + 1000) steps), else 4 (x (1500 + 2000)).
        draws: kept steps per chain (>= 4).
        burn: burn-in steps per chain (>= 0); MALA adapts its step there towards acceptance
            0.574 (Roberts and Rosenthal 1998).
        sampler: "mala" (Metropolis-adjusted Langevin, no discretization bias; the default on
            the full batch) or "sgld" (required with several minibatches).
        seed: makes the run repeatable.
        temperatures: distinct positive multipliers t_k of n beta.
        bias_check: also run every chain at 4 gamma with the same random numbers, for
            ``se_bias`` (about 1.3 times the time when batched).
        progress: a callable progress(done, total) called as steps finish; True, False,
            or "auto" (a display with elapsed time and ETA in an interactive session;
            :mod:`paramgeo.io.progress`).
        data: (X, Y) arrays or an iterable of (x, y) batches (a torch DataLoader, read once),
            for a loss given by name; f is ``param.on_inputs(x)`` on each batch.
        batch_size: minibatches of this size (minibatch SGLD with a control variate).
        block: a block name of ``param.spec`` (or a list): only those coordinates move, the
            weight-refined LLC (Wang et al. 2024).
        precheck: before sampling, compare the curvature of n beta L_n at w* with gamma
            (:func:`localization_check`) and warn when the estimate will be localization-bound.
        burn_step: SGLD's burn-in runs at this multiple of the step (the least curved
            directions relax that much faster; Welling and Teh 2011's step bias stays that of
            the draws' step); 1: none.
        precision: the arithmetic of the chains' model evaluations: "single" (float32),
            "double", or "auto" (float32 for torch models on ``data``, float64 otherwise);
            states, steps, the pre-check and the automatic step stay float64.

    Returns:
        The :class:`LLCEstimate` (``llc``, ``se``, ``se_data``, ``se_bias``, ``se_total``,
        traces and diagnostics). Chains that drift, blow up or disagree (R-hat > 1.1) warn
        with :class:`LLCWarning` and are listed in ``warnings``; Ctrl-C after the burn-in keeps
        the draws made so far (``interrupted``).

    Raises:
        ParamgeoError: an unknown sampler, bad chains/draws/burn/step/temperatures, MALA with
            minibatches, or every chain blew up (lower the step or raise gamma).
        ShapeError: theta_star or the data do not fit the model.

    Examples:
        >>> import numpy as np, paramgeo
        >>> from paramgeo.losses.predictor import Regression
        >>> rng = np.random.default_rng(0)
        >>> X = rng.standard_normal((1000, 2))
        >>> loss = Regression(X, X @ [[1.0], [2.0]] + rng.standard_normal((1000, 1)))
        >>> p = paramgeo.get("deep-linear", widths=(2, 1, 1))   # y = w2 (W1 x): 3 weights
        >>> b = np.linalg.lstsq(X, loss.Y, rcond=None)[0].ravel()
        >>> est = paramgeo.estimate_llc(p, loss, np.append(b, 1.0), seed=0)
        >>> bool(abs(est.llc - 1.0) < 0.1)       # regular: rank J / 2 = 2 / 2
        True
    """
    if sampler is not None and sampler not in SAMPLERS:
        raise ParamgeoError(f"estimate_llc: unknown sampler {sampler!r}; choose one of "
                            f"{', '.join(SAMPLERS)}")
    for name, value_, low in (("chains", chains, 1), ("draws", draws, 4), ("burn", burn, 0)):
        if value_ is None:
            continue
        if (isinstance(value_, bool) or not isinstance(value_, (int, float, np.integer))
                or int(value_) != value_ or value_ < low):
            raise ParamgeoError(f"estimate_llc: {name}={value_!r} must be an integer >= {low}")
    if not isinstance(bias_check, (bool, np.bool_)):
        raise ParamgeoError(f"estimate_llc: bias_check={bias_check!r} must be True or False")
    temps = _temperatures(temperatures)
    batches = make_batches(param, loss, data, batch_size, seed)
    if sampler is None:
        sampler = "mala" if len(batches) == 1 else "sgld"
    elif sampler == "mala" and len(batches) > 1:
        raise ParamgeoError("estimate_llc: MALA's Metropolis test needs the exact loss, not a "
                            "minibatch; give sampler='sgld' with minibatches, or the full "
                            "batch (batch_size=None)")
    _, grad, w_star, n, nbeta, L_star = _setup(param, batches, theta_star, n, nbeta, gamma)
    mask = block_mask(param, block)
    if step == "auto":
        if isinstance(step_scale, bool) or not (isinstance(step_scale, (int, float))
                                                and 0 < step_scale < 2):
            raise ParamgeoError(f"estimate_llc: step_scale={step_scale!r} must lie in (0, 2)")
    elif isinstance(step, bool) or not (isinstance(step, (int, float)) and math.isfinite(step)
                                        and step > 0):
        raise ParamgeoError(f"estimate_llc: step={step!r} must be a positive number or 'auto'")
    if isinstance(burn_step, bool) or not (isinstance(burn_step, (int, float))
                                           and 1 <= burn_step <= 20):
        raise ParamgeoError(f"estimate_llc: burn_step={burn_step!r} must be a number in [1, 20] "
                            "(the SGLD burn-in's step as a multiple of the step; 1: none)")
    if precision not in PRECISIONS:
        raise ParamgeoError(f"estimate_llc: precision={precision!r}; choose one of "
                            f"{', '.join(map(repr, PRECISIONS))}")
    single = batches.single_precision and (precision == "single" or (precision == "auto"
                                                                       and data is not None))
    if precision == "single" and not single:
        raise ParamgeoError(f"estimate_llc: precision='single' needs a model that computes in "
                            f"float32 (a torch model); {param.name} computes in float64: give "
                            "precision='double' or 'auto'")
    fns = batches.batched()  # float64: the pre-check's differences of gradients
    chain_fns = batches.batched(single=True) if single else fns
    chains, burn, draws = (int(given) if given is not None else default for given, default
                           in zip((chains, burn, draws), DEFAULT_RUNS[fns[0].batched]))
    started = time.perf_counter()
    seeds = np.random.SeedSequence(seed).spawn(len(temps) + 2)  # steps, chains, pre-check
    check, pre_notes = ({}, []) if not precheck else localization_check(
        fns[0], w_star, nbeta, gamma, temps, np.random.default_rng(seeds[-1]), mask)
    for note in pre_notes:  # before sampling: the user may stop the run and follow the advice
        warnings.warn(f"LLC estimator (before sampling): {note}", LLCWarning, stacklevel=3)
    eps = []
    with np.errstate(over="ignore", invalid="ignore"):  # a blow-up is reported, not printed
        for i, t in enumerate(temps):
            grad_U = _potential_gradient(grad, w_star, t * nbeta, gamma, mask)
            eps.append(auto_step_size(grad_U, w_star, step_scale, np.random.default_rng(seeds[i]),
                                      mask=mask)
                       if step == "auto" else float(step) / t)
    if check:
        mixing = mixing_check(check, [e * burn_step for e in eps] if sampler == "sgld"
                              else eps, temps, nbeta, gamma, burn, sampler)
        for note in mixing:
            warnings.warn(f"LLC estimator (before sampling): {note}", LLCWarning, stacklevel=3)
        pre_notes += mixing
    # row (g * T + i) * chains + k: chain k at temperature t_i and localization gammas[g]
    gammas = (float(gamma),) + ((BIAS_CHECK * float(gamma),) if bias_check else ())
    rows = len(temps) * chains
    nbs = np.tile(np.repeat([t * nbeta for t in temps], chains), len(gammas))
    f_star = None  # the data-set error bar needs the full loss's per-sample features
    if len(batches) == 1:
        f_star = batches.losses[0].sample_features(
            np.asarray(batches.params[0].forward_flat(w_star), float)[None])
    keep = 0 if f_star is None else min(KEPT_STATES, STATE_BUDGET // (rows * w_star.size))
    shift = grad_shift = None
    if len(batches) > 1 or single:  # the chains' own reading of L_b(w*) and grad L_b(w*)
        shift, grad_shift = control_variates(chain_fns, batches.weights, w_star, L_star,
                                             STATE_BUDGET)
    rng = np.random.default_rng(seeds[len(temps)])
    run = sample_chains(chain_fns, sampler, w_star, nbs, np.tile(np.repeat(eps, chains),
                                                           len(gammas)),
                        np.repeat(gammas, rows), L_star, burn, draws,
                        rng, progress, keep if keep >= 20 else 0,
                        keep_rows=rows, groups=len(gammas),
                        pick=batch_picker(batches.weights, rng), shift=shift, mask=mask,
                        burn_step=burn_step, grad_shift=grad_shift,
                        normal=batches.params[0].backend.normals(int(rng.integers(2**63)))
                        if single else None)
    done = run["traces"].shape[1] - burn
    notes = []
    if run["interrupted"]:
        notes.append(f"interrupted (Ctrl-C) after {done} of {draws} draws; the estimate uses "
                     f"the draws made so far (its s.e. counts them); run again with draws="
                     f"{draws} uninterrupted for the planned precision")
    groups = [_group_estimate(run, g, temps, nbeta, chains, burn, sampler, gammas)
              for g in range(len(gammas))]
    (llc, se, levels, good, weights), main_notes = groups[0]
    if not good:
        raise ParamgeoError("estimate_llc: every chain blew up (non-finite loss); lower the "
                            f"step (step_scale was {step_scale:g}, step {step}) or raise gamma "
                            f"(was {gamma:g})")
    notes += main_notes
    llc_check = se_bias = math.nan
    if bias_check:
        (llc_check, _, _, good_check, _), check_notes = groups[1]
        notes += check_notes
        se_bias = abs(llc - llc_check) if good_check else math.nan
    traces = run["traces"][:rows].reshape(len(temps), chains, -1)
    chain_llc = tuple(float(c) for c in sum(w * lv["chain_llc"]
                                            for w, lv in zip(weights, levels)))
    se_data = math.nan
    kept = run["states"].shape[1]
    # the kept states and their losses, temperatures x good chains x kept
    if kept >= 2 and f_star is not None:
        states = run["states"].reshape(len(temps), chains, kept, -1)[:, good]
        losses = (run["traces"][:rows, run["kept_at"]] / nbs[:rows, None] + L_star).reshape(
            len(temps), chains, kept)[:, good]
        se_data = data_set_se(batches.params[0], batches.losses[0], states, losses,
                              [lv["nbeta"] for lv in levels], weights, f_star[0])
    for note in notes:
        warnings.warn(f"LLC estimator: {note}", LLCWarning, stacklevel=3)
    public = tuple({k: (float(v) if k != "temperature" else v) for k, v in lv.items()
                    if k != "chain_llc"} for lv in levels)
    parts = [v for v in (se, se_data, se_bias) if math.isfinite(v)]
    return LLCEstimate(
        llc=llc, se=se, ess=min(lv["ess"] for lv in levels),
        rhat=max(lv["rhat"] for lv in levels), chain_llc=chain_llc, n=n, nbeta=nbeta,
        gamma=float(gamma),
        step=float(np.median([lv["step"] * lv["temperature"] for lv in levels])),
        chains=chains, draws=done, burn=burn, sampler=sampler, seed=int(seed), loss_star=L_star,
        seconds=time.perf_counter() - started, warnings=tuple(pre_notes + notes),
        temperatures=temps, levels=public, traces=traces, interrupted=run["interrupted"],
        se_data=se_data, se_total=math.sqrt(sum(v * v for v in parts)), llc_check=llc_check,
        gamma_check=gammas[-1] if bias_check else math.nan, se_bias=se_bias, curvature=check,
        batches=len(batches),
        block=None if block is None else tuple([block] if isinstance(block, str) else block))


def _group_estimate(run, g, temps, nbeta, chains, burn, sampler, gammas):
    """The slope estimate of the rows of localization gammas[g]: ((llc, se, levels, good
    chains, slope weights), diagnostic notes)."""
    T = len(temps)
    where = "" if g == 0 else f"with gamma = {gammas[g]:g} (the bias check): "
    notes, levels = [], []
    for i, t in enumerate(temps):
        label = where + (f"at n beta = {t * nbeta:.4g}: " if T > 1 else "")
        rows = slice((g * T + i) * chains, (g * T + i + 1) * chains)
        notes += [label + f"chain {k} blew up at step {at} (loss not finite); lower the step "
                  f"(now {run['step'][rows][k]:.3g}) or raise gamma"
                  for k, at in enumerate(run["blew_up"][rows]) if at >= 0]
        accepted = run["accepted"][rows]
        low = accepted < LOW_ACCEPTANCE
        if (sampler == "mala" and run["traces"].shape[1] > burn
                and (low.mean() > 0.25 or accepted.min() < 0.05)):
            notes.append(f"{label}MALA accepted under {LOW_ACCEPTANCE:.0%} of proposals in "
                         f"{low.sum()} of {len(accepted)} chains (lowest {accepted.min():.0%}); "
                         "run a longer burn-in so the step can adapt")
        levels.append(dict(temperature=t, nbeta=t * nbeta,
                           step=float(np.median(run["step"][rows]))))
    block = slice(g * T * chains, (g + 1) * T * chains)
    traces = run["traces"][block].reshape(T, chains, -1)
    # chains (by index k) that stayed finite at every temperature
    good = [int(k) for k in np.flatnonzero((run["blew_up"][block].reshape(T, chains) < 0)
                                           .all(axis=0))]
    weights = slope_weights([lv["nbeta"] for lv in levels])
    if not good:
        return (math.nan, math.nan, levels, good, weights), notes
    for i, level in enumerate(levels):
        post = traces[i][good, burn:]
        if post.size > 1 and np.ptp(post) == 0:  # a frozen chain estimates nothing
            notes.append(f"{where}at n beta = {level['nbeta']:.4g}: the chains did not move "
                         f"(every draw has the same loss): the step {level['step']:.3g} is "
                         "too small to change theta in float64; give a larger step or 'auto'")
        ess, rhat = effective_sample_size(post)
        var = float(post.var(ddof=1)) if post.size > 1 else 0.0
        level.update(llc=float(post.mean()), se=math.sqrt(var / ess) if ess > 0 else math.nan,
                     ess=ess, rhat=rhat, chain_llc=post.mean(axis=1))
        label = where + (f"at n beta = {level['nbeta']:.4g}: " if T > 1 else "")
        notes += [label + note for note in chain_notes(post, good, level["llc"], level["se"],
                                                     rhat)]
    llc = float(sum(w * lv["llc"] for w, lv in zip(weights, levels)))
    se = math.sqrt(sum((w * lv["se"]) ** 2 for w, lv in zip(weights, levels)))
    return (llc, se, levels, good, weights), notes


def _temperatures(temperatures):
    try:
        temps = tuple(float(t) for t in temperatures)
    except (TypeError, ValueError):
        temps = ()
    if (not temps or not all(math.isfinite(t) and t > 0 for t in temps)
            or len(set(temps)) != len(temps)):
        raise ParamgeoError(f"estimate_llc: temperatures={temperatures!r} must be distinct "
                            "positive numbers (multipliers of n beta), e.g. (0.5, 2)")
    return temps
