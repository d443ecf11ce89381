"""Multi-head attention-indexed models under online SGD, and the weak-recovery scaling of tied S
pushed to d = 512, with the matrix-free engine batched over seeds
(paramgeo.flows.multihead_sgd).

Setting throughout: one Gaussian token, link |h|, centered tied teacher heads
S*_k = W*_k W*_k^T / sqrt(r d) - (Tr / d) I with r = d / 2, label noise 0, student heads from
factors with i.i.d. N(0, 1) entries, batches of B = max(1, d^2 / 256) samples (B / d^2 the
same at every d), weak recovery at 0.25, each run stopped there or at t = n / d^2 = 30.

1. Scaling (H = 1, tied, eta = 0.1): weak recovery over d in {16, ..., 512}, 16 seeds per d
   (12 at d = 384, 8 at d = 512); the fit n / log d ~ d^gamma (fit_weak_recovery) and its
   power to tell d^2 log d from d^2 (scaling_separation), over all d, d <= 96 and d >= 64.
2. Multi-head (H = 2 and 3, tied and untied, eta = 0.1 H): weak recovery of the
   permutation-invariant summaries (matched: every head under one assignment; best: the first
   head; symmetric: sum of heads against sum of teacher heads) over d in {32, 48, 64, 96, 128},
   8 seeds each, with the fit of the matched recovery.
3. Two layers (tied and untied, T = 4 tokens, softmax with beta = 1, c = 1, eta = 1, the
   centered teacher layers): y = softmax(A_1 h_2 A_1^T), A_1 = I + softmax(h_1)
   (paramgeo.flows.two_layer_sgd); weak recovery of each layer over d in
   {32, 48, 64, 96, 128}, 8 seeds each, with the fit of the recovery of both layers.
4. Untied S = U V^T / sqrt(r d) (H = 1, eta = 0.1) from correlated factors U_0 and
   V_0 = (U_0 + Z) / sqrt(2) (the start of examples/online_attention.py part 5): weak recovery
   over d in {32, ..., 256}, 12 seeds per d, with the fit and its separation.
5. Three tied heads against the step size: H = 3, tied, eta = 0.3, 0.1 and 0.05 with the
   horizon t = 90 (eta = 0.05: 120): the fraction of runs whose every head is matched (with its
   binomial standard error) and the matched times' fit, over d in {32, 48, 64, 96, 128}
   (16 seeds per d at eta = 0.1, 8 otherwise; d <= 96 at eta = 0.05).
6. The escape of the overlap (H = 1, tied, eta = 0.1, the setting of part 1, the
   cosine recorded every 0.1 in t): the rate lambda of |m(t)| = m_0 e^{lambda t} over
   |m| in [0.02, 0.15] (overlap_growth) at d in {64, 128, 256, 512} (8 seeds, 2 at d = 512),
   and the log-d slope a / lambda it predicts for the weak-recovery time, m_0 ~ d^(-a);
   at eta = 0.05 (d = 128, 256) the same; both against escape_rate's leading order in eta.

Each (part, d, chunk of seeds) is saved to examples/output/attention_multihead/ as it finishes
and reused by a later call (delete the folder to rerun); then the fits are printed and
examples/output/attention_multihead.json written.

Run: python examples/attention_multihead.py [--out DIR] [--quick] [--part 1|2|3|4|5|6]
"""

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from paramgeo.flows import (
    MultiHeadTeacher,
    fit_weak_recovery,
    escape_rate,
    multihead_sgd,
    overlap_growth,
    scaling_separation,
    two_layer_sgd,
    weighted_exponent,
)
from paramgeo.io.files import write_file

HORIZON = 30.0


