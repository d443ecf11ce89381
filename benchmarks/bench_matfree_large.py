"""The largest rank-drop row (run only when named: ``python benchmarks/run.py --cpu
matfree_large``; minutes of CPU): uut d = 512, r = 16 at a U of rank 15 (n = 8192, a drop of
497 = (r - k)(d - k) beyond the O(16) orbit), the route as chosen against the assembled
operator with LAPACK's eigensolver (locked Lanczos, 4-5 minutes of CPU there, is left out).

A second line puts the chosen route's CPU time beside the floor of a block method that is told
the null space: 2 x drop operator products (apply the operator to a basis of the null space
and to its image) plus the O(n drop^2) orthogonalisation of an n x drop block (one QR), both
measured here. No Krylov method reaches that floor on this operator: its nonzero spectrum
starts at 2 a_15 ~ 1e-4 lambda_max (a_15 the smallest nonzero squared singular value of U,
with multiplicity d - 15), so a polynomial filter that separates 0 from it needs a degree of
hundreds per block vector; the assembled operator (n products and one factorisation) is the
practical floor, and its parts are printed too."""

import time

import numpy as np

import paramgeo

from .bench_matfree import _gram, bench_rank_drops

HEAVY = True


def bench(row, repeats):
    bench_rank_drops(row, repeats, sizes=((512, 16),), lanczos=False, lobpcg=False)
    floors(512, 16, 15)


def floors(d, r, k):
    """Print the chosen route's CPU seconds at uut (d, r) with a U of rank k beside the block
    floor and the assembled floor (see the module docstring)."""
    from scipy.linalg import lapack

    from paramgeo.linalg import matfree

    rng = np.random.default_rng(4)
    p = paramgeo.get("uut", d=d, r=r)
    theta = (rng.standard_normal((d, k)) @ rng.standard_normal((k, r))).ravel()
    drop = (r - k) * (d - k)
    start = time.process_time()
    dec = matfree.certify_rank(p, theta, max_deficiency=d, warn=False)
    chosen = time.process_time() - start
    apply, _, _ = _gram(p, theta)
    x = rng.standard_normal(p.n)
    start = time.process_time()
    for _ in range(20):
        apply(x)
    per_apply = (time.process_time() - start) / 20
    start = time.process_time()
    np.linalg.qr(rng.standard_normal((p.n, drop)))
    qr = time.process_time() - start
    floor = 2 * drop * per_apply + qr
    X = rng.standard_normal((1024, 512))
    A = np.asfortranarray(X @ X.T)
    start = time.process_time()
    lapack.dpstrf(A, tol=-1.0, lower=0, overwrite_a=1)
    factor = (time.process_time() - start) * (p.n / 1024) ** 3
    print(f"uut d={d} r={r} rank U={k} (n={p.n}, drop {drop}): chosen route {chosen:.1f} CPU s, "
          f"rank {dec.rank} (d k - k(k-1)/2 = {d * k - k * (k - 1) // 2}), "
          f"{dec.certificate.matvecs} products; block floor 2 x {drop} products x "
          f"{per_apply * 1e3:.2f} ms + QR {qr:.2f} s = {floor:.1f} s ({chosen / floor:.0f}x "
          f"above); assembled floor {p.n} products = {p.n * per_apply:.1f} s + pivoted "
          f"Cholesky ~{factor:.1f} s = {p.n * per_apply + factor:.1f} s "
          f"({chosen / (p.n * per_apply + factor):.2f}x)", flush=True)
