"""LoRA against full fine-tuning at small scale: a torch MLP on scikit-learn's bundled digits.

An MLP 64 -> 64 -> 64 -> 5 (ReLU) is pretrained on task A (digits 0-4) and fine-tuned on task B
(digits 5-9, relabelled 0-4) in two ways, from the same pretrained weights and for the same
number of Adam steps:

* full fine-tuning: every weight trains;
* LoRA: every layer W becomes W0 + B A with rank r (A ~ N(0, 1/64), B = 0), W0 frozen, only
  (A, B) trains (the ``lora`` plugin's map phi(B, A) = W0 + B A).

Measured after fine-tuning, beside the pretrained network:

* task B test accuracy;
* per-sample linear separability of task A in the last hidden layer: the test accuracy of a
  logistic-regression probe fitted on task A's hidden representations (training half), the
  small-scale stand-in for the per-token separability the LoRA-alignment paper says full
  fine-tuning loses;
* homogeneity of the hidden representations: the mean pairwise cosine similarity of task A's
  hidden vectors and their participation ratio (tr C)^2 / tr(C^2) (C their covariance);
* flatness of the trained subspace: the top eigenvalue (power iteration on Hessian-vector
  products) and the trace (Hutchinson, Rademacher probes, with its standard error) of the task-B
  loss Hessian restricted to the trained parameters, for LoRA its (A, B) and for full
  fine-tuning all weights, also per dimension (trace / number of parameters); and at LoRA's
  end point the Hessian in all the weights W, the full space around the same network.

Claims that need vision-language models and benchmarks (LoRA alignment beating full alignment,
the shift from hallucinatory to conservative answers, 100 configurations over three operator
families) are out of reach here.

Usage: python examples/lora_digits.py [--rank 4] [--steps 400] [--seed 0]
"""

import argparse

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression

torch.set_num_threads(1)


def data(seed=0):
    """Standardised digits split into tasks A (0-4) and B (5-9 -> 0-4), each half train, half
    test; returns dict task -> (X_train, y_train, X_test, y_test) as torch tensors."""
    X, y = load_digits(return_X_y=True)
    X = (X - X.mean(0)) / (X.std(0) + 1e-8)
    rng = np.random.default_rng(seed)
    out = {}
    for task, keep, shift in (("A", y < 5, 0), ("B", y >= 5, 5)):
        idx = rng.permutation(np.flatnonzero(keep))
        half = idx.size // 2
        tr, te = idx[:half], idx[half:]
        t = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
        out[task] = (t(X[tr]), torch.tensor(y[tr] - shift), t(X[te]), torch.tensor(y[te] - shift))
    return out


def init(seed=0, widths=(64, 64, 64, 5)):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(o, i, generator=g, dtype=torch.float64) / i ** 0.5
            for i, o in zip(widths[:-1], widths[1:])]


def hidden(weights, X):
    h = X
    for W in weights[:-1]:
        h = torch.relu(h @ W.T)
    return h


def loss_fn(weights, X, y):
    return torch.nn.functional.cross_entropy(hidden(weights, X) @ weights[-1].T, y)


def accuracy(weights, X, y):
    return float((torch.argmax(hidden(weights, X) @ weights[-1].T, 1) == y).double().mean())


