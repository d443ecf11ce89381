"""Query-Key attention scores S = Q K^T (``qk-attention``, default r = 2, one head): PAC-Bayes
KL in parameter space and in the quotient, neutral versus implicit-bias prior, over prior scales.

Setup (about a minute per seed on two cores for d = 4, r = 2):

* tokens x, x' ~ N(0, I_d), target y = x^T S* x' + N(0, 0.1^2) with S* = Q* K*^T / d, Q*, K*
  (d x r) of unit-scale random entries; d = 4, r = 2 (n = 16 parameters, quotient dimension
  r (2d - r) = 12);
* model y_hat = x^T (sum_h Q_h K_h^T) x', trained by plain SGD (one pair per step, constant
  step, no regulariser) from Q, K of scale ``alpha``;
* posterior Q = N(theta_SGD, sigma_Q^2 I), sigma_Q the largest grid value whose Gibbs empirical
  risk (loss min(1, (y_hat - y)^2)) is within 0.01 of the risk at theta_SGD;
* priors N(0, s^2 I) and the implicit-bias prior built from them, for every s in ``SCALES``;
  quotient KLs by Monte Carlo through the orbits of GL(r) per head (r = 1: one-dimensional
  quadrature; r = 2: importance sampling in Cartan coordinates, ``inner_samples`` draws per
  component), error bars = standard errors; certificates from estimate + 2 standard errors,
  union bound over the scales.

Run:  python examples/qk_attention_pacbayes.py [--seeds 3] [--samples 40] [--d 4] [--r 2]
      [--heads 1] [--inner-samples 128] [--out DIR] [--plot]
Writes DIR/qk_attention_pacbayes.csv, .md and (with --plot) .png.
"""

import argparse
import csv
import time
from pathlib import Path

import numpy as np

import paramgeo
from paramgeo import pacbayes as pb

SCALES = (0.25, 0.5, 1.0, 2.0)
SIGMA_GRID = (0.005, 0.01, 0.02, 0.05, 0.1)


def predictions(param, thetas, X, Xp):
    S = np.array([param.forward(th).sum(0) for th in np.atleast_2d(thetas)])  # sum of heads
    return np.einsum("ti,bij,tj->bt", X, S, Xp)


def bounded_risk(param, thetas, X, Xp, y):
    return float(np.mean(np.minimum(1.0, (predictions(param, thetas, X, Xp) - y) ** 2)))


def one_seed(seed, d=4, r=2, heads=1, n_train=60, alpha=0.1, lr=0.01, steps=6000, samples=40,
             scales=SCALES, delta=0.05, inner_samples=128):
    rng = np.random.default_rng(seed)
    qk = paramgeo.get("qk-attention", d=d, r=r, heads=heads)
    q_star, k_star = rng.standard_normal((d, r)), rng.standard_normal((d, r))
    S_star = q_star @ k_star.T / d
    X, Xp = rng.standard_normal((n_train, d)), rng.standard_normal((n_train, d))
    y = np.einsum("ti,ij,tj->t", X, S_star, Xp) + 0.1 * rng.standard_normal(n_train)
    theta = alpha * rng.standard_normal(qk.n)
    for _ in range(steps):
        i = rng.integers(n_train)
        res = X[i] @ qk.forward(theta).sum(0) @ Xp[i] - y[i]
        G = np.broadcast_to(res * np.outer(X[i], Xp[i]), (heads, d, d))
        theta = theta - lr * qk.vjp(theta, G)
    risk0 = bounded_risk(qk, theta, X, Xp, y)
    sigma, gibbs = SIGMA_GRID[0], None
    for s in SIGMA_GRID:
        r = bounded_risk(qk, theta + s * rng.standard_normal((1000, qk.n)), X, Xp, y)
        if r <= risk0 + 0.01:
            sigma, gibbs = s, r
    if gibbs is None:
        gibbs = bounded_risk(qk, theta + sigma * rng.standard_normal((1000, qk.n)), X, Xp, y)
    post = pb.DiagonalGaussian.isotropic(theta, sigma)
    rep = pb.pacbayes_report(qk, post, scales, n_train, delta, gibbs, method="montecarlo",
                             samples=samples, seed=seed, inner_samples=inner_samples)
    certs = {(prior, s): c for prior, s, c in rep.certificates}
    rows = []
    for s in scales:
        pk = {p.prior: p for p in rep.priors if p.scale == s}
        c_param = pb.certificates(gibbs, pk["neutral"].kl_param, n_train, delta, union=len(scales))
        rows.append({
            "seed": seed, "n_train": n_train, "scale": s, "sigma_Q": sigma, "gibbs_risk": gibbs,
            "kl_param": pk["neutral"].kl_param,
            "kl_quot_neutral": pk["neutral"].kl_quotient, "se_neutral": pk["neutral"].stderr,
            "kl_quot_ib": pk["implicit-bias"].kl_quotient, "se_ib": pk["implicit-bias"].stderr,
            "cert_param": c_param.maurer_seeger,
            "cert_neutral": certs[("neutral", s)].maurer_seeger,
            "cert_ib": certs[("implicit-bias", s)].maurer_seeger,
            "kl_reduction_ib": 1 - pk["implicit-bias"].kl_quotient / pk["neutral"].kl_quotient,
            "kl_reduction_quotient": 1 - pk["neutral"].kl_quotient / pk["neutral"].kl_param,
        })
    return rows


