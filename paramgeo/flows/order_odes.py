"""Order-parameter equations of online SGD where they close on finitely many quantities, and
their comparison with a simulated run (:func:`linear_teacher_odes`, :func:`compare_with_odes`).

Exact case: direct S (the ``matrix`` plugin), the linear link y_ab = h_ab(S*) + sigma xi_ab
with T tokens, step size eta = c / d, t = n / d^2. With D = S - S*, a = T (T + 1) and Gaussian
tokens, every sample's gradient has mean E[grad_S ell] = a D / d exactly (Isserlis:
E[(x^T D x - Tr D)(x x^T - I)] = 2 D on the T diagonal indices, E[(x_a^T D x_b) x_a x_b^T] = D
on the T (T - 1) others) and, to leading order in d, E|grad_S ell|_F^2 = d (a q + T^2 sigma^2)
with q = Tr(D D^T) / d. So, for symmetric S and S*, with mean tau = Tr S / d, norm
Q = Tr(S^2) / d, overlap M = Tr(S S*) / d and the teacher's tau*, P:

    d tau / dt = -a c (tau - tau*)
    d M / dt   = -a c (M - P)
    d Q / dt   = -2 a c (Q - M) + c^2 (a (Q - 2 M + P) + T^2 sigma^2)

The first two hold in expectation at every d; the third up to O(1/d) (E|x|^4 = d^2 + 2d and
the correlation of |grad|^2 with the residual), and the fluctuations of all three are O(1/d):
in the high-d limit the run concentrates on the solution. It is linear, with the closed form
(q = Q - 2M + P, kappa = a c (2 - c))

    M(t) - P = (M0 - P) e^{-a c t},   q(t) = q_inf + (q0 - q_inf) e^{-kappa t},
    q_inf = c T^2 sigma^2 / (a (2 - c)),

stable for c < 2 (the test oracle of the integrated equations).

Finite d (T = 1, ``finite_d=True``): the exact one-sample second moment of Gaussian tokens and a
batch's (B - 1) |E grad|^2 correct the Q equation at O(1/d). Moments: in the same limit S(t) is
alpha S* + beta S0 + sqrt(v) G with G semicircular and free from S* and S0, so the free
cumulants give Tr(S^k) / d (:func:`linear_teacher_moments`; Nica, Speicher 2006, "Lectures on
the combinatorics of free probability", Lectures 11-12). Both derivations: docs/online-sgd.md.

Factored S with the linear link and one token (tied S = scale W W^T, untied S = scale U V^T):
the traces of words in S (and S^T, the factor Gram matrices A = scale U U^T, B = scale V V^T)
and S* follow an infinite hierarchy, each word's drift needing words one letter longer;
:class:`TiedMomentHierarchy` and :class:`UntiedMomentHierarchy` truncate it at a word length
K (:func:`tied_moment_odes`, :func:`untied_moment_odes`, :func:`compare_with_hierarchy`).

References: Saad, Solla
(1995), "On-line learning in soft committee machines"; Goldt, Advani, Saxe, Krzakala,
Zdeborova (2019), "Dynamics of stochastic gradient descent for two-layer neural networks in
the teacher-student setup"; Maillard, Troiani, Martin, Krzakala, Zdeborova (2024),
"Bayes-optimal learning of an extensive-width neural network from quadratically many samples".
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence, Union

import numpy as np

from ..errors import ParamgeoError
from ..results import Result

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from .online import AttentionIndexed, OnlineRun, Teacher


@dataclasses.dataclass(frozen=True, kw_only=True)
class OrderODE(Result):
    """A solution of order-parameter equations: times t and each order parameter's values
    (name -> array), with the equations' name."""

    equations: str
    t: np.ndarray
    order: dict

    def __str__(self):
        last = ", ".join(f"{k} {v[-1]:.4g}" for k, v in self.order.items())
        return f"{self.equations}: t in [0, {self.t[-1]:.4g}], final {last}"


def _centered(tau, Q, M, tau_s, P):
    """cosine = (M - tau tau*) / sqrt((Q - tau^2)(P - tau*^2)) of the traceless parts."""
    den = np.sqrt(np.maximum((Q - tau ** 2) * (P - tau_s ** 2), 0.0))
    return np.where(den > 0, (M - tau * tau_s) / np.where(den > 0, den, 1.0), 0.0)


