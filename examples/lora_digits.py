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
  end point the Hessian in all the weights W, the full space around the same network;
* flatness like for like: the weight-space Hessian of the task-B loss restricted, with an
  orthonormal basis, to the tangent space T = {B A' + B' A} of the rank-r updates at each
  layer's (B, A) (dimension r(m + n - r) per layer; the image of the ``lora`` plugin's
  Jacobian), its exact top eigenvalue, trace and trace per dimension, beside a random subspace
  of the same dimensions and all the weights; at LoRA's end point and at full fine-tuning's,
  the latter on the tangent space of the top-r SVD of each W_full - W0 (B = U_r S_r, A = V_r^T).

With ``--robustness``, the robustness of the last hidden layer on task B's test digits, for
each network (``examples/lora_robustness.py``): its relative change under Gaussian weight noise
of relative Frobenius norm eps in every layer (eps = 1e-3, 1e-2, 0.1, 0.3; Monte Carlo, and
linearised: a Hutchinson trace of J^T J, J its Jacobian in the weights, from JVPs), the largest
principal angle
between the top-5 PCA subspaces before and after, the accuracy drop, and the same under
Gaussian pixel noise (sigma = 0.1, 0.3, 1 standard deviations).

Claims that need vision-language models and benchmarks (LoRA alignment beating full alignment,
the shift from hallucinatory to conservative answers, 100 configurations over three operator
families) are out of reach here.

Usage: python examples/lora_digits.py [--rank 4] [--steps 400] [--seed 0] [--robustness]
(about 45 s on one CPU core; --robustness adds about 5 s)
"""

import argparse
import importlib.util
from pathlib import Path

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


def tangent_basis(B, A):
    """Orthonormal basis (m n x r(m + n - r), columns row-major vec(dW)) of the tangent space
    {B A' + B' A} of the rank-r matrices at B A: the left singular vectors of the ``lora``
    plugin's Jacobian at (B, A) (whose kernel is the r^2-dimensional GL(r) orbit)."""
    from paramgeo import get_class

    B, A = np.asarray(B, float), np.asarray(A, float)
    (m, r), n = B.shape, A.shape[1]
    p = get_class("lora")(r=r, W0=np.zeros((m, n)))
    U, s, _ = np.linalg.svd(p.jacobian(p.point(B, A)), full_matrices=False)
    k = r * (m + n - r)
    if s[k - 1] <= 1e-9 * s[0]:
        raise ValueError("B A has rank below r: the tangent space is not r(m + n - r)-dimensional")
    return torch.tensor(U[:, :k])


def random_basis(m, n, k, gen):
    """Orthonormal basis of a uniformly random k-dimensional subspace of the m x n matrices."""
    return torch.linalg.qr(torch.randn(m * n, k, generator=gen, dtype=torch.float64))[0]


def restricted_hessian(weights, bases, X, y, chunk=256):
    """E^T H E, H the Hessian of the loss in the weights, E block-diagonal with one orthonormal
    basis per layer (``bases[k]`` of shape (m n, k_k)): matrix-free, from batched
    Hessian-vector products (torch.func.vmap of the JVP of the gradient), H never formed."""
    sizes = [E.shape[1] for E in bases]
    offsets = np.cumsum([0] + sizes)
    grad = torch.func.grad(lambda *q: loss_fn(list(q), X, y), argnums=tuple(range(len(bases))))

    def hvp(*vs):
        return torch.func.jvp(grad, tuple(weights), vs)[1]

    K = offsets[-1]
    eye = torch.eye(K, dtype=torch.float64)
    H = torch.empty(K, K, dtype=torch.float64)
    for i in range(0, K, chunk):
        C = eye[i:i + chunk]
        vs = [(C[:, o:o + k] @ E.T).reshape(len(C), *W.shape)
              for E, W, o, k in zip(bases, weights, offsets, sizes)]
        out = torch.func.vmap(hvp)(*vs)
        H[i:i + chunk] = torch.cat([h.reshape(len(C), -1) @ E for h, E in zip(out, bases)], 1)
    return 0.5 * (H + H.T)