def chunk_runs(d, heads, tied, seeds, lr, layers=False, correlated=False, horizon=HORIZON):
    """Weak-recovery times (t = n / d^2) of seeds ``seeds`` (a range), one batched run; with
    ``layers`` the two-layer model (heads = 2 layers); ``correlated``: untied factors
    U_0, V_0 = (U_0 + Z) / sqrt(2); runs stop at t = ``horizon`` at the latest."""
    r = d // 2
    s0 = seeds.start
    rng = np.random.default_rng([d, heads, int(tied), s0] + ([2] if layers else [])
                                + ([3] if correlated else []))
    teacher = MultiHeadTeacher.planted(d, r, heads, len(seeds), rng, centered=True)
    shape = (len(seeds), d, heads, r)
    start = (rng.standard_normal(shape),) if tied else tuple(rng.standard_normal((2,) + shape))
    if correlated:
        start = (start[0], (start[0] + start[1]) / math.sqrt(2))
    kw = dict(samples=int(horizon * d * d), lr=lr, batch=max(1, d * d // 256),
              record_at=[0.0], threshold=0.25, seed=[d, heads, s0, 7])
    if layers:
        run = two_layer_sgd(teacher, start, tokens=4, beta=1.0, c=1.0, stop_at="both", **kw)
    else:
        run = multihead_sgd(teacher, start, stop_at="matched", **kw)
    return {k: run.weak_recovery_time(k).tolist() for k in run.weak_recovery}


def cached(folder, name, compute):
    path = folder / f"{name}.json"
    if path.exists():
        return json.loads(path.read_text())
    t0 = time.process_time()
    value = compute()
    value["cpu_s"] = time.process_time() - t0
    write_file(path, json.dumps(value), what="result")
    return value


def collect(folder, tag, d, heads, tied, seeds, chunk, lr, layers=False, correlated=False,
            horizon=HORIZON):
    out = {"cpu_s": 0.0}
    for s0 in range(0, seeds, chunk):
        rows = cached(folder, f"{tag}_d{d}_s{s0}",
                      lambda: chunk_runs(d, heads, tied, range(s0, min(seeds, s0 + chunk)), lr,
                                         layers, correlated, horizon))
        for k, v in rows.items():
            if k != "cpu_s":
                out[k] = out.get(k, []) + v
        out["cpu_s"] += rows["cpu_s"]
    return out


def fit_rows(ds, times):
    D = [d for d in ds for t in times[d] if math.isfinite(t)]
    N = [t * d * d for d in ds for t in times[d] if math.isfinite(t)]
    fit = fit_weak_recovery(D, N)
    resid = np.log(N) - np.log(np.log(D)) - np.polyval(
        np.polyfit(np.log(D), np.log(np.asarray(N) / np.log(D)), 1), np.log(D))
    spread = float(np.sqrt(resid @ resid / (len(D) - 2)))
    return fit, scaling_separation(D, spread, fit.exponent)


def weighted_rows(ds, times):
    """The weighted fit (weights 1 / s_d^2, s_d the scatter of log n at each d) and its
    separation."""
    D = [d for d in ds for t in times[d] if math.isfinite(t)]
    N = [t * d * d for d in ds for t in times[d] if math.isfinite(t)]
    gamma, se, s = weighted_exponent(D, N)
    return gamma, se, scaling_separation(D, s, gamma)


def _wls(A, y, w):
    """Weighted least squares: (coefficients, covariance, chi^2)."""
    cov = np.linalg.inv(A.T @ (w[:, None] * A))
    c = cov @ (A.T @ (w * y))
    return c, cov, float(w @ (y - A @ c) ** 2)


def law_comparison(ds, times, lo):
    """Over d >= lo, the mean weak-recovery time t at each d (standard error s / sqrt(runs))
    against three laws by weighted least squares: t = a + b log d (d^2 log d samples, with an
    offset), t = C d^p (a power), and t = a + b log d + c (log d)^2 (curvature)."""
    sel = [d for d in ds if d >= lo]
    m = np.array([np.nanmean(times[d]) for d in sel])
    se = np.array([np.nanstd(times[d], ddof=1) / math.sqrt(np.isfinite(times[d]).sum())
                   for d in sel])
    x = np.log(sel)
    A = np.column_stack([np.ones_like(x), x])
    c_log, cov_log, chi_log = _wls(A, m, 1 / se ** 2)
    c_pow, cov_pow, chi_pow = _wls(A, np.log(m), (m / se) ** 2)
    c_q, cov_q, chi_q = _wls(np.column_stack([A, x * x]), m, 1 / se ** 2)
    return {"d": sel, "mean_t": m.tolist(), "stderr_t": se.tolist(),
            "log": {"a": c_log[0], "b": [c_log[1], math.sqrt(cov_log[1, 1])], "chi2": chi_log,
                    "dof": len(sel) - 2, "d0": math.exp(-c_log[0] / c_log[1])},
            "power": {"p": [c_pow[1], math.sqrt(cov_pow[1, 1])], "chi2": chi_pow,
                      "dof": len(sel) - 2},
            "curvature": {"c": [c_q[2], math.sqrt(cov_q[2, 2])], "chi2": chi_q,
                          "dof": len(sel) - 3}}


def scaling(folder, ds, seeds_of, out, tied=True):
    times, cpu = {}, 0.0
    part, key = ("1", "scaling") if tied else ("4", "untied_scaling")
    for d in ds:
        res = collect(folder, "tied_h1" if tied else "untied_h1_correlated", d, 1, tied,
                      seeds_of(d), 4 if d >= 384 else 16, 0.1, correlated=not tied)
        times[d], cpu = res["matched"], cpu + res["cpu_s"]
        t = np.asarray(times[d])
        print(f"[{part}] d = {d:3d}: {np.isfinite(t).sum()}/{len(t)} recover, median t = "
              f"{np.nanmedian(t):.2f} (range {np.nanmin(t):.2f}-{np.nanmax(t):.2f}, sd of "
              f"log n {np.nanstd(np.log(t), ddof=1):.2f}), "
              f"{res['cpu_s']:.0f} CPU s", flush=True)
    out[key] = {"times": {str(d): times[d] for d in ds}, "cpu_s": cpu}
    for label, sub in (("all d", ds), ("d <= 96", [d for d in ds if d <= 96]),
                       ("d >= 64", [d for d in ds if d >= 64])):
        if len(sub) < 3:
            continue
        fit, sep = fit_rows(sub, times)
        gw, sew, sepw = weighted_rows(sub, times)
        print(f"[{part}] {label}: {fit}\n[{part}] {label}: unweighted: {sep}\n[{part}] {label}: "
              f"weighted: gamma = {gw:.3f} +- {sew:.3f}; {sepw}\n[{part}] {label}: t = a + b "
              f"log d with b {fit.log_slope / fit.log_slope_stderr:.1f} stderr from 0, "
              f"t = b log(d / d0) with d0 = {math.exp(-fit.log_intercept / fit.log_slope):.3g}",
              flush=True)
        out[key][label] = {"weighted_exponent": [gw, sew], "weighted_gap": sepw.gap,
                           "weighted_separation": sepw.separation,
                           "weighted_from_d2logd": sepw.from_d2logd,
                           "weighted_from_d2": sepw.from_d2,"exponent": [fit.exponent, fit.exponent_stderr],
                                 "power": [fit.power, fit.power_stderr],
                                 "log_slope": [fit.log_slope, fit.log_slope_stderr],
                                 "log_intercept": fit.log_intercept, "spread": sep.spread,
                                 "gap": sep.gap, "stderr": sep.stderr,
                                 "separation": sep.separation,
                                 "from_d2logd": sep.from_d2logd, "from_d2": sep.from_d2}
    lo = 64 if max(ds) >= 256 else ds[len(ds) // 2]
    cmp = law_comparison(ds, times, lo)
    out[key]["laws"] = cmp
    print(f"[{part}] d >= {lo}: mean t " + ", ".join(
        f"{m:.2f} +- {e:.2f}" for m, e in zip(cmp["mean_t"], cmp["stderr_t"]))
        + f" at d = {cmp['d']}; t = a + b log d: b = {cmp['log']['b'][0]:.2f} +- "
        f"{cmp['log']['b'][1]:.2f} (d0 = {cmp['log']['d0']:.3g}), chi^2 {cmp['log']['chi2']:.1f}"
        f" on {cmp['log']['dof']} dof; t = C d^p: p = {cmp['power']['p'][0]:.3f} +- "
        f"{cmp['power']['p'][1]:.3f}, chi^2 {cmp['power']['chi2']:.1f}; (log d)^2 term "
        f"{cmp['curvature']['c'][0]:.2f} +- {cmp['curvature']['c'][1]:.2f}", flush=True)
    print(f"[{part}] {cpu:.0f} CPU s in all")


def multihead(folder, ds, seeds, heads_list, out):
    out["multihead"] = {}
    for heads in heads_list:
        for tied in (True, False):
            tag = f"{'tied' if tied else 'untied'}_h{heads}"
            times, rows = {}, {}
            for d in ds:
                res = collect(folder, tag, d, heads, tied, seeds, seeds, 0.1 * heads)
                times[d], rows[d] = res["matched"], res
                med = {k: np.nanmedian(res[k]) if np.any(np.isfinite(res[k])) else math.nan
                       for k in ("symmetric", "best", "matched")}
                n_ok = {k: int(np.isfinite(res[k]).sum()) for k in med}
                print(f"[2] {tag} d = {d:3d}: median weak recovery t: " + ", ".join(
                    f"{k} {med[k]:.2f} ({n_ok[k]}/{seeds})" for k in med)
                    + f"; {res['cpu_s']:.0f} CPU s", flush=True)
            entry = {"times": {str(d): {k: rows[d][k] for k in ("symmetric", "best", "matched")}
                               for d in ds}}
            recovered = [d for d in ds if np.any(np.isfinite(times[d]))]
            if len(recovered) < 3:
                print(f"[2] {tag}: matched recovery at {len(recovered)} d only, no fit")
            else:
                fit, sep = fit_rows(ds, times)
                print(f"[2] {tag}: matched {fit}\n[2] {tag}: {sep}", flush=True)
                entry.update({"exponent": [fit.exponent, fit.exponent_stderr],
                              "power": [fit.power, fit.power_stderr],
                              "log_slope": [fit.log_slope, fit.log_slope_stderr],
                              "separation": sep.separation})
            out["multihead"][tag] = entry


def two_layers(folder, ds, seeds, out):
    out["two_layer"] = {}
    for tied in (True, False):
        tag = f"two_layer_{'tied' if tied else 'untied'}"
        times, rows = {}, {}
        for d in ds:
            res = collect(folder, tag, d, 2, tied, seeds, seeds, 1.0, layers=True)
            times[d], rows[d] = res["both"], res
            print(f"[3] {tag} d = {d:3d}: median weak recovery t: " + ", ".join(
                f"{k} {np.nanmedian(res[k]):.2f} ({int(np.isfinite(res[k]).sum())}/{seeds})"
                for k in ("first", "second", "both")) + f"; {res['cpu_s']:.0f} CPU s",
                flush=True)
        entry = {"times": {str(d): {k: rows[d][k] for k in ("first", "second", "both")}
                           for d in ds}}
        if len(ds) >= 3:
            fit, sep = fit_rows(ds, times)
            print(f"[3] {tag}: both layers {fit}\n[3] {tag}: {sep}", flush=True)
            entry.update({"exponent": [fit.exponent, fit.exponent_stderr],
                          "power": [fit.power, fit.power_stderr],
                          "log_slope": [fit.log_slope, fit.log_slope_stderr]})
        out["two_layer"][tag] = entry


def three_heads(folder, plan, out):
    """Part 5: H = 3 tied heads at each (eta, horizon, d's, seeds) of ``plan``: the matched
    fraction with its binomial standard error sqrt(p (1 - p) / n), the median matched time,
    and, where >= 3 d have matched runs, the fit of the matched times."""
    out["three_heads"] = {}
    for lr, horizon, ds, seeds in plan:
        tag = f"tied_h3_eta{lr:g}_t{horizon:g}"
        times, entry, cpu = {}, {"eta": lr, "horizon": horizon, "d": {}}, 0.0
        for d in ds:
            res = collect(folder, tag, d, 3, True, seeds, 8, lr, horizon=horizon)
            times[d], cpu = res["matched"], cpu + res["cpu_s"]
            t = np.asarray(res["matched"])
            ok = np.isfinite(t)
            p = ok.mean()
            ts = np.asarray(res["symmetric"])
            med = float(np.median(t[ok])) if ok.any() else math.nan
            entry["d"][str(d)] = {"matched": res["matched"], "symmetric": res["symmetric"],
                                  "fraction": [p, math.sqrt(p * (1 - p) / len(t))],
                                  "median_t": med}
            print(f"[5] eta = {lr:g}, horizon {horizon:g}, d = {d:3d}: every head matched in "
                  f"{ok.sum()}/{len(t)} ({p:.2f} +- {math.sqrt(p * (1 - p) / len(t)):.2f}), "
                  f"median t {med:.2f} (range {np.nanmin(t) if ok.any() else math.nan:.2f}-"
                  f"{np.nanmax(t) if ok.any() else math.nan:.2f}); symmetric "
                  f"{np.isfinite(ts).sum()}/{len(t)}, median t {np.nanmedian(ts):.2f}; "
                  f"{res['cpu_s']:.0f} CPU s", flush=True)
        full = [d for d in ds if np.isfinite(times[d]).sum() >= 2]
        if len(full) >= 3:
            fit, sep = fit_rows(full, times)
            print(f"[5] eta = {lr:g}: matched {fit}\n[5] eta = {lr:g}: {sep}", flush=True)
            entry.update({"exponent": [fit.exponent, fit.exponent_stderr],
                          "log_slope": [fit.log_slope, fit.log_slope_stderr],
                          "log_intercept": fit.log_intercept, "separation": sep.separation,
                          "from_d2logd": sep.from_d2logd, "from_d2": sep.from_d2})
        entry["cpu_s"] = cpu
        out["three_heads"][tag] = entry


def growth_chunk(d, seeds, lr, horizon=HORIZON):
    """Part 6: runs in the setting of part 1 (the same teachers) at step ``lr`` with the cosine
    recorded every 0.1 in t; returns the fitted growth rates and log start overlaps."""
    r = d // 2
    rng = np.random.default_rng([d, 1, 1, 0])
    teacher = MultiHeadTeacher.planted(d, r, 1, seeds, rng, centered=True)
    start = (rng.standard_normal((seeds, d, 1, r)),)
    run = multihead_sgd(teacher, start, samples=int(horizon * d * d), lr=lr,
                        batch=max(1, d * d // 256), record_at=np.arange(0.0, horizon, 0.1),
                        threshold=0.25, seed=[d, 1, 0, 7], stop_at="matched")
    g = overlap_growth(run.t, run.order["matched"], (0.02, 0.15))
    return {"rate": g.rate.tolist(), "log_m0": g.intercept.tolist(),
            "start": run.order["matched"][0].tolist(),
            "matched": run.weak_recovery_time("matched").tolist()}


def growth(folder, plan, out):
    """Part 6: at each step of ``plan`` (eta -> {d: seeds}) the overlap's growth rate lambda,
    the fit log m_0 = log A - a log d, the measured slope a / lambda of t(d), and the leading
    order prediction of escape_rate (slope 1 / lambda, a = 1)."""
    out["growth"] = {}
    for lr, ds in plan.items():
        rows, D, L = {}, [], []
        theory = escape_rate(lr)
        for d, seeds in ds.items():
            res = cached(folder, f"growth_h1_eta{lr:g}_d{d}_s0",
                         lambda: growth_chunk(d, seeds, lr, 40.0 if lr < 0.1 else HORIZON))
            lam = np.asarray(res["rate"])
            ok = np.isfinite(lam)
            rows[d] = res
            D += [d] * int(ok.sum())
            L += list(np.asarray(res["log_m0"])[ok])
            print(f"[6] eta = {lr:g}, d = {d:3d}: growth rate {lam[ok].mean():.3f} +- "
                  f"{lam[ok].std(ddof=1) / math.sqrt(ok.sum()):.3f} ({ok.sum()}/{len(lam)} "
                  f"runs), m_0 = {np.exp(np.mean(np.asarray(res['log_m0'])[ok])):.4f}, start "
                  f"|cosine| {np.mean(res['start']):.4f}, weak recovery t "
                  f"{np.nanmean(res['matched']):.2f}; {res['cpu_s']:.0f} CPU s", flush=True)
        lam_all = np.concatenate([np.asarray(rows[d]["rate"]) for d in ds])
        lam_all = lam_all[np.isfinite(lam_all)]
        lam, lam_se = lam_all.mean(), lam_all.std(ddof=1) / math.sqrt(len(lam_all))
        entry = {"d": {str(d): rows[d] for d in ds}, "lambda": [lam, lam_se],
                 "theory": {"rate": theory.rate, "slope": theory.slope, "tau": theory.tau}}
        print(f"[6] eta = {lr:g}: lambda = {lam:.3f} +- {lam_se:.3f} over all runs; {theory}",
              flush=True)
        if len(ds) >= 3:
            c, cov = np.polyfit(np.log(D), L, 1, cov=True)
            a, a_se = -c[0], math.sqrt(cov[0, 0])
            b = a / lam
            b_se = b * math.sqrt((a_se / a) ** 2 + (lam_se / lam) ** 2)
            dl = np.array([np.nanmean(rows[d]["rate"]) for d in ds])
            trend = np.polyfit(np.log(list(ds)), dl, 1)[0]
            print(f"[6] eta = {lr:g}: d lambda / d log d = {trend:.3f}; m_0 ~ d^-a with a = "
                  f"{a:.3f} +- {a_se:.3f}; measured slope of t(d) in log d: a / lambda = "
                  f"{b:.2f} +- {b_se:.2f}", flush=True)
            entry.update({"a": [a, a_se], "slope": [b, b_se], "trend": trend})
        out["growth"][f"eta{lr:g}"] = entry


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "output"))
    ap.add_argument("--quick", action="store_true", help="small d, few seeds (seconds)")
    ap.add_argument("--part", choices=("1", "2", "3", "4", "5", "6"), help="run one part only")
    args = ap.parse_args(argv)
    out_dir = Path(args.out)
    folder = out_dir / ("attention_multihead_quick" if args.quick else "attention_multihead")
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    if args.part in (None, "1"):
        if args.quick:
            scaling(folder, [12, 16, 24], lambda d: 3, out)
        else:
            scaling(folder, [16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512],
                    lambda d: {384: 12, 512: 8}.get(d, 16), out)
    if args.part in (None, "2"):
        if args.quick:
            multihead(folder, [12, 16, 24], 2, [2], out)
        else:
            multihead(folder, [32, 48, 64, 96, 128], 8, [2, 3], out)
    if args.part in (None, "3"):
        if args.quick:
            two_layers(folder, [12, 16, 24], 2, out)
        else:
            two_layers(folder, [32, 48, 64, 96, 128], 8, out)
    if args.part in (None, "4"):
        if args.quick:
            scaling(folder, [12, 16, 24], lambda d: 3, out, tied=False)
        else:
            scaling(folder, [32, 48, 64, 96, 128, 192, 256], lambda d: 12, out, tied=False)
    if args.part in (None, "5"):
        if args.quick:
            three_heads(folder, [(0.1, 40.0, [12, 16, 24], 2)], out)
        else:
            three_heads(folder, [(0.3, 90.0, [32, 48, 64, 96, 128], 8),
                                 (0.1, 90.0, [32, 48, 64, 96, 128], 16),
                                 (0.05, 120.0, [32, 48, 64, 96], 8)], out)
    if args.part in (None, "6"):
        growth(folder, {0.1: {24: 3, 32: 3, 48: 3}} if args.quick else
               {0.1: {64: 8, 128: 8, 256: 8, 512: 2}, 0.05: {128: 8, 256: 8}}, out)
    name = ("attention_multihead" + ("_quick" if args.quick else "")
            + (f"_part{args.part}" if args.part else "") + ".json")
    path = write_file(out_dir / name, json.dumps(out, indent=1), what="result", replace=True)
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