def linear_teacher_odes(model: AttentionIndexed, teacher_order: Mapping[str, float],
                        initial: Mapping[str, float], c: float, t: ArrayLike, *,
                        method: str = "closed-form", finite_d: bool = False,
                        batch: int = 1) -> OrderODE:
    """The exact high-d order-parameter equations of direct-S online SGD with the linear link
    (module docstring), solved at the times ``t`` from the ``initial`` order parameters (a
    dict with mean, norm, overlap, e.g. ``run.order`` at t = 0) for the teacher's
    ``teacher_order`` (mean, norm) and c = eta d. ``method``: ``closed-form`` or ``integrate``
    (``scipy.integrate.solve_ivp``, RK45 at rtol 1e-10: the second route). ``finite_d``
    (T = 1 only, integrated): the exact finite-d second moment with ``batch`` samples per step
    (module docstring)."""
    if model.link != "linear":
        raise ParamgeoError(f"the order-parameter equations are exact for the linear link only; "
                            f"got link {model.link!r} (run online_sgd and read run.order)")
    if not (math.isfinite(c) and c > 0):
        raise ParamgeoError(f"c = eta d must be a positive number, got {c}")
    T = model.tokens
    a, s2 = T * (T + 1), T * T * model.noise ** 2
    tau_s, P = teacher_order["mean"], teacher_order["norm"]
    y0 = np.array([initial["mean"], initial["norm"], initial["overlap"]], float)
    t = np.asarray(t, float)
    d = model.d
    k2, k_tau = 1.0, 0.0  # the finite-d factors of the noise term (module docstring)
    if finite_d:
        if T != 1:
            raise ParamgeoError(f"the finite-d equations are for T = 1 token, got T = {T}")
        method = "integrate"
        k2 = 1.0 + 9.0 / d + 16.0 / d ** 2 + 2.0 * (batch - 1) / d ** 2
        k_tau, s2 = 8.0 / d, s2 * (1.0 + 1.0 / d)
    if method == "closed-form":
        e1 = np.exp(-a * c * t)
        tau = tau_s + (y0[0] - tau_s) * e1
        M = P + (y0[2] - P) * e1
        kappa = a * c * (2.0 - c)
        q0 = y0[1] - 2.0 * y0[2] + P
        if kappa == 0:
            q = q0 + c * c * s2 * t
        else:
            q_inf = c * c * s2 / kappa
            q = q_inf + (q0 - q_inf) * np.exp(-kappa * t)
        Q = q + 2.0 * M - P
    elif method == "integrate":
        from scipy.integrate import solve_ivp

        def rhs(_, y):
            tau, Q, M = y
            return [-a * c * (tau - tau_s), -2 * a * c * (Q - M)
                    + c * c * (a * k2 * (Q - 2 * M + P) + k_tau * (tau - tau_s) ** 2 + s2),
                    -a * c * (M - P)]

        sol = solve_ivp(rhs, (0.0, float(t[-1])), y0, t_eval=t, rtol=1e-10, atol=1e-12)
        if not sol.success:
            raise ParamgeoError(f"solve_ivp failed on the order-parameter equations: "
                                f"{sol.message}")
        tau, Q, M = sol.y
    else:
        raise ParamgeoError(f"unknown method {method!r}; choose closed-form or integrate")
    name = "finite-d equations" if finite_d else "exact high-d equations"
    return OrderODE(equations=f"direct S, linear link ({name})", t=t,
                    order={"mean": tau, "norm": Q, "overlap": M,
                     "cosine": _centered(tau, Q, M, tau_s, P), "start_weight": np.exp(-a * c * t)})


@dataclasses.dataclass(frozen=True, kw_only=True)
class ODEComparison(Result):
    """Simulation against equations: per order parameter the largest relative deviation
    max_t |sim - ode| / max_t |ode| over the run."""

    equations: str
    deviation: dict

    @property
    def max_deviation(self):
        return max(self.deviation.values())

    def __str__(self):
        rows = ", ".join(f"{k} {v:.2e}" for k, v in self.deviation.items())
        return f"online SGD vs {self.equations}: max relative deviation {rows}"


