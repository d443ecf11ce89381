"""Loss barriers between two ReLU MLPs trained on scikit-learn's digits, modulo their symmetry.

Two MLPs 64-h-h-10 (ReLU) are trained from different seeds on ``sklearn.datasets.load_digits``
(bundled with scikit-learn, no download; 1300 training and 497 test images), for widths
h = 16, 32, 64, 128 (width multipliers 1/4, 1/2, 1, 2 of 64). For each pair the script prints
the cross-entropy barriers along the straight path, by both definitions (Ainsworth et al. 2023:
max L - mean end loss; Entezari et al. 2022: max of L - interpolated end loss), on the training
and the test set:

* naive: theta_A to theta_B;
* weight matching: Git Re-Basin's permutation coordinate descent (Ainsworth, Hayase,
  Srinivasa 2023, Algorithm 1), written here on the layer matrices, as the baseline;
* paramgeo permutations: ``paramgeo.quotient.alignment`` over the unit-permutation factor of the
  group ``paramgeo.from_torch`` reads from the model (weight matching on theta);
* paramgeo permutations + rescalings: ``align`` over the whole group (R_{>0})^{2h} x S_h x S_h.

and the median time of the baseline's matching against paramgeo's permutation alignment, with
their ratio, measured in the same run. Usage: python benchmarks/bench_quotient.py [--repeats N]
(about a minute on two cores); ``benchmarks/run.py quotient`` runs the timing rows only.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: benchmarks/run.py runs this module only when named (it trains networks)
HEAVY = True
WIDTHS = (16, 32, 64, 128)


def digits():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    order = np.random.default_rng(0).permutation(len(y))
    X, y = X[order], y[order]
    return (X[:1300], y[:1300]), (X[1300:], y[1300:])


def train(h, seed, X, y, steps=400, adam=True):
    """An MLP 64-h-h-10 from torch's default initialisation (seed ``seed``) after ``steps``
    full-batch steps on the cross-entropy: Adam (lr 3e-3), or with ``adam=False`` plain
    gradient descent (lr 0.5; no optimizer object, whose first step imports for seconds)."""
    import torch

    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(64, h), torch.nn.ReLU(), torch.nn.Linear(h, h),
                              torch.nn.ReLU(), torch.nn.Linear(h, 10)).double()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3) if adam else None
    Xt, yt = torch.tensor(X), torch.tensor(y)
    for _ in range(steps):
        net.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(Xt), yt)
        loss.backward()
        if opt is not None:
            opt.step()
            continue
        with torch.no_grad():
            for q in net.parameters():
                q -= 0.5 * q.grad
    return net


def cross_entropy(y, k=10):
    """ell(logits) = mean_i [logsumexp(z_i) - z_{i, y_i}] on flat logits (N * k)."""
    import autograd.numpy as anp

    from paramgeo.losses import CallableLoss

    onehot = np.eye(k)[y]

    def value(beta):
        Z = anp.reshape(beta, (-1, k))
        top = anp.max(Z, axis=1, keepdims=True)
        lse = anp.log(anp.sum(anp.exp(Z - top), axis=1)) + top[:, 0]
        return anp.mean(lse - anp.sum(Z * onehot, axis=1))

    return CallableLoss(value, m=len(y) * k)


def layers(theta, h):
    """[(W, b)] of the three layers, read from theta in torch's parameter order."""
    shapes = [(h, 64), (h, h), (10, h)]
    out, k = [], 0
    for r, c in shapes:
        W = theta[k:k + r * c].reshape(r, c)
        k += r * c
        out.append((W, theta[k:k + r]))
        k += r
    return out


def weight_matching(theta_a, theta_b, h, max_iter=100):
    """Git Re-Basin weight matching (Ainsworth et al. 2023, Algorithm 1) for an MLP with two
    hidden layers: permutations P1, P2 of the hidden units maximising sum_l <W_l^A, P_l W_l^B
    P_{l-1}^T> + <b_l^A, P_l b_l^B>, one linear assignment per layer with the others fixed,
    until no permutation changes. Returns theta_B permuted."""
    from scipy.optimize import linear_sum_assignment

    (A1, a1), (A2, a2), (A3, a3) = layers(theta_a, h)
    (B1, b1), (B2, b2), (B3, b3) = layers(theta_b, h)
    p1, p2 = np.arange(h), np.arange(h)
    for _ in range(max_iter):
        changed = False
        # hidden layer 1: rows of W1, b1 and columns of W2 (rows already permuted by p2)
        C = A1 @ B1.T + np.outer(a1, b1) + A2.T @ B2[p2]
        new = linear_sum_assignment(C, maximize=True)[1]
        if C[np.arange(h), new].sum() > C[np.arange(h), p1].sum() + 1e-12:
            p1, changed = new, True
        C = A2 @ B2[:, p1].T + np.outer(a2, b2) + A3.T @ B3
        new = linear_sum_assignment(C, maximize=True)[1]
        if C[np.arange(h), new].sum() > C[np.arange(h), p2].sum() + 1e-12:
            p2, changed = new, True
        if not changed:
            break
    parts = [B1[p1], b1[p1], B2[p2][:, p1], b2[p2], B3[:, p2], b3]
    return np.concatenate([p.ravel() for p in parts])


