"""Online SGD on attention-indexed data: the exact order-parameter equations against the
simulation, direct / tied / untied S, and the weak-recovery time of tied S against d.

Writes examples/output/online_attention.png and online_attention.json (or to --out).

1. Direct S (plugin ``matrix``), linear link, label noise 0.5, eta = 0.5 / d, d = 200: the
   order parameters of one run to t = 2 against the exact high-d equations and their finite-d
   form, and its moments Tr(S^3)/d, Tr(S^4)/d against the free-convolution prediction
   (docs/online-sgd.md).
1b. Tied S = W W^T / sqrt(r d) (uut), linear link, label noise 0.5, r = d / 2, start W0 with
   entries N(0, 0.09), d = 200: the truncated moment hierarchy (order 12) against one run at
   eta = 0.02 to t = 2.5 and at eta = 0.1 to t = 0.5, and the truncation error against the
   order (orders 3..13 against order 15), with its exponential fit.
2. Link |h| (even), centered tied teacher S* = W W^T / sqrt(r d) - mean, r = d / 2, d = 48:
   tied S = W W^T / sqrt(r d) (uut) and untied S = U V^T / sqrt(r d) (uvt) from Gaussian
   factors, eta = 0.1; direct S from S = 0 and from a random symmetric S with eta = 1.5 / d.
3. Tied S to weak recovery (|cosine| >= 0.25) over d in {16, 24, 32, 48, 64, 96}, eight seeds
   each: the fit of n / log d ~ d^gamma and of t = n / d^2 against log d; direct S over the
   same horizon.
4. Direct S from a random symmetric start, eta = 1.5 / d, link |h|, centered tied teacher, to
   t = 6 over d in {16, 24, 32, 48, 64, 96}, four seeds each: its |cosine| against the noise
   level (the rms cosine of its final S with 20 fresh independent teachers), with power fits.

Run: python examples/online_attention.py [--out DIR] [--quick]
"""

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from paramgeo import get
from paramgeo.flows import (
    AttentionIndexed,
    Teacher,
    compare_with_hierarchy,
    compare_with_odes,
    fit_weak_recovery,
    online_sgd,
    order_parameters,
    tied_moment_odes,
)