def compare_with_odes(run: OnlineRun, model: Optional[AttentionIndexed] = None,
                      method: str = "closed-form", finite_d: bool = False,
                      teacher: Optional[ArrayLike] = None,
                      start: Optional[ArrayLike] = None) -> tuple[OrderODE, ODEComparison]:
    """Solve :func:`linear_teacher_odes` from the run's first record with c = eta d (and the
    run's batch when ``finite_d``) and compare each order parameter (mean, norm, overlap)
    with the run over all records; with the ``teacher`` S* and the ``start`` S0 (d x d
    matrices) also the recorded moments, by :func:`linear_teacher_moments`."""
    model = run.model if model is None else model
    initial = {k: v[0] for k, v in run.order.items()}
    ode = linear_teacher_odes(model, run.teacher_order, initial, run.eta * model.d, run.t,
                              method=method, finite_d=finite_d, batch=run.batch)
    names = ["mean", "norm", "overlap"]
    if teacher is not None and start is not None:
        K = max([int(k.split("_")[1]) for k in run.order if k.startswith("moment_")] + [0])
        if K < 3:
            raise ParamgeoError("the run recorded no moments beyond Tr(S^2)/d: run online_sgd "
                                "with moments >= 3")
        moments = linear_teacher_moments(ode, teacher, start, K)
        ode = OrderODE(equations=moments.equations, t=ode.t, order=dict(ode.order, **moments.order))
        names += [f"moment_{k}" for k in range(3, K + 1)]
    dev = {k: float(np.max(np.abs(run.order[k] - ode.order[k])) / np.max(np.abs(ode.order[k])))
           for k in names}
    return ode, ODEComparison(equations=ode.equations, deviation=dev)


def _power_coeffs(m, s, n):
    """Coefficients [z^0..z^n] of (sum_i m_i z^i)^s, m_0 = 1."""
    out = np.zeros(n + 1)
    out[0] = 1.0
    for _ in range(s):
        out = np.convolve(out, m[:n + 1])[:n + 1]
    return out


def free_cumulants(moments: ArrayLike) -> NDArray[np.float64]:
    """Free cumulants kappa_1..kappa_K from moments m_1..m_K (spectral moments Tr(S^k) / d), by
    m_n = sum_{s=1}^{n} kappa_s [z^{n-s}] M(z)^s, M(z) = sum_{i>=0} m_i z^i (Nica, Speicher
    2006, Lecture 11)."""
    m = np.concatenate([[1.0], np.asarray(moments, float)])
    K = len(m) - 1
    kappa = np.zeros(K + 1)
    for n in range(1, K + 1):
        kappa[n] = m[n] - sum(kappa[s] * _power_coeffs(m, s, n - s)[n - s] for s in range(1, n))
    return kappa[1:]


def free_moments(cumulants: ArrayLike) -> NDArray[np.float64]:
    """The inverse of :func:`free_cumulants`: moments m_1..m_K from free cumulants."""
    kappa = np.concatenate([[0.0], np.asarray(cumulants, float)])
    K = len(kappa) - 1
    m = np.zeros(K + 1)
    m[0] = 1.0
    for n in range(1, K + 1):
        m[n] = sum(kappa[s] * _power_coeffs(m, s, n - s)[n - s] for s in range(1, n + 1))
    return m[1:]


def _spectral_moments(S, K):
    ev = np.linalg.eigvalsh((S + S.T) / 2.0)
    return np.array([np.mean(ev ** k) for k in range(1, K + 1)])


