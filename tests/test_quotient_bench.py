"""benchmarks/bench_quotient.py at a small size: paramgeo's permutation alignment of two MLPs
trained on digits equals the weight-matching baseline written in the benchmark, and lowers the
barrier (docs/quotient.md reports the full-size table).

Covers: ``paramgeo.quotient.alignment``, ``paramgeo.quotient.loss_barriers``.
"""

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")


def test_permutation_alignment_matches_weight_matching_on_digits():
    from benchmarks import bench_quotient as bq
    from paramgeo.quotient import align, barrier

    train_set, test_set = bq.digits()
    h = 8
    p, _, L, _, (ta, tb), perm = bq.pair(h, train_set, test_set, steps=60, adam=False)
    ours = align(p, ta, tb, factors=perm)
    assert np.allclose(ours.aligned, bq.weight_matching(ta, tb, h))
    assert ours.invariance_error < 1e-10
    naive = barrier(p, L, ta, tb, n_points=7)
    aligned = barrier(p, L, ta, tb, path="aligned", n_points=7, alignment=ours)
    assert aligned.ainsworth < naive.ainsworth