def exact_case(d, out):
    rng = np.random.default_rng(0)
    p = get("matrix", d=d)
    model = AttentionIndexed(d, link="linear", noise=0.5)
    teacher, start = Teacher.planted(d, d // 2, rng), p.random_point(rng)
    t0 = time.time()
    run = online_sgd(p, model, teacher, start,
                     samples=2 * d * d, lr=0.5, lr_exponent=1, batch=20, seed=1,
                     record_at=np.linspace(0, 2, 21), test_samples=0)
    ode, cmp = compare_with_odes(run)
    print(f"[1] {cmp}  (d = {d}, {run.samples} samples, {time.time() - t0:.0f} s)", flush=True)
    _, cmp_d = compare_with_odes(run, finite_d=True, teacher=teacher.S,
                                 start=start.reshape(d, d))
    print(f"[1] {cmp_d}", flush=True)
    out["exact"] = {"d": d, "deviation": cmp.deviation, "deviation_finite_d": cmp_d.deviation,
                    "t": run.t.tolist(),
                    "sim": {k: run.order[k].tolist() for k in ("mean", "norm", "overlap")},
                    "ode": {k: ode.order[k].tolist() for k in ("mean", "norm", "overlap")}}
    return run, ode


def tied_hierarchy(d, out, orders=range(3, 14), reference=15):
    r = d // 2
    rng = np.random.default_rng(0)
    teacher = Teacher.planted(d, r, rng)
    p = get("uut", d=d, r=r)
    W0 = 0.3 * rng.standard_normal(p.n)
    scale = 1 / math.sqrt(r * d)
    model = AttentionIndexed(d, link="linear", noise=0.5)
    out["tied_hierarchy"] = {"d": d}
    names = ("mean", "norm", "overlap", "moment_3", "mixed_2")
    for lr, horizon in ((0.02, 2.5), (0.1, 0.5)):
        run = online_sgd(p, model, teacher, W0, samples=int(horizon * d * d), lr=lr, scale=scale,
                         batch=20, seed=1, record_at=np.linspace(0, horizon, 11), test_samples=0)
        ode, cmp = compare_with_hierarchy(run, teacher, order=12, names=names)
        print(f"[1b] eta = {lr}, t <= {horizon}: {cmp}", flush=True)
        S0 = scale * p.forward_flat(W0).reshape(d, d)
        ref = tied_moment_odes(model, teacher.S, S0, lr, scale, run.t, order=reference)
        err = []
        for K in orders:
            o = tied_moment_odes(model, teacher.S, S0, lr, scale, run.t, order=K)
            err.append(max(np.max(np.abs(o.order[n] - ref.order[n])) / np.max(np.abs(ref.order[n]))
                           for n in ("mean", "norm", "overlap")))
        slope, icpt = np.polyfit(list(orders), np.log(err), 1)
        print(f"[1b] truncation error (mean, norm, overlap vs order {reference}): "
              + ", ".join(f"K={K} {e:.1e}" for K, e in zip(orders, err))
              + f"; fit exp({icpt:.2f} {slope:+.3f} K)", flush=True)
        out["tied_hierarchy"][f"eta={lr}"] = {
            "horizon": horizon, "deviation": cmp.deviation, "orders": list(orders),
            "truncation_error": err, "fit_rate": -slope, "t": run.t.tolist(),
            "sim": {n: run.order[n].tolist() for n in ("mean", "norm", "overlap")},
            "ode": {n: ode.order[n].tolist() for n in ("mean", "norm", "overlap")}}


def variants(d, horizon, out):
    r = d // 2
    rng = np.random.default_rng(1)
    teacher = Teacher.planted(d, r, rng, centered=True)
    model = AttentionIndexed(d, link="abs")
    scale = 1 / math.sqrt(r * d)
    rec = np.linspace(0, horizon, 33)
    runs = {}
    tied, untied, direct = get("uut", d=d, r=r), get("uvt", m=d, n=d, r=r), get("matrix", d=d)
    specs = {
        "tied S = W W^T / sqrt(rd)": (tied, rng.standard_normal(tied.n), 0.1, 0, scale),
        "untied S = U V^T / sqrt(rd)": (untied, rng.standard_normal(untied.n), 0.1, 0, scale),
        "direct S from 0": (direct, np.zeros(direct.n), 1.5, 1, 1.0),
        "direct S from random": (direct, direct.random_point(rng), 1.5, 1, 1.0),
    }
    for name, (p, th0, lr, expo, sc) in specs.items():
        run = online_sgd(p, model, teacher, th0, samples=int(horizon * d * d), lr=lr,
                         lr_exponent=expo, scale=sc, batch=4, seed=2, record_at=rec,
                         threshold=0.25, test_samples=0)
        runs[name] = run
        print(f"[2] {name:30s} weak recovery t = {run.weak_recovery_time:.3g}; cosine "
              f"{run.order['cosine'][0]:+.3f} -> {run.order['cosine'][-1]:+.3f}, mean "
              f"{run.order['mean'][0]:.3f} -> {run.order['mean'][-1]:.3f}", flush=True)
    out["variants"] = {name: {"t": run.t.tolist(), "cosine": run.order["cosine"].tolist(),
                              "mean": run.order["mean"].tolist(),
                              "weak_recovery_time": run.weak_recovery_time}
                       for name, run in runs.items()}
    return runs


def scaling(ds, seeds, out, threshold=0.25, horizon=30.0):
    D, N, direct_max = [], [], {}
    for d in ds:
        r = d // 2
        for seed in range(seeds):
            rng = np.random.default_rng(100 + seed)
            teacher = Teacher.planted(d, r, rng, centered=True)
            p = get("uut", d=d, r=r)
            run = online_sgd(p, AttentionIndexed(d, link="abs"), teacher,
                             rng.standard_normal(p.n), samples=int(horizon * d * d), lr=0.1,
                             scale=1 / math.sqrt(r * d), batch=4, seed=seed, test_samples=0,
                             threshold=threshold, stop_at_recovery=True,
                             check_every=max(4, d * d // 100))
            if run.weak_recovery is None:
                print(f"[3] d = {d} seed {seed}: no weak recovery by t = {horizon}")
                continue
            D.append(d)
            N.append(run.weak_recovery)
            print(f"[3] d = {d:3d} seed {seed}: weak recovery at n = {run.weak_recovery} "
                  f"(t = {run.weak_recovery_time:.2f}, n / (d^2 log d) = "
                  f"{run.weak_recovery / (d * d * math.log(d)):.2f})", flush=True)
        # direct S over the horizon of the slowest tied run at this d
        t_max = max(n / d ** 2 for dd, n in zip(D, N) if dd == d)
        m = get("matrix", d=d)
        rng = np.random.default_rng(200)
        teacher = Teacher.planted(d, r, rng, centered=True)
        worst = 0.0
        for th0 in (np.zeros(m.n), m.random_point(rng)):
            run = online_sgd(m, AttentionIndexed(d, link="abs"), teacher, th0,
                             samples=int(t_max * d * d), lr=1.5, lr_exponent=1, batch=4,
                             seed=3, test_samples=0, threshold=threshold)
            worst = max(worst, float(np.max(np.abs(run.order["cosine"]))))
        direct_max[d] = worst
        print(f"[3] d = {d:3d}: direct S (from 0 and from random, eta = 1.5/d) max |cosine| "
              f"{worst:.3f} up to t = {t_max:.2f}")
    fit = fit_weak_recovery(D, N)
    print(f"[3] {fit}")
    out["scaling"] = {"d": D, "samples": N, "threshold": threshold,
                      "exponent": fit.exponent, "exponent_stderr": fit.exponent_stderr,
                      "power": fit.power, "power_stderr": fit.power_stderr,
                      "log_slope": fit.log_slope, "log_slope_stderr": fit.log_slope_stderr,
                      "log_intercept": fit.log_intercept,
                      "direct_max_abs_cosine": {str(k): v for k, v in direct_max.items()}}
    return fit


def direct_noise_level(ds, seeds, out, horizon=6.0):
    rows = {}
    for d in ds:
        r = d // 2
        m = get("matrix", d=d)
        rows[d] = []
        for seed in range(seeds):
            rng = np.random.default_rng(200 + seed)
            teacher = Teacher.planted(d, r, rng, centered=True)
            run = online_sgd(m, AttentionIndexed(d, link="abs"), teacher, m.random_point(rng),
                             samples=int(horizon * d * d), lr=1.5, lr_exponent=1, batch=4,
                             seed=3 + seed, test_samples=0, threshold=0.99,
                             record_at=np.linspace(0, horizon, 101))
            c = np.abs(run.order["cosine"])
            S = run.trajectory.thetas[-1].reshape(d, d)
            null = [order_parameters(S, Teacher.planted(d, r, rng, centered=True).S)["cosine"]
                    for _ in range(20)]
            rows[d].append((float(c.max()), float(c[len(c) // 2:].mean()),
                            float(np.sqrt(np.mean(np.square(null))))))
        a = np.array(rows[d])
        print(f"[4] d = {d:3d}: direct S max |cosine| (t <= {horizon:g}) median {np.median(a[:, 0]):.3f}, "
              f"mean |cosine| over the second half {np.median(a[:, 1]):.3f}, noise level "
              f"{np.median(a[:, 2]):.3f}", flush=True)
    fits = {}
    for j, name in enumerate(("max", "late_mean", "noise_level")):
        x = np.log([d for d in ds for _ in rows[d]])
        y = np.log([row[j] for d in ds for row in rows[d]])
        A = np.column_stack([np.ones_like(x), x])
        coef, *_ = np.linalg.lstsq(A, y, rcond=None)
        res = y - A @ coef
        err = math.sqrt(res @ res / max(len(x) - 2, 1) * np.linalg.inv(A.T @ A)[1, 1])
        fits[name] = (float(math.exp(coef[0])), float(coef[1]), err)
        print(f"[4] {name}: {fits[name][0]:.2f} d^({coef[1]:.2f} +- {err:.2f})")
    out["direct_noise_level"] = {"rows": {str(d): v for d, v in rows.items()}, "fits": fits,
                                 "horizon": horizon}


def figure(path, exact, runs, fit):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run, ode = exact
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    for i, k in enumerate(("mean", "norm", "overlap")):
        ax.plot(run.t, run.order[k], "o", ms=3, color=f"C{i}", label=f"{k} (SGD)")
        ax.plot(ode.t, ode.order[k], "-", color=f"C{i}", lw=1, label=f"{k} (equations)")
    ax.set_xlabel("t = n / d^2")
    ax.set_title(f"direct S, linear link, d = {run.model.d}")
    ax.legend(fontsize=7)
    ax = axes[1]
    for i, (name, r) in enumerate(runs.items()):
        ax.plot(r.t, r.order["cosine"], color=f"C{i}", label=name)
        ax.plot(r.t, r.order["mean"], color=f"C{i}", ls=":", lw=1)
    ax.axhline(0.25, color="k", lw=0.6, ls="--")
    ax.set_xlabel("t = n / d^2")
    ax.set_title(f"|h| link, d = {next(iter(runs.values())).model.d}: cosine (mean dotted)")
    ax.legend(fontsize=7)
    ax = axes[2]
    d = np.asarray(fit.d)
    ax.plot(np.log(d), fit.samples / d ** 2, "o", label="tied S (one point per seed)")
    x = np.linspace(np.log(d.min()), np.log(d.max()), 20)
    ax.plot(x, fit.log_intercept + fit.log_slope * x, "-",
            label=f"t = a + b log d, b = {fit.log_slope:.2f} +- {fit.log_slope_stderr:.2f}")
    ax.set_xlabel("log d")
    ax.set_ylabel("weak recovery t = n / d^2")
    ax.set_title(f"n / log d ~ d^{fit.exponent:.2f} (+- {fit.exponent_stderr:.2f})")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "output"))
    ap.add_argument("--quick", action="store_true", help="small d (a smoke run, seconds)")
    args = ap.parse_args(argv)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = {}
    if args.quick:
        exact = exact_case(30, out)
        tied_hierarchy(30, out, orders=range(3, 7), reference=8)
        runs = variants(16, 4.0, out)
        fit = scaling([8, 12, 16], 1, out, horizon=20.0)
        direct_noise_level([8, 12, 16], 2, out, horizon=2.0)
    else:
        exact = exact_case(200, out)
        tied_hierarchy(200, out)
        runs = variants(48, 10.0, out)
        fit = scaling([16, 24, 32, 48, 64, 96], 8, out)
        direct_noise_level([16, 24, 32, 48, 64, 96], 4, out)
    figure(out_dir / "online_attention.png", exact, runs, fit)
    (out_dir / "online_attention.json").write_text(json.dumps(out, indent=1))
    print(f"wrote {out_dir / 'online_attention.png'} and {out_dir / 'online_attention.json'}")


if __name__ == "__main__":
    sys.exit(main())
