"""Fourier regression with a Hadamard parameterization, trained by plain SGD: PAC-Bayes
certificates from the neutral prior and from the orbit-volume implicit-bias prior, both in the
quotient (the seed paper's headline comparison), over target sparsity and prior scale.

Setup (each (sparsity, seed) takes a few seconds on two cores):

* inputs x ~ U[0, 1), features f_k(x) = sqrt(2) cos(2 pi k x), sqrt(2) sin(2 pi k x),
  k = 1..K (p = 2K features); target y = <beta*, f(x)> + N(0, 0.1^2) with beta* having
  ``active`` non-zero entries of size U[0.5, 1.5] and random sign (``SPARSITY`` levels);
* model y_hat = <u * v, f(x)>, the ``hadamard`` plugin with p = 2K; plain SGD (one example
  per step, constant step size, no regulariser, no momentum) from u = alpha 1, v = 0;
* priors: neutral N(0, s^2 I) and the implicit-bias prior built from it (the canonical section
  |u_i| = |v_i|, one representative per predictor, weighted by its orbit-volume factor: the
  Laplace density exp(-|beta_i|/s^2) / (2 s^2)), s over ``SCALES`` with a union bound
  (delta / len(SCALES)); quotient KLs by quadrature (paramgeo.pacbayes);
* posteriors Q = N(m, sigma^2 I), fitted the same way for every prior: sigma over
  ``SIGMA_GRID`` and s over ``SCALES`` minimising the prior's Maurer-Seeger certificate (a
  PAC-Bayes bound holds for all posteriors at once, so the choice of sigma costs nothing; the
  scale is paid for by the union bound). Two posterior means: ``sgd`` (the SGD solution,
  u = alpha-ish, v = 0-ish off the support) and ``canonical`` (its minimum-norm representative,
  |u_i| = |v_i|: the same predictor, paramgeo.pacbayes.canonical_point);
* loss min(1, (y_hat - y)^2) in [0, 1]; Gibbs risk a Monte Carlo mean over 1000 draws.

Reported per (sparsity, mean), for every implicit-bias construction C (``ib``, ``section``)
against every baseline B (``neutral``, ``predictor``): the relative changes
(KL_C - KL_B) / KL_B and (cert_C - cert_B) / cert_B (quotient KLs, each prior at its own fitted
posterior and best scale; negative = the implicit-bias prior is better), mean +- sd over seeds,
and the KL change per prior scale (posterior fitted at that scale). The seed paper's figures
in this convention: KL -40.69%, certificate -21.40% (its implicit-bias prior 40.69% / 21.40%
lower than its neutral one).

Run:  python examples/fourier_hadamard_pacbayes.py [--seeds 10] [--out DIR] [--plot]
Writes DIR/fourier_hadamard_pacbayes.csv, .md and (with --plot, needs matplotlib) .png.
"""

import argparse
import contextlib
import csv
import functools
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np

import paramgeo
from paramgeo import pacbayes as pb

SCALES = (0.25, 0.5, 1.0, 2.0)
SIGMA_GRID = (0.02, 0.05, 0.1, 0.2)
SPARSITY = (1, 4, 16, 32)
MEANS = ("sgd", "canonical")
#: the seed paper's figures as changes (its implicit-bias prior 40.69% / 21.40% lower)
SEED_PAPER = {"kl": -0.4069, "cert": -0.2140}
#: the prior constructions (paramgeo.pacbayes.PRIOR_CONSTRUCTIONS): two implicit-bias priors
#: (the canonical section with the orbit-volume factor, ``ib``; the section's own arc-length
#: measure, ``section``) and two neutral baselines (the push-forward of the parameter-space
#: Gaussian, ``neutral``; a Gaussian on the predictor, ``predictor``)
PRIORS = ("neutral", "ib", "section", "predictor")
CONTRASTS = tuple((a, b) for a in ("ib", "section") for b in ("neutral", "predictor"))


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


