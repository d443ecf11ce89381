"""examples/lora_transformer.py: the per-token probe on a planted representation (separable at
some positions, label-free noise at the others), the homogeneity measures against explicit
pairwise loops, the transformer's blocks against torch's scaled_dot_product_attention and
linear layers, LoRA at B = 0 against the pretrained network, and a short run end to end.

Covers: ``examples/lora_transformer.py``.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

PATH = Path(__file__).resolve().parents[1] / "examples" / "lora_transformer.py"
spec = importlib.util.spec_from_file_location("lora_transformer", PATH)
ex = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ex)


def test_token_probe_on_a_planted_representation():
    rng = np.random.default_rng(0)
    means = 3.0 * np.eye(3, 6)

    def sample(n):
        y = rng.integers(0, 3, n)
        H = rng.standard_normal((n, 4, 6))
        H[:, 0] += means[y]
        H[:, 2] += means[(y + 1) % 3]
        return H, y

    accs = ex.token_probe(*sample(300), *sample(300))
    assert accs.shape == (4,)
    assert accs[0] > 0.9 and accs[2] > 0.9
    assert accs[1] < 0.5 and accs[3] < 0.5


def test_token_homogeneity_against_pairwise_loops():
    rng = np.random.default_rng(1)
    H = rng.standard_normal((5, 4, 3)) + np.array([1.0, 0.5, 0.0])
    cos = lambda a, b: a @ b / (np.linalg.norm(a) * np.linalg.norm(b))  # noqa: E731
    within = np.mean([np.mean([cos(H[s, i], H[s, j]) for i in range(4) for j in range(4)
                               if i != j]) for s in range(5)])
    across = np.mean([np.mean([cos(H[i, t], H[j, t]) for i in range(5) for j in range(5)
                               if i != j]) for t in range(4)])
    assert ex.token_homogeneity(H) == pytest.approx((within, across), abs=1e-12)
    same = np.repeat(rng.standard_normal((5, 1, 3)), 4, axis=1)
    assert ex.token_homogeneity(same)[0] == pytest.approx(1.0, abs=1e-12)


def test_blocks_against_torch_attention():
    p = ex.init(3)
    X = torch.randn(7, ex.TOKENS, 8, generator=torch.Generator().manual_seed(0))
    F = torch.nn.functional
    h = F.linear(X, p["embed"]) + p["pos"]
    for b in range(ex.BLOCKS):
        x = F.layer_norm(h, (ex.D,))
        q, k, v = (F.linear(x, p[f"{n}{b}"]) for n in "qkv")
        h = h + F.linear(F.scaled_dot_product_attention(q, k, v), p[f"o{b}"])
        h = h + F.linear(F.relu(F.linear(F.layer_norm(h, (ex.D,)), p[f"f1{b}"])), p[f"f2{b}"])
    assert torch.allclose(ex.hidden(p, X), h, atol=1e-5)
    assert ex.logits(p, X).shape == (7, ex.CLASSES)


def test_lora_starts_at_the_pretrained_network():
    base = ex.init(1)
    start = ex.lora_start(base, 2)
    built = ex.lora_build(base)(start)
    assert built.keys() == base.keys()
    assert all(torch.equal(built[k], base[k]) for k in base)
    assert len(start) == 1 + 2 * len(ex.ADAPTED) * ex.BLOCKS
    assert start["A_f10"].shape == (2, ex.D) and start["B_f10"].shape == (ex.HIDDEN, 2)


def test_a_short_run():
    rows = ex.run(rank=2, steps=20, seed=0, pre_steps=60)
    assert list(rows) == ["pretrained", "full FT", "full, matched", "LoRA r=2"]
    for r in rows.values():
        assert r["probe"].shape == (ex.TOKENS,)
        assert 0.2 < r["probe"].mean() <= 1.0
        assert -1.0 <= r["across"] <= 1.0 and -1.0 <= r["within"] <= 1.0
    assert rows["full FT"]["task_B"] > rows["pretrained"]["task_B"]


def test_training_stops_at_the_target_loss():
    g = torch.Generator().manual_seed(2)
    X = torch.randn(40, ex.TOKENS, 8, generator=g)
    y = torch.randint(0, ex.CLASSES, (40,), generator=g)
    p = ex.init(0)
    _, first = ex.train(p, lambda q: q, X, y, 1)
    trained, loss = ex.train(p, lambda q: q, X, y, 200, stop_loss=0.5 * first)
    assert loss <= 0.5 * first
    again = torch.nn.functional.cross_entropy(ex.logits(trained, X), y).item()
    assert again == pytest.approx(loss, rel=1e-5)
    assert ex.train(p, lambda q: q, X, y, 5)[1] > 0.5 * first
