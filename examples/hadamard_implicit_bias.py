"""Implicit bias of the Hadamard parameterization beta = u * v: hyperbolic entropy, l1, l2.

Gradient flow on the squared loss (1/2N) |X beta - y|^2 from the initialisation of scale alpha
(``init_at_scale``: u = 2 alpha, v = 0, Woodworth et al.'s w+ = w- = alpha) converges to
argmin R_alpha(beta) subject to X beta = y, R_alpha the hyperbolic entropy (Woodworth,
Gunasekar, Lee, Moroshko, Savarese, Golan, Soudry, Srebro 2020, "Kernel and rich regimes in
overparametrized models"; the mirror-flow view: Li, Wang, Lee, Arora 2022). As alpha -> 0 the
limit approaches the minimum-l1 interpolator (linprog), as alpha -> infinity the minimum-l2 one.

The script draws a random sparse regression (N = 20, p = 60, 5 nonzeros), and for each alpha
prints the distance between the flow limit and the potential's minimiser, the l1 gap and the
distances to the l1 and l2 interpolators (``paramgeo.mirror.implicit_bias``).
``--write-data FILE.npz`` saves X and y for

    paramgeo implicit-bias hadamard -p p=60 --data FILE.npz --init-scale 0.01

Usage: python examples/hadamard_implicit_bias.py [--seed N] [--write-data sparse.npz]
"""

import argparse

import numpy as np

import paramgeo
from paramgeo.mirror import implicit_bias


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=2023)
    parser.add_argument("--write-data", default=None)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    X = rng.standard_normal((20, 60))
    beta_star = np.zeros(60)
    beta_star[rng.choice(60, 5, replace=False)] = 2 * rng.standard_normal(5)
    y = X @ beta_star
    if args.write_data:
        np.savez(args.write_data, X=X, y=y)
    param = paramgeo.get("hadamard", p=60)
    print(f"{'alpha':>8}  {'|flow - argmin R|':>17}  {'l1 gap':>8}  {'|b - b_l1|':>10}  "
          f"{'|b - X^+ y|':>11}  {'flow time':>9}")
    for alpha in (1e-1, 1e-2, 1e-3, 1e-4, 1.0, 30.0):
        r = implicit_bias(param, X, y, alpha)
        print(f"{alpha:8.0e}  {r.deviation:17.2e}  {r.l1_gap:8.4f}  {r.l1_distance:10.4f}  "
              f"{r.l2_distance:11.2e}  {r.flow_time:9.3g}")


if __name__ == "__main__":
    main()
