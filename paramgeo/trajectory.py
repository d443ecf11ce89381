"""Gradient flow and gradient descent through any parameterization, their push-forward to the
predictor, the quotient flow, conserved quantities, and the vanishing-initialisation limit.

For a loss ell on predictors and L(theta) = ell(phi(theta)):

* gradient flow        d theta / dt = -grad L(theta) = -J(theta)^T grad ell(phi(theta)),
  integrated with ``scipy.integrate.solve_ivp`` (:func:`gradient_flow`);
* gradient descent     theta_{t+1} = theta_t - eta_t J(theta_t)^T grad ell(phi(theta_t)), with
  an optional schedule eta_t and optional minibatch (stochastic) gradients drawn from a seeded
  generator (:func:`gradient_descent`);
* push-forward         d beta / dt = -J J^T grad ell(beta), beta = phi(theta): the flow the
  parameterization induces on predictors, with the metric J J^T (:func:`predictor_flow`);
* quotient flow        d theta / dt = -h(grad L), h the horizontal projection: the Riemannian
  gradient flow of ell on the quotient Theta / G with the quotient metric, lifted horizontally
  (:func:`quotient_flow`); it equals the gradient flow because grad L = J^T grad ell lies in
  range J^T, orthogonal to ker J which contains the vertical space (:func:`compare_flows`);
* conserved quantities theta^T S theta for every symmetric S in the Lie algebra of a linear
  symmetry action (:func:`conserved_quantities`), recorded along every trajectory;
* the vanishing-initialisation limit of diagonal (commuting) parameterizations: the
  saddle-to-saddle sequence of Pesme and Flammarion (2023) (:func:`saddle_to_saddle`).

The gradient is always the chain rule through the plugin's VJP (``paramgeo.losses.pullback``),
never a dense Jacobian. Flows and descent return a :class:`Trajectory`.

Default integrator: LSODA. Small initialisations (theta_0 of scale alpha -> 0) make these
problems stiff in the practical sense: long plateaus where the vector field is O(alpha) followed
by fast transitions, and near a minimum the Jacobian of the vector field, -Hess L, has
eigenvalues spread over many orders of magnitude. LSODA switches automatically between a
non-stiff Adams method on plateaus and a stiff BDF method where stiffness appears, so it needs
no user tuning; pass ``method="RK45"``/``"DOP853"`` (explicit) or ``"BDF"``/``"Radau"`` (implicit)
to force one. The absolute tolerance must sit below the smallest coordinate scale that matters:
from an initialisation of scale alpha, coordinates of size alpha^2 decide when a mode escapes its
plateau, so pass ``atol`` well below alpha^2 (e.g. 1e-6 alpha^2).

References: Kunin, Sagastuy-Brena, Ganguli, Yamins, Tanaka (2021), "Neural mechanics: symmetry
and broken conservation laws in deep learning dynamics"; Marcotte, Gribonval, Peyre (2023),
"Abide by the law and follow the flow: conservation laws for gradient flows"; Pesme,
Flammarion (2023), "Saddle-to-saddle dynamics in diagonal linear networks"; Woodworth et al.
(2020), "Kernel and rich regimes in overparametrized models"; Absil, Mahony, Sepulchre (2008),
"Optimization algorithms on matrix manifolds" (horizontal lifts of Riemannian gradients).
"""

import dataclasses
import math
from pathlib import Path

import numpy as np

from .errors import ParamgeoError
from .losses import LinearMeasurements, pullback
from .results import Result, to_jsonable

# ---------------------------------------------------------------------------- progress


def _progress_callback(progress, label):
    """(callback, close) for an engine's ``progress`` argument: a callable
    ``progress(done, total)`` is used as it is; ``True`` shows the one progress bar of paramgeo
    (:func:`paramgeo.cli._common.progress_bar`, click on stderr); False/None shows nothing."""
    if callable(progress):
        return progress, lambda: None
    if not progress:
        return None, lambda: None
    from .cli._common import progress_bar

    cm = progress_bar(label)
    return cm.__enter__(), lambda: cm.__exit__(None, None, None)


# ---------------------------------------------------------------------------- conserved


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ConservedQuantities(Result):
    """Quadratic conserved quantities Q_c(theta) = theta^T S_c theta of gradient flow.

    ``matrices`` are sparse symmetric n x n matrices S_c, ``labels`` readable formulas,
    ``combinations`` (q x k) the coefficients of S_c on the Lie-algebra basis whose
    infinitesimal actions are the columns of ``symmetry().generators``, ``nonlinear`` the
    basis elements skipped because their action is not linear in theta, ``note`` why the list
    may be empty.
    """

    matrices: tuple = ()
    labels: tuple = ()
    combinations: np.ndarray = None
    nonlinear: tuple = ()
    note: str = ""

    def __post_init__(self):
        object.__setattr__(self, "matrices", tuple(self.matrices))
        object.__setattr__(self, "labels", tuple(self.labels))
        object.__setattr__(self, "combinations", np.zeros((0, 0)) if self.combinations is None
                           else np.asarray(self.combinations, float))
        object.__setattr__(self, "nonlinear", tuple(self.nonlinear))

    def __len__(self):
        return len(self.matrices)

    def values(self, thetas):
        """(T, q) array of Q_c(theta_t) for parameters ``thetas`` of shape (T, n)."""
        thetas = np.atleast_2d(np.asarray(thetas, float))
        cols = [np.sum(np.asarray(S @ thetas.T).T * thetas, axis=1) for S in self.matrices]
        return np.stack(cols, axis=1) if cols else np.zeros((len(thetas), 0))

    def scales(self, thetas):
        """(T, q) array of theta^T |S_c| theta (|S| entrywise): the size of the terms whose
        cancellation Q_c measures, the denominator of the relative drift."""
        thetas = np.atleast_2d(np.asarray(thetas, float))
        cols = [np.sum(np.asarray(abs(S) @ np.abs(thetas.T)).T * np.abs(thetas), axis=1)
                for S in self.matrices]
        return np.stack(cols, axis=1) if cols else np.zeros((len(thetas), 0))

    def to_dict(self):
        """JSON-able: the labels, the combinations, and each S_c as sparse (row, col, value)
        triples of its upper triangle."""
        mats = []
        for S in self.matrices:
            coo = S.tocoo()
            keep = coo.row <= coo.col
            mats.append({"row": coo.row[keep], "col": coo.col[keep], "value": coo.data[keep]})
        return to_jsonable({"labels": self.labels, "matrices": mats,
                            "combinations": self.combinations, "nonlinear": self.nonlinear,
                            "note": self.note})

    def __str__(self):
        head = f"ConservedQuantities: {len(self)}" + (f" ({self.note})" if self.note else "")
        return "\n".join([head] + [f"  {lab}" for lab in self.labels])

    def __repr__(self):
        return f"<ConservedQuantities {list(self.labels)}{' ' + self.note if self.note else ''}>"


