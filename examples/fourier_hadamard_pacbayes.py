"""Fourier regression with a Hadamard parameterization, trained by plain SGD: PAC-Bayes
certificates from the neutral prior and from the orbit-volume implicit-bias prior.

Setup (small, so that ten seeds run in well under a minute on two cores):

* inputs x ~ U[0, 1), features f_k(x) = sqrt(2) cos(2 pi k x), sqrt(2) sin(2 pi k x),
  k = 1..K (p = 2K features); target y = <beta*, f(x)> + N(0, 0.1^2) with beta* having
  ``active`` non-zero entries of size U[0.5, 1.5] and random sign;
* model y_hat = <u * v, f(x)>, the ``hadamard`` plugin with p = 2K; plain SGD (one example
  per step, constant step size, no regulariser, no momentum) from u = alpha 1, v = 0;
* posterior Q = N(theta_SGD, sigma_Q^2 I) with sigma_Q the largest value in a grid whose Gibbs
  empirical risk stays within 0.01 of the risk at theta_SGD; loss min(1, (y_hat - y)^2) in
  [0, 1]; the Gibbs risk is a Monte Carlo mean over 2000 posterior draws;
* priors: neutral N(0, s^2 I) and the implicit-bias prior built from it, s over a grid of
  ``len(SCALES)`` scales with a union bound; the quotient KL by quadrature (paramgeo.pacbayes);
* per seed: each prior at the scale that minimises its Maurer-Seeger certificate; the KL
  reduction 1 - KL_IB / KL_neutral and the certificate reduction 1 - B_IB / B_neutral.

Run:  python examples/fourier_hadamard_pacbayes.py [--seeds 10] [--out DIR] [--plot]
Writes DIR/fourier_hadamard_pacbayes.csv, .md and (with --plot, needs matplotlib) .png.
"""

import argparse
import csv
import time
from pathlib import Path

import numpy as np

import paramgeo
from paramgeo import pacbayes as pb

SCALES = (0.25, 0.5, 1.0, 2.0)
SIGMA_GRID = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1)
SEED_PAPER = {"kl_reduction": 0.4069, "cert_reduction": 0.2140}


def features(x, K):
    k = np.arange(1, K + 1)
    arg = 2 * np.pi * np.outer(x, k)
    return np.sqrt(2) * np.hstack([np.cos(arg), np.sin(arg)])


def bounded_risk(param, thetas, F, y):
    """Mean of min(1, (y_hat - y)^2) over samples and posterior draws (thetas: draws x n)."""
    betas = np.array([param.forward(th) for th in np.atleast_2d(thetas)])
    return float(np.mean(np.minimum(1.0, (betas @ F.T - y[None, :]) ** 2)))


def train_sgd(param, F, y, rng, alpha, lr, steps):
    p = param.p
    theta = np.concatenate([np.full(p, alpha), np.zeros(p)])
    for _ in range(steps):
        i = rng.integers(len(y))
        r = F[i] @ param.forward(theta) - y[i]
        theta = theta - lr * param.vjp(theta, r * F[i])  # grad of (1/2) r^2 through phi
    return theta


