"""Online (one-pass) SGD through any parameterization on attention-indexed data: a planted
teacher, fresh Gaussian samples every step, step sizes scaled with d, and order parameters
recorded at chosen times, with weak-recovery detection (:func:`online_sgd`).

The attention-indexed model (Boncoraglio, Troiani, Erba, Zdeborova 2025; Xu, Sagitova,
Zdeborova on its online-SGD dynamics): a sample is T token embeddings x_1..x_T in R^d with
i.i.d. N(0, 1) entries (the rows of X, T x d), its attention indices

    h_ab(S) = (x_a^T S x_b - delta_ab Tr S) / sqrt(d)          (T x T),

and its label y = g(h(S*)) + sigma xi for a planted teacher S* and an output (link) function g
applied to the indices (:data:`LINKS`). The student is S = scale * phi(theta) for a plugin phi
with d x d predictors: ``matrix`` (direct S), ``uut`` (tied S = W W^T / sqrt(r d) with
scale = 1/sqrt(r d)), ``uvt`` (untied S = U V^T / sqrt(r d)). T = 1 with the linear link is
the quadratic network y = (x^T S* x - Tr S*) / sqrt(d) (Maillard et al. 2024).

One step draws ``batch`` fresh samples and moves theta against the summed sample gradients,

    theta <- theta - eta sum_b J(theta)^T grad_S ell_b,    eta = lr * d^(-lr_exponent),
    ell = |g(h(S)) - y|_F^2 / 2,
    grad_S ell = scale (X^T E X - Tr(E) I) / sqrt(d),   E = dell/dh = (g(h) - y) * g'(h)

(softmax: E through the softmax Jacobian). Time is counted in samples per d^2: t = n / d^2,
the scale on which order parameters move when eta is scaled as in docs/online-sgd.md (direct
S: lr_exponent = 1; factored S with the 1/sqrt(r d) normalisation: lr_exponent = 0). A batch
of B fresh samples has the same high-d limit as B single steps while B << d^2 (the extra term
is O(B / d^2) of the noise).

Order parameters (:func:`order_parameters`), with S~ = S - (Tr S / d) I the traceless part:
mean Tr S / d, norm Tr(S S^T) / d, overlap Tr(S S*^T) / d, cosine
Tr(S~ S~*^T) / (|S~|_F |S~*|_F) (the informative overlap: the identity direction carries no
information on the structure of S*), and moments Tr(S^k) / d. Weak recovery is the first
sample count at which |cosine| reaches ``threshold`` (checked every ``check_every`` samples).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Union

import numpy as np

from ..errors import ParamgeoError, ShapeError
from ..linalg.numerics import as_rng
from ..results import Result, to_jsonable, title
from ..io.files import check_plot_path, save_figure
from ..dynamics.trajectory import _finish, _progress_callback, _pyplot_figure

if TYPE_CHECKING:
    from os import PathLike
    from pathlib import Path

    from numpy.typing import ArrayLike, NDArray

    from ..contract.parameterization import Parameterization


def _softmax(h, beta):
    z = beta * (h - h.max(axis=-1, keepdims=True))
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


#: output functions g of the indices: name -> (g(h, beta), vjp(h, g(h), G, beta) = G dg/dh).
#: linear: g = h (quadratic networks); quadratic: g = h^2 (even, information exponent 2);
#: tanh; relu: max(h, 0); abs: |h| (even, as in phase retrieval; sign(0) = 0); softmax: row-wise softmax(beta h) (attention).
LINKS = {
    "linear": (lambda h, b: h, lambda h, f, G, b: G),
    "quadratic": (lambda h, b: h * h, lambda h, f, G, b: 2.0 * h * G),
    "tanh": (lambda h, b: np.tanh(h), lambda h, f, G, b: (1.0 - f * f) * G),
    "relu": (lambda h, b: np.maximum(h, 0.0), lambda h, f, G, b: (h > 0) * G),
    "abs": (lambda h, b: np.abs(h), lambda h, f, G, b: np.sign(h) * G),
    "softmax": (lambda h, b: _softmax(h, b),
                lambda h, f, G, b: b * f * (G - np.sum(f * G, axis=-1, keepdims=True))),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class AttentionIndexed(Result):
    """The sample generator and loss of the attention-indexed model (module docstring):
    ``tokens`` T Gaussian embeddings in R^d, link ``link`` (a key of :data:`LINKS`), inverse
    temperature ``beta`` (softmax), label noise ``noise`` sigma."""

    d: int
    tokens: int = 1
    link: str = "linear"
    beta: float = 1.0
    noise: float = 0.0

    def __post_init__(self):
        if int(self.d) != self.d or self.d < 1:
            raise ParamgeoError(f"the dimension d must be a positive integer, got {self.d}")
        if int(self.tokens) != self.tokens or self.tokens < 1:
            raise ParamgeoError(f"the number of tokens must be a positive integer, got "
                                f"{self.tokens}")
        if self.link not in LINKS:
            raise ParamgeoError(f"unknown link {self.link!r}; choose one of {', '.join(LINKS)}")
        for what, v in (("beta", self.beta), ("noise", self.noise)):
            if not (math.isfinite(v) and v >= 0):
                raise ParamgeoError(f"{what} must be a non-negative number, got {v}")

    def sample(self, rng: np.random.Generator, size: int) -> NDArray[np.float64]:
        """``size`` fresh token matrices X, shape (size, T, d), i.i.d. N(0, 1) entries."""
        return rng.standard_normal((size, self.tokens, self.d))

    def indices(self, S: NDArray[np.float64], X: NDArray[np.float64]) -> NDArray[np.float64]:
        """h_ab = (x_a^T S x_b - delta_ab Tr S) / sqrt(d) for each sample: (size, T, T)."""
        n, T, d = X.shape
        XS = (X.reshape(n * T, d) @ S).reshape(n, T, d)
        h = np.einsum("nai,nbi->nab", XS, X)
        h -= np.trace(S) * np.eye(T)
        return h / math.sqrt(self.d)

    def output(self, h: NDArray[np.float64]) -> NDArray[np.float64]:
        """g(h), row-wise for softmax."""
        return LINKS[self.link][0](h, self.beta)

    def labels(self, S_star: NDArray[np.float64], X: NDArray[np.float64],
               rng: np.random.Generator) -> NDArray[np.float64]:
        """y = g(h(S*)) + sigma xi, xi symmetric T x T with i.i.d. N(0, 1) entries on and above
        the diagonal."""
        y = self.output(self.indices(S_star, X))
        if self.noise:  # symmetric in (a, b), like the indices
            xi = np.triu(rng.standard_normal(y.shape))
            y = y + self.noise * (xi + np.triu(xi, 1).swapaxes(-1, -2))
        return y

    def loss_and_grad(self, S: NDArray[np.float64], X: NDArray[np.float64],
                      y: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        """(sum_b ell_b, sum_b grad_S ell_b) over the samples X (size, T, d) with labels y:
        ell = |g(h) - y|^2 / 2 and grad_S ell = (X^T E X - Tr(E) I) / sqrt(d)."""
        h = self.indices(S, X)
        f = self.output(h)
        r = f - y
        E = LINKS[self.link][1](h, f, r, self.beta)
        n, T, d = X.shape
        EX = np.einsum("nab,nbj->naj", E, X).reshape(n * T, d)
        G = X.reshape(n * T, d).T @ EX
        G -= np.einsum("naa->", E) * np.eye(d)
        return 0.5 * float(np.sum(r * r)), G / math.sqrt(self.d)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Teacher(Result):
    """A planted predictor S* (d x d) and how it was made."""

    S: np.ndarray
    kind: str

    @classmethod
    def planted(cls, d: int, r: int, rng: Any = None, *, kind: str = "tied",
                centered: bool = False) -> Teacher:
        """A random teacher: ``tied`` S* = W W^T / sqrt(r d) with W in R^{d x r} i.i.d. N(0, 1)
        (the attention-indexed model's teacher; spectrum Marchenko-Pastur, mean sqrt(r/d));
        ``direct`` S* symmetric Gaussian with entries of variance 1/d (semicircle on [-2, 2]).
        ``centered`` removes the mean: S* - (Tr S* / d) I."""
        rng = as_rng(rng)
        if kind == "tied":
            W = rng.standard_normal((d, r))
            S = W @ W.T / math.sqrt(r * d)
        elif kind == "direct":
            A = rng.standard_normal((d, d)) / math.sqrt(2.0 * d)
            S = A + A.T
        else:
            raise ParamgeoError(f"unknown teacher kind {kind!r}; choose tied or direct")
        if centered:
            S = S - np.trace(S) / d * np.eye(d)
        return cls(S=S, kind=kind + (" (centered)" if centered else ""))

    @classmethod
    def from_param(cls, param: Parameterization, theta: ArrayLike, scale: float = 1.0) -> Teacher:
        """The teacher S* = scale * phi(theta*) of a plugin with d x d predictors."""
        S = _as_square(param, param.forward_flat(param.as_theta(theta))) * scale
        return cls(S=np.asarray(S, float), kind=f"{param.name} at a given point")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "d": int(self.S.shape[0]),
                "order": to_jsonable(order_parameters(self.S, self.S, moments=4))}


def _as_square(param, flat):
    m = int(np.size(flat))
    d = math.isqrt(m)
    if d * d != m:
        raise ShapeError(f"online SGD needs a plugin whose predictor is a d x d matrix S; "
                         f"{title(param.name, param.sizes)} has predictors of shape "
                         f"{param.predictor_shape} (use matrix, uut, uvt, or qk-attention "
                         f"with heads=1 and output=scores)")
    return np.reshape(flat, (d, d))


def order_parameters(S: ArrayLike, S_star: ArrayLike, moments: int = 4) -> dict[str, float]:
    """The trace order parameters of S against S* (module docstring): mean, norm, overlap,
    cosine (of the traceless parts) and moment_k = Tr(S^k) / d for k = 2..``moments``."""
    S, S_star = np.asarray(S, float), np.asarray(S_star, float)
    d = S.shape[0]
    tau, tau_s = np.trace(S) / d, np.trace(S_star) / d
    St, St_s = S - tau * np.eye(d), S_star - tau_s * np.eye(d)
    den = np.linalg.norm(St) * np.linalg.norm(St_s)
    out = {"mean": tau, "norm": np.sum(S * S) / d, "overlap": np.sum(S * S_star) / d,
           "cosine": np.sum(St * St_s) / den if den > 0 else 0.0}
    P = S
    for k in range(2, int(moments) + 1):
        P = P @ S
        out[f"moment_{k}"] = np.trace(P) / d
    return {k: float(v) for k, v in out.items()}


@dataclasses.dataclass(frozen=True, kw_only=True)
class OnlineRun(Result):
    """An online SGD run: the recorded parameters as a :class:`~paramgeo.dynamics.trajectory.Trajectory`
    (times = samples seen; loss = test risk on held-out samples), the record times t = n / d^2,
    the order parameters at each record (name -> array), the teacher's own order parameters,
    the step size eta actually used, the weak-recovery sample count (None if not reached), and
    the scale of S = scale * phi(theta)."""

    trajectory: Any
    t: np.ndarray
    order: dict
    teacher_order: dict
    eta: float
    batch: int
    samples: int
    threshold: float
    weak_recovery: object
    model: AttentionIndexed
    scale: float = 1.0
    #: True when Ctrl-C (KeyboardInterrupt) stopped the run: the records are those finished
    interrupted: bool = False

    @property
    def weak_recovery_time(self):
        """Weak recovery in units of t = n / d^2 (nan if not reached)."""
        if self.weak_recovery is None:
            return float("nan")
        return self.weak_recovery / self.model.d ** 2

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable({"t": self.t, "order": self.order, "teacher_order": self.teacher_order,
                            "eta": self.eta, "batch": self.batch, "samples": self.samples,
                            "threshold": self.threshold, "weak_recovery": self.weak_recovery,
                            "weak_recovery_time": self.weak_recovery_time,
                            "model": self.model.to_dict(),
                            "trajectory": self.trajectory.summary()})

    def __str__(self):
        wr = ("not reached" if self.weak_recovery is None else
              f"at n = {self.weak_recovery} (t = n/d^2 = {self.weak_recovery_time:.4g})")
        last = ", ".join(f"{k} {v[-1]:.4g}" for k, v in self.order.items())
        return (f"online SGD ({self.model.link} link, d = {self.model.d}, T = "
                f"{self.model.tokens}): {self.samples} samples in batches of {self.batch}, "
                f"eta = {self.eta:.4g}; weak recovery (|cosine| >= {self.threshold}) {wr}; "
                f"final {last}" + ("; INTERRUPTED (Ctrl-C)" if self.interrupted else ""))

    def plot(self, path: str | PathLike[str], *, title: Optional[str] = None) -> Path:
        """Order parameters against t = n / d^2 (teacher values dashed). Needs matplotlib."""
        path = check_plot_path(path)
        fig = _pyplot_figure((10.0, 4.0))
        ax1, ax2 = fig.subplots(1, 2)
        for i, name in enumerate(("mean", "norm", "overlap")):
            ax1.plot(self.t, self.order[name], color=f"C{i}", label=name)
            ax1.axhline(self.teacher_order[name], color=f"C{i}", ls="--", lw=0.8)
        ax1.set_xlabel("t = n / d^2")
        ax1.legend(fontsize=8)
        ax2.plot(self.t, self.order["cosine"], color="C3", label="cosine")
        ax2.axhline(self.threshold, color="k", ls=":", lw=0.8)
        ax2.set_xlabel("t = n / d^2")
        ax2.legend(fontsize=8)
        if title:
            fig.suptitle(title)
        fig.tight_layout()
        save_figure(fig, path)
        return path


#: Most samples (and the largest batch) of one run: each sample is drawn and used once.
MAX_SAMPLES = 10 ** 12
#: |log eta| beyond which a step is no step (1e-100) or overflows its update (1e100).
MAX_LOG_ETA = 100 * math.log(10)


def online_sgd(param: Parameterization, model: AttentionIndexed, teacher: Teacher,
               theta0: ArrayLike, samples: int, lr: float, *, lr_exponent: float = 0.0,
               scale: float = 1.0, batch: int = 1, record_at: Optional[Sequence[int]] = None,
               moments: int = 4, threshold: float = 0.5, check_every: Optional[int] = None,
               test_samples: int = 256, stop_at_recovery: bool = False, seed: Optional[int] = None,
               progress: Union[bool, Callable[[int, int], None]] = False) -> OnlineRun:
    """Online SGD on ``samples`` fresh samples of ``model`` (an :class:`AttentionIndexed`)
    labelled by ``teacher`` (a :class:`Teacher`), student S = scale * phi(theta), from theta0:

        theta <- theta - eta sum_{b <= batch} J(theta)^T grad_S ell_b,  eta = lr d^(-lr_exponent)

    (module docstring). Records theta and the order parameters at the times ``record_at`` (in
    t = n / d^2; default 50 evenly spaced up to samples / d^2) and checks the cosine every
    ``check_every`` samples (default: every d^2 / 20 samples and at least every batch) for weak
    recovery, |cosine| >= ``threshold``; ``stop_at_recovery`` stops there. ``seed`` seeds the
    samples (an int or a ``numpy.random.Generator``); the test risk of the trajectory uses
    ``test_samples`` held-out samples drawn first. ``progress``: a callable ``progress(done,
    total)`` or True for paramgeo's progress bar.

    References: Saad, Solla (1995), "On-line learning in soft committee machines"; Ben Arous,
    Gheissari, Jagannath (2021), "Online stochastic gradient descent on non-convex losses from
    high-dimensional inference"; Boncoraglio, Troiani, Erba, Zdeborova (2025), "Bayes optimal
    learning of attention-indexed models".
    """
    d = model.d
    S_star = np.asarray(teacher.S, float)
    if S_star.shape != (d, d):
        raise ShapeError(f"the teacher is {S_star.shape[0]} x {S_star.shape[1]} but the model "
                         f"has d = {d}")
    theta = param.as_theta(theta0).copy()
    if _as_square(param, param.forward_flat(theta)).shape != (d, d):
        raise ShapeError(f"{title(param.name, param.sizes)} gives {param.predictor_shape} predictors "
                         f"but the model has d = {d}")
    for what, v in (("samples", samples), ("batch", batch)):
        if not math.isfinite(v) or int(v) != v or v < 1:
            raise ParamgeoError(f"{what} must be a positive integer, got {v}")
        if v > MAX_SAMPLES:
            raise ParamgeoError(f"{what} must be at most {MAX_SAMPLES:.0e} (a run of online SGD "
                                f"draws each sample), got {v:.3g}")
    samples, batch = int(samples), int(batch)
    if not (math.isfinite(lr) and lr > 0):
        raise ParamgeoError(f"the step size lr must be a positive number, got {lr}")
    if not math.isfinite(lr_exponent):
        raise ParamgeoError(f"lr_exponent must be a finite number, got {lr_exponent}")
    log_eta = math.log(lr) - float(lr_exponent) * math.log(d)
    if not -MAX_LOG_ETA <= log_eta <= MAX_LOG_ETA:
        raise ParamgeoError(
            f"the step eta = lr d^(-lr_exponent) = exp({log_eta:.4g}) (lr {lr:g}, lr_exponent "
            f"{lr_exponent:g}, d {d}) is outside [1e-100, 1e100]: it leaves the float range or "
            "moves theta by nothing; give an lr of the order of 0.1 and an lr_exponent of the "
            "order of 1 (1 for direct S, 0 for factored S)")
    if not math.isfinite(scale) or scale == 0:
        raise ParamgeoError(f"scale must be a non-zero number, got {scale}")
    if not 0 < threshold <= 1:
        raise ParamgeoError(f"the weak-recovery threshold must lie in (0, 1], got {threshold}")
    eta = float(lr) * d ** (-float(lr_exponent))
    steps = -(-samples // batch)
    if record_at is None:
        record_steps = np.unique(np.linspace(0, steps, 51).round().astype(int))
    else:
        t_rec = np.asarray(record_at, float)
        if t_rec.ndim != 1 or not np.all(np.isfinite(t_rec)) or np.any(t_rec < 0):
            raise ParamgeoError("record_at must be a list of non-negative times t = n / d^2")
        record_steps = np.unique(np.minimum(np.round(t_rec * d * d / batch), steps).astype(int))
    if check_every is None:
        check_every = max(batch, d * d // 20)
    check_steps = max(1, int(check_every) // batch)
    rng = as_rng(seed)
    X_test = model.sample(rng, int(test_samples)) if test_samples else None
    y_test = model.labels(S_star, X_test, rng) if test_samples else None  # type: ignore[arg-type]

    def student(th):
        return scale * _as_square(param, param.forward_flat(th))

    def step_grad(th, X, y):
        loss, G = model.loss_and_grad(student(th), X, y)
        return loss, scale * param.vjp(th, G.reshape(-1))

    thetas, times, order, recovery = [], [], dict[str, list](), None

    def record(k, S):
        thetas.append(theta.copy())
        times.append(min(k * batch, samples))
        with np.errstate(over="ignore", invalid="ignore"):
            values = order_parameters(S, S_star, moments)
        for name, v in values.items():
            order.setdefault(name, []).append(v)

    report, close = _progress_callback(progress, f"online SGD, {samples} samples")
    k, interrupted = 0, False
    try:
        if record_steps[0] == 0:
            record(0, student(theta))
        while k < steps:
            size = min(batch, samples - k * batch)
            X = model.sample(rng, size)
            y = model.labels(S_star, X, rng)
            with np.errstate(over="ignore", invalid="ignore"):
                theta = theta - eta * step_grad(theta, X, y)[1]
            k += 1
            if not np.all(np.isfinite(theta)):
                raise ParamgeoError(f"online SGD diverged after {k * batch} samples; lower lr "
                                    f"(eta = {eta:.3g})")
            at_record = k in record_steps
            if at_record or (recovery is None and k % check_steps == 0):
                S = student(theta)
                with np.errstate(over="ignore", invalid="ignore"):
                    cosine = order_parameters(S, S_star, 0)["cosine"]
                if recovery is None and abs(cosine) >= threshold:
                    recovery = min(k * batch, samples)
                if at_record:
                    record(k, S)
                if recovery is not None and stop_at_recovery:
                    if not at_record:
                        record(k, S)
                    break
            if report is not None:
                report(k, steps)
    except KeyboardInterrupt:  # Ctrl-C: keep the records finished, and the state reached
        if not thetas:
            raise
        interrupted = True
        if times[-1] != min(k * batch, samples):
            record(k, student(theta))
    finally:
        close()

    def value(th):
        if X_test is None:
            return float("nan")
        return step_grad(th, X_test, y_test)[0] / len(X_test)

    def grad(th):
        if X_test is None:
            return np.full(param.n, np.nan)
        return step_grad(th, X_test, y_test)[1] / len(X_test)

    message = (f"interrupted after {times[-1]} of {samples} samples" if interrupted else
               f"weak recovery after {recovery} samples" if recovery is not None and
               stop_at_recovery else f"completed {times[-1]} samples")
    traj = _finish(param, value, grad, f"online sgd (batch {batch})", times, thetas,
                   not interrupted, message, k, False, interrupted)
    return OnlineRun(trajectory=traj, t=np.asarray(times, float) / d ** 2,
                     order={n: np.asarray(v) for n, v in order.items()},
                     teacher_order=order_parameters(S_star, S_star, moments), eta=eta, batch=batch,
                     samples=times[-1], threshold=float(threshold), weak_recovery=recovery,
                     model=model, scale=float(scale), interrupted=interrupted)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScalingFit(Result):
    """A least-squares fit of weak-recovery sample counts n against d: the exponent gamma of
    n / log d = C d^gamma (d^2 log d scaling: gamma = 2) with its standard error, the plain
    power n ~ d^p (p > 2 over a finite range of d under d^2 log d), and t = n / d^2 =
    a + b log d, with the data."""

    d: np.ndarray
    samples: np.ndarray
    exponent: float
    exponent_stderr: float
    power: float
    power_stderr: float
    log_slope: float
    log_slope_stderr: float
    log_intercept: float

    def __str__(self):
        return (f"weak recovery over d = {sorted(set(self.d.astype(int).tolist()))}: "
                f"n / log d ~ d^gamma with gamma = {self.exponent:.3f} +- "
                f"{self.exponent_stderr:.3f} (n ~ d^{self.power:.3f} +- "
                f"{self.power_stderr:.3f}); t = n/d^2 = {self.log_intercept:.3g} + "
                f"({self.log_slope:.3g} +- {self.log_slope_stderr:.2g}) log d")


def _line_fit(x, y):
    """(slope, stderr of the slope, intercept) of ordinary least squares y = a + b x."""
    A = np.column_stack([np.ones_like(x), x])
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    resid = y - A @ coef
    dof = max(len(x) - 2, 1)
    cov = (resid @ resid / dof) * np.linalg.inv(A.T @ A)
    return float(coef[1]), float(math.sqrt(cov[1, 1])), float(coef[0])


def fit_weak_recovery(d: ArrayLike, samples: ArrayLike) -> ScalingFit:
    """Fit weak-recovery sample counts ``samples`` measured at dimensions ``d`` (one entry per
    run; repeat d for several seeds): log(n / log d) = log C + gamma log d by least squares,
    and t = n / d^2 = a + b log d (a weak-recovery time growing like log d is the
    d^2 log d sample scale: Ben Arous, Gheissari, Jagannath 2021 for information exponent 2).
    Needs at least 3 distinct d."""
    d, n = np.asarray(d, float), np.asarray(samples, float)
    if d.shape != n.shape or d.ndim != 1:
        raise ShapeError("d and samples must be 1-d arrays of the same length")
    if len(np.unique(d)) < 3 or np.any(d < 2) or np.any(~np.isfinite(n)) or np.any(n <= 0):
        raise ParamgeoError("fit_weak_recovery needs positive sample counts at >= 3 distinct "
                            "d >= 2 (drop runs that did not reach weak recovery)")
    g, g_err, _ = _line_fit(np.log(d), np.log(n / np.log(d)))
    p, p_err, _ = _line_fit(np.log(d), np.log(n))
    b, b_err, a = _line_fit(np.log(d), n / d ** 2)
    return ScalingFit(d=d, samples=n, exponent=g, exponent_stderr=g_err, power=p,
                      power_stderr=p_err, log_slope=b, log_slope_stderr=b_err, log_intercept=a)