_CONSERVED_CACHE = {}


def _quadratic_label(S, names, max_terms=6):
    S = S.tocoo()
    terms = []
    for i, j, v in sorted(zip(S.row, S.col, S.data)):
        if j < i or abs(v) < 1e-12:
            continue
        coef = v if i == j else 2 * v
        mono = f"{names[i]}^2" if i == j else f"{names[i]}*{names[j]}"
        terms.append((coef, mono))
    if not terms:
        return "0"
    out = []
    for k, (coef, mono) in enumerate(terms[:max_terms]):
        sign = "-" if coef < 0 else ("+" if k else "")
        mag = abs(coef)
        body = mono if math.isclose(mag, 1.0) else f"{mag:.4g}*{mono}"
        out.append(f"{sign} {body}".strip() if k else f"{sign}{body}")
    text = " ".join(out)
    return text + (f" + ... ({len(terms)} terms)" if len(terms) > max_terms else "")


def conserved_quantities(param, *, max_dim=2000, tol=1e-10):
    """Quadratic conservation laws of gradient flow from the symmetry group's Lie algebra.

    For a linear action theta -> exp(t A) theta leaving phi invariant, L = ell o phi satisfies
    <grad L(theta), A theta> = 0 for every theta. If S is a *symmetric* element of the Lie
    algebra a = span{A_k}, then along gradient flow

        d/dt theta^T S theta = 2 theta^T S theta' = -2 <S theta, grad L(theta)> = 0,

    so theta^T S theta is conserved (for gradient descent it changes by eta^2 g^T S g per step:
    O(eta^2)). Generically, A_k is recovered as the Jacobian of theta -> X_k theta (the k-th
    column of ``symmetry().generators(theta)``) by evaluating it on the basis vectors e_j; a
    column that is not linear in theta (checked at a random point) is skipped. The symmetric
    elements of a are {sum_k c_k A_k : sum_k c_k (A_k - A_k^T) = 0}, a null space computed from
    the Gram matrix of the antisymmetric parts (the A_k and the linearity test come from
    :func:`paramgeo.symmetry.linear_action_matrices`); combinations giving S = 0 are dropped,
    and the basis is put in echelon form so that each law involves few generators. Examples:
    u_i^2 - v_i^2 for u * v; the entries of U^T U - V^T V for U V^T (GL(r)); none for U U^T
    (so(r) is skew). Parameterizations with n > ``max_dim`` are skipped (note says so).

    References: Kunin et al. (2021), "Neural mechanics", Section 4 (rescale symmetry);
    Marcotte, Gribonval, Peyre (2023), "Abide by the law and follow the flow", Section 3;
    Zhao, Ganev, Walters, Yu, Dehmamy (2023), "Symmetries, flat minima, and the conserved
    quantities of gradient flow".
    """
    import scipy.linalg
    import scipy.sparse as sp

    if not param.provides("symmetry"):
        return ConservedQuantities(note="no symmetry declared")
    key = (type(param), tuple(sorted((k, str(v)) for k, v in param.sizes.items())))
    if key in _CONSERVED_CACHE:
        return _CONSERVED_CACHE[key]
    n = param.n
    if n > max_dim:
        return ConservedQuantities(note=f"skipped: n = {n} > max_dim = {max_dim}")
    from .symmetry import linear_action_matrices

    A, linear = linear_action_matrices(param.symmetry(), n, sparse=True)
    K = len(A)
    if K == 0:
        result = ConservedQuantities(note="discrete symmetry only")
        _CONSERVED_CACHE[key] = result
        return result
    nonlinear = tuple(k for k in range(K) if k not in linear)

    def stacked(mats):
        data, r_idx, c_idx = [], [], []
        for c, M in enumerate(mats):
            M = M.tocoo()
            data.append(M.data)
            r_idx.append(M.row.astype(np.int64) * n + M.col)
            c_idx.append(np.full(M.nnz, c))
        return sp.csr_matrix((np.concatenate(data), (np.concatenate(r_idx),
                                                     np.concatenate(c_idx))),
                             shape=(n * n, len(mats)))

    if not linear:
        return ConservedQuantities(nonlinear=nonlinear, note="no linear generator")
    lin_A = [A[k] for k in linear]
    MA = stacked(lin_A)
    MD = stacked([M - M.T for M in lin_A])
    gram_d = (MD.T @ MD).toarray()
    w, V = np.linalg.eigh(gram_d)
    null = V[:, w <= tol * max(1.0, float(np.abs(w).max(initial=0.0)))]
    combos = np.zeros((0, K))
    matrices, labels = [], []
    if null.shape[1]:
        gram_a = null.T @ (MA.T @ MA).toarray() @ null
        w2, V2 = np.linalg.eigh(gram_a)
        keep = null @ V2[:, w2 > tol * max(1.0, float(np.abs(w2).max(initial=0.0)))]
        q = keep.shape[1]
        if q:
            _, _, piv = scipy.linalg.qr(keep.T, pivoting=True)
            B = keep @ np.linalg.inv(keep[piv[:q], :])
            B[np.abs(B) < 1e-12] = 0.0
            order = np.argsort(piv[:q])
            B = B[:, order]
            combos = np.zeros((q, K))
            combos[:, linear] = B.T
            names = param.spec.labels()
            for c in range(q):
                S = sum(B[i, c] * lin_A[i] for i in range(len(linear)) if B[i, c] != 0.0)
                S = ((S + S.T) * 0.5).tocsr()
                S.eliminate_zeros()
                matrices.append(S)
                labels.append(_quadratic_label(S, names))
    note = "" if matrices else "the Lie algebra has no symmetric element"
    result = ConservedQuantities(matrices, labels, combos, nonlinear, note)
    _CONSERVED_CACHE[key] = result
    return result


