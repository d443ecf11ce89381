"""The step-size sweep of the LLC estimator: :func:`estimate_llc` over a range of Langevin
steps, where a plateau of the estimates is the regime to trust (a drift with the step is
discretization bias or poor mixing)."""

import dataclasses
import warnings

from ..io.files import save_figure
from ..results import Result
from .estimate import LLCWarning, auto_step, estimate_llc


@dataclasses.dataclass(frozen=True)
class StepSweep(Result):
    """LLC estimates over a range of SGLD step sizes (:func:`step_sweep`): one row per step
    (step, llc, se, rhat, warnings). A plateau of estimates over steps is the regime to trust;
    a drift with the step is discretization bias or poor mixing."""

    steps: tuple
    estimates: tuple
    #: True when Ctrl-C stopped the sweep: ``estimates`` holds the steps finished (the last one
    #: possibly with fewer draws, its own ``interrupted`` set)
    interrupted: bool = False

    def rows(self):
        return [(f"{e.step:.3g}", f"{e.llc:.4g}", f"{e.se:.2g}", f"{e.rhat:.3f}",
                 "; ".join(e.warnings) or "-") for e in self.estimates]

    def to_dict(self):
        return {"steps": list(self.steps), "estimates": [e.to_dict() for e in self.estimates],
                "interrupted": self.interrupted}

    def __str__(self):
        head = ("step", "llc", "s.e.", "R-hat", "warnings")
        rows = [head] + self.rows()
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
                         for r in rows)

    def plot(self, path=None, ax=None):
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


def step_sweep(param, loss, theta_star, steps=None, progress=None, **options):
    """:func:`estimate_llc` at each step of ``steps`` (the step at the base temperature;
    default: the automatic step times 1/8, 1/4, 1/2, 1, 2), the other ``options`` shared;
    returns a :class:`StepSweep`. ``progress(done, total)`` counts chain steps over the whole
    sweep. Ctrl-C stops the sweep at once and returns the steps finished (``interrupted``);
    before the first step's burn-in ended it raises KeyboardInterrupt."""
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
    return StepSweep(tuple(float(s) for s in steps), tuple(out), interrupted)
