"""The LLC estimator on data through framework models: minibatch SGLD against the full-batch
estimator where the truth is known, and a torch MLP on scikit-learn's digits.

Usage: python benchmarks/bench_llc_data.py [--calibration] [--digits [--cnn] [--devinterp]]
       [--tanh] [--fibres] [--n 10000]
       [--datasets 2] [--batch-size 500] [--step-scale 0.05] [--out DIR]

``--calibration``: the five reduced-rank-regression cases of ``bench_llc.py`` ((M, H, N) =
(5,3,5), (5,4,5), (4,3,8), (8,3,4), (3,8,4), true map 0, x ~ N(0, I_M), y ~ N(0, I_N)) at
n = ``--n``, ``--datasets`` data sets each, at the rank-H least-squares minimiser: (a) the
full-batch estimator (the deep-linear plugin with the Regression loss, MALA, defaults) and
(b) a torch deep linear net ``nn.Sequential(Linear(M, H), Linear(H, N))`` (no biases) through
``from_torch`` with the "mse" loss on the data (X, Y) in minibatches of ``--batch-size``
(minibatch SGLD, otherwise the defaults), beside (c) the full-batch estimator with SGLD
instead of MALA (which separates the sampler's part of the difference from the minibatches').
Prints each estimate with the exact Aoyagi-Watanabe value, the mean absolute relative error of
each route and their ratios (target: minibatch within 1.5x of full batch), and the CPU time
of (a) and (b).

``--digits``: ``sklearn.datasets.load_digits`` (1797 images of 8 x 8 pixels, bundled, no
download), a torch MLP 64 -> 128 -> 10 (9,610 parameters) with ReLU trained with Adam on the
cross-entropy, then the LLC at the trained weights with the "cross-entropy" loss in minibatches
of 128 (minibatch SGLD, float32 chains, defaults otherwise), 8 chains x (500 + 500) steps per
temperature without the bias check (equal draws) and with it (the default); with ``--cnn`` the
CNN of :func:`_cnn` (118,186 parameters) instead, 8 chains x (200 + 200) steps, equal draws
only. Beside them, the model's own cost per chain step (:func:`floors`: one float32 forward
and backward pass on a batch, chain by chain and vectorized over the chains). ``--devinterp``
also runs devinterp (a throwaway environment, /tmp/devinterp-venv, torch first) on the same
model: its SGLD at equal draws (chains = paramgeo's chains times temperatures, the same
burn-in, draws, batch size, n beta and localization) with lr = paramgeo's automatic step (and
for the MLP 10 times it), and prints its estimate, its CPU time per chain step against the
model's own cost, and devinterp's CPU time over paramgeo's (target: at least 10).

``--fibres``: ``llc exact`` at points of the true fibre where a factor of U V^T has rank above
r0 (the smooth-fibre case, rank J / 2) against the estimator (:func:`fibres`).

``--tanh``: the JAX tanh MLP of 54 parameters at n = 80 (:func:`tanh_mlp`): the estimate at
gamma = 1 and at the gamma the pre-check suggests, with the pre-check's warnings.

Torch and BLAS run on one thread (on a loaded two-core machine a second thread makes small
float64 products up to 100x slower). Results go to DIR (default benchmarks/out-llc-data).
"""

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_llc import CASES, dataset  # noqa: E402


def _quiet(fn, *args, **kwargs):
    from paramgeo.llc import LLCWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LLCWarning)
        return fn(*args, **kwargs)