def posterior_table(h, mean, F, y, rng):
    """For every sigma in SIGMA_GRID: the Gibbs risk of N(mean, sigma^2 I) and its quotient KLs
    to every prior construction at every scale ({prior: array (sigmas, p, scales)}, the
    per-coordinate split kept for the support / off-support table)."""
    gibbs, kls = [], {name: [] for name in PRIORS}
    for sigma in SIGMA_GRID:
        gibbs.append(bounded_risk(h, mean + sigma * rng.standard_normal((1000, h.n)), F, y))
        post = pb.DiagonalGaussian.isotropic(mean, sigma)
        table, _, _ = pb.bilinear_prior_kls(h, post, SCALES, PRIORS, rtol=1e-5)
        for name in PRIORS:
            kls[name].append(table[name])
    return np.array(gibbs), {name: np.array(v) for name, v in kls.items()}


def fit(gibbs, kls, n, delta):
    """The same fitting rule for every prior: the (sigma, scale) minimising the Maurer-Seeger
    certificate at delta / len(SCALES). Returns (i_sigma, j_scale, certificate matrix)."""
    certs = np.array([[pb.certificates(g, kl, n, delta, union=len(SCALES)).maurer_seeger
                       for kl in row] for g, row in zip(gibbs, kls)])
    i, j = np.unravel_index(int(np.argmin(certs)), certs.shape)
    return int(i), int(j), certs


def one_seed(seed, active=3, freqs=16, n_train=100, alpha=0.1, lr=0.02, steps=20000,
             delta=0.05):
    """Train one seed and return its row (KLs, certificates, changes; see module doc)."""
    rng = np.random.default_rng(seed)
    p = 2 * freqs
    h = paramgeo.get("hadamard", p=p)
    beta_star = np.zeros(p)
    support = rng.choice(p, active, replace=False)
    beta_star[support] = rng.uniform(0.5, 1.5, active) * rng.choice([-1, 1], active)
    x = rng.random(n_train)
    F = features(x, freqs)
    y = F @ beta_star + 0.1 * rng.standard_normal(n_train)
    theta = train_sgd(h, F, y, rng, alpha, lr, steps)
    on = np.zeros(p, bool)
    on[support] = True
    row = {"seed": seed, "active": active, "p": p, "n_train": n_train,
           "train_risk": bounded_risk(h, theta, F, y),
           "beta_error": float(np.linalg.norm(h.forward(theta) - beta_star))}
    for mean_name in MEANS:
        mean = theta if mean_name == "sgd" else pb.canonical_point(h, theta).theta
        gibbs, table = posterior_table(h, mean, F, y, rng)
        fitted = {}
        for prior, kls in table.items():
            i, j, certs = fit(gibbs, kls.sum(1), n_train, delta)
            fitted[prior] = (kls.sum(1)[i, j], certs[i, j])
            key = f"{mean_name}_{prior}"
            row.update({f"{key}_kl": float(kls.sum(1)[i, j]), f"{key}_cert": float(certs[i, j]),
                        f"{key}_sigma": SIGMA_GRID[i], f"{key}_scale": SCALES[j],
                        f"{key}_gibbs": float(gibbs[i]),
                        f"{key}_kl_support": float(kls[i][on, j].sum()),
                        f"{key}_kl_offsupport": float(kls[i][~on, j].sum())})
            for jj, s in enumerate(SCALES):  # posterior fitted at this one scale
                ii = int(np.argmin(certs[:, jj]))
                row[f"{key}_kl_s{s:g}"] = float(kls.sum(1)[ii, jj])
                row[f"{key}_cert_s{s:g}"] = float(certs[ii, jj])
        for ib_name, base in CONTRASTS:  # every construction against every neutral baseline
            key = f"{mean_name}_{ib_name}_vs_{base}"
            row[f"{key}_kl_change"] = fitted[ib_name][0] / fitted[base][0] - 1
            row[f"{key}_cert_change"] = fitted[ib_name][1] / fitted[base][1] - 1
            for s in SCALES:
                row[f"{key}_kl_change_s{s:g}"] = \
                    row[f"{mean_name}_{ib_name}_kl_s{s:g}"] / row[f"{mean_name}_{base}_kl_s{s:g}"] - 1
    return row


