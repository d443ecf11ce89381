"""The structure-matrix reduction: a layer's leading form Tr[W W^T A(x)] with order parameter
M = W W^T, data matrices sharing an eigenbasis, and Lotka-Volterra dynamics of the eigenvalues.

Model: predictions <A_i, M> with M = W W^T (the ``uut`` plugin, W in R^{d x d}), squared loss
ell(M) = (1/2N) sum_i (<A_i, M> - y_i)^2, where A_i = A(x_i) are the structure matrices of a
circular convolution layer (d channels of length-d filters, quadratic activation, summed
readout; examples/structure_layers.py), computed from the layer's forward by
paramgeo.flows.structure.structure_matrix: near zero the layer is f(W; x) = Tr[W W^T A(x)], with
W's columns the filters. When the data matrices share an eigenbasis E (here the real Fourier
basis: every A(x) is circulant),
A_i = E diag(a_i) E^T, and the start does too, W_0 = alpha E (M_0 = alpha^2 I), then
grad ell(M) = E diag(g) E^T with g = C m - b, C = (1/N) sum_i a_i a_i^T, b = (1/N) sum_i y_i a_i,
and gradient flow on W, dW/dt = -2 G W, gives dM/dt = -2 (G M + M G): M stays diagonal in E and
its eigenvalues m_k follow the Lotka-Volterra system

    dm_k/dt = -4 m_k g_k(m) = m_k (r_k - sum_l B_kl m_l),   r = 4 b,  B = 4 C.

Switch-on times. From m_k(0) = alpha^2, log m_k(t) = -2 log(1/alpha) + 4 int_0^t (-g_k).
* Naive (each mode alone, at its initial growth rate lambda_k = r_k = 4 b_k):
  t_k ~ 2 log(1/alpha) / lambda_k: exact to leading order for the first mode only.
* Coupled (the vanishing-initialisation limit): in rescaled time tau = t / log(1/alpha),
  s_k(tau) = -int_0^tau g_k must reach 1/2 for mode k to switch on, and the modes already on sit
  at the constrained minimiser of ell (m >= 0, off modes 0): the saddle-to-saddle recursion with
  thresholds upper = 1/2 and no lower bound (``paramgeo.flows.saddle_to_saddle``), predicting
  t_k ~ tau_k log(1/alpha) with relative error O(1 / log(1/alpha)).
The script integrates (i) gradient flow of uut through the engine, (ii) the Lotka-Volterra ODE
with solve_ivp, and prints the switch-on times (first time m_k reaches half its final value)
next to both predictions, for two init scales, and the largest off-diagonal entry of E^T M E
along the flow (the reduction's identity: round-off). ``--write-data FILE.npz`` saves A, y,
theta0 for

    paramgeo flow uut -p d=5 -p r=5 --loss squared --data FILE.npz --method flow --t-final T

Usage: python examples/lotka_volterra.py [--out lotka_volterra.png] [--write-data lv.npz]
"""

import argparse
from pathlib import Path

import numpy as np
from scipy.integrate import solve_ivp

import paramgeo
from paramgeo.flows import gradient_flow, saddle_to_saddle
from paramgeo.losses import LinearMeasurements
from paramgeo.contract.registry import load_plugin_file
from paramgeo.flows.structure import structure_matrix

ALPHAS = (1e-4, 1e-8)