def calibration(n, datasets, batch_size, step_scale=0.05):
    import torch

    import paramgeo
    from paramgeo.llc import estimate_llc, reduced_rank_regression
    from paramgeo.losses import Regression

    rows = []
    for M, H, N in CASES:
        exact = reduced_rank_regression(M, H, N).lam
        plugin = paramgeo.get("deep-linear", widths=(M, H, N))
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(M, H, bias=False),
                                  torch.nn.Linear(H, N, bias=False))
        model = paramgeo.from_torch(net, np.zeros((1, M)))
        for s in range(datasets):
            X, Y = dataset(M, N, n, s)
            loss = Regression(X, Y)
            W1, W2 = loss.reduced_rank_minimiser(H)
            theta = plugin.spec.pack(W1, W2)
            cpu = time.process_time()
            full = _quiet(estimate_llc, plugin, loss, theta, seed=s)
            cpu_full = time.process_time() - cpu
            sgld = _quiet(estimate_llc, plugin, loss, theta, sampler="sgld", seed=s)
            cpu = time.process_time()
            mini = _quiet(estimate_llc, model, "mse", theta, data=(X, Y),
                          batch_size=batch_size, step_scale=step_scale, seed=s)
            cpu_mini = time.process_time() - cpu
            row = dict(case=[M, H, N], n=n, dataset=s, exact=exact, full=full.llc,
                       full_se=full.se_total, full_cpu=cpu_full, full_sgld=sgld.llc,
                       full_sgld_se=sgld.se_total, minibatch=mini.llc,
                       minibatch_se=mini.se_total, minibatch_cpu=cpu_mini,
                       batches=mini.batches)
            rows.append(row)
            print(json.dumps(row), flush=True)
    err_full = np.mean([abs(r["full"] - r["exact"]) / r["exact"] for r in rows])
    err_mini = np.mean([abs(r["minibatch"] - r["exact"]) / r["exact"] for r in rows])
    err_sgld = np.mean([abs(r["full_sgld"] - r["exact"]) / r["exact"] for r in rows])
    print(f"mean |relative error| at n = {n}: full batch (MALA) {err_full:.1%}, full batch "
          f"SGLD {err_sgld:.1%}, minibatch SGLD (batches of {batch_size}) {err_mini:.1%}; "
          f"ratio minibatch / full batch {err_mini / err_full:.2f} (target <= 1.5), minibatch "
          f"/ full-batch SGLD {err_mini / err_sgld:.2f}")
    print(f"median CPU time per estimate: full batch "
          f"{np.median([r['full_cpu'] for r in rows]):.2f} s, minibatch through from_torch "
          f"{np.median([r['minibatch_cpu'] for r in rows]):.2f} s")
    return dict(rows=rows, error_full=err_full, error_full_sgld=err_sgld,
                error_minibatch=err_mini)


