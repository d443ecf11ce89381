"""LoRA against full fine-tuning in a tiny transformer: per-token separability and homogeneity.

Each 8 x 8 image of scikit-learn's bundled digits is a sequence of 8 tokens, its rows (8 pixels
each, standardised). A pre-LayerNorm transformer (d_model 32, two blocks, each one attention
head with W_q, W_k, W_v, W_o in R^{32 x 32} and an MLP 32 -> 64 -> 32 with ReLU; token embedding
8 -> 32 and learned position embeddings; mean-pooled readout through a final LayerNorm and a
5-way head) is pretrained on task A (digits 0-4) and fine-tuned on task B (digits 5-9,
relabelled 0-4) for the same number of Adam steps in two ways:

* full fine-tuning: every weight trains;
* LoRA: each of the six matrices of every block becomes W0 + B A with rank r (A ~ N(0, 1/n),
  B = 0, W0 frozen); the embeddings stay frozen; the readout head trains in both runs;

and, as a control for how far each run fits task B, full fine-tuning stopped when its task-B
training loss reaches LoRA's final one ("full, matched").

Measured, beside the pretrained network, on the last block's output (before pooling):

* per-token linear separability of task A: for each token position t, the test accuracy of a
  logistic-regression probe fitted on the position-t hidden vectors of task A's training half
  (the paper's per-token separability); averaged over the 8 positions;
* per-token homogeneity: the mean pairwise cosine similarity across the 8 tokens of a sample
  (averaged over samples) and across samples at one position (averaged over positions).

With ``--robustness``, the robustness of the last block's output on task B's test digits, for
each network (``examples/lora_robustness.py``, in float64): its relative change under Gaussian
noise of relative Frobenius norm eps on every weight tensor (eps = 1e-3, 1e-2, 0.1, 0.3; Monte
Carlo, and linearised: a Hutchinson trace of J^T J, J its Jacobian in the weights, from JVPs),
the largest principal angle between the top-5 PCA subspaces of its token vectors before and
after, the accuracy drop, and the same under Gaussian pixel noise (sigma = 0.1, 0.3, 1).

Usage: python examples/lora_transformer.py [--rank 4] [--steps 400] [--seeds 0 1]
[--robustness]
(about 35 s per seed on one CPU core; 72 s for the two default seeds; --robustness adds
about 15 s a seed)
"""

import argparse
import importlib.util
import math
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression

torch.set_num_threads(1)

D, HIDDEN, BLOCKS, TOKENS, CLASSES = 32, 64, 2, 8, 5
#: the matrices of a block that LoRA adapts, with their shapes (out, in)
ADAPTED = {"q": (D, D), "k": (D, D), "v": (D, D), "o": (D, D), "f1": (HIDDEN, D),
           "f2": (D, HIDDEN)}


def data(seed=0):
    """Tasks A (0-4) and B (5-9 -> 0-4) as token sequences (N, 8, 8), each half train, half
    test: dict task -> (X_train, y_train, X_test, y_test)."""
    X, y = load_digits(return_X_y=True)
    X = (X - X.mean(0)) / (X.std(0) + 1e-8)
    rng = np.random.default_rng(seed)
    out = {}
    for task, keep, shift in (("A", y < 5, 0), ("B", y >= 5, 5)):
        idx = rng.permutation(np.flatnonzero(keep))
        tr, te = idx[: idx.size // 2], idx[idx.size // 2:]
        seq = lambda i: torch.tensor(X[i].reshape(-1, TOKENS, 8), dtype=torch.float32)  # noqa
        out[task] = (seq(tr), torch.tensor(y[tr] - shift), seq(te), torch.tensor(y[te] - shift))
    return out


def init(seed=0):
    """Parameters as a dict name -> tensor (block matrices named 'q0', 'f11', ...)."""
    g = torch.Generator().manual_seed(seed)
    rand = lambda o, i: torch.randn(o, i, generator=g) / math.sqrt(i)  # noqa: E731
    p = {"embed": rand(D, 8), "pos": 0.1 * torch.randn(TOKENS, D, generator=g),
         "head": rand(CLASSES, D)}
    for b in range(BLOCKS):
        for name, (o, i) in ADAPTED.items():
            p[f"{name}{b}"] = rand(o, i)
    return p


def hidden(p, X):
    """The last block's output, (N, 8, d)."""
    h = X @ p["embed"].T + p["pos"]
    norm = lambda x: torch.nn.functional.layer_norm(x, (D,))  # noqa: E731
    for b in range(BLOCKS):
        x = norm(h)
        q, k, v = (x @ p[f"{n}{b}"].T for n in "qkv")
        att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(D), dim=-1)
        h = h + (att @ v) @ p[f"o{b}"].T
        h = h + torch.relu(norm(h) @ p[f"f1{b}"].T) @ p[f"f2{b}"].T
    return h


def readout(p, H):
    """Logits from the last block's output H (N, 8, d): mean-pooled, layer-normed, the head."""
    return torch.nn.functional.layer_norm(H.mean(1), (D,)) @ p["head"].T


def logits(p, X):
    return readout(p, hidden(p, X))


def accuracy(p, X, y):
    with torch.no_grad():
        return float((logits(p, X).argmax(1) == y).float().mean())


