"""Rotary, sinusoidal and learned absolute position encodings, and a linear-attention control,
on a fixed-offset retrieval task (``rope-attention``).

Task: in a sequence of random tokens, position s must attend (causally, over t <= s) to the
token k positions back, t = s - k. One attention head, logits from the ``rope-attention``
plugin (every token carries a constant first feature, so a head can attend by position alone),
loss the causal cross-entropy

    ell(L) = mean_{b, s >= k} [ -L[b, s, s-k] + log sum_{t <= s} exp L[b, s, t] ],

trained by gradient descent through ``paramgeo.flows.gradient_descent`` on B sequences of length
T_train. The trained theta is evaluated unchanged on fresh sequences of lengths T_test >
T_train (``encoding=learned`` holds ``positions`` = max T_test embedding rows, of which the
rows >= T_train never enter training and keep their initial values). Under rotary encodings
the logits depend on positions through the offset t - s only (checked on the trained weights);
absolute (sinusoidal, learned) logits depend on the absolute positions.

Linear-attention control: the attention weights are the logits themselves (no softmax, as in
linear attention, Katharopoulos et al. 2020), with the rotary head's W_Q R_delta W_K^T replaced
by the unconstrained kernel of the same frequency basis,

    L[s, t] = sum_i x_s^T (cos(delta omega_i) A_i + sin(delta omega_i) B_i) x_t,  delta = t - s,

linear in the parameters c = (A_i, B_i) (r d^2 of them), L = Phi c, with the square loss
(1/2N) sum_{b, s >= k, t <= s} (L[b, s, t] - [t = s - k])^2 over N causal entries. Gradient
descent from c = 0 stays in the row space of Phi and converges to the minimum-norm
least-squares solution c* = Phi^+ y. On the B training sequences of the softmax heads the
problem is overdetermined and of full rank, and the control is c* (the unique solution, the
limit of gradient descent); on 2 sequences (fewer equations than parameters: an interpolation
problem) gradient descent with heavy-ball momentum is run from 0 and compared with c*.

Carrier analysis: the trained rotary head equals such a kernel with A_i = q_{2i} k_{2i}^T +
q_{2i+1} k_{2i+1}^T, B_i = q_{2i+1} k_{2i}^T - q_{2i} k_{2i+1}^T (q_a, k_a the columns of
W_Q, W_K); the singular values of the offset kernel F[delta] = vec(sum_i cos(delta omega_i)
A_i + sin(delta omega_i) B_i), delta = -(T_train - 1)..0, give its numerical rank. Attention
dilution: at the last query of a sequence of length T the softmax mass on the target is

    w(T) = e^{L*} / (e^{L*} + sum_{t != target} e^{L_t}) ~ 1 / (1 + c T e^{-m}),

with m the margin of the target logit over the competitors' mean and c = mean e^{L_t - mean L}
(about T competitors): 1/w - 1 = b + a (T - T_train), a = c e^{-m}, is fitted over T =
16..512 and log(1/w - 1) = log a + beta log T over T >= 2 T_train (the law: beta = 1), with
bootstrap error bars over the test sequences; a is also computed from the position-only
profile of the kernel alone. The carrier's peaks enter through the profile law 1/w - 1 = b' +
c G(T), G(T) = sum_{delta = T_train}^{T-1} e^{f(-delta) - f(-k)} (f the position-only profile:
each untrained offset weighted by the carrier itself instead of the flat rate a), fitted like
the linear law; its apparent exponent over the same T is compared with beta.

Multi-head and two-layer models (claim (e)): ``rope_transformer.py``, run after the head
unless ``--no-transformer``.

Run:  python examples/rope_retrieval.py [--d 8] [--r 8] [--offset 3] [--train-len 16]
      [--sequences 64] [--steps 2000] [--lr 0.2] [--out DIR] [--plot] [--no-transformer]
Writes DIR/rope_retrieval.csv, .md, (with --plot) .png and DIR/rope_transformer.md.

References: Su et al. (2021), "RoFormer"; Katharopoulos, Vyas, Pappas, Fleuret (2020),
"Transformers are RNNs: fast autoregressive transformers with linear attention"; Roy, Vetterli
(2007), "The effective rank" (entropy effective rank).
"""

import argparse
import csv
import importlib.util
import io
from pathlib import Path

import autograd.numpy as anp
import numpy as np

