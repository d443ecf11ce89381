"""paramgeo in one model: the Hadamard parameterization beta = u * v, from its Jacobian to the
implicit bias of gradient flow.

The two-layer diagonal linear network x -> <u * v, x> (u, v in R^p) is the smallest model in which
every question paramgeo answers has a striking answer:

1. Rank drop and its cause. J = [diag(v), diag(u)] has rank #{i : (u_i, v_i) != 0}: switching
   off units (u_i = v_i = 0) drops the rank, and ``critical.classify`` names the cause (the
   point lies on a subnetwork, where the orbit of the symmetry group degenerates too).
2. Symmetry and quotient. The rescalings (u_i, v_i) -> (c_i u_i, v_i / c_i) leave beta unchanged:
   a p-dimensional torus, so the quotient (the predictors) has dimension 2p - p = p.
3. A flow and its conserved quantities. Gradient flow on the squared loss
   (1/2N) |X beta - y|^2 conserves u_i^2 - v_i^2 (Kunin et al. 2021), one law per generator.
4. Its implicit bias. The fields grad beta_i commute, so the flow on beta is a mirror flow of the
   hyperbolic entropy R_alpha; from init_at_scale(alpha) (u = 2 alpha, v = 0) the flow limit is
   argmin R_alpha(beta) s.t. X beta = y, which tends to the minimum-l1 interpolator as
   alpha -> 0 and to the minimum-l2 one as alpha grows (Woodworth et al. 2020).

The script prints each step and writes a four-panel figure (default
``examples/output/demo.png``; ``--out`` to choose). It runs in a few seconds.

Usage: python examples/demo.py [--out FILE.png] [--seed N]
"""

import argparse
import time
from pathlib import Path

import numpy as np

import paramgeo
from paramgeo import critical, flows, losses, mirror

P, N, K = 30, 12, 3  # coordinates, measurements, nonzeros of the sparse truth


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "output" / "demo.png"),
                    help="the figure to write (.png, .svg or .pdf) [default: %(default)s]")
    ap.add_argument("--seed", type=int, default=4)
    args = ap.parse_args()
    start = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    param = paramgeo.get("hadamard", p=P)

    # 1. rank drop at a point, and why
    generic = param.random_point(rng)
    off = param.as_theta(generic.copy())
    dead = [0, 1, 2]
    off[dead] = 0.0                      # u_i = 0
    off[[P + i for i in dead]] = 0.0     # v_i = 0: units 0, 1, 2 switched off
    r_gen, r_off = paramgeo.rank_at(param, generic), paramgeo.rank_at(param, off)
    print(f"1. {param.name} p = {P}: n = {param.n} parameters, predictors in R^{param.m}")
    print(f"   rank of J at a random point: {r_gen.rank}; with units {dead} switched off: "
          f"{r_off.rank}")
    print("   " + str(critical.classify(param, off)).replace("\n", "\n   "))
    print("\n".join([
        f"   reading it: J's singular values above tol (the rank tolerance) count, {r_off.rank} "
        "here;",
        "   gap = the last counted over the first dropped one (inf: those dropped are exactly 0,",
        f"   a clear decision); s_R/s_1 = the R-th over the largest, R = {r_gen.rank} the generic "
        "rank",
        "   (0: J lost rank exactly); kernel dim = n - rank; orbit dim = the dimension of the",
        "   symmetry group's orbit through theta; 'h0: removed' = unit 0 has u_0 = v_0 = 0",
        f"   (no weight in or out), so theta lies on the subnetwork without units {dead},",
        f"   whose generic rank {r_off.rank} explains the drop"]))

    # 2. the symmetry group and the quotient
    group = param.symmetry()
    print(f"2. symmetry {group.name}, dimension {group.dim}; quotient dimension "
          f"n - dim G = {param.n - group.dim} = generic rank {paramgeo.generic_rank(param)}")

    # 3. a flow from the initialisation of scale alpha, and its conserved quantities
    X = rng.standard_normal((N, P))
    beta_star = np.zeros(P)
    beta_star[rng.choice(P, K, replace=False)] = rng.choice([-1.0, 1.0], K) * (1 + rng.random(K))
    y = X @ beta_star
    loss = losses.LinearMeasurements(X, y)
    alpha = 1e-2
    traj = flows.gradient_flow(param, loss, param.init_at_scale(alpha), 1e4, log_times=True,
                               n_records=200, rtol=1e-10, atol=1e-14,
                               stop_loss=1e-20 * (1 + y @ y / N))
    print(f"3. gradient flow from init_at_scale({alpha:g}): loss {traj.losses[0]:.3g} -> "
          f"{traj.losses[-1]:.2g} at t = {traj.times[-1]:.3g}; {len(traj.conserved_labels)} "
          f"conserved quantities ({traj.conserved_labels[0]}, ...), max relative drift "
          f"{traj.max_conserved_drift:.1e}")

    # 4. the implicit bias: the flow limit against argmin R_alpha, min-l1 and min-l2
    print(f"4. {'alpha':>6}  {'|flow - argmin R|':>17}  {'|b - b_l1|':>10}  {'|b - X^+ y|':>11}")
    print("   (largest coordinate differences between the flow's limit b and argmin R_alpha,\n"
          "   the minimum-l1 interpolator b_l1 and the minimum-l2 one X^+ y)")
    biases = {}
    for a in (1e-3, 1e-1, 10.0):
        biases[a] = mirror.implicit_bias(param, X, y, a)
        b = biases[a]
        print(f"   {a:6g}  {b.deviation:17.1e}  {b.l1_distance:10.3f}  {b.l2_distance:11.3f}")
    print(f"   small alpha: the sparse (min-l1) interpolator; large alpha: min-l2 "
          f"(R_alpha = {biases[1e-3].potential.split(';')[0]})")

    path = figure(param, r_gen, r_off, dead, traj, biases, beta_star, args.out)
    print(f"figure written to {path} ({time.perf_counter() - start:.1f} s)")