def _cnn(torch):
    """A CNN for 8 x 8 digits: conv 1 -> 32 (3 x 3) ReLU, conv 32 -> 64 (3 x 3) ReLU, linear
    64 * 4 * 4 -> 96 ReLU, linear 96 -> 10 (over 10^5 parameters)."""

    return torch.nn.Sequential(torch.nn.Unflatten(1, (1, 8, 8)), torch.nn.Conv2d(1, 32, 3),
                               torch.nn.ReLU(),
                               torch.nn.Conv2d(32, 64, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(64 * 4 * 4, 96), torch.nn.ReLU(),
                               torch.nn.Linear(96, 10))


def devinterp_digits(net, X, y, lr, n_beta, chains, burn, draws, batch_size, seed, workdir):
    """devinterp's estimate on the same model, data and batch size (its SGLD, float32,
    localization 1 as paramgeo's gamma, n beta = n / log n): run by
    _devinterp_digits_worker.py in the throwaway environment of bench_llc.ensure_devinterp."""
    import subprocess

    import torch

    from benchmarks.bench_llc import ensure_devinterp

    python = ensure_devinterp()
    src, module = workdir / "di-digits.npz", workdir / "di-digits.pt"
    dst = workdir / "di-digits.json"
    np.savez(src, X=X, y=y, lr=lr, n_beta=n_beta, localization=1.0, chains=chains, draws=draws,
             burn=burn, batch_size=batch_size, seed=seed)
    torch.save(net, module)
    worker = Path(__file__).with_name("_devinterp_digits_worker.py")
    subprocess.run([str(python), str(worker), str(src), str(module), str(dst)], check=True,
                   capture_output=True)
    return json.loads(dst.read_text())


def floors(net, X, y, batch_size, chains, repeats=20):
    """CPU seconds per chain step of the model's own cost, float32: one forward and backward
    pass of the cross-entropy on a batch, (a) chain by chain in a plain loop (what a sampler
    that moves one chain at a time pays at least) and (b) for ``chains`` chains at once in
    one torch.func.vmap'ed pass (the kernel paramgeo's chains run); medians of ``repeats``."""
    import copy

    import torch
    from torch.func import functional_call, grad_and_value, vmap

    model = copy.deepcopy(net).float()
    xb, yb = torch.tensor(X[:batch_size]), torch.tensor(y[:batch_size])
    params = {k: v.detach().expand(chains, *v.shape).clone() for k, v in
              model.named_parameters()}

    def loss(p):
        return torch.nn.functional.cross_entropy(functional_call(model, p, (xb,)), yb)

    batched = vmap(grad_and_value(loss))

    def plain():
        for _ in range(chains):
            model.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()

    out = {}
    for label, call in (("loop", plain), ("vmap", lambda: batched(params))):
        call()
        times = []
        for _ in range(repeats):
            cpu = time.process_time()
            call()
            times.append(time.process_time() - cpu)
        out[label] = float(np.median(times)) / chains
    return out


def digits(batch_size=128, steps=600, seed=0, cnn=False, chains=8, burn=500, draws=500,
           devinterp=False, workdir=None):
    """The LLC of a torch MLP (or the CNN, ``cnn``) trained on load_digits, minibatch SGLD
    (defaults otherwise), beside devinterp at equal draws (``devinterp``): CPU time per chain
    step of each against the model's own forward and backward cost (:func:`floors`)."""
    import torch
    from sklearn.datasets import load_digits

    import paramgeo
    from paramgeo.llc import estimate_llc

    data = load_digits()
    X = (data.data / 16.0).astype(np.float32)
    y = data.target.astype(np.int64)
    torch.manual_seed(seed)
    net = _cnn(torch) if cnn else torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    Xt, yt = torch.tensor(X), torch.tensor(y)
    cpu = time.process_time()
    for _ in range(steps):  # full-batch Adam to a near-minimum of the training loss
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(Xt), yt)
        loss.backward()
        opt.step()
    train_cpu = time.process_time() - cpu
    accuracy = float((net(Xt).argmax(1) == yt).float().mean())
    model = paramgeo.from_torch(net, X[:2])
    out = dict(parameters=model.n, samples=len(y), train_loss=float(loss.detach()),
               accuracy=accuracy, train_cpu=train_cpu)
    runs = {}
    # equal draws: without the bias check, paramgeo's chains x temperatures chains of
    # burn + draws steps, as many as devinterp's below; then (the MLP) the default, with the
    # bias check
    for label, check in (("equal draws", False),) + ((("default", True),) if not cnn else ()):
        cpu = time.process_time()
        est = _quiet(estimate_llc, model, "cross-entropy", data=(X, y), batch_size=batch_size,
                     chains=chains, burn=burn, draws=draws, seed=seed, bias_check=check)
        cpu = time.process_time() - cpu
        steps_run = (1 + check) * len(est.temperatures) * est.chains * (est.burn + est.draws)
        print(f"paramgeo ({label}): {est}", flush=True)
        runs[label] = dict(llc=est.llc, se_total=est.se_total, llc_check=est.llc_check,
                           cpu_seconds=cpu, chain_steps=steps_run, step=est.step,
                           seconds_per_chain_step=cpu / steps_run,
                           warnings=list(est.warnings), curvature=est.curvature)
    out["paramgeo"] = runs
    ours = runs["equal draws"]
    floor = floors(net, X, y, batch_size, len(est.temperatures) * est.chains)
    out["floor"] = floor
    print(f"model cost per chain step (float32, one forward + backward on a batch of "
          f"{batch_size}): {floor['loop'] * 1e3:.3g} ms chain by chain, {floor['vmap'] * 1e3:.3g} "
          f"ms with the chains vectorized; paramgeo's estimate {ours['seconds_per_chain_step'] * 1e3:.3g}"
          f" ms per chain step, all included ({ours['seconds_per_chain_step'] / floor['vmap']:.2f}"
          " times the vectorized cost)", flush=True)
    if devinterp:
        out["devinterp"] = []
        for factor in ((1.0,) if cnn else (1.0, 10.0)):
            lr = factor * est.step
            di = devinterp_digits(net, X, y, lr, est.nbeta, len(est.temperatures) * est.chains,
                                  est.burn, est.draws, batch_size, seed, workdir)
            di.update(lr=lr, chain_steps=len(est.temperatures) * est.chains
                      * (est.burn + est.draws))
            per = di["cpu_seconds"] / di["chain_steps"]
            di.update(seconds_per_chain_step=per, ratio=di["cpu_seconds"] / ours["cpu_seconds"])
            out["devinterp"].append(di)
            print(f"devinterp (lr = {factor:g} x paramgeo's step = {lr:.3g}): LLC "
                  f"{di['llc']:.4g} +- {di['std']:.2g} (sd over chains) in "
                  f"{di['cpu_seconds']:.1f} s CPU for {di['chain_steps']} chain steps "
                  f"({per * 1e3:.3g} ms each, {per / floor['loop']:.2f} times the chain-by-chain "
                  f"cost); paramgeo at equal draws {ours['llc']:.4g} +- {ours['se_total']:.2g} "
                  f"in {ours['cpu_seconds']:.1f} s CPU for {ours['chain_steps']} chain steps: "
                  f"devinterp / paramgeo CPU time {di['ratio']:.2f} (target >= 10)", flush=True)
    print(json.dumps({k: v for k, v in out.items() if k != "paramgeo"}, default=float),
          flush=True)
    return out