import paramgeo
from paramgeo.symmetry.equivariance import input_equivariance
from paramgeo.flows import gradient_descent
from paramgeo.io.files import save_figure, write_file
from paramgeo.losses import CallableLoss

TEST_LENGTHS = (16, 32, 64, 128)
DILUTION_LENGTHS = (16, 32, 64, 128, 256, 512)
ENCODINGS = ("rotary", "absolute", "learned")
BASE = 100.0


def sibling(name):
    """The example module ``name`` beside this file (``rope_transformer``), loaded by path."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent
                                                  / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def head(encoding, d, r, tokens, sequences, seed):
    extra = {"positions": max(TEST_LENGTHS)} if encoding == "learned" else {}
    return paramgeo.get("rope-attention", d=d, r=r, encoding=encoding, tokens=tokens,
                        sequences=sequences, token_seed=seed, constant_feature=True, base=BASE,
                        **extra)


def retrieval_loss(param, k):
    """Causal cross-entropy of attending from s to s - k (rows s >= k), on the flat logits."""
    B, T, _ = param.predictor_shape
    causal = np.tril(np.ones((T, T), bool))
    rows = np.arange(k, T)

    def ell(beta):
        L = anp.reshape(beta, (B, T, T))
        L = anp.where(causal[None], L, -1e30)
        top = anp.max(L, axis=2, keepdims=True)
        lse = anp.log(anp.sum(anp.exp(L - top), axis=2)) + top[:, :, 0]
        return anp.mean(lse[:, rows] - L[:, rows, rows - k])

    return CallableLoss(ell, m=param.m)


def evaluate(L, X, k, train_len, window=False, softmax=True):
    """Retrieval accuracy (argmax_{t <= s} L[s, t] == s - k) on rows k <= s < train_len (seen
    positions) and s >= train_len (unseen), the mean attention weight on the target, where the
    unseen rows look (the share of their argmax at a key t < train_len, and their most frequent
    argmax key), and the output error
    |o_s - x_{s-k}| / |x_{s-k}| of the attention output o_s = sum_t A[s, t] x_t (values = the
    tokens X). ``window``: attend only to s - train_len < t <= s (the offsets seen in
    training). ``softmax=False`` (linear attention): the weights A are the logits themselves."""
    T = L.shape[1]
    s, t = np.indices((T, T))
    allowed = (t <= s) & ((s - t < train_len) if window else True)
    L = np.where(allowed[None], L, -np.inf)
    if softmax:
        A = np.exp(L - L.max(axis=2, keepdims=True))
        A /= A.sum(axis=2, keepdims=True)
    else:
        A = np.where(allowed[None], L, 0.0)
    rows = np.arange(k, T)
    arg = np.argmax(L[:, rows], axis=2)
    hit = arg == (rows - k)[None]
    weight = A[:, rows, rows - k]
    target = X[:, rows - k]
    err = np.linalg.norm((A @ X)[:, rows] - target, axis=2) / np.linalg.norm(target, axis=2)
    seen = rows < train_len
    nan = float("nan")

    def unseen(values):
        return float(values[:, ~seen].mean()) if (~seen).any() else nan

    return {"acc_seen": float(hit[:, seen].mean()), "acc_unseen": unseen(hit),
            "argmax_in_train_range": unseen(arg < train_len),
            "argmax_mode": int(np.bincount(arg[:, ~seen].ravel()).argmax())
            if (~seen).any() else -1, "weight": float(weight.mean()),
            "out_err_seen": float(err[:, seen].mean()), "out_err_unseen": unseen(err),
            "attention": A[0]}


# ---------------------------------------------------------------- linear-attention control
def kernel_features(param, X):
    """Phi (B T T) x (r d^2): column (i, cos|sin, a, b) of the logit L[b, s, t] = sum_i
    x_s^T (cos(delta omega_i) A_i + sin(delta omega_i) B_i) x_t at delta = t - s."""
    B, T, d = X.shape
    delta = np.arange(T)[None, :] - np.arange(T)[:, None]
    ang = delta[..., None] * param.frequencies  # T x T x r/2
    basis = np.concatenate([np.cos(ang), np.sin(ang)], axis=-1)  # T x T x r (cos.., sin..)
    outer = np.einsum("bsa,btc->bstac", X, X).reshape(B, T, T, d * d)
    return np.einsum("stj,bstp->bstjp", basis, outer).reshape(B * T * T, -1)


def rotary_kernel(param, theta):
    """The trained rotary head as kernel coefficients c = (A_i | B_i) in the layout of
    ``kernel_features``: A_i = q_2i k_2i^T + q_2i+1 k_2i+1^T, B_i = q_2i+1 k_2i^T - q_2i k_2i+1^T."""
    blocks = param.spec.unpack(theta)
    Q, K = blocks["WQ"], blocks["WK"]
    A = [np.outer(Q[:, 2 * i], K[:, 2 * i]) + np.outer(Q[:, 2 * i + 1], K[:, 2 * i + 1])
         for i in range(param.r // 2)]
    Bm = [np.outer(Q[:, 2 * i + 1], K[:, 2 * i]) - np.outer(Q[:, 2 * i], K[:, 2 * i + 1])
          for i in range(param.r // 2)]
    return np.stack(A + Bm).ravel()


def train_linear_control(param, k, steps):
    """The linear-attention control on ``param``'s sequences: the closed-form minimum-norm
    least-squares solution c* = Phi^+ y and, for ``steps`` > 0, gradient descent with Polyak's
    heavy-ball momentum from c = 0 (step 4 / (sqrt(l_max) + sqrt(l_min))^2, momentum
    ((sqrt(kappa) - 1) / (sqrt(kappa) + 1))^2 from the extreme non-zero eigenvalues l of the
    loss Hessian Phi^T Phi / N, kappa = l_max / l_min). Its iterates are combinations of
    gradients Phi^T (.), so they stay in the row space of Phi and converge to c*. Returns
    (c, info) with c the iterate (or c* without steps)."""
    B, T, _ = param.predictor_shape
    s, t = np.indices((T, T))
    keep = np.broadcast_to(((t <= s) & (s >= k))[None], (B, T, T)).ravel()
    Phi = kernel_features(param, param.X)[keep]
    y = np.broadcast_to((t == s - k)[None], (B, T, T)).ravel()[keep].astype(float)
    N, n = Phi.shape
    U, sv, Vt = np.linalg.svd(Phi, full_matrices=False)
    rank = int((sv > sv[0] * max(N, n) * np.finfo(float).eps).sum())
    c_star = Vt[:rank].T @ ((U[:, :rank].T @ y) / sv[:rank])  # Phi^+ y
    info = {"sequences": B, "equations": N, "parameters": n, "rank": rank,
            "residual_minnorm": float(np.linalg.norm(Phi @ c_star - y) / np.linalg.norm(y)),
            "norm_minnorm": float(np.linalg.norm(c_star)), "steps": steps}
    if not steps:
        return c_star, info
    lmax, lmin = sv[0] ** 2 / N, sv[rank - 1] ** 2 / N
    lr = 4.0 / (np.sqrt(lmax) + np.sqrt(lmin)) ** 2
    beta = ((np.sqrt(lmax / lmin) - 1) / (np.sqrt(lmax / lmin) + 1)) ** 2
    c, previous = np.zeros(n), np.zeros(n)
    for _ in range(steps):
        c, previous = c - lr * Phi.T @ (Phi @ c - y) / N + beta * (c - previous), c
    row = Vt[:rank].T @ (Vt[:rank] @ c)
    info.update(residual_gd=float(np.linalg.norm(Phi @ c - y) / np.linalg.norm(y)),
                gd_vs_minnorm=float(np.linalg.norm(c - c_star) / np.linalg.norm(c_star)),
                off_row_space=float(np.linalg.norm(c - row) / np.linalg.norm(c)),
                condition=float(np.sqrt(lmax / lmin)))
    return c, info


def control_logits(param, c):
    """The control's B x T x T logits sum_j basis_j(t - s) x_s^T C_j x_t (C_j the d x d blocks
    of c in the layout of ``kernel_features``), one d x d product per basis function."""
    T, d = param.tokens, param.d
    delta = np.arange(T)[None, :] - np.arange(T)[:, None]
    ang = delta[..., None] * param.frequencies
    basis = np.concatenate([np.cos(ang), np.sin(ang)], axis=-1)
    X = param.X
    out = np.zeros(param.predictor_shape)
    for j, C in enumerate(np.asarray(c).reshape(-1, d, d)):
        out += basis[None, :, :, j] * ((X @ C) @ np.swapaxes(X, 1, 2))
    return out


# ---------------------------------------------------------------- carrier and dilution
def offset_kernel(param, c, deltas):
    """F[delta] = vec(sum_i cos(delta omega_i) A_i + sin(delta omega_i) B_i), len(deltas) x
    d^2; column 0 is the position-only logit f(delta) between constant features."""
    ang = np.asarray(deltas)[:, None] * param.frequencies[None]
    return np.concatenate([np.cos(ang), np.sin(ang)], axis=1) @ c.reshape(param.r, -1)


def offset_kernel_spectrum(param, c, train_len):
    """Singular values (normalised by the largest) of F[delta] = vec(sum_i cos(delta omega_i)
    A_i + sin(delta omega_i) B_i), delta = -(train_len - 1)..0, a train_len x d^2 matrix; the
    count above 1e-2 and the entropy effective rank exp(-sum p_i log p_i), p = sv / sum sv."""
    F = offset_kernel(param, c, -np.arange(train_len))  # train_len x d^2
    sv = np.linalg.svd(F, compute_uv=False)
    p = sv / sv.sum()
    p = p[p > 0]
    constant = np.linalg.norm(F[:, 0]) / np.linalg.norm(F)  # the (1, 1) entry: position only
    return {"sv": sv / sv[0], "rank_1e-2": int((sv > 1e-2 * sv[0]).sum()),
            "effective_rank": float(np.exp(-(p * np.log(p)).sum())), "constant_share": constant}


def last_row_logits(param, theta):
    """Logits of the last query s = T - 1 against every key, B x T (rotary), computed without
    the T x T array: (R_{p_s} W_Q^T x_s) . (R_{p_t} W_K^T x_t)."""
    blocks = param.spec.unpack(theta)
    pos = np.arange(param.tokens)
    K = param.rotate(param.X @ blocks["WK"], pos)
    q = param.rotate(param.X[:, -1:] @ blocks["WQ"], pos[-1:])
    return np.einsum("bqr,btr->bt", q, K)


def dilution_fit(d, r, theta, k, train_len, sequences, seed, kernel, boot=200):
    """Attention mass w(T) on the target at the last query (fresh sequences, T in
    DILUTION_LENGTHS), the mean margin m(T) of the target logit over the competitors, and two
    fits with bootstrap error bars over the sequences: the free exponent log(1/w - 1) = log a +
    beta log T over T >= 2 T_train (the law says beta = 1), and the law 1/w - 1 = b + a (T -
    T_train) over all T (b: the T_train trained offsets, a = c e^-m per untrained one). Second
    route for a, from the carrier alone (no sequences): the mean of e^{f(delta) - f(-k)} over
    the untrained offsets delta = -(T-1)..-T_train of the position-only logit f = column 0 of
    ``kernel`` (a callable deltas -> F), at the largest T. The carrier's peaks: the profile law
    1/w - 1 = b' + c G(T), G(T) = sum_{delta = T_train}^{T-1} e^{f(-delta) - f(-k)} (the
    carrier's own competitor weights in place of the flat rate a; rope_transformer.dilution_fit),
    and its apparent exponent beta_G, in ``res["carrier"]``."""
    per_len = []
    for T in DILUTION_LENGTHS:
        p = head("rotary", d, r, T, sequences, seed)
        L = last_row_logits(p, theta)
        if T == DILUTION_LENGTHS[0]:  # the shortcut is the plugin's last row
            np.testing.assert_allclose(L, p.forward(theta)[:, -1], rtol=1e-10, atol=1e-10)
        target = T - 1 - k
        A = np.exp(L - L.max(axis=1, keepdims=True))
        A /= A.sum(axis=1, keepdims=True)
        per_len.append({"w": A[:, target], "hit": np.argmax(L, axis=1) == target,
                        "m": L[:, target] - np.delete(L, target, axis=1).mean(axis=1)})
    m = np.array([row["m"].mean() for row in per_len])
    f = kernel(-np.arange(DILUTION_LENGTHS[-1]))[:, 0]
    a_carrier = float(np.mean(np.exp(f[train_len:] - f[k])))
    rt = sibling("rope_transformer")
    G = rt.cumulative_profile(np.exp(f - f[k]), DILUTION_LENGTHS, train_len)
    fit = rt.dilution_fit(DILUTION_LENGTHS, [row["w"] for row in per_len], train_len,
                          {"carrier": G}, boot, seed)
    fit.update(a_carrier=a_carrier, m=m, acc=[float(row["hit"].mean()) for row in per_len],
               a_per_T=(1.0 / fit["w"] - 1.0) / np.array(DILUTION_LENGTHS),
               c=fit["a"] * np.exp(m[-1]), carrier=fit.pop("profile")["carrier"])
    return fit


# ---------------------------------------------------------------- the experiment
def run(d=8, r=8, k=3, train_len=16, sequences=64, steps=2000, lr=0.2, seed=0,
        interpolating_sequences=2, control_steps=3000):
    rows, patterns, thetas = [], {}, {}

    def add_rows(label, L_of, train_loss, shift_error, invariant, softmax=True):
        for T in TEST_LENGTHS:
            test = head(label if label in ENCODINGS else "rotary", d, r, T, sequences,
                        seed + 1)  # fresh token sequences (the controls: rotary's tokens)
            L = L_of(test)
            for window in (False, True):
                ev = evaluate(L, test.X, k, train_len, window, softmax)
                patterns[label, T, window] = ev.pop("attention")
                rows.append({"encoding": label, "test_len": T,
                             "attention": "window" if window else "causal",
                             "train_loss": train_loss, **ev, "shift_error_trained": shift_error,
                             "offset_invariant": invariant})

    for encoding in ENCODINGS:
        train = head(encoding, d, r, train_len, sequences, seed)
        theta0 = 0.1 * np.random.default_rng(seed).standard_normal(train.n)
        traj = gradient_descent(train, retrieval_loss(train, k), theta0, steps, lr,
                                record_every=steps, conserved=False)
        theta = thetas[encoding] = traj.final_theta
        shift = input_equivariance(train, seed=seed)  # generic theta: a property of the map
        moved = train.logits(theta, shift=1000 if encoding != "learned" else 7)
        trained_shift = float(np.linalg.norm(moved - train.forward(theta))
                              / np.linalg.norm(train.forward(theta)))
        add_rows(encoding, lambda test: test.forward(theta), traj.losses[-1], trained_shift,
                 shift.equivariant)
    # linear-attention control on the rotary frequency basis: on the same sequences (least
    # squares, c* = the limit of gradient descent from 0) and on fewer sequences than
    # parameters (an interpolation problem, trained by gradient descent and compared with c*)
    controls = {}
    for label, B, n_steps in (("linear (control)", sequences, 0),
                              ("linear (interpolant)", interpolating_sequences, control_steps)):
        c, info = train_linear_control(head("rotary", d, r, train_len, B, seed), k, n_steps)
        controls[label] = (c, info)
        loss = 0.5 * info.get("residual_gd", info["residual_minnorm"]) ** 2
        add_rows(label, lambda test, c=c: control_logits(test, c), loss, 0.0, True,
                 softmax=False)
    rot = head("rotary", d, r, train_len, 2, seed)
    c_rot = rotary_kernel(rot, thetas["rotary"])
    # the rotary head is the kernel model at c(theta): the same logits by three routes
    np.testing.assert_allclose(control_logits(rot, c_rot), rot.forward(thetas["rotary"]),
                               rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose((kernel_features(rot, rot.X) @ c_rot).reshape(rot.predictor_shape),
                               rot.forward(thetas["rotary"]), rtol=1e-9, atol=1e-9)
    carrier = {"rotary": offset_kernel_spectrum(rot, c_rot, train_len)}
    carrier.update({label: offset_kernel_spectrum(rot, c, train_len)
                    for label, (c, _) in controls.items()})
    dilution = dilution_fit(d, r, thetas["rotary"], k, train_len, 2 * sequences, seed + 1,
                            lambda deltas: offset_kernel(rot, c_rot, deltas))
    return rows, patterns, {"control": {label: info for label, (_, info) in controls.items()},
                            "carrier": carrier, "dilution": dilution}


def write_outputs(rows, patterns, extra, out, k, train_len, plot):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    write_file(out / "rope_retrieval.csv", buffer.getvalue(), what="table", replace=True)

    def fmt(x, spec=".3f"):
        return "-" if np.isnan(x) else format(x, spec)

    lines = [f"Retrieval of the token {k} back, trained on length T_train = {train_len}; "
             "accuracy of argmax_t L[s, t] = s - k on fresh sequences; attention causal (t <= s)"
             f" or windowed (s - {train_len} < t <= s: the offsets seen in training); output "
             "error |sum_t A[s, t] x_t - x_(s-k)| / |x_(s-k)|.", "",
             "| encoding | test length | attention | train loss | acc. s < T_train | "
             "acc. s >= T_train | argmax at t < T_train (s >= T_train) | most frequent argmax "
             "(s >= T_train) | mean weight on target "
             "| output error s < T_train | output error s >= T_train | shift error (trained) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['encoding']} | {row['test_len']} | {row['attention']} | "
                     f"{row['train_loss']:.3g} | {fmt(row['acc_seen'])} | "
                     f"{fmt(row['acc_unseen'])} | {fmt(row['argmax_in_train_range'])} | "
                     f"{row['argmax_mode'] if row['argmax_mode'] >= 0 else '-'} | "
                     f"{row['weight']:.3f} | {fmt(row['out_err_seen'], '.3g')} | "
                     f"{fmt(row['out_err_unseen'], '.3g')} | {row['shift_error_trained']:.1e} |")
    lines += ["", "Linear-attention control (square loss on the weights, kernel coefficients "
              "c = (A_i, B_i)); c* = Phi^+ y, the minimum-norm least-squares solution:", "",
              "| control | sequences | equations | parameters | rank Phi | relative residual of c* "
              "| momentum-GD steps | GD residual | abs(c_GD - c*) / abs(c*) | GD off the row space |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for label, info in extra["control"].items():
        gd = [f"{info['steps']}", f"{info['residual_gd']:.1e}", f"{info['gd_vs_minnorm']:.1e}",
              f"{info['off_row_space']:.1e}"] if info["steps"] else ["-"] * 4
        lines.append(f"| {label} | {info['sequences']} | {info['equations']} | "
                     f"{info['parameters']} | {info['rank']} | {info['residual_minnorm']:.2e} | "
                     + " | ".join(gd) + " |")
    lines += ["", "| offset kernel F[delta], delta in (-T_train, 0] | singular values / largest | "
              "count > 1e-2 | effective rank | share of the constant-feature entry |",
              "|---|---|---|---|---|"]
    for name, car in extra["carrier"].items():
        sv = ", ".join(f"{v:.1e}" for v in car["sv"][:10])
        lines.append(f"| {name} | {sv} | {car['rank_1e-2']} | {car['effective_rank']:.2f} | "
                     f"{car['constant_share']:.3f} |")
    dil = extra["dilution"]
    prof = dil["carrier"]
    lo, hi = dil["beta_range"]
    lines += ["", "Attention dilution (rotary, causal, last query of fresh sequences): mass w on "
              f"the target. Free exponent over T = {lo}..{hi}: log(1/w - 1) = log a + beta log T, "
              f"beta = {dil['beta']:.3f} +- {dil['beta_err']:.3f}. Law over all T: 1/w - 1 = b + "
              f"a (T - {train_len}), a = c e^-m = {dil['a']:.4f} +- {dil['a_err']:.4f}, b = "
              f"{dil['b']:.3f} +- {dil['b_err']:.3f}, c = a e^m(T = {hi}) = {dil['c']:.3g}. From the "
              "carrier alone (position-only logit f, untrained offsets up to "
              f"{hi}): a = mean e^(f(delta) - f(-{k})) = {dil['a_carrier']:.4f}. The carrier's "
              f"peaks: profile law 1/w - 1 = b' + c G(T), G(T) = sum_(delta = {train_len}..T-1) "
              f"e^(f(-delta) - f(-{k})), c = {prof['c']:.3f} +- {prof['c_err']:.3f}, b' = "
              f"{prof['b']:.3f} +- {prof['b_err']:.3f}; its apparent exponent over T = {lo}..{hi}: "
              f"beta_G = {prof['beta']:.3f} +- {prof['beta_err']:.3f}.", "",
              "| T | mass on target w | law 1/(1 + b + a (T - T_train)) | relative deviation | "
              "profile law 1/(1 + b' + c G(T)) | relative deviation | (1/w - 1) / T | accuracy | "
              "mean margin m |", "|---|---|---|---|---|---|---|---|---|"]
    for i, T in enumerate(dil["lengths"]):
        lines.append(f"| {T} | {dil['w'][i]:.4f} | {dil['law_w'][i]:.4f} | "
                     f"{dil['rel_dev'][i]:.2f} | {prof['w'][i]:.4f} | {prof['rel_dev'][i]:.2f} | "
                     f"{dil['a_per_T'][i]:.4f} | {dil['acc'][i]:.3f} | {dil['m'][i]:.2f} |")
    table = "\n".join(lines)
    write_file(out / "rope_retrieval.md", table + "\n", what="table", replace=True)
    print(table)
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(2, 3, figsize=(15, 8.4))
        colors = {"rotary": "C0", "absolute": "C3", "learned": "C2", "linear (control)": "C1",
                  "linear (interpolant)": "C4"}
        ax = axes[0, 0]
        for encoding, color in colors.items():
            for attention, ls in (("causal", "-"), ("window", "--")):
                sel = [row for row in rows if row["encoding"] == encoding
                       and row["attention"] == attention and not np.isnan(row["acc_unseen"])]
                ax.plot([row["test_len"] for row in sel], [row["acc_unseen"] for row in sel],
                        marker="o", color=color, ls=ls, label=f"{encoding}, {attention}")
        ax.set_title(f"accuracy at positions >= {train_len} (never trained)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("test sequence length")
        ax.set_ylabel("retrieval accuracy")
        ax.set_ylim(-0.05, 1.05)
        ax.legend(fontsize=6)
        T = TEST_LENGTHS[-2]
        for ax, encoding in zip((axes[0, 1], axes[0, 2], axes[1, 0]),
                                ("rotary", "learned", "linear (control)")):
            A = patterns[encoding, T, False]
            ax.imshow(A, cmap="magma", vmin=0, vmax=1)
            ax.axhline(train_len - 0.5, color="c", lw=0.8)
            ax.set_title(f"{encoding}: causal attention weights, length {T}", fontsize=9)
            ax.set_xlabel("key position t")
            ax.set_ylabel("query position s")
        ax = axes[1, 1]
        for name, car in extra["carrier"].items():
            ax.semilogy(np.arange(1, len(car["sv"]) + 1), np.maximum(car["sv"], 1e-18),
                        marker="o", color=colors[name],
                        label=f"{name} (eff. rank {car['effective_rank']:.1f})")
        ax.set_title("offset kernel F[delta]: singular values / largest")
        ax.set_xlabel("index")
        ax.legend(fontsize=8)
        ax = axes[1, 2]
        ax.loglog(dil["lengths"], dil["w"], "o", color="C0", label="mass on target (measured)")
        ax.loglog(dil["lengths"], dil["law_w"], "-", color="k",
                  label=f"1/(1 + b + a (T - {train_len})), a = {dil['a']:.3g}")
        ax.loglog(dil["lengths"], prof["w"], ":", color="C3",
                  label=f"carrier profile law (beta_G = {prof['beta']:.2f})")
        ax.loglog(dil["lengths"], dil["acc"], "s--", color="C0", alpha=0.5, label="accuracy")
        ax.set_title(f"attention dilution (beta = {dil['beta']:.2f} +- {dil['beta_err']:.2f})")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length T")
        ax.legend(fontsize=8)
        fig.tight_layout()
        save_figure(fig, out / "rope_retrieval.png")
        print(f"wrote {out / 'rope_retrieval.png'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=8)
    ap.add_argument("--r", type=int, default=8)
    ap.add_argument("--offset", type=int, default=3)
    ap.add_argument("--train-len", type=int, default=16)
    ap.add_argument("--sequences", type=int, default=64)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--lr", type=float, default=0.2)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "output"))
    ap.add_argument("--plot", action="store_true")
    ap.add_argument("--no-transformer", action="store_true",
                    help="skip the multi-head and two-layer models (rope_transformer.py)")
    args = ap.parse_args()
    rows, patterns, extra = run(args.d, args.r, args.offset, args.train_len, args.sequences,
                                args.steps, args.lr)
    write_outputs(rows, patterns, extra, args.out, args.offset, args.train_len, args.plot)
    if not args.no_transformer:  # claim (e): multi-head and two-layer models, same task
        rt = sibling("rope_transformer")
        results = rt.run(args.offset, args.train_len, args.sequences, args.steps, args.lr,
                         d=args.d, r=args.r)
        table = rt.report(results, args.offset, args.train_len)
        write_file(Path(args.out) / "rope_transformer.md", table + "\n", what="table",
                   replace=True)
        print("\n" + table)


if __name__ == "__main__":
    main()