def subspace_flatness(weights, factors, X, y, seed=0):
    """At the network ``weights`` with per-layer rank-r factors (B, A): (top eigenvalue, trace,
    dimension) of the task-B Hessian on the tangent space of the rank-r updates, on a random
    subspace of the same per-layer dimensions, and (power iteration, Hutchinson) in all the
    weights, whose trace comes with its standard error."""
    tangent = [tangent_basis(B, A) for B, A in factors]
    g = torch.Generator().manual_seed(seed + 7)
    rand = [random_basis(*W.shape, E.shape[1], g) for W, E in zip(weights, tangent)]
    out = {}
    for name, bases in (("rank-r tangent", tangent), ("random, same dim", rand)):
        eig = np.linalg.eigvalsh(restricted_hessian(weights, bases, X, y).numpy())
        out[name] = (float(eig[-1]), float(eig.sum()), 0.0, eig.size)
    out["all weights"] = hessian_spectrum(weights, lambda p: p, X, y, seed=seed)
    return out


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


def sibling(name):
    """The module ``name`` beside this file (``lora_robustness``), loaded by path."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent
                                                  / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def robustness(weights, X, y, seed=0, **kw):
    """``lora_robustness.robustness`` of the MLP ``weights`` on (X, y): the features are the
    last hidden layer, every layer is perturbed (the output layer changes only the accuracy)."""
    rob = sibling("lora_robustness")
    params = dict(enumerate(weights))
    as_list = lambda p: [p[i] for i in range(len(p))]  # noqa: E731
    return rob.robustness(lambda p, Z: hidden(as_list(p), Z), lambda p, H: H @ p[len(p) - 1].T,
                          params, X, y, seed=seed, **kw)


def run(rank=4, steps=400, seed=0, pre_steps=600, robust=False):
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
        if robust:
            rows[name]["robustness"] = robustness(weights, XBt, yBt, seed)
    flat_full = hessian_spectrum(full, lambda p: p, XB, yB, seed=seed)
    flat_lora = hessian_spectrum(adapters, build, XB, yB, seed=seed)
    flat_at_lora = hessian_spectrum(lora, lambda p: p, XB, yB, seed=seed)
    flat = {"full FT": flat_full, f"LoRA r={rank}": flat_lora, "all W at LoRA": flat_at_lora}
    svds = [torch.linalg.svd(W - W0) for W, W0 in zip(full, base)]
    points = {"LoRA": subspace_flatness(
                  lora, [(adapters[2 * k + 1].numpy(), adapters[2 * k].numpy())
                         for k in range(len(base))], XB, yB, seed),
              "full FT": subspace_flatness(
                  full, [((U[:, :rank] * s[:rank]).numpy(), Vh[:rank].numpy())
                         for U, s, Vh in svds], XB, yB, seed)}
    return rows, flat, points


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rank", type=int, default=4)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--robustness", action="store_true",
                    help="also measure the features' robustness to weight and input noise")
    args = ap.parse_args(argv)
    rows, flat, points = run(args.rank, args.steps, args.seed, robust=args.robustness)
    print(f"{'network':>12} {'task B acc':>10} {'task A probe':>12} {'mean cos':>9} "
          f"{'particip.':>9}")
    for name, r in rows.items():
        print(f"{name:>12} {r['task_B']:10.3f} {r['probe_A']:12.3f} {r['cosine']:9.3f} "
              f"{r['participation']:9.2f}")
    print(f"\n{'subspace':>12} {'dim':>6} {'top eig':>9} {'trace':>16} {'trace / dim':>11}")
    for name, (top, tr, se, dim) in flat.items():
        print(f"{name:>12} {dim:6d} {top:9.4f} {tr:9.4f} +- {se:5.3f} {tr / dim:11.2e}")
    print(f"\n{'end point':>9} {'subspace (weight space)':>24} {'dim':>6} {'top eig':>9} "
          f"{'trace':>16} {'trace / dim':>11}")
    for point, table in points.items():
        for name, (top, tr, se, dim) in table.items():
            err = f"+- {se:5.3f}" if se else "(exact)"
            print(f"{point:>9} {name:>24} {dim:6d} {top:9.4f} {tr:9.4f} {err:>8} "
                  f"{tr / dim:11.2e}")
    if args.robustness:
        print("\nrobustness of the last hidden layer on task B's test digits")
        sibling("lora_robustness").print_tables(
            {name: r["robustness"] for name, r in rows.items()})
    return rows, flat, points


if __name__ == "__main__":
    main()
