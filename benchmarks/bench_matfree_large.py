"""The largest rank-drop row (run only when named: ``python benchmarks/run.py --cpu
matfree_large``; minutes of CPU): uut d = 512, r = 16 at a U of rank 15 (n = 8192, a drop of
497 = (r - k)(d - k) beyond the O(16) orbit), the route as chosen against the assembled
operator with LAPACK's eigensolver (locked Lanczos, 4-5 minutes of CPU there, is left out)."""

from .bench_matfree import bench_rank_drops

HEAVY = True


def bench(row, repeats):
    bench_rank_drops(row, repeats, sizes=((512, 16),), lanczos=False, lobpcg=False)
