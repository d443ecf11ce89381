"""The oracle-stopped rate under label flips route by route, the interpolator's floor, the
sample counts and a minimax lower bound (paramgeo.flows.oracle_rates).

Gaussian mixture, d = 200, snr 3, flips 0.1, Bayes direction on the first 10 coordinates,
spectra j^-1.5 and exp(-0.05 (j - 1)).

1. For each spectrum, N = 25..12800 and 24 seeds: the oracle excess 0-1 risk by the ridge
   deterministic equivalent, ridge on the samples at the equivalent's penalty, ridge and
   gradient flow on squares at the per-sample oracle, logistic GD at its oracle step; the rate
   fitted to each, over all N and over N = 25..800; the equivalent's error split into its
   moments and the plug-in (200 seeds at N = 25, 100, 800).
2. The large-N efficiency ratio of logistic to least squares beside the measured
   logistic / flow ratio.
3. The max-margin and the best interpolator for N < d (8 seeds) beside Gordon's floor.
4. Sample counts for targets eps: oracle stop, max margin, and the dimension an interpolator
   needs; the Le Cam / Fano lower bound (Bayes direction on the first K coordinates) and
   Assouad's nonparametric bound over the source ball |w_B| <= |w_B(model)| beside the oracle
   stop, with the ridge equivalent's oracle excess on the cube's vertex (a member of the ball);
   the local bound over a cube of perturbations around the model itself (radius 1.1 times the
   model's), beside the oracle stop and the ridge equivalent on the local cube's vertex.

Usage: python examples/oracle_rates.py [--quick]
"""

import argparse

import numpy as np