def one_seed(seed, freqs=16, active=3, n_train=100, n_test=500, alpha=0.1, lr=0.02,
             steps=20000, delta=0.05):
    """Train one seed and return its row (KLs, certificates, reductions; see module doc)."""
    rng = np.random.default_rng(seed)
    p = 2 * freqs
    h = paramgeo.get("hadamard", p=p)
    beta_star = np.zeros(p)
    support = rng.choice(p, active, replace=False)
    beta_star[support] = rng.uniform(0.5, 1.5, active) * rng.choice([-1, 1], active)
    x, xt = rng.random(n_train), rng.random(n_test)
    F, Ft = features(x, freqs), features(xt, freqs)
    y = F @ beta_star + 0.1 * rng.standard_normal(n_train)
    yt = Ft @ beta_star + 0.1 * rng.standard_normal(n_test)
    theta = train_sgd(h, F, y, rng, alpha, lr, steps)
    risk0 = bounded_risk(h, theta, F, y)
    sigma, gibbs = SIGMA_GRID[0], None
    for s in SIGMA_GRID:
        r = bounded_risk(h, theta + s * rng.standard_normal((2000, h.n)), F, y)
        if r <= risk0 + 0.01:
            sigma, gibbs = s, r
    if gibbs is None:
        gibbs = bounded_risk(h, theta + sigma * rng.standard_normal((2000, h.n)), F, y)
    post = pb.DiagonalGaussian.isotropic(theta, sigma)
    J = len(SCALES)
    neutral, ib, _, _ = pb.bilinear_component_kls(h, post, SCALES)
    kl_param = np.array([pb.kl_gaussian(post, pb.DiagonalGaussian.isotropic(np.zeros(h.n), s))
                         for s in SCALES])

    def best(kls):  # the scale whose Maurer-Seeger certificate is smallest (union bound over J)
        certs = [pb.certificates(gibbs, kl, n_train, delta, union=J) for kl in kls]
        j = int(np.argmin([c.maurer_seeger for c in certs]))
        return j, certs[j]

    jp, cp = best(kl_param)
    jn, cn = best(neutral.sum(0))
    ji, ci = best(ib.sum(0))
    on = np.zeros(p, bool)
    on[support] = True
    test = bounded_risk(h, theta + sigma * rng.standard_normal((500, h.n)), Ft, yt)
    return {
        "seed": seed, "p": p, "n_train": n_train, "sigma_Q": sigma,
        "train_risk": risk0, "gibbs_risk": gibbs, "gibbs_test_risk": test,
        "beta_error": float(np.linalg.norm(h.forward(theta) - beta_star)),
        "kl_param_neutral": float(kl_param[jp]), "scale_param": SCALES[jp],
        "kl_quot_neutral": float(neutral.sum(0)[jn]), "scale_neutral": SCALES[jn],
        "kl_quot_ib": float(ib.sum(0)[ji]), "scale_ib": SCALES[ji],
        "kl_support_neutral": float(neutral[on, jn].sum()),
        "kl_support_ib": float(ib[on, ji].sum()),
        "kl_offsupport_neutral": float(neutral[~on, jn].sum()),
        "kl_offsupport_ib": float(ib[~on, ji].sum()),
        "cert_param": cp.maurer_seeger, "cert_neutral": cn.maurer_seeger,
        "cert_ib": ci.maurer_seeger,
        "mcallester_param": cp.mcallester, "mcallester_neutral": cn.mcallester,
        "mcallester_ib": ci.mcallester,
        "catoni_param": cp.catoni, "catoni_neutral": cn.catoni, "catoni_ib": ci.catoni,
        # (A) quotient versus parameter space, neutral prior
        "kl_reduction_quotient": 1 - neutral.sum(0)[jn] / kl_param[jp],
        "cert_reduction_quotient": 1 - cn.maurer_seeger / cp.maurer_seeger,
        # (B) implicit-bias versus neutral prior, both in quotient space
        "kl_reduction": 1 - ib.sum(0)[ji] / neutral.sum(0)[jn],
        "cert_reduction": 1 - ci.maurer_seeger / cn.maurer_seeger,
        # (C) implicit-bias prior in quotient space versus the neutral prior in parameter space
        "kl_reduction_ib_vs_param": 1 - ib.sum(0)[ji] / kl_param[jp],
        "cert_reduction_ib_vs_param": 1 - ci.maurer_seeger / cp.maurer_seeger,
    }


def _summary(rows, key):
    v = np.array([r[key] for r in rows], float)
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0