def pair(h, train_set, test_set, steps=400, adam=True):
    """Two MLPs of width h trained from seeds 1 and 2 (``steps`` steps, see :func:`train`): the
    parameterizations on the training and test images, the two cross-entropy losses, the two
    thetas and the indices of the group's unit-permutation factors (the group is read from the
    layers once, on the first ``symmetry()`` call, and shared by every alignment)."""
    import torch

    import paramgeo
    from paramgeo.symmetry import UnitPermutationGroup

    (X, y), (Xt, yt) = train_set, test_set
    nets = [train(h, seed, X, y, steps, adam) for seed in (1, 2)]
    p_train = paramgeo.from_torch(nets[0], torch.tensor(X))
    p_test = paramgeo.from_torch(nets[0], torch.tensor(Xt))
    thetas = [np.concatenate([t.detach().numpy().ravel() for t in n.parameters()])
              for n in nets]
    group = p_train.symmetry()
    perm = [i for i, f in enumerate(group.factors) if isinstance(f, UnitPermutationGroup)]
    return p_train, p_test, cross_entropy(y), cross_entropy(yt), thetas, perm


def barrier_table(repeats=3):
    import torch

    from paramgeo.quotient import align, barrier

    torch.set_num_threads(1)  # a shared machine: threads contend (see benchmarks/run.py)
    train_set, test_set = digits()
    print(f"{'h':>4} {'alignment':<26} {'|A - B|':>8} {'train B_mean':>12} "
          f"{'train B_int':>11} {'test B_mean':>11} {'test B_int':>10}")
    for h in WIDTHS:
        p_train, p_test, L, Lt, (ta, tb), perm = pair(h, train_set, test_set)
        wm = weight_matching(ta, tb, h)
        ours_perm = align(p_train, ta, tb, factors=perm)
        ours_all = align(p_train, ta, tb)
        for label, end in (("naive", tb), ("weight matching (baseline)", wm),
                           ("paramgeo permutations", ours_perm.aligned),
                           ("paramgeo perm + rescaling", ours_all.aligned)):
            b = barrier(p_train, L, ta, end, n_points=21)
            bt = barrier(p_test, Lt, ta, end, n_points=21)
            print(f"{h:>4} {label:<26} {np.linalg.norm(ta - end):8.3f} {b.ainsworth:12.4f} "
                  f"{b.entezari:11.4f} {bt.ainsworth:11.4f} {bt.entezari:10.4f}", flush=True)
        def with_certificate():
            a = align(p_train, ta, tb, factors=perm)
            return a.certificate

        calls = {
            "weight matching": lambda: weight_matching(ta, tb, h),
            "paramgeo align": lambda: align(p_train, ta, tb, factors=perm).aligned,
            "+ certificate": with_certificate,
        }
        times = {k: [] for k in calls}
        for _ in range(repeats):  # interleaved rounds, medians
            for k, fn in calls.items():
                start = time.perf_counter()
                fn()
                times[k].append(time.perf_counter() - start)
        med = {k: statistics.median(v) for k, v in times.items()}
        base = med["weight matching"]
        print(f"{h:>4} time (median of {repeats}): weight matching {base * 1e3:.3f} ms; " +
              "; ".join(f"{k} {med[k] * 1e3:.3f} ms (baseline / it {base / med[k]:.2f}x)"
                        for k in calls if k != "weight matching"), flush=True)


def bench(row, repeats):
    """Timing rows for benchmarks/run.py: paramgeo's permutation alignment against the
    weight-matching baseline on one trained pair per width (the aligned points must agree)."""
    from paramgeo.quotient import align

    train_set, test_set = digits()
    for h in WIDTHS[:2]:
        p_train, _, _, _, (ta, tb), perm = pair(h, train_set, test_set)
        row(f"quotient: align permutations, digits MLP h={h}",
            lambda: align(p_train, ta, tb, factors=perm).aligned,
            lambda: weight_matching(ta, tb, h), repeats)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    barrier_table(parser.parse_args().repeats)