def tanh_mlp(seed=0):
    """The JAX tanh MLP 3 -> 9 -> 3 without biases (54 parameters, regular at its fit: lambda =
    d / 2 = 27) on n = 80 samples of a random teacher of the same architecture with unit
    Gaussian noise, at the least-squares fit (L-BFGS from the teacher): the pre-check's
    numbers and the estimate at the default gamma = 1 and at the gamma the pre-check
    suggests."""
    import jax.numpy as jnp
    from scipy.optimize import minimize

    import paramgeo
    from paramgeo.llc import estimate_llc
    from paramgeo.llc.data import make_batches

    rng = np.random.default_rng(seed)

    def mlp(p, x):
        return jnp.tanh(x @ p["W1"]) @ p["W2"]

    teacher = {"W1": rng.standard_normal((3, 9)) / np.sqrt(3),
               "W2": rng.standard_normal((9, 3)) / 3}
    X = rng.standard_normal((80, 3))
    model = paramgeo.from_jax(mlp, teacher, X)
    Y = model.forward(model.theta0) + rng.standard_normal((80, 3))
    value, grad = make_batches(model, "mse", (X, Y)).full()
    w_star = minimize(value, model.theta0, jac=grad, method="L-BFGS-B",
                      options=dict(gtol=1e-12, maxiter=5000)).x
    out = {}
    for label, gamma in (("default", 1.0), ("suggested", None)):
        if gamma is None:
            gamma = out["default"]["curvature"]["suggested_gamma"]
        est = _quiet(estimate_llc, model, "mse", w_star, data=(X, Y), gamma=gamma)
        print(est)
        out[label] = dict(gamma=gamma, llc=est.llc, se_total=est.se_total, rhat=est.rhat,
                          curvature=est.curvature, warnings=list(est.warnings))
    return out


def fibres(n=10_000, seed=0):
    """``llc exact`` at smooth-fibre points against the estimator: uvt (m = N, n = M, r = H)
    at a true U V^T of rank r0 = 1 with one factor of full rank H, for (M, H, N) = (6, 2, 5)
    and (10, 3, 6); the data x ~ N(0, I_M), y = B0 x + N(0, I_N), n samples; the estimator
    (defaults) at the rank-H least-squares fit reached from the true point by minimum-norm
    Gauss-Newton steps."""
    import paramgeo
    from paramgeo.llc import estimate_llc, exact_learning_coefficient
    from paramgeo.losses import Regression

    rng = np.random.default_rng(seed)
    rows = []
    for (M, H, N), full in (((6, 2, 5), "U"), ((6, 2, 5), "V"), ((10, 3, 6), "U"),
                            ((10, 3, 6), "V")):
        p = paramgeo.get("uvt", m=N, n=M, r=H)
        U, V = rng.standard_normal((N, H)), rng.standard_normal((M, H))
        (V if full == "U" else U)[:, 1:] = 0
        theta = p.spec.pack(U, V)
        exact = exact_learning_coefficient(p, theta)
        X = rng.standard_normal((n, M))
        loss = Regression(X, X @ (U @ V.T).T + rng.standard_normal((n, N)))
        W1, W2 = loss.reduced_rank_minimiser(H)
        target, w = (W2 @ W1).ravel(), theta.copy()
        for _ in range(30):
            w = w - np.linalg.lstsq(p.jacobian(w), p.forward_flat(w) - target, rcond=1e-12)[0]
        est = _quiet(estimate_llc, p, loss, w)
        row = dict(case=[M, H, N, 1], full=full, exact=exact.exact, case_name=exact.case,
                   llc=est.llc, se_total=est.se_total, rhat=est.rhat)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


