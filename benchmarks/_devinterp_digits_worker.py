"""Run devinterp's LLC estimator on a digits model (for bench_llc_data.py --devinterp).

Executed by the Python of the throwaway devinterp environment, never imported by paramgeo:
``python _devinterp_digits_worker.py IN.npz MODEL.pt OUT.json``. MODEL.pt is the trained torch
module (``torch.save`` of the whole module, built from torch's own layers only, so that this
environment loads it without paramgeo), IN holds X (n, 64), y (n,) and the settings (lr,
n_beta, localization, chains, draws, burn, batch_size, seed). devinterp 2 samples "token"
sequences with per-token losses: each row is [0, i] for sample i, so a batch of rows is a
minibatch of samples and each row's one token loss is that sample's cross-entropy (float32,
its SGLD).
"""

import json
import sys
import time
import warnings

import numpy as np


def main(src, module, dst):
    import torch
    from datasets import Dataset
    from devinterp.slt.llc import llc

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    data = np.load(src)
    X = torch.tensor(data["X"], dtype=torch.float32)
    y = torch.tensor(data["y"], dtype=torch.long)
    model = torch.load(module, weights_only=False).float()
    n = X.shape[0]
    dataset = Dataset.from_dict({"input_ids": [[0, i] for i in range(n)]}).with_format("torch")

    def loss_fn(model, input_ids):
        idx = input_ids[:, 1].long()
        return torch.nn.functional.cross_entropy(model(X[idx]), y[idx],
                                                 reduction="none")[:, None]

    started, cpu = time.perf_counter(), time.process_time()
    out = llc(model, dataset, {}, lr=float(data["lr"]), n_beta=float(data["n_beta"]),
              loss_fn=loss_fn, num_chains=int(data["chains"]), num_draws=int(data["draws"]),
              num_burnin_steps=int(data["burn"]), batch_size=int(data["batch_size"]),
              localization=float(data["localization"]), init_seed=int(data["seed"]),
              device="cpu")
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    with open(dst, "w") as fh:
        json.dump({"llc": float(out["llc_mean"]), "std": float(out["llc_std"]),
                   "seconds": seconds, "cpu_seconds": cpu}, fh)


if __name__ == "__main__":
    main(*sys.argv[1:])