def linear_teacher_moments(ode: OrderODE, S_star: ArrayLike, S0: ArrayLike,
                           moments: int = 4) -> OrderODE:
    """The moments Tr(S(t)^k) / d, k = 1..``moments``, of direct-S online SGD with the linear
    link predicted from the solved equations ``ode`` (:func:`linear_teacher_odes`; its
    ``start_weight`` is beta = e^{-a c t}) and the matrices S* and S0: the free convolution of
    alpha S*, beta S0 and a semicircle of the variance that closes the norm equation (module
    docstring). Returns an :class:`OrderODE` with ``moment_k`` for k >= 2."""
    K = int(moments)
    if K < 2:
        raise ParamgeoError(f"moments must be at least 2, got {moments}")
    k_star = free_cumulants(_spectral_moments(np.asarray(S_star, float), K))
    k_zero = free_cumulants(_spectral_moments(np.asarray(S0, float), K))
    beta = ode.order["start_weight"]
    out = {f"moment_{k}": np.zeros(len(ode.t)) for k in range(2, K + 1)}
    for i, b in enumerate(beta):
        n = np.arange(1, K + 1)
        kappa = (1.0 - b) ** n * k_star + b ** n * k_zero
        kappa[0] = ode.order["mean"][i]
        kappa[1] = ode.order["norm"][i] - ode.order["mean"][i] ** 2
        m = free_moments(kappa)
        for k in range(2, K + 1):
            out[f"moment_{k}"][i] = m[k - 1]
    return OrderODE(equations=ode.equations + ", moments by free convolution", t=ode.t, order=out)


# --- factored S: the matrix-moment hierarchies of tied and untied S ---------------------------

def _transpose_word(w, transpose):
    """The word of w(...)^T: reversed, each letter replaced by its transpose's letter."""
    return "".join(transpose[a] for a in reversed(w))


def _canonical_word(w, transpose=None):
    """The representative of a trace word: Tr is invariant under rotation and under
    transposition (Tr(w) = Tr(w^T), the reversed word with each letter transposed); the least
    rotation of w or of its transpose. ``transpose`` maps each letter to its transpose's letter
    (default: every letter symmetric, so the transpose is the reversal)."""
    if not w:
        return ""
    wt = w[::-1] if transpose is None else _transpose_word(w, transpose)
    return min(x[i:] + x[:i] for x in (w, wt) for i in range(len(x)))


def _word_traces(words, mats, transpose=None):
    """Tr(w) / d for each word (a string over the letters of ``mats``, letter -> d x d matrix),
    from the products of all words of length <= ceil(K / 2): Tr(X Y) = sum(X * Y^T), Y^T the
    product of the transposed word."""
    tr = transpose or {a: a for a in mats}
    d = next(iter(mats.values())).shape[0]
    h = (max(len(w) for w in words) + 1) // 2
    halves = {w[:k] for w in words for k in range(1, h + 1)}
    halves |= {_transpose_word(w[h:], tr)[:k] for w in words for k in range(1, h + 1)}
    prod = {"": np.eye(d)}
    for w in sorted(halves - {""}, key=len):
        prod[w] = prod[w[:-1]] @ mats[w[-1]]
    return np.array([np.sum(prod[w[:h]] * prod[_transpose_word(w[h:], tr)]) / d
                     for w in words])