#: benchmarks/run.py runs this module only when it is named (``run.py llc_data``)
HEAVY = True


def bench(row, repeats):
    """For benchmarks/run.py: one estimate of the (5,3,5) case at n = 1000 through a torch deep
    linear net in minibatches of 100, beside the full-batch plugin route on the same data
    (times and estimates; the exact value 6.5)."""
    import torch

    import paramgeo
    from paramgeo.llc import estimate_llc
    from paramgeo.losses import Regression

    torch.set_num_threads(1)
    X, Y = dataset(5, 5, 1000, 0)
    loss = Regression(X, Y)
    W1, W2 = loss.reduced_rank_minimiser(3)
    plugin = paramgeo.get("deep-linear", widths=(5, 3, 5))
    theta = plugin.spec.pack(W1, W2)
    net = torch.nn.Sequential(torch.nn.Linear(5, 3, bias=False), torch.nn.Linear(3, 5, bias=False))
    model = paramgeo.from_torch(net, X[:1])
    for label, call in (("full batch, plugin (MALA)",
                         lambda: _quiet(estimate_llc, plugin, loss, theta)),
                        ("from_torch, minibatches of 100 (SGLD)",
                         lambda: _quiet(estimate_llc, model, "mse", theta, data=(X, Y),
                                        batch_size=100))):
        start = time.perf_counter()
        est = call()
        print(f"{'llc data: RRR (5,3,5) n=1e3, ' + label:<60} "
              f"{time.perf_counter() - start:10.3f} s   estimate {est.llc:.3f} +- "
              f"{est.se_total:.2f} (exact 6.5)", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibration", action="store_true")
    parser.add_argument("--digits", action="store_true")
    parser.add_argument("--cnn", action="store_true",
                        help="with --digits: the CNN (_cnn) instead of the MLP, 8 chains x "
                             "(200 + 200) steps")
    parser.add_argument("--devinterp", action="store_true",
                        help="with --digits: devinterp beside paramgeo on the MLP")
    parser.add_argument("--fibres", action="store_true",
                        help="only llc exact at smooth-fibre points against the estimator")
    parser.add_argument("--tanh", action="store_true",
                        help="only the JAX tanh MLP of 54 parameters at n = 80 (tanh_mlp)")
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--datasets", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--step-scale", type=float, default=0.05,
                        help="the minibatch route's step times the largest curvature")
    parser.add_argument("--out", default=str(Path(__file__).with_name("out-llc-data")))
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    if args.fibres:
        results["fibres"] = fibres()
        (out / "fibres.json").write_text(json.dumps(results, indent=1, default=float))
        return
    if args.tanh:
        results["tanh"] = tanh_mlp()
        (out / "tanh.json").write_text(json.dumps(results, indent=1, default=float))
        return
    if args.calibration or not args.digits:
        results["calibration"] = calibration(args.n, args.datasets, args.batch_size,
                                             args.step_scale)
    if args.digits or not args.calibration:
        results["digits"] = (digits(cnn=True, burn=200, draws=200, devinterp=args.devinterp,
                                    workdir=out) if args.cnn else
                             digits(devinterp=args.devinterp, workdir=out))
    (out / "results.json").write_text(json.dumps(results, indent=1, default=float))


if __name__ == "__main__":
    main()
