"""Multi-head attention-indexed models under online SGD, matrix-free and batched over seeds
(:func:`multihead_sgd`), and the power of a weak-recovery scaling fit to tell d^2 log d
samples from d^2 (:func:`scaling_separation`).

The model (Xu, Sagitova, Zdeborova, "Attention-indexed models"; Boncoraglio, Troiani, Erba,
Zdeborova 2025): one token x in R^d with i.i.d. N(0, 1) entries, H index matrices, the heads'
indices

    h_k(S_k) = (x^T S_k x - Tr S_k) / sqrt(d),     k = 1..H,

and the label y = (1 / sqrt(H)) sum_k g(h_k(S*_k)) + sigma xi (a committee of heads; H = 1 is
the single-head model of :mod:`paramgeo.flows.online` with one token). The teacher heads are
S*_k = W*_k W*_k^T / sqrt(r d), optionally centered (minus (Tr / d) I). The student heads are
tied, S_k = W_k W_k^T / sqrt(r d), or untied, S_k = U_k V_k^T / sqrt(r d). Nothing d x d is
formed: with P = X U_k, Q = X V_k (batch x r),

    h_k = (sum_i P_bi Q_bi - Tr(U_k^T V_k)) / (sqrt(r d) sqrt(d)),
    E_bk = (yhat_b - y_b) g'(h_bk) / sqrt(H),      ell = sum_b (yhat_b - y_b)^2 / 2,
    dell/dU_k = (X^T (E_k * Q) - (sum_b E_bk) V_k) / (sqrt(r d) sqrt(d)),

and dell/dV_k the same with P and U_k (tied: dell/dW_k = 2 (X^T (E_k * P) - (sum E_k) W_k) /
(sqrt(r d) sqrt(d))), the chain rule of grad_S ell = (X^T E X - Tr(E) I) / sqrt(d) through the
factors, as in :func:`paramgeo.flows.online_sgd`. A step costs O(batch d r H) per seed, and
``seeds`` independent runs (each with its own teacher and samples) advance together, one BLAS
call per seed and step.

Order parameters, from the factors alone (r x r products): the cosine matrix
C_kl = Tr(S~_k S~*_l^T) / (|S~_k|_F |S~*_l|_F) between student head k and teacher head l
(S~ the traceless part), the mean Tr S_k / d and norm Tr(S_k S_k^T) / d of each head. The labels
are invariant under permuting the heads (and, for an even link with untied heads, under
S_k -> -S_k), so recovery is measured by permutation-invariant summaries:

    matched   = max over permutations pi of min_k |C_{k pi(k)}|   (every head, one assignment)
    best      = max_{k,l} |C_kl|                                   (the first head)
    symmetric = |cosine(sum_k S_k, sum_l S*_l)|                    (the head-symmetric part)

Weak recovery of a summary is the first sample count at which it reaches ``threshold``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

import numpy as np

from ..errors import ParamgeoError, ShapeError
from ..linalg.numerics import as_rng
from ..results import Result, to_jsonable
from .online import LINKS

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

#: the permutation-invariant recovery summaries (module docstring)
SUMMARIES = ("matched", "best", "symmetric")


@dataclasses.dataclass(frozen=True, kw_only=True)
class MultiHeadTeacher(Result):
    """Planted teacher heads for ``seeds`` independent runs: ``factors`` W*, shape
    (seeds, d, H, r), S*_k = W*_k W*_k^T / sqrt(r d), minus (Tr / d) I when ``centered``."""

    factors: np.ndarray
    centered: bool = True

    @classmethod
    def planted(cls, d: int, r: int, heads: int = 1, seeds: int = 1, rng: Any = None, *,
                centered: bool = True) -> MultiHeadTeacher:
        """Independent teachers: W*_k in R^{d x r} with i.i.d. N(0, 1) entries for each head
        and seed (the tied teacher of the attention-indexed model, Marchenko-Pastur spectrum)."""
        for what, v in (("d", d), ("r", r), ("heads", heads), ("seeds", seeds)):
            if int(v) != v or v < 1:
                raise ParamgeoError(f"{what} must be a positive integer, got {v}")
        W = as_rng(rng).standard_normal((int(seeds), int(d), int(heads), int(r)))
        return cls(factors=W, centered=bool(centered))

    @property
    def scale(self) -> float:
        """1 / sqrt(r d)."""
        _, d, _, r = self.factors.shape
        return 1.0 / math.sqrt(r * d)

    @property
    def means(self) -> NDArray[np.float64]:
        """Tr(W*_k W*_k^T) / sqrt(r d) / d for each seed and head (the uncentered mean)."""
        d = self.factors.shape[1]
        return np.einsum("sdhr,sdhr->sh", self.factors, self.factors) * self.scale / d

    def matrices(self) -> NDArray[np.float64]:
        """S*_k as d x d matrices, shape (seeds, H, d, d) (for small d and tests)."""
        W = self.factors
        S = np.einsum("sihr,sjhr->shij", W, W) * self.scale
        if self.centered:
            S = S - self.means[..., None, None] * np.eye(W.shape[1])
        return S

    def to_dict(self) -> dict[str, Any]:
        s, d, h, r = self.factors.shape
        return {"seeds": s, "d": d, "heads": h, "r": r, "centered": self.centered}


def head_indices(U: NDArray[np.float64], V: NDArray[np.float64], X: NDArray[np.float64],
                 scale: float) -> tuple[NDArray[np.float64], ...]:
    """The heads' indices h_k = scale (x^T U_k V_k^T x - Tr(U_k V_k^T)) / sqrt(d) for factors
    U, V of shape (seeds, d, H, r) and tokens X (seeds, batch, d): returns (h, P, Q) with h of
    shape (seeds, batch, H) and P = X U, Q = X V of shape (seeds, batch, H, r). Pass V = U for
    tied heads (one product).
    Reference: Attention-indexed models (Xu, Sagitova, Zdeborova): the indices."""
    s, d, H, r = U.shape
    B = X.shape[1]
    P = np.matmul(X, U.reshape(s, d, H * r)).reshape(s, B, H, r)
    Q = P if V is U else np.matmul(X, V.reshape(s, d, H * r)).reshape(s, B, H, r)
    trace = np.einsum("sdhr,sdhr->sh", U, V)
    h = (np.einsum("sbhr,sbhr->sbh", P, Q) - trace[:, None, :]) * (scale / math.sqrt(d))
    return h, P, Q


def teacher_labels(teacher: MultiHeadTeacher, X: NDArray[np.float64], link: str,
                   noise: float = 0.0, rng: Any = None) -> NDArray[np.float64]:
    """y = (1 / sqrt(H)) sum_k g(h_k(S*_k)) + sigma xi for tokens X (seeds, batch, d); a
    centered teacher's index is h_k minus mean_k (|x|^2 - d) / sqrt(d).
    Reference: Xu, Sagitova, Zdeborova, "Attention-indexed models"; Saad, Solla (1995)."""
    W = teacher.factors
    d, H = W.shape[1], W.shape[2]
    h, _, _ = head_indices(W, W, X, teacher.scale)
    if teacher.centered:
        h = h - teacher.means[:, None, :] * ((np.sum(X * X, axis=-1) - d)
                                             / math.sqrt(d))[..., None]
    y = LINKS[link][0](h, 1.0).sum(axis=-1) / math.sqrt(H)
    if noise:
        y = y + noise * as_rng(rng).standard_normal(y.shape)
    return y


def multihead_loss_and_grad(U: NDArray[np.float64], V: Optional[NDArray[np.float64]],
                            X: NDArray[np.float64], y: NDArray[np.float64], link: str,
                            scale: float) -> tuple[NDArray[np.float64], NDArray[np.float64],
                                                   Optional[NDArray[np.float64]]]:
    """(loss per seed, dell/dU, dell/dV) of ell = sum_b (yhat_b - y_b)^2 / 2 with
    yhat = (1 / sqrt(H)) sum_k g(h_k) (module docstring); V None: tied heads S_k = scale W_k
    W_k^T with W = U, and the gradient dell/dW (dell/dV is then None).
    Reference: Xu, Sagitova, Zdeborova, "Attention-indexed models"."""
    s, d, H, r = U.shape
    tied = V is None
    Vv = U if V is None else V
    h, P, Q = head_indices(U, Vv, X, scale)
    g, vjp = LINKS[link]
    f = g(h, 1.0)
    res = f.sum(axis=-1) / math.sqrt(H) - y
    E = vjp(h, f, np.broadcast_to(res[..., None], h.shape), 1.0) / math.sqrt(H)
    c = scale / math.sqrt(d)
    XT = X.swapaxes(1, 2)
    Esum = E.sum(axis=1)[:, None, :, None]
    if tied:
        GU = 2.0 * c * (np.matmul(XT, (E[..., None] * P).reshape(s, -1, H * r))
                        .reshape(s, d, H, r) - Esum * U)
        return 0.5 * np.sum(res * res, axis=1), GU, None
    EQ = (E[..., None] * Q).reshape(s, -1, H * r)
    EP = (E[..., None] * P).reshape(s, -1, H * r)
    GU = c * (np.matmul(XT, EQ).reshape(s, d, H, r) - Esum * Vv)
    GV = c * (np.matmul(XT, EP).reshape(s, d, H, r) - Esum * U)
    return 0.5 * np.sum(res * res, axis=1), GU, GV


def head_order_parameters(U: NDArray[np.float64], V: Optional[NDArray[np.float64]],
                          teacher: MultiHeadTeacher) -> dict[str, NDArray[np.float64]]:
    """The order parameters of student heads S_k = scale U_k V_k^T (V None: tied, V = U) against
    the teacher heads, from r x r products of the factors: ``cosine`` (seeds, H, H) with
    C_kl = Tr(S~_k S~*_l^T) / (|S~_k|_F |S~*_l|_F), ``mean`` Tr S_k / d and ``norm``
    Tr(S_k S_k^T) / d (seeds, H), and the summaries ``matched``, ``best``, ``symmetric``
    (seeds,) of the module docstring.
    Reference: Saad, Solla (1995) (overlaps of a committee under its permutations)."""
    Vv = U if V is None else V
    s, d, H, r = U.shape
    W = teacher.factors
    a, b = 1.0 / math.sqrt(r * d), teacher.scale
    tau = np.einsum("sdhr,sdhr->sh", U, Vv) * a / d
    tau_t = teacher.means
    # Tr(S_k S*_l) = a b Tr(U_k V_k^T W_l W_l^T) = a b <W_l^T U_k, W_l^T V_k>
    WU = np.einsum("sdlq,sdkr->sklqr", W, U)
    WV = WU if V is None else np.einsum("sdlq,sdkr->sklqr", W, Vv)
    cross = a * b * np.einsum("sklqr,sklqr->skl", WU, WV)
    cross_t = cross - d * tau[:, :, None] * tau_t[:, None, :]
    UU = np.einsum("sdkr,sdlq->sklrq", U, U)
    VV = UU if V is None else np.einsum("sdkr,sdlq->sklrq", Vv, Vv)
    # Tr(S_k S_l^T) = a^2 <U_k^T U_l, V_k^T V_l>
    gram = a * a * np.einsum("sklrq,sklrq->skl", UU, VV)
    WW = np.einsum("sdkr,sdlq->sklrq", W, W)
    gram_t = b * b * np.einsum("sklrq,sklrq->skl", WW, WW)
    gram_tc = gram - d * tau[:, :, None] * tau[:, None, :]
    gram_ttc = gram_t - d * tau_t[:, :, None] * tau_t[:, None, :]
    ns = np.sqrt(np.maximum(np.einsum("skk->sk", gram_tc), 0.0))
    nt = np.sqrt(np.maximum(np.einsum("skk->sk", gram_ttc), 0.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        C = np.nan_to_num(cross_t / (ns[:, :, None] * nt[:, None, :]))
        sym = np.nan_to_num(np.abs(cross_t.sum(axis=(1, 2)))
                            / np.sqrt(gram_tc.sum(axis=(1, 2)) * gram_ttc.sum(axis=(1, 2))))
    A = np.abs(C)
    perms = np.array(list(itertools.permutations(range(H))))
    matched = A[:, np.arange(H)[None, :], perms].min(axis=2).max(axis=1)
    return {"cosine": C, "mean": tau, "norm": np.einsum("skk->sk", gram) / d,
            "matched": matched, "best": A.max(axis=(1, 2)), "symmetric": sym}


@dataclasses.dataclass(frozen=True, kw_only=True)
class MultiHeadRun(Result):
    """Online SGD on a multi-head model for several seeds at once: the record times ``t`` =
    n / d^2, the order parameters at each record (name -> array with the record axis first, nan
    for seeds already stopped), the weak-recovery sample count of each summary and seed (nan if
    not reached), the final factors, and the settings."""

    t: np.ndarray
    order: dict
    weak_recovery: dict
    final: tuple
    d: int
    heads: int
    r: int
    tied: bool
    link: str
    eta: float
    batch: int
    samples: int
    threshold: float
    #: the model: "multi-head" (:func:`multihead_sgd`) or "two-layer" (heads are then layers)
    model: str = "multi-head"

    def weak_recovery_time(self, summary: str = "matched") -> NDArray[np.float64]:
        """Weak recovery of ``summary`` in units of t = n / d^2, one per seed (nan if not)."""
        return np.asarray(self.weak_recovery[summary], float) / self.d ** 2

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable({k: getattr(self, k) for k in (
            "t", "order", "weak_recovery", "d", "heads", "r", "tied", "link", "eta", "batch",
            "samples", "threshold")})

    def __str__(self):
        wr = {k: np.nanmedian(self.weak_recovery_time(k)) if np.any(np.isfinite(
            self.weak_recovery_time(k))) else float("nan") for k in self.weak_recovery}
        n = {k: int(np.sum(np.isfinite(self.weak_recovery[k]))) for k in self.weak_recovery}
        seeds = len(next(iter(self.weak_recovery.values())))
        return (f"{self.model} online SGD ({'tied' if self.tied else 'untied'}, H = {self.heads}, "
                f"d = {self.d}, r = {self.r}, {self.link} link, eta = {self.eta:.3g}, batch "
                f"{self.batch}, {seeds} seeds): weak recovery (>= {self.threshold}) median t = "
                + ", ".join(f"{k} {wr[k]:.3g} ({n[k]}/{seeds})" for k in self.weak_recovery))


def multihead_sgd(teacher: MultiHeadTeacher, start: Sequence[ArrayLike], samples: int,
                  lr: float, *, link: str = "abs", noise: float = 0.0, batch: int = 1,
                  record_at: Optional[Sequence[float]] = None, threshold: float = 0.25,
                  check_every: Optional[int] = None, stop_at: Optional[str] = None,
                  seed: Any = None) -> MultiHeadRun:
    """Online SGD for ``seeds`` independent multi-head runs at once (module docstring):

        U_k <- U_k - eta dell/dU_k,  V_k <- V_k - eta dell/dV_k   (tied: W_k <- W_k - eta dell/dW_k)

    over ``samples`` fresh samples per seed in batches of ``batch``, eta = ``lr``, the student
    S_k = U_k V_k^T / sqrt(r d). ``start``: (W,) for tied heads or (U, V) for untied, each of
    shape (seeds, d, H, r) like ``teacher.factors``. Records the order parameters at the times
    ``record_at`` (t = n / d^2; default 21 evenly spaced) and checks the summaries every
    ``check_every`` samples (default d^2 / 64, at least one batch) for weak recovery;
    ``stop_at`` (a summary name) stops each seed once that summary is recovered.

    References: Xu, Sagitova, Zdeborova, "Attention-indexed models" (online SGD, weak recovery
    of tied and untied S with Theta(d^2 log d) samples); Saad, Solla (1995), "On-line learning
    in soft committee machines" (the heads' permutation symmetry)."""
    if link not in LINKS or link == "softmax":
        raise ParamgeoError(f"link must be an element-wise link of LINKS, got {link!r}")

    def step(T, X, rng, U, V, scale):
        y = teacher_labels(T, X, link, noise, rng)
        return multihead_loss_and_grad(U, V, X, y, link, scale)[1:]

    return batched_online(teacher, start, samples, lr, step=step, summarize=head_order_parameters,
                          summaries=SUMMARIES, tokens=0, link=link, batch=batch,
                          record_at=record_at, threshold=threshold, check_every=check_every,
                          stop_at=stop_at, seed=seed)


