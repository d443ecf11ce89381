"""Diagonal linear networks under vanishing initialisation: saddle-to-saddle dynamics.

beta = u * v (the ``hadamard`` plugin) trained by gradient flow on the squared loss
ell(beta) = (1/2n) |X beta - y|^2 from u_0 = sqrt(2) alpha 1, v_0 = 0. Pesme and Flammarion
(2023, "Saddle-to-saddle dynamics in diagonal linear networks", Algorithm 1) show that in time
rescaled by log(1/alpha) the trajectory converges, as alpha -> 0, to a piecewise-constant
process visiting saddles beta_k (minimisers of ell under sign constraints on an active set) with
jumps at times t_k given by a LARS-like recursion (``paramgeo.flows.saddle_to_saddle``; the
derivation: u^2 - v^2 = 2 alpha^2 is conserved, so beta' = -2 sqrt(beta^2 + alpha^4) grad ell
and (1/2) arcsinh(beta / alpha^2) / log(1/alpha) = -int_0^tau grad ell =: s(tau), with
|s| <= 1 in the limit and beta_i != 0 only where |s_i| = 1).

The script computes the algorithm's saddles and jump times, integrates gradient flow through the
engine for alpha in {1e-2, 1e-4, 1e-8}, and prints, per jump, the algorithm's rescaled time next
to the flow's (the loss crossing the midpoint between plateau losses) and, per plateau, the
distance max_i |beta_i(t) - beta_k,i| at the plateau's middle (the last one at the final time),
with the exponent p of a power law err ~ log(1/alpha)^-p fitted between consecutive alphas.
With the default alphas the last two jump times approach the algorithm's with p between 1.1
and 1.7 (a little faster than 1/log(1/alpha)), the plateau distances with p between 0.7 and
5.4 (the first plateau, beta = 0, is off by alpha / 2), and the first two jump times are within
0.015 of the algorithm's at every alpha, with no clean rate (tests/test_flows.py checks these
statements against the script's numbers).
The figure shows loss and coordinates against rescaled time with the algorithm's step function.
``--write-data FILE.npz`` saves A = X, y and theta0 (alpha = 1e-4) for

    paramgeo flow hadamard -p p=10 --loss squared --data FILE.npz --method flow --t-final T \\
        --rtol 1e-10 --atol 1e-14 --plot s2s.png

Usage: python examples/saddle_to_saddle.py [--out saddle_to_saddle.png] [--write-data s2s.npz]
"""

import argparse
from pathlib import Path

import numpy as np

import paramgeo
from paramgeo.flows import gradient_flow, jump_times, saddle_to_saddle
from paramgeo.losses import LinearMeasurements

ALPHAS = (1e-2, 1e-4, 1e-8)


