"""The SGD noise (order eta^2) on the plateau and the escape of one tied |h| head, against
online SGD at d = 128-512 (paramgeo.flows.noisy_escape, multihead_sgd).

Setting of examples/attention_multihead.py part 6: one token, link |h|, centered tied teacher
with r = d / 2, student factors with i.i.d. N(0, 1) entries, batches of d^2 / 256 samples.

1. Theory, d -> infinity: the plateau (Tr S / d, Tr S^2 / d, L_Q) and the overlap's growth
   rate with and without the noise at eta = 0.1 and 0.05, the rate fitted over t in [2, 8]
   and [4, 12] (the times at which runs at d = 256 and 512 cross |C| in [0.02, 0.15]).
2. Runs at d = 256, eta = 0.1 and 0.05 (4 new seeds each, stopped at |C| = 0.25): the plateau
   at t = 3 and 6, the growth rate of overlap_growth over |C| in [0.02, 0.15], and the
   overlap profile c_2 / c_1 at t = 5.
3. The drift the runs add to the theory's: runs at eta = 0.1 (d = 128, 256, 512 with 8, 4, 3
   seeds) and eta = 0.05 (d = 256, 4 seeds) recorded every 0.25 in t; the change of M over
   unit intervals of t in [0, 7] minus the Gaussian mean drift
   -(2 eta / sqrt y)(8 L_Q c_2 + 4 L_M Tr(S S*^2) / d) over the interval, averaged over
   intervals and runs. Second route: at the states of runs at t = 3 (d = 128, 256, two each),
   the exact mean step of M (step_coefficients, 1e6 samples) against the same drift, and
   the excess derived by finite_d_drift (Edgeworth terms of order 1 / d).
4. A model of the runs: the overlap's cosine C obeys dC = (lambda(t) C + s eta / (d sigma_S)) dt
   + (k eta / (d sigma_S)) dB, lambda(t) the growth rate of the noisy flow (part 1),
   sigma_S = sqrt(Q - tau^2), s = d times the drift of part 3 per unit eta (averaged),
   k the standard deviation of one step's change of M at a run's state at t = 3
   (step_coefficients, times d^2 / eta),
   |C_0| ~ 1.5 / d; 200 runs per d, stopped at |C| = 0.25, fitted like part 6; eta = 0.1, 0.05.

Run: python examples/escape_noise.py [--out DIR] [--quick]   (about 8 CPU minutes on one core)
"""

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from paramgeo.flows import (
    MultiHeadTeacher,
    escape_rate,
    finite_d_drift,
    multihead_sgd,
    noisy_escape,
    overlap_growth,
    step_coefficients,
)
from paramgeo.io.files import write_file


def theory(out):
    out["theory"] = {}
    for eta in (0.1, 0.05):
        row = {}
        for noise in (False, True):
            run = noisy_escape(eta, horizon=12.0, particles=200, noise=noise)
            tag = "noisy" if noise else "mean_flow"
            row[tag] = {"at3": run.at(3.0), "at8": run.at(8.0),
                        "rate_2_8": run.window_rate(2.0, 8.0),
                        "rate_4_12": run.window_rate(4.0, 12.0)}
            print(f"[1] {run}\n[1]   rate over t in [2, 8] {row[tag]['rate_2_8']:.4f}, "
                  f"[4, 12] {row[tag]['rate_4_12']:.4f}", flush=True)
        row["leading"] = escape_rate(eta).rate
        out["theory"][str(eta)] = row


def overlaps(W, teacher, d):
    """(tau, Q, c_1, c_2) of each seed from the factors (seeds, d, 1, r)."""
    Wm = W[:, :, 0, :]
    r = Wm.shape[-1]
    a, b = 1 / math.sqrt(r * d), teacher.scale
    Ws, tm = teacher.factors[:, :, 0, :], teacher.means[:, 0]
    SW = b * Ws @ (Ws.swapaxes(1, 2) @ Wm) - tm[:, None, None] * Wm
    K = a * Wm.swapaxes(1, 2) @ Wm
    N = a * Wm.swapaxes(1, 2) @ SW
    return (np.einsum("srr->s", K) / d, np.einsum("srq,sqr->s", K, K) / d,
            np.einsum("srr->s", N) / d, np.einsum("srq,sqr->s", K, N) / d)


