"""The step-size sweep of the LLC estimator: :func:`estimate_llc` over a range of Langevin
steps, where a plateau of the estimates is the regime to trust (a drift with the step is
discretization bias or poor mixing)."""

from __future__ import annotations

import dataclasses
import warnings
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Union

from ..io.files import save_figure
from ..results import Result
from .estimate import LLCWarning, auto_step, estimate_llc

if TYPE_CHECKING:
    from os import PathLike

    from numpy.typing import ArrayLike

    from ..losses.predictor import Loss
    from ..contract.parameterization import Parameterization


@dataclasses.dataclass(frozen=True, kw_only=True)
class StepSweep(Result):
    """LLC estimates over a range of SGLD step sizes (:func:`step_sweep`): one row per step
    (step, llc, se, rhat, warnings). A plateau of estimates over steps is the regime to trust;
    a drift with the step is discretization bias or poor mixing."""

    steps: tuple
    estimates: tuple
    #: True when Ctrl-C stopped the sweep: ``estimates`` holds the steps finished (the last one
    #: possibly with fewer draws, its own ``interrupted`` set)
    interrupted: bool = False

    def rows(self) -> list[tuple[str, ...]]:
        return [(f"{e.step:.3g}", f"{e.llc:.4g}", f"{e.se:.2g}", f"{e.rhat:.3f}",
                 "; ".join(e.warnings) or "-") for e in self.estimates]

    def to_dict(self) -> dict[str, Any]:
        return {"steps": list(self.steps), "estimates": [e.to_dict() for e in self.estimates],
                "interrupted": self.interrupted}

    def __str__(self):
        head = ("step", "llc", "s.e.", "R-hat", "warnings")
        rows = [head] + self.rows()
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
                         for r in rows)

    def plot(self, path: Optional[str | PathLike[str]] = None, ax: Any = None) -> Any:
        """The estimates +- 2 s.e. against the step (log scale)."""
        import matplotlib

        from ..io.files import check_plot_path

        if path is not None:  # a bad path is one clear error, before any drawing
            path = check_plot_path(path)
        if ax is None:
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            fig, ax = plt.subplots(figsize=(5, 3.2))
        else:
            fig = ax.figure
        ax.errorbar([e.step for e in self.estimates], [e.llc for e in self.estimates],
                    yerr=[2 * e.se for e in self.estimates], marker="o", capsize=3)
        ax.set_xscale("log")
        ax.set_xlabel("SGLD step eps")
        ax.set_ylabel("LLC estimate +- 2 s.e.")
        if path is not None:
            fig.tight_layout()
            save_figure(fig, path)
        return fig


def step_sweep(param: Parameterization, loss: Union[str, Loss], theta_star: Optional[ArrayLike],
               steps: Optional[Sequence[float]] = None,
               progress: Optional[Callable[[int, int], None]] = None, **options: Any) -> StepSweep:
    """:func:`estimate_llc` at each of several step sizes: where the estimate is stable.

    A plateau of lambda_hat over the step eps is the regime to trust; a drift with eps is
    discretization bias or poor mixing (docs/learning-coefficients.md).

    Args:
        param: the parameterization phi: R^n -> R^m.
        loss: as in :func:`estimate_llc`.
        theta_star: the local minimum w*, shape (n,); None: the model's own parameters.
        steps: the steps at the base temperature; default the automatic step times 1/8, 1/4,
            1/2, 1 and 2.
        progress: called as progress(done, total) over the chain steps of the whole sweep.
        **options: the other arguments of :func:`estimate_llc`, shared by every step.

    Returns:
        The :class:`StepSweep`: ``steps`` and one :class:`LLCEstimate` per step. Ctrl-C stops
        the sweep and returns the steps finished (``interrupted``); before the first step's
        burn-in ended it raises KeyboardInterrupt.

    Raises:
        ParamgeoError: as :func:`estimate_llc` does for its options.

    Examples:
        >>> import numpy as np, paramgeo
        >>> from paramgeo.llc import step_sweep
        >>> from paramgeo.losses.predictor import Regression
        >>> rng = np.random.default_rng(0)
        >>> X = rng.standard_normal((1000, 2))
        >>> loss = Regression(X, X @ [[1.0], [2.0]] + rng.standard_normal((1000, 1)))
        >>> b = np.linalg.lstsq(X, loss.Y, rcond=None)[0].ravel()
        >>> sweep = step_sweep(paramgeo.get("deep-linear", widths=(2, 1, 1)), loss,
        ...                    np.append(b, 1.0), steps=[1e-4, 2e-4], seed=0)
        >>> [bool(abs(e.llc - 1.0) < 0.1) for e in sweep.estimates]     # a plateau at 2 / 2
        [True, True]
    """
    if steps is None:
        keys = ("n", "nbeta", "gamma", "step_scale", "seed", "data", "batch_size", "block")
        auto = auto_step(param, loss, theta_star, **{k: options[k] for k in keys
                                                      if k in options})
        steps = [auto * f for f in (0.125, 0.25, 0.5, 1.0, 2.0)]
    out, interrupted = [], False
    for i, step in enumerate(steps):
        inner = None if progress is None else (
            lambda done, total, i=i: progress(i * total + done, len(steps) * total))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", LLCWarning)
                out.append(estimate_llc(param, loss, theta_star, step=float(step),
                                        progress=inner, **options))
        except KeyboardInterrupt:  # Ctrl-C before this step's burn-in ended
            if not out:
                raise
            interrupted = True
            break
        if out[-1].interrupted:  # Ctrl-C after the burn-in: this step's draws so far
            interrupted = True
            break
    return StepSweep(steps=tuple(float(s) for s in steps), estimates=tuple(out),
                     interrupted=interrupted)
