"""Risk of linear models: early-stopped logistic GD under label flips, and spectral filters.

1. Gaussian mixture, flips eta = 0.1, spectra j^-1.5 and exp(-0.05 (j - 1)) in d = 400: the
   exact 0-1 risk against Monte Carlo (10^6 fresh samples, 3 standard errors), then the exact
   excess risk along logistic GD from 0 on N = 100 samples: its oracle stop against the
   max-margin interpolator.
2. Oracle-stopped excess risk over N (mean over seeds) with its fitted rate N^-r, for both
   spectra, beside the rate the ridge deterministic equivalent predicts over the same N and the
   interpolator's gap (its excess over the oracle's) while N < d; the calibration ratio
   E_01 / (L - L*) along one run.
3. Spike-plus-flat regression (d = 800, N = 100): filters of ridge, GD and shifted GD, shifted GD
   against its closed-form filter (the iteration itself), the best risk of each filter, the
   Marchenko-Pastur edge, s_min and the shift kappa that cancels the bulk's implicit penalty.
4. The risk gain R_ridge / R_shifted over a grid of (d, N) with the fitted exponents of
   gain ~ d^p N^q, the gain over the spike strength at d = 400, N = 50, and the hold-out choice of (shift, stop) with its transfer (4 seeds).
5. The gain's theory: the deterministic equivalent's gains beside the measured ones (64 seeds,
   jackknife errors) over the spike at d = 400, N = 50 and over (d, N) at spike 20, with the
   fitted exponents; the proportional limit's gain over the spike (local exponent, the limit
   law 2 noise sqrt(spike / gamma)), over gamma and over the noise.

Writes its figure to examples/output/early_stopping.png (``--out`` to choose).

Usage: python examples/early_stopping.py [--out FILE.png] [--quick] [--gain]
(``--gain``: parts 4 and 5 only, no figure)
"""

import argparse
from pathlib import Path

import numpy as np

from paramgeo.flows.label_flips import calibration_path, oracle_rate_theory
from paramgeo.flows.negative_ridge import (
    gain_check,
    gain_over_spike,
    holdout_selection,
    risk_gain,
)
from paramgeo.flows.risk import (
    GaussianMixture,
    SpikedModel,
    early_stopping,
    excess_risk_rates,
    filter_estimator,
    gd_filter,
    ridge_filter,
    shifted_gd,
    shifted_gd_filter,
    spiked_filter_risks,
)
from paramgeo.flows.spiked_equivalent import equivalent_filter_risks, gain_asymptote

GRID = [(100, 25), (200, 25), (400, 25), (200, 50), (400, 50), (800, 50), (400, 100),
        (800, 100)]