# ---------------------------------------------------------------------------- trajectories


def _pyplot_figure(figsize):
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ParamgeoError(
            "plotting needs matplotlib: pip install 'paramgeo[plot]' (or pip install matplotlib)"
        ) from None
    return Figure(figsize=figsize)


def _check_plot_path(path):
    path = Path(path)
    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise ParamgeoError(f"cannot write a plot to {str(path)!r}: use a .png, .svg or .pdf name")
    if not path.parent.exists():
        raise ParamgeoError(f"cannot write a plot to {str(path)!r}: folder {str(path.parent)!r} "
                            "does not exist")
    return path


@dataclasses.dataclass(frozen=True)
class Trajectory(Result):
    """A recorded run: times, parameters (T x n), predictors (T x m), loss, |grad L|, and the
    quadratic conserved quantities of the symmetry group (T x q) with their relative drift
    max_t |Q(t) - Q(0)| / max_t theta^T |S| theta (zero to integrator tolerance for gradient
    flow, O(eta) over a run of descent: O(eta^2) per step)."""

    method: str
    times: np.ndarray
    thetas: np.ndarray
    predictors: np.ndarray
    losses: np.ndarray
    grad_norms: np.ndarray
    success: bool
    message: str
    n_evals: int
    conserved: np.ndarray = None
    conserved_labels: tuple = ()
    conserved_drift: np.ndarray = None
    conserved_scale: np.ndarray = None

    @property
    def final_theta(self):
        return self.thetas[-1]

    @property
    def final_predictor(self):
        return self.predictors[-1]

    @property
    def max_conserved_drift(self):
        """The largest relative drift over the conserved quantities (nan if there are none)."""
        if self.conserved_drift is None or len(self.conserved_drift) == 0:
            return float("nan")
        return float(np.max(self.conserved_drift))

    def summary(self):
        """A short JSON-able summary (no arrays of the whole trajectory)."""
        drift = self.conserved_drift if self.conserved_drift is not None else []
        return to_jsonable({
            "method": self.method, "records": len(self.times), "t_final": self.times[-1],
            "loss_initial": self.losses[0], "loss_final": self.losses[-1],
            "grad_norm_final": self.grad_norms[-1], "n_evals": self.n_evals,
            "success": self.success, "message": self.message,
            "conserved": dict(zip(self.conserved_labels, drift)),
        })

    def __str__(self):
        drift = ""
        if self.conserved_labels:
            drift = (f"; {len(self.conserved_labels)} conserved quantities, max relative drift "
                     f"{self.max_conserved_drift:.2e}")
        return (
            f"Trajectory ({self.method}): {len(self.times)} records to t = {self.times[-1]:.4g}; "
            f"loss {self.losses[0]:.4g} -> {self.losses[-1]:.4g}; |grad L| final "
            f"{self.grad_norms[-1]:.3g}; {self.n_evals} gradient evaluations{drift}; "
            f"{self.message}"
        )

    def plot(self, path, *, max_coords=12, title=None):
        """Write a figure (PNG, SVG or PDF by the suffix of ``path``): loss against time on
        log-log axes, the largest ``max_coords`` predictor coordinates against time (log time),
        and the relative drift of the conserved quantities when there are any. Needs matplotlib
        (the ``plot`` extra). Returns the path."""
        path = _check_plot_path(path)
        panels = 3 if self.conserved_labels else 2
        fig = _pyplot_figure((5.0 * panels, 4.0))
        axes = fig.subplots(1, panels)
        t = np.asarray(self.times, float)
        pos = t > 0
        ax = axes[0]
        ax.loglog(t[pos], np.maximum(self.losses[pos], 1e-300), color="C0")
        ax.set_xlabel("time" if "flow" in self.method else "step")
        ax.set_ylabel("loss")
        ax.set_title("loss")
        ax.grid(True, which="major", alpha=0.3)
        ax = axes[1]
        P = np.asarray(self.predictors)
        order = np.argsort(-np.max(np.abs(P), axis=0))[:max_coords]
        for c in sorted(order):
            ax.semilogx(t[pos], P[pos, c], label=f"beta[{c}]")
        ax.set_xlabel("time" if "flow" in self.method else "step")
        ax.set_ylabel("predictor coordinate")
        shown = "" if P.shape[1] <= max_coords else f" (largest {max_coords} of {P.shape[1]})"
        ax.set_title("predictor" + shown)
        ax.grid(True, alpha=0.3)
        if len(order) <= 12:
            ax.legend(fontsize=7, ncol=2)
        if panels == 3:
            ax = axes[2]
            scale = self.conserved_scale
            dev = np.abs(self.conserved - self.conserved[0]) / np.maximum(scale, 1e-300)
            for c in range(min(dev.shape[1], 8)):
                ax.loglog(t[pos], np.maximum(dev[pos, c], 1e-17),
                          label=self.conserved_labels[c][:28])
            ax.set_xlabel("time" if "flow" in self.method else "step")
            ax.set_ylabel("|Q(t) - Q(0)| / scale")
            ax.set_title("conserved quantities: relative drift")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=6)
        if title:
            fig.suptitle(title)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        return path



