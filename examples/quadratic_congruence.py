"""Positive quadratic networks f_U(x) = x^T U U^T x: gradient descent on U is a congruence on Q.

With Q = U U^T and the squared loss ell(Q) = (1/2N) sum_i (x_i^T Q x_i - y_i)^2 (linear
measurements A_i = x_i x_i^T of Q), the gradient G = grad ell(Q) = (1/N) sum_i r_i x_i x_i^T is
symmetric, so grad_U L = J^T G = (G + G^T) U = 2 G U and one step of descent,
U_{t+1} = U_t - 2 eta G_t U_t = (I - 2 eta G_t) U_t, moves Q by the exact congruence

    Q_{t+1} = (I - 2 eta G_t) Q_t (I - 2 eta G_t).

The script runs descent through the engine (paramgeo.flows.gradient_descent with the factored
QuadraticMeasurements loss), recomputes every Q_{t+1} from Q_t and G_t by the congruence, prints
the relative error per step (round-off: ~1e-15) and writes a figure (loss, eigenvalues of Q,
congruence error). ``--write-data FILE.npz`` saves X, y, theta0 so that the same run is

    paramgeo flow uut -p d=D -p r=R --loss quadratic --data FILE.npz --method gd --steps S --lr ETA

Usage: python examples/quadratic_congruence.py [--d 8 --r 3 --n 200 --steps 100 --lr 0.02]
       [--out quadratic_congruence.png] [--write-data quad.npz]
"""

import argparse
from pathlib import Path

import numpy as np

import paramgeo
from paramgeo.flows import gradient_descent
from paramgeo.losses import QuadraticMeasurements


def make_problem(d, r, n, seed):
    """Inputs x_i ~ N(0, I_d / d), targets from a planted rank-r Q*, a small random U_0."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    U_star = rng.standard_normal((d, r)) / np.sqrt(d)
    y = np.sum((X @ U_star) ** 2, axis=1)
    theta0 = 0.3 * rng.standard_normal(d * r) / np.sqrt(d)
    return X, y, theta0


def congruence_errors(traj, loss, lr):
    """max |Q_{t+1} - (I - 2 eta G_t) Q_t (I - 2 eta G_t)| / |Q_{t+1}| (Frobenius) per step."""
    d = loss.d
    Qs = traj.predictors.reshape(-1, d, d)
    errs = []
    for t in range(len(Qs) - 1):
        G = loss.grad(Qs[t].ravel()).reshape(d, d)
        P = np.eye(d) - 2 * lr * G
        pred = P @ Qs[t] @ P
        errs.append(np.linalg.norm(Qs[t + 1] - pred) / np.linalg.norm(Qs[t + 1]))
    return np.array(errs)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=8)
    ap.add_argument("--r", type=int, default=3)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(Path(__file__).parent / "output" / "quadratic_congruence.png"))
    ap.add_argument("--write-data", default=None)
    args = ap.parse_args(argv)

    X, y, theta0 = make_problem(args.d, args.r, args.n, args.seed)
    param = paramgeo.get("uut", d=args.d, r=args.r)
    loss = QuadraticMeasurements(X, y)
    traj = gradient_descent(param, loss, theta0, args.steps, args.lr, record_every=1)
    errs = congruence_errors(traj, loss, args.lr)
    print(traj)
    print(f"{'step':>5} {'loss':>12} {'|Q_t+1 - congruence| / |Q_t+1|':>32}")
    for t in sorted(set(np.linspace(0, args.steps - 1, 8).astype(int))):
        print(f"{t:5d} {traj.losses[t]:12.6g} {errs[t]:32.2e}")
    print(f"max relative congruence error over {args.steps} steps: {errs.max():.2e} "
          f"(acceptance 1e-12: {'met' if errs.max() < 1e-12 else 'MISSED'})")

    if args.write_data:
        np.savez(args.write_data, X=X, y=y, theta0=theta0)
        print(f"data written to {args.write_data}; the same run from the command line:\n"
              f"  paramgeo flow uut -p d={args.d} -p r={args.r} --loss quadratic --data "
              f"{args.write_data} --method gd --steps {args.steps} --lr {args.lr} "
              f"--plot uut_gd.png")
    if args.out:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(13, 3.8))
        ax = fig.subplots(1, 3)
        steps = traj.times
        ax[0].semilogy(steps, traj.losses)
        ax[0].set(xlabel="step", ylabel="loss", title="gradient descent on U (engine)")
        eig = np.linalg.eigvalsh(traj.predictors.reshape(-1, args.d, args.d))[:, ::-1]
        ax[1].plot(steps, eig[:, : args.r + 1])
        ax[1].set(xlabel="step", ylabel="eigenvalue", title=f"top {args.r + 1} eigenvalues of Q")
        ax[2].semilogy(steps[1:], np.maximum(errs, 1e-18), ".")
        ax[2].axhline(1e-12, color="k", ls="--", lw=0.8, label="1e-12")
        ax[2].set(xlabel="step", ylabel="relative error",
                  title="Q_{t+1} vs (I-2ηG)Q(I-2ηG)")
        ax[2].legend()
        for a in ax:
            a.grid(alpha=0.3)
        fig.tight_layout()
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.out, dpi=110)
        print(f"figure written to {args.out}")
    return {"trajectory": traj, "errors": errs}


if __name__ == "__main__":
    main()