def make_problem(n=6, p=10, seed=0):
    """A sparse regression: Gaussian X (n x p), beta* with 3 non-zeros, y = X beta*."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta_star = np.zeros(p)
    beta_star[:3] = [3.0, -2.0, 1.0]
    return X, X @ beta_star


def initial_point(p, alpha):
    """u_0 = sqrt(2) alpha 1, v_0 = 0: beta_0 = 0 and u^2 - v^2 = 2 alpha^2."""
    return np.concatenate([np.full(p, np.sqrt(2) * alpha), np.zeros(p)])


def run_flow(loss, p, alpha, tau_final, records=3000):
    param = paramgeo.get("hadamard", p=p)
    L = np.log(1 / alpha)
    t_eval = np.linspace(0.0, tau_final * L, records)
    return gradient_flow(param, loss, initial_point(p, alpha), tau_final * L, t_eval=t_eval,
                         rtol=1e-10, atol=1e-6 * alpha ** 2)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=6)
    ap.add_argument("--p", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--alphas", type=float, nargs="+", default=list(ALPHAS))
    ap.add_argument("--records", type=int, default=3000)
    ap.add_argument("--out", default=str(Path(__file__).parent / "output" / "saddle_to_saddle.png"))
    ap.add_argument("--write-data", default=None)
    args = ap.parse_args(argv)

    X, y = make_problem(args.n, args.p, args.seed)
    loss = LinearMeasurements(X, y)
    seq = saddle_to_saddle(loss)
    print("Algorithm 1 (Pesme-Flammarion 2023), rescaled time t / log(1/alpha):")
    print(seq)
    tau_final = 2.0 * seq.times[-1]
    runs = {a: run_flow(loss, args.p, a, tau_final, args.records) for a in args.alphas}
    K = len(seq.times)
    print("\njump times (rescaled): Algorithm 1 vs gradient flow")
    print(f"{'jump':>4} {'Algorithm 1':>12} " + " ".join(f"{'alpha=%g' % a:>12}" for a in runs))
    jumps = {a: jump_times(tr.times / np.log(1 / a), tr.losses, seq.losses)
             for a, tr in runs.items()}
    for k in range(1, K):
        print(f"{k:4d} {seq.times[k]:12.4f} " + " ".join(f"{jumps[a][k - 1]:12.4f}" for a in runs))
    print("\nplateau values: loss of the saddle and max_i |beta_i(t_mid) - beta_k,i| of the flow"
          " (last row: at the final time)")
    print(f"{'k':>3} {'support':>14} {'loss':>10} "
          + " ".join(f"{'alpha=%g' % a:>12}" for a in runs))
    plateau = {a: [] for a in runs}
    for k in range(K):
        # the middle of each plateau; the last one (the limit) at the final time
        mid = 0.5 * (seq.times[k] + seq.times[k + 1]) if k + 1 < K else tau_final
        for a, tr in runs.items():
            i = int(np.argmin(np.abs(tr.times / np.log(1 / a) - mid)))
            plateau[a].append(float(np.max(np.abs(tr.predictors[i] - seq.saddles[k]))))
        support = str(np.flatnonzero(np.abs(seq.saddles[k]) > 1e-12).tolist())
        print(f"{k:3d} {support:>14} {seq.losses[k]:10.4g} "
              + " ".join(f"{plateau[a][k]:12.2e}" for a in runs))
    alphas = list(runs)
    logs = np.log(np.log(1 / np.array(alphas)))
    errors = {"jump": np.array([[abs(jumps[a][k - 1] - seq.times[k]) for a in alphas]
                                for k in range(1, K)]),
              "plateau": np.array([[plateau[a][k] for a in alphas] for k in range(K)])}
    # err ~ log(1/alpha)^-p between consecutive alphas: p = -d log err / d log log(1/alpha)
    rates = {kind: -np.diff(np.log(e), axis=1) / np.diff(logs) for kind, e in errors.items()}
    print("\nfitted p in err ~ log(1/alpha)^-p between consecutive alphas (p = 1: like "
          "1/log(1/alpha))")
    for kind, r in rates.items():
        first = 1 if kind == "jump" else 0
        for k, row in enumerate(r, start=first):
            print(f"  {kind} {k}: " + ", ".join(f"{p:.2f}" for p in row))
    print("\nconserved u_i^2 - v_i^2 along each flow: max relative drift "
          + ", ".join(f"alpha={a:g}: {tr.max_conserved_drift:.1e}" for a, tr in runs.items()))

    # the mirror engine's potential (hyperbolic entropy, scale alpha^2): its mirror flow is the
    # pushed-forward gradient flow (Woodworth et al. 2020; Li et al. 2022)
    from paramgeo.flows import mirror_flow

    a_big = max(runs)
    tr = runs[a_big]
    param = paramgeo.get("hadamard", p=args.p)
    short = tr.times[: len(tr.times) // 4]
    path = mirror_flow(param, loss, initial_point(args.p, a_big), short)
    dev = np.max(np.abs(path - tr.predictors[: len(short)])) / np.max(np.abs(tr.predictors))
    print(f"mirror flow (paramgeo.mirror potential) vs gradient flow, alpha={a_big:g}, "
          f"t <= {short[-1]:.3g}: max relative deviation {dev:.1e}")

    if args.write_data:
        alpha = 1e-4
        np.savez(args.write_data, A=X, y=y, theta0=initial_point(args.p, alpha))
        print(f"\ndata written to {args.write_data} (alpha = {alpha:g}); from the command line:\n"
              f"  paramgeo flow hadamard -p p={args.p} --loss squared --data {args.write_data} "
              f"--method flow --t-final {tau_final * np.log(1 / alpha):.4g} --rtol 1e-10 "
              f"--atol 1e-14 --plot s2s.png")
    if args.out:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(13, 4.2))
        ax = fig.subplots(1, 2)
        tgrid = np.linspace(0, tau_final, 2000)
        step_loss = [seq.losses[max(int(np.searchsorted(seq.times, t, side="right")) - 1, 0)]
                     for t in tgrid]
        for j, (a, tr) in enumerate(runs.items()):
            ax[0].semilogy(tr.times / np.log(1 / a), tr.losses, color=f"C{j}",
                           label=f"gradient flow, alpha={a:g}")
        ax[0].semilogy(tgrid, step_loss, "k--", lw=1.2, label="Algorithm 1 (alpha -> 0)")
        floor = min(tr.losses.min() for tr in runs.values())
        ax[0].set_ylim(bottom=floor / 10)  # Algorithm 1 ends at loss ~1e-30 (an exact fit)
        ax[0].set(xlabel="t / log(1/alpha)", ylabel="loss", title="loss: plateaus and jumps")
        ax[0].legend(fontsize=8)
        active = np.flatnonzero(np.max(np.abs(seq.saddles), axis=0) > 1e-12)
        a_small = min(runs)
        tr = runs[a_small]
        for c in active:
            ax[1].plot(tr.times / np.log(1 / a_small), tr.predictors[:, c], color=f"C{c % 10}",
                       label=f"beta[{c}]")
            ax[1].plot(tgrid, [seq.saddle_at(t)[c] for t in tgrid], "--", color=f"C{c % 10}",
                       lw=1)
        for t in seq.times[1:]:
            ax[0].axvline(t, color="grey", lw=0.5, alpha=0.5)
            ax[1].axvline(t, color="grey", lw=0.5, alpha=0.5)
        ax[1].set(xlabel="t / log(1/alpha)", ylabel="coordinate",
                  title=f"coordinates: flow at alpha={a_small:g} (solid), saddles (dashed)")
        ax[1].legend(fontsize=8)
        for a in ax:
            a.grid(alpha=0.3)
        fig.tight_layout()
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.out, dpi=110)
        print(f"figure written to {args.out}")
    return {"sequence": seq, "runs": runs, "jumps": jumps, "plateau": plateau,
            "errors": errors, "rates": rates}


if __name__ == "__main__":
    main()