from paramgeo.flows import (
    efficiency_ratio,
    equivalent_check,
    interpolator_excess,
    local_lower_bound,
    local_means,
    minimax_lower_bound,
    nonparametric_lower_bound,
    rate_decomposition,
    sample_counts,
)
from paramgeo.flows.label_flips import ridge_equivalent
from paramgeo.flows.risk import GaussianMixture
from paramgeo.flows.structure import power_law_fit


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (for tests)")
    args = ap.parse_args(argv)
    d, snr, flip = (60, 3.0, 0.1) if args.quick else (200, 3.0, 0.1)
    sizes = [25, 50, 100, 200] if args.quick else [25 * 2 ** k for k in range(10)]
    seeds = range(3 if args.quick else 24)
    ratio = efficiency_ratio(snr, flip)
    out = {}
    for kind, decay in (("polynomial", 1.5), ("exponential", 0.05)):
        model = GaussianMixture.from_spectrum(d, kind, decay, snr=snr, flip=flip)
        rates = rate_decomposition(model, sizes, seeds=seeds, steps=2000)
        print(f"{kind} {decay:g}, d = {d}, {len(seeds)} seeds:\n{rates}")
        window = [n for n in sizes if n <= 800]
        cut = len(window)
        print("rates over N = 25..800: " + ", ".join(
            f"{r} {power_law_fit(window, rates.means[r][:cut], 25, 800).exponent:.2f}"
            for r in rates.means))
        for n in (25, 100, 800):
            c = equivalent_check(model, n, seeds=range(40 if args.quick else 200))
            print(f"N = {n}: equivalent {c.equivalent:.3e}, plug-in of drawn moments "
                  f"{c.plug_in:.3e}, drawn ridge {c.drawn:.3e} +- {c.drawn_se:.1e}")
        lf = rates.means["logistic_oracle"] / rates.means["flow_oracle"]
        print("logistic / flow: " + " ".join(f"{x:.2f}" for x in lf) +
              f"; large-N efficiency ratio {ratio:.3f}; logistic GD runs stopped at their last "
              f"step: {rates.capped}")
        small = [n for n in (12, 25, 50, 100, 150, d - 1) if n < d]
        interp = interpolator_excess(model, small, seeds=range(3 if args.quick else 8))
        print(interp)
        m = rates.means["logistic_oracle"]
        targets = np.geomspace(m[1], 1.05 * m[-1], 6)
        counts = sample_counts(rates, interp, snr, flip, targets)
        print(counts)
        bound = minimax_lower_bound(snr, flip, sizes, support=10)
        wide = minimax_lower_bound(snr, flip, sizes, support=d)
        assouad = nonparametric_lower_bound(model, sizes)
        vertex = [vertex_oracle(model, n, int(K), b2) for n, K, b2 in
                  zip(sizes, assouad.width, assouad.amplitude)]
        print(f"{'N':>6} {'oracle stop':>12} {'Le Cam':>10} {'Fano K=10':>10} "
              f"{'Fano K=d':>10} {'stop / bound':>13} {'Assouad':>10} {'K':>4} "
              f"{'stop / Assouad':>15} {'vertex / Assouad':>17}")
        for k, n in enumerate(sizes):
            best = max(bound.bound[k], wide.bound[k])
            print(f"{n:6d} {m[k]:12.3e} {bound.le_cam[k]:10.2e} {bound.fano[k]:10.2e} "
                  f"{wide.fano[k]:10.2e} {m[k] / best:13.3g} {assouad.bound[k]:10.3e} "
                  f"{int(assouad.width[k]):4d} {m[k] / assouad.bound[k]:15.3g} "
                  f"{vertex[k] / assouad.bound[k]:17.3g}")
        vfit = power_law_fit(sizes, vertex, sizes[0], sizes[-1])
        print(f"Assouad bound over |w_B| <= {assouad.radius:.3f} ~ N^-{assouad.rate.exponent:.3f}"
              f" (+- {assouad.rate.error:.3f}; capped K = d - 1 at {int(assouad.capped.sum())} "
              f"sizes); ridge equivalent at the vertex ~ N^-{vfit.exponent:.3f} "
              f"(+- {vfit.error:.3f}); oracle stop ~ N^-"
              f"{rates.rates['logistic_oracle'].exponent:.3f}")
        local = local_lower_bound(model, sizes, slack=0.1)
        near = np.array([local_oracle(model, n, b2) for n, b2 in zip(sizes, local.amplitudes)])
        base = np.array([local_oracle(model, n, None) for n in sizes])
        print(f"{'N':>6} {'oracle stop':>12} {'local':>10} {'coords':>6} {'reach':>6} "
              f"{'stop / local':>13} {'vertex / local':>15} {'model / vertex':>15}")
        for k, n in enumerate(sizes):
            print(f"{n:6d} {m[k]:12.3e} {local.bound[k]:10.3e} {int(local.count[k]):6d} "
                  f"{local.reach[k]:6.3f} {m[k] / local.bound[k]:13.3g} "
                  f"{near[k] / local.bound[k]:15.3g} {base[k] / near[k]:15.3g}")
        nfit = power_law_fit(sizes, near, sizes[0], sizes[-1])
        print(f"local bound around the model (|w_B| <= {local.radius:.3f}) ~ N^-"
              f"{local.rate.exponent:.3f} (+- {local.rate.error:.3f}); ridge equivalent at "
              f"the local vertex ~ N^-{nfit.exponent:.3f} (+- {nfit.error:.3f})")
        out[kind] = (rates, interp, counts, bound, assouad, local)
    return out


def vertex_oracle(model, n, width, amplitude):
    """The ridge equivalent's oracle excess on the Assouad cube's vertex v = (1, .., 1) (all
    vertices alike by the sign symmetry of the coordinates)."""
    w = np.zeros(model.d)
    w[0], w[1:width + 1] = np.sqrt(model.mean @ (model.mean / model.cov) - width * amplitude), \
        np.sqrt(amplitude)
    member = GaussianMixture(cov=model.cov, mean=w * np.sqrt(model.cov), flip=model.flip)
    return float(np.nanmin(ridge_equivalent(member, n, np.geomspace(1e-9, 1e4, 200))))


def local_oracle(model, n, amplitudes):
    """The ridge equivalent's oracle excess on the local cube's vertex v = (1, .., 1) with
    squared amplitudes ``amplitudes`` (None: on the model itself)."""
    member = model if amplitudes is None else GaussianMixture(
        cov=model.cov, mean=local_means(model, amplitudes, np.ones(model.d))[0],
        flip=model.flip)
    return float(np.nanmin(ridge_equivalent(member, n, np.geomspace(1e-9, 1e4, 200))))


if __name__ == "__main__":
    main()
