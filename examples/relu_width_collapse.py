"""Experiment: effective width collapse of wide two-layer ReLU networks.

A two-layer ReLU network on N training inputs in R^d only sees each neuron through its
activation pattern (1[w_j . x_i + b_j > 0])_i, and there are only P such patterns: the affine
dichotomies of the inputs, P = 2 sum_{k=0}^{d} binom(N - 1, k) for inputs in general position
(Cover 1965). The claim tested here: however wide the network, training with small noise
leaves at most 2P - 1 distinct learned directions (w_j, b_j) / |(w_j, b_j)| (neurons merge
into few directions; cf. Maennel, Bousquet, Gelly 2018, "Gradient descent quantizes ReLU
network features").

Setup: d = 2, N = 6 Gaussian inputs, k = 3 Gaussian targets (multivariate regression), the
``relu-net`` plugin with those inputs (``X=``), widths h = 25 .. 400. Noisy gradient descent
theta <- theta - eta (J^T r / N + lambda theta) + sigma sqrt(eta) xi (xi ~ N(0, I); residual
r = phi(theta) - Y; J^T r by the plugin's closed-form VJP; a small weight decay lambda), from
alpha N(0, I). At the end, a neuron is *active* if it is active on some input and carries at
least 1% of the largest |(w_j, b_j)| |a_j|; the unit directions of the active neurons are
clustered greedily (a neuron joins the first centre within ``--angle`` radians), and the
number of clusters is the number of learned directions. P is counted exactly
(``ReluNet.activation_patterns``: cells of the hyperplane arrangement in (w, b)-space) and
checked against Cover's formula. The non-redundancy of the directions is about *ternary*
patterns sign(w . x_i + b) in {-1, 0, +1} (a hyperplane through a data point gives 0): each
cluster centre's ternary pattern is counted (0 where the hyperplane passes within ``--angle``
of the lifted input (x_i, 1)), beside the binary patterns of the active neurons.

Output: examples/output/relu_width_collapse.{md,csv,png}. Runtime about a minute.

``--mean-field`` computes instead the mean-field stationary measure of the same noisy descent
(``paramgeo.flows.mean_field``; temperature tau = sigma^2 / 2, effective temperature
T = h tau) for each noise level and width: the modes of its angular density (exact local
maxima), those holding at least one neuron in expectation (h * mass >= 1), the effective number
exp(entropy of the mode masses), the modes' median angular widths, whether their ternary
patterns are distinct, and the clusters the greedy 0.05 rad clustering finds among h neurons
drawn i.i.d. from the measure (mean and standard deviation over five draws); then the modes as
T -> 0 down to the zero-temperature limit (the group-lasso dual). Output:
examples/output/relu_width_collapse_mean_field.{md,csv}. Runtime about two minutes.

Usage: python examples/relu_width_collapse.py [--widths 25,50,...] [--steps S] [--quick]
       python examples/relu_width_collapse.py --mean-field [--widths 25,100,400]
"""

import argparse
import csv
import io
import time
from math import comb
from pathlib import Path

import numpy as np

import paramgeo
from paramgeo.flows import mean_field
from paramgeo.io.files import write_file


def train(p, Y, steps, lr, wd, sigma, alpha, rng):
    """Noisy gradient descent on 1/(2N) |phi(theta) - Y|^2 + wd/2 |theta|^2."""
    theta = alpha * rng.standard_normal(p.n)
    N = Y.shape[0]
    for _ in range(steps):
        r = (p.forward(theta) - Y) / N
        theta = (theta - lr * (p.vjp(theta, r.ravel()) + wd * theta)
                 + sigma * np.sqrt(lr) * rng.standard_normal(p.n))
    return theta


def ternary_pattern(u, X1, angle):
    """sign(u . (x_i, 1)) in {-1, 0, +1} per input, 0 where the hyperplane of the unit direction
    u passes within ``angle`` rad of the lifted input (x_i, 1), i.e. through the data point at
    the clustering resolution."""
    z = X1 @ u / np.linalg.norm(X1, axis=1)
    return tuple(np.where(np.abs(z) < np.sin(angle), 0, np.sign(z)).astype(int))


def learned_directions(p, theta, angle, share=1e-2):
    """(active neurons, clusters of their unit directions, their distinct binary activation
    patterns, the distinct ternary patterns of the cluster centres, the centres whose
    hyperplane passes through a data point)."""
    W, b, a = (p.spec.unpack(theta)[k] for k in ("W", "b", "a"))
    U = np.hstack([W, b[:, None]])
    size = np.linalg.norm(U, axis=1) * np.linalg.norm(a, axis=1)
    Z = p.X @ W.T + b
    active = np.flatnonzero((size >= share * size.max()) & (Z > 0).any(axis=0))
    centres = []
    for u in U[active] / np.linalg.norm(U[active], axis=1, keepdims=True):
        if not any(u @ c >= np.cos(angle) for c in centres):
            centres.append(u)
    patterns = {tuple((Z[:, j] > 0).astype(int)) for j in active}
    X1 = np.hstack([p.X, np.ones((p.X.shape[0], 1))])
    ternary = [ternary_pattern(c, X1, angle) for c in centres]
    return (len(active), len(centres), len(patterns), len(set(ternary)),
            sum(0 in t for t in ternary))