class _WordHierarchy:
    """The trace-moment hierarchy of online SGD through a factored S with the linear link, one
    token and label noise sigma, truncated at word length ``order`` (K). The state is
    tr(w) = Tr(w) / d for every word w over the letters (d x d matrices) with at least one
    dynamic letter and length <= K (up to rotation and transposition), with the teacher's
    words Tr(S*^k) / d (letter t) as constants. A subclass gives, for each dynamic letter L,
    its high-d drift per unit of t = n / d^2,

        dL/dt = sum_c coef_c * (two-letter word)_c + kappa tr(I_L) I,
        kappa = beta^2 (2 q + sigma^2),   q = Tr(D^2) / d,

    and its zero-mean kick H_L proportional to e (x x^T P_L + Q_L x x^T). Then (Ito)

        d tr(w) / dt = sum_{L at i} tr(w[L_i -> dL/dt])
                       + kappa sum_{i < j} [tr(P_i W1) tr(P_j W2) + tr(P_i W1 Q_j) tr(W2)
                                            + tr(W1) tr(P_j W2 Q_i) + tr(W1 Q_j) tr(W2 Q_i)],

    W1, W2 the two arcs of w between the dynamic letters at i and j (docs/online-sgd.md).
    Longer words (those the drift of a length-K word creates) are set to 0: the truncation."""

    #: letter -> its transpose's letter; the dynamic letters are all but "t" (S*)
    TRANSPOSE: dict[str, str] = {}
    #: the trace words of the mean tau and of q = Tr(D^2) / d (word -> coefficient, + tr(S*^2))
    MEAN, Q_WORDS = "s", dict[str, float]()

    def rules(self, beta: float) -> dict[str, Any]:
        """letter -> ([(coef, two-letter word)], identity word I_L, P_L, Q_L)."""
        raise NotImplementedError

    def __init__(self, order, beta, noise, teacher_moments):
        K = int(order)
        if K < 2:
            raise ParamgeoError(f"the truncation order must be at least 2, got {order}")
        tm = np.asarray(teacher_moments, float)
        if tm.ndim != 1 or len(tm) < K + 1:
            raise ParamgeoError(f"teacher_moments must list Tr(S*^k)/d for k = 1..{K + 1}")
        T = self.TRANSPOSE
        canon = {}

        def cw(w):
            if w not in canon:
                canon[w] = _canonical_word(w, T)
            return canon[w]

        words = {cw("".join(w)) for L in range(1, K + 1)
                 for w in itertools.product(sorted(T), repeat=L) if set(w) != {"t"}}
        self.order, self.beta, self.noise = K, float(beta), float(noise)
        self.words = tuple(sorted(words, key=lambda w: (len(w), w)))
        N = len(self.words)
        self._index = {w: i + 1 for i, w in enumerate(self.words)}
        # extended vector: [1 (empty word), state (N), 0 (truncated), Tr(S*^k)/d, k = 1..K+1]
        self._tail = np.concatenate([[0.0], tm[:K + 1]])

        def ix(w):
            if not w:
                return 0
            if set(w) == {"t"}:
                return N + 1 + len(w)
            return N + 1 if len(w) > K else self._index[cw(w)]

        rules = self.rules(self.beta)
        lin, pair = [], []
        for tg, w in enumerate(self.words):
            dyn = [i for i, a in enumerate(w) if a != "t"]
            for i in dyn:
                u = w[i + 1:] + w[:i]      # the word read from just after the letter at i
                terms, ident, Pi, Qi = rules[w[i]]
                lin += [(tg, ix(v + u), c) for c, v in terms]
                pair.append((tg, ix(ident), ix(u)))
                for j in (j for j in dyn if j > i):
                    _, _, Pj, Qj = rules[w[j]]
                    w1, w2 = w[i + 1:j], w[j + 1:] + w[:i]
                    pair += [(tg, ix(Pi + w1), ix(Pj + w2)), (tg, ix(Pi + w1 + Qj), ix(w2)),
                             (tg, ix(w1), ix(Pj + w2 + Qi)), (tg, ix(w1 + Qj), ix(w2 + Qi))]
        self._lin = tuple(np.array(a) for a in zip(*lin))
        self._pair = tuple(np.array(a) for a in zip(*pair))
        self._mean = ix(self.MEAN)
        self._q = [(ix(w), c) for w, c in self.Q_WORDS.items()]
        self._P = tm[1]

    def index(self, word):
        """Position of ``word`` in the state vector."""
        w = _canonical_word(word, self.TRANSPOSE)
        if w not in self._index:
            raise ParamgeoError(f"{word!r} is not a word of this hierarchy (order "
                                f"{self.order}, at least one dynamic letter)")
        return self._index[w] - 1

    def rhs(self, y):
        """d y / dt at the state y (class docstring)."""
        N = len(self.words)
        e = np.concatenate([[1.0], y, self._tail])
        q = self._P + sum(c * e[i] for i, c in self._q)
        kick = self.beta ** 2 * (2.0 * q + self.noise ** 2)
        tg, src, cf = self._lin
        out = np.bincount(tg, cf * e[src], N)
        tg, a, b = self._pair
        return out + kick * np.bincount(tg, e[a] * e[b], N)


class TiedMomentHierarchy(_WordHierarchy):
    """The trace-moment hierarchy of online SGD for tied S = scale W W^T (letters s = S,
    t = S*, both symmetric), truncated at word length ``order``, with beta = 2 eta scale d.
    With D = S - S*, tau = Tr S / d and q = Tr(D^2) / d (docs/online-sgd.md, "The moment
    hierarchy of tied S"):

        dS/dt = -2 beta (D S + S D) + beta^2 (2 q + sigma^2) tau I,   H_S ~ x x^T S + S x x^T.
    """

    TRANSPOSE = {"s": "s", "t": "t"}
    Q_WORDS = {"ss": 1.0, "st": -2.0}

    def rules(self, beta: float) -> dict[str, Any]:
        return {"s": ([(-4.0 * beta, "ss"), (2.0 * beta, "ts"), (2.0 * beta, "st")], "s",
                      "s", "s")}

    def values(self, S: ArrayLike, S_star: ArrayLike) -> NDArray[np.float64]:
        """The state vector of the matrices S and S*: Tr(w(S, S*)) / d for each word."""
        return _word_traces(self.words, {"s": np.asarray(S, float),
                                         "t": np.asarray(S_star, float)})