def runs(out, d, seeds, quick):
    out["runs"] = {}
    r = d // 2
    for eta, horizon in ((0.1, 12.0), (0.05, 20.0)):
        rng = np.random.default_rng([d, 1, 1, 1])
        teacher = MultiHeadTeacher.planted(d, r, 1, seeds, rng, centered=True)
        W = rng.standard_normal((seeds, d, 1, r))
        cpu = time.process_time()
        # to t = 5, the state for part 3 and the overlap profile
        first = multihead_sgd(teacher, (W,), samples=5 * d * d, lr=eta, batch=d * d // 256,
                              record_at=np.arange(0.0, 5.0 + 1e-9, 0.1), seed=[d, 1, 1, 7])
        tau, Q, c1, c2 = overlaps(first.final[0], teacher, d)
        rest = multihead_sgd(teacher, first.final, samples=int((horizon - 5) * d * d), lr=eta,
                             batch=d * d // 256,
                             record_at=np.arange(0.0, horizon - 5 + 1e-9, 0.1),
                             seed=[d, 1, 1, 8], stop_at="matched")
        t = np.concatenate([first.t, 5.0 + rest.t[1:]])
        cos = np.concatenate([first.order["matched"], rest.order["matched"][1:]])
        norm = first.order["norm"][:, :, 0]
        mean = first.order["mean"][:, :, 0]
        g = overlap_growth(t, cos, (0.02, 0.15))
        rate, se = g.mean_rate()
        k3, k6 = int(np.argmin(abs(first.t - 3))), int(np.argmin(abs(t - 6)))
        q6 = np.concatenate([norm, rest.order["norm"][1:, :, 0]])[k6]
        row = {"rate": g.rate.tolist(), "mean_rate": [rate, se],
               "Q3": norm[k3].tolist(), "tau3": mean[k3].tolist(), "Q6": q6.tolist(),
               "c2_over_c1_t5": (c2 / c1).tolist(), "c1_t5": c1.tolist(),
               "recovery": (5.0 + rest.weak_recovery_time("matched")).tolist(),
               "cpu_s": time.process_time() - cpu}
        print(f"[2] d = {d}, eta = {eta:g}: growth rate {rate:.3f} +- {se:.3f} "
              f"({np.round(g.rate, 3).tolist()}); Q(t=3) {norm[k3].mean():.3f}, tau(t=3) "
              f"{mean[k3].mean():.3f}, Q(t=6) {np.nanmean(q6):.3f}; c_2 / c_1 at t = 5 "
              f"{np.round(c2 / c1, 2).tolist()}; recovery t "
              f"{np.round(row['recovery'], 2).tolist()}", flush=True)
        out["runs"][str(eta)] = row


