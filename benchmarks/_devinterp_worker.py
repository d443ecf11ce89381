"""Run devinterp's LLC estimator on reduced-rank-regression data sets (for bench_llc.py).

Executed by the Python of the throwaway devinterp environment, never imported by paramgeo:
``python _devinterp_worker.py IN.npz OUT.json [DRAWS] [LR]``. IN holds X (n, M), Y (n, N) and the ERM
factors W1 (H, M), W2 (N, H) the paramgeo estimate is localized at; devinterp runs the
settings of its own reduced-rank-regression test (F.mse_loss, SGLD lr 6e-5, localization 1,
n beta = n / log n, full batch, 3 chains x 2000 draws, float32) from the same point; LR
replaces the test's SGLD step 6e-5 (the step sweep of bench_llc.py --devinterp-steps).
"""

import json
import math
import sys
import time
import warnings

import numpy as np


def main(src, dst, draws=2000, lr=6e-5):
    import torch
    from datasets import Dataset
    from devinterp.slt.llc import llc

    warnings.filterwarnings("ignore")
    data = np.load(src)
    X = torch.tensor(data["X"], dtype=torch.float32)
    Y = torch.tensor(data["Y"], dtype=torch.float32)
    W1, W2 = data["W1"], data["W2"]
    n = X.shape[0]
    model = torch.nn.Sequential(torch.nn.Linear(W1.shape[1], W1.shape[0], bias=False),
                                torch.nn.Linear(W2.shape[1], W2.shape[0], bias=False))
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor(W1, dtype=torch.float32))
        model[1].weight.copy_(torch.tensor(W2, dtype=torch.float32))
    # devinterp samples "token" sequences with per-token losses (batch, seq - 1): one row
    # holding the indices of all n samples, so a batch of one row is the full batch of the
    # reference test and each token's loss is one sample's squared error
    dataset = Dataset.from_dict({"input_ids": [[0] + list(range(n))]}).with_format("torch")

    def loss_fn(model, input_ids):
        idx = input_ids[0, 1:].long()
        return ((model(X[idx]) - Y[idx]) ** 2).mean(dim=1)[None, :]  # (1, n): F.mse_loss terms

    started, cpu = time.perf_counter(), time.process_time()
    out = llc(model, dataset, {}, lr=float(lr), n_beta=n / math.log(n), loss_fn=loss_fn,
              num_chains=3, num_draws=int(draws), batch_size=1, localization=1.0,
              num_init_loss_batches=1, init_seed=int(data["seed"]), device="cpu")
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    with open(dst, "w") as fh:
        json.dump({"llc": float(out["llc_mean"]), "std": float(out["llc_std"]), "lr": float(lr),
                   "seconds": seconds, "cpu_seconds": cpu}, fh)


if __name__ == "__main__":
    main(*sys.argv[1:])