def _finish(param, value, grad, method, times, thetas, success, message, n_evals, conserved):
    thetas = np.asarray(thetas, float)
    predictors = np.array([np.asarray(param.forward_flat(t)) for t in thetas])
    losses = np.array([value(t) for t in thetas])
    grad_norms = np.array([np.linalg.norm(grad(t)) for t in thetas])
    cq = conserved_quantities(param) if conserved else ConservedQuantities()
    values = cq.values(thetas)
    if len(cq):
        scale = np.max(cq.scales(thetas), axis=0)
        drift = np.max(np.abs(values - values[0]), axis=0) / np.maximum(scale, 1e-300)
    else:
        scale = drift = np.zeros(0)
    return Trajectory(method, np.asarray(times, float), thetas, predictors, losses, grad_norms,
                      bool(success), str(message), int(n_evals), values, cq.labels, drift, scale)


def _check_stops(stop_loss, stop_grad):
    """The early-stopping levels must be non-negative numbers (or None)."""
    for what, level in (("stop_loss", stop_loss), ("stop_grad", stop_grad)):
        if level is not None and not (np.isfinite(level) and level >= 0):
            raise ParamgeoError(f"{what} must be a non-negative number, got {level}")


#: solve_ivp methods that form and factor a dense n x n Jacobian (LSODA does once stiff).
IMPLICIT_METHODS = ("LSODA", "BDF", "Radau")
#: Above this n they need gigabytes per matrix (LSODA's Fortran crashes on its work array).
MAX_IMPLICIT_DIM = 10_000


def gradient_flow(param, loss, theta0, t_final, *, method="LSODA", rtol=1e-8, atol=1e-10,
                  n_records=200, log_times=False, stop_loss=None, stop_grad=None, t_eval=None,
                  progress=False, conserved=True):
    """Integrate d theta/dt = -J^T grad ell(phi(theta)) from theta0 to t_final.

    ``method`` is any ``solve_ivp`` method: LSODA (default: switches between Adams and BDF, see
    the module docstring for why small initialisations need it), RK45/DOP853 (explicit),
    BDF/Radau (implicit, for stiff problems). Records at ``n_records`` times, evenly spaced (or
    log-spaced from t_final * 1e-6 when ``log_times``, useful for small initialisations), or at
    the times ``t_eval``. ``stop_loss``/``stop_grad`` stop the integration when the loss/the
    gradient norm falls below them (terminal events). ``progress``: a callable
    ``progress(done, total)`` called as the integration advances (done of total = 1000 parts of
    [0, t_final]), or True for paramgeo's progress bar on stderr. ``conserved`` records the
    quadratic conserved quantities (:func:`conserved_quantities`).
    """
    theta0 = param.as_theta(theta0)
    value, grad = pullback(param, loss)
    return _flow(param, value, grad, grad, theta0, t_final, f"flow ({method})", method=method,
                 rtol=rtol, atol=atol, n_records=n_records, log_times=log_times,
                 stop_loss=stop_loss, stop_grad=stop_grad, t_eval=t_eval, progress=progress,
                 conserved=conserved)


def _flow(param, value, grad, field, theta0, t_final, label, *, method, rtol, atol, n_records,
          log_times, stop_loss, stop_grad, t_eval, progress, conserved):
    """Integrate d theta/dt = -field(theta); record value and grad (see gradient_flow)."""
    if not (np.isfinite(t_final) and t_final > 0):
        raise ParamgeoError(f"the final time must be a positive number, got {t_final}")
    for what, tol in (("rtol", rtol), ("atol", atol)):
        if not (np.isfinite(tol) and tol > 0):
            raise ParamgeoError(f"the tolerance {what} must be a positive number, got {tol}")
    _check_stops(stop_loss, stop_grad)
    if method in IMPLICIT_METHODS and theta0.size > MAX_IMPLICIT_DIM:
        raise ParamgeoError(
            f"the {method} integrator factors an n x n Jacobian and n = {theta0.size} exceeds "
            f"{MAX_IMPLICIT_DIM} ({8e-9 * theta0.size ** 2:.3g} GB per matrix); use an explicit "
            "integrator (RK45 or DOP853) or gradient descent")
    from scipy.integrate import solve_ivp

    counter = {"n": 0, "shown": 0}

    def rhs(t, theta):
        counter["n"] += 1
        done = int(1000 * min(t, t_final) / t_final)
        if report is not None and done > counter["shown"]:
            report(done, 1000)
            counter["shown"] = done
        return -field(theta)

    if t_eval is not None:
        t_eval = np.asarray(t_eval, float)
    elif log_times:
        t_eval = np.concatenate([[0.0], np.geomspace(t_final * 1e-6, t_final, n_records - 1)])
    else:
        t_eval = np.linspace(0.0, t_final, n_records)
    events, reasons = [], []
    if stop_loss is not None:
        def below(_, theta):
            return value(theta) - stop_loss
        below.terminal = True
        events.append(below)
        reasons.append(f"loss below {stop_loss:g}")
    if stop_grad is not None:
        def flat(_, theta):
            return np.linalg.norm(grad(theta)) - stop_grad
        flat.terminal = True
        events.append(flat)
        reasons.append(f"gradient norm below {stop_grad:g}")
    report, close = _progress_callback(progress, f"gradient flow to t = {t_final:g}")
    try:
        sol = solve_ivp(rhs, (0.0, t_final), theta0, method=method, t_eval=t_eval, rtol=rtol,
                        atol=atol, events=events or None)
    except ValueError as exc:
        raise ParamgeoError(f"solve_ivp refused the problem: {exc}") from None
    finally:
        close()
    times, thetas, message = sol.t, sol.y.T, str(sol.message)
    if sol.status == 1:  # a terminal event: record the stopping point too
        hits = [(te[0], ye[0], why) for te, ye, why in zip(sol.t_events, sol.y_events, reasons)
                if len(te)]
        t_stop, y_stop, why = min(hits, key=lambda h: h[0])
        if not len(times) or times[-1] < t_stop:
            times, thetas = np.append(times, t_stop), np.vstack([thetas, y_stop])
        message = f"{why} at t = {t_stop:.4g}"
    return _finish(param, value, grad, label, times, thetas, sol.status >= 0, message,
                   counter["n"], conserved)