def parser():
    """The command line; its defaults are the run of docs/plugins/relu-net.md."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", default="25,50,100,200,400")
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--wd", type=float, default=1e-2)
    ap.add_argument("--sigma", type=float, default=1e-4)
    ap.add_argument("--alpha", type=float, default=0.1)
    ap.add_argument("--angle", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="widths 25,100; 5000 steps")
    ap.add_argument("--mean-field", action="store_true",
                    help="the stationary measure over noise levels (widths default 25,100,400)")
    ap.add_argument("--sigmas", default="1e-4,1e-3,1e-2,3e-2", help="with --mean-field")
    ap.add_argument("--grid", type=int, default=200_000, help="points of S^2 (--mean-field)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "output"))
    return ap


def problem(seed, d=2, N=6, k=3):
    """The inputs X (N x d), targets Y (N x k) and P, the number of affine dichotomies."""
    data = np.random.default_rng(seed)
    X, Y = data.standard_normal((N, d)), data.standard_normal((N, k))
    P = len(paramgeo.get_class("relu-net")(X=X, width=1, outputs=k).activation_patterns())
    cover = 2 * sum(comb(N - 1, j) for j in range(d + 1))
    assert P == cover, (P, cover)  # inputs in general position: the exact count is Cover's
    return X, Y, P


def width_row(X, Y, P, h, args, steps):
    """One row of the table: train width ``h`` and count what it learned."""
    p = paramgeo.get_class("relu-net")(X=X, width=h, outputs=Y.shape[1])
    t0 = time.perf_counter()
    theta = train(p, Y, steps, args.lr, args.wd, args.sigma, args.alpha,
                  np.random.default_rng(args.seed + h))
    active, directions, patterns, ternary, through = learned_directions(p, theta, args.angle)
    loss = 0.5 * np.sum((p.forward(theta) - Y) ** 2) / len(X)
    return {"width": h, "active": active, "directions": directions, "patterns": patterns,
            "ternary_patterns": ternary, "through_a_point": through, "P": P,
            "bound_2P_minus_1": 2 * P - 1, "within_bound": directions <= 2 * P - 1,
            "train_loss": float(loss), "seconds": round(time.perf_counter() - t0, 1)}


def table_row(r):
    """A row of the Markdown table (docs/plugins/relu-net.md, docs/gallery/)."""
    return (f"| {r['width']} | {r['active']} | {r['directions']} | {r['patterns']} | "
            f"{r['ternary_patterns']} | {r['through_a_point']} | "
            f"{r['bound_2P_minus_1']} | {r['train_loss']:.3g} |")


def mean_field_row(X, Y, P, h, sigma, args, r0=None):
    """One row of the mean-field table: the stationary measure at width h and noise sigma, and
    the greedy clusters among h neurons drawn from it."""
    m = mean_field.stationary_measure(X, Y, width=h, tau=sigma ** 2 / 2, weight_decay=args.wd,
                                      n_grid=args.grid, r0=r0)
    p = paramgeo.get_class("relu-net")(X=X, width=h, outputs=Y.shape[1])
    counts = [learned_directions(p, p.point(*mean_field.sample_neurons(
        m, X, h, np.random.default_rng(args.seed + s))), args.angle)[1] for s in range(5)]
    occupied = m.mode_masses * h >= 1
    return m, {"sigma": sigma, "width": h, "T": m.temperature, "modes": m.n_modes,
               "occupied": m.occupied, "effective": round(m.effective, 2),
               "median_width_occupied": round(float(np.median(m.mode_widths[occupied])), 4),
               "patterns_distinct": m.patterns_unique,
               "clusters_mean": float(np.mean(counts)), "clusters_sd": float(np.std(counts)),
               "bound_2P_minus_1": 2 * P - 1, "grid_spacing": round(m.spacing, 4)}


def mean_field_main(args, X, Y, P):
    """The --mean-field run: the stationary measure over noise levels and widths, then T -> 0."""
    widths = [int(w) for w in args.widths.split(",")]
    if args.widths == parser().get_default("widths"):
        widths = [25, 100, 400]
    runs = sorted(((h * s ** 2 / 2, h, s) for s in map(float, args.sigmas.split(","))
                   for h in widths), reverse=True)  # continuation from high T down
    rows, r0 = [], None
    for _, h, s in runs:
        m, row = mean_field_row(X, Y, P, h, s, args, r0)
        r0 = m.residual
        rows.append(row)
        print(row, flush=True)
    rows.sort(key=lambda r: (r["sigma"], r["width"]))
    limit = mean_field.zero_temperature_limit(X, Y, weight_decay=args.wd)
    sweep, r0 = [], None
    for T in (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6):
        m = mean_field.stationary_measure(X, Y, width=1, tau=T, weight_decay=args.wd,
                                          n_grid=args.grid, r0=r0)
        r0 = m.residual
        sweep.append((f"{T:.0e}", m.n_modes, f"{m.effective:.2f}",
                      f"{np.max(np.abs(m.residual - limit.residual)):.3f}",
                      m.patterns_unique))
        print(sweep[-1], flush=True)
    print(f"T -> 0 limit: {len(limit.modes)} modes, {limit.support} with |g| = lambda; "
          f"ternary patterns distinct: {len(set(limit.mode_patterns)) == len(limit.modes)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    write_file(out / "relu_width_collapse_mean_field.csv", buffer.getvalue(), what="table",
               replace=True)
    lines = [f"# Mean-field stationary measure (d = 2, N = {len(X)}; 2P - 1 = {2 * P - 1}; "
             f"weight decay {args.wd}; grid of {args.grid} points, spacing "
             f"{rows[0]['grid_spacing']} rad)", "",
             "| sigma | width | T = h sigma^2/2 | modes | occupied | effective | median width "
             "(rad) | ternary distinct | clusters of h draws |",
             "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['sigma']:g} | {r['width']} | {r['T']:.2g} | {r['modes']} | {r['occupied']} "
              f"| {r['effective']} | {r['median_width_occupied']} | {r['patterns_distinct']} | "
              f"{r['clusters_mean']:.1f} ± {r['clusters_sd']:.1f} |" for r in rows]
    lines += ["", "| T | modes | effective | max abs(r - r*) | ternary distinct |",
              "|---|---|---|---|---|"]
    lines += [f"| {t} | {n} | {e} | {dr} | {u} |" for t, n, e, dr, u in sweep]
    lines += [f"| 0 (limit) | {len(limit.modes)} ({limit.support} at abs(g) = lambda) | | 0 | "
              f"{len(set(limit.mode_patterns)) == len(limit.modes)} |"]
    write_file(out / "relu_width_collapse_mean_field.md", "\n".join(lines) + "\n",
               what="table", replace=True)
    print(f"wrote {out / 'relu_width_collapse_mean_field.md'}, .csv")


def main():
    args = parser().parse_args()
    if args.mean_field:
        X, Y, P = problem(args.seed)
        return mean_field_main(args, X, Y, P)
    widths = [25, 100] if args.quick else [int(w) for w in args.widths.split(",")]
    steps = 5000 if args.quick else args.steps
    d, N, k = 2, 6, 3
    X, Y, P = problem(args.seed, d, N, k)
    print(f"N = {N} inputs in R^{d}: P = {P} affine dichotomies (Cover: "
          f"{2 * sum(comb(N - 1, j) for j in range(d + 1))}); 2P - 1 = {2 * P - 1}")
    rows = []
    for h in widths:
        rows.append(width_row(X, Y, P, h, args, steps))
        print(rows[-1], flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "relu_width_collapse.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = [f"# Effective width collapse (d = {d}, N = {N}, k = {k}; P = {P}, 2P - 1 = "
             f"{2 * P - 1})", "",
             f"Noisy GD: {steps} steps, lr {args.lr}, weight decay {args.wd}, noise "
             f"{args.sigma}, init scale {args.alpha}; directions clustered within "
             f"{args.angle} rad.", "",
             "| width | active neurons | learned directions | binary patterns | ternary "
             "patterns of the directions | directions through a data point | 2P - 1 "
             "| train loss |", "|---|---|---|---|---|---|---|---|"]
    lines += [table_row(r) for r in rows]
    (out / "relu_width_collapse.md").write_text("\n".join(lines) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    hs = [r["width"] for r in rows]
    ax.plot(hs, [r["active"] for r in rows], "o-", label="active neurons")
    ax.plot(hs, [r["directions"] for r in rows], "s-", label="learned directions")
    ax.plot(hs, [r["patterns"] for r in rows], "^-", label="activation patterns used")
    ax.axhline(2 * P - 1, color="k", ls="--", label=f"2P - 1 = {2 * P - 1}")
    ax.axhline(P, color="gray", ls=":", label=f"P = {P}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("width h")
    ax.set_ylabel("count")
    ax.set_title(f"Two-layer ReLU, N = {N} inputs in R^{d}: width collapse")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "relu_width_collapse.png", dpi=120)
    print(f"wrote {out / 'relu_width_collapse.md'}, .csv, .png")


if __name__ == "__main__":
    main()