def train(trainable, build, X, y, steps, lr=3e-3, stop_loss=None):
    """Adam on the tensors of the dict ``trainable`` of the loss of the network
    ``build(trainable)``, for ``steps`` steps or until the loss is at most ``stop_loss``;
    returns the trained tensors and the last loss."""
    trainable = {k: v.detach().clone().requires_grad_(True) for k, v in trainable.items()}
    opt = torch.optim.Adam(trainable.values(), lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(logits(build(trainable), X), y)
        if stop_loss is not None and loss.item() <= stop_loss:
            break
        loss.backward()
        opt.step()
    return {k: v.detach() for k, v in trainable.items()}, loss.item()


def lora_start(base, rank, seed=0):
    """Adapters A (r x n, N(0, 1/n)) and B = 0 for every adapted matrix, and the head."""
    g = torch.Generator().manual_seed(seed + 1)
    out = {"head": base["head"].clone()}
    for b in range(BLOCKS):
        for name, (o, i) in ADAPTED.items():
            out[f"A_{name}{b}"] = torch.randn(rank, i, generator=g) / math.sqrt(i)
            out[f"B_{name}{b}"] = torch.zeros(o, rank)
    return out


def lora_build(base):
    def build(t):
        p = dict(base, head=t["head"])
        for b in range(BLOCKS):
            for name in ADAPTED:
                key = f"{name}{b}"
                p[key] = base[key] + t[f"B_{key}"] @ t[f"A_{key}"]
        return p
    return build


def token_probe(H_train, y_train, H_test, y_test):
    """Per position t, the test accuracy of a logistic-regression probe on the position-t
    vectors: H_* of shape (N, T, d); returns an array of T accuracies."""
    accs = []
    for t in range(H_train.shape[1]):
        clf = LogisticRegression(max_iter=3000).fit(H_train[:, t], y_train)
        accs.append(clf.score(H_test[:, t], y_test))
    return np.array(accs)


def _mean_offdiag_cosine(U):
    """Mean pairwise cosine of unit vectors along the second-to-last axis, (..., n, d) -> (...)."""
    n = U.shape[-2]
    gram = U @ np.swapaxes(U, -1, -2)
    return (gram.sum((-1, -2)) - np.trace(gram, axis1=-2, axis2=-1)) / (n * (n - 1))


def token_homogeneity(H):
    """(mean pairwise cosine across the tokens of a sample, averaged over samples; mean pairwise
    cosine across samples at one position, averaged over positions) for H of shape (N, T, d)."""
    U = H / np.maximum(np.linalg.norm(H, axis=-1, keepdims=True), 1e-12)
    return (float(_mean_offdiag_cosine(U).mean()),
            float(_mean_offdiag_cosine(np.swapaxes(U, 0, 1)).mean()))


def sibling(name):
    """The module ``name`` beside this file (``lora_robustness``), loaded by path."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent
                                                  / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def robustness(p, X, y, seed=0, **kw):
    """``lora_robustness.robustness`` of the network ``p`` on (X, y), in float64: the features
    are the last block's output (its token vectors are the PCA's rows); every tensor is
    perturbed (the head changes only the accuracy)."""
    p64 = {k: v.double() for k, v in p.items()}
    return sibling("lora_robustness").robustness(hidden, readout, p64, X.double(), y,
                                                 seed=seed, **kw)


def measure(p, tasks, robust=False, seed=0):
    XA, yA, XAt, yAt = tasks["A"]
    with torch.no_grad():
        Htr, Hte = hidden(p, XA).numpy(), hidden(p, XAt).numpy()
    probe = token_probe(Htr, yA.numpy(), Hte, yAt.numpy())
    within, across = token_homogeneity(Hte)
    out = dict(task_B=accuracy(p, *tasks["B"][2:]), probe=probe, within=within, across=across)
    if robust:
        out["robustness"] = robustness(p, *tasks["B"][2:], seed=seed)
    return out


def run(rank=4, steps=400, seed=0, pre_steps=600, robust=False):
    torch.manual_seed(seed)
    tasks = data(seed)
    XA, yA = tasks["A"][:2]
    XB, yB = tasks["B"][:2]
    base = train(init(seed), lambda p: p, XA, yA, pre_steps)[0]
    full = train(base, lambda p: p, XB, yB, steps)[0]
    build = lora_build(base)
    adapters, lora_loss = train(lora_start(base, rank, seed), build, XB, yB, steps)
    matched = train(base, lambda p: p, XB, yB, steps, stop_loss=lora_loss)[0]
    nets = (("pretrained", base), ("full FT", full), ("full, matched", matched),
            (f"LoRA r={rank}", build(adapters)))
    return {name: measure(p, tasks, robust, seed) for name, p in nets}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rank", type=int, default=4)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--robustness", action="store_true",
                    help="also measure the features' robustness to weight and input noise")
    args = ap.parse_args(argv)
    out = {}
    for seed in args.seeds:
        out[seed] = rows = run(args.rank, args.steps, seed, robust=args.robustness)
        print(f"seed {seed}")
        print(f"{'network':>12} {'task B':>7} {'probe mean':>10} "
              f"{'probe min':>9} {'cos tokens':>10} {'cos samples':>11}  probe per position")
        for name, r in rows.items():
            per = " ".join(f"{a:.2f}" for a in r["probe"])
            print(f"{name:>12} {r['task_B']:7.3f} {r['probe'].mean():10.3f} "
                  f"{r['probe'].min():9.3f} {r['within']:10.3f} {r['across']:11.3f}  {per}")
        if args.robustness:
            print("robustness of the last block's output on task B's test digits")
            sibling("lora_robustness").print_tables(
                {name: r["robustness"] for name, r in rows.items()})
    return out


if __name__ == "__main__":
    main()
