"""Deep diagonal networks at vanishing initialisation: implicit bias, flow and Algorithm 1.

For ``deep-diagonal`` (beta = w_1 * ... * w_L and beta = u^L - v^L, depth L = 3 and 4) from
``init_at_scale(alpha)`` on a sparse regression X beta = y, the script compares, for alpha from
1e-1 down to 1e-6:

* argmin R_alpha s.t. X beta = y, R_alpha the closed-form power-law potential
  (``paramgeo.mirror.separable``), solved through its dual with the dual variable at
  log10(alpha^(2-L)) + 30 digits (``paramgeo.mirror.solve_implicit_bias``);
* the limit of gradient flow (``paramgeo.mirror.implicit_bias``, stopped at loss
  1e-16 (1 + |y|^2 / N)), integrated in the log chart r = log|theta| (every coordinate keeps its
  sign along this flow, and the error control is relative in every coordinate) and in the time
  tau = t / alpha^(2-L) of the saddle-to-saddle dynamics, by LSODA with the loss Hessian as
  the Jacobian of the field (``exact_jacobian=True``; on the plateaus the active coordinates
  relax at rates of order alpha^(2-L), and LSODA's stiff branch needs far fewer steps with the
  exact Jacobian than with finite differences);
* Algorithm 1 (the saddle-to-saddle recursion with the potential's thresholds, in the time
  t / alpha^(2-L); Zhao, Wang, Yang, Bai, Zhang 2026) and the modified l1 problem it converges
  to, solved by linear programming (``paramgeo.flows.vanishing_init_limit``).

The product variant from alpha (1, ..., 1) only reaches beta >= 0, so its target is
non-negative; the signed target has both signs.

Prints its table; ``--out table.md`` also writes it to that file (nothing is written
without it).

Usage: python examples/deep_diagonal_vanishing_init.py [--quick] [--out table.md]
       [--variants product,signed] [--depths 3,4] [--alphas 1e-1,1e-2,...]
(``--quick``: N = 4, p = 8, alpha in {1e-1, 1e-3}, depth 3, seconds; the full run, N = 10,
p = 20, 3 nonzeros; the CPU seconds of each flow are in the last column.)
"""

import argparse
import time

import numpy as np

import paramgeo
from paramgeo.flows import vanishing_init_limit
from paramgeo.mirror import implicit_bias


def problem(variant, N, p, active, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, p))
    b = np.zeros(p)
    b[:active] = rng.uniform(0.5, 2.0, active)
    if variant == "signed":
        b[:active] *= np.where(np.arange(active) % 2, -1.0, 1.0)
    return X, X @ b


def rows(N, p, active, depths, alphas, verbose=True, variants=("product", "signed")):
    out = []
    for variant in variants:
        X, y = problem(variant, N, p, active)
        stop = 1e-16 * (1 + y @ y / N)
        for L in depths:
            par = paramgeo.get("deep-diagonal", p=p, depth=L, variant=variant)
            lim = vanishing_init_limit(par, X, y, alphas[-1])
            for alpha in alphas:
                t = time.process_time()
                res = implicit_bias(par, X, y, alpha, t_final=1e30, stop_loss=stop, chart="log",
                                    time_scale=alpha ** (2 - L), atol=1e-12,
                                    exact_jacobian=True)
                scale = np.abs(res.beta_potential).max()
                row = dict(
                    variant=variant, depth=L, alpha=alpha,
                    flow_vs_R=res.relative_deviation,
                    R_vs_alg1=float(np.abs(res.beta_potential - lim.beta_algorithm).max() / scale),
                    alg1_vs_lp=lim.distance, gap=res.l1_gap,
                    flow_time=res.flow_time / alpha ** (2 - L),
                    alg1_time=float(lim.sequence.times[-1]), seconds=time.process_time() - t)
                out.append(row)
                if verbose:
                    print(_line(row), flush=True)
    return out


HEADER = ("| variant | L | alpha | flow vs argmin R (rel.) | argmin R vs Algorithm 1 (rel.) | "
          "Algorithm 1 vs modified-l1 LP | modified-l1 gap | flow stop t / T | last jump "
          "tau_K | flow CPU s |\n|---|---|---|---|---|---|---|---|---|---|")


def _line(r):
    return (f"| {r['variant']} | {r['depth']} | {r['alpha']:g} | {r['flow_vs_R']:.1e} | "
            f"{r['R_vs_alg1']:.1e} | {r['alg1_vs_lp']:.1e} | {r['gap']:.2e} | "
            f"{r['flow_time']:.4g} | {r['alg1_time']:.4g} | {r['seconds']:.1f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--variants", default="product,signed")
    ap.add_argument("--depths", default="3,4")
    ap.add_argument("--alphas", default="1e-1,1e-2,1e-3,1e-4,1e-5,1e-6")
    a = ap.parse_args()
    variants = tuple(a.variants.split(","))
    depths = tuple(int(d) for d in a.depths.split(","))
    alphas = tuple(float(x) for x in a.alphas.split(","))
    if a.quick:
        table = rows(4, 8, 2, (3,), (1e-1, 1e-3), variants=variants)
    else:
        table = rows(10, 20, 3, depths, alphas, variants=variants)
    text = "\n".join([HEADER] + [_line(r) for r in table])
    print(text)
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
