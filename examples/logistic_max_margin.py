"""Gradient descent on the logistic loss over separable data: convergence in direction to the
hard-margin SVM at rate 1 / log t (Soudry, Hoffer, Nacson, Gunasekar, Srebro 2018, "The implicit
bias of gradient descent on separable data"), and early stopping.

Data: a Gaussian mixture x = y mu + xi, y = +-1 equiprobable, xi ~ N(0, I_d), |mu| = ``snr``,
d = 50 > N = 40 training points (so the training set is linearly separable), 4000 test points.
Model: the linear predictor beta = w (``deep-diagonal`` with depth 1), loss
``paramgeo.losses.Logistic(X, y)``, gradient descent from w_0 = 0 with constant step
``lr`` through ``paramgeo.flows.gradient_descent``. The SVM w* = argmin |w| s.t. y_i <x_i, w> >= 1
is solved independently by ``paramgeo.losses.max_margin`` (SLSQP, with its KKT certificate).

Reported against t: 1 - cos(w_t, w*), the direction gap |w_t / |w_t| - w* / |w*|| times log t
and times log t / log log t (Soudry et al., Thm 3: the gap is O(log log t / log t) in general,
O(1 / log t) when the residual w_t - w* log t stays bounded), |w_t| / log t (w_t ~ w* log t, so
it tends to |w*|), the training loss and the test error; the test errors of w*, of the mean
direction sum_i y_i x_i (the first GD step) and of the Bayes direction mu for reference.

Run:  python examples/logistic_max_margin.py [--steps 100000] [--lr 1.0] [--snr 2.0]
      [--seed 0] [--out DIR] [--plot]
Writes DIR/logistic_max_margin.csv, .md and (with --plot) .png.
"""

import argparse
import csv
from pathlib import Path

import numpy as np

import paramgeo
from paramgeo.flows import gradient_descent
from paramgeo.losses import Logistic, max_margin


def mixture(rng, N, mu):
    y = np.where(rng.random(N) < 0.5, -1.0, 1.0)
    return y[:, None] * mu + rng.standard_normal((N, mu.size)), y


def test_error(w, X, y):
    return float(np.mean(np.sign(X @ w) != y))


def run(steps=100000, lr=1.0, snr=2.0, d=50, N=40, n_test=4000, seed=0):
    rng = np.random.default_rng(seed)
    mu = np.zeros(d)
    mu[0] = snr
    X, y = mixture(rng, N, mu)
    Xt, yt = mixture(rng, n_test, mu)
    svm = max_margin(X, y)
    lin = paramgeo.get("deep-diagonal", p=d, depth=1)
    traj = gradient_descent(lin, Logistic(X, y), np.zeros(d), steps, lr, record_every=1,
                            conserved=False)
    marks = np.unique(np.round(np.logspace(0, np.log10(steps), 41)).astype(int))
    rows = []
    for t in marks:
        w = traj.thetas[t]
        u = w / np.linalg.norm(w)
        gap = float(np.linalg.norm(u - svm.direction))
        rows.append({"t": int(t), "one_minus_cos": float(1.0 - u @ svm.direction),
                     "gap": gap, "gap_log_t": gap * np.log(t) if t > 1 else float("nan"),
                     "gap_log_t_over_loglog_t": gap * np.log(t) / np.log(np.log(t)) if t > 2
                     else float("nan"),
                     "norm_over_log_t": float(np.linalg.norm(w) / np.log(t)) if t > 1
                     else float("nan"),
                     "train_loss": float(traj.losses[t]), "test_error": test_error(w, Xt, yt)})
    ref = {"svm_norm": float(np.linalg.norm(svm.w)), "svm_margin": svm.margin,
           "svm_kkt_residual": svm.kkt_residual, "svm_support": len(svm.support),
           "svm_test_error": test_error(svm.w, Xt, yt),
           "mean_direction_test_error": test_error(X.T @ y, Xt, yt),
           "bayes_test_error": test_error(mu, Xt, yt)}
    return rows, ref


def write_outputs(rows, ref, out, plot, lr):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "logistic_max_margin.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    best = min(rows, key=lambda row: row["test_error"])
    lines = [f"SVM (SLSQP): |w*| = {ref['svm_norm']:.4f}, margin {ref['svm_margin']:.4f}, "
             f"{ref['svm_support']} support vectors, KKT residual {ref['svm_kkt_residual']:.1e}; "
             f"test error: SVM {ref['svm_test_error']:.4f}, mean direction sum y_i x_i "
             f"{ref['mean_direction_test_error']:.4f}, Bayes direction mu "
             f"{ref['bayes_test_error']:.4f}; best GD iterate t = {best['t']} "
             f"(test error {best['test_error']:.4f}). Step size {lr}.", "",
             "| t | 1 - cos(w_t, w*) | gap | gap * log t | gap * log t / log log t | \\|w_t\\| / log t | train loss | "
             "test error |", "|---|---|---|---|---|---|---|---|"]
    for row in rows[::4] + ([rows[-1]] if (len(rows) - 1) % 4 else []):
        lines.append(f"| {row['t']} | {row['one_minus_cos']:.3e} | {row['gap']:.3e} | "
                     f"{row['gap_log_t']:.3f} | {row['gap_log_t_over_loglog_t']:.3f} | "
                     f"{row['norm_over_log_t']:.3f} | "
                     f"{row['train_loss']:.3e} | {row['test_error']:.4f} |")
    table = "\n".join(lines)
    (out / "logistic_max_margin.md").write_text(table + "\n")
    print(table)
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        t = np.array([row["t"] for row in rows])
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
        gap = np.array([row["gap"] for row in rows])
        axes[0].loglog(t, gap, "o-", ms=3, label="|w_t/|w_t| - w*/|w*||")
        axes[0].loglog(t, [row["one_minus_cos"] for row in rows], "s-", ms=3,
                       label="1 - cos(w_t, w*)")
        late = t >= 100
        c = np.median(gap[late] * np.log(t[late]))
        axes[0].loglog(t[t > 1], c / np.log(t[t > 1]), "k--", label=f"{c:.2f} / log t")
        axes[0].set_xlabel("iteration t")
        axes[0].set_title("direction: convergence to the max-margin SVM")
        axes[0].legend(fontsize=8)
        axes[1].semilogx(t, [row["test_error"] for row in rows], "o-", ms=3, label="GD iterate")
        for key, label, ls in (("svm_test_error", "max-margin SVM", "--"),
                               ("mean_direction_test_error", "mean direction sum y_i x_i", ":"),
                               ("bayes_test_error", "Bayes direction mu", "-.")):
            axes[1].axhline(ref[key], color="k", ls=ls, lw=1, label=label)
        axes[1].axvline(best["t"], color="C3", lw=0.8, label=f"early stop t = {best['t']}")
        axes[1].set_xlabel("iteration t")
        axes[1].set_ylabel("test error")
        axes[1].set_title("test error along the path")
        axes[1].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "logistic_max_margin.png", dpi=120)
        print(f"wrote {out / 'logistic_max_margin.png'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100000)
    ap.add_argument("--lr", type=float, default=1.0)
    ap.add_argument("--snr", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "output"))
    ap.add_argument("--plot", action="store_true")
    args = ap.parse_args()
    rows, ref = run(args.steps, args.lr, args.snr, seed=args.seed)
    write_outputs(rows, ref, args.out, args.plot, args.lr)


if __name__ == "__main__":
    main()