# ---------------------------------------------------------------------------- descent


def schedule(kind, lr, steps=None):
    """A step-size schedule eta(t) for :func:`gradient_descent`.

    * ``constant``: eta_t = lr;
    * ``inverse``:  eta_t = lr / (1 + t / tau), tau = steps / 10 (Robbins-Monro type decay);
    * ``cosine``:   eta_t = lr (1 + cos(pi t / steps)) / 2 (Loshchilov and Hutter 2017);
    * ``step``:     eta_t = lr * 0.1^floor(3 t / steps) (three equal stages).
    """
    if not (np.isfinite(lr) and lr > 0):
        raise ParamgeoError(f"the step size must be a positive number, got {lr}")
    if kind == "constant":
        return lambda t: lr
    if steps is None or steps <= 0:
        raise ParamgeoError(f"the {kind} schedule needs the number of steps")
    if kind == "inverse":
        tau = max(steps / 10.0, 1.0)
        return lambda t: lr / (1.0 + t / tau)
    if kind == "cosine":
        return lambda t: lr * 0.5 * (1.0 + math.cos(math.pi * min(t, steps) / steps))
    if kind == "step":
        return lambda t: lr * 0.1 ** math.floor(3 * t / steps)
    raise ParamgeoError(f"unknown schedule {kind!r}; choose constant, inverse, cosine or step")


def gradient_descent(param, loss, theta0, steps, lr, *, record_every=1, stop_loss=None,
                     stop_grad=None, batch_size=None, seed=None, progress=False, conserved=True):
    """theta_{t+1} = theta_t - lr_t J^T grad ell(phi(theta_t)) for ``steps`` steps.

    ``lr`` is a float or a callable ``lr(t)`` (a schedule, see :func:`schedule`). With
    ``batch_size`` the gradient of step t is that of the loss on ``batch_size`` samples drawn
    without replacement by ``numpy.random.default_rng(seed)`` (stochastic gradient descent;
    needs a loss built from samples). Records every ``record_every`` steps (and the last).
    ``stop_loss``/``stop_grad`` stop early when the loss/the full gradient norm falls below
    them (checked at recorded steps and, when given, every step). ``progress``: a callable
    ``progress(done, total)`` called after every step, or True for paramgeo's progress bar.
    """
    theta = param.as_theta(theta0).copy()
    if int(steps) != steps or steps < 0:
        raise ParamgeoError(f"the number of steps must be a non-negative integer, got {steps}")
    steps = int(steps)
    if record_every < 1:
        raise ParamgeoError(f"record_every must be at least 1, got {record_every}")
    _check_stops(stop_loss, stop_grad)
    value, grad = pullback(param, loss)
    step_grad = grad
    rng = None
    if batch_size is not None:
        if loss.N is None:
            loss.minibatch(np.arange(1))  # raises the readable error
        if not 1 <= batch_size <= loss.N:
            raise ParamgeoError(f"the batch size must be between 1 and N = {loss.N}, "
                                f"got {batch_size}")
        rng = np.random.default_rng(seed)
    schedule_fn = lr if callable(lr) else (lambda _t: lr)
    times, thetas = [0], [theta.copy()]
    message = f"completed {steps} steps"
    n_evals = 0
    report, close = _progress_callback(progress, f"gradient descent, {steps} steps")
    try:
        for t in range(steps):
            if rng is not None:
                idx = rng.choice(loss.N, size=batch_size, replace=False)
                step_grad = pullback(param, loss.minibatch(idx))[1]
            with np.errstate(over="ignore", invalid="ignore"):
                g = step_grad(theta)
                theta = theta - schedule_fn(t) * g
            n_evals += 1
            if report is not None:
                report(t + 1, steps)
            if not np.all(np.isfinite(theta)):
                raise ParamgeoError(
                    f"gradient descent diverged at step {t + 1}; lower the step size")
            if (t + 1) % record_every == 0 or t + 1 == steps:
                times.append(t + 1)
                thetas.append(theta.copy())
            stop = None
            if stop_loss is not None and value(theta) < stop_loss:
                stop = f"loss below {stop_loss} at step {t + 1}"
            elif stop_grad is not None and np.linalg.norm(grad(theta)) < stop_grad:
                stop = f"gradient norm below {stop_grad} at step {t + 1}"
            if stop:
                message = stop
                if times[-1] != t + 1:
                    times.append(t + 1)
                    thetas.append(theta.copy())
                break
    finally:
        close()
    method = "gd" if rng is None else f"sgd (batch {batch_size}, seed {seed})"
    return _finish(param, value, grad, method, times, thetas, True, message, n_evals, conserved)


