"""Online SGD on attention-indexed data: the exact order-parameter equations against the
simulation, direct / tied / untied S, and the weak-recovery time of tied S against d.

Writes examples/output/online_attention.png, online_attention_untied.png (part 5) and
online_attention.json (or to --out; --untied-only runs part 5 alone).

1. Direct S (plugin ``matrix``), linear link, label noise 0.5, eta = 0.5 / d, d = 200: the
   order parameters of one run to t = 2 against the exact high-d equations and their finite-d
   form, and its moments Tr(S^3)/d, Tr(S^4)/d against the free-convolution prediction
   (docs/online-sgd.md).
1b. Tied S = W W^T / sqrt(r d) (uut), linear link, label noise 0.5, r = d / 2, start W0 with
   entries N(0, 0.09), d = 200: the truncated moment hierarchy (order 12) against one run at
   eta = 0.02 to t = 2.5 and at eta = 0.1 to t = 0.5, and the truncation error against the
   order (orders 3..13 against order 15), with its exponential fit.
1c. Untied S = U V^T / sqrt(r d) (uvt), the same case with U0, V0 independent with entries
   N(0, 0.09), eta = 0.02 to t = 2.5, d = 100 and 200: the untied moment hierarchy (order 7)
   against one run, and the truncation error of orders 3..6 against order 7.
2. Link |h| (even), centered tied teacher S* = W W^T / sqrt(r d) - mean, r = d / 2, d = 48:
   tied S = W W^T / sqrt(r d) (uut) and untied S = U V^T / sqrt(r d) (uvt) from Gaussian
   factors, eta = 0.1; direct S from S = 0 and from a random symmetric S with eta = 1.5 / d.
3. Tied S to weak recovery (|cosine| >= 0.25) over d in {16, 24, 32, 48, 64, 96}, eight seeds
   each: the fit of n / log d ~ d^gamma and of t = n / d^2 against log d; direct S over the
   same horizon.
4. Direct S from a random symmetric start, eta = 1.5 / d, link |h|, centered tied teacher, to
   t = 6 over d in {16, 24, 32, 48, 64, 96}, four seeds each: its |cosine| against the noise
   level (the rms cosine of its final S with 20 fresh independent teachers), with power fits.
5. Untied S = U V^T / sqrt(r d) (uvt), link |h|, centered tied teacher, eta = 0.1, r = d / 2,
   from U0 with i.i.d. N(0, 1) entries and V0 = (U0 + Z) / sqrt(2), Z independent (so S0 has
   mean sqrt(r / (2 d)) = 0.5), to weak recovery over d in {32, 48, 64, 96, 128}, twelve
   seeds each: the relaxation time of the mean (90% of its drop to the plateau of an exponential fit
   over t <= 3) against the weak-recovery time, both fitted against log d. Controls: an
   uncentered teacher with independent U0, V0 (links |h| and relu, d = 64).

Run: python examples/online_attention.py [--out DIR] [--quick] [--untied-only]
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
    untied_moment_odes,
)


def exact_case(d, out):
    rng = np.random.default_rng(0)
    p = get("matrix", d=d)
    model = AttentionIndexed(d=d, link="linear", noise=0.5)
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


def truncation_errors(tag, solve, ref, orders, reference):
    """The largest relative deviation of mean, norm and overlap between the hierarchy of each
    order K (``solve(K)``) and the reference solution ``ref``, printed with the fitted rate
    err ~ exp(a + b K); returns the errors and b."""
    err = []
    for K in orders:
        o = solve(K)
        err.append(max(np.max(np.abs(o.order[n] - ref.order[n])) / np.max(np.abs(ref.order[n]))
                       for n in ("mean", "norm", "overlap")))
    slope, icpt = np.polyfit(list(orders), np.log(err), 1)
    print(f"{tag} truncation error (mean, norm, overlap vs order {reference}): "
          + ", ".join(f"K={K} {e:.1e}" for K, e in zip(orders, err))
          + f"; fit exp({icpt:.2f} {slope:+.3f} K)", flush=True)
    return err, slope


def tied_hierarchy(d, out, orders=range(3, 14), reference=15):
    r = d // 2
    rng = np.random.default_rng(0)
    teacher = Teacher.planted(d, r, rng)
    p = get("uut", d=d, r=r)
    W0 = 0.3 * rng.standard_normal(p.n)
    scale = 1 / math.sqrt(r * d)
    model = AttentionIndexed(d=d, link="linear", noise=0.5)
    out["tied_hierarchy"] = {"d": d}
    names = ("mean", "norm", "overlap", "moment_3", "mixed_2")
    for lr, horizon in ((0.02, 2.5), (0.1, 0.5)):
        run = online_sgd(p, model, teacher, W0, samples=int(horizon * d * d), lr=lr, scale=scale,
                         batch=20, seed=1, record_at=np.linspace(0, horizon, 11), test_samples=0)
        ode, cmp = compare_with_hierarchy(run, teacher, order=12, names=names)
        print(f"[1b] eta = {lr}, t <= {horizon}: {cmp}", flush=True)
        S0 = scale * p.forward_flat(W0).reshape(d, d)
        ref = tied_moment_odes(model, teacher.S, S0, lr, scale, run.t, order=reference)
        err, slope = truncation_errors(
            "[1b]", lambda K: tied_moment_odes(model, teacher.S, S0, lr, scale, run.t, order=K),
            ref, orders, reference)
        out["tied_hierarchy"][f"eta={lr}"] = {
            "horizon": horizon, "deviation": cmp.deviation, "orders": list(orders),
            "truncation_error": err, "fit_rate": -slope, "t": run.t.tolist(),
            "sim": {n: run.order[n].tolist() for n in ("mean", "norm", "overlap")},
            "ode": {n: ode.order[n].tolist() for n in ("mean", "norm", "overlap")}}


def untied_hierarchy(ds, out, orders=range(3, 7), reference=7, lr=0.02, horizon=2.5):
    names = ("mean", "norm", "overlap", "moment_2", "gram_u", "mixed_u")
    out["untied_hierarchy"] = {}
    for d in ds:
        r = d // 2
        rng = np.random.default_rng(0)
        teacher = Teacher.planted(d, r, rng)
        p = get("uvt", m=d, n=d, r=r)
        th0 = 0.3 * rng.standard_normal(p.n)
        scale = 1 / math.sqrt(r * d)
        model = AttentionIndexed(d=d, link="linear", noise=0.5)
        run = online_sgd(p, model, teacher, th0, samples=int(horizon * d * d), lr=lr,
                         scale=scale, batch=20, seed=1, record_at=np.linspace(0, horizon, 11),
                         test_samples=0)
        ode, cmp = compare_with_hierarchy(run, teacher, order=reference, names=names)
        print(f"[1c] untied, d = {d}, eta = {lr}, t <= {horizon}: {cmp}; cosine "
              f"{run.order['cosine'][0]:.3f} -> {run.order['cosine'][-1]:.3f}", flush=True)
        U0, V0 = th0[:d * r].reshape(d, r), th0[d * r:].reshape(d, r)
        err, slope = truncation_errors(
            "[1c]", lambda K: untied_moment_odes(model, teacher.S, U0, V0, lr, scale, run.t,
                                                 order=K),
            ode, orders, reference)
        out["untied_hierarchy"][str(d)] = {
            "eta": lr, "horizon": horizon, "order": reference, "deviation": cmp.deviation,
            "orders": list(orders), "truncation_error": err, "fit_rate": -slope,
            "t": run.t.tolist(),
            "sim": {n: run.order[n].tolist() for n in ("mean", "norm", "overlap")},
            "ode": {n: ode.order[n].tolist() for n in ("mean", "norm", "overlap")}}


def variants(d, horizon, out):
    r = d // 2
    rng = np.random.default_rng(1)
    teacher = Teacher.planted(d, r, rng, centered=True)
    model = AttentionIndexed(d=d, link="abs")
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
            run = online_sgd(p, AttentionIndexed(d=d, link="abs"), teacher,
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
            run = online_sgd(m, AttentionIndexed(d=d, link="abs"), teacher, th0,
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


def _line(x, y):
    """Least squares y = a + b x: (b, standard error of b, a); nan with fewer than 3 points."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 3:
        return math.nan, math.nan, math.nan
    A = np.column_stack([np.ones_like(x), x])
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    res = y - A @ coef
    err = math.sqrt(res @ res / max(len(x) - 2, 1) * np.linalg.inv(A.T @ A)[1, 1])
    return float(coef[1]), err, float(coef[0])


