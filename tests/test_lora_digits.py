"""examples/lora_digits.py: the Hessian spectrum by Hessian-vector products against the dense
Hessian of a tiny MLP (top eigenvalue, and the Hutchinson trace within its standard error), and
LoRA at B = 0 against the pretrained weights.

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