# ---------------------------------------------------------------------------- push-forward


def predictor_velocity(param, theta, loss):
    """d beta/dt = -J J^T grad ell(beta) at beta = phi(theta): the push-forward of the gradient
    flow (two matrix-free products: the plugin's VJP, then its JVP)."""
    theta = param.as_theta(theta)
    beta = np.asarray(param.forward_flat(theta))
    return -param.jvp(theta, param.vjp(theta, loss.grad(beta)))


@dataclasses.dataclass(frozen=True)
class PredictorPath(Result):
    """A predictor-space trajectory beta(t) (T x m) integrated on its own."""

    method: str
    times: np.ndarray
    predictors: np.ndarray
    n_evals: int


def predictor_flow(param, loss, theta0, t_final, *, metric=None, t_eval=None, n_records=50,
                   method="LSODA", rtol=1e-10, atol=1e-12):
    """Integrate the predictor flow d beta/dt = -M grad ell(beta) from beta_0 = phi(theta_0).

    With ``metric(beta, w)`` (a closed form of M w, e.g. 2 (Q W + W Q) for Q = U U^T and
    symmetric W, or sqrt(4 beta^2 + c^2) w for u * v with the conserved c = u^2 - v^2) the state
    is beta alone: an ODE on predictors that never looks at theta. Without it, M = J J^T at a
    fiber point carried along by the minimum-norm horizontal lift theta' = J^+ beta'
    (``geometry.horizontal_lift``: the pseudo-inverse of a dense J under the rank policy, an
    independent route from the VJP), and the state is (beta, theta): beta is integrated as its
    own variable, so comparing it with phi(theta_gf(t)) from :func:`gradient_flow` tests the
    push-forward identity
    d phi(theta)/dt = J theta' = -J J^T grad ell.
    """
    from scipy.integrate import solve_ivp

    from .geometry import horizontal_lift

    theta0 = param.as_theta(theta0)
    beta0 = np.asarray(param.forward_flat(theta0), float)
    counter = {"n": 0}
    m = param.m
    if metric is not None:
        def rhs(_, beta):
            counter["n"] += 1
            return -np.asarray(metric(beta, loss.grad(beta)), float).ravel()
        y0 = beta0
    else:
        def rhs(_, state):
            counter["n"] += 1
            beta, theta = state[:m], state[m:]
            J = param.jacobian(theta)
            dbeta = -J @ (J.T @ loss.grad(beta))
            return np.concatenate([dbeta, horizontal_lift(param, theta, dbeta)])
        y0 = np.concatenate([beta0, theta0])
    if t_eval is None:
        t_eval = np.linspace(0.0, t_final, n_records)
    sol = solve_ivp(rhs, (0.0, t_final), y0, method=method, t_eval=t_eval, rtol=rtol,
                    atol=atol)
    label = "predictor flow (closed-form metric)" if metric is not None else \
        "predictor flow (J J^T, horizontal lift)"
    return PredictorPath(label, sol.t, sol.y[:m].T, counter["n"])


def quotient_flow(param, loss, theta0, t_final, *, generic=False, method="LSODA", rtol=1e-8,
                  atol=1e-10, n_records=200, t_eval=None, conserved=False):
    """The quotient Riemannian gradient flow, lifted horizontally:
    d theta/dt = -h(grad L(theta)), h = ``geometry.horizontal_projection`` (the plugin's closed
    form, or the generic V V^T route with ``generic=True``).

    On the quotient Theta / G with the quotient metric, the Riemannian gradient of the induced
    loss lifts to the horizontal part of grad L (Absil, Mahony, Sepulchre 2008, Section 3.6.2).
    Since grad L = J^T grad ell is already horizontal, the result equals :func:`gradient_flow`:
    a test of the projection and of the statement (see :func:`compare_flows`)."""
    from .geometry import horizontal_projection

    theta0 = param.as_theta(theta0)
    value, grad = pullback(param, loss)

    def field(theta):
        return horizontal_projection(param, theta, grad(theta), generic=generic)

    return _flow(param, value, grad, field, theta0, t_final, f"quotient flow ({method})",
                 method=method, rtol=rtol, atol=atol, n_records=n_records, log_times=False,
                 stop_loss=None, stop_grad=None, t_eval=t_eval, progress=False,
                 conserved=conserved)


def mirror_flow(param, loss, theta0, t_eval, *, rtol=1e-10, atol=1e-12):
    """The predictor path (T, m) of the mirror flow d/dt grad R(beta) = -grad ell(beta) from
    beta0 = phi(theta0): a shorthand for ``paramgeo.mirror.mirror_flow(
    paramgeo.mirror.mirror_potential(param, theta0), loss, t_eval)`` (the mirror engine owns
    the potential and the integration, including the conjugate-map route of numerical
    potentials; Li, Wang, Lee, Arora 2022). For commuting parameterizations it equals the
    pushed-forward gradient flow (:func:`compare_flows` with ``mirror=True``)."""
    from . import mirror

    path, _ = mirror.mirror_flow(mirror.mirror_potential(param, theta0), loss,
                                 np.asarray(t_eval, float), rtol=rtol, atol=atol)
    return path


@dataclasses.dataclass(frozen=True)
class FlowComparison(Result):
    """Gradient flow against its push-forward and the quotient flow, on common times.

    Deviations are max_t |a(t) - b(t)| / max_t |b(t)| on predictors; ``vertical_fraction`` is
    max_t |grad L - h(grad L)| / |grad L| along the gradient flow (zero: the gradient is
    horizontal)."""

    times: np.ndarray
    predictor_flow_deviation: float
    quotient_flow_deviation: float
    vertical_fraction: float
    mirror_flow_deviation: float
    notes: str