def _summary(rows, key):
    v = np.array([r[key] for r in rows], float)
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0


def _pct(rows, key):
    m, sd = _summary(rows, key)
    return f"{100 * m:+.1f}% +- {100 * sd:.1f}%"


def run(seeds=10, out=".", plot=False, workers=2, verbose=False, sparsity=SPARSITY, **setup):
    """Run ``seeds`` seeds at every sparsity in ``sparsity`` (``setup``: keyword arguments of
    :func:`one_seed`, e.g. freqs, n_train, steps); write the CSV, the markdown tables and
    (``plot``) the figure."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    jobs = [(seed, a) for a in sparsity for seed in range(seeds)]
    work = functools.partial(_job, setup=setup)
    t = time.time()
    rows = []
    with contextlib.ExitStack() as stack:
        mapper = map if workers == 1 else stack.enter_context(Pool(workers)).imap
        for r in mapper(work, jobs):
            rows.append(r)
            if verbose:
                print(f"active {r['active']} seed {r['seed']}: KL / cert change (sgd mean) " +
                      ", ".join(f"{c} vs {b} {100 * r[f'sgd_{c}_vs_{b}_kl_change']:+.1f}% / "
                                f"{100 * r[f'sgd_{c}_vs_{b}_cert_change']:+.1f}%"
                                for c, b in CONTRASTS) + f" [{time.time() - t:.0f} s]",
                      flush=True)
    with open(out / "fourier_hadamard_pacbayes.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    (out / "fourier_hadamard_pacbayes.md").write_text(_tables(rows, seeds) + "\n")
    if plot:
        _figure(rows, out / "fourier_hadamard_pacbayes.png")
    return rows


def _job(job, setup):
    return one_seed(job[0], active=job[1], **setup)


CONVENTION = ("change = (X_C - X_B) / X_B for the implicit-bias construction C against the "
              "baseline B, X the quotient KL or the Maurer-Seeger certificate; negative = the "
              "implicit-bias prior is better")


def _tables(rows, seeds):
    by = {a: [r for r in rows if r["active"] == a] for a in sorted({r["active"] for r in rows})}
    mean = lambda rs, k: _summary(rs, k)[0]  # noqa: E731
    lines = [
        f"Fourier-Hadamard, {seeds} seeds per sparsity, p = {rows[0]['p']}, n = "
        f"{rows[0]['n_train']}, delta = 0.05, union bound over the prior scales {SCALES}; "
        f"posterior sigma fitted per prior over {SIGMA_GRID}; bound = Maurer-Seeger; "
        "mean +- sd over seeds. Priors: ib = canonical section with the orbit-volume factor "
        "(Laplace), section = canonical section with its own arc-length measure, neutral = "
        "push-forward of N(0, s^2 I) (K_0), predictor = N(0, s^4) on the predictor.",
        "",
        f"KL and certificate change, {CONVENTION}:",
        "",
        "| active | posterior mean | " + " | ".join(
            f"{c} vs {b} KL change | {c} vs {b} cert change" for c, b in CONTRASTS) + " |",
        "|---|---|" + "---|---|" * len(CONTRASTS),
    ]
    for a, rs in by.items():
        for m in MEANS:
            lines.append(f"| {a} | {m} | " + " | ".join(
                f"{_pct(rs, f'{m}_{c}_vs_{b}_kl_change')} | "
                f"{_pct(rs, f'{m}_{c}_vs_{b}_cert_change')}" for c, b in CONTRASTS) + " |")
    lines += ["", "seed paper (its implicit-bias prior against its neutral prior, the pair not "
              f"specified further in its abstract): KL change {100 * SEED_PAPER['kl']:+.2f}%, "
              f"certificate change {100 * SEED_PAPER['cert']:+.2f}%", "",
              "Each prior at its fitted posterior: quotient KL, certificate, scale s and sigma "
              "(mean over seeds):", "",
              "| active | posterior mean | " + " | ".join(
                  f"{p} KL | {p} cert | {p} s / sigma" for p in PRIORS) + " |",
              "|---|---|" + "---|---|---|" * len(PRIORS)]
    for a, rs in by.items():
        for m in MEANS:
            lines.append(f"| {a} | {m} | " + " | ".join(
                f"{mean(rs, f'{m}_{p}_kl'):.1f} | {mean(rs, f'{m}_{p}_cert'):.4f} | "
                f"{mean(rs, f'{m}_{p}_scale'):.2f} / {mean(rs, f'{m}_{p}_sigma'):.3f}"
                for p in PRIORS) + " |")
    lines += ["", "KL change per prior scale (posterior fitted at that scale), sgd mean:", "",
              "| active | contrast | " + " | ".join(f"s = {s:g}" for s in SCALES) + " |",
              "|---|---|" + "---|" * len(SCALES)]
    for a, rs in by.items():
        for c, b in CONTRASTS:
            lines.append(f"| {a} | {c} vs {b} | " + " | ".join(
                _pct(rs, f"sgd_{c}_vs_{b}_kl_change_s{s:g}") for s in SCALES) + " |")
    lines += ["", "Quotient KL split at each prior's fitted posterior (mean over seeds, sgd "
              "mean), on / off the target's support:", "",
              "| active | " + " | ".join(f"{p} on | {p} off" for p in PRIORS) + " |",
              "|---|" + "---|---|" * len(PRIORS)]
    for a, rs in by.items():
        lines.append(f"| {a} | " + " | ".join(
            f"{mean(rs, f'sgd_{p}_kl_support'):.1f} | {mean(rs, f'sgd_{p}_kl_offsupport'):.1f}"
            for p in PRIORS) + " |")
    return "\n".join(lines)


def _figure(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    levels = sorted({r["active"] for r in rows})
    for k, what in enumerate(("kl", "cert")):
        for (c, b), mk in zip(CONTRASTS, "osD^"):
            stats = np.array([_summary([r for r in rows if r["active"] == a],
                                       f"sgd_{c}_vs_{b}_{what}_change") for a in levels])
            ax[k].errorbar(levels, 100 * stats[:, 0], 100 * stats[:, 1], marker=mk, capsize=3,
                           label=f"{c} vs {b}")
        ax[k].axhline(100 * SEED_PAPER[what], ls="--", c="k", lw=0.8,
                      label="seed paper")
        ax[k].axhline(0, c="grey", lw=0.5)
        ax[k].set(xscale="log", xlabel="active coefficients (of 32)",
                  ylabel=f"{'KL' if what == 'kl' else 'certificate'} change [%] (< 0: IB better)",
                  title=f"{'quotient KL' if what == 'kl' else 'Maurer-Seeger certificate'}, "
                        "fitted posterior and scale")
    ax[0].legend(fontsize=7)
    for a in levels:
        rs = [r for r in rows if r["active"] == a]
        for (c, b), ls in (((("ib", "neutral")), "-"), ((("ib", "predictor")), ":")):
            stats = np.array([_summary(rs, f"sgd_{c}_vs_{b}_kl_change_s{s:g}") for s in SCALES])
            ax[2].errorbar(SCALES, 100 * stats[:, 0], 100 * stats[:, 1], marker="o", ls=ls,
                           capsize=3, label=f"{a} active, {c} vs {b}")
    ax[2].axhline(100 * SEED_PAPER["kl"], ls="--", c="k", lw=0.8)
    ax[2].axhline(0, c="grey", lw=0.5)
    ax[2].set(xscale="log", xlabel="prior scale s", ylabel="KL change [%] (< 0: IB better)",
              title="per prior scale (sgd mean)")
    ax[2].legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "output"))
    ap.add_argument("--plot", action="store_true")
    a = ap.parse_args()
    rows = run(a.seeds, a.out, a.plot, a.workers, verbose=True)
    print((Path(a.out) / "fourier_hadamard_pacbayes.md").read_text())
    return rows


if __name__ == "__main__":
    main()