class UntiedMomentHierarchy(_WordHierarchy):
    """The trace-moment hierarchy of online SGD for untied S = scale U V^T, truncated at word
    length ``order``: letters s = S, S = S^T, a = scale U U^T, b = scale V V^T (the factor
    Gram matrices, which S alone does not determine) and t = S*, with beta = eta scale d.
    With D = (S + S^T) / 2 - S*, tau = Tr S / d, q = Tr(D^2) / d and
    kappa = beta^2 (2 q + sigma^2) (docs/online-sgd.md, "The moment hierarchy of untied S"):

        dS/dt   = -2 beta (A D + D B) + kappa tau I,       H_S ~ A x x^T + x x^T B,
        dA/dt   = -2 beta (S D + D S^T) + kappa tr(B) I,   H_A ~ S x x^T + x x^T S^T,
        dB/dt   = -2 beta (S^T D + D S) + kappa tr(A) I,   H_B ~ S^T x x^T + x x^T S,

    and S^T the transpose of the S line.
    """

    TRANSPOSE = {"s": "S", "S": "s", "a": "a", "b": "b", "t": "t"}
    Q_WORDS = {"ss": 0.5, "sS": 0.5, "st": -2.0}

    def rules(self, beta: float) -> dict[str, Any]:
        def left(M):   # -2 beta M D with D = (s + S) / 2 - t
            return [(-beta, M + "s"), (-beta, M + "S"), (2.0 * beta, M + "t")]

        def right(M):  # -2 beta D M
            return [(-beta, "s" + M), (-beta, "S" + M), (2.0 * beta, "t" + M)]

        return {"s": (left("a") + right("b"), "s", "b", "a"),
                "S": (left("b") + right("a"), "s", "a", "b"),
                "a": (left("s") + right("S"), "b", "S", "s"),
                "b": (left("S") + right("s"), "a", "s", "S")}

    @staticmethod
    def matrices(U: ArrayLike, V: ArrayLike, S_star: ArrayLike,
                 scale: float) -> dict[str, NDArray[np.float64]]:
        """letter -> matrix: s = S = scale U V^T, S = S^T, a = scale U U^T, b = scale V V^T,
        t = S*."""
        U, V = np.asarray(U, float), np.asarray(V, float)
        S = scale * U @ V.T
        return {"s": S, "S": S.T, "a": scale * U @ U.T, "b": scale * V @ V.T,
                "t": np.asarray(S_star, float)}

    def values(self, U: ArrayLike, V: ArrayLike, S_star: ArrayLike,
               scale: float) -> NDArray[np.float64]:
        """The state vector of the factors U, V (d x r) and S*: Tr(w) / d for each word."""
        return _word_traces(self.words, self.matrices(U, V, S_star, scale), self.TRANSPOSE)


def _check_hierarchy_case(model, lr, scale):
    if model.link != "linear" or model.tokens != 1:
        raise ParamgeoError(f"the moment hierarchy is derived for the linear link with one "
                            f"token; got link {model.link!r} with {model.tokens} tokens")
    if not (math.isfinite(lr) and lr > 0 and math.isfinite(scale) and scale > 0):
        raise ParamgeoError(f"lr and scale must be positive numbers, got {lr} and {scale}")


def _teacher_moments(S_star, K):
    ev = np.linalg.eigvalsh((S_star + S_star.T) / 2.0)
    return [float(np.mean(ev ** k)) for k in range(1, K + 2)]