def train(params, build, X, y, steps, lr=1e-2):
    """Adam on ``params`` (leaf tensors) of the loss of ``build(params)``."""
    params = [p.detach().clone().requires_grad_(True) for p in params]
    opt = torch.optim.Adam(params, lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(build(params), X, y).backward()
        opt.step()
    return [p.detach() for p in params]


def lora_build(base, rank):
    def build(params):
        return [W + params[2 * k + 1] @ params[2 * k] for k, W in enumerate(base)]
    return build


def lora_start(base, rank, seed=0):
    g = torch.Generator().manual_seed(seed + 1)
    out = []
    for W in base:
        out += [torch.randn(rank, W.shape[1], generator=g, dtype=torch.float64) / W.shape[1] ** 0.5,
                torch.zeros(W.shape[0], rank, dtype=torch.float64)]
    return out


def hessian_spectrum(params, build, X, y, iters=60, probes=64, seed=0):
    """(top eigenvalue, trace, standard error of the trace, dimension) of the Hessian of the
    loss of ``build(params)`` in ``params``: power iteration and Hutchinson on Hessian-vector
    products (torch.func.jvp of the gradient)."""
    flat = torch.cat([p.reshape(-1) for p in params])
    shapes = [p.shape for p in params]
    sizes = [p.numel() for p in params]

    def grad(v):
        ps = [t.reshape(s) for t, s in zip(torch.split(v, sizes), shapes)]
        return torch.func.grad(lambda *q: loss_fn(build(list(q)), X, y),
                               argnums=tuple(range(len(ps))))(*ps)

    def hvp(v):
        return torch.cat([t.reshape(-1) for t in
                          torch.func.jvp(lambda w: torch.cat([g.reshape(-1) for g in grad(w)]),
                                         (flat,), (v,))[1]])

    g = torch.Generator().manual_seed(seed)
    v = torch.randn(flat.numel(), generator=g, dtype=torch.float64)
    top = 0.0
    for _ in range(iters):
        w = hvp(v / v.norm())
        top = float(w @ (v / v.norm()))
        v = w
    samples = []
    for _ in range(probes):
        z = torch.randint(0, 2, (flat.numel(),), generator=g).double() * 2 - 1
        samples.append(float(z @ hvp(z)))
    samples = np.array(samples)
    return top, float(samples.mean()), float(samples.std(ddof=1) / np.sqrt(probes)), flat.numel()


def probe_accuracy(weights, task):
    Xtr, ytr, Xte, yte = task
    clf = LogisticRegression(max_iter=2000).fit(hidden(weights, Xtr).numpy(), ytr.numpy())
    return float(clf.score(hidden(weights, Xte).numpy(), yte.numpy()))


def homogeneity(weights, X):
    """(mean pairwise cosine similarity, participation ratio) of the hidden vectors."""
    h = hidden(weights, X).numpy()
    u = h / np.maximum(np.linalg.norm(h, axis=1, keepdims=True), 1e-12)
    cos = u @ u.T
    n = len(u)
    c = np.cov(h.T)
    return float((cos.sum() - n) / (n * (n - 1))), float(np.trace(c) ** 2 / np.trace(c @ c))


def run(rank=4, steps=400, seed=0, pre_steps=600):
    tasks = data(seed)
    XA, yA = tasks["A"][:2]
    XB, yB, XBt, yBt = tasks["B"]
    base = train(init(seed), lambda p: p, XA, yA, pre_steps)
    full = train(base, lambda p: p, XB, yB, steps)
    build = lora_build(base, rank)
    adapters = train(lora_start(base, rank, seed), build, XB, yB, steps)
    lora = build(adapters)
    rows = {}
    for name, weights in (("pretrained", base), ("full FT", full), (f"LoRA r={rank}", lora)):
        rows[name] = dict(task_B=accuracy(weights, XBt, yBt),
                          probe_A=probe_accuracy(weights, tasks["A"]),
                          cosine=homogeneity(weights, tasks["A"][2])[0],
                          participation=homogeneity(weights, tasks["A"][2])[1])
    flat_full = hessian_spectrum(full, lambda p: p, XB, yB, seed=seed)
    flat_lora = hessian_spectrum(adapters, build, XB, yB, seed=seed)
    flat_at_lora = hessian_spectrum(lora, lambda p: p, XB, yB, seed=seed)
    return rows, {"full FT": flat_full, f"LoRA r={rank}": flat_lora,
                  "all W at LoRA": flat_at_lora}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rank", type=int, default=4)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rows, flat = run(args.rank, args.steps, args.seed)
    print(f"{'network':>12} {'task B acc':>10} {'task A probe':>12} {'mean cos':>9} "
          f"{'particip.':>9}")
    for name, r in rows.items():
        print(f"{name:>12} {r['task_B']:10.3f} {r['probe_A']:12.3f} {r['cosine']:9.3f} "
              f"{r['participation']:9.2f}")
    print(f"\n{'subspace':>12} {'dim':>6} {'top eig':>9} {'trace':>16} {'trace / dim':>11}")
    for name, (top, tr, se, dim) in flat.items():
        print(f"{name:>12} {dim:6d} {top:9.4f} {tr:9.4f} +- {se:5.3f} {tr / dim:11.2e}")
    return rows, flat


if __name__ == "__main__":
    main()