def compare_flows(param, loss, theta0, t_final, *, metric=None, n_records=40, rtol=1e-10,
                  atol=1e-12, mirror=None):
    """Integrate gradient flow, the predictor flow (:func:`predictor_flow`, with ``metric`` if
    given) and the quotient flow (:func:`quotient_flow`) from theta0, and report how far the
    pushed-forward parameter trajectory phi(theta(t)) is from each. ``mirror`` adds the
    predictor mirror flow: True integrates the one of ``paramgeo.mirror`` (its potential from
    theta0, :func:`mirror_flow`); a callable (times, beta0) -> (T, m) predictor path is
    compared as it is."""
    from .geometry import horizontal_projection

    t_eval = np.linspace(0.0, t_final, n_records)
    gf = gradient_flow(param, loss, theta0, t_final, t_eval=t_eval, rtol=rtol, atol=atol,
                       conserved=False)
    ref = gf.predictors
    scale = max(float(np.max(np.abs(ref))), 1e-300)
    pf = predictor_flow(param, loss, theta0, t_final, metric=metric, t_eval=t_eval, rtol=rtol,
                        atol=atol)
    qf = quotient_flow(param, loss, theta0, t_final, t_eval=t_eval, rtol=rtol, atol=atol)
    vertical = 0.0
    _, grad = pullback(param, loss)
    for theta in gf.thetas:
        g = grad(theta)
        gn = np.linalg.norm(g)
        if gn > 0:
            h = horizontal_projection(param, theta, g, generic=True)
            vertical = max(vertical, float(np.linalg.norm(g - h) / gn))
    mirror_dev, notes = float("nan"), "no mirror flow given"
    if mirror is True:
        def mirror(times, _beta0):
            return mirror_flow(param, loss, theta0, times, rtol=rtol, atol=atol)
    if mirror is not None and mirror is not False:
        path = np.asarray(mirror(t_eval, ref[0]))
        mirror_dev = float(np.max(np.abs(path - ref)) / scale)
        notes = "mirror flow compared"
    return FlowComparison(
        t_eval,
        float(np.max(np.abs(pf.predictors - ref)) / scale),
        float(np.max(np.abs(qf.predictors - ref)) / scale),
        vertical, mirror_dev, notes)


# ---------------------------------------------------------------------------- saddle-to-saddle


@dataclasses.dataclass(frozen=True)
class SaddleSequence(Result):
    """The vanishing-initialisation limit: saddles beta_k visited on [t_k, t_{k+1}) in rescaled
    time t / log(1/alpha), the dual variable s at each jump time and the gradient on each
    plateau (s(t) = s_k - (t - t_k) grad ell(beta_k) there), and the plateau losses."""

    times: np.ndarray
    saddles: np.ndarray
    duals: np.ndarray
    gradients: np.ndarray
    losses: np.ndarray
    upper: float
    lower: float
    converged: bool

    def dual_at(self, t):
        """s(t), piecewise linear in the rescaled time t."""
        k = max(int(np.searchsorted(self.times, t, side="right")) - 1, 0)
        return self.duals[k] - (t - self.times[k]) * self.gradients[k]

    def saddle_at(self, t):
        """The saddle occupied at rescaled time t."""
        k = max(int(np.searchsorted(self.times, t, side="right")) - 1, 0)
        return self.saddles[k]

    def crossing_time(self, i, level):
        """First rescaled time at which s_i(t) reaches ``level`` (inf if never)."""
        for k in range(len(self.times)):
            s0, g = self.duals[k, i], self.gradients[k, i]
            end = self.times[k + 1] if k + 1 < len(self.times) else np.inf
            if (s0 - level) * np.sign(-g) >= 0 and s0 == level:
                return float(self.times[k])
            if g != 0:
                dt = (s0 - level) / g
                if 0 <= dt and self.times[k] + dt <= end:
                    return float(self.times[k] + dt)
        return float("inf")

    def __str__(self):
        lines = [f"SaddleSequence: {len(self.times)} saddles "
                 f"({'reaches a minimiser' if self.converged else 'not converged'})"]
        for k, (t, b, L) in enumerate(zip(self.times, self.saddles, self.losses)):
            support = np.flatnonzero(np.abs(b) > 1e-12)
            lines.append(f"  t_{k} = {t:.6g}  loss {L:.6g}  support {support.tolist()}")
        return "\n".join(lines)


def _constrained_min(loss, free_lo, free_hi):
    """argmin ell(beta) with beta_i in [free_lo_i, free_hi_i] (0 where both are 0)."""
    from scipy.optimize import lsq_linear, minimize

    free = np.flatnonzero((free_lo < 0) | (free_hi > 0))
    beta = np.zeros(loss.m)
    if not len(free):
        return beta
    if isinstance(loss, LinearMeasurements):  # squared loss: a bounded least squares
        A = loss.A
        lo, hi = free_lo[free], free_hi[free]
        if np.all(np.isinf(lo)) and np.all(np.isinf(hi)):
            beta[free] = np.linalg.lstsq(A[:, free], loss.y, rcond=None)[0]
        else:
            res = lsq_linear(A[:, free], loss.y, bounds=(lo, hi), method="bvls", tol=1e-14)
            beta[free] = res.x
        return beta

    def f(z):
        b = np.zeros(loss.m)
        b[free] = z
        return float(loss.value(b)), np.asarray(loss.grad(b))[free]

    res = minimize(f, np.zeros(len(free)), jac=True, method="L-BFGS-B",
                   bounds=list(zip(free_lo[free], free_hi[free])),
                   options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10000})
    beta[free] = res.x
    return beta