def _integrate_hierarchy(hier, y0, t):
    """Integrate a truncated hierarchy from y0 at the times t (LSODA at rtol 1e-9)."""
    from scipy.integrate import solve_ivp

    t = np.asarray(t, float)
    sol = solve_ivp(lambda _, y: hier.rhs(y), (0.0, float(t[-1])), y0, t_eval=t, rtol=1e-9,
                    atol=1e-12, method="LSODA")
    if not sol.success:
        raise ParamgeoError(f"the moment hierarchy of order {hier.order} diverged before t = "
                            f"{float(t[-1]):g} ({sol.message}): the truncation holds while the "
                            f"spectrum of S stays small (docs/online-sgd.md); integrate to a "
                            f"shorter horizon")
    return t, sol.y


def tied_moment_odes(model: AttentionIndexed, S_star: ArrayLike, S0: ArrayLike, lr: float,
                     scale: float, t: ArrayLike, *, order: int = 10) -> OrderODE:
    """Integrate the truncated moment hierarchy of tied S (:class:`TiedMomentHierarchy`) from
    S0 (a d x d matrix, e.g. the run's start scale * W0 W0^T) for the teacher S*, step size
    ``lr`` (eta, not scaled with d) and S = ``scale`` W W^T, at the times ``t`` (t = n / d^2;
    ``scipy.integrate.solve_ivp``, LSODA at rtol 1e-9). Returns an :class:`OrderODE` with mean,
    norm, overlap, cosine, moment_k = Tr(S^k) / d and mixed_k = Tr(S^k S*) / d, k <= K - 1,
    (build a :class:`TiedMomentHierarchy` to read other words)."""
    _check_hierarchy_case(model, lr, scale)
    S_star, S0 = np.asarray(S_star, float), np.asarray(S0, float)
    d = model.d
    if S_star.shape != (d, d) or S0.shape != (d, d):
        raise ParamgeoError(f"S* and S0 must be {d} x {d} matrices, got {S_star.shape} and "
                            f"{S0.shape}")
    K = int(order)
    tm = _teacher_moments(S_star, K)
    hier = TiedMomentHierarchy(K, 2.0 * lr * scale * d, model.noise, tm)
    t, y = _integrate_hierarchy(hier, hier.values(S0, S_star), t)
    out = {name: y[hier.index(w)] for name, w in _tied_words(K).items()}
    out["cosine"] = _centered(out["mean"], out["norm"], out["overlap"], tm[0], tm[1])
    return OrderODE(equations=f"tied S moment hierarchy (order {K})", t=t, order=out)


def _tied_words(K):
    words = {"mean": "s", "norm": "ss", "overlap": "st"}
    words.update({f"moment_{k}": "s" * k for k in range(3, K + 1)})
    words.update({f"mixed_{k}": "s" * k + "t" for k in range(1, K)})
    return words


#: the order parameters of untied S that :func:`untied_moment_odes` returns, as trace words
_UNTIED_WORDS = {"mean": "s", "norm": "sS", "overlap": "st", "moment_2": "ss",
                 "gram_u": "a", "gram_v": "b", "mixed_u": "at", "mixed_v": "bt"}


def untied_moment_odes(model: AttentionIndexed, S_star: ArrayLike, U0: ArrayLike, V0: ArrayLike,
                       lr: float, scale: float, t: ArrayLike, *, order: int = 6) -> OrderODE:
    """Integrate the truncated moment hierarchy of untied S = ``scale`` U V^T
    (:class:`UntiedMomentHierarchy`) from the factors U0, V0 (d x r) for the teacher S*, step
    size ``lr`` (eta, not scaled with d), at the times ``t`` (t = n / d^2; LSODA at rtol 1e-9).
    Returns an :class:`OrderODE` with mean Tr S / d, norm Tr(S S^T) / d, overlap Tr(S S*) / d,
    cosine (of the traceless parts), moment_2 = Tr(S^2) / d, gram_u = Tr(A) / d,
    gram_v = Tr(B) / d, mixed_u = Tr(A S*) / d and mixed_v = Tr(B S*) / d, with
    A = scale U U^T and B = scale V V^T."""
    _check_hierarchy_case(model, lr, scale)
    S_star, U0, V0 = (np.asarray(a, float) for a in (S_star, U0, V0))
    d = model.d
    if S_star.shape != (d, d) or U0.ndim != 2 or U0.shape[0] != d or U0.shape != V0.shape:
        raise ParamgeoError(f"S* must be {d} x {d} and U0, V0 two {d} x r matrices, got "
                            f"{S_star.shape}, {U0.shape} and {V0.shape}")
    K = int(order)
    tm = _teacher_moments(S_star, K)
    hier = UntiedMomentHierarchy(K, lr * scale * d, model.noise, tm)
    t, y = _integrate_hierarchy(hier, hier.values(U0, V0, S_star, scale), t)
    out = {name: y[hier.index(w)] for name, w in _UNTIED_WORDS.items()}
    out["cosine"] = _centered(out["mean"], out["norm"], out["overlap"], tm[0], tm[1])
    return OrderODE(equations=f"untied S moment hierarchy (order {K})", t=t, order=out)