def direct_noise_level(ds, seeds, out, horizon=6.0):
    rows = {}
    for d in ds:
        r = d // 2
        m = get("matrix", d=d)
        rows[d] = []
        for seed in range(seeds):
            rng = np.random.default_rng(200 + seed)
            teacher = Teacher.planted(d, r, rng, centered=True)
            run = online_sgd(m, AttentionIndexed(d=d, link="abs"), teacher, m.random_point(rng),
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
        slope, err, icpt = _line(x, y)
        fits[name] = (math.exp(icpt), slope, err)
        print(f"[4] {name}: {fits[name][0]:.2f} d^({slope:.2f} +- {err:.2f})")
    out["direct_noise_level"] = {"rows": {str(d): v for d, v in rows.items()}, "fits": fits,
                                 "horizon": horizon}


def _relaxation(t, mean, window=3.0):
    """Fit mean(t) = m_inf + (m_0 - m_inf) exp(-t / t_m) over t <= window; return (t_90, m_inf,
    t_m) with t_90 the first record at which the mean has covered 90% of its drop to m_inf (nan
    if it never does)."""
    from scipy.optimize import curve_fit

    w = t <= window
    (m_inf, amp, t_m), _ = curve_fit(lambda x, a, b, c: a + b * np.exp(-x / c), t[w], mean[w],
                                     p0=(mean[w][-1], mean[0] - mean[w][-1], 0.5))
    near = np.abs(mean - m_inf) <= 0.1 * abs(mean[0] - m_inf)
    t_90 = float(t[np.argmax(near)]) if near.any() else float("nan")
    return t_90, float(m_inf), float(t_m)


def untied_run(d, seed, batch=8, horizon=30.0):
    """One run of part 5 to weak recovery: (row, run), row = (d, seed, t_90, t_m, plateau,
    mean at t = 0, mean at recovery, |cosine| at t_90, weak-recovery t), or None if the run
    does not recover by ``horizon``."""
    r = d // 2
    p = get("uvt", m=d, n=d, r=r)
    rng = np.random.default_rng(300 + seed)
    teacher = Teacher.planted(d, r, rng, centered=True)
    U, Z = rng.standard_normal((2, d, r))
    th0 = np.concatenate([U.ravel(), ((U + Z) / math.sqrt(2)).ravel()])
    run = online_sgd(p, AttentionIndexed(d=d, link="abs"), teacher, th0,
                     samples=int(horizon * d * d), lr=0.1, scale=1 / math.sqrt(r * d),
                     batch=batch, seed=seed, record_at=np.arange(0, horizon + 0.01, 0.1),
                     threshold=0.25, test_samples=0, stop_at_recovery=True, moments=0)
    if run.weak_recovery is None:
        print(f"[5] d = {d} seed {seed}: no weak recovery by t = {horizon}")
        return None, run
    t90, m_inf, t_m = _relaxation(run.t, run.order["mean"])
    cos90 = float(np.interp(t90, run.t, np.abs(run.order["cosine"])))
    print(f"[5] d = {d:3d} seed {seed}: mean {run.order['mean'][0]:.3f} -> plateau "
          f"{m_inf:.3f} (t_m = {t_m:.2f}), 90% at t = {t90:.2f} with |cosine| "
          f"{cos90:.3f}; weak recovery at t = {run.weak_recovery_time:.2f} (mean "
          f"{run.order['mean'][-1]:.3f})", flush=True)
    return (d, seed, t90, t_m, m_inf, float(run.order["mean"][0]), float(run.order["mean"][-1]),
            cos90, run.weak_recovery_time), run


def untied_fast_slow(ds, seeds, out, batch=8, horizon=30.0, control_d=64):
    rows, traj, missed = [], {}, []
    for d in ds:
        for seed in range(seeds):
            row, run = untied_run(d, seed, batch, horizon)
            if row is None:
                missed.append((d, seed))
                continue
            rows.append(row)
            if seed == 0:
                traj[d] = {k: run.order[k].tolist() for k in ("mean", "cosine")}
                traj[d]["t"] = run.t.tolist()
    untied_summary(ds, rows, missed, out)
    controls = untied_controls(control_d, batch, out)
    return np.array(rows), traj, controls


def untied_summary(ds, rows, missed, out):
    a = np.array(rows)
    fits = {}
    for name, col in (("t90_mean", 2), ("t_m", 3), ("weak_recovery", 8)):
        ok = np.isfinite(a[:, col])
        fits[name] = _line(np.log(a[ok, 0]), a[ok, col])
        print(f"[5] {name}: t = {fits[name][2]:.2f} + ({fits[name][0]:.2f} +- "
              f"{fits[name][1]:.2f}) log d ({ok.sum()} runs)")
    fit_wr = fit_weak_recovery(a[:, 0], a[:, 8] * a[:, 0] ** 2)
    print(f"[5] {fit_wr}")
    for d in ds:
        b = a[a[:, 0] == d]
        print(f"[5] d = {d:3d}: median t_90(mean) {np.nanmedian(b[:, 2]):.2f}, t_m "
              f"{np.median(b[:, 3]):.2f}, |cosine| then {np.median(b[:, 7]):.3f}; median weak "
              f"recovery t {np.median(b[:, 8]):.2f}")
    out["untied_fast_slow"] = {
        "columns": ["d", "seed", "t90_mean", "t_m", "mean_plateau", "mean_start",
                    "mean_at_recovery", "abs_cosine_at_t90", "weak_recovery_time"],
        "rows": a.tolist(), "no_recovery": missed, "fits_slope_stderr_intercept": fits,
        "wr_exponent": [fit_wr.exponent, fit_wr.exponent_stderr]}


def untied_controls(d, batch, out):
    """An uncentered teacher (mean sqrt(r/d)) and independent factors (mean ~ 1/d)."""
    controls = {}
    r = d // 2
    p = get("uvt", m=d, n=d, r=r)
    for link in ("abs", "relu"):
        rng = np.random.default_rng(1)
        teacher = Teacher.planted(d, r, rng)
        run = online_sgd(p, AttentionIndexed(d=d, link=link), teacher, rng.standard_normal(p.n),
                         samples=6 * d * d, lr=0.1, scale=1 / math.sqrt(r * d), batch=batch,
                         seed=2, record_at=np.linspace(0, 6, 31), threshold=0.25,
                         test_samples=0, moments=0)
        controls[link] = {"d": d, "t": run.t.tolist(), "mean": run.order["mean"].tolist(),
                          "cosine": run.order["cosine"].tolist(),
                          "teacher_mean": run.teacher_order["mean"],
                          "weak_recovery_time": run.weak_recovery_time}
        print(f"[5] control, uncentered teacher (mean {run.teacher_order['mean']:.3f}), link "
              f"{link}, d = {d}: mean " + ", ".join(
                  f"{m:.3f}" for m in run.order["mean"][::5]) + " at t = 0, 1, ..., 6; cosine "
              + ", ".join(f"{c:.3f}" for c in run.order["cosine"][::5])
              + f"; weak recovery t = {run.weak_recovery_time:.2f}", flush=True)
    out["untied_controls"] = controls
    return controls


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


def figure_untied(path, untied):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, traj, controls = untied
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    for i, (d, tr) in enumerate(sorted(traj.items())):
        ax.plot(tr["t"], tr["mean"], color=f"C{i}", label=f"mean, d = {d}")
        ax.plot(tr["t"], np.abs(tr["cosine"]), color=f"C{i}", ls="--", lw=1)
    ax.axhline(0.25, color="k", lw=0.6, ls=":")
    ax.set_xlabel("t = n / d^2")
    ax.set_title("untied S, |h| link: mean (solid), |cosine| (dashed)")
    ax.legend(fontsize=7)
    ax = axes[1]
    for j, (col, name) in enumerate(((2, "mean: 90% relaxed"), (8, "weak recovery"))):
        ok = np.isfinite(rows[:, col])
        x = np.log(rows[ok, 0])
        ax.plot(x, rows[ok, col], "o", color=f"C{j}", ms=4)
        b, err, a = _line(x, rows[ok, col])
        if math.isfinite(b):
            xx = np.linspace(x.min(), x.max(), 10)
            ax.plot(xx, a + b * xx, color=f"C{j}", label=f"{name}: slope {b:.2f} +- {err:.2f}")
    ax.set_xlabel("log d")
    ax.set_ylabel("t = n / d^2")
    ax.set_title("untied S: fast mean, slow overlap")
    ax.legend(fontsize=7)
    ax = axes[2]
    for i, (link, c) in enumerate(controls.items()):
        ax.plot(c["t"], c["mean"], color=f"C{i}", label=f"mean, {link}")
        ax.plot(c["t"], c["cosine"], color=f"C{i}", ls="--", lw=1, label=f"cosine, {link}")
        ax.axhline(c["teacher_mean"], color="k", lw=0.6, ls=":")
    ax.set_xlabel("t = n / d^2")
    ax.set_title(f"controls (d = {c['d']}): uncentered teacher")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "output"))
    ap.add_argument("--quick", action="store_true", help="small d (a smoke run, seconds)")
    ap.add_argument("--untied-only", action="store_true",
                    help="run part 5 alone (online_attention_untied.png and .json)")
    args = ap.parse_args(argv)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = {}
    if args.quick:
        if not args.untied_only:
            exact = exact_case(30, out)
            tied_hierarchy(30, out, orders=range(3, 7), reference=8)
            untied_hierarchy([30], out, orders=range(3, 5), reference=5)
            runs = variants(16, 4.0, out)
            fit = scaling([8, 12, 16], 1, out, horizon=20.0)
            direct_noise_level([8, 12, 16], 2, out, horizon=2.0)
        untied = untied_fast_slow([16, 24, 32], 1, out, horizon=20.0, control_d=16)
    else:
        if not args.untied_only:
            exact = exact_case(200, out)
            tied_hierarchy(200, out)
            untied_hierarchy([100, 200], out)
            runs = variants(48, 10.0, out)
            fit = scaling([16, 24, 32, 48, 64, 96], 8, out)
            direct_noise_level([16, 24, 32, 48, 64, 96], 4, out)
        untied = untied_fast_slow([32, 48, 64, 96, 128], 12, out)
    written = [out_dir / "online_attention_untied.png"]
    figure_untied(written[0], untied)
    name = "online_attention_untied.json" if args.untied_only else "online_attention.json"
    if not args.untied_only:
        written.append(out_dir / "online_attention.png")
        figure(written[-1], exact, runs, fit)
    written.append(out_dir / name)
    written[-1].write_text(json.dumps(out, indent=1))
    print("wrote " + ", ".join(map(str, written)))


if __name__ == "__main__":
    sys.exit(main())