def fourier_basis(d):
    """The real Fourier basis of R^d (columns: constant, then cos/sin pairs, then the
    alternating vector for even d) and the frequency of each column."""
    t = np.arange(d)
    cols, freq = [np.full(d, 1 / np.sqrt(d))], [0]
    for f in range(1, (d - 1) // 2 + 1):
        cols += [np.sqrt(2 / d) * np.cos(2 * np.pi * f * t / d),
                 np.sqrt(2 / d) * np.sin(2 * np.pi * f * t / d)]
        freq += [f, f]
    if d % 2 == 0:
        cols.append((-1.0) ** t / np.sqrt(d))
        freq.append(d // 2)
    return np.stack(cols, axis=1), np.array(freq)


def make_problem(d=5, N=40, seed=0):
    """A_i = A(x_i), the structure matrices of a circular convolution layer on signals
    x_i ~ N(0, I_d) (``conv`` of examples/structure_layers.py: length-d filters, quadratic
    activation, summed readout, f(W; x) = sum_c sum_t (u_c * x)_t^2 / 2 = Tr[W W^T A(x)]),
    computed by paramgeo.flows.structure.structure_matrix from the layer's forward. A(x) is a
    symmetric circulant matrix, diagonal in the real Fourier basis E for every x: a shared
    eigenbasis, eigenvalue features a_ik = |FFT(x_i)_k|^2 / 2 (equal within each cos/sin pair,
    mean about d / 2); target m*_k = 4 * 2^-f(k) / abar^2 (f the frequency, abar the mean
    feature, so that the growth rates 4 (C m*)_k stay O(10) as d grows), y = a m*."""
    if "conv" not in paramgeo.available():
        load_plugin_file(Path(__file__).with_name("structure_layers.py"))
    layer = paramgeo.get("conv", length=d, filter=d, channels=1, readout="sum",
                         activation="quadratic", n_inputs=N, x_seed=seed)
    A = structure_matrix(layer, {"u": 0}).A
    E, freq = fourier_basis(d)
    a = np.einsum("ik,nij,jk->nk", E, A, E)
    m_star = 4.0 * 0.5 ** freq / np.mean(a) ** 2
    y = a @ m_star
    return E, a, y, A, m_star


def switch_on(times, m):
    """First time each column of m reaches half of its final value."""
    out = []
    for k in range(m.shape[1]):
        hit = np.flatnonzero(m[:, k] >= 0.5 * m[-1, k])
        out.append(times[hit[0]] if len(hit) else np.nan)
    return np.array(out)


def simulate(E, a, y, A, alpha, t_final, records=4000):
    d = E.shape[0]
    param = paramgeo.get("uut", d=d, r=d)
    t_eval = np.linspace(0.0, t_final, records)
    traj = gradient_flow(param, LinearMeasurements(A, y), (alpha * E).ravel(), t_final,
                         t_eval=t_eval, rtol=1e-10, atol=1e-6 * alpha ** 2)
    M = traj.predictors.reshape(-1, d, d)
    D = np.einsum("ik,tij,jl->tkl", E, M, E)
    eig = np.einsum("tkk->tk", D)
    off = float(np.max(np.abs(D - eig[:, :, None] * np.eye(d))))
    C, b = a.T @ a / len(y), a.T @ y / len(y)
    lv = solve_ivp(lambda _, m: m * (4 * b - 4 * C @ m), (0.0, t_final), np.full(d, alpha ** 2),
                   t_eval=t_eval, rtol=1e-10, atol=1e-6 * alpha ** 2, method="LSODA")
    return traj, eig, off, lv.y.T


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--N", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--alphas", type=float, nargs="+", default=list(ALPHAS))
    ap.add_argument("--records", type=int, default=4000)
    ap.add_argument("--out", default=str(Path(__file__).parent / "output" / "lotka_volterra.png"))
    ap.add_argument("--write-data", default=None)
    args = ap.parse_args(argv)

    E, a, y, A, m_star = make_problem(args.d, args.N, args.seed)
    b = a.T @ y / args.N
    rates = 4 * b
    seq = saddle_to_saddle(LinearMeasurements(a, y), upper=0.5, lower=None)
    tau = np.array([seq.crossing_time(k, 0.5) for k in range(args.d)])
    print("growth rates lambda_k = 4 (C m*)_k:", np.round(rates, 3))
    print("saddle sequence of the LV limit (rescaled time):")
    print(seq)
    results = {}
    for alpha in args.alphas:
        L = np.log(1 / alpha)
        t_final = 1.5 * float(np.max(tau[np.isfinite(tau)])) * L
        traj, eig, off, lv = simulate(E, a, y, A, alpha, t_final, args.records)
        t_uut, t_lv = switch_on(traj.times, eig), switch_on(traj.times, lv)
        naive, coupled = 2 * L / rates, tau * L
        results[alpha] = dict(traj=traj, eig=eig, lv=lv, off=off, uut=t_uut, lv_t=t_lv,
                              naive=naive, coupled=coupled)
        print(f"\nalpha = {alpha:g} (log(1/alpha) = {L:.3f}); max off-diagonal of E^T M E along "
              f"the flow: {off:.1e}; max |m_uut - m_LV|: {np.max(np.abs(eig - lv)):.1e}")
        print(f"{'mode':>4} {'m*':>6} {'lambda':>8} {'naive 2L/lam':>13} {'saddle tau*L':>13} "
              f"{'LV ODE':>9} {'uut flow':>9}")
        for k in range(args.d):
            print(f"{k:4d} {m_star[k]:6.3g} {rates[k]:8.3f} {naive[k]:13.3f} {coupled[k]:13.3f} "
                  f"{t_lv[k]:9.3f} {t_uut[k]:9.3f}")
    if args.write_data:
        alpha = args.alphas[0]
        t_final = 1.5 * float(np.max(tau[np.isfinite(tau)])) * np.log(1 / alpha)
        np.savez(args.write_data, A=A, y=y, theta0=(alpha * E).ravel())
        print(f"\ndata written to {args.write_data} (alpha = {alpha:g}); from the command line:\n"
              f"  paramgeo flow uut -p d={args.d} -p r={args.d} --loss squared --data "
              f"{args.write_data} --method flow --t-final {t_final:.4g} --rtol 1e-10 "
              f"--atol {1e-6 * alpha ** 2:.0e} --plot lv.png")
    if args.out:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(13, 4.2))
        axes = fig.subplots(1, len(results))
        axes = np.atleast_1d(axes)
        for ax, (alpha, res) in zip(axes, results.items()):
            t = res["traj"].times
            for k in range(args.d):
                ax.plot(t, res["eig"][:, k], color=f"C{k}", lw=2, alpha=0.6,
                        label=f"m_{k} (uut flow)")
                ax.plot(t, res["lv"][:, k], "k:", lw=1)
                ax.axvline(res["coupled"][k], color=f"C{k}", ls="--", lw=0.8)
            ax.set(xlabel="time t", ylabel="eigenvalue of M = W W^T",
                   title=f"alpha={alpha:g}: flow (colour), LV ODE (dotted), prediction (dashed)")
            ax.set_title(ax.get_title(), fontsize=9)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        fig.tight_layout()
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.out, dpi=110)
        print(f"figure written to {args.out}")
    return {"sequence": seq, "results": results}


if __name__ == "__main__":
    main()
