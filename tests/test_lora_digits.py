"""examples/lora_digits.py: the Hessian spectrum by Hessian-vector products against the dense
Hessian of a tiny MLP (top eigenvalue, and the Hutchinson trace within its standard error), and
LoRA at B = 0 against the pretrained weights; the tangent basis of the rank-r updates (from the
lora plugin's Jacobian) against the closed-form projector onto {B A' + B' A}, and the
matrix-free restricted Hessian E^T H E against the dense Hessian projected on an independently
built basis {u_i v_j^T : i < r or j < r}.

Covers: ``examples/lora_digits.py``.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

PATH = Path(__file__).resolve().parents[1] / "examples" / "lora_digits.py"
spec = importlib.util.spec_from_file_location("lora_digits", PATH)
ex = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ex)


def test_hessian_spectrum_against_dense():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(40, 6, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (40,), generator=g)
    weights = ex.init(0, widths=(6, 5, 3))
    top, trace, se, dim = ex.hessian_spectrum(weights, lambda p: p, X, y, iters=200, probes=400)
    flat = torch.cat([w.reshape(-1) for w in weights])

    def loss(v):
        a, b = v[:30].reshape(5, 6), v[30:].reshape(3, 5)
        return ex.loss_fn([a, b], X, y)

    H = torch.autograd.functional.hessian(loss, flat).numpy()
    eig = np.linalg.eigvalsh(H)
    assert dim == 45
    assert top == pytest.approx(eig[np.argmax(np.abs(eig))], rel=1e-6)
    assert abs(trace - np.trace(H)) < 4 * se


def test_lora_starts_at_the_pretrained_network():
    base = ex.init(1, widths=(6, 5, 3))
    adapters = ex.lora_start(base, 2)
    built = ex.lora_build(base, 2)(adapters)
    assert all(torch.equal(a, b) for a, b in zip(built, base))
    assert [tuple(a.shape) for a in adapters] == [(2, 6), (5, 2), (2, 5), (3, 2)]


def _closed_form_basis(B, A):
    """{vec(u_i v_j^T) : i < r or j < r}, u, v the full singular bases of B and A^T."""
    r = B.shape[1]
    U = np.linalg.svd(B, full_matrices=True)[0]
    V = np.linalg.svd(A.T, full_matrices=True)[0]
    cols = [np.outer(U[:, i], V[:, j]).ravel() for i in range(B.shape[0])
            for j in range(A.shape[1]) if i < r or j < r]
    return np.array(cols).T


def test_tangent_basis_is_the_projector_onto_BA_plus_BA():
    rng = np.random.default_rng(3)
    B, A = rng.standard_normal((7, 2)), rng.standard_normal((2, 5))
    E = ex.tangent_basis(B, A).numpy()
    assert E.shape == (35, 2 * (7 + 5 - 2))
    assert np.allclose(E.T @ E, np.eye(E.shape[1]), atol=1e-12)
    QB, QA = np.linalg.qr(B)[0], np.linalg.qr(A.T)[0]
    for _ in range(3):
        D = rng.standard_normal((7, 5))
        proj = QB @ QB.T @ D + D @ QA @ QA.T - QB @ QB.T @ D @ QA @ QA.T
        assert np.allclose((E @ (E.T @ D.ravel())).reshape(7, 5), proj, atol=1e-12)
    tangent = B @ rng.standard_normal((2, 5)) + rng.standard_normal((7, 2)) @ A
    assert np.allclose(E @ (E.T @ tangent.ravel()), tangent.ravel(), atol=1e-12)
    with pytest.raises(ValueError, match="rank below r"):
        ex.tangent_basis(np.zeros((7, 2)), A)


def test_restricted_hessian_against_the_dense_projection():
    g = torch.Generator().manual_seed(1)
    X = torch.randn(30, 6, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (30,), generator=g)
    weights = ex.init(2, widths=(6, 5, 3))

    def loss(v):
        return ex.loss_fn([v[:30].reshape(5, 6), v[30:].reshape(3, 5)], X, y)

    H = torch.autograd.functional.hessian(
        loss, torch.cat([w.reshape(-1) for w in weights])).numpy()
    rng = np.random.default_rng(4)
    factors = [(rng.standard_normal((5, 2)), rng.standard_normal((2, 6))),
               (rng.standard_normal((3, 2)), rng.standard_normal((2, 5)))]
    bases = [ex.tangent_basis(B, A) for B, A in factors]
    got = ex.restricted_hessian(weights, bases, X, y, chunk=7).numpy()
    P = np.zeros((45, 18 + 12))
    P[:30, :18], P[30:, 18:] = (_closed_form_basis(B, A) for B, A in factors)
    assert np.allclose(np.linalg.eigvalsh(got), np.linalg.eigvalsh(P.T @ H @ P), atol=1e-10)
    # an arbitrary orthonormal basis: E^T H E entry by entry
    rand = [ex.random_basis(5, 6, 9, g), ex.random_basis(3, 5, 4, g)]
    E = np.zeros((45, 13))
    E[:30, :9], E[30:, 9:] = rand[0].numpy(), rand[1].numpy()
    got = ex.restricted_hessian(weights, rand, X, y).numpy()
    assert np.allclose(got, E.T @ H @ E, atol=1e-12)
    assert np.allclose(E.T @ E, np.eye(13), atol=1e-12)