def figure(param, r_gen, r_off, dead, traj, biases, beta_star, out):
    """The four panels: singular values, the flow's loss and predictor, conserved quantities,
    and the implicit bias against min-l1 / min-l2."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(2, 2, figsize=(11, 7.5))
    a = ax[0, 0]
    a.semilogy(np.sort(r_gen.singular_values)[::-1], "o-", ms=3, label="random point")
    s_off = np.maximum(np.sort(r_off.singular_values)[::-1], 1e-17)
    a.semilogy(s_off, "s-", ms=3, label=f"units {dead} off")
    a.axhline(r_off.tol, color="gray", ls=":", lw=1, label="rank tolerance")
    a.set(title=f"1. rank drop: {r_gen.rank} -> {r_off.rank} (subnetwork)",
          xlabel="index i", ylabel="singular value s_i of J")
    a.legend(fontsize=8)

    a = ax[0, 1]
    t = traj.times
    for i in np.argsort(-np.abs(traj.final_predictor))[:6]:
        a.semilogx(t[1:], traj.predictors[1:, i], lw=1.2)
    a.set(title="3. gradient flow from init_at_scale(0.01): beta_i(t)",
          xlabel="time t", ylabel="beta_i = u_i v_i")
    b = a.twinx()
    b.loglog(t[1:], traj.losses[1:], "k--", lw=1, label="loss")
    b.set_ylabel("loss (dashed)")

    a = ax[1, 0]
    drift = np.abs(traj.conserved - traj.conserved[0]) / np.maximum(traj.conserved_scale, 1e-300)
    a.semilogx(t[1:], np.max(drift[1:], axis=1), "C2")
    a.set(title=f"2-3. torus {param.symmetry().name}: u_i^2 - v_i^2 conserved",
          xlabel="time t", ylabel="max_i relative drift of u_i^2 - v_i^2")
    a.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))

    a = ax[1, 1]
    idx = np.arange(param.m)
    small, large = biases[min(biases)], biases[max(biases)]
    a.plot(idx, beta_star, "k*", ms=10, label="truth (sparse)")
    a.plot(idx, small.beta_flow, "o", mfc="none", ms=7, label=f"flow limit, alpha={min(biases):g}")
    a.plot(idx, small.beta_l1, "x", ms=5, label="min-l1 interpolator")
    a.plot(idx, large.beta_flow, "C3.", ms=6, label=f"flow limit, alpha={max(biases):g}")
    a.plot(idx, large.beta_l2, "C3_", ms=8, label="min-l2 interpolator")
    a.set(title="4. implicit bias: alpha -> 0 gives l1, large alpha l2",
          xlabel="coordinate i", ylabel="beta_i")
    a.legend(fontsize=7)
    fig.suptitle(f"paramgeo demo: hadamard beta = u * v, p = {param.m}", fontsize=12)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


if __name__ == "__main__":
    main()