def saddle_to_saddle(loss, *, upper=1.0, lower=1.0, max_saddles=100, tol=1e-10):
    """The vanishing-initialisation limit of gradient flow for the *diagonal* model
    beta = u * v (a two-layer diagonal linear network, the ``hadamard`` parameterization):
    Pesme and Flammarion (2023), "Saddle-to-saddle dynamics in diagonal linear networks",
    Algorithm 1, written for a general loss ell on predictors with box thresholds.

    It is not a generic engine over parameterizations: the jump rule below is derived for
    u * v (coordinatewise, commuting fields) and holds for no other model. Its input is only
    the loss on predictors (no plugin); the model is implied. The same recursion with
    ``lower=None`` and ``upper=1/2`` describes a non-negative diagonal model (the eigenvalues
    of M = W W^T when they evolve in a fixed eigenbasis, see examples/lotka_volterra.py).

    For beta = u * v from u_0 = sqrt(2) alpha 1, v_0 = 0, u^2 - v^2 = 2 alpha^2 is conserved,
    beta' = -2 sqrt(beta^2 + alpha^4) grad ell, i.e. (1/2) arcsinh(beta / alpha^2) =
    -int_0^t grad ell. In rescaled time tau = t / log(1/alpha) the dual variable
    s(tau) = -int_0^tau grad ell(beta) satisfies |s_i| <= 1 in the limit alpha -> 0, with
    beta_i = 0 where |s_i| < 1 and sign(beta_i) = s_i where |s_i| = 1. Algorithm:

        t_0 = 0, s_0 = 0, beta_0 = 0; for k = 0, 1, ...:
          g = grad ell(beta_k); stop if g = 0 (a global minimiser: the minimum-l1 interpolator
          for squared loss in the overparameterised case);
          dt = min over i of the time s_i - dt g_i needs to reach +upper (g_i < 0) or -lower
               (g_i > 0), over coordinates not already on that boundary;
          t_{k+1} = t_k + dt, s_{k+1} = s_k - dt g;
          beta_{k+1} = argmin ell(beta) subject to beta_i >= 0 where s_i = +upper,
                       beta_i <= 0 where s_i = -lower, beta_i = 0 elsewhere.

    ``upper``/``lower`` are the activation thresholds (1 for u * v; ``lower=None`` keeps beta
    non-negative, as for the eigenvalues of M = W W^T, where log m_k / log(1/alpha) =
    -2 + 4 s_k and a mode switches on at s_k = 1/2). The constrained problems are bounded least
    squares (``scipy.optimize.lsq_linear``, BVLS) for the squared loss
    (:class:`paramgeo.losses.LinearMeasurements`), L-BFGS-B otherwise.
    """
    m = loss.m
    if m is None:
        raise ParamgeoError("saddle_to_saddle needs a loss with a known predictor dimension")
    lower_val = np.inf if lower is None else float(lower)
    s, beta, t = np.zeros(m), np.zeros(m), 0.0
    times, saddles, duals, grads, losses = [], [], [], [], []
    converged = False
    for _ in range(max_saddles):
        g = np.asarray(loss.grad(beta), float)
        times.append(t)
        saddles.append(beta.copy())
        duals.append(s.copy())
        grads.append(g.copy())
        losses.append(float(loss.value(beta)))
        if np.max(np.abs(g)) <= tol * max(1.0, float(np.max(np.abs(loss.grad(np.zeros(m)))))):
            converged = True
            break
        with np.errstate(divide="ignore", invalid="ignore"):
            up = np.where((g < 0) & (s < upper - 1e-13), (upper - s) / -g, np.inf)
            down = np.where((g > 0) & (s > -lower_val + 1e-13), (s + lower_val) / g, np.inf)
        dt = float(min(up.min(), down.min()))
        if not np.isfinite(dt):
            break
        t += dt
        s = s - dt * g
        s[np.abs(s - upper) < 1e-11] = upper
        if lower is not None:
            s[np.abs(s + lower_val) < 1e-11] = -lower_val
        free_hi = np.where(s >= upper, np.inf, 0.0)
        free_lo = np.where(s <= -lower_val, -np.inf, 0.0)
        beta = _constrained_min(loss, free_lo, free_hi)
    return SaddleSequence(np.array(times), np.array(saddles), np.array(duals), np.array(grads),
                          np.array(losses), float(upper),
                          float("inf") if lower is None else float(lower), converged)


def jump_times(times, losses, plateau_losses):
    """Times at which a recorded loss curve crosses the midpoints between consecutive plateau
    losses (the jump k -> k+1 is dated where the loss passes (L_k + L_{k+1}) / 2)."""
    times, losses = np.asarray(times, float), np.asarray(losses, float)
    out = []
    for a, b in zip(plateau_losses[:-1], plateau_losses[1:]):
        level = 0.5 * (a + b)
        idx = np.flatnonzero(losses <= level)
        if not len(idx) or idx[0] == 0:
            out.append(float("nan"))
            continue
        i = idx[0]
        t0, t1, l0, l1 = times[i - 1], times[i], losses[i - 1], losses[i]
        out.append(float(t0 + (level - l0) * (t1 - t0) / (l1 - l0)) if l1 != l0 else float(t1))
    return np.array(out)


__all__ = [
    "ConservedQuantities", "FlowComparison", "PredictorPath", "SaddleSequence", "Trajectory",
    "compare_flows", "conserved_quantities", "gradient_descent", "gradient_flow", "jump_times",
    "mirror_flow", "predictor_flow", "predictor_velocity", "quotient_flow", "saddle_to_saddle",
    "schedule",
]