def run(seeds=3, samples=40, scales=SCALES, steps=6000, out=".", plot=False, verbose=False,
        d=4, r=2, heads=1, inner_samples=128):
    """All seeds; writes the CSV, a markdown table of means per scale and (``plot``) a figure."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for seed in range(seeds):
        t = time.time()
        rows += one_seed(seed, d=d, r=r, heads=heads, samples=samples, scales=scales,
                         steps=steps, inner_samples=inner_samples)
        if verbose:
            print(f"seed {seed} done ({time.time() - t:.1f} s)")
    with open(out / "qk_attention_pacbayes.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)

    def mean(key, s):
        return float(np.mean([r[key] for r in rows if r["scale"] == s]))

    def se(key, s):  # combined Monte Carlo standard error of the mean over seeds
        v = [r[key] for r in rows if r["scale"] == s]
        return float(np.sqrt(np.sum(np.square(v))) / len(v))

    lines = [
        f"QK attention (d = {d}, r = {r}, heads = {heads}), {seeds} seeds, {samples} Monte Carlo "
        f"samples ({inner_samples} importance draws per orbit component), "
        f"n = {rows[0]['n_train']}, delta = 0.05, union bound over {len(scales)} scales; "
        "bound = Maurer-Seeger; means over seeds (+- combined MC standard error); KL change = "
        "(KL_IB - KL_neutral) / KL_neutral, negative = the implicit-bias prior is better",
        "",
        "| prior scale | KL param | KL quot neutral | KL quot IB | IB vs neutral KL change | "
        "bound param | bound quot neutral | bound quot IB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in scales:
        lines.append(
            f"| {s:g} | {mean('kl_param', s):.2f} | {mean('kl_quot_neutral', s):.2f} +- "
            f"{se('se_neutral', s):.2f} | {mean('kl_quot_ib', s):.2f} +- {se('se_ib', s):.2f} | "
            f"{-100 * mean('kl_reduction_ib', s):+.1f}% | {mean('cert_param', s):.4f} | "
            f"{mean('cert_neutral', s):.4f} | {mean('cert_ib', s):.4f} |")
    (out / "qk_attention_pacbayes.md").write_text("\n".join(lines) + "\n")
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(1, 2, figsize=(9, 3.6))
        for key, label in (("kl_param", "neutral, parameter"),
                           ("kl_quot_neutral", "neutral, quotient"),
                           ("kl_quot_ib", "implicit bias, quotient")):
            ax[0].plot(scales, [mean(key, s) for s in scales], "o-", label=label)
        for key, label in (("cert_param", "neutral, parameter"),
                           ("cert_neutral", "neutral, quotient"),
                           ("cert_ib", "implicit bias, quotient")):
            ax[1].plot(scales, [mean(key, s) for s in scales], "o-", label=label)
        for a in ax:
            a.set_xscale("log")
            a.set_xlabel("prior scale s")
        ax[0].set(ylabel="KL [nats]", title="KL to the posterior")
        ax[1].set(ylabel="Maurer-Seeger bound", title="certificate")
        ax[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "qk_attention_pacbayes.png", dpi=120)
        plt.close(fig)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--samples", type=int, default=40)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "output"))
    ap.add_argument("--plot", action="store_true")
    ap.add_argument("--d", type=int, default=4)
    ap.add_argument("--r", type=int, default=2)
    ap.add_argument("--heads", type=int, default=1)
    ap.add_argument("--inner-samples", type=int, default=128)
    a = ap.parse_args()
    run(a.seeds, a.samples, SCALES, 6000, a.out, a.plot, verbose=True, d=a.d, r=a.r,
        heads=a.heads, inner_samples=a.inner_samples)
    print((Path(a.out) / "qk_attention_pacbayes.md").read_text())


if __name__ == "__main__":
    main()
