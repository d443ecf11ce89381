"""Perturbation robustness of a network's learned features, for the LoRA examples.

Shared by ``examples/lora_digits.py`` and ``examples/lora_transformer.py`` (their
``--robustness`` flag), which load it by path; it is not a script. A network is a dict of
weight tensors ``params`` and a feature map ``feature(params, X)``, a tensor (N, ..., d) (the
last hidden layer; its rows of the last axis are the feature vectors), and a readout
``readout(params, H)`` to logits. Measured:

* weight perturbations: each tensor W_k moves by delta_k = eps ||W_k||_F G_k / ||G_k||_F
  (G_k i.i.d. Gaussian: a uniformly random direction at relative Frobenius norm eps); over
  ``draws`` draws, the relative change of the features
  E ||h(W + delta) - h(W)||^2 / ||h(W)||^2 (norms over the whole set X), reported divided by
  eps^2, with its standard error; the largest principal angle between the top-k PCA subspace
  of the feature vectors before and after; and the accuracy drop;
* the linearised route: for small eps the relative change is eps^2 S with
  S = sum_k (||W_k||_F^2 / n_k) ||J_k||_F^2 / ||h(W)||^2 (J_k the Jacobian of h in W_k, n_k its
  size: E[u u^T] = I / n_k for u uniform on the sphere), estimated by Hutchinson, E ||J z||^2
  over Rademacher z scaled by ||W_k||_F / sqrt(n_k) on tensor k, one JVP a probe;
* input perturbations: X + sigma N(0, 1) (the inputs are standardised, so sigma is in pixel
  standard deviations): the relative change of h, the largest principal angle of the top-k
  subspace and the accuracy drop.
"""

import numpy as np
import torch


def pca_basis(H, k):
    """Orthonormal basis (d x k) of the top-k principal subspace of the feature vectors of H
    (N, ..., d), centred."""
    F = H.reshape(-1, H.shape[-1])
    F = F - F.mean(0)
    return torch.linalg.svd(F, full_matrices=False)[2][:k].T


def pca_gap(H, k):
    """lambda_k / lambda_{k+1} of the feature vectors' covariance (the eigengap the subspace's
    stability rests on)."""
    F = H.reshape(-1, H.shape[-1])
    s = torch.linalg.svdvals(F - F.mean(0))
    return float(s[k - 1] ** 2 / s[k] ** 2)


def principal_angles(U, V):
    """Principal angles (radians, largest first) between the column spans of the orthonormal
    U and V (cosines: the singular values of U^T V)."""
    cos = torch.linalg.svdvals(U.T @ V).clamp(-1.0, 1.0)
    return torch.sort(torch.arccos(cos), descending=True)[0]


def relative_perturbation(params, names, eps, gen):
    """``params`` with each tensor of ``names`` moved by eps ||W||_F times a uniformly random
    unit direction (Frobenius)."""
    out = dict(params)
    for name in names:
        W = params[name]
        G = torch.randn(W.shape, generator=gen, dtype=W.dtype)
        out[name] = W + eps * W.norm() * G / G.norm()
    return out


def linearised_sensitivity(feature, params, names, X, probes=64, seed=0):
    """(S, standard error): Hutchinson's estimate of
    sum_k (||W_k||^2 / n_k) ||J_k||_F^2 / ||h(W)||^2 from JVPs of ``feature`` in the tensors
    ``names`` along scaled Rademacher probes."""
    gen = torch.Generator().manual_seed(seed)
    primals = tuple(params[n] for n in names)

    def f(*ts):
        return feature({**params, **dict(zip(names, ts))}, X)

    H = f(*primals)
    samples = []
    for _ in range(probes):
        tangents = tuple((torch.randint(0, 2, W.shape, generator=gen).to(W.dtype) * 2 - 1)
                         * W.norm() / W.numel() ** 0.5 for W in primals)
        samples.append(float(torch.func.jvp(f, primals, tangents)[1].pow(2).sum()))
    samples = np.array(samples) / float(H.pow(2).sum())
    return float(samples.mean()), float(samples.std(ddof=1) / np.sqrt(probes))


def _accuracy(logits, y):
    return float((logits.argmax(1) == y).double().mean())