def gain_part(quick):
    """Parts 4 and 5: the measured gain, its hold-out transfer, and its theory."""
    d, N = (100, 40) if quick else (400, 100)
    print(f"\n{risk_gain(GRID[:4] if quick else GRID)}")
    print(gain_over_spike(400, 50, [5, 20, 80] if quick else [5, 10, 20, 40, 80, 160]))
    for seed in range(2 if quick else 4):
        print(holdout_selection(SpikedModel(d=2 * d, spike=20.0, noise=0.5), 4 * N // 3,
                                seed=seed))
    seeds = range(100, 104 if quick else 164)
    spikes = [5, 20, 80] if quick else [5, 10, 20, 40, 80, 160]
    print("\nmeasured gains against the deterministic equivalent (same gamma and N) and its "
          "N = inf limit:")
    print(gain_check([(400, 50, s) for s in spikes], seeds=seeds))
    print(gain_check([(d_, n_, 20.0) for d_, n_ in (GRID[:4] if quick else GRID)],
                     seeds=seeds, fit="sizes"))
    print("\nproportional limit, gamma = 8, noise 0.5: gain over the spike, local exponent, "
          "gain / (2 noise sqrt(spike / gamma))")
    ells = [5, 20, 80, 320] if quick else [5, 20, 80, 320, 1280, 1e4, 1e5, 1e6]
    g = [equivalent_filter_risks(8.0, s, 0.5, refine=True).gain for s in ells]
    for i, s in enumerate(ells):
        loc = np.log(g[i] / g[i - 1]) / np.log(s / ells[i - 1]) if i else float("nan")
        print(f"  spike {s:8g}: gain {g[i]:8.3f}, local exponent {loc:.3f}, "
              f"ratio {g[i] / gain_asymptote(8.0, s, 0.5):.3f}")
    gammas = [2, 4, 8, 16]
    g = [equivalent_filter_risks(float(gm), 20.0, 0.5, refine=True).gain for gm in gammas]
    slope = np.polyfit(np.log(gammas), np.log(g), 1)[0]
    print("  spike 20, gamma " + ", ".join(f"{gm}: {x:.3f}" for gm, x in zip(gammas, g))
          + f"; d log gain / d log gamma = {slope:.3f}")
    noises = [0.25, 0.5, 1.0]
    g = [equivalent_filter_risks(8.0, 160.0, nz, refine=True).gain for nz in noises]
    print("  spike 160, gamma 8, noise " + ", ".join(f"{nz}: {x:.3f}" for nz, x in
                                                   zip(noises, g)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (for tests)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "output" / "early_stopping.png"))
    ap.add_argument("--gain", action="store_true", help="parts 4 and 5 only (no figure)")
    args = ap.parse_args(argv)
    if args.gain:
        return gain_part(args.quick)
    d, N = (100, 40) if args.quick else (400, 100)
    mc = 100_000 if args.quick else 1_000_000
    paths = {}
    for kind, decay in (("polynomial", 1.5), ("exponential", 0.05)):
        model = GaussianMixture.from_spectrum(d, kind, decay, snr=3.0, flip=0.1)
        res = early_stopping(model, N, steps=3000, seed=0)
        w = np.random.default_rng(5).standard_normal(d) + model.mean / model.cov
        p, se = model.monte_carlo_risk(w, mc, np.random.default_rng(6))
        print(f"{kind} spectrum: exact 0-1 risk {model.risk(w):.5f}, Monte Carlo {p:.5f} "
              f"+- {se:.5f} ({abs(p - model.risk(w)) / se:.2f} standard errors)")
        print("  " + str(res).replace("\n", "\n  "))
        paths[kind] = res
    sizes = [25, 50, 100, 200] if args.quick else [25, 50, 100, 200, 400, 800]
    for kind, decay in (("exponential", 0.05), ("polynomial", 1.5)):
        model = GaussianMixture.from_spectrum(d // 2, kind, decay, snr=3.0, flip=0.1)
        rates = excess_risk_rates(model, sizes, seeds=(0, 1, 2), steps=1000)
        print(f"\nexcess 0-1 risk over N (d = {d // 2}, {kind} {decay:g}, 3 seeds):\n{rates}")
        theory = oracle_rate_theory(model, sizes)
        print(f"rate theory (ridge deterministic equivalent) over the same N:\n{theory}")
    print(calibration_path(model, sizes[-1], steps=1000, seed=0))

    spiked = SpikedModel(d=2 * d, spike=20.0, noise=0.5)
    X, y = spiked.sample(N, np.random.default_rng(0))
    lr = 0.9 * N / np.linalg.norm(X, 2) ** 2
    kappa = spiked.implicit_penalty(N)
    it = shifted_gd(X, y, 50, lr, kappa)
    closed = filter_estimator(X, y, lambda s: shifted_gd_filter(s, 50, lr, kappa))
    print(f"\nshifted GD (shift kappa = {kappa:.3f}, 50 steps) against its closed-form filter: "
          f"relative error {np.max(np.abs(it - closed)) / np.max(np.abs(closed)):.1e}")
    risks = spiked_filter_risks(spiked, N, seed=0, steps=2000)
    print(risks)
    print(f"kappa - s_min = {risks.implicit_penalty - risks.s_min:.3f}; 2 sigma^2 (sqrt(gamma) "
          f"- 1) = {2 * np.sqrt(spiked.d / N) - 2:.3f}; MP half-width 2 sigma^2 sqrt(gamma) = "
          f"{2 * np.sqrt(spiked.d / N):.3f}")
    gain_part(args.quick)
    if args.out:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(14, 3.8))
        axes = fig.subplots(1, 3)
        ax = axes[0]
        for i, (kind, res) in enumerate(paths.items()):
            ax.semilogx(np.maximum(res.steps, 1), res.excess, color=f"C{i}", label=kind)
            ax.axvline(max(res.oracle_step, 1), color=f"C{i}", ls="--", lw=0.8)
            if res.max_margin_excess is not None:
                ax.axhline(res.max_margin_excess, color=f"C{i}", ls=":", lw=1)
        ax.set(xlabel="GD step", ylabel="excess 0-1 risk",
               title=f"d={d}, N={N}: oracle stop (dashed), max margin (dotted)")
        ax.title.set_fontsize(9)
        ax.legend(fontsize=8)
        ax = axes[1]
        ax.errorbar(rates.sizes, rates.oracle, yerr=rates.oracle_se, fmt="o-", label="oracle stop")
        ok = np.isfinite(rates.interpolator)
        ax.loglog(rates.sizes[ok], rates.interpolator[ok], "s--", label="max margin")
        r = rates.oracle_rate
        ax.set(xscale="log", yscale="log", xlabel="N", ylabel="excess 0-1 risk",
               title=f"oracle excess ~ N^-{r.exponent:.2f} (+- {r.error:.2f})")
        ax.title.set_fontsize(9)
        ax.legend(fontsize=8)
        ax = axes[2]
        s = np.linspace(0.02, risks.mp_upper * 1.1, 400)
        t = 2000
        ax.plot(s, ridge_filter(s, risks.ridge_lambda), label=f"ridge {risks.ridge_lambda:.2f}")
        ax.plot(s, gd_filter(s, risks.gd_steps, lr), label=f"GD t={risks.gd_steps}")
        ax.plot(s, shifted_gd_filter(s, risks.shifted_steps, lr, risks.shifted_shift),
                label=f"shifted GD mu={risks.shifted_shift:.2f}, t={risks.shifted_steps}")
        ax.axvspan(risks.mp_lower, risks.mp_upper, color="0.9", label="MP bulk")
        ax.axvline(risks.s_min, color="k", lw=0.8, ls="--", label="s_min")
        ax.axvline(risks.implicit_penalty, color="r", lw=0.8, ls=":", label="kappa")
        ax.set(xlabel="eigenvalue s of X^T X / N", ylabel="filter h(s)", ylim=(-1, 3),
               title=f"spike + flat, d={spiked.d}, N={N} (t <= {t})")
        ax.title.set_fontsize(9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.out, dpi=110)
        print(f"figure written to {args.out}")
    return paths, rates, risks


if __name__ == "__main__":
    main()