def run(seeds=10, freqs=16, n_train=100, n_test=500, steps=20000, out=".", plot=False,
        verbose=False):
    """Run ``seeds`` seeds; write the CSV, the markdown table and (``plot``) the figure."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for seed in range(seeds):
        t = time.time()
        rows.append(one_seed(seed, freqs=freqs, n_train=n_train, n_test=n_test, steps=steps))
        if verbose:
            r = rows[-1]
            print(f"seed {seed}: KL param {r['kl_param_neutral']:.1f}, quotient "
                  f"{r['kl_quot_neutral']:.1f}, IB {r['kl_quot_ib']:.1f}; bound "
                  f"{r['cert_param']:.3f} / {r['cert_neutral']:.3f} / {r['cert_ib']:.3f} "
                  f"({time.time() - t:.1f} s)")
    with open(out / "fourier_hadamard_pacbayes.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    pct = lambda key: "{:.2f}% +- {:.2f}%".format(*(100 * v for v in _summary(rows, key)))  # noqa
    lines = [
        f"Fourier-Hadamard, {seeds} seeds, p = {2 * freqs}, n = {n_train}, delta = 0.05, "
        f"union bound over the prior scales {SCALES}; bound = Maurer-Seeger",
        "",
        "| seed | sigma_Q | Gibbs risk | KL param | KL quot neutral | KL quot IB | "
        "bound param | bound quot neutral | bound quot IB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['seed']} | {r['sigma_Q']:g} | {r['gibbs_risk']:.4f} | "
            f"{r['kl_param_neutral']:.2f} | {r['kl_quot_neutral']:.2f} | {r['kl_quot_ib']:.2f} | "
            f"{r['cert_param']:.4f} | {r['cert_neutral']:.4f} | {r['cert_ib']:.4f} |")
    lines += [
        "",
        "| reduction (mean +- sd over seeds) | KL | certificate |",
        "|---|---|---|",
        f"| (A) quotient vs parameter space, neutral prior | {pct('kl_reduction_quotient')} | "
        f"{pct('cert_reduction_quotient')} |",
        f"| (B) implicit-bias vs neutral prior, both quotient | {pct('kl_reduction')} | "
        f"{pct('cert_reduction')} |",
        f"| (C) implicit-bias (quotient) vs neutral (parameter) | "
        f"{pct('kl_reduction_ib_vs_param')} | {pct('cert_reduction_ib_vs_param')} |",
        f"| seed paper (implicit-bias vs neutral) | {100 * SEED_PAPER['kl_reduction']:.2f}% | "
        f"{100 * SEED_PAPER['cert_reduction']:.2f}% |",
        "",
        "| quotient KL split (mean over seeds) | neutral | implicit-bias |",
        "|---|---|---|",
        f"| support coordinates | {_summary(rows, 'kl_support_neutral')[0]:.2f} | "
        f"{_summary(rows, 'kl_support_ib')[0]:.2f} |",
        f"| off-support coordinates | {_summary(rows, 'kl_offsupport_neutral')[0]:.2f} | "
        f"{_summary(rows, 'kl_offsupport_ib')[0]:.2f} |",
    ]
    (out / "fourier_hadamard_pacbayes.md").write_text("\n".join(lines) + "\n")
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(1, 2, figsize=(10, 3.8))
        s = np.array([r["seed"] for r in rows])
        for k, (key, label) in enumerate([("param", "neutral, parameter KL"),
                                          ("neutral", "neutral, quotient KL"),
                                          ("ib", "implicit bias, quotient KL")]):
            kl_key = "kl_param_neutral" if key == "param" else f"kl_quot_{key}"
            ax[0].bar(s + (k - 1) * 0.27, [r[kl_key] for r in rows], 0.27, label=label)
            ax[1].bar(s + (k - 1) * 0.27, [r[f"cert_{key}"] for r in rows], 0.27, label=label)
        ax[0].set(xlabel="seed", ylabel="KL [nats]", title="KL to the posterior")
        ax[1].set(xlabel="seed", ylabel="Maurer-Seeger bound", title="certificate")
        ax[0].legend(fontsize=7, loc="lower right")
        fig.tight_layout()
        fig.savefig(out / "fourier_hadamard_pacbayes.png", dpi=120)
        plt.close(fig)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--freqs", type=int, default=16)
    ap.add_argument("--n-train", type=int, default=100)
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--out", default="examples/output")
    ap.add_argument("--plot", action="store_true")
    a = ap.parse_args()
    rows = run(a.seeds, a.freqs, a.n_train, 500, a.steps, a.out, a.plot, verbose=True)
    print((Path(a.out) / "fourier_hadamard_pacbayes.md").read_text())
    return rows


if __name__ == "__main__":
    main()
