"""`make demo` runs examples/demo.py: it must tell its story and write its figure, in seconds.

Covers: ``examples/demo.py``.
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_demo_prints_the_story_and_writes_the_figure(tmp_path):
    out = tmp_path / "demo.png"
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "demo.py"), "--out", str(out)],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, MPLBACKEND="Agg"))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    # rank J = #{i : (u_i, v_i) != 0} for beta = u * v: 30 at a random point, 27 with 3 units off
    assert "rank of J at a random point: 30; with units [0, 1, 2] switched off: 27" in text
    assert "critical (orbit-degenerate, subnetwork)" in text
    assert "quotient dimension n - dim G = 30 = generic rank 30" in text
    assert "30 conserved quantities (u[0]^2 - v[0]^2, ...)" in text
    # every number of step 1's classification is explained where it is first printed
    first = text.index("tol ")
    reading = text[first:text.index("2. symmetry")]
    for word in ("tol (the rank tolerance)", "gap = the last counted over the first dropped",
                 "s_R/s_1 = the R-th over the largest, R = 30", "kernel dim = n - rank",
                 "orbit dim = the dimension", "'h0: removed' = unit 0 has u_0 = v_0 = 0"):
        assert word in reading, word
    assert "minimum-l1 interpolator b_l1" in text
    rows = [line.split() for line in text.splitlines() if line.startswith("    ")
            and line.split()[0] in ("0.001", "10")]
    small, large = (dict(zip(("alpha", "dev", "l1", "l2"), map(float, r))) for r in rows)
    assert small["l1"] < 0.1 < small["l2"] and large["l2"] < 1e-3 < large["l1"]
    assert out.stat().st_size > 50_000 and f"figure written to {out}" in text
