"""A deep linear network in PyTorch as a plugin file: `paramgeo --plugin
examples/torch_deep_linear.py ...` registers it as ``torch-dln``.

x -> W2 W1 x with widths 3, 2, 2 (bias-free ``Linear`` layers, no activation) on the identity
probe: the predictor is net(I) = (W2 W1)^T, inputs x outputs. The adapter reads the layers as
a deep linear network, so its symmetry group GL(2) and, at a true parameter, Aoyagi's exact
learning coefficient are declared (docs/own-model.md). Writes no files.
"""

import torch

import paramgeo

net = torch.nn.Sequential(torch.nn.Linear(3, 2, bias=False),
                          torch.nn.Linear(2, 2, bias=False))
model = paramgeo.from_torch(net, torch.eye(3), name="torch-dln")