def _factor_count(param, theta, d):
    """1 for a factorization S = W W^T (one d x r block), 2 for S = U V^T (two d x r blocks),
    read from ``param``'s spec and checked on its forward at ``theta``; any other
    parameterization is refused (the hierarchies are written in these factors)."""
    blocks = list(param.spec.unpack(np.asarray(theta, float)).values())
    ok = (len(blocks) in (1, 2) and all(b.ndim == 2 and b.shape[0] == d for b in blocks)
          and len({b.shape for b in blocks}) == 1)
    if ok:
        product = blocks[0] @ blocks[-1].T
        out = np.asarray(param.forward(np.asarray(theta, float)), float).reshape(-1)
        ok = out.size == d * d and np.allclose(out, product.ravel(), rtol=1e-10,
                                               atol=1e-12 * max(1.0, np.abs(product).max()))
    if not ok:
        raise ParamgeoError(
            f"compare_with_hierarchy needs a run through a factorization S = W W^T (one d x r "
            f"block, e.g. uut) or S = U V^T (two d x r blocks, e.g. uvt); "
            f"{getattr(param, 'name', type(param).__name__)} is neither (for direct S use "
            "compare_with_odes)")
    return len(blocks)


def compare_with_hierarchy(run: OnlineRun, teacher: Union[Teacher, ArrayLike], order: int = 10,
                           names: Sequence[str] = ("mean", "norm", "overlap"),
                           ) -> tuple[OrderODE, ODEComparison]:
    """Integrate the moment hierarchy from the first record of a ``run`` of
    :func:`~paramgeo.flows.online_sgd` (lr_exponent 0) through ``uut`` (:func:`tied_moment_odes`)
    or ``uvt`` (:func:`untied_moment_odes`) and compare the words ``names``
    (order-parameter names of those functions) with the same traces of the recorded matrices:
    max_t |sim - ode| / max_t |ode|."""
    if run.model.link != "linear" or run.model.tokens != 1:
        raise ParamgeoError("compare_with_hierarchy needs a run with the linear link and one "
                            "token")
    d = run.model.d
    S_star = np.asarray(getattr(teacher, "S", teacher), float)
    param = run.trajectory.evaluate.param
    if _factor_count(param, run.trajectory.thetas[0], d) == 2:  # untied: S = scale U V^T
        factors = [tuple(param.spec.unpack(th).values()) for th in run.trajectory.thetas]
        U0, V0 = factors[0]
        ode = untied_moment_odes(run.model, S_star, U0, V0, run.eta, run.scale, run.t, order=order)
        spec, transpose = _UNTIED_WORDS, UntiedMomentHierarchy.TRANSPOSE
        mats = [UntiedMomentHierarchy.matrices(U, V, S_star, run.scale) for U, V in factors]
    else:  # tied: S = scale W W^T
        preds = np.asarray(run.trajectory.predictors, float).reshape(-1, d, d) * run.scale
        ode = tied_moment_odes(run.model, S_star, preds[0], run.eta, run.scale, run.t,
                               order=order)
        spec, transpose = _tied_words(order), None
        mats = [{"s": S, "t": S_star} for S in preds]
    unknown = [n for n in names if n not in spec]
    if unknown:
        raise ParamgeoError(f"unknown order parameters {unknown}; choose from {sorted(spec)}")
    sim = np.array([_word_traces([spec[n] for n in names], m, transpose) for m in mats]).T
    dev = {n: float(np.max(np.abs(sim[i] - ode.order[n])) / np.max(np.abs(ode.order[n])))
           for i, n in enumerate(names)}
    return ode, ODEComparison(equations=ode.equations, deviation=dev)
