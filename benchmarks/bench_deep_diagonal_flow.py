"""deep-diagonal gradient flow at vanishing initialisation (heavy: run it by name,
``python benchmarks/run.py --cpu --repeats 1 deep_diagonal_flow``; about 80 CPU seconds).

Product variant, depth 4, alpha = 1e-6, N = 4 samples, p = 8 coordinates, 2 non-zeros (the
problem of tests/test_deep_diagonal_vanishing.py), integrated by LSODA in the log chart
r = log|theta| and the time t / alpha^(2-L) to the loss 1e-16 (1 + |y|^2 / N):
``exact_jacobian=True`` (the loss Hessian carried to the chart, from the plugin's closed-form
Hessian-vector products) against LSODA's own finite-difference Jacobian, same tolerances.
On the plateaus the active coordinates relax at rates of order alpha^(2-L) = 1e12 in the
rescaled time; target: the exact Jacobian at least 3x faster (ratio >= 3), the two end points
equal to the flows' accuracy (max rel ~1e-8).
"""

import numpy as np

import paramgeo
from paramgeo.losses import LinearMeasurements
from paramgeo.dynamics.trajectory import gradient_flow

HEAVY = True


def bench(row, repeats):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((4, 8))
    y = X @ np.r_[1.0, 1.5, np.zeros(6)]
    alpha, L = 1e-6, 4
    par = paramgeo.get("deep-diagonal", p=8, depth=L)
    loss = LinearMeasurements(X, y)

    def flow(exact):
        def run():
            traj = gradient_flow(par, loss, par.init_at_scale(alpha), 1e30, rtol=1e-10,
                                 atol=1e-12, n_records=40, log_times=True,
                                 stop_loss=1e-16 * (1 + y @ y / len(y)), chart="log",
                                 time_scale=alpha ** (2 - L), exact_jacobian=exact)
            assert traj.success, traj.message
            return traj.final_predictor
        return run

    row("deep-diagonal flow depth 4 alpha=1e-6: exact vs FD Jacobian", flow(True), flow(False),
        max(1, repeats // 15), target=3.0)
