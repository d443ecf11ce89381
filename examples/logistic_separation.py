"""Early-stopped GD against the max-margin interpolator in overparameterized, well-specified
logistic regression (paramgeo.flows.logistic_separation).

Design: lambda_i = i^-2, w*_i = 1 for i <= 100 (the setting of Wu, Bartlett, Telgarsky, Yu
2025, Figure 1), head of 4 N explicit coordinates plus an infinite flat tail of the remaining
trace, so d is infinite at every N. Per N = 25..1600 and 4 seeds: the exact excess 0-1 risk
(quadrature) of logistic GD at its oracle step (4000 steps) and of the max-margin
interpolator; N(eps) for both, the power law of N_GD(eps), the power and exponential laws of
N_interp(eps) where it exists, and the interpolator's slope in N. A head of 8 N checks the
tail's lumping up to N = 800. Last, the norms of two interpolators of least margin 1: the
max-margin one and the oracle stop completed by the flat tail (``tail_interpolator``), which
interpolates at the oracle stop's excess.

Usage: python examples/logistic_separation.py [--quick]
"""

import argparse

import numpy as np

from paramgeo.flows import LogisticDesign, fit_laws, sample_counts_logistic, separation
from paramgeo.flows.structure import power_law_fit


def run(sizes, mult, seeds, steps):
    parts = [separation(LogisticDesign.from_decay(mult * n, 2.0, support=min(100, mult * n)),
                        [n], seeds=seeds, steps=steps) for n in sizes]
    return {f: np.concatenate([getattr(p, f) for p in parts])
            for f in ("sizes", "oracle", "oracle_se", "interp", "interp_se", "last",
                      "interp_norm", "completed_norm")}, \
        sum(p.capped for p in parts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (for tests)")
    args = ap.parse_args(argv)
    sizes = [25, 50, 100, 200] if args.quick else [25 * 2 ** k for k in range(7)]
    seeds = range(2 if args.quick else 4)
    steps = 1000 if args.quick else 4000
    design = LogisticDesign.from_decay(400, 2.0, support=100)
    print(f"s = w*^T Sigma w* = {design.signal:.4f}, Bayes error {design.bayes_error():.4f}")
    out = {}
    for mult in (4, 8):
        grid = sizes if mult == 4 else [n for n in sizes if n <= (100 if args.quick else 800)]
        r, capped = run(grid, mult, seeds, steps)
        print(f"head {mult} N + flat tail, {len(seeds)} seeds; oracle steps at the last "
              f"record: {capped}")
        print(f"{'N':>6} {'oracle-stopped GD':>22} {'max-margin':>22} {'GD last step':>13}")
        for k, n in enumerate(r["sizes"]):
            print(f"{int(n):6d} {r['oracle'][k]:12.3e} +-{r['oracle_se'][k]:7.1e} "
                  f"{r['interp'][k]:12.3e} +-{r['interp_se'][k]:7.1e} {r['last'][k]:13.3e}")
        out[mult] = r
    r = out[4]
    lo = 100 if not args.quick else 50
    gd = power_law_fit(r["sizes"], r["oracle"], lo, np.inf)
    mm = power_law_fit(r["sizes"], r["interp"], lo, np.inf)
    print(f"N >= {lo}: oracle GD excess ~ N^-{gd.exponent:.3f} (+- {gd.error:.3f}); "
          f"max margin ~ N^-{mm.exponent:.3f} (+- {mm.error:.3f})")
    targets = np.geomspace(r["oracle"][2], r["oracle"][-1] * 1.02, 5)
    n_gd, n_mm = sample_counts_logistic(r["sizes"], r["oracle"], r["interp"], targets)
    for e, a, b in zip(targets, n_gd, n_mm):
        print(f"eps {e:.3e}: N_GD {a:8.4g}, N_interp {b:8.4g}")
    print("N_GD(eps):", fit_laws(targets, n_gd))
    ok = np.isfinite(n_mm)
    print(f"N_interp(eps) finite at {int(ok.sum())} of {ok.size} targets; least interpolator "
          f"excess on the grid {r['interp'].min():.3e}")
    print("interpolators of least margin 1 (the completed oracle stop has the oracle's excess):")
    print(f"{'N':>6} {'|w| max margin':>15} {'|w| completed oracle stop':>26}")
    for k, n in enumerate(r["sizes"]):
        print(f"{int(n):6d} {r['interp_norm'][k]:15.4g} {r['completed_norm'][k]:26.4g}")
    return out


if __name__ == "__main__":
    main()