def excess(out, d, seeds, eta=0.1, horizon=7.0, every=0.25):
    """Part 3: runs in segments of ``every`` in t recording (tau, Q, M, c_2, Tr S S*^2 / d, P)
    from the factors; the change of M over unit intervals against the Gaussian drift
    -(2 eta / sqrt y)(8 L_Q c_2 + 4 L_M Tr(S S*^2) / d) averaged over the interval."""
    r = d // 2
    y, a = r / d, 1 / math.sqrt(r * d)
    rng = np.random.default_rng([d, 1, 1, 1])
    teacher = MultiHeadTeacher.planted(d, r, 1, seeds, rng, centered=True)
    W = rng.standard_normal((seeds, d, 1, r))
    Ws, b, tm = teacher.factors[:, :, 0, :], teacher.scale, teacher.means[:, 0]
    P = (b * b * (Ws.swapaxes(1, 2) @ Ws) ** 2).sum((1, 2)) / d - tm ** 2
    rows, k = [], 0
    cpu = time.process_time()
    steps = int(round(horizon / every))
    for k in range(steps + 1):
        Wm = W[:, :, 0, :]
        SW = b * Ws @ (Ws.swapaxes(1, 2) @ Wm) - tm[:, None, None] * Wm
        K = a * Wm.swapaxes(1, 2) @ Wm
        N = a * Wm.swapaxes(1, 2) @ SW
        rows.append([np.einsum("srr->s", K) / d, np.einsum("srq,sqr->s", K, K) / d,
                     np.einsum("srr->s", N) / d, np.einsum("srq,sqr->s", K, N) / d,
                     a * np.einsum("sdr,sdr->s", SW, SW) / d])
        if k == steps:
            break
        W = multihead_sgd(teacher, (W,), samples=int(round(every * d * d)), lr=eta,
                          batch=d * d // 256, record_at=[0.0], seed=[d, 1, 1, 7, k]).final[0]
    tau, Q, M, c2, tss = np.asarray(rows).transpose(1, 0, 2)
    rho = M / np.sqrt(Q * P)
    LQ = 0.5 - np.sqrt(P * (1 - rho ** 2) / Q) / np.pi
    LM = -2 / np.pi * np.arcsin(rho)
    gauss = -(2 * eta / math.sqrt(y)) * (8 * LQ * c2 + 4 * LM * tss)
    n = int(round(1.0 / every))
    ex = np.array([(M[i + n] - M[i]) / (n * every) - gauss[i:i + n + 1].mean(0)
                   for i in range(0, steps - n + 1, n)])
    m, se = float(ex.mean()), float(ex.std(ddof=1) / math.sqrt(ex.size))
    out.setdefault("excess", {})[f"{d}_{eta:g}"] = {"mean": m, "se": se, "d_times_mean": m * d,
                                           "per_interval": ex.tolist(),
                                           "cpu_s": time.process_time() - cpu}
    print(f"[3] d = {d}, eta = {eta:g}, {seeds} runs: dM/dt - Gaussian drift = {m:.5f} +- "
          f"{se:.5f} over t in [0, {horizon:g}] (d times it: {m * d:.2f})", flush=True)


def step_excess(out, d, seeds, samples, eta=0.1):
    """Part 3, second route: at the state of a run at t = 3 (one per seed), the exact mean step
    of M (step_coefficients) against the Gaussian drift, per unit eta."""
    r, y = d // 2, 0.5
    for seed in range(seeds):
        rng = np.random.default_rng([d, 1, 1, 1, seed])
        T = MultiHeadTeacher.planted(d, r, 1, 1, rng, centered=True)
        W = multihead_sgd(T, (rng.standard_normal((1, d, 1, r)),), samples=3 * d * d, lr=eta,
                          batch=d * d // 256, record_at=[0.0], seed=[d, 3, seed]).final[0]
        got = step_coefficients(W[0, :, 0, :], T, samples=samples, rng=5 + seed, chunk=5000)
        S = W[0, :, 0, :] @ W[0, :, 0, :].T / math.sqrt(r * d)
        Ss = T.matrices()[0, 0]
        Q, P = np.trace(S @ S) / d, np.trace(Ss @ Ss) / d
        M, c2, tss = np.trace(S @ Ss) / d, np.trace(S @ S @ Ss) / d, np.trace(S @ Ss @ Ss) / d
        rho = M / math.sqrt(Q * P)
        LQ = 0.5 - math.sqrt(P * (1 - rho * rho) / Q) / math.pi
        gauss = -(2 / math.sqrt(y)) * (8 * LQ * c2 + 4 * (-2 / math.pi) * math.asin(rho) * tss)
        ex, se = float(got["first"][2]) - gauss, float(got["first_se"][2])
        edge = finite_d_drift(S, Ss, y)
        pred = edge["total"] - edge["gaussian"]
        out.setdefault("step_excess", []).append({"d": d, "seed": seed, "M": M, "excess": ex,
                                                  "se": se, "edgeworth": pred})
        print(f"[3] d = {d}, a run's state at t = 3 (M = {M:.4f}): mean step of M per unit eta "
              f"{got['first'][2]:.4f} +- {se:.4f}, Gaussian drift {gauss:.4f}; d times the "
              f"excess {ex * d:.1f} +- {se * d:.1f}, finite_d_drift's {pred * d:.1f}", flush=True)


def model(out, quick, eta=0.1):
    """Part 4: the scalar model of the module docstring, from the measured drift and step."""
    s = float(np.mean([v["d_times_mean"] / float(k.split("_")[1])
                       for k, v in out["excess"].items()]))
    d = 64 if quick else 256  # the step's spread at a run's state on the plateau (t = 3)
    rng = np.random.default_rng([d, 1, 1, 1])
    T = MultiHeadTeacher.planted(d, d // 2, 1, 1, rng, centered=True)
    W = multihead_sgd(T, (rng.standard_normal((1, d, 1, d // 2)),), samples=3 * d * d, lr=eta,
                      batch=d * d // 256, record_at=[0.0], seed=[d, 1, 1, 7]).final[0]
    got = step_coefficients(W[0, :, 0, :], T, samples=4000 if quick else 40000, rng=3)
    k = float(got["first_se"][2]) * math.sqrt(4000 if quick else 40000)
    flow = noisy_escape(eta, horizon=25.0 if eta >= 0.1 else 40.0, particles=120,
                        record_every=0.05)
    t, lam = flow.t, flow.rate
    sig = np.sqrt(flow.norm - flow.tau ** 2)
    gen = np.random.default_rng(0)
    row = out.setdefault("model", {})[f"{eta:g}"] = {"s": s, "k": k}
    for d in (64, 128, 256, 512, 1024, 4096):
        C = gen.standard_normal(200) * 1.5 / d
        rec = [C]
        for j in range(len(t) - 1):
            h = t[j + 1] - t[j]
            C = C + h * (lam[j] * C + s * eta / (d * sig[j])) + k * eta / (d * sig[j]) * (
                math.sqrt(h) * gen.standard_normal(C.shape))
            rec.append(C)
        R = np.abs(np.asarray(rec))
        hit = np.argmax(R >= 0.25, axis=0)
        done = R.max(axis=0) >= 0.25
        R[np.arange(len(t))[:, None] > hit[None, :]] = np.nan
        g = overlap_growth(t[::2], R[::2], (0.02, 0.15))
        rate, se = g.mean_rate()
        tr = float(np.median(t[hit[done]])) if done.any() else math.nan
        row[str(d)] = {"rate": rate, "se": se, "median_t": tr}
        print(f"[4] model, eta = {eta:g}, d = {d}: growth rate {rate:.3f} +- {se:.3f}, median "
              f"weak recovery t {tr:.2f} (s = {s:.1f}, k = {k:.1f})", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).parent / "output"))
    ap.add_argument("--quick", action="store_true", help="d = 64, 2 seeds (a smoke test)")
    args = ap.parse_args(argv)
    out: dict = {}
    theory(out)
    runs(out, 64 if args.quick else 256, 2 if args.quick else 4, args.quick)
    for d, seeds, eta in (((64, 2, 0.1),) if args.quick else
                          ((128, 8, 0.1), (256, 4, 0.1), (512, 3, 0.1), (256, 4, 0.05))):
        excess(out, d, seeds, eta)
    for d in (64,) if args.quick else (128, 256):
        step_excess(out, d, 1 if args.quick else 2, 20000 if args.quick else 10 ** 6)
    for eta in (0.1, 0.05):
        model(out, args.quick, eta)
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    path = write_file(folder / "escape_noise.json", json.dumps(out, indent=1), what="result",
                      replace=True)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
