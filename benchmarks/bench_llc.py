"""Calibration of the LLC estimator against the exact Aoyagi-Watanabe values, beside devinterp.

Usage: python benchmarks/bench_llc.py [--ns 1000,10000,100000] [--datasets 5]
       [--sampler mala|sgld] [--devinterp N] [--out DIR]

The five reduced-rank-regression cases (M, H, N) = (5,3,5), (5,4,5), (4,3,8), (8,3,4), (3,8,4)
of devinterp's own test, true map 0: x ~ N(0, I_M) and y ~ N(0, I_N) independent, n samples,
``--datasets`` data sets per n (seeds 0, 1, ...). Each estimate runs paramgeo's estimator
(deep-linear widths M,H,N, the ``regression`` loss, defaults: n beta = n / log n, gamma = 1,
MALA, 32 batched chains x 1000 draws after 1000 burn-in per temperature, automatic step, the
bias check at 4 gamma) at
the empirical risk minimiser of rank H (closed form: ``Regression.reduced_rank_minimiser``,
Reinsel and Velu 1998), where devinterp's test localizes after training. It prints, per case
and n, the estimates, the mean reported s.e. (sampler, data set, bias check, total), the spread
over data sets, the exact value and the CPU time; then the mean absolute relative error at the largest n
(target <= 3%) and the share of runs with the exact value within 2 reported s.e. (target
>= 80%), for the total error bar, for the sampler's and data set's parts without the bias
check, and for the sampler's alone.

``--devinterp N`` also runs devinterp (its test's settings, see _devinterp_worker.py) on the
first N data sets of every case at the smallest n, from the same point, in a throwaway
environment /tmp/devinterp-venv that this script creates (torch first, the CPU wheel, then
devinterp); its errors and times are printed beside paramgeo's (target: >= 10x faster).
``--devinterp-steps 6e-5,3e-4,...`` runs devinterp once per SGLD step on those data sets (a
step sweep, the test's 6e-5 among them) and prints, per step, its mean relative error and CPU
time, and the step with the smallest mean absolute error (tuned knowing the exact value, as a
user cannot) beside paramgeo's automatic step.
Everything is written to DIR (default benchmarks/out-llc): results.json, table.md, figure.png.
``--large`` runs only the regular case with 1000 parameters, ``--exact-data`` only the bias
curve without data-set noise (exact_data_curve).

``bench(row, repeats)`` (for benchmarks/run.py) times one estimate against nothing slower; it
only reports the time and error of the (5,3,5) case at n = 1000.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

CASES = ((5, 3, 5), (5, 4, 5), (4, 3, 8), (8, 3, 4), (3, 8, 4))
VENV = Path("/tmp/devinterp-venv")
TORCH_WHEEL = "torch==2.13.0"  # pip finds the CPU wheel of this machine's local index


def dataset(M, N, n, seed):
    """x ~ N(0, I_M), y ~ N(0, I_N) independent (the true map is 0)."""
    rng = np.random.default_rng([seed, M, N, n])
    return rng.standard_normal((n, M)), rng.standard_normal((n, N))


def paramgeo_run(M, H, N, X, Y, sampler="mala", seed=0):
    import paramgeo
    from paramgeo.llc import LLCWarning, estimate_llc
    from paramgeo.losses import Regression

    param = paramgeo.get("deep-linear", widths=(M, H, N))
    loss = Regression(X, Y)
    W1, W2 = loss.reduced_rank_minimiser(H)
    theta = np.concatenate([W1.ravel(), W2.ravel()])
    grad = param.vjp(theta, loss.grad(param.forward_flat(theta)))
    assert np.linalg.norm(grad) < 1e-8, f"not a minimiser: |grad| = {np.linalg.norm(grad)}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LLCWarning)
        est = estimate_llc(param, loss, theta, sampler=sampler, seed=seed)
    return est, W1, W2, loss.value(np.zeros(M * N)) - est.loss_star


def ensure_devinterp():
    """The throwaway environment with torch (CPU wheel) and devinterp; its python."""
    python = VENV / "bin" / "python"
    probe = [str(python), "-c", "import devinterp, torch"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run(pip + [TORCH_WHEEL], check=True)  # torch first: plain torch pulls CUDA
    subprocess.run(pip + ["devinterp"], check=True)
    return python


def devinterp_run(python, X, Y, W1, W2, seed, workdir, lr=6e-5):
    src, dst = workdir / f"di-{seed}.npz", workdir / f"di-{seed}.json"
    np.savez(src, X=X, Y=Y, W1=W1, W2=W2, seed=seed)
    worker = Path(__file__).with_name("_devinterp_worker.py")
    subprocess.run([str(python), str(worker), str(src), str(dst), "2000", repr(float(lr))],
                   check=True, capture_output=True)
    return json.loads(dst.read_text())


def calibrate(ns, datasets, sampler, devinterp_sets, out, cases=CASES, devinterp_ns=None,
              devinterp_steps=()):
    from paramgeo.llc import reduced_rank_regression

    out.mkdir(parents=True, exist_ok=True)
    python = ensure_devinterp() if devinterp_sets else None
    devinterp_ns = [min(ns)] if devinterp_ns is None else devinterp_ns
    paramgeo_run(3, 2, 2, *dataset(3, 2, 50, 0))  # imports and first calls out of the timings
    rows = []
    for M, H, N in cases:
        exact = reduced_rank_regression(M, H, N).lam
        for n in ns:
            for s in range(datasets):
                X, Y = dataset(M, N, n, s)
                cpu = time.process_time()
                est, W1, W2, gap = paramgeo_run(M, H, N, X, Y, sampler, seed=s)
                cpu = time.process_time() - cpu
                # per temperature: n beta_k (E_k[L_n] - L_n(w*)) and the same centred at the
                # true map 0, n beta_k (E_k[L_n] - L_n(0)) (the one-temperature estimators)
                single = [lv["llc"] for lv in est.levels]
                single0 = [lv["llc"] - lv["nbeta"] * gap for lv in est.levels]
                row = dict(case=[M, H, N], n=n, dataset=s, exact=exact, llc=est.llc,
                           se=est.se, se_data=est.se_data, se_total=est.se_total,
                           se_bias=est.se_bias, llc_check=est.llc_check,
                           chains=est.chains, seconds=est.seconds, cpu_seconds=cpu, rhat=est.rhat,
                           step=est.step, temperatures=list(est.temperatures), single=single,
                           single_se=[lv["se"] for lv in est.levels], single_at_truth=single0)
                if python is not None and n in devinterp_ns and s < devinterp_sets:
                    di = devinterp_run(python, X, Y, W1, W2, s, out)
                    row.update(devinterp_llc=di["llc"], devinterp_std=di["std"],
                               devinterp_seconds=di["seconds"],
                               devinterp_cpu_seconds=di.get("cpu_seconds"))
                    row["devinterp_sweep"] = [
                        devinterp_run(python, X, Y, W1, W2, s, out, lr)
                        for lr in devinterp_steps if lr != 6e-5] + [dict(di, lr=6e-5)]
                rows.append(row)
                print(json.dumps(row), flush=True)
                (out / "results.json").write_text(json.dumps(rows, indent=1))
    return rows


def summarise(rows, ns):
    lines = ["| case (M,H,N) | n | exact | estimates (one per data set) | mean s.e.: sampler, "
             "data set, bias check, total | spread over data sets (sd) | mean rel. error | "
             "CPU time / estimate |", "|---|---|---|---|---|---|---|---|"]
    for case in CASES:
        for n in ns:
            sel = [r for r in rows if tuple(r["case"]) == case and r["n"] == n]
            if not sel:
                continue
            ex = sel[0]["exact"]
            est = np.array([r["llc"] for r in sel])
            lines.append(
                f"| {case} | {n:.0e} | {ex:g} | {', '.join(f'{e:.2f}' for e in est)} | "
                f"{np.mean([r['se'] for r in sel]):.2f}, "
                f"{np.mean([r.get('se_data', np.nan) for r in sel]):.2f}, "
                f"{np.mean([r.get('se_bias', np.nan) for r in sel]):.2f}, "
                f"{np.mean([total(r) for r in sel]):.2f} | "
                f"{est.std(ddof=1) if est.size > 1 else 0:.2f} "
                f"| {np.mean(est - ex) / ex:+.1%} | "
                f"{np.mean([r.get('cpu_seconds', r['seconds']) for r in sel]):.2f} s |")
    lines += data_set_part(rows, ns)
    lines.append("")
    for n in ns:
        sel = [r for r in rows if r["n"] == n]
        mare = np.mean([abs(r["llc"] - r["exact"]) / r["exact"] for r in sel])
        cover = np.mean([abs(r["llc"] - r["exact"]) <= 2 * total(r) for r in sel])
        lines.append(f"n = {n:.0e}: mean absolute relative error {mare:.1%}, exact within 2 "
                     f"total s.e. in {cover:.0%} of {len(sel)} runs")
    big = [r for r in rows if r["n"] == max(ns)]
    mare = np.mean([abs(r["llc"] - r["exact"]) / r["exact"] for r in big])
    cover = np.mean([abs(r["llc"] - r["exact"]) <= 2 * total(r) for r in rows])
    mc = np.mean([abs(r["llc"] - r["exact"]) <= 2 * r["se"] for r in rows])
    nobias = np.mean([abs(r["llc"] - r["exact"]) <= 2 * math.hypot(r["se"], r["se_data"])
                      for r in rows if math.isfinite(r.get("se_data", math.nan))])
    lines.append(f"mean absolute relative error at n = {max(ns):.0e}: {mare:.1%} (target <= 3%: "
                 f"{'met' if mare <= 0.03 else 'MISSED'}); exact within 2 reported total s.e. "
                 f"(sampler, data set and bias check) in {cover:.0%} of {len(rows)} runs "
                 f"(target >= 80%: {'met' if cover >= 0.8 else 'MISSED'}); without the bias "
                 f"check (sampler and data set) in {nobias:.0%}; within 2 sampler s.e. alone "
                 f"in {mc:.0%}")
    di = [r for r in rows if "devinterp_llc" in r]
    if di:
        def cpu(r, who):  # CPU seconds where recorded (wall-clock is inflated by load)
            key = f"{who}cpu_seconds"
            return r[key] if r.get(key) is not None else r[f"{who}seconds"]

        lines += ["", "| case | n | data set | exact | paramgeo | devinterp | paramgeo CPU time | "
                  "devinterp CPU time | speed-up |", "|---|---|---|---|---|---|---|---|---|"]
        for r in di:
            lines.append(
                f"| {tuple(r['case'])} | {r['n']:.0e} | {r['dataset']} | {r['exact']:g} | "
                f"{r['llc']:.2f} +- {total(r):.2f} ({(r['llc'] - r['exact']) / r['exact']:+.1%}) | "
                f"{r['devinterp_llc']:.2f} +- {r['devinterp_std']:.2f} "
                f"({(r['devinterp_llc'] - r['exact']) / r['exact']:+.1%}) | "
                f"{cpu(r, ''):.1f} s | {cpu(r, 'devinterp_'):.1f} s | "
                f"{cpu(r, 'devinterp_') / cpu(r, ''):.1f}x |")
        lines.append("")
        for n in sorted({r["n"] for r in di}):
            sel = [r for r in di if r["n"] == n]
            ours = np.mean([abs(r["llc"] - r["exact"]) / r["exact"] for r in sel])
            theirs = np.mean([abs(r["devinterp_llc"] - r["exact"]) / r["exact"] for r in sel])
            speed = [cpu(r, "devinterp_") / cpu(r, "") for r in sel]
            lines.append(f"n = {n:.0e}, the same {len(sel)} data sets: mean absolute relative "
                         f"error paramgeo {ours:.1%}, devinterp {theirs:.1%}; CPU speed-up "
                         f"{min(speed):.1f}x to {max(speed):.1f}x (target >= 10x each: "
                         f"{'met' if min(speed) >= 10 else 'MISSED'})")
    lines += devinterp_sweep_table([r for r in di if len(r.get("devinterp_sweep", [])) > 1])
    return "\n".join(lines)


def devinterp_sweep_table(rows):
    """Per n: devinterp's mean relative error and CPU time at each SGLD step of the sweep, on
    the data sets where paramgeo ran with its automatic step; the best step (chosen knowing
    the exact value) beside paramgeo."""
    lines = []
    for n in sorted({r["n"] for r in rows}):
        sel = [r for r in rows if r["n"] == n]
        steps = sorted({run["lr"] for r in sel for run in r["devinterp_sweep"]})

        def at(lr):
            runs = [next(run for run in r["devinterp_sweep"] if run["lr"] == lr) for r in sel]
            errors = [(run["llc"] - r["exact"]) / r["exact"] for run, r in zip(runs, sel)]
            return errors, [run.get("cpu_seconds", run["seconds"]) for run in runs]

        lines += ["", f"devinterp SGLD step sweep, n = {n:.0e}, {len(sel)} data sets "
                  f"({', '.join(str(tuple(r['case'])) + ' #' + str(r['dataset']) for r in sel)})",
                  "", "| SGLD step | relative errors | mean | mean CPU time |", "|---|---|---|---|"]
        for lr in steps:
            errors, cpu = at(lr)
            lines.append(f"| {lr:g}{' (its test)' if lr == 6e-5 else ''} | "
                         f"{', '.join(f'{e:+.1%}' for e in errors)} | {np.mean(errors):+.1%} | "
                         f"{np.mean(cpu):.1f} s |")
        ours = [(r["llc"] - r["exact"]) / r["exact"] for r in sel]
        ours_cpu = [r.get("cpu_seconds", r["seconds"]) for r in sel]
        lines.append(f"| paramgeo (automatic step) | {', '.join(f'{e:+.1%}' for e in ours)} | "
                     f"{np.mean(ours):+.1%} | {np.mean(ours_cpu):.1f} s |")
        best = min(steps, key=lambda lr: np.mean(np.abs(at(lr)[0])))
        errors, cpu = at(best)
        lines += ["", f"n = {n:.0e}: devinterp at its best step {best:g} (tuned against the exact "
                  f"value): mean error {np.mean(errors):+.1%} in {np.mean(cpu):.1f} CPU s; "
                  f"paramgeo {np.mean(ours):+.1%} in {np.mean(ours_cpu):.1f} CPU s "
                  f"({np.mean(cpu) / np.mean(ours_cpu):.0f}x less)"]
    return lines


def total(row):
    """The run's total error bar (the sampler's alone in results from before se_total)."""
    return row.get("se_total", row["se"])


def data_set_part(rows, ns):
    """Per case and n, the spread over data sets of the slope estimate and of the
    one-temperature estimates centred at the truth 0, n beta_k (E_k[L_n] - L_n(0)), with the
    part the Monte Carlo error does not explain, sqrt(max(sd^2 - mean se^2, 0)). Watanabe's
    U_n term predicts the ratio (data-set part of one temperature t) / (that of the slope)
    = sqrt(t) (sqrt(1 / t_1) + sqrt(1 / t_2)) (docs/learning-coefficients.md). Beside the
    slope's data-set part, the one each run estimated from its own data set (the jackknife
    se_data, root mean square over the data sets)."""
    out = ["", "| case (M,H,N) | n | slope: sd (data-set part) | jackknife data-set s.e. (rms) "
           "| one temperature at the truth, per t: mean, sd (data-set part) | ratio of data-set "
           "parts, seen (U_n predicts) |", "|---|---|---|---|---|---|"]
    for case in CASES:
        for n in ns:
            sel = [r for r in rows if tuple(r["case"]) == case and r["n"] == n]
            if len(sel) < 2 or "single_at_truth" not in sel[0]:
                continue
            temps = sel[0]["temperatures"]

            def part(values, ses):
                sd = float(np.std(values, ddof=1))
                return sd, math.sqrt(max(sd ** 2 - float(np.mean(np.square(ses))), 0.0))

            sd, dp = part([r["llc"] for r in sel], [r["se"] for r in sel])
            cells, ratios = [], []
            for k, t in enumerate(temps):
                vals = [r["single_at_truth"][k] for r in sel]
                sdk, dpk = part(vals, [r["single_se"][k] for r in sel])
                cells.append(f"t = {t:g}: {np.mean(vals):.2f}, {sdk:.2f} ({dpk:.2f})")
                pred = math.sqrt(t) * sum(1 / math.sqrt(u) for u in temps)
                ratios.append(f"{dpk / dp:.1f} ({pred:.1f})" if dp > 0 else f"- ({pred:.1f})")
            jack = math.sqrt(np.mean([r.get("se_data", np.nan) ** 2 for r in sel]))
            out.append(f"| {case} | {n:.0e} | {sd:.2f} ({dp:.2f}) | {jack:.2f} | "
                       f"{'; '.join(cells)} | {', '.join(ratios)} |")
    return out


def figure(rows, ns, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(CASES), figsize=(3 * len(CASES), 3.2), sharey=True)
    for ax, case in zip(axes, CASES):
        for i, n in enumerate(ns):
            sel = [r for r in rows if tuple(r["case"]) == case and r["n"] == n]
            for j, r in enumerate(sel):
                x = i + 0.08 * (j - (len(sel) - 1) / 2)
                first = ax is axes[0] and i == 0 and j == 0
                ax.errorbar(x, r["llc"] / r["exact"], yerr=2 * total(r) / r["exact"],
                            fmt="o", ms=3, color="C0", capsize=2,
                            label="paramgeo +- 2 total s.e." if first else None)
                if "devinterp_llc" in r:
                    ax.plot(x + 0.04, r["devinterp_llc"] / r["exact"], "s", ms=4, color="C3",
                            label="devinterp" if first else None)
        ax.axhline(1, color="k", lw=1)
        ax.set_xticks(range(len(ns)), [f"{n:.0e}" for n in ns])
        ax.set_title(f"(M,H,N) = {case}", fontsize=9)
        ax.set_xlabel("n")
    axes[0].set_ylabel("estimate / exact (+- 2 total s.e.)")
    axes[0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def regular_large(n=100_000, widths=(25, 20, 25), seed=0):
    """A regular case with about 10^3 parameters: deep-linear widths 25,20,25 (1000
    parameters), a true matrix of full rank 20, y = B0 x + noise; lambda = d / 2 with
    d = rank J = 20 (25 + 25 - 20) = 600 (the regular value), estimated at the rank-20
    least-squares solution."""
    import paramgeo
    from paramgeo.llc import estimate_llc, exact_learning_coefficient
    from paramgeo.losses import Regression

    M, H, N = widths
    rng = np.random.default_rng(seed)
    B0 = rng.standard_normal((N, H)) @ rng.standard_normal((H, M)) / np.sqrt(H)
    X = rng.standard_normal((n, M))
    Y = X @ B0.T + rng.standard_normal((n, N))
    param = paramgeo.get("deep-linear", widths=widths)
    W1, W2 = Regression(X, Y).reduced_rank_minimiser(H)
    theta = np.concatenate([W1.ravel(), W2.ravel()])
    exact = exact_learning_coefficient(param, theta)
    cpu = time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        est = estimate_llc(param, Regression(X, Y), theta)
    cpu = time.process_time() - cpu
    return dict(params=param.n, n=n, exact=exact.lam, case=exact.case, llc=est.llc, se=est.se,
                se_data=est.se_data, se_bias=est.se_bias, llc_check=est.llc_check,
                se_total=est.se_total, chains=est.chains, seconds=est.seconds, cpu_seconds=cpu,
                rel_error=(est.llc - exact.lam) / exact.lam,
                warnings=[str(w.message) for w in caught])


def exact_data_curve(cases=((5, 4, 5), (5, 3, 5)), nbetas=(145, 8686, 1e5, 1e6),
                     steps=(4000, 4000), n=2000):
    """The estimator's bias without data-set noise: X^T X / n = I and X^T Y = 0 exactly (an
    orthonormal basis of random columns), so the loss is ||W2 W1||^2 / 2 + const, w* = 0 is
    the truth and every error is the estimator's at n beta (gamma = 1; by the scaling law of
    docs/learning-coefficients.md the same as n beta / gamma^2 at any gamma). Returns one row
    per case and n beta: the slope, its s.e., its relative error and the CPU time."""
    import paramgeo
    from paramgeo.llc import LLCWarning, estimate_llc, reduced_rank_regression
    from paramgeo.losses import Regression

    out = []
    for M, H, N in cases:
        Q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((n, M + N)))
        loss = Regression(Q[:, :M] * math.sqrt(n), Q[:, M:] * math.sqrt(n))
        param = paramgeo.get("deep-linear", widths=(M, H, N))
        exact = reduced_rank_regression(M, H, N).lam
        for nb in nbetas:
            cpu = time.process_time()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", LLCWarning)
                est = estimate_llc(param, loss, np.zeros(param.n), n=n, nbeta=nb, chains=16,
                                   burn=steps[0], draws=steps[1], seed=1, bias_check=False)
            out.append(dict(case=[M, H, N], nbeta=nb, exact=exact, llc=est.llc, se=est.se,
                            rel_error=(est.llc - exact) / exact,
                            cpu_seconds=time.process_time() - cpu))
            print(json.dumps(out[-1]), flush=True)
    return out


def bench(row, repeats):
    from paramgeo.llc import reduced_rank_regression

    X, Y = dataset(5, 5, 1000, 0)
    start = time.perf_counter()
    est = paramgeo_run(5, 3, 5, X, Y)[0]
    exact = reduced_rank_regression(5, 3, 5).lam
    print(f"{'llc: RRR (5,3,5) n=1e3, 2 x 2 groups x 32 chains x 2000 steps':<60} "
          f"{time.perf_counter() - start:10.3f} s   estimate {est.llc:.3f} +- {est.se_total:.2f} "
          f"(exact {exact:g})", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ns", default="1000,10000,100000")
    parser.add_argument("--datasets", type=int, default=5)
    parser.add_argument("--sampler", default="mala", choices=("mala", "sgld"))
    parser.add_argument("--devinterp", type=int, default=0,
                        help="data sets per case run through devinterp (at --devinterp-ns)")
    parser.add_argument("--devinterp-ns", default=None,
                        help="the n at which devinterp runs [the smallest of --ns]")
    parser.add_argument("--devinterp-steps", default="",
                        help="SGLD steps of a devinterp step sweep, e.g. 6e-5,3e-4,1e-3")
    parser.add_argument("--cases", default=None,
                        help="a subset of the cases, e.g. '4,3,8;8,3,4' [all five]")
    parser.add_argument("--merge", default=None,
                        help="with --summary-only: output folders to merge, separated by colons")
    parser.add_argument("--out", default=str(Path(__file__).with_name("out-llc")))
    parser.add_argument("--large", action="store_true",
                        help="only the regular case with 1000 parameters (regular_large)")
    parser.add_argument("--exact-data", action="store_true",
                        help="only the bias without data-set noise (exact_data_curve)")
    parser.add_argument("--summary-only", action="store_true",
                        help="re-print the table of an earlier run's results.json")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    ns = [int(float(v)) for v in args.ns.split(",")]
    out = Path(args.out)
    if args.large:
        print(json.dumps(regular_large(), indent=1))
        return
    if args.exact_data:
        exact_data_curve()
        return
    cases = CASES if args.cases is None else tuple(
        tuple(int(v) for v in c.split(",")) for c in args.cases.split(";"))
    if args.summary_only:
        folders = [out] if args.merge is None else [Path(f) for f in args.merge.split(":")]
        rows = [r for f in folders for r in json.loads((f / "results.json").read_text())]
        out.mkdir(parents=True, exist_ok=True)
    else:
        di_ns = None if args.devinterp_ns is None else [
            int(float(v)) for v in args.devinterp_ns.split(",")]
        steps = [float(v) for v in args.devinterp_steps.split(",") if v]
        rows = calibrate(ns, args.datasets, args.sampler, args.devinterp, out, cases, di_ns,
                         steps)
    text = summarise(rows, ns)
    (out / "table.md").write_text(text + "\n")
    figure(rows, ns, out / "figure.png")
    print(text)


if __name__ == "__main__":
    main()