def robustness(feature, readout, params, X, y, names=None, eps=(1e-3, 1e-2, 1e-1, 0.3),
               sigmas=(0.1, 0.3, 1.0), draws=64, input_draws=16, probes=64, k=5,
               seed=0):
    """The measurements of the module docstring at the network ``params`` on the data (X, y),
    perturbing the tensors ``names`` (default all), ``draws`` weight perturbations per eps
    and ``input_draws`` noise draws per sigma: a dict with ``linear`` (S, standard
    error), ``gap`` (lambda_k / lambda_{k+1}), ``weights`` {eps: dict(sens, se, angle,
    acc_drop)} (sens = relative change / eps^2, angle in degrees) and ``inputs``
    {sigma: dict(change, angle, acc_drop)}."""
    names = list(params) if names is None else list(names)
    with torch.no_grad():
        H = feature(params, X)
        norm2 = float(H.pow(2).sum())
        U = pca_basis(H, k)
        acc = _accuracy(readout(params, H), y)

        def effect(q, Hp):
            return (float((Hp - H).pow(2).sum()) / norm2,
                    float(principal_angles(U, pca_basis(Hp, k))[0]) * 180 / np.pi,
                    acc - _accuracy(readout(q, Hp), y))

        weights = {}
        for e in eps:
            # the same directions at every eps: the sizes differ only by the nonlinearity
            gen = torch.Generator().manual_seed(seed)
            rows = []
            for _ in range(draws):
                q = relative_perturbation(params, names, e, gen)
                rows.append(effect(q, feature(q, X)))
            rows = np.array(rows)
            weights[e] = dict(sens=rows[:, 0].mean() / e ** 2,
                              se=rows[:, 0].std(ddof=1) / np.sqrt(draws) / e ** 2,
                              angle=rows[:, 1].mean(), acc_drop=rows[:, 2].mean())
        inputs = {}
        gen = torch.Generator().manual_seed(seed + 1)
        for s in sigmas:
            rows = []
            for _ in range(input_draws):
                Xp = X + s * torch.randn(X.shape, generator=gen, dtype=X.dtype)
                rows.append(effect(params, feature(params, Xp)))
            rows = np.array(rows)
            inputs[s] = dict(change=rows[:, 0].mean(), angle=rows[:, 1].mean(),
                             acc_drop=rows[:, 2].mean())
    return dict(linear=linearised_sensitivity(feature, params, names, X, probes, seed),
                gap=pca_gap(H, k), weights=weights, inputs=inputs)


def print_tables(results, eps=None, sigmas=None):
    """Print the weight and input tables of {network name: robustness(...)}."""
    first = next(iter(results.values()))
    eps = list(first["weights"]) if eps is None else eps
    sigmas = list(first["inputs"]) if sigmas is None else sigmas
    print(f"{'network':>14} {'linear S':>14} " + " ".join(f"{'S at ' + f'{e:g}':>13}"
                                                        for e in eps)
          + " " + " ".join(f"{'angle ' + f'{e:g}':>11}" for e in eps)
          + " " + " ".join(f"{'acc drop ' + f'{e:g}':>13}" for e in eps) + f" {'gap':>6}")
    for name, r in results.items():
        w = r["weights"]
        print(f"{name:>14} {r['linear'][0]:7.3f}+-{r['linear'][1]:5.3f} "
              + " ".join(f"{w[e]['sens']:7.3f}+-{w[e]['se']:5.3f}" for e in eps) + " "
              + " ".join(f"{w[e]['angle']:11.3f}" for e in eps) + " "
              + " ".join(f"{w[e]['acc_drop']:13.4f}" for e in eps) + f" {r['gap']:6.2f}")
    print(f"\n{'network':>14} " + " ".join(f"{'change ' + f'{s:g}':>11}" for s in sigmas)
          + " " + " ".join(f"{'angle ' + f'{s:g}':>10}" for s in sigmas)
          + " " + " ".join(f"{'acc drop ' + f'{s:g}':>12}" for s in sigmas))
    for name, r in results.items():
        i = r["inputs"]
        print(f"{name:>14} " + " ".join(f"{i[s]['change']:11.4f}" for s in sigmas) + " "
              + " ".join(f"{i[s]['angle']:10.2f}" for s in sigmas) + " "
              + " ".join(f"{i[s]['acc_drop']:12.4f}" for s in sigmas))
