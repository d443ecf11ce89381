"""Structure matrices of four layers, and the power law of many Lotka-Volterra modes.

1. A(x) for a perceptron, a tied softmax-attention layer (qk-attention), a mixture of experts
   and a circular convolution (the last three from examples/structure_layers.py), each computed
   by autograd through the plugin contract, with the conditions of the expansion
   f(W; x) = f(0; x) + Tr[W W^T A(x)] + O(|W|^3) checked, and compared with central finite
   differences of forward.
2. K modes in a shared eigenbasis with targets m*_k = k^-beta and curvatures c_k = 1:
   lambda_k = 4 k^-beta, c_k m*_k^2 = k^-2 beta, so the loss while many modes are off decays as
   t^-(2 beta - 1)/beta. The fitted exponent (least squares in log-log, with its standard error)
   is printed beside the predicted one for several initial scales m_0: the prediction is the
   m_0 -> 0 limit (switch-on times log(m*_k / m_0) / lambda_k depend on k through log m*_k).
3. The exponent over four fit windows (between the i-th and j-th switch-on) beside the local
   exponent (b - 1) / ((1 - (k/K)^(b-1)) (a - beta / log(m*_k / m_0))) at the window's middle
   mode; then the same modes trained by discrete GD, SGD with gradient noise (three levels) and
   Adam from m_0 = 1e-10 (and GD and noisy SGD from 1e-30).

Writes its figure to examples/output/structure_matrices.png (``--out`` to choose).

Usage: python examples/structure_matrices.py [--out FILE.png] [--modes K] [--beta B]
"""

import argparse
from pathlib import Path

import numpy as np

import paramgeo
from paramgeo.contract.registry import load_plugin_file
from paramgeo.flows.mode_training import train_modes, window_exponents
from paramgeo.flows.structure import mode_dynamics, structure_matrix

LAYERS = [
    ("perceptron", dict(d=3, width=2, n_inputs=3), {"w": 0, "b": 0, "a": 0}),
    ("qk-attention", dict(output="attention", tied=True, heads=1, d=3, r=2, tokens=3), {"W": 2}),
    ("moe", dict(d=3, experts=3, n_inputs=3), {"w": 0, "g": 0, "a": 0}),
    ("conv", dict(length=5, filter=3, channels=2, n_inputs=2), {"u": 0, "a": 0}),
]
INITS = (1e-10, 1e-30, 1e-100)


def layers():
    """(name, StructureMatrices) of the four layers."""
    if "moe" not in paramgeo.available():
        load_plugin_file(Path(__file__).with_name("structure_layers.py"))
    return [(name, structure_matrix(paramgeo.get(name, **sizes), units))
            for name, sizes, units in LAYERS]


def modes(K=1000, beta=1.5, inits=INITS):
    k = np.arange(1, K + 1)
    times = np.geomspace(1.0, 1e9, 600)
    return {m0: mode_dynamics(k ** -beta, np.ones(K), m0, times) for m0 in inits}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", type=int, default=1000)
    ap.add_argument("--beta", type=float, default=1.5)
    ap.add_argument("--out", default=str(Path(__file__).parent / "output" /
                                         "structure_matrices.png"))
    args = ap.parse_args(argv)
    found = layers()
    print(f"{'layer':>13} {'units':>5} {'p':>3} {'trace form':>10} {'max|grad|':>9} "
          f"{'A vs FD':>9}")
    for name, res in found:
        print(f"{name:>13} {res.units:5d} {len(res.labels):3d} {str(res.trace_form):>10} "
              f"{res.gradient:9.1e} {res.fd_error:9.1e}")
    runs = modes(args.modes, args.beta)
    print(f"\n{args.modes} modes, m*_k = k^-{args.beta:g}: loss ~ t^-e")
    for m0, res in runs.items():
        f = res.fit
        print(f"  m_0 = {m0:.0e}: fitted e = {f.exponent:.4f} +- {f.error:.4f} on "
              f"[{f.t_min:.3g}, {f.t_max:.3g}] ({f.points} points); predicted "
              f"(2 beta - 1) / beta = {f.predicted:.4f}")
    k = np.arange(1, args.modes + 1)
    targets = k ** -args.beta
    print(window_exponents(targets, np.ones(args.modes), INITS,
                           [(2, 30), (2, 100), (10, 100), (30, 300)], np.geomspace(1, 1e7, 600)))
    for m0, method, lr, steps, noise in ((1e-10, "gd", 0.1, 100_000, 0.0),
                                         (1e-10, "sgd", 0.1, 100_000, 1e-6),
                                         (1e-10, "sgd", 0.1, 100_000, 1e-5),
                                         (1e-10, "sgd", 0.1, 100_000, 1e-4),
                                         (1e-10, "adam", 1e-3, 5_000, 0.0),
                                         (1e-30, "gd", 0.1, 200_000, 0.0),
                                         (1e-30, "sgd", 0.1, 200_000, 1e-6)):
        run = train_modes(targets, np.ones(args.modes), m0, steps, lr, method, noise=noise)
        print(f"  m_0 = {m0:.0e}, lr {lr:g}, noise {noise:g}: {run}")
    if args.out:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(14, 3.6))
        axes = fig.subplots(1, 5)
        for ax, (name, res) in zip(axes[:4], found):
            A = res.A.reshape(-1, *res.A.shape[-2:])[0]
            lim = np.max(np.abs(A)) or 1.0
            ax.imshow(A, cmap="RdBu_r", vmin=-lim, vmax=lim)
            ax.set_title(f"{name}: A(x_0), {len(res.labels)}x{len(res.labels)}", fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
        ax = axes[4]
        for i, (m0, res) in enumerate(runs.items()):
            f = res.fit
            ax.loglog(res.times, res.loss, color=f"C{i}", label=f"m0={m0:.0e}: e={f.exponent:.3f}")
            window = (res.times >= f.t_min) & (res.times <= f.t_max)
            t = res.times[window]
            ax.loglog(t, res.loss[window][0] * (t / t[0]) ** -f.predicted, "k:", lw=1)
        ax.set(xlabel="time t", ylabel="loss", title=f"predicted e = {f.predicted:.3f} (dotted)")
        ax.title.set_fontsize(9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.out, dpi=110)
        print(f"figure written to {args.out}")
    return found, runs


if __name__ == "__main__":
    main()