def batched_online(teacher: MultiHeadTeacher, start: Sequence[ArrayLike], samples: int,
                   lr: float, *, step: Callable[..., Any], summarize: Callable[..., dict],
                   summaries: Sequence[str], tokens: int, link: str, batch: int = 1,
                   record_at: Optional[Sequence[float]] = None, threshold: float = 0.25,
                   check_every: Optional[int] = None, stop_at: Optional[str] = None,
                   seed: Any = None, model: str = "multi-head") -> MultiHeadRun:
    """The loop of :func:`multihead_sgd` for any model on the factors (seeds, d, H, r):
    ``step(T, X, rng, U, V, scale)`` returns (dell/dU, dell/dV or None) on fresh tokens X of
    shape (seeds, batch, d) (``tokens`` 0) or (seeds, batch, tokens, d) for the active seeds'
    teacher T; ``summarize(U, V, T)`` returns the order parameters, among them the
    ``summaries`` (one value per seed) checked for weak recovery, |summary| >= ``threshold``.
    U <- U - lr dell/dU, V <- V - lr dell/dV; other arguments as in :func:`multihead_sgd`.
    Reference: Xu, Sagitova, Zdeborova, "Attention-indexed models"."""
    W = teacher.factors
    s, d, H, r = W.shape
    tied = len(start) == 1
    if len(start) not in (1, 2):
        raise ParamgeoError("start is (W,) for tied heads or (U, V) for untied heads")
    params = [np.array(p, dtype=float) for p in start]
    for p in params:
        if p.shape[:3] != (s, d, H):
            raise ShapeError(f"a start factor of shape {p.shape} does not match the teacher's "
                             f"(seeds, d, H) = {(s, d, H)}")
    if len({p.shape for p in params}) != 1:
        raise ShapeError("U and V must have the same shape")
    rs = params[0].shape[3]
    for what, v in (("samples", samples), ("batch", batch)):
        if int(v) != v or v < 1:
            raise ParamgeoError(f"{what} must be a positive integer, got {v}")
    if not (math.isfinite(lr) and lr > 0):
        raise ParamgeoError(f"lr must be a positive number, got {lr}")
    if not 0 < threshold <= 1:
        raise ParamgeoError(f"threshold must lie in (0, 1], got {threshold}")
    if stop_at is not None and stop_at not in summaries:
        raise ParamgeoError(f"stop_at must be one of {tuple(summaries)} or None, got {stop_at!r}")
    samples, batch = int(samples), int(batch)
    steps = -(-samples // batch)
    t_rec = (np.linspace(0, samples / d ** 2, 21) if record_at is None
             else np.asarray(record_at, float))
    rec_steps = np.unique(np.minimum(np.round(t_rec * d * d / batch), steps).astype(int))
    check = max(1, int(check_every if check_every is not None else d * d // 64) // batch)
    rng = as_rng(seed)
    scale = 1.0 / math.sqrt(rs * d)
    rec: dict[str, list] = {}
    wr = {k: np.full(s, np.nan) for k in summaries}
    active = np.arange(s)

    def sub(idx):
        return MultiHeadTeacher(factors=W[idx], centered=teacher.centered)

    def observe(k, record):
        o = summarize(params[0][active], None if tied else params[1][active],
                                  sub(active))
        for name in summaries if k else ():  # as online_sgd: the start is not checked
            hit = active[(o[name] >= threshold) & np.isnan(wr[name][active])]
            wr[name][hit] = min(k * batch, samples)
        if record:
            for name, v in o.items():
                full = np.full((s,) + v.shape[1:], np.nan)
                full[active] = v
                rec.setdefault(name, []).append(full)

    times = []
    if rec_steps[0] == 0:
        observe(0, True)
        times.append(0)
    for k in range(1, steps + 1):
        size = min(batch, samples - (k - 1) * batch)
        T = sub(active)
        X = rng.standard_normal((len(active), size) + ((tokens,) if tokens else ()) + (d,))
        GU, GV = step(T, X, rng, params[0][active], None if tied else params[1][active], scale)
        params[0][active] -= lr * GU
        if not tied:
            params[1][active] -= lr * GV
        if not all(np.all(np.isfinite(p[active])) for p in params):
            raise ParamgeoError(f"multi-head online SGD diverged after {k * batch} samples; "
                                f"lower lr (eta = {lr:.3g})")
        at_rec = k in rec_steps
        if at_rec or k % check == 0 or k == steps:
            observe(k, at_rec)
            if at_rec:
                times.append(min(k * batch, samples))
            if stop_at is not None:
                active = active[np.isnan(wr[stop_at][active])]
                if not len(active):
                    break
    return MultiHeadRun(t=np.asarray(times, float) / d ** 2,
                        order={k: np.asarray(v) for k, v in rec.items()}, weak_recovery=wr,
                        final=tuple(params), d=d, heads=H, r=rs, tied=tied, link=link,
                        eta=float(lr), batch=batch, samples=samples,
                        threshold=float(threshold), model=model)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScalingSeparation(Result):
    """How well a fit of log(n / log d) = log C + gamma log d over the runs at dimensions ``d``
    tells n ~ d^2 log d (gamma = 2) from n ~ d^2 (gamma = ``gamma_d2``): the ``gap`` between the
    two, the fit's standard error ``stderr`` for a per-run spread ``spread`` of log n, the
    ``separation`` gap / stderr, and, for a measured exponent ``measured``, its distances in
    standard errors from each law (nan when none is given)."""

    d: np.ndarray
    spread: float
    gamma_d2: float
    gap: float
    stderr: float
    separation: float
    measured: float = float("nan")
    from_d2logd: float = float("nan")
    from_d2: float = float("nan")

    def __str__(self):
        s = (f"over d = {sorted(set(self.d.astype(int).tolist()))} ({len(self.d)} runs, spread "
             f"{self.spread:.3g} in log n): gamma = 2 (d^2 log d) against {self.gamma_d2:.3f} "
             f"(d^2), gap {self.gap:.3f}, stderr {self.stderr:.3f}: separation "
             f"{self.separation:.2f} standard errors")
        if math.isfinite(self.measured):
            s += (f"; measured gamma {self.measured:.3f} is {self.from_d2logd:.2f} stderr from "
                  f"d^2 log d and {self.from_d2:.2f} from d^2")
        return s


def scaling_separation(d: ArrayLike, spread: Any,
                       measured: Optional[float] = None) -> ScalingSeparation:
    """The power of the weak-recovery fit of :func:`paramgeo.flows.fit_weak_recovery` (one run
    per entry of ``d``) to tell d^2 log d samples from d^2. With x = log d and least squares of
    log(n / log d) on x: under n = C d^2 log d the slope is 2; under n = C d^2 it is
    2 - beta with beta the least-squares slope of log log d on x over the same design (the gap);
    the slope's standard error is spread / sqrt(sum (x - mean x)^2), spread the standard
    deviation of log n per run. ``spread`` may also be one value per run: then the fit is
    weighted least squares with weights w = 1 / spread^2 (x centered at its weighted mean, the
    gap the weighted slope, the standard error 1 / sqrt(sum w (x - mean_w x)^2)), and
    ``spread`` is reported as the root mean square of the given values. ``measured``: a fitted
    exponent, placed against both laws. (Xu, Sagitova, Zdeborova: weak recovery with
    Theta(d^2 log d) samples.)"""
    dd = np.asarray(d, float)
    x = np.log(dd)
    if x.ndim != 1 or len(np.unique(x)) < 2 or np.any(x <= 0):
        raise ParamgeoError("scaling_separation needs >= 2 distinct d >= 2")
    sp = np.broadcast_to(np.asarray(spread, float), x.shape)
    if not np.all(np.isfinite(sp) & (sp > 0)):
        raise ParamgeoError("spread must be a positive number (or one per run)")
    w = 1.0 / sp ** 2
    xc = x - (w @ x) / w.sum()
    sxx = float(w @ (xc * xc))
    gap = float(w @ (xc * np.log(x)) / sxx)
    se = float(1.0 / math.sqrt(sxx))
    m = float("nan") if measured is None else float(measured)
    return ScalingSeparation(d=dd, spread=float(np.sqrt(np.mean(sp ** 2))), gamma_d2=2.0 - gap,
                             gap=gap, stderr=se, separation=gap / se, measured=m,
                             from_d2logd=(m - 2.0) / se, from_d2=(m - (2.0 - gap)) / se)


def weighted_exponent(d: ArrayLike, samples: ArrayLike) -> tuple[float, float, NDArray[np.float64]]:
    """Weighted least squares of log(n / log d) = log C + gamma log d over runs at repeated d:
    each run weighted by 1 / s_d^2, s_d the standard deviation of log n over the runs at its d
    (the scatter of weak recovery falls with d, so the unweighted fit's standard error is off).
    Returns (gamma, its standard error, the per-run s_d) — pass s_d to
    :func:`scaling_separation`. Needs at least 2 runs at each d and 2 distinct d.
    Reference: Xu, Sagitova, Zdeborova: Theta(d^2 log d) weak recovery."""
    dd, n = np.asarray(d, float), np.asarray(samples, float)
    if dd.shape != n.shape or dd.ndim != 1 or np.any(n <= 0) or np.any(dd < 2):
        raise ShapeError("d and samples must be 1-d arrays of the same length, n > 0, d >= 2")
    s = np.empty_like(n)
    for v in np.unique(dd):
        at = dd == v
        if at.sum() < 2:
            raise ParamgeoError(f"weighted_exponent needs >= 2 runs at each d; d = {v:g} has 1")
        s[at] = max(float(np.std(np.log(n[at]), ddof=1)), 1e-12)
    x, y, w = np.log(dd), np.log(n / np.log(dd)), 1.0 / s ** 2
    xc = x - (w @ x) / w.sum()
    sxx = float(w @ (xc * xc))
    return float(w @ (xc * y) / sxx), float(1.0 / math.sqrt(sxx)), s


@dataclasses.dataclass(frozen=True, kw_only=True)
class OverlapGrowth(Result):
    """Exponential growth of an overlap from its random start, one fit per run: ``rate`` lambda
    and ``intercept`` log m_0 of log |m(t)| = log m_0 + lambda t over the records with |m| in
    ``window`` (nan where a run has fewer than 3 such records), and ``points`` used per run."""

    rate: np.ndarray
    intercept: np.ndarray
    points: np.ndarray
    window: tuple

    def mean_rate(self) -> tuple[float, float]:
        """(mean rate over the fitted runs, its standard error)."""
        ok = self.rate[np.isfinite(self.rate)]
        if len(ok) < 2:
            return float(np.mean(ok)) if len(ok) else math.nan, math.nan
        return float(ok.mean()), float(ok.std(ddof=1) / math.sqrt(len(ok)))

    def __str__(self):
        m, se = self.mean_rate()
        return (f"overlap growth over |m| in {self.window}: rate {m:.3f} +- {se:.3f} "
                f"({int(np.isfinite(self.rate).sum())}/{len(self.rate)} runs fitted)")


def overlap_growth(t: ArrayLike, overlap: ArrayLike,
                   window: tuple[float, float] = (0.02, 0.15)) -> OverlapGrowth:
    """Fit the linearised escape of an overlap from its random start: for an information
    exponent 2 (an even link) the overlap obeys dm/dt = lambda m to first order, so
    |m(t)| = m_0 e^{lambda t}, and least squares of log |m| on t over the records with
    window[0] <= |m| <= window[1] gives lambda and log m_0 for each run (``overlap`` of shape
    (records, runs), nan for stopped runs). With m_0 ~ A d^(-a) the weak-recovery time at
    threshold m* is t = (log(m* / A) + a log d) / lambda: a slope a / lambda in log d, no power
    of d (Ben Arous, Gheissari, Jagannath 2021, information exponent; Xu, Sagitova, Zdeborova:
    d^2 log d samples)."""
    tt = np.asarray(t, float)
    m = np.abs(np.asarray(overlap, float))
    if m.ndim == 1:
        m = m[:, None]
    if m.ndim != 2 or m.shape[0] != tt.shape[0] or tt.ndim != 1:
        raise ShapeError(f"overlap must be (records, runs) with records = len(t) = {len(tt)}, "
                         f"got {m.shape}")
    lo, hi = float(window[0]), float(window[1])
    if not 0 < lo < hi:
        raise ParamgeoError(f"window must be 0 < lo < hi, got {window}")
    runs = m.shape[1]
    rate, icpt, pts = np.full(runs, np.nan), np.full(runs, np.nan), np.zeros(runs, int)
    for j in range(runs):
        sel = np.isfinite(m[:, j]) & (m[:, j] >= lo) & (m[:, j] <= hi)
        pts[j] = int(sel.sum())
        if pts[j] >= 3 and np.ptp(tt[sel]) > 0:
            rate[j], icpt[j] = np.polyfit(tt[sel], np.log(m[sel, j]), 1)
    return OverlapGrowth(rate=rate, intercept=icpt, points=pts, window=(lo, hi))


@dataclasses.dataclass(frozen=True, kw_only=True)
class EscapeRate(Result):
    """The predicted escape of a tied head from its random start (:func:`escape_rate`): the
    plateau's mean ``tau`` = Tr S / d and norm ``norm`` = Tr S^2 / d, the shrink ``K`` that
    reaches it, the growth ``rate`` lambda of the overlap and the log-d ``slope`` 1 / lambda of
    the weak-recovery time t = n / d^2."""

    eta: float
    ratio: float
    K: float
    tau: float
    norm: float
    rate: float
    slope: float

    def __str__(self):
        return (f"tied |h| head, eta = {self.eta:.3g}, r / d = {self.ratio:.3g}: plateau "
                f"Tr S / d = {self.tau:.4f}, Tr S^2 / d = {self.norm:.4f}; overlap growth rate "
                f"{self.rate:.4f}, weak-recovery time slope 1 / lambda = {self.slope:.3f} in log d")


def escape_rate(eta: float, ratio: float = 0.5) -> EscapeRate:
    """Leading order in eta of the overlap's growth rate for one tied head S = W W^T / sqrt(r d)
    with the link |h|, factors W with i.i.d. N(0, 1) entries, r / d = ``ratio`` = y <= 1, and
    the centered Wishart teacher (P = Tr S*^2 / d = 1), in t = n / d^2. The indices are
    Gaussian with Var h = 2 Q, Cov(h, h*) = 2 M (Q = Tr S^2 / d, M = Tr S S* / d), so the
    population loss is L = Q + P - (4 / pi) sqrt(Q P) F(rho), F(rho) = sqrt(1 - rho^2) +
    rho arcsin rho, rho = M / sqrt(Q P), and the mean flow of S is

        dS/dt = -(2 eta / sqrt y) (8 L_Q S^2 + 2 L_M (S* S + S S*)),

    L_Q = dL/dSigma_11 = 1/2 - sqrt(P / Q) / pi, L_M = -(2 / pi) arcsin rho. First the
    eigenvalues shrink, f -> f / (1 + f K), until L_Q = 0, Q = 4 P / pi^2 (the plateau);
    there, with S free of S* (Tr S*^2 S / d = tau P),

        dM/dt = lambda M,    lambda = (16 eta / (pi sqrt y)) tau sqrt(P / Q) = 8 eta tau / sqrt y,

    tau the plateau's Tr S / d, from the start's spectrum (mass y at lambda_MP / sqrt y,
    lambda_MP Marchenko-Pastur of ratio y). A start overlap ~ 1 / d gives a weak-recovery time
    t = log(d) / lambda + const: slope 1 / lambda in log d. The SGD noise (order eta^2) is
    left out (:func:`paramgeo.flows.noisy_escape` adds it). (Xu, Sagitova, Zdeborova: tied S
    recovers with Theta(d^2 log d) samples; Ben Arous, Gheissari, Jagannath 2021: information
    exponent 2.)"""
    from scipy.optimize import brentq

    y = float(ratio)
    if not (0 < y <= 1 and math.isfinite(eta) and eta > 0):
        raise ParamgeoError(f"escape_rate needs eta > 0 and 0 < ratio <= 1, got {eta}, {ratio}")
    lo, hi = (1 - math.sqrt(y)) ** 2, (1 + math.sqrt(y)) ** 2
    # Gauss-Chebyshev (second kind) nodes for the semicircle-like factor sqrt((hi - x)(x - lo))
    k = np.arange(1, 401)
    u = np.cos(k * np.pi / 401)
    x = (lo + hi) / 2 + (hi - lo) / 2 * u
    w = np.pi / 401 * np.sin(k * np.pi / 401) ** 2 * (hi - lo) ** 2 / 4 / (2 * np.pi * y * x)
    w = w / w.sum()
    f = x / math.sqrt(y)

    def moment(K, p):
        return y * float(w @ (f / (1 + f * K)) ** p)

    target = 4.0 / np.pi ** 2
    K = brentq(lambda K: moment(K, 2) - target, 0.0, 1e6)
    tau = moment(K, 1)
    rate = 8.0 * eta * tau / math.sqrt(y)
    return EscapeRate(eta=float(eta), ratio=y, K=float(K), tau=tau, norm=moment(K, 2),
                      rate=rate, slope=1.0 / rate)
